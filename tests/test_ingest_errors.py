"""Bad input and bad config stop `foilforge ingest` with one exact message and no output file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError, InputError
from foilforge.pipeline.sources.bd2bb import BD2BB_HEADER
from foilforge.pipeline.sources.openimages import BOX_HEADER, VRD_HEADER
from foilforge.pipeline.stages import cli
from foilforge.pipeline.stages.ingest import ingest

COCO = {"images": [{"id": 1, "file_name": "000000000001.jpg"}],
        "annotations": [{"image_id": 1, "id": 5, "caption": "A dog."}, {"image_id": 1, "id": 6, "caption": "A cat."}]}
BD2BB_ROW = "11,love sports,,hit a home run,print the report,read the sign,throw the ball,put on my helmet,targ,lan,lan,vis,vis,0"


def source(name: str, fmt: str, root, files: dict, **extra) -> dict:
    return {"sources": {name: {"format": fmt, "root": str(root), "files": files, **extra}}}


def fails(params: dict, name: str, out: Path, kind=InputError) -> str:
    """Run the ingest, expect `kind`, check nothing was written; return the message."""
    with pytest.raises(kind) as err:
        ingest(params, name, out)
    assert not out.exists()
    assert not out.parent.exists() or list(out.parent.iterdir()) == []  # no temp file left either
    return str(err.value)


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out" / "samples.jsonl"


def write(path: Path, content) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def coco(tmp_path, content) -> dict:
    write(tmp_path / "captions.json", content)
    return source("coco", "coco", tmp_path, {"captions": "captions.json"})


# ---------------------------------------------------------------- files

def test_missing_file(tmp_path, out):
    assert fails(source("coco", "coco", tmp_path, {"captions": "captions.json"}), "coco", out) == \
        f"{tmp_path}/captions.json: file not found"


def test_empty_file(tmp_path, out):
    assert fails(coco(tmp_path, ""), "coco", out) == f"{tmp_path}/captions.json: file is empty"


def test_truncated_json(tmp_path, out):
    text = json.dumps(COCO)
    assert fails(coco(tmp_path, text[:40]), "coco", out) == \
        f"{tmp_path}/captions.json: invalid JSON at line 1, column 36: Unterminated string starting at"


def test_non_utf8_json(tmp_path, out):
    raw = json.dumps({**COCO, "info": "caf\u00e9"}, ensure_ascii=False).encode("latin-1")
    position = raw.index(b"\xe9")
    assert fails(coco(tmp_path, raw), "coco", out) == \
        f"{tmp_path}/captions.json: not valid UTF-8 at byte {position} (byte 0xe9)"


def test_non_utf8_csv(tmp_path, out):
    write(tmp_path / "test.csv", (",".join(BD2BB_HEADER) + "\n" + BD2BB_ROW.replace("love", "l\xf6ve") + "\n").encode("latin-1"))
    assert fails(source("bd2bb", "bd2bb", tmp_path, {"actions": "test.csv"}), "bd2bb", out) == \
        f"{tmp_path}/test.csv, record line 2: not valid UTF-8 (byte 0xf6)"


def test_not_an_object(tmp_path, out):
    assert fails(coco(tmp_path, [COCO]), "coco", out) == \
        f"{tmp_path}/captions.json: expected a JSON object with 'images' and 'annotations', got list"


# ---------------------------------------------------------------- coco fields

def test_coco_missing_field(tmp_path, out):
    data = json.loads(json.dumps(COCO))
    del data["annotations"][1]["caption"]
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record annotations[1], field 'caption': missing field"


def test_coco_wrong_type(tmp_path, out):
    data = json.loads(json.dumps(COCO))
    data["annotations"][1]["caption"] = 7
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record annotations[1], field 'caption': expected str, got int (7)"
    data["annotations"][1]["caption"] = "A cat."
    data["images"][0]["id"] = "1"
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record images[0], field 'id': expected int, got str ('1')"


def test_coco_missing_top_level_list(tmp_path, out):
    assert fails(coco(tmp_path, {"images": []}), "coco", out) == f"{tmp_path}/captions.json, field 'annotations': missing field"


def test_coco_unknown_image_and_duplicate_id(tmp_path, out):
    data = json.loads(json.dumps(COCO))
    data["annotations"][1]["image_id"] = 2
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record annotations[1], field 'image_id': image_id 2 is not in 'images'"
    data["annotations"][1] = {"image_id": 1, "id": 5, "caption": "Again."}
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record annotations[1], field 'id': duplicate annotation id 5"
    data["annotations"][1] = {"image_id": 1, "id": 6, "caption": " \n "}
    assert fails(coco(tmp_path, data), "coco", out) == \
        f"{tmp_path}/captions.json, record annotations[1], field 'caption': empty text"


def test_no_samples(tmp_path, out):
    assert fails(coco(tmp_path, {"images": [], "annotations": []}), "coco", out) == \
        f"{tmp_path}/captions.json: no samples for source 'coco' (format coco)"


# ---------------------------------------------------------------- visual7w, visdial, swig

def test_visual7w_wrong_type(tmp_path, out):
    write(tmp_path / "t.json", {"images": [{"image_id": 1, "filename": "v7w_1.jpg", "split": "test", "qa_pairs": [
        {"qa_id": 3, "question": "How many dogs?", "answer": "2", "multiple_choices": ["1", 3, "4"], "type": "how"}]}]})
    assert fails(source("v", "visual7w", tmp_path, {"telling": "t.json"}), "v", out) == \
        (f"{tmp_path}/t.json, record images[0].qa_pairs[0], field 'multiple_choices': "
         "expected a list of str, item 1 is int (3)")


def visdial(tmp_path, dialog_turn: dict) -> dict:
    write(tmp_path / "visdial_1.0_val.json", {"version": "1.0", "split": "val2018", "data": {
        "questions": ["is it sunny"], "answers": ["yes", "no"],
        "dialogs": [{"image_id": 9, "caption": "a beach", "dialog": [{"question": 0, "answer": 1}, dialog_turn]}]}})
    return source("vd", "visdial", tmp_path, {"dialogs": "visdial_1.0_val.json"},
                  image_file_template="VisualDialog_val2018_{image_id:012d}.jpg")


def test_visdial_index_out_of_range(tmp_path, out):
    assert fails(visdial(tmp_path, {"question": 0, "answer": 2}), "vd", out) == \
        (f"{tmp_path}/visdial_1.0_val.json, record data.dialogs[0].dialog[1], field 'answer': "
         "index 2 out of range (data.answers has 2 entries)")
    assert fails(visdial(tmp_path, {"question": -1, "answer": 0}), "vd", out) == \
        (f"{tmp_path}/visdial_1.0_val.json, record data.dialogs[0].dialog[1], field 'question': "
         "index -1 out of range (data.questions has 1 entries)")
    assert fails(visdial(tmp_path, {"question": 0}), "vd", out) == \
        f"{tmp_path}/visdial_1.0_val.json, record data.dialogs[0].dialog[1], field 'answer': missing field"


def test_visdial_needs_a_usable_template(tmp_path, out):
    params = visdial(tmp_path, {"question": 0, "answer": 0})
    del params["sources"]["vd"]["image_file_template"]
    assert fails(params, "vd", out, ConfigError) == (
        "params.yaml sources.vd needs image_file_template (e.g. [\"COCO_train2014_{image_id:012d}.jpg\", "
        "\"COCO_val2014_{image_id:012d}.jpg\"] with files.images for train, "
        "\"VisualDialog_val2018_{image_id:012d}.jpg\" for val)")
    params["sources"]["vd"]["image_file_template"] = "COCO_{id}.jpg"
    assert fails(params, "vd", out, ConfigError) == (
        "params.yaml sources.vd.image_file_template 'COCO_{id}.jpg' cannot be filled (KeyError: 'id'); "
        "the one field is {image_id}")


def swig(tmp_path, annotations: dict) -> dict:
    write(tmp_path / "test.json", annotations)
    write(tmp_path / "imsitu_space.json", {
        "nouns": {"n10287213": {"gloss": ["man", "adult male"], "def": ""}, "n04334599": {"gloss": ["street"], "def": ""}},
        "verbs": {"arresting": {"abstract": "the AGENT arrests the SUSPECT at a PLACE", "order": ["agent", "suspect", "place"]}},
    })
    return source("swig", "swig", tmp_path, {"annotations": "test.json", "space": "imsitu_space.json"})


def test_swig_unknown_noun_and_verb(tmp_path, out):
    frame = {"agent": "n10287213", "suspect": "n99999999", "place": ""}
    params = swig(tmp_path, {"arresting_1.jpg": {"verb": "arresting", "frames": [frame, frame, frame]}})
    assert fails(params, "swig", out) == (f"{tmp_path}/test.json, record arresting_1.jpg, field 'frames[0].suspect': "
                                          "noun id 'n99999999' is not in imsitu_space.json 'nouns'")
    params = swig(tmp_path, {"jumping_2.jpg": {"verb": "jumping", "frames": [{"agent": "n10287213"}]}})
    assert fails(params, "swig", out) == \
        f"{tmp_path}/test.json, record jumping_2.jpg, field 'verb': verb 'jumping' is not in imsitu_space.json 'verbs'"
    params = swig(tmp_path, {"arresting_3.jpg": {"verb": "arresting", "frames": [{"agent": 5}]}})
    assert fails(params, "swig", out) == \
        f"{tmp_path}/test.json, record arresting_3.jpg, field 'frames[0].agent': expected a noun id string, got int (5)"


# ---------------------------------------------------------------- csv formats

def test_wrong_csv_header(tmp_path, out):
    write(tmp_path / "test.csv", "id,sent1,label\n1,a,0\n")
    assert fails(source("bd2bb", "bd2bb", tmp_path, {"actions": "test.csv"}), "bd2bb", out) == (
        f"{tmp_path}/test.csv, record header: wrong CSV header: expected {','.join(BD2BB_HEADER)}, got id,sent1,label")


@pytest.mark.parametrize("row,message", [
    (BD2BB_ROW.replace("11,", "x11,", 1), "record row 3, field 'id': expected an integer, got 'x11'"),
    (BD2BB_ROW[:-1] + "7", "record row 3, field 'label': expected 0..4, got 7"),
    (BD2BB_ROW[:-1] + "1", "record row 3, field 'label': label 1 points at a 'lan' ending, expected 'targ'"),
    (BD2BB_ROW.replace("hit a home run", ""), "record row 3, field 'ending0': empty text"),
    (BD2BB_ROW.split(",vis,vis")[0], "record row 3: expected 14 columns, got 11"),
    (BD2BB_ROW, "record row 3, field 'id': duplicate id 11"),
])
def test_bd2bb_bad_rows(tmp_path, out, row, message):
    write(tmp_path / "test.csv", ",".join(BD2BB_HEADER) + "\n" + BD2BB_ROW + "\n" + row + "\n")
    assert fails(source("bd2bb", "bd2bb", tmp_path, {"actions": "test.csv"}), "bd2bb", out) == f"{tmp_path}/test.csv, {message}"


def openimages(tmp_path, boxes: str, vrd: str, classes: str = "/m/04yx4,Man\n/m/017ftj,Sunglasses\n") -> dict:
    write(tmp_path / "bbox.csv", boxes)
    write(tmp_path / "vrd.csv", vrd)
    write(tmp_path / "classes.csv", classes)
    return source("oi", "openimages", tmp_path, {"boxes": "bbox.csv", "relationships": "vrd.csv", "classes": "classes.csv"})


BOXES = ",".join(BOX_HEADER) + "\n" + "img1,xclick,/m/04yx4,1,0.1,0.5,0.1,0.9,0,0,0,0,0\n"
VRD = ",".join(VRD_HEADER) + "\n" + "img1,/m/04yx4,/m/017ftj,0.1,0.5,0.1,0.9,0.2,0.3,0.2,0.3,wears\n"


def test_openimages_good_then_bad(tmp_path, out):
    assert ingest(openimages(tmp_path, BOXES, VRD), "oi", out) == 1
    out.unlink()
    assert fails(openimages(tmp_path, BOXES, VRD.replace("0.2,0.3,wears", "0.2,high,wears")), "oi", out) == \
        f"{tmp_path}/vrd.csv, record row 2, field 'YMax2': expected a number, got 'high'"
    assert fails(openimages(tmp_path, BOXES.replace("0.1,0.5", "0.1,", 1), VRD), "oi", out) == \
        f"{tmp_path}/bbox.csv, record row 2, field 'XMax': expected a number, got ''"
    assert fails(openimages(tmp_path, BOXES.replace("ImageID", "ImageId"), VRD), "oi", out) == (
        f"{tmp_path}/bbox.csv, record header: wrong CSV header: expected {','.join(BOX_HEADER)}, "
        f"got {','.join(BOX_HEADER).replace('ImageID', 'ImageId')}")
    assert fails(openimages(tmp_path, BOXES, VRD, classes="/m/04yx4,Man\n/m/017ftj\n"), "oi", out) == \
        f"{tmp_path}/classes.csv, record row 2: expected 2 columns (LabelName,DisplayName), got 1"
    # the physical line: a blank line and the header of oidv6-class-descriptions.csv count
    assert fails(openimages(tmp_path, BOXES, VRD, classes="LabelName,DisplayName\n\n/m/04yx4,Man,x\n"), "oi", out) == \
        f"{tmp_path}/classes.csv, record row 3: expected 2 columns (LabelName,DisplayName), got 3"
    assert fails(openimages(tmp_path, BOXES, VRD.replace(",wears", ",")), "oi", out) == \
        f"{tmp_path}/vrd.csv, record row 2, field 'RelationshipLabel': empty value"
    assert fails(openimages(tmp_path, BOXES, ",".join(VRD_HEADER) + "\n"), "oi", out) == f"{tmp_path}/vrd.csv: no relationship rows"


def test_valse_bad_records(tmp_path, out):
    params = source("valse", "valse", tmp_path, {"instrument": "existence.json"})
    write(tmp_path / "existence.json", {"existence_1": {"caption": "There are dogs.", "foil": 3}})
    assert fails(params, "valse", out) == f"{tmp_path}/existence.json, record existence_1, field 'foil': expected str, got int (3)"
    write(tmp_path / "existence.json", {"existence_1": ["There are dogs."]})
    assert fails(params, "valse", out) == f"{tmp_path}/existence.json, record existence_1: expected an object, got list"
    write(tmp_path / "existence.json", {})
    assert fails(params, "valse", out) == f"{tmp_path}/existence.json: no records"


# ---------------------------------------------------------------- config

@pytest.mark.parametrize("spec,message", [
    ({"format": "flickr", "root": "x", "files": {}},
     "params.yaml sources.s.format 'flickr' is not a known format; formats: bd2bb, coco, openimages, swig, valse, visdial, visual7w"),
    ({"format": "coco", "root": "x", "files": {"caption": "c.json"}},
     "params.yaml sources.s.files: missing role(s) captions; format coco reads captions (optional: instances)"),
    ({"format": "coco", "root": "x", "files": {"captions": "c.json", "extra": "e.json"}},
     "params.yaml sources.s.files: unknown role(s) extra; format coco reads captions (optional: instances)"),
    ({"format": "coco", "root": "x", "files": {"captions": "c.json"}, "image_file_template": "{image_id}.jpg"},
     "params.yaml sources.s.image_file_template is not used by format coco (formats that use it: visdial)"),
])
def test_config_errors(tmp_path, out, spec, message):
    assert fails({"sources": {"s": spec}}, "s", out, ConfigError) == message


@pytest.mark.parametrize("spec,message", [
    ({"format": "coco", "root": "x", "files": {"captions": "c.json"}, "splits": "val"},
     "params.yaml sources.s.splits: unknown key; allowed: dataset, files, format, image_file_template, root, split"),
    ({"format": "coco", "files": {"captions": "c.json"}}, "params.yaml sources.s.root: missing (required)"),
    ({"format": "coco", "root": "", "files": {"captions": "c.json"}},
     "params.yaml sources.s.root: string should have at least 1 character, got ''"),
    ({"format": "coco", "root": "x", "files": {"captions": "c.json"}, "split": 2017},
     "params.yaml sources.s.split: expected a string, got 2017"),
    ({"format": "visdial", "root": "x", "files": {"dialogs": "d.json"}, "image_file_template": [3]},
     "params.yaml sources.s.image_file_template.0: expected a string, got 3"),
])
def test_the_schema_checks_a_source_block(spec, message):
    from foilforge.schema import problems

    assert problems({"sources": {"s": spec}}) == [message]


def test_unknown_source_and_missing_block(tmp_path, out):
    params = {"sources": {"coco": {}, "swig": {}}}
    assert fails(params, "visual7w", out, ConfigError) == "params.yaml has no source 'visual7w'; sources: coco, swig"
    assert fails({}, "coco", out, ConfigError) == "params.yaml has no 'sources' block"


def test_cli_reports_bad_input_and_writes_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    bad = json.loads(json.dumps(COCO))
    bad["annotations"][0]["image_id"] = None
    write(data / "captions.json", bad)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(source("coco", "coco", data, {"captions": "captions.json"})))
    out = tmp_path / "out" / "coco.jsonl"
    assert cli.main(["ingest", "coco", "--params", str(params), "--output", str(out)]) == 2
    assert capsys.readouterr().err == (f"foilforge ingest: error: {data}/captions.json, record annotations[0], "
                                       "field 'image_id': expected int, got NoneType (None)\n")
    assert not out.parent.exists()


def test_a_renamed_command_says_its_new_name(capsys):
    """`foilforge pair` finds each record's partners; a "pair" is a caption and its foil, so the command is `partners`."""
    from foilforge.pipeline.stages.cli import main

    assert main(["pair", "relations", "--input", "x.jsonl"]) == 2
    assert capsys.readouterr().err.strip() == "foilforge pair: error: the command is now `foilforge partners`"
    with pytest.raises(SystemExit) as exit_info:
        main(["partners", "--help"])
    assert exit_info.value.code == 0 and "--samples" in capsys.readouterr().out
