"""`foilforge export`: the benchmark files, the manifest and the data card from the selected, validated records (what
they hold and how: pipeline/release.py); `--format NAME` writes one harness format again."""

from __future__ import annotations

import logging

from foilforge.errors import ConfigError
from foilforge.params import load_params
from foilforge.pipeline.release import emit_again, export

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("--filtered-dir", default=None,
                        help="directory of filtered foil records, <instrument>.jsonl (required unless --format)")
    parser.add_argument("--format", action="append", default=[], dest="formats", metavar="NAME",
                        help="write only this harness format (sugarcrepe, lmms_eval, vlmevalkit, parquet) again from "
                             "the export in --output-dir; repeatable")
    parser.add_argument("--bias-dir", default=None, help="directory with <instrument>/bias.json")
    parser.add_argument("--baseline-dir", default=None, help="directory with <instrument>.json (text-only baseline)")
    parser.add_argument("--rejected-dir", default=None,
                        help="records the select stage rejected, <instrument>.jsonl (for counts before each filter)")
    parser.add_argument("--output-dir", required=True, help="benchmark directory (data/benchmark)")
    parser.add_argument("--validation-dir", default=None,
                        help="human-validation metrics, <instrument>.json (data/metrics/validate)")
    parser.add_argument("--foil-metrics-dir", default=None, help="directory with <instrument>.json (foil stage metrics)")
    parser.add_argument("--select-metrics-dir", default=None,
                        help="directory with <instrument>.json (select stage metrics: the refinement's report)")


def main(args) -> int:
    if args.formats:
        for instrument, formats in emit_again(load_params(args.params), args.output_dir, args.formats).items():
            for name, entry in formats.items():
                log.info("%s: %s: %d records in %s", instrument, name, entry["records"], ", ".join(entry["files"]) or "no file")
        return 0
    if not args.filtered_dir:
        raise ConfigError("foilforge export: --filtered-dir is required (or --format NAME to write one format again)")
    export(load_params(args.params), args.filtered_dir, args.bias_dir, args.baseline_dir, args.output_dir, args.rejected_dir,
           validation_dir=args.validation_dir, foil_metrics_dir=args.foil_metrics_dir,
           select_metrics_dir=args.select_metrics_dir)
    return 0
