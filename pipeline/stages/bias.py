"""`foilforge bias`: JS divergence, lexical items, class balance and the frequency plot of one instrument (VALSE §4.1,
Table 5; how items are counted: pipeline/bias.py)."""

from __future__ import annotations

import logging
from pathlib import Path

from foilforge.params import load_params
from foilforge.pipeline.bias import run

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (its settings: params.yaml instruments.NAME.bias over bias.defaults)")
    parser.add_argument("--input", required=True, help="filtered foil records (JSONL) or a released VALSE JSON file")
    parser.add_argument("--output-dir", required=True, help="writes bias.json, frequencies.csv, frequencies.png")


def main(args) -> int:
    report = run(load_params(args.params), args.instrument, args.input, args.output_dir)
    js = "n/a" if report["js"] is None else f"{report['js']:.3f}"
    log.info("%s: %d records, %d lexical items, JS %s", args.instrument, report["n_records"], report["n_lexical_items"], js)
    for problem in report["violations"]:
        log.warning("%s: bias threshold exceeded: %s", args.instrument, problem)
    if report["status"] == "fail":
        print(f"foilforge bias: {args.instrument}: thresholds exceeded ({'; '.join(report['violations'])}); "
              f"see {Path(args.output_dir) / 'bias.json'} (set params.yaml bias.on_exceed: warn to continue)")
        return 1
    return 0
