"""`foilforge score`: every filter an instrument runs scores its foil records; `select` applies the keep rules later
(how: pipeline/scoring.py)."""

from __future__ import annotations

import logging

from foilforge.params import load_params
from foilforge.pipeline.scoring import run

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (a key of params.yaml instruments)")
    parser.add_argument("--input", required=True, help="foil records (JSONL), from `foilforge foil`")
    parser.add_argument("--output", required=True, help="scored records (JSONL), same order as the input")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--cache-dir", default=None,
                        help="journal each scored batch here, so a killed run rescores only the unfinished batches")


def main(args) -> int:
    count = run(load_params(args.params), args.instrument, args.input, args.output, progress=not args.no_progress,
                cache_dir=getattr(args, "cache_dir", None))
    log.info("%s: scored %d records -> %s", args.instrument, count, args.output)
    return 0
