"""`foilforge refilter`: a released benchmark file through an instrument's filters, refinement, adversarial
filter and gate (how: pipeline/refiltering.py)."""

from __future__ import annotations

import logging

from foilforge.params import load_params
from foilforge.pipeline.refiltering import default_workers, refilter

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("file", help="a released benchmark file: VALSE JSON, SugarCrepe JSON or foilforge JSONL")
    parser.add_argument("--like", required=True, help="the instrument whose filters, refinement and gate to apply")
    parser.add_argument("--output", required=True, help="directory for the kept records and report.json")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes for the attackers' fits (default: the CPUs this process may use; the same "
                             "output with any number)")


def main(args) -> int:
    workers = args.workers if args.workers is not None else default_workers()
    if workers < 1:
        from foilforge.errors import ConfigError

        raise ConfigError(f"--workers must be 1 or more, got {workers}")
    report = refilter(load_params(args.params), args.file, args.like, args.output, progress=not args.no_progress,
                      workers=workers)
    gate = report["gate"] or {}
    attackers = ", ".join(f"{name} {100 * (e['before']['accuracy'] or 0):.1f}% -> {100 * (e['after']['accuracy'] or 0):.1f}%"
                          for name, e in (gate.get("attackers") or {}).items())
    log.info("%s: kept %d of %d (%s); %s", args.file, report["records_after"], report["records_before"],
             attackers or "not configured", "certified" if report["certified"] else f"NOT certified: {report['why']}")
    return 0
