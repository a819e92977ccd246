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

from foilforge.errors import ConfigError, InputError
from foilforge.io import atomic_write
from foilforge.params import load_params

log = logging.getLogger(__name__)

DEFAULT_DB = "data/annotations/annotations.sqlite"
BATCH_COLUMNS = ("item_id", "image_file", "image_url", "text_1", "text_2")
RESULT_COLUMNS = ("Input.item_id", "WorkerId", "Answer.choice", "SubmitTime")
GROUP_BATCH_COLUMNS = ("item_id", "image_a_file", "image_a_url", "image_b_file", "image_b_url", "text_1", "text_2")
GROUP_RESULT_COLUMNS = ("Input.item_id", "WorkerId", "Answer.text_1", "Answer.text_2", "SubmitTime")


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


GROUP_MTURK_TEMPLATE = """<!-- foilforge group task template for Amazon Mechanical Turk.
     Columns of the batch file: ${item_id} ${image_a_file} ${image_a_url} ${image_b_file} ${image_b_url} ${text_1} ${text_2}.
     The answers come back as Answer.text_1 and Answer.text_2: A | B | both | neither | cannot_tell. -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<crowd-form answer-format="flatten-objects">
  <style>
    .ff { max-width: 900px; font: 16px/1.4 sans-serif; }
    .ff .images { display: flex; gap: 10px; }
    .ff figure { flex: 1; margin: 0; text-align: center; }
    .ff figure img { max-width: 100%; max-height: 45vh; display: block; margin: 0 auto; }
    .ff figcaption { font-weight: bold; font-size: 1.3rem; }
    .ff fieldset { margin: 10px 0; border: 1px solid #999; border-radius: 6px; }
    .ff legend { font-size: 1.1rem; } .ff label { display: inline-block; padding: 4px 10px 4px 0; }
  </style>
  <div class="ff">
    <p>You will see two images, A and B, and two short texts. For each text, say which image it accurately
       describes. The parts where the texts differ are in bold.</p>
    <div class="images">
      <figure><figcaption>A</figcaption><img src="${image_a_url}" alt="image A (${image_a_file})"></figure>
      <figure><figcaption>B</figcaption><img src="${image_b_url}" alt="image B (${image_b_file})"></figure>
    </div>
    <input type="hidden" name="item_id" value="${item_id}">
    <fieldset><legend>Text 1: ${text_1}</legend>
      <p>Which image does it describe?</p>
      <label><input type="radio" name="text_1" value="A" required> A</label>
      <label><input type="radio" name="text_1" value="B"> B</label>
      <label><input type="radio" name="text_1" value="both"> Both</label>
      <label><input type="radio" name="text_1" value="neither"> Neither</label>
      <label><input type="radio" name="text_1" value="cannot_tell"> I cannot tell</label>
    </fieldset>
    <fieldset><legend>Text 2: ${text_2}</legend>
      <p>Which image does it describe?</p>
      <label><input type="radio" name="text_2" value="A" required> A</label>
      <label><input type="radio" name="text_2" value="B"> B</label>
      <label><input type="radio" name="text_2" value="both"> Both</label>
      <label><input type="radio" name="text_2" value="neither"> Neither</label>
      <label><input type="radio" name="text_2" value="cannot_tell"> I cannot tell</label>
    </fieldset>
  </div>
  <script>
    // keys 1-5 answer text 1, then text 2 (A, B, both, neither, cannot tell); a and b work too
    document.addEventListener("keydown", function (e) {
      var i = "12345".indexOf(e.key);
      if (i < 0) i = "ab".indexOf(e.key.toLowerCase());
      if (i < 0) return;
      var name = document.querySelector('input[name="text_1"]:checked') ? "text_2" : "text_1";
      document.querySelectorAll('input[name="' + name + '"]')[i].checked = true;
    });
  </script>
</crowd-form>
"""


def export_group_batch(records: list[dict], output, seed: int, image_url_prefix: str = "") -> tuple[Path, Path]:
    """Write the group batch CSV (one row per grouped record) and its task template next to it (.html)."""
    output = Path(output)
    items = group_annotation_items(records, seed)
    with atomic_write(output) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(GROUP_BATCH_COLUMNS)
        for item in items:
            writer.writerow([item["item_id"], item["image_file"], image_url_prefix + quote(item["image_file"]),
                             item["image_file_b"], image_url_prefix + quote(item["image_file_b"]),
                             item["text_1"], item["text_2"]])
    template = output.with_suffix(".html")
    with atomic_write(template) as handle:
        handle.write(GROUP_MTURK_TEMPLATE)
    log.info("wrote %d groups to %s (record's image as A in %d, caption as text 1 in %d) and the task template %s",
             len(items), output, sum(i["image_first"] for i in items), sum(i["caption_first"] for i in items), template)
    return output, template


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


def _settings(args):
    from foilforge.pipeline.validation import settings_from_params

    return settings_from_params(load_params(args.params))


def _grouped_candidates(args) -> list[dict]:
    path = args.input or f"data/filtered/{args.instrument}.jsonl"
    records = [r for r in read_candidates(path) if isinstance(r.get("group"), dict)]
    if not records:
        raise InputError(path, "no record has a `group` (a second image): nothing to validate as groups "
                               "(pairing is configured per instrument: params.yaml instruments.<I>.pairing)")
    return records


def _cmd_export(args) -> int:
    if args.format != "mturk":
        raise ConfigError(f"unknown batch format {args.format!r}; supported: mturk")
    if args.groups:
        export_group_batch(_grouped_candidates(args), args.output, _settings(args)["seed"], args.image_url_prefix)
        return 0
    records = read_candidates(args.input or f"data/filtered/{args.instrument}.jsonl")
    export_batch(records, args.output, _settings(args)["seed"], args.image_url_prefix)
    return 0


def _cmd_load(args) -> int:
    from foilforge.pipeline.stages.annotate_app import db

    seed = _settings(args)["seed"]
    if args.groups:
        items = group_annotation_items(_grouped_candidates(args), seed)
    else:
        items = annotation_items(read_candidates(args.input or f"data/filtered/{args.instrument}.jsonl"), seed)
    try:
        added, same = db.load_items(args.db, args.instrument, items)
    except ValueError as err:
        raise InputError(args.db, str(err)) from None
    what = "group item(s)" if args.groups else "item(s)"
    print(f"{args.instrument}: {added} {what} added, {same} already loaded ({args.db})")
    return 0


def _cmd_add_annotator(args) -> int:
    from foilforge.pipeline.stages.annotate_app import db

    try:
        token = db.add_annotator(args.db, args.name)
    except ValueError as err:
        raise InputError(args.db, str(err), field="name") from None
    print(token)
    return 0


def _cmd_serve(args) -> int:
    from foilforge.pipeline.stages.annotate_app import server

    if args.image_root and not Path(args.image_root).is_dir():
        raise InputError(args.image_root, "image root is not a directory")
    server.serve(args.db, args.image_root, args.host, args.port, _settings(args)["annotators_per_item"])
    return 0


def _cmd_dump(args) -> int:
    from foilforge.pipeline.stages.annotate_app import db

    if not Path(args.db).is_file():
        raise InputError(args.db, "annotation database not found")
    kind = "group" if args.groups else "pair"
    loaded = db.instruments(args.db, kind)
    instrument = args.instrument or Path(args.output).stem
    if args.groups and not args.instrument and instrument.endswith(".groups"):
        instrument = instrument[: -len(".groups")]
    if instrument not in loaded:
        what = "group items" if args.groups else "items"
        raise InputError(args.db, f"no {what} of instrument {instrument!r} loaded (loaded: {', '.join(loaded) or 'none'}); "
                                  "pass --instrument")
    dump_votes(args.db, instrument, args.output, groups=args.groups)
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
    p.add_argument("--groups", action="store_true",
                   help="one row per Winoground group (both images, both texts; which image does each text describe?)")
    p.set_defaults(_action=_cmd_export)

    p = sub.add_parser("load", help="put an instrument's items into the server database")
    p.add_argument("instrument")
    p.add_argument("--input", default=None, help="records, JSONL (default: data/filtered/INSTRUMENT.jsonl)")
    p.add_argument("--groups", action="store_true", help="load the instrument's Winoground groups instead of its pairs")
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
    p.add_argument("--output", required=True, help="data/annotations/INSTRUMENT.csv (with --groups: INSTRUMENT.groups.csv)")
    p.add_argument("--groups", action="store_true", help="the answers to the group items (Answer.text_1, Answer.text_2)")
    p.set_defaults(_action=_cmd_dump)


def main(args) -> int:
    return int(args._action(args) or 0)
