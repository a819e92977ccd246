"""The `foilforge` console script: one subcommand per DVC stage.

Each stage module exposes `add_arguments(parser)` and `main(args) -> int`;
heavy libraries (torch, transformers, spaCy) are imported inside `main`, so
`foilforge --help` stays fast. Paths come only from the command line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from foilforge import timings
from foilforge.errors import ConfigError, GateError, InputError

# subcommand -> (module, one-line help)
COMMANDS = {
    "ingest": ("foilforge.pipeline.stages.ingest", "normalise one source (params.yaml sources.NAME) into a JSONL table"),
    "foil": ("foilforge.pipeline.stages.foil", "apply one instrument's foiler to samples, write foil records (JSONL)"),
    "score": ("foilforge.pipeline.stages.score", "score foil records with the filters params.yaml lists for an instrument (scores stored on each record)"),
    "partners": ("foilforge.pipeline.stages.partners", "find second images that each foil describes (Winoground groups); or mine groups in a released file (--like)"),
    "select": ("foilforge.pipeline.stages.select", "apply the keep rules of params.yaml to scored records; write kept records and metrics"),
    "validate": ("foilforge.pipeline.stages.validate", "human validation: votes -> mturk counts, valid flags, agreement (VALSE Table 5)"),
    "bias": ("foilforge.pipeline.stages.bias", "bias checks for one instrument: JS divergence, class balance, plots"),
    "baseline": ("foilforge.pipeline.stages.baseline", "text-only baseline: causal-LM perplexity of caption vs foil"),
    "export": ("foilforge.pipeline.stages.export", "write VALSE-format benchmark files, manifest and data card"),
    "evaluate": ("foilforge.pipeline.stages.evaluate", "score a benchmark with a scorer and write metrics"),
    "annotate": ("foilforge.pipeline.stages.annotate", "human validation tasks: crowd batch export, annotation server, votes dump"),
    "refilter": ("foilforge.pipeline.stages.refilter", "re-filter a released benchmark file (VALSE, SugarCrepe, foilforge JSONL) through an instrument's filters, adversarial filter and gate"),
    "summary": ("foilforge.pipeline.stages.summary", "print the built benchmark's verdicts, one line per instrument (the data card's first table)"),
    "repro": ("foilforge.pipeline.stages.repro", "dvc repro with every foilforge stage command in one long-lived worker process and dvc.lock written in batches"),
    "check-params": ("foilforge.pipeline.stages.check_params", "validate params.yaml against every registered plug-in's signature"),
    "profile": ("foilforge.pipeline.stages.profile", "print a params profile (profiles/NAME.yaml) as dvc exp run --set-param overrides"),
    "params-doc": ("foilforge.pipeline.stages.params_doc", "write docs/params.md (every params.yaml key) from the schema"),
}

#: commands under their former names: a "pair" is a caption and its foil; the stage finds each record's partners
RENAMED_COMMANDS = {"pair": "partners"}


def _version_line() -> str:
    from foilforge.provenance import version_line

    return version_line()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="foilforge", description="Build and validate vision-and-language foil benchmarks.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=_version_line(),
                        help="print foilforge's version (and git commit, from a checkout) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue  # a stage module not written yet (development only)
        p = sub.add_parser(name, help=help_text, description=(module.__doc__ or help_text).strip().splitlines()[0])
        p.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv=None) -> int:
    timings.start()  # a no-op unless FOILFORGE_STAGE_TIMINGS names a directory (foilforge/timings.py)
    rc = 1
    try:
        rc = _main(argv)
        return rc
    finally:
        timings.finish(sys.argv[1:] if argv is None else list(argv), rc)


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    renamed = next((word for word in argv if not word.startswith("-")), None)
    if renamed in RENAMED_COMMANDS:
        print(f"foilforge {renamed}: error: the command is now `foilforge {RENAMED_COMMANDS[renamed]}`", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args._module.main(args) or 0)
    except (InputError, ConfigError, GateError) as err:
        print(f"foilforge {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
