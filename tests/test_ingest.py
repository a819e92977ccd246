"""`foilforge ingest` (pipeline/stages/ingest.py): real files, hand-checked records, every params.yaml source, the CLI.

Bad input and config errors are in tests/test_ingest_errors.py.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS
from foilforge.io import iter_jsonl
from foilforge.params import load_params
from foilforge.pipeline.sources.base import READERS
from foilforge.pipeline.sources.openimages import read_class_names
from foilforge.pipeline.stages import cli
from foilforge.pipeline.stages.ingest import ingest, read_source
from foilforge.records import SOURCE_FIELDS
from tests.conftest import ROOT, shared_path

REPO_PARAMS = load_params(ROOT / "params.yaml")
COMMON = ("id", "source", *SOURCE_FIELDS)


def source(name: str, fmt: str, root, files: dict, **extra) -> dict:
    """A params dict with one source."""
    return {"sources": {name: {"format": fmt, "root": str(root), "files": files, **extra}}}


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# ---------------------------------------------------------------- real data

@pytest.fixture(scope="module")
def coco_real():
    path = shared_path("data", "real", "coco", "captions_val2017.json")
    params = source("coco", "coco", path.parent, {"captions": path.name}, split="val")
    return {s["dataset_idx"]: s for s in read_source(params, "coco")}


def test_coco_val2017_counts(coco_real):
    assert len(coco_real) == 25_014
    assert len({s["image_file"] for s in coco_real.values()}) == 5_000
    assert len({s["image_id"] for s in coco_real.values()}) == 5_000


def test_coco_hand_checked_annotation(coco_real):
    # the first annotation of captions_val2017.json: {"image_id": 179765, "id": 38, "caption": "A black Honda ..."}
    assert coco_real[38] == {
        "id": "coco:38", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 38,
        "image_file": "000000179765.jpg", "caption": "A black Honda motorcycle parked in front of a garage.",
        "image_id": 179765,
    }
    # VALSE plurals: key plurals:coco2017:308510 -> image 000000291619.jpg and this caption
    assert coco_real[308510]["image_file"] == "000000291619.jpg"
    assert coco_real[308510]["caption"] == "Two young men playing frisbee at night on a sports field"
    # annotation 534979 ends in a stray space in the file; VALSE's orig_caption has none, nor does the sample
    assert coco_real[534979]["caption"] == "The woman is sitting at the table and eating pizza."


@pytest.mark.parametrize("instrument", ["plurals", "relations"])
def test_coco_samples_match_valse_source_fields(coco_real, instrument):
    released = json.loads(shared_path("data", "valse-dev", f"{instrument}.json").read_text(encoding="utf-8"))
    for key, record in released.items():
        sample = coco_real[record["dataset_idx"]]
        assert (sample["image_file"], sample["original_split"]) == (record["image_file"], record["original_split"]), key
    assert {r["dataset"] for r in released.values()} == {"coco2017" if instrument == "plurals" else "coco_2017"}


def test_coco_file_name_gives_split_when_params_has_none():
    path = shared_path("data", "real", "coco", "captions_val2017.json")
    samples = read_source(source("c", "coco", path.parent, {"captions": path.name}, dataset="coco_2017"), "c")
    assert {(s["original_split"], s["dataset"]) for s in samples} == {("val", "coco_2017")}


def test_openimages_class_descriptions_load():
    path = shared_path("data", "real", "openimages", "class-descriptions-boxable.csv")
    names = read_class_names(path)
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    assert len(names) == len(rows) == 601
    assert names["/m/04yx4"] == "Man" and names["/m/01g317"] == "Person" and names["/m/0zvk5"] == "Helmet"
    assert all(not name.endswith("\r") for name in names.values())


def test_openimages_full_class_list_with_header_loads():
    # oidv6-class-descriptions.csv (19,994 classes) has a LabelName,DisplayName header; the boxable file has none
    path = shared_path("data", "real", "openimages", "oidv6-class-descriptions.csv")
    names = read_class_names(path)
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    assert rows[0] == ["LabelName", "DisplayName"] and "LabelName" not in names
    assert len(names) == len({row[0] for row in rows[1:]})
    assert names["/m/019nj4"] == "Smile" and names["/m/0104x9kv"] == "Vinegret"


def excerpt_sections() -> dict[str, list[str]]:
    """The README excerpt file: '## title' -> its lines."""
    text = shared_path("data", "real", "openimages", "README_excerpts_oidv6.csv.txt").read_text(encoding="utf-8")
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].split()[0], [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def test_openimages_readme_rows(tmp_path):
    from foilforge.pipeline.sources.openimages import BOX_HEADER

    sections = excerpt_sections()
    classes = shared_path("data", "real", "openimages", "class-descriptions-boxable.csv")
    (tmp_path / "classes.csv").write_bytes(classes.read_bytes())
    # real VRD rows (image 000ac95750ac7399: Man is Smile, twice) and the real validation-style box row
    (tmp_path / "vrd.csv").write_text("\n".join(sections["*-annotations-vrd.csv"]) + "\n", encoding="utf-8")
    (tmp_path / "val-bbox.csv").write_text(",".join(BOX_HEADER) + "\n" + sections["validation-annotations-bbox.csv"][0] + "\n",
                                           encoding="utf-8")
    files = {"boxes": "val-bbox.csv", "relationships": "vrd.csv", "classes": "classes.csv"}
    [sample] = read_source(source("oi", "openimages", tmp_path, files), "oi")
    assert sample["id"] == "oi:000ac95750ac7399"
    assert (sample["dataset_idx"], sample["image_file"], sample["original_split"]) == \
        ("000ac95750ac7399", "000ac95750ac7399.jpg", None)
    assert sample["boxes"] == []  # the box row is of another image
    assert sample["relationships"][0] == {
        "subject": "/m/04yx4", "object": "/m/019nj4", "predicate": "is",
        "subject_name": "Man", "object_name": "/m/019nj4",  # Smile: an attribute, not a boxable class
        "subject_box": [0.049375, 0.560625, 0.08427, 0.999064], "object_box": [0.049375, 0.560625, 0.08427, 0.999064],
    }
    assert len(sample["relationships"]) == 2

    # the real train rows (21 columns: XClick* after IsInside); the relationship is made up from the first box
    (tmp_path / "train-bbox.csv").write_text("\n".join(sections["oidv6-train-annotations-bbox.csv"]) + "\n", encoding="utf-8")
    (tmp_path / "train-vrd.csv").write_text(sections["*-annotations-vrd.csv"][0] + "\n"
                                            "000002b66c9c498e,/m/01g317,/m/01g317,0.012500,0.195312,0.148438,0.587500,"
                                            "0.025000,0.276563,0.714063,0.948438,at\n", encoding="utf-8")
    files = {"boxes": "train-bbox.csv", "relationships": "train-vrd.csv", "classes": "classes.csv"}
    [sample] = read_source(source("oi", "openimages", tmp_path, files, split="train"), "oi")
    assert sample["original_split"] == "train"
    assert sample["boxes"] == [
        {"label": "/m/01g317", "name": "Person", "box": [0.0125, 0.195312, 0.148438, 0.5875]},
        {"label": "/m/01g317", "name": "Person", "box": [0.025, 0.276563, 0.714063, 0.948438]},
    ]


@pytest.mark.parametrize("name", ["test.csv", "hard_unseen_test.csv"])
def test_bd2bb_real_files(name):
    path = shared_path("data", "real", "bd2bb", name)
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    samples = read_source(source("bd2bb", "bd2bb", path.parent, {"actions": name}), "bd2bb")
    assert len(samples) == len(rows) == {"test.csv": 4081, "hard_unseen_test.csv": 1505}[name]
    assert {s["original_split"] for s in samples} == {"test"}
    by_id = {s["dataset_idx"]: s for s in samples}
    if name == "test.csv":
        # 24,feel adventurous,,just watch my friend fly an animal kite,ride an elephant,...,lan,targ,lan,vis,vis,1
        assert by_id[24] == {
            "id": "bd2bb:24", "source": "bd2bb", "dataset": "BD2BB", "original_split": "test", "dataset_idx": 24,
            "image_file": None, "intention": "feel adventurous", "sent2": "",
            "endings": ["just watch my friend fly an animal kite", "ride an elephant", "ride a horse like the man",
                        "go bird watching on an outdoor public patio", "stand and watch the zebras"],
            "types": ["lan", "targ", "lan", "vis", "vis"], "label": 1, "target": "ride an elephant",
        }
    foiler = FOILERS.build("bd2bb_decoys.v1", {})
    for sample in samples:
        foiler.check_sample(sample, "ingested", sample["id"])


VALSE_FILES = sorted(p.name for p in (ROOT.parent / "shared" / "data" / "valse-dev").glob("*.json"))


@pytest.mark.parametrize("name", VALSE_FILES or ["(valse-dev absent)"])
def test_valse_dev_files_ingest(tmp_path, name):
    path = shared_path("data", "valse-dev", name)
    released = json.loads(path.read_text(encoding="utf-8"))
    out = tmp_path / "valse.jsonl"
    count = ingest(source("valse", "valse", path.parent, {"instrument": name}), "valse", out)
    samples = list(iter_jsonl(out))
    assert count == len(samples) == len(released)
    stem = path.stem
    for sample in samples:
        key = sample["valse_key"]
        assert sample["id"] == f"valse:{stem}:{key}" and sample["valse_instrument"] == stem
        record = released[key]
        assert {k: sample[k] for k in record} == record  # every released field, unchanged
        assert all(k in sample for k in COMMON)


def test_valse_hand_checked_record():
    path = shared_path("data", "valse-dev", "counting-hard.json")
    samples = {s["valse_key"]: s for s in read_source(source("v", "valse", path.parent, {"instrument": path.name}), "v")}
    sample = samples["counting_visual7w_2375454"]
    assert (sample["id"], sample["dataset"], sample["original_split"], sample["dataset_idx"], sample["image_file"]) == \
        ("v:counting-hard:counting_visual7w_2375454", "visual7w", "test", "2375454", "v7w_2375454.jpg")
    # coreference records were released without dataset_idx: it comes back as null
    path = shared_path("data", "valse-dev", "coreference-hard.json")
    sample = read_source(source("v", "valse", path.parent, {"instrument": path.name}), "v")[0]
    assert sample["dataset_idx"] is None and sample["dataset"] == "VisDial_v1.0"


def swig_readme_files(directory: Path) -> dict:
    readme = json.loads(shared_path("data", "real", "swig", "README_examples.json").read_text(encoding="utf-8"))
    write_json(directory / "train.json", readme["train_dev_test_record_example"])
    space = {"nouns": dict(readme["imsitu_space_nouns_example"]), "verbs": dict(readme["imsitu_space_verbs_example"])}
    write_json(directory / "imsitu_space.json", space)
    return space


def test_swig_readme_record(tmp_path):
    from foilforge.errors import InputError

    space = swig_readme_files(tmp_path)
    params = source("swig", "swig", tmp_path, {"annotations": "train.json", "space": "imsitu_space.json"})
    # the README quotes the drinking verb only: the record's verb is missing from that space
    with pytest.raises(InputError) as err:
        read_source(params, "swig")
    assert str(err.value) == (f"{tmp_path}/train.json, record hitchhiking_238.jpg, field 'verb': "
                              "verb 'hitchhiking' is not in imsitu_space.json 'verbs'")
    # completed by hand (imSitu's hitchhiking entry; WordNet first lemmas of the three nouns)
    space["verbs"]["hitchhiking"] = {"framenet": "Hitchhiking", "abstract": "the AGENT hitchhikes at a PLACE",
                                     "def": "travel by getting free rides", "order": ["agent", "place"], "roles": {}}
    for noun, gloss in (("n03519981", "highway"), ("n10287213", "man"), ("n04096066", "road")):
        space["nouns"][noun] = {"gloss": [gloss], "def": ""}
    write_json(tmp_path / "imsitu_space.json", space)
    [sample] = read_source(params, "swig")
    assert sample == {
        "id": "swig:hitchhiking_238.jpg", "source": "swig", "dataset": "SWiG", "original_split": "train",
        "dataset_idx": "hitchhiking_238.jpg", "image_file": "hitchhiking_238.jpg", "verb": "hitchhiking",
        "frames": [{"place": "n03519981", "agent": "n10287213"}, {"place": "n03519981", "agent": "n10287213"},
                   {"place": "n04096066", "agent": "n10287213"}],
        "nouns": {"n03519981": ["highway"], "n04096066": ["road"], "n10287213": ["man"]},
        "verb_abstract": "the AGENT hitchhikes at a PLACE", "verb_order": ["agent", "place"],
        "bb": {"place": [-1, -1, -1, -1], "agent": [195, 282, 380, 554]}, "height": 683, "width": 512,
    }
    from foilforge.foilers.lang.realise import check_action_sample, gloss_of

    check_action_sample(sample, "ingested", sample["id"])
    assert gloss_of(sample["nouns"], "n10287213") == "man"


# ---------------------------------------------------------------- formats on hand-made files

def visual7w_file(directory: Path) -> Path:
    return write_json(directory / "telling.json", {"images": [
        {"image_id": 2371044, "filename": "v7w_2371044.jpg", "split": "test", "qa_pairs": [
            {"qa_id": 11, "question": "How many dogs are there?", "answer": "Two.",
             "multiple_choices": ["One.", "Three.", "Four."], "type": "how"},
            {"qa_id": 12, "question": "How is the weather?", "answer": "Sunny.",
             "multiple_choices": ["Rainy.", "Snowy.", "Foggy."], "type": "how"},
            {"qa_id": 13, "question": "What color is the car?", "answer": "Red.",
             "multiple_choices": ["Blue.", "Green.", "White."], "type": "what"},
            {"qa_id": 14, "question": "  how MANY  people are\nwalking?", "answer": "0",
             "multiple_choices": ["1", "2", "3"], "type": "how"},
        ]},
        {"image_id": 5, "filename": "v7w_5.jpg", "split": "train", "qa_pairs": [
            {"qa_id": 51, "question": "How many cats?", "answer": "1.", "multiple_choices": ["2.", "3.", "4."],
             "type": "how"},
        ]},
    ]})


def test_visual7w_keeps_how_many_questions(tmp_path):
    visual7w_file(tmp_path)
    samples = read_source(source("visual7w", "visual7w", tmp_path, {"telling": "telling.json"}), "visual7w")
    assert [s["id"] for s in samples] == ["visual7w:11", "visual7w:14", "visual7w:51"]
    assert samples[0] == {
        "id": "visual7w:11", "source": "visual7w", "dataset": "visual7w", "original_split": "test",
        "dataset_idx": "2371044", "image_file": "v7w_2371044.jpg", "question": "How many dogs are there?",
        "answer": "Two.", "multiple_choices": ["One.", "Three.", "Four."], "qa_id": 11, "image_id": 2371044,
        "type": "how",
    }
    assert samples[1]["question"] == "how MANY people are walking?"
    assert samples[2]["original_split"] == "train"
    # `split` selects the images of one split (the telling file holds all three)
    only_test = read_source(source("v", "visual7w", tmp_path, {"telling": "telling.json"}, split="test"), "v")
    assert [s["id"] for s in only_test] == ["v:11", "v:14"]


def visdial_file(directory: Path, name: str = "visdial_1.0_val.json", split: str = "val2018") -> Path:
    return write_json(directory / name, {"version": "1.0", "split": split, "data": {
        "questions": ["is he wearing a hat", "what color is the dog", "are they outside"],
        "answers": ["no", "brown and white", "yes, in a park"],
        "dialogs": [
            {"image_id": 185565, "caption": "a man walking his dog on a leash",
             "dialog": [{"question": 0, "answer": 0, "answer_options": list(range(100)), "gt_index": 3},
                        {"question": 1, "answer": 1, "answer_options": list(range(100)), "gt_index": 7}]},
            {"image_id": 42, "caption": "two kids playing  frisbee",
             "dialog": [{"question": 2, "answer": 2, "answer_options": list(range(100)), "gt_index": 0}]},
        ]}})


def test_visdial_resolves_turns(tmp_path):
    visdial_file(tmp_path)
    params = source("visdial_val", "visdial", tmp_path, {"dialogs": "visdial_1.0_val.json"},
                    image_file_template="VisualDialog_val2018_{image_id:012d}.jpg")
    samples = {s["id"]: s for s in read_source(params, "visdial_val")}
    assert sorted(samples) == ["visdial_val:185565:0", "visdial_val:185565:1", "visdial_val:42:0"]
    assert samples["visdial_val:185565:1"] == {
        "id": "visdial_val:185565:1", "source": "visdial_val", "dataset": "VisDial_v1.0", "original_split": "val",
        "dataset_idx": 185565, "image_file": "VisualDialog_val2018_000000185565.jpg",
        "caption": "a man walking his dog on a leash", "question": "what color is the dog", "answer": "brown and white",
        "turn": 1, "image_id": 185565,
    }
    assert samples["visdial_val:42:0"]["answer"] == "yes, in a park"
    assert samples["visdial_val:42:0"]["caption"] == "two kids playing frisbee"
    foiler = FOILERS.build("coreference.v1", {})
    for sample in samples.values():
        foiler.check_sample(sample, "ingested", sample["id"])


def test_openimages_sample_files():
    params = {"sources": {"openimages": REPO_PARAMS["sources"]["openimages"]}}
    src = REPO_PARAMS["sources"]["openimages"]
    samples = read_source(params, "openimages")
    with (ROOT / src["root"] / src["files"]["relationships"]).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(samples) == len({r["ImageID"] for r in rows})
    assert sum(len(s["relationships"]) for s in samples) == len(rows)
    first = next(s for s in samples if s["dataset_idx"] == "0a1f3c5e7b9d2f40")
    assert [(r["subject_name"], r["predicate"], r["object_name"]) for r in first["relationships"]] == \
        [("Man", "wears", "Sunglasses"), ("Woman", "holds", "Bottle")]
    assert first["relationships"][0]["subject_box"] == [0.05, 0.45, 0.1, 0.95]


def test_output_is_sorted_and_byte_stable(tmp_path):
    visual7w_file(tmp_path)
    params = source("visual7w", "visual7w", tmp_path, {"telling": "telling.json"})
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert ingest(params, "visual7w", a) == ingest(params, "visual7w", b) == 3
    assert a.read_bytes() == b.read_bytes()
    ids = [json.loads(line)["id"] for line in a.read_text(encoding="utf-8").splitlines()]
    assert ids == sorted(ids)


# ---------------------------------------------------------------- the CLI

def test_cli_end_to_end(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    write_json(data / "captions_val2017.json", {
        "info": {}, "type": "captions",
        "images": [{"id": 7, "file_name": "000000000007.jpg"}, {"id": 9, "file_name": "000000000009.jpg"}],
        "annotations": [{"image_id": 9, "id": 101, "caption": "Two dogs run on a beach."},
                        {"image_id": 7, "id": 3, "caption": "A cat sits on a mat. "}],
    })
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(source("coco", "coco", data, {"captions": "captions_val2017.json"}, split="val")))
    out = tmp_path / "out" / "coco.jsonl"
    assert cli.main(["ingest", "coco", "--params", str(params), "--output", str(out)]) == 0
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == [
        {"caption": "Two dogs run on a beach.", "dataset": "coco2017", "dataset_idx": 101, "id": "coco:101",
         "image_file": "000000000009.jpg", "image_id": 9, "original_split": "val", "source": "coco"},
        {"caption": "A cat sits on a mat.", "dataset": "coco2017", "dataset_idx": 3, "id": "coco:3",
         "image_file": "000000000007.jpg", "image_id": 7, "original_split": "val", "source": "coco"},
    ]
    assert [p.name for p in out.parent.iterdir()] == ["coco.jsonl"]
    # an unknown source: exit 2, the known ones listed, nothing written
    out2 = tmp_path / "out" / "nope.jsonl"
    assert cli.main(["ingest", "nope", "--params", str(params), "--output", str(out2)]) == 2
    assert capsys.readouterr().err == "foilforge ingest: error: params.yaml has no source 'nope'; sources: coco\n"
    assert not out2.exists()


# ---------------------------------------------------------------- every source of params.yaml

def foilers_by_format() -> dict[str, list[str]]:
    """format -> registered foilers whose `source` (a params.yaml source key) has that format."""
    formats = {name: spec["format"] for name, spec in REPO_PARAMS["sources"].items()}
    by_format: dict[str, list[str]] = {}
    for name in FOILERS.names():
        fmt = formats.get(FOILERS.get(name).source)
        if fmt is not None:
            by_format.setdefault(fmt, []).append(name)
    return by_format


def test_every_foiler_source_is_a_params_source():
    formats = {spec["format"] for spec in REPO_PARAMS["sources"].values()}
    assert formats <= set(READERS.unversioned())
    by_format = foilers_by_format()
    # released.v1 re-filters a released VALSE file the user supplies (format: valse); the sample ships none
    released = [n for n in FOILERS.names() if FOILERS.get(n).source == "valse"]
    assert released == ["released.v1"] and "valse" in READERS.unversioned()
    assert sum(len(v) for v in by_format.values()) == len(FOILERS.names()) - len(released)
    assert set(by_format) == formats  # every source format feeds a foiler


@pytest.mark.parametrize("name", sorted(REPO_PARAMS["sources"]))
def test_repository_sources_feed_their_foilers(name, tmp_path):
    spec = REPO_PARAMS["sources"][name]
    missing = [f for f in spec["files"].values() if not (ROOT / spec["root"] / f).exists()]
    if missing:
        pytest.skip(f"{spec['root']}: {', '.join(missing)} not there yet")
    params = {"sources": {name: {**spec, "root": str(ROOT / spec["root"])}}}
    out = tmp_path / f"{name}.jsonl"
    count = ingest(params, name, out)
    samples = list(iter_jsonl(out))
    assert count == len(samples) > 0
    assert len({s["id"] for s in samples}) == len(samples)
    for sample in samples:
        assert all(k in sample for k in COMMON), sample["id"]
        assert sample["source"] == name and sample["id"].startswith(f"{name}:")
    foilers = foilers_by_format()[spec["format"]]
    assert foilers
    for foiler_name in foilers:
        foiler = FOILERS.build(foiler_name, {}, where="test")
        for sample in samples:
            foiler.check_sample(sample, str(out), sample["id"])


def test_docstring_table_names_every_format_and_each_format_is_one_module():
    import foilforge.pipeline.sources as package

    rows = [line for line in package.__doc__.splitlines() if line.startswith("| ")]
    documented = {line.split("|")[1].strip() for line in rows}
    assert set(READERS.unversioned()) <= documented
    for name in READERS.names():
        reader = READERS.get(name)
        assert reader.__module__ == f"foilforge.pipeline.sources.{reader.format_name}", (name, reader.__module__)


def test_readers_are_a_versioned_registry_and_params_may_pin_a_version():
    from foilforge.pipeline.sources.base import reader_for, resolve_source

    assert "coco.v1" in READERS.names() and "coco" in READERS.unversioned()
    assert reader_for("coco") is reader_for("coco.v1") is READERS.get("coco.v1")
    pinned = {"sources": {"c": {"format": "coco.v1", "root": "x", "files": {"captions": "c.json"}}}}
    assert resolve_source(pinned, "c").format == "coco.v1"
    with pytest.raises(ConfigError, match=r"params.yaml sources.c.format 'coco.v9' is not a known format; formats: bd2bb, coco,"):
        resolve_source({"sources": {"c": dict(pinned["sources"]["c"], format="coco.v9")}}, "c")


TRAIN_TEMPLATES = ["COCO_train2014_{image_id:012d}.jpg", "COCO_val2014_{image_id:012d}.jpg"]


def test_visdial_train_names_each_image_by_the_coco_split_it_is_in(tmp_path):
    """VisDial v1.0 train uses COCO train2014 and val2014 images: each id gets the template whose file exists."""
    visdial_file(tmp_path, "visdial_1.0_train.json", split="train")
    images = tmp_path / "images"
    images.mkdir()
    (images / "COCO_val2014_000000185565.jpg").write_bytes(b"")
    (images / "COCO_train2014_000000000042.jpg").write_bytes(b"")
    params = source("vd", "visdial", tmp_path, {"dialogs": "visdial_1.0_train.json", "images": "images"},
                    image_file_template=TRAIN_TEMPLATES)
    samples = {s["id"]: s for s in read_source(params, "vd")}
    assert samples["vd:185565:0"]["image_file"] == "COCO_val2014_000000185565.jpg"
    assert samples["vd:42:0"]["image_file"] == "COCO_train2014_000000000042.jpg"
    assert samples["vd:185565:0"]["original_split"] == "train"


def test_visdial_image_in_neither_or_both_folders_is_an_error(tmp_path):
    visdial_file(tmp_path, "visdial_1.0_train.json", split="train")
    images = tmp_path / "images"
    images.mkdir()
    (images / "COCO_train2014_000000000042.jpg").write_bytes(b"")
    params = source("vd", "visdial", tmp_path, {"dialogs": "visdial_1.0_train.json", "images": "images"},
                    image_file_template=TRAIN_TEMPLATES)
    with pytest.raises(InputError) as err:
        read_source(params, "vd")
    assert str(err.value) == (f"{tmp_path}/visdial_1.0_train.json, record data.dialogs[0], field 'image_id': no image "
                              f"file for image_id 185565 under {images} (tried COCO_train2014_000000185565.jpg, "
                              f"COCO_val2014_000000185565.jpg)")
    (images / "COCO_val2014_000000185565.jpg").write_bytes(b"")
    (images / "COCO_val2014_000000000042.jpg").write_bytes(b"")
    with pytest.raises(InputError, match=r"record data.dialogs\[1\], field 'image_id': 2 image files for image_id 42"):
        read_source(params, "vd")


def test_visdial_template_list_needs_the_image_folder(tmp_path):
    visdial_file(tmp_path, "visdial_1.0_train.json", split="train")
    params = source("vd", "visdial", tmp_path, {"dialogs": "visdial_1.0_train.json"}, image_file_template=TRAIN_TEMPLATES)
    with pytest.raises(ConfigError, match=r"image_file_template lists 2 templates: set params.yaml sources.vd.files.images"):
        read_source(params, "vd")
