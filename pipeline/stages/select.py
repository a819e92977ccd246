"""`foilforge select`: the keep rules of params.yaml on scored records, the refinement, the adversarial filter and
the pairable choice; no model runs, so a threshold change reruns only this (how: pipeline/selection.py)."""

from __future__ import annotations

import logging

from foilforge.params import load_params
from foilforge.pipeline.selection import run

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (a key of params.yaml instruments)")
    parser.add_argument("--input", required=True, help="scored records (JSONL), from `foilforge score`")
    parser.add_argument("--output", required=True, help="kept records (JSONL)")
    parser.add_argument("--rejected", required=True, help="rejected records with their passed flags (JSONL)")
    parser.add_argument("--metrics", required=True, help="counts per filter and the funnel (JSON)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--partners", default=None, help="each record's partner images (JSONL), from `foilforge partners`: "
                        "prefer candidates with one, and group the kept records (Winoground groups)")
    parser.add_argument("--funnel", default=None, help="the funnel as plot data, `step,records` (CSV; `dvc plots show`)")


def main(args) -> int:
    metrics = run(load_params(args.params), args.instrument, args.input, args.output, args.rejected, args.metrics,
                  args.funnel, progress=not args.no_progress, partners_path=args.partners)
    log.info("%s: kept %d of %d records (%s)", args.instrument, metrics["kept"], metrics["input"],
             ", ".join(f"{k} {v}" for k, v in metrics["funnel"].items()))
    return 0
