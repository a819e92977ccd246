"""`foilforge validate`: human votes in, `mturk` counts, `valid` flags and VALSE Table 5 figures out (the vote
vocabulary, the gold check and the agreement: pipeline/validation.py)."""

from __future__ import annotations

from foilforge.params import load_params
from foilforge.pipeline.validation import validate


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (params.yaml instruments.NAME)")
    parser.add_argument("--input", required=True, help="filtered records, JSONL (data/filtered/NAME.jsonl)")
    parser.add_argument("--output", required=True, help="records with mturk/valid, JSONL (data/validated/NAME.jsonl)")
    parser.add_argument("--metrics", required=True, help="Table 5 figures, JSON (data/metrics/validate/NAME.json)")
    parser.add_argument("--votes", default=None,
                        help="batch-results CSV (default: params.yaml instruments.NAME.validation.votes, else data/annotations/NAME.csv)")
    parser.add_argument("--group-votes", default=None,
                        help="group votes CSV (Input.item_id, WorkerId, Answer.text_1, Answer.text_2; default: the votes "
                             "file's name with .groups.csv, data/annotations/NAME.groups.csv)")


def main(args) -> int:
    validate(load_params(args.params), args.instrument, args.input, args.output, args.metrics, args.votes,
             args.group_votes)
    return 0
