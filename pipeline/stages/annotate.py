"""`foilforge annotate`: human validation tasks: a crowd batch (`export`), the annotation server (`load`, `add-annotator`,
`serve`) and its votes (`dump`); the items, the batch files and the task pages: pipeline/annotation.py."""

from __future__ import annotations

from pathlib import Path

from foilforge.errors import ConfigError, InputError
from foilforge.params import load_params, typed_params
from foilforge.pipeline.annotation import (
    DEFAULT_DB,
    add_annotator,
    candidates,
    dump_instrument,
    dump_votes,
    export_batch,
    export_group_batch,
    load_items,
)


def _seed(args) -> int:
    return typed_params(load_params(args.params)).validation.seed


def _cmd_export(args) -> int:
    if args.format != "mturk":
        raise ConfigError(f"unknown batch format {args.format!r}; supported: mturk")
    write = export_group_batch if args.groups else export_batch
    write(candidates(args.input, args.instrument, args.groups), args.output, _seed(args), args.image_url_prefix)
    return 0


def _cmd_load(args) -> int:
    added, same = load_items(args.db, args.instrument, candidates(args.input, args.instrument, args.groups),
                             _seed(args), args.groups)
    print(f"{args.instrument}: {added} {'group item(s)' if args.groups else 'item(s)'} added, {same} already loaded "
          f"({args.db})")
    return 0


def _cmd_add_annotator(args) -> int:
    print(add_annotator(args.db, args.name))
    return 0


def _cmd_serve(args) -> int:
    from foilforge.pipeline.stages.annotate_app import server

    if args.image_root and not Path(args.image_root).is_dir():
        raise InputError(args.image_root, "image root is not a directory")
    server.serve(args.db, args.image_root, args.host, args.port,
                 typed_params(load_params(args.params)).validation.annotators_per_item)
    return 0


def _cmd_dump(args) -> int:
    dump_votes(args.db, dump_instrument(args.db, args.output, args.instrument, args.groups), args.output,
               groups=args.groups)
    return 0


def add_arguments(parser) -> None:
    import argparse

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    original_add_parser = sub.add_parser

    def add_parser(*args, action, db: bool = False, **kwargs):
        # `--params` after the action too (foilforge annotate export X --params p.yaml); SUPPRESS keeps the outer default
        action_parser = original_add_parser(*args, **kwargs)
        action_parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
        if db:
            action_parser.add_argument("--db", default=DEFAULT_DB, help=f"annotation database (default: {DEFAULT_DB})")
        action_parser.set_defaults(_action=action)
        return action_parser

    sub.add_parser = add_parser

    p = sub.add_parser("export", help="write a crowd batch: one CSV row per item, plus an HTML task template", action=_cmd_export)
    p.add_argument("instrument")
    p.add_argument("--format", default="mturk", help="batch format (mturk)")
    p.add_argument("--input", default=None, help="records, JSONL (default: data/filtered/INSTRUMENT.jsonl)")
    p.add_argument("--output", required=True, help="batch CSV; the template is written next to it (.html)")
    p.add_argument("--image-url-prefix", default="", help="prepended to image_file for the image_url column")
    p.add_argument("--groups", action="store_true",
                   help="one row per Winoground group (both images, both texts; which image does each text describe?)")

    p = sub.add_parser("load", help="put an instrument's items into the server database", db=True, action=_cmd_load)
    p.add_argument("instrument")
    p.add_argument("--input", default=None, help="records, JSONL (default: data/filtered/INSTRUMENT.jsonl)")
    p.add_argument("--groups", action="store_true", help="load the instrument's Winoground groups instead of its pairs")

    p = sub.add_parser("add-annotator", help="register an annotator and print their token (shown once)", db=True, action=_cmd_add_annotator)
    p.add_argument("name")

    p = sub.add_parser("serve", help="run the annotation web app", db=True, action=_cmd_serve)
    p.add_argument("--image-root", default=None, help="directory the images are served from (/images/FILE)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)

    p = sub.add_parser("dump", help="write the server's votes as a batch-results CSV", db=True, action=_cmd_dump)
    p.add_argument("--instrument", default=None, help="instrument to dump (default: the output file's stem)")
    p.add_argument("--output", required=True, help="data/annotations/INSTRUMENT.csv (with --groups: INSTRUMENT.groups.csv)")
    p.add_argument("--groups", action="store_true", help="the answers to the group items (Answer.text_1, Answer.text_2)")


def main(args) -> int:
    return int(args._action(args) or 0)
