"""`foilforge baseline`: the text-only checks of one instrument (VALSE §5.2 Table 2 text LM, the held-out check,
the release gate; how: pipeline/baseline.py)."""

from __future__ import annotations

import logging

from foilforge.params import load_params
from foilforge.pipeline.baseline import run

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (used in the report)")
    parser.add_argument("--input", required=True, help="filtered foil records (JSONL) or a released VALSE JSON file")
    parser.add_argument("--output", required=True, help="summary JSON: acc_r, mean perplexities, model")
    parser.add_argument("--rejected", default=None,
                        help="records the select stage rejected (JSONL): for acc_r before the refinement")
    parser.add_argument("--scores", default=None,
                        help="optional per-record scores JSONL (id, caption_score, foil_score = -perplexity)")


def main(args) -> int:
    summary = run(load_params(args.params), args.instrument, args.input, args.output, args.scores,
                  rejected_path=args.rejected)
    acc = "n/a" if summary["acc_r"] is None else f"{100 * summary['acc_r']:.1f}%"
    log.info("%s: text-only acc_r %s over %d pairs (%s)", args.instrument, acc, summary["n"], summary["model"])
    return 0
