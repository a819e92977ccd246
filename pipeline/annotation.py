"""Collect human judgements on foils (VALSE §4.4, App. E): a crowd batch or the own annotation server.

Subcommands:
  export INSTRUMENT --format mturk --output batch.csv   one row per item + an HTML task template (batch.html)
  load INSTRUMENT                                       put the instrument's items into the server database
  add-annotator NAME                                    register an annotator; prints the token (stored hashed)
  serve                                                 run the annotation web app (FastAPI on uvicorn)
  dump --output data/annotations/INSTRUMENT.csv         the server's votes as a batch-results CSV
  (export, load and dump take --groups: the Winoground groups, votes to INSTRUMENT.groups.csv)

Each item shows the image and two numbered texts, the caption first in half of the items (a
seeded coin per item, `pipeline/validation.py caption_first`, kept out of every file and response an
annotator sees) with the differing words in bold. Both routes produce the same batch-results
CSV (`Input.item_id`, `WorkerId`, `Answer.choice`), which the validate stage reads.

With `--groups` (export, load, dump) the items are the Winoground groups instead: both images
(A and B) and both texts (1 and 2), each order a seeded coin per group (`pipeline/validation.py group_orders`),
and for each text the person says which image it describes (`Answer.text_1`, `Answer.text_2`:
A | B | both | neither | cannot_tell), written to a second votes file, `INSTRUMENT.groups.csv`.
"""

from __future__ import annotations

import csv
import difflib
import html
import logging
import re
from pathlib import Path
from urllib.parse import quote

from foilforge.errors import InputError
from foilforge.io import atomic_write

log = logging.getLogger(__name__)


BATCH_COLUMNS = ("item_id", "image_file", "image_url", "text_1", "text_2")
RESULT_COLUMNS = ("Input.item_id", "WorkerId", "Answer.choice", "SubmitTime")
GROUP_BATCH_COLUMNS = ("item_id", "image_a_file", "image_a_url", "image_b_file", "image_b_url", "text_1", "text_2")
GROUP_RESULT_COLUMNS = ("Input.item_id", "WorkerId", "Answer.text_1", "Answer.text_2", "SubmitTime")


def _valid_span(span, text: str):
    if not isinstance(span, (list, tuple)) or len(span) != 2:
        return None
    start, end = span
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
        return None
    return start, end


def bold_span(text: str, span) -> str:
    """HTML of `text` with text[start:end] in <b>; everything else escaped."""
    start, end = span
    return f"{html.escape(text[:start])}<b>{html.escape(text[start:end])}</b>{html.escape(text[end:])}"


def _word_diff_spans(caption: str, foil: str) -> tuple[list, list]:
    """Character spans of the words that differ, for records without provenance spans."""
    tokens = lambda text: [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", text)]
    a, b = tokens(caption), tokens(foil)
    matcher = difflib.SequenceMatcher(a=[t[2] for t in a], b=[t[2] for t in b], autojunk=False)
    spans_a, spans_b = [], []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if i2 > i1:
            spans_a.append((a[i1][0], a[i2 - 1][1]))
        if j2 > j1:
            spans_b.append((b[j1][0], b[j2 - 1][1]))
    return spans_a, spans_b


def _bold_spans(text: str, spans: list) -> str:
    out, last = [], 0
    for start, end in spans:
        out += [html.escape(text[last:start]), "<b>", html.escape(text[start:end]), "</b>"]
        last = end
    out.append(html.escape(text[last:]))
    return "".join(out)


def marked_texts(record: dict) -> tuple[str, str]:
    """(caption HTML, foil HTML) with the differing words in <b>: the foiler's provenance spans, else a word diff."""
    caption, foil = str(record["caption"]), str(record["foil"])
    provenance = record.get("provenance") or (record.get("foilforge") or {}).get("provenance") or {}
    caption_span = _valid_span(provenance.get("caption_span"), caption)
    foil_span = _valid_span(provenance.get("foil_span"), foil)
    if caption_span and foil_span:
        return bold_span(caption, caption_span), bold_span(foil, foil_span)
    spans_caption, spans_foil = _word_diff_spans(caption, foil)
    return _bold_spans(caption, spans_caption), _bold_spans(foil, spans_foil)


def annotation_items(records: list[dict], seed: int) -> list[dict]:
    """One item per record: id, image file, the two texts in the item's seeded order, and that order."""
    from foilforge.pipeline.validation import caption_first

    items = []
    for record in records:
        item_id = str(record["id"])
        caption_html, foil_html = marked_texts(record)
        first = caption_first(item_id, seed)
        items.append({"item_id": item_id, "image_file": str(record.get("image_file") or ""),
                      "text_1": caption_html if first else foil_html,
                      "text_2": foil_html if first else caption_html, "caption_first": first})
    return items


def group_annotation_items(records: list[dict], seed: int) -> list[dict]:
    """One item per grouped record (a `group` with its partner image): the group id, images A and B and texts 1
    and 2 in the group's seeded orders, and those orders (`image_first`: A is the record's own image;
    `caption_first`: text 1 is its caption)."""
    from foilforge.pipeline.validation import group_orders

    items = []
    for record in records:
        group = record.get("group")
        if not isinstance(group, dict):
            continue
        item_id = str(group["id"])
        caption_html, foil_html = marked_texts(record)
        images = (str(record.get("image_file") or ""), str(group["image_1"]))
        image_first, caption_first = group_orders(item_id, seed)
        items.append({"item_id": item_id, "kind": "group",
                      "image_file": images[0] if image_first else images[1],
                      "image_file_b": images[1] if image_first else images[0],
                      "text_1": caption_html if caption_first else foil_html,
                      "text_2": foil_html if caption_first else caption_html,
                      "image_first": image_first, "caption_first": caption_first})
    return items


def is_suspect(record: dict) -> bool:
    """True when the select stage marked the record a suspect: the attackers get it confidently wrong, so its
    foil may well be true of the image (pipeline/selection.py)."""
    return any(isinstance(result, dict) and result.get("suspect") for result in (record.get("filters") or {}).values())


def read_candidates(path) -> list[dict]:
    """The records that passed every filter (what export would write before validation): the suspects first,
    then the others, each by id."""
    from foilforge.records import passed_all, read_instrument

    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found (run the pipeline up to select first, or pass --input)")
    return sorted((r for r in read_instrument(path) if passed_all(r)), key=lambda r: (not is_suspect(r), str(r["id"])))


def task_template(kind: str) -> str:
    """The crowd task's HTML (pipeline/templates/mturk_<kind>.html: `pair` or `group`), written next to a batch."""
    return (Path(__file__).resolve().parent / "templates" / f"mturk_{kind}.html").read_text(encoding="utf-8")


def write_batch(output, columns: tuple, rows: list[list], kind: str) -> tuple[Path, Path]:
    """A crowd batch: the CSV (`columns`, then `rows`) and the `kind` task page next to it (same name, .html)."""
    output = Path(output)
    with atomic_write(output) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    template = output.with_suffix(".html")
    with atomic_write(template) as handle:
        handle.write(task_template(kind))
    return output, template


def export_group_batch(records: list[dict], output, seed: int, image_url_prefix: str = "") -> tuple[Path, Path]:
    """Write the group batch CSV (one row per grouped record) and its task template next to it (.html)."""
    items = group_annotation_items(records, seed)
    rows = [[item["item_id"], item["image_file"], image_url_prefix + quote(item["image_file"]), item["image_file_b"],
             image_url_prefix + quote(item["image_file_b"]), item["text_1"], item["text_2"]] for item in items]
    output, template = write_batch(output, GROUP_BATCH_COLUMNS, rows, "group")
    log.info("wrote %d groups to %s (record's image as A in %d, caption as text 1 in %d) and the task template %s",
             len(items), output, sum(i["image_first"] for i in items), sum(i["caption_first"] for i in items), template)
    return output, template


def export_batch(records: list[dict], output, seed: int, image_url_prefix: str = "") -> tuple[Path, Path]:
    """Write the batch CSV (one row per item) and the task template next to it (same name, .html)."""
    items = annotation_items(records, seed)
    rows = [[item["item_id"], item["image_file"], image_url_prefix + quote(item["image_file"]), item["text_1"],
             item["text_2"]] for item in items]
    output, template = write_batch(output, BATCH_COLUMNS, rows, "pair")
    share = sum(i["caption_first"] for i in items) / len(items) if items else 0.0
    log.info("wrote %d items to %s (caption first in %.0f%%) and the task template %s",
             len(items), output, 100 * share, template)
    return output, template


def dump_votes(db_path, instrument: str, output, groups: bool = False) -> int:
    """The server's answers to one instrument's items (`groups`: to its group items) as a batch-results CSV."""
    from foilforge.pipeline.stages.annotate_app import db

    rows = db.answers_for(db_path, instrument, kind="group" if groups else "pair")
    with atomic_write(output) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(GROUP_RESULT_COLUMNS if groups else RESULT_COLUMNS)
        writer.writerows(rows)
    log.info("wrote %d %sanswers of %s to %s", len(rows), "group " if groups else "", instrument, output)
    return len(rows)


DEFAULT_DB = "data/annotations/annotations.sqlite"


def candidates(path, instrument: str, groups: bool = False) -> list[dict]:
    """The records to put before people (`read_candidates` of `path`, default data/filtered/INSTRUMENT.jsonl); with
    `groups`, those with a second image, and an error naming the file when none has one."""
    path = path or f"data/filtered/{instrument}.jsonl"
    records = read_candidates(path)
    if not groups:
        return records
    records = [r for r in records if isinstance(r.get("group"), dict)]
    if not records:
        raise InputError(path, "no record has a `group` (a second image): nothing to validate as groups "
                               "(pairing is configured per instrument: params.yaml instruments.<I>.pairing)")
    return records


def load_items(db_path, instrument: str, records: list[dict], seed: int, groups: bool = False) -> tuple[int, int]:
    """(items added, items already there) after putting the records' pair items (or group items) into the server's
    database."""
    from foilforge.pipeline.stages.annotate_app import db

    items = group_annotation_items(records, seed) if groups else annotation_items(records, seed)
    try:
        return db.load_items(db_path, instrument, items)
    except ValueError as err:
        raise InputError(db_path, str(err)) from None


def add_annotator(db_path, name: str) -> str:
    """A new annotator's token (shown once)."""
    from foilforge.pipeline.stages.annotate_app import db

    try:
        return db.add_annotator(db_path, name)
    except ValueError as err:
        raise InputError(db_path, str(err), field="name") from None


def dump_instrument(db_path, output, instrument: str | None, groups: bool = False) -> str:
    """The instrument whose votes `dump` writes: the one named, else the output file's stem (less `.groups` for group
    votes); an error naming the database when it holds no items of it."""
    from foilforge.pipeline.stages.annotate_app import db

    if not Path(db_path).is_file():
        raise InputError(db_path, "annotation database not found")
    loaded = db.instruments(db_path, "group" if groups else "pair")
    name = instrument or Path(output).stem
    if groups and not instrument and name.endswith(".groups"):
        name = name[: -len(".groups")]
    if name not in loaded:
        what = "group items" if groups else "items"
        raise InputError(db_path, f"no {what} of instrument {name!r} loaded (loaded: {', '.join(loaded) or 'none'}); "
                                  "pass --instrument")
    return name

