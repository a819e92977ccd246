"""`foilforge partners`: each record's partners, second images its foil describes (Winoground groups), or `--mine`
for a released file (how: pipeline/partners.py)."""

from __future__ import annotations

import logging

from foilforge.errors import ConfigError
from foilforge.params import load_params
from foilforge.pipeline.partners import find, mine

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("target", help="an instrument (a key of params.yaml instruments), or with --like a released file")
    parser.add_argument("--like", default=None, help="mine groups inside the released FILE with this instrument's pairer rules")
    parser.add_argument("--input", default=None, help="scored records (JSONL), from `foilforge score`")
    parser.add_argument("--samples", default=None, help="the instrument's ingested source (JSONL), from `foilforge ingest`")
    parser.add_argument("--output", required=True, help="partners (JSONL); with --like: the output directory")
    parser.add_argument("--metrics", default=None, help="counts (JSON)")


def main(args) -> int:
    params = load_params(args.params)
    if args.like:
        report = mine(params, args.target, args.like, args.output)
        log.info("%s: %d groups of %d records (coverage %s)", args.target, report["groups"], report["records"],
                 report["coverage"])
        return 0
    if not args.input or not args.metrics:
        raise ConfigError("pair INSTRUMENT needs --input (scored records) and --metrics; or pair FILE --like INSTRUMENT")
    metrics = find(params, args.target, args.input, args.samples, args.output, args.metrics)
    log.info("%s: %d of %d records have a partner (%s)", args.target, metrics["with_partners"], metrics["records"],
             metrics["pairer"] or metrics["why"])
    return 0
