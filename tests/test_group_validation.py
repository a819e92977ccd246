"""Human validation of Winoground groups: the seeded display orders, decoding votes, validity and alpha by hand,
bad group votes files, the crowd batch, and an annotation database made before group items existed."""

import csv
import json
import sqlite3

import krippendorff
import numpy as np
import pytest

from foilforge.errors import InputError
from foilforge.pipeline import annotation as annotate
from foilforge.pipeline import validation as validate
from foilforge.pipeline.stages.annotate_app import db
from foilforge.settings import instrument_settings
from tests.annotation_helpers import foilforge, grouped_records, write_jsonl, write_params

SETTINGS = instrument_settings({}, "relations").validation
GROUP_HEADER = ("HITId", "Input.item_id", "WorkerId", "Answer.text_1", "Answer.text_2")


def _display(group_id: str, seed: int = 0):
    """(letter shown for image_0, letter for image_1, text number of caption_0, of caption_1), from the coins."""
    image_0_first, caption_0_first = validate.group_orders(group_id, seed)
    letters = ("A", "B") if image_0_first else ("B", "A")
    texts = (1, 2) if caption_0_first else (2, 1)
    return letters, texts


def _answers(group_id: str, meaning: str, seed: int = 0) -> tuple[str, str]:
    """(Answer.text_1, Answer.text_2) that mean `meaning` for this group's display: matched, swapped, or a
    literal pair of answers for anything else."""
    letters, texts = _display(group_id, seed)
    if meaning == "matched":      # caption_0 -> image_0, caption_1 -> image_1
        given = {texts[0]: letters[0], texts[1]: letters[1]}
    elif meaning == "swapped":
        given = {texts[0]: letters[1], texts[1]: letters[0]}
    else:
        return meaning
    return given[1], given[2]


def _vote(group_id, worker, meaning, seed=0):
    text_1, text_2 = _answers(group_id, meaning, seed)
    return {"line": 0, "item_id": group_id, "worker": worker, "text_1": text_1, "text_2": text_2}


def _write_group_votes(path, rows, header=GROUP_HEADER):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i, row in enumerate(rows):
            writer.writerow([f"hit{i}", *row] if header[0] == "HITId" else row)
    return path


def test_group_orders_are_seeded_independent_coins():
    ids = [f"relations:coco:{i}|group" for i in range(400)]
    orders = [validate.group_orders(i, 0) for i in ids]
    assert orders == [validate.group_orders(i, 0) for i in ids]
    images, texts = zip(*orders)
    assert 0.42 < sum(images) / 400 < 0.58 and 0.42 < sum(texts) / 400 < 0.58
    assert list(images) != list(texts)                                 # two coins, not one
    assert all(0.15 < sum(o == combo for o in orders) / 400 < 0.35 for combo in
               ((True, True), (True, False), (False, True), (False, False)))
    assert orders != [validate.group_orders(i, 1) for i in ids]         # the seed changes them


def test_decoding_uses_the_display_orders():
    # image_0 shown as B, caption_0 shown as text 1: "text 1 -> B, text 2 -> A" is the right match
    assert validate.group_relative("B", "A", image_0_first=False, caption_0_first=True) == "matched"
    assert validate.group_relative("A", "B", image_0_first=False, caption_0_first=True) == "swapped"
    # both orders flipped: text 1 is caption_1, A is image_1, so "A, B" is right again
    assert validate.group_relative("A", "B", image_0_first=False, caption_0_first=False) == "matched"
    assert validate.group_relative("A", "B", image_0_first=True, caption_0_first=False) == "swapped"
    for other in (("A", "A"), ("B", "B"), ("both", "B"), ("A", "neither"), ("cannot_tell", "cannot_tell")):
        assert validate.group_relative(*other, image_0_first=True, caption_0_first=True) == "other"
    # the same through validate_groups, on a group whose image order is swapped on screen
    records = grouped_records(40)
    record = next(r for r in records if validate.group_orders(r["group"]["id"], 0) == (False, True))
    gid = record["group"]["id"]
    validate.validate_groups([record], [{"line": 2, "item_id": gid, "worker": w, "text_1": "B", "text_2": "A"}
                                        for w in "xy"], SETTINGS)
    assert record["group"]["votes"] == {"matched": 2, "swapped": 0, "other": 0} and record["group"]["valid"] is True


def test_validity_unanimity_and_alpha_by_hand():
    records = grouped_records(4, ungrouped=1)
    g0, g1, g2, g3 = (r["group"]["id"] for r in records[:4])
    votes = [_vote(g0, w, "matched") for w in "xyz"]                                   # valid, unanimous
    votes += [_vote(g1, w, "swapped") for w in "xyz"]                                  # each text to the other image
    votes += [_vote(g2, "x", "matched"), _vote(g2, "y", "matched"), _vote(g2, "z", ("both", "both"))]  # valid
    votes += [_vote(g3, "x", ("A", "A")), _vote(g3, "y", ("neither", "B")), _vote(g3, "z", ("cannot_tell", "A"))]
    votes += [_vote(g1, "cheat", "matched")]           # excluded by the gold check on the record votes
    block = validate.validate_groups(records, votes, SETTINGS, excluded={"cheat"})
    assert [r["group"]["votes"] for r in records[:4]] == [
        {"matched": 3, "swapped": 0, "other": 0}, {"matched": 0, "swapped": 3, "other": 0},
        {"matched": 2, "swapped": 0, "other": 1}, {"matched": 0, "swapped": 0, "other": 3}]
    assert [r["group"]["valid"] for r in records[:4]] == [True, False, True, False]
    assert "group" not in records[4]
    # coincidences: matched-matched 3 + 1, swapped-swapped 3, other-other 3, matched-other 1 + 1; n_c = 5, 3, 4
    # alpha = 1 - (n - 1) * disagreement / (n^2 - sum n_c^2) = 1 - 11 * 2 / (144 - 25 - 9 - 16) = 36/47
    assert block["alpha"] == pytest.approx(36 / 47)
    codes = np.array([[0, 1, 0, 2], [0, 1, 0, 2], [0, 1, 2, 2]], dtype=float)
    assert block["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal",
                                                              value_domain=[0, 1, 2]))
    assert {k: block[k] for k in ("items", "has_votes", "voted", "valid", "valid_pct", "unanimous", "unanimous_pct",
                                  "votes", "votes_counted", "annotators", "annotators_excluded")} == {
        "items": 4, "has_votes": True, "voted": 4, "valid": 2, "valid_pct": 50.0, "unanimous": 1,
        "unanimous_pct": 25.0, "votes": 13, "votes_counted": 12, "annotators": 4, "annotators_excluded": ["cheat"]}
    strict = grouped_records(4, ungrouped=1)
    validate.validate_groups(strict, votes, SETTINGS.model_copy(update={"valid_min_caption": 3}), excluded={"cheat"})
    assert [r["group"]["valid"] for r in strict[:4]] == [True, False, False, False]


def _stage_inputs(tmp_path, n=3):
    records = grouped_records(n, ungrouped=1)
    write_jsonl(tmp_path / "relations.jsonl", records)
    return records, {"instruments": {"relations": {"validation": {"votes": str(tmp_path / "ann" / "relations.csv")}}}}


def _run(tmp_path, params, **kwargs):
    metrics = validate.validate(params, "relations", tmp_path / "relations.jsonl", tmp_path / "out" / "r.jsonl",
                                tmp_path / "out" / "m.json", **kwargs)
    out = [json.loads(line) for line in (tmp_path / "out" / "r.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "out" / "m.json").read_text()) == json.loads(json.dumps(metrics))
    return metrics, out


def test_stage_reads_the_group_votes_file_next_to_the_record_votes(tmp_path):
    records, params = _stage_inputs(tmp_path)
    gids = [r["group"]["id"] for r in records[:3]]
    (tmp_path / "ann").mkdir()
    rows = [(gids[0], w, *_answers(gids[0], "matched")) for w in ("w1", "w2")]
    rows += [(gids[1], "w1", *_answers(gids[1], "matched")), (gids[1], "w2", *_answers(gids[1], "swapped"))]
    _write_group_votes(tmp_path / "ann" / "relations.groups.csv", rows)
    metrics, out = _run(tmp_path, params)
    assert metrics["groups"]["votes_file"] == str(tmp_path / "ann" / "relations.groups.csv")
    assert [r["group"].get("valid") for r in out[:3]] == [True, False, None]
    assert out[1]["group"]["votes"] == {"matched": 1, "swapped": 1, "other": 0}
    assert "votes" not in out[2]["group"] and "group" not in out[3]
    assert (metrics["groups"]["voted"], metrics["groups"]["valid"]) == (2, 1)
    assert [r["mturk"] for r in out] == [None] * 4          # no record votes: the pairs stay unvalidated
    # --group-votes names another file; a missing one leaves every group as select wrote it
    metrics, out = _run(tmp_path, params, group_votes=tmp_path / "elsewhere.csv")
    assert [r.get("group") for r in out] == [r.get("group") for r in records]
    assert metrics["groups"] == {"items": 3, "has_votes": False, "votes_file": str(tmp_path / "elsewhere.csv")}


def test_gold_excluded_workers_are_left_out_of_the_groups(tmp_path):
    records, params = _stage_inputs(tmp_path)
    ids = [r["id"] for r in records]
    params["instruments"]["relations"]["validation"]["gold"] = ids[:2]
    gid = records[0]["group"]["id"]
    (tmp_path / "ann").mkdir()
    with open(tmp_path / "ann" / "relations.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("Input.item_id", "WorkerId", "Answer.choice"))
        for item in ids[:2]:
            first = validate.caption_first(item, 0)
            writer.writerow((item, "good", "first" if first else "second"))
            writer.writerow((item, "bad", "second" if first else "first"))   # the foil on every gold item
    _write_group_votes(tmp_path / "ann" / "relations.groups.csv",
                       [(gid, "good", *_answers(gid, "matched")), (gid, "bad", *_answers(gid, "matched"))])
    metrics, out = _run(tmp_path, params)
    assert [e["worker"] for e in metrics["annotators_excluded"]] == ["bad"]
    assert out[0]["group"]["votes"] == {"matched": 1, "swapped": 0, "other": 0}
    assert out[0]["group"]["valid"] is False                 # one counted match, two needed
    assert metrics["groups"]["annotators_excluded"] == ["bad"]


@pytest.mark.parametrize("rows, header, where, field, problem", [
    ([("relations:coco:0|group", "w1", "A")], ("HITId", "Input.item_id", "WorkerId", "Answer.text_1"), "line 1",
     "Answer.text_2", "missing column"),
    ([("relations:coco:0|group", "w1", "A", "B"), ("relations:coco:1|group", "w1", "A", "C")], None, "line 3",
     "Answer.text_2", "unknown answer 'C'; expected one of A, B, both, neither, cannot_tell"),
    ([("relations:coco:0|group", "w1", "first", "B")], None, "line 2", "Answer.text_1", "unknown answer 'first'"),
    ([("relations:coco:0", "w1", "A", "B")], None, "line 2", "Input.item_id",
     "unknown item id 'relations:coco:0' (not in the instrument's groups)"),
    ([("relations:coco:3|group", "w1", "A", "B")], None, "line 2", "Input.item_id", "unknown item id"),
    ([("relations:coco:0|group", "", "A", "B")], None, "line 2", "WorkerId", "empty worker id"),
    ([("relations:coco:0|group", "w1", "A", "B"), ("relations:coco:1|group", "w1", "B", "A"),
      ("relations:coco:0|group", "w1", "B", "A")], None, "line 4", "WorkerId",
     "duplicate answer: worker 'w1' already answered item 'relations:coco:0|group' on line 2"),
])
def test_bad_group_votes_name_file_line_and_field_and_write_nothing(tmp_path, rows, header, where, field, problem):
    _stage_inputs(tmp_path)          # groups for records 0-2; record 3 has none
    votes = _write_group_votes(tmp_path / "groups.csv", rows, header or GROUP_HEADER)
    with pytest.raises(InputError) as err:
        validate.validate({}, "relations", tmp_path / "relations.jsonl", tmp_path / "out" / "r.jsonl",
                          tmp_path / "out" / "m.json", votes=tmp_path / "none.csv", group_votes=votes)
    assert str(err.value).startswith(f"{votes}, record {where}, field '{field}': {problem}")
    assert not (tmp_path / "out").exists()


def test_crowd_batch_rows_follow_the_seeded_orders_and_the_template_asks_per_text(tmp_path):
    records = grouped_records(6, ungrouped=2)
    write_jsonl(tmp_path / "relations.jsonl", records)
    params = write_params(tmp_path / "params.yaml")
    done = foilforge("annotate", "--params", str(params), "export", "relations", "--groups", "--input",
                     str(tmp_path / "relations.jsonl"), "--output", str(tmp_path / "batch" / "groups.csv"),
                     "--image-url-prefix", "https://img.example/")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "batch" / "groups.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["item_id", "image_a_file", "image_a_url", "image_b_file", "image_b_url", "text_1", "text_2"]
    assert [row["item_id"] for row in rows] == [f"relations:coco:{i}|group" for i in range(6)]
    image_orders, text_orders = set(), set()
    for i, row in enumerate(rows):
        image_0_first, caption_0_first = validate.group_orders(row["item_id"], 0)
        images = (f"img_{i:03d}.jpg", f"partner_{i:03d}.jpg")
        assert (row["image_a_file"], row["image_b_file"]) == (images if image_0_first else images[::-1])
        assert row["image_a_url"] == "https://img.example/" + row["image_a_file"]
        caption = f"A dog &lt;{i}&gt; sits <b>on</b> the mat &amp; rug."
        foil = f"A dog &lt;{i}&gt; sits <b>under</b> the mat &amp; rug."
        assert (row["text_1"], row["text_2"]) == ((caption, foil) if caption_0_first else (foil, caption))
        image_orders.add(image_0_first)
        text_orders.add(caption_0_first)
    assert image_orders == text_orders == {True, False}           # both orders occur in six groups
    template = (tmp_path / "batch" / "groups.html").read_text()
    for column in ("item_id", "image_a_url", "image_b_url", "text_1", "text_2"):
        assert "${" + column + "}" in template
    for name in ("text_1", "text_2"):
        assert [template.count(f'name="{name}" value="{v}"') for v in ("A", "B", "both", "neither", "cannot_tell")] == [1] * 5
    assert "caption" not in (tmp_path / "batch" / "groups.csv").read_text().lower()


def test_export_and_load_without_groups_say_so(tmp_path):
    write_jsonl(tmp_path / "relations.jsonl", grouped_records(0, ungrouped=2))
    params = write_params(tmp_path / "params.yaml")
    for action in (["export", "relations", "--groups", "--output", str(tmp_path / "g.csv")],
                   ["load", "relations", "--groups", "--db", str(tmp_path / "a.sqlite")]):
        done = foilforge("annotate", "--params", str(params), *action, "--input", str(tmp_path / "relations.jsonl"))
        assert done.returncode != 0
        assert f"{tmp_path / 'relations.jsonl'}" in done.stderr and "no record has a `group`" in done.stderr
    assert not (tmp_path / "g.csv").exists()


OLD_SCHEMA = """
CREATE TABLE items (item_id TEXT PRIMARY KEY, instrument TEXT NOT NULL, position INTEGER NOT NULL,
    image_file TEXT NOT NULL, text_1 TEXT NOT NULL, text_2 TEXT NOT NULL, caption_first INTEGER NOT NULL);
CREATE TABLE annotators (annotator_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, token_sha256 TEXT NOT NULL UNIQUE);
CREATE TABLE answers (annotator_id INTEGER NOT NULL REFERENCES annotators(annotator_id),
    item_id TEXT NOT NULL REFERENCES items(item_id), choice TEXT NOT NULL,
    answered_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), PRIMARY KEY (annotator_id, item_id));
CREATE INDEX answers_by_item ON answers(item_id);
INSERT INTO items VALUES ('relations:coco:0', 'relations', 0, 'img_000.jpg', 'one', 'two', 1);
INSERT INTO annotators VALUES (1, 'ann1', 'hash');
INSERT INTO answers VALUES (1, 'relations:coco:0', 'second', '2026-01-01T00:00:00.000Z');
"""


def test_a_database_made_before_group_items_keeps_working(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    conn.close()
    assert db.migrate(path) == ["items.kind", "items.image_file_b", "items.image_first", "answers.choice_2"]
    assert db.migrate(path) == []                                       # once only
    assert db.answers_for(path, "relations") == [("relations:coco:0", "ann1", "second", "2026-01-01T00:00:00.000Z")]
    assert db.instruments(path, "pair") == ["relations"] and db.instruments(path, "group") == []
    items = annotate.group_annotation_items(grouped_records(2), seed=0)
    assert db.load_items(path, "relations", items) == (2, 0)
    assert db.load_items(path, "relations", items) == (0, 2)            # identical items: kept, not duplicated
    assert db.instruments(path, "group") == ["relations"]
    changed = [{**items[0], "image_file_b": "elsewhere.jpg"}]
    with pytest.raises(ValueError, match=r"item 'relations:coco:0\|group' is already loaded with different content"):
        db.load_items(path, "relations", changed)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT item_id, kind, image_file, text_1, caption_first FROM items ORDER BY position").fetchall()[0] == (
        "relations:coco:0", "pair", "img_000.jpg", "one", 1)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
