"""predicate_noun.v1: triplets from Open Images relationships, counter-balanced pairs, eval_set export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS
from foilforge.foilers.predicate_noun import PredicateNoun, article, eval_set, write_eval_set
from foilforge.metrics import pair_accuracy
from tests.conftest import shared_path

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "openimages"
BOX = [0.05, 0.45, 0.10, 0.95]
OTHER_BOX = [0.52, 0.95, 0.08, 0.92]


def openimages_samples(root: Path = SAMPLE) -> list[dict]:
    """The ingest output shape for Open Images (one sample per image with >= 1 relationship), read from the CSVs."""
    names = dict(csv.reader(open(root / "class-descriptions-boxable.csv", encoding="utf-8")))
    flag = lambda v: v == "1"  # noqa: E731
    boxes, rels = {}, {}
    for row in csv.DictReader(open(root / "validation-annotations-bbox.csv", encoding="utf-8")):
        boxes.setdefault(row["ImageID"], []).append({
            "label": row["LabelName"], "name": names.get(row["LabelName"], ""),
            **{k: float(row[c]) for k, c in (("xmin", "XMin"), ("xmax", "XMax"), ("ymin", "YMin"), ("ymax", "YMax"))},
            "is_group_of": flag(row["IsGroupOf"]), "is_depiction": flag(row["IsDepiction"]),
            "is_occluded": flag(row["IsOccluded"]), "is_truncated": flag(row["IsTruncated"])})
    for row in csv.DictReader(open(root / "validation-annotations-vrd.csv", encoding="utf-8")):
        rels.setdefault(row["ImageID"], []).append({
            "subject": row["LabelName1"], "subject_name": names.get(row["LabelName1"], ""),
            "object": row["LabelName2"], "object_name": names.get(row["LabelName2"], ""),
            "predicate": row["RelationshipLabel"],
            "subject_box": [float(row[c]) for c in ("XMin1", "XMax1", "YMin1", "YMax1")],
            "object_box": [float(row[c]) for c in ("XMin2", "XMax2", "YMin2", "YMax2")]})
    return [{"id": f"openimages:{image}", "source": "openimages", "dataset": "openimages_v6",
             "original_split": "validation", "dataset_idx": image, "image_file": f"{image}.jpg",
             "boxes": boxes.get(image, []), "relationships": rels[image]} for image in sorted(rels)]


def image(image_id: str, *rels) -> dict:
    """A hand-made sample; rels are (subject, box, predicate, object) with display names."""
    return {"id": f"openimages:{image_id}", "source": "openimages", "dataset": "openimages_v6", "original_split": "validation",
            "dataset_idx": image_id, "image_file": f"{image_id}.jpg", "boxes": [],
            "relationships": [{"subject": f"/m/{s}", "subject_name": s, "object": f"/m/{o}", "object_name": o,
                               "predicate": p, "subject_box": list(b), "object_box": list(b)} for s, b, p, o in rels]}


@pytest.fixture(scope="module")
def sample_records():
    return PredicateNoun(min_label_count=1).run(openimages_samples(), seed=0, instrument="predicate_noun")


def test_registered_and_rejects_unknown_args():
    assert FOILERS.get("predicate_noun.v1") is PredicateNoun
    with pytest.raises(ConfigError, match="unknown argument"):
        FOILERS.build("predicate_noun.v1", {"min_box_fracton": 0.2})


def test_exact_triplets_for_a_counter_balanced_image_pair():
    first = image("i1", ("Man", BOX, "wears", "Sunglasses"), ("Woman", OTHER_BOX, "holds", "Bottle"))
    second = image("i2", ("Man", BOX, "holds", "Bottle"), ("Woman", OTHER_BOX, "wears", "Glasses"))
    records = PredicateNoun(min_label_count=1).run([first, second], seed=0)
    got = sorted((r["img_filename"], r["pos"], r["caption"], r["foil"], r["word_target"], r["word_distractor"]) for r in records)
    assert got == [
        ("i1.jpg", "object", "a man is wearing glasses", "a man is holding a bottle", "Glasses", "Bottle"),
        ("i1.jpg", "object", "a woman is holding a bottle", "a woman is wearing glasses", "Bottle", "Glasses"),
        ("i1.jpg", "subject", "a man is wearing glasses", "a woman is wearing glasses", "Man", "Woman"),
        ("i1.jpg", "subject", "a woman is holding a bottle", "a man is holding a bottle", "Woman", "Man"),
        ("i2.jpg", "object", "a man is holding a bottle", "a man is wearing glasses", "Bottle", "Glasses"),
        ("i2.jpg", "object", "a woman is wearing glasses", "a woman is holding a bottle", "Glasses", "Bottle"),
        ("i2.jpg", "subject", "a man is holding a bottle", "a woman is holding a bottle", "Man", "Woman"),
        ("i2.jpg", "subject", "a woman is wearing glasses", "a man is wearing glasses", "Woman", "Man"),
    ]
    # Sunglasses is in the paper's Glasses synonym group, so the relationship is named by the group
    target = next(r for r in records if r["img_filename"] == "i1.jpg" and r["caption"] == "a man is wearing glasses")
    assert target["relationship_target"] == {"id": "i1:0", "Label1": "Man", "label": "wears", "Label2": "Glasses",
                                             "bounding_box": [0.05, 0.1, 0.4, 0.85]}
    assert target["sentence_target_alt"] == "the man wears glasses"
    assert target["sentence_distractor_alt"] == "the man holds a bottle"


def test_simple_present_template_variant_and_period():
    first = image("i1", ("Woman", BOX, "is", "Sit"), ("Man", OTHER_BOX, "is", "Stand"))
    second = image("i2", ("Woman", BOX, "is", "Stand"), ("Man", OTHER_BOX, "is", "Sit"))
    records = PredicateNoun(min_label_count=1, template="simple", final_period=True).run([first, second])
    pairs = {(r["caption"], r["foil"]) for r in records if r["img_filename"] == "i1.jpg"}
    assert ("the woman sits.", "the woman stands.") in pairs
    alt = next(r for r in records if r["caption"] == "the woman sits." and r["pos"] == "object")
    assert alt["sentence_target_alt"] == "a woman is sitting."


def test_a_true_distractor_is_never_used():
    # the same man wears glasses and holds a bottle: "a man is holding a bottle" is true here
    both = image("i3", ("Man", BOX, "wears", "Glasses"), ("Man", BOX, "holds", "Bottle"), ("Woman", OTHER_BOX, "holds", "Bottle"))
    foiler = PredicateNoun(min_label_count=1)
    foiler._canonical = foiler._canonical_map()
    triplets = foiler.triplets(both, foiler.label_counts([both]))
    assert ("object", "a man is wearing glasses", "a man is holding a bottle") not in triplets
    assert ("subject", "a woman is holding a bottle", "a man is holding a bottle") not in triplets
    assert ("subject", "a man is wearing glasses", "a woman is wearing glasses") in triplets


def test_sample_data_gives_counter_balanced_pairs(sample_records):
    exported = eval_set(sample_records)
    assert len(exported) // 2 >= 10
    for k in range(0, len(exported), 2):
        a, b = exported[k], exported[k + 1]
        assert (a["id"], b["id"]) == (k, k + 1)
        # counter-balance: (I1, S1, S2) is matched by (I2, S2, S1) on a different image
        assert (a["sentence_target"], a["sentence_distractor"]) == (b["sentence_distractor"], b["sentence_target"])
        assert a["img_filename"] != b["img_filename"]
        assert a["pos"] == b["pos"]
        assert (a["sentence_target_alt"], a["sentence_distractor_alt"]) == (b["sentence_distractor_alt"], b["sentence_target_alt"])


def test_sample_box_rules_and_unpaired_triplets(sample_records):
    images = {r["img_filename"] for r in sample_records}
    assert "8c9d1e3f5b7d0fc8.jpg" not in images  # distractor box narrower than 20% of the image
    assert "9d0e2f4a6c8e1ad9.jpg" not in images  # box areas differ by more than a factor 2
    assert "ae1f3a5b7d9f2bea.jpg" not in images  # one person only
    assert "bf2a4b6c8e0a3cfb.jpg" not in images  # triplets with no counter-example
    assert len(images) == 8
    assert all(r["open_images_split"] == "validation" for r in sample_records)


def test_label_floor_default_is_the_papers_100():
    assert PredicateNoun().min_label_count == 100
    assert PredicateNoun().run(openimages_samples(), seed=0) == []  # no label reaches 100 in the small sample


def test_same_seed_same_output_and_input_order_does_not_matter():
    samples = openimages_samples()
    a = PredicateNoun(min_label_count=1).run(samples, seed=3)
    b = PredicateNoun(min_label_count=1).run(list(reversed(samples)), seed=3)
    assert a == b


def test_export_has_the_released_fields(tmp_path, sample_records):
    released = json.loads(shared_path("data", "real", "predicate-noun", "eval_set.json").read_text())
    path = tmp_path / "eval_set.json"
    count = write_eval_set(sample_records, path)
    ours = json.loads(path.read_text())
    assert count == len(ours) == len(sample_records)
    assert all(set(entry) == set(released[0]) for entry in ours)
    assert set(ours[0]["relationship_target"]) == set(released[0]["relationship_target"])
    assert [e["id"] for e in ours] == list(range(len(ours)))


def test_released_eval_set_pairing_holds_and_pair_accuracy():
    released = json.loads(shared_path("data", "real", "predicate-noun", "eval_set.json").read_text())
    for k in range(0, len(released), 2):
        assert released[k]["sentence_target"] == released[k + 1]["sentence_distractor"]
    # hand-computed, in eval-set order (2k, 2k+1 = a pair): pairs (T,T) (T,F) (F,F) -> 1 of 3, with the one
    # pair_accuracy the evaluate stage uses (foilforge.metrics)
    correct = [True, True, True, False, False, False]
    result = pair_accuracy((index // 2, ok) for index, ok in enumerate(correct))
    assert result == {"n_pairs": 3, "pair_accuracy": pytest.approx(1 / 3)}


def test_bad_input_names_record_and_field():
    bad = image("i9", ("Man", BOX, "wears", "Glasses"))
    bad["relationships"][0]["subject_box"] = [0.1, 0.2]
    with pytest.raises(InputError) as err:
        PredicateNoun().check_sample(bad, "oi.jsonl", bad["id"])
    assert str(err.value) == ("oi.jsonl, record openimages:i9, field 'relationships[0].subject_box': "
                              "relationship 0 needs [xmin, xmax, ymin, ymax], got [0.1, 0.2]")


def test_bad_template_is_a_config_error_at_build_time():
    from foilforge.foiler import FOILERS

    with pytest.raises(ConfigError, match=r"^params.yaml instruments.pn.args \(foiler predicate_noun.v1\): "
                                          r"template must be one of progressive, simple, got 'past'$"):
        FOILERS.build("predicate_noun.v1", {"template": "past"}, where="params.yaml instruments.pn.args")


def test_article_by_sound_not_by_letter():
    # the first letter says "a hourglass" and "an unicycle"; inflect knows how they sound
    assert article("hourglass") == "an"
    assert article("unicycle") == "a"
    assert article("apple") == "an" and article("camera") == "a"
    noun = PredicateNoun(verb_forms={"holds": ["holding", "holds"]})
    assert noun.phrase("holds", "Hourglass") == ("holding an hourglass", "holds an hourglass")
    assert noun.phrase("holds", "Unicycle") == ("holding a unicycle", "holds a unicycle")
