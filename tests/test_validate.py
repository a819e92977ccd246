"""The validate stage: votes -> mturk counts, valid flags, gold exclusion, Table 5 metrics; bad votes files."""

import csv
import json

import krippendorff
import numpy as np
import pytest

from foilforge.errors import ConfigError, InputError
from foilforge.pipeline import annotation as annotate
from foilforge.pipeline import validation as validate
from foilforge.settings import instrument_settings
from tests.annotation_helpers import foil_records, write_jsonl

SETTINGS = instrument_settings({}, "relations").validation


def _choice_for(item_id: str, wanted: str) -> str:
    """The first/second answer that means `wanted` (caption or foil) for this item's order."""
    first = validate.caption_first(item_id, 0)
    return {("caption", True): "first", ("caption", False): "second",
            ("foil", True): "second", ("foil", False): "first"}.get((wanted, first), wanted)


def _write_votes(path, rows, header=("HITId", "Input.item_id", "WorkerId", "Answer.choice")):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i, row in enumerate(rows):
            writer.writerow([f"hit{i}", *row] if header[0] == "HITId" else row)
    return path


def test_caption_first_is_seeded_and_about_half():
    ids = [f"relations:coco:{i}" for i in range(400)]
    firsts = [validate.caption_first(i, 0) for i in ids]
    assert firsts == [validate.caption_first(i, 0) for i in ids]
    assert 0.45 < sum(firsts) / len(firsts) < 0.55
    assert firsts != [validate.caption_first(i, 1) for i in ids]


def test_marked_texts_bold_the_span_and_escape_the_rest():
    record = foil_records(1)[0]
    caption_html, foil_html = annotate.marked_texts(record)
    assert caption_html == "A dog &lt;0&gt; sits <b>on</b> the mat &amp; rug."
    assert foil_html == "A dog &lt;0&gt; sits <b>under</b> the mat &amp; rug."


def test_marked_texts_fall_back_to_a_word_diff_without_spans():
    record = {"caption": "two <cats> sleep", "foil": "three <cats> sleep", "provenance": {}}
    assert annotate.marked_texts(record) == ("<b>two</b> &lt;cats&gt; sleep", "<b>three</b> &lt;cats&gt; sleep")


def test_counts_valid_and_unanimous_on_a_hand_made_case():
    records = foil_records(3)
    a, b, c = (r["id"] for r in records)
    votes = []
    for worker, wanted in zip("xyz", ("caption", "caption", "caption")):   # a: 3/3 caption -> valid, unanimous
        votes.append({"line": 0, "item_id": a, "worker": worker, "choice": _choice_for(a, wanted)})
    for worker, wanted in zip("xyz", ("caption", "foil", "both")):         # b: 1 caption -> not valid
        votes.append({"line": 0, "item_id": b, "worker": worker, "choice": _choice_for(b, wanted)})
    for worker, wanted in zip("xyz", ("caption", "caption", "cannot_tell")):  # c: 2 caption -> valid
        votes.append({"line": 0, "item_id": c, "worker": worker, "choice": _choice_for(c, wanted)})
    metrics = validate.validate_records(records, votes, SETTINGS, "relations")
    assert [r["mturk"] for r in records] == [{"caption": 3, "foil": 0, "other": 0}, {"caption": 1, "foil": 1, "other": 1},
                                            {"caption": 2, "foil": 0, "other": 1}]
    assert [r["valid"] for r in records] == [True, False, True]
    assert (metrics["items_voted"], metrics["valid"], metrics["unanimous"]) == (3, 2, 1)
    assert metrics["valid_pct"] == pytest.approx(200 / 3)
    assert metrics["unanimous_pct"] == pytest.approx(100 / 3)


def test_alpha_is_one_for_perfect_agreement_and_matches_the_package():
    records = foil_records(2)
    a, b = records[0]["id"], records[1]["id"]
    votes = [{"line": 0, "item_id": a, "worker": w, "choice": _choice_for(a, "caption")} for w in "xyz"]
    votes += [{"line": 0, "item_id": b, "worker": w, "choice": "neither"} for w in "xyz"]
    metrics = validate.validate_records(records, votes, SETTINGS, "relations")
    assert metrics["alpha_all"] == pytest.approx(1.0)
    assert metrics["alpha_valid"] is None     # one valid item, one category: alpha undefined, not a number

    votes[1]["choice"] = "both"
    metrics = validate.validate_records(records, votes, SETTINGS, "relations")
    # x, y, z over items a, b in the caption-relative codes (caption 0, foil 1, both 2, neither 3, cannot_tell 4)
    expected = krippendorff.alpha(reliability_data=np.array([[0, 3], [2, 3], [0, 3]], dtype=float),
                                  level_of_measurement="nominal", value_domain=[0, 1, 2, 3, 4])
    assert metrics["alpha_all"] == pytest.approx(expected)
    assert 0 < metrics["alpha_all"] < 1


def test_gold_items_exclude_an_annotator_below_the_threshold():
    records = foil_records(4)
    ids = [r["id"] for r in records]
    settings = instrument_settings({"instruments": {"relations": {"validation": {"gold": ids[:3]}}}}, "relations").validation
    votes = []
    for item in ids:
        votes.append({"line": 0, "item_id": item, "worker": "good", "choice": _choice_for(item, "caption")})
        votes.append({"line": 0, "item_id": item, "worker": "bad", "choice": _choice_for(item, "foil")})
    votes.append({"line": 0, "item_id": ids[3], "worker": "nogold", "choice": "both"})
    metrics = validate.validate_records(records, votes, settings, "relations")
    assert [e["worker"] for e in metrics["annotators_excluded"]] == ["bad"]
    assert "0/3 gold items (0%), below the threshold 70%" in metrics["annotators_excluded"][0]["reason"]
    assert metrics["annotators_without_gold"] == ["nogold"]
    assert records[0]["mturk"] == {"caption": 1, "foil": 0, "other": 0}      # bad's foil votes are not counted
    assert records[3]["mturk"] == {"caption": 1, "foil": 0, "other": 1}
    with pytest.raises(ConfigError, match="instruments.relations.validation.gold: item"):
        validate.validate_records(records, votes, instrument_settings(
            {"instruments": {"relations": {"validation": {"gold": ["relations:nope"]}}}}, "relations").validation,
            "relations")


def test_no_votes_file_keeps_mturk_null_and_succeeds(tmp_path, caplog):
    write_jsonl(tmp_path / "relations.jsonl", foil_records(2))
    metrics = validate.validate({"instruments": {"relations": {"validation": {"votes": str(tmp_path / "none.csv")}}}}, "relations",
                                tmp_path / "relations.jsonl", tmp_path / "out.jsonl", tmp_path / "m.json")
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["mturk"] for r in out] == [None, None] and all("valid" not in r for r in out)
    assert metrics["has_votes"] is False
    assert "no votes file" in caplog.text and "mturk: null" in caplog.text


@pytest.mark.parametrize("rows, header, where, field, problem", [
    ([("relations:coco:0", "w1", "first")], ("HITId", "Input.item_id", "WorkerId"), "line 1", "Answer.choice",
     "missing column"),
    ([("relations:coco:0", "w1", "first"), ("relations:coco:1", "w1", "maybe")], None, "line 3", "Answer.choice",
     "unknown choice 'maybe'"),
    ([("relations:coco:0", "w1", "first"), ("relations:coco:99", "w1", "first")], None, "line 3", "Input.item_id",
     "unknown item id 'relations:coco:99'"),
    ([("relations:coco:0", "w1", "first"), ("relations:coco:1", "w1", "both"), ("relations:coco:0", "w1", "second")],
     None, "line 4", "WorkerId", "duplicate answer: worker 'w1' already answered item 'relations:coco:0' on line 2"),
])
def test_bad_votes_file_names_file_line_and_field_and_writes_nothing(tmp_path, rows, header, where, field, problem):
    write_jsonl(tmp_path / "relations.jsonl", foil_records(2))
    votes = _write_votes(tmp_path / "votes.csv", rows, header or ("HITId", "Input.item_id", "WorkerId", "Answer.choice"))
    with pytest.raises(InputError) as err:
        validate.validate({}, "relations", tmp_path / "relations.jsonl", tmp_path / "out" / "r.jsonl",
                          tmp_path / "out" / "m.json", votes=votes)
    assert str(err.value).startswith(f"{votes}, record {where}, field '{field}': {problem}")
    assert not (tmp_path / "out").exists()


def test_params_block_is_checked():
    from foilforge.schema import problems

    assert problems({"validation": {"annotators": 3}})[0].startswith("params.yaml validation.annotators: unknown key; allowed: ")
    assert problems({"validation": {"export": "some"}}) == ["params.yaml validation.export: expected 'valid' or 'all', got 'some'"]
    assert problems({"validation": {"annotators_per_item": 0}}) == [
        "params.yaml validation.annotators_per_item: expected a value >= 1, got 0"]
    instrument = {"foiler": "relations.v1", "source": "coco"}
    assert problems({"instruments": {"relations": {**instrument, "validation": {"vote": "x.csv"}}}}) == [
        "params.yaml instruments.relations.validation.vote: unknown key; allowed: gold, votes"]
    assert problems({"validation": {}, "instruments": {"relations": {**instrument, "validation": {"votes": "x.csv"}}}}) == []


def test_bias_uses_the_validate_stage_verdict():
    from foilforge.pipeline.bias import is_valid

    votes = {"caption": 2, "foil": 1, "other": 0}
    assert is_valid({"mturk": votes}) is True                     # VALSE's 2-of-3 rule when no verdict is stored
    assert is_valid({"mturk": votes, "valid": False}) is False    # e.g. validation.valid_min_caption: 3
    assert is_valid({"mturk": None}) is None
