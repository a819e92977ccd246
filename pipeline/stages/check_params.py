"""`foilforge check-params`: params.yaml (optionally with a profile) validated before anything runs (every
check: pipeline/params_check.py)."""

from __future__ import annotations

from foilforge.errors import ConfigError
from foilforge.params import load_params, load_profile, merge_profile
from foilforge.pipeline.params_check import check


def add_arguments(parser) -> None:
    parser.add_argument("--profile", default=None,
                        help="validate params.yaml with a profile applied (profiles/NAME.yaml, e.g. paper)")


def main(args) -> int:
    params = load_params(args.params, check=False)  # every problem is printed below, not only the first
    where = args.params
    if getattr(args, "profile", None):
        params = merge_profile(params, load_profile(args.profile))
        where = f"{args.params} + profile {args.profile}"
    problems = check(params)
    for problem in problems:
        print(problem)
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) in {where}")
    print(f"{where}: ok")
    return 0
