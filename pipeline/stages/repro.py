"""`foilforge repro`: the pipeline as `dvc repro` runs it, with the `foilforge` stage commands in long-lived workers,
several at once, and dvc.lock written in batches (the runner and why: pipeline/runner/repro.py). `--profile` and
`-S` first write a profile and params into params.yaml, as `dvc exp run -S` does.
"""

from __future__ import annotations

import logging
import sys

from foilforge.pipeline.runner.repro import LOCK_EVERY_S, reproduce

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("targets", nargs="*", help="stages to reproduce, with what they depend on (default: all)")
    parser.add_argument("-f", "--force", action="store_true",
                        help="run the targets even when nothing they depend on changed (as dvc repro --force)")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="stages run at once, each in its own worker (default: one per core, at most 4)")
    parser.add_argument("--lock-every", type=float, default=LOCK_EVERY_S,
                        help=f"seconds between writes of dvc.lock (default {LOCK_EVERY_S:g}; it is always written at the "
                             "end, and a stage that finished since the last write is restored from the run cache)")
    parser.add_argument("--profile", default=None,
                        help="first write profiles/NAME.yaml into params.yaml, as `dvc exp run` with `foilforge "
                             "profile NAME` does (validated first; `git checkout params.yaml` undoes it)")
    parser.add_argument("-S", "--set-param", action="append", default=[], metavar="KEY=VALUE",
                        help="first set a param in params.yaml, as `dvc exp run -S` (after --profile; repeatable)")


def apply_profile(params_path: str, profile: str | None, sets: list[str]) -> list[str]:
    """params.yaml with the profile's overrides and then `sets`, when `foilforge check-params` finds nothing wrong
    with the result; else the problems, and the file untouched."""
    from foilforge.params import load_params, load_profile, profile_overrides
    from foilforge.pipeline.params_check import check, missing_source_roots
    from foilforge.pipeline.runner.dvc_api import write_params

    overrides = profile_overrides(load_profile(profile), load_params(params_path, check=False)) if profile else []
    where = f"{params_path} + profile {profile}" if profile else params_path

    def problems(params: dict) -> list[str]:
        return check(params, where) + missing_source_roots(params, where)

    return write_params(params_path, overrides + list(sets), problems)


def main(args) -> int:
    from foilforge.pipeline.runner.dvc_api import dvc_error_type

    logging.getLogger("dvc").propagate = False  # DVC prints its own lines; the stage's log setup would repeat them

    if args.profile or args.set_param:
        found = apply_profile(args.params, args.profile, args.set_param)
        if found:
            print("\n".join(found), file=sys.stderr)
            return 1
    try:
        ran = reproduce(args.targets, args.force, args.lock_every, args.jobs)
    except KeyboardInterrupt as stop:
        print(f"foilforge repro: interrupted ({stop or 'Ctrl-C'}): the stages that finished are in dvc.lock; "
              "the same command goes on from there", file=sys.stderr)
        return 130
    except dvc_error_type() as err:
        cause = f": {err.__cause__}" if err.__cause__ else ""
        print(f"foilforge repro: error: {err}{cause}", file=sys.stderr)
        return 1
    log.info("%d stage(s) ran%s", len(ran), "" if ran else ": data and pipelines are up to date")
    return 0
