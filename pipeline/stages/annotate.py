"""Collect human judgements on foils (VALSE §4.4, App. E): a crowd batch or the own annotation server.

Subcommands:
  export INSTRUMENT --format mturk --output batch.csv   one row per item + an HTML task template (batch.html)
  load INSTRUMENT                                       put the instrument's items into the server database
  add-annotator NAME                                    register an annotator; prints the token (stored hashed)
  serve                                                 run the annotation web app (FastAPI on uvicorn)
  dump --output data/annotations/INSTRUMENT.csv         the server's votes as a batch-results CSV

Each item shows the image and two numbered texts, the caption first in half of the items (a
seeded coin per item, `validate.caption_first`, kept out of every file and response an
annotator sees) with the differing words in bold. Both routes produce the same batch-results
CSV (`Input.item_id`, `WorkerId`, `Answer.choice`), which the validate stage reads.
"""

from __future__ import annotations

import csv
import difflib
import html
import logging
import re
from pathlib import Path
from urllib.parse import quote

from foilforge.errors import ConfigError, InputError
from foilforge.io import atomic_write
from foilforge.params import load_params

log = logging.getLogger(__name__)

DEFAULT_DB = "data/annotations/annotations.sqlite"
BATCH_COLUMNS = ("item_id", "image_file", "image_url", "text_1", "text_2")
RESULT_COLUMNS = ("Input.item_id", "WorkerId", "Answer.choice", "SubmitTime")


# ---------------------------------------------------------------- the two texts

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
    from pipeline.stages.validate import caption_first

    items = []
    for record in records:
        item_id = str(record["id"])
        caption_html, foil_html = marked_texts(record)
        first = caption_first(item_id, seed)
        items.append({"item_id": item_id, "image_file": str(record.get("image_file") or ""),
                      "text_1": caption_html if first else foil_html,
                      "text_2": foil_html if first else caption_html, "caption_first": first})
    return items


def is_suspect(record: dict) -> bool:
    """True when the select stage marked the record a suspect: the attackers get it confidently wrong, so its
    foil may well be true of the image (pipeline/stages/select.py)."""
    return any(isinstance(result, dict) and result.get("suspect") for result in (record.get("filters") or {}).values())


def read_candidates(path) -> list[dict]:
    """The records that passed every filter (what export would write before validation): the suspects first,
    then the others, each by id."""
    from foilforge.records import passed_all, read_instrument

    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found (run the pipeline up to select first, or pass --input)")
    return sorted((r for r in read_instrument(path) if passed_all(r)), key=lambda r: (not is_suspect(r), str(r["id"])))


# ---------------------------------------------------------------- route 1: a crowd batch

MTURK_TEMPLATE = """<!-- foilforge task template for Amazon Mechanical Turk (VALSE App. E).
     Columns of the batch file: ${item_id} ${image_file} ${image_url} ${text_1} ${text_2}.
     The answer comes back as Answer.choice: first | second | both | neither | cannot_tell. -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<crowd-form answer-format="flatten-objects">
  <style>
    .ff { max-width: 720px; font: 16px/1.4 sans-serif; }
    .ff img { max-width: 100%; max-height: 50vh; display: block; margin-bottom: 10px; }
    .ff ol { padding-left: 1.6em; } .ff li { margin-bottom: 6px; font-size: 1.1rem; }
    .ff label { display: block; padding: 6px 0; }
  </style>
  <div class="ff">
    <p>You will see an image accompanied by two short texts. Judge which of the two texts accurately
       describes what can be seen in the image. The parts where the texts differ are in bold.</p>
    <img src="${image_url}" alt="image to judge (${image_file})">
    <ol><li>${text_1}</li><li>${text_2}</li></ol>
    <p>Which of the two texts accurately describes what can be seen in the image?</p>
    <input type="hidden" name="item_id" value="${item_id}">
    <label><input type="radio" name="choice" value="first" required> 1. The first, but not the second</label>
    <label><input type="radio" name="choice" value="second"> 2. The second, but not the first</label>
    <label><input type="radio" name="choice" value="both"> 3. Both of them</label>
    <label><input type="radio" name="choice" value="neither"> 4. Neither of the two</label>
    <label><input type="radio" name="choice" value="cannot_tell"> 5. I cannot tell</label>
  </div>
  <script>
    document.addEventListener("keydown", function (e) {
      var i = "12345".indexOf(e.key);
      if (i >= 0) document.querySelectorAll('input[name="choice"]')[i].checked = true;
    });
  </script>
</crowd-form>
"""


def export_batch(records: list[dict], output, seed: int, image_url_prefix: str = "") -> tuple[Path, Path]:
    """Write the batch CSV (one row per item) and the task template next to it (same name, .html)."""
    output = Path(output)
    items = annotation_items(records, seed)
    with atomic_write(output) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(BATCH_COLUMNS)
        for item in items:
            url = image_url_prefix + quote(item["image_file"])
            writer.writerow([item["item_id"], item["image_file"], url, item["text_1"], item["text_2"]])
    template = output.with_suffix(".html")
    with atomic_write(template) as handle:
        handle.write(MTURK_TEMPLATE)
    share = sum(i["caption_first"] for i in items) / len(items) if items else 0.0
    log.info("wrote %d items to %s (caption first in %.0f%%) and the task template %s",
             len(items), output, 100 * share, template)
    return output, template


# ---------------------------------------------------------------- route 2: the own server

def dump_votes(db_path, instrument: str, output) -> int:
    from pipeline.stages.annotate_app import db

    rows = db.answers_for(db_path, instrument)
    with atomic_write(output) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RESULT_COLUMNS)
        writer.writerows(rows)
    log.info("wrote %d answers of %s to %s", len(rows), instrument, output)
    return len(rows)


def _settings(args):
    from pipeline.stages.validate import settings_from_params

    return settings_from_params(load_params(args.params))


def _cmd_export(args) -> int:
    if args.format != "mturk":
        raise ConfigError(f"unknown batch format {args.format!r}; supported: mturk")
    records = read_candidates(args.input or f"data/filtered/{args.instrument}.jsonl")
    export_batch(records, args.output, _settings(args)["seed"], args.image_url_prefix)
    return 0


def _cmd_load(args) -> int:
    from pipeline.stages.annotate_app import db

    records = read_candidates(args.input or f"data/filtered/{args.instrument}.jsonl")
    try:
        added, same = db.load_items(args.db, args.instrument, annotation_items(records, _settings(args)["seed"]))
    except ValueError as err:
        raise InputError(args.db, str(err)) from None
    print(f"{args.instrument}: {added} item(s) added, {same} already loaded ({args.db})")
    return 0


def _cmd_add_annotator(args) -> int:
    from pipeline.stages.annotate_app import db

    try:
        token = db.add_annotator(args.db, args.name)
    except ValueError as err:
        raise InputError(args.db, str(err), field="name") from None
    print(token)
    return 0


def _cmd_serve(args) -> int:
    from pipeline.stages.annotate_app import server

    if args.image_root and not Path(args.image_root).is_dir():
        raise InputError(args.image_root, "image root is not a directory")
    server.serve(args.db, args.image_root, args.host, args.port, _settings(args)["annotators_per_item"])
    return 0


def _cmd_dump(args) -> int:
    from pipeline.stages.annotate_app import db

    if not Path(args.db).is_file():
        raise InputError(args.db, "annotation database not found")
    loaded = db.instruments(args.db)
    instrument = args.instrument or Path(args.output).stem
    if instrument not in loaded:
        raise InputError(args.db, f"no items of instrument {instrument!r} loaded (loaded: {', '.join(loaded) or 'none'}); "
                                  "pass --instrument")
    dump_votes(args.db, instrument, args.output)
    return 0


def add_arguments(parser) -> None:
    import argparse

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    original_add_parser = sub.add_parser

    def add_parser(*args, **kwargs):
        # `--params` after the action too (foilforge annotate export X --params p.yaml); SUPPRESS keeps the outer default
        action_parser = original_add_parser(*args, **kwargs)
        action_parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
        return action_parser

    sub.add_parser = add_parser

    p = sub.add_parser("export", help="write a crowd batch: one CSV row per item, plus an HTML task template")
    p.add_argument("instrument")
    p.add_argument("--format", default="mturk", help="batch format (mturk)")
    p.add_argument("--input", default=None, help="records, JSONL (default: data/filtered/INSTRUMENT.jsonl)")
    p.add_argument("--output", required=True, help="batch CSV; the template is written next to it (.html)")
    p.add_argument("--image-url-prefix", default="", help="prepended to image_file for the image_url column")
    p.set_defaults(_action=_cmd_export)

    p = sub.add_parser("load", help="put an instrument's items into the server database")
    p.add_argument("instrument")
    p.add_argument("--input", default=None, help="records, JSONL (default: data/filtered/INSTRUMENT.jsonl)")
    p.add_argument("--db", default=DEFAULT_DB, help=f"annotation database (default: {DEFAULT_DB})")
    p.set_defaults(_action=_cmd_load)

    p = sub.add_parser("add-annotator", help="register an annotator and print their token (shown once)")
    p.add_argument("name")
    p.add_argument("--db", default=DEFAULT_DB, help=f"annotation database (default: {DEFAULT_DB})")
    p.set_defaults(_action=_cmd_add_annotator)

    p = sub.add_parser("serve", help="run the annotation web app")
    p.add_argument("--db", default=DEFAULT_DB, help=f"annotation database (default: {DEFAULT_DB})")
    p.add_argument("--image-root", default=None, help="directory the images are served from (/images/FILE)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(_action=_cmd_serve)

    p = sub.add_parser("dump", help="write the server's votes as a batch-results CSV")
    p.add_argument("--db", default=DEFAULT_DB, help=f"annotation database (default: {DEFAULT_DB})")
    p.add_argument("--instrument", default=None, help="instrument to dump (default: the output file's stem)")
    p.add_argument("--output", required=True, help="data/annotations/INSTRUMENT.csv")
    p.set_defaults(_action=_cmd_dump)


def main(args) -> int:
    return int(args._action(args) or 0)
