"""`foilforge foil`: one instrument (a foiler and its args, params.yaml `instruments.NAME`) on a JSONL of samples
(which samples, batches on the engine, the journal: pipeline/foiling.py)."""

from __future__ import annotations

from foilforge.params import load_params
from foilforge.pipeline.foiling import foil_file


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name, a key of params.yaml `instruments`")
    parser.add_argument("--input", required=True, help="samples, one JSON object a line (ingest output or your own)")
    parser.add_argument("--output", required=True, help="foil records, one JSON object a line")
    parser.add_argument("--seed", type=int, default=None, help="override params.yaml `seed`")
    parser.add_argument("--metrics", default=None, help="write the foiler's run statistics here (JSON)")
    parser.add_argument("--cache-dir", default=None,
                        help="journal model scores here (relations: one line per chunk of slots), so a killed run "
                             "resumes where it stopped and a rerun with the same scorer and slots rescores nothing")


def main(args) -> int:
    params = load_params(args.params)
    foil_file(params, args.instrument, args.input, args.output, args.seed, getattr(args, "metrics", None),
              getattr(args, "cache_dir", None))
    return 0
