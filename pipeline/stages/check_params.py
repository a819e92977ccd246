"""Validate params.yaml before anything runs: every instrument, filter and model block."""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.params import load_params, load_profile, merge_profile


def add_arguments(parser) -> None:
    parser.add_argument("--profile", default=None,
                        help="validate params.yaml with a profile applied (profiles/NAME.yaml, e.g. paper)")


def check(params: dict) -> list[str]:
    from pipeline.stages.foil import build_instrument

    problems = []
    for name in sorted((params.get("instruments") or {})):
        try:
            build_instrument(params, name)
        except ConfigError as err:
            problems.append(str(err))
    sources = params.get("sources") or {}
    instruments = params.get("instruments") or {}
    for name, spec in sorted(instruments.items()):
        if isinstance(spec, dict) and spec.get("source") and spec["source"] not in sources:
            problems.append(f"params.yaml instruments.{name}.source {spec['source']!r} is not a key of `sources` ({', '.join(sorted(sources))})")
    problems += filter_problems(params, instruments)
    problems += validation_problems(params, instruments)
    return problems


def validation_problems(params: dict, instruments: dict) -> list[str]:
    """The validation block (human votes): its settings, and instrument names under gold and votes."""
    from pipeline.stages.validate import settings_from_params

    try:
        settings = settings_from_params(params)
    except ConfigError as err:
        return [str(err)]
    return [f"params.yaml validation.{key}: {name} is not an instrument ({', '.join(sorted(instruments))})"
            for key in ("gold", "votes") for name in sorted(set(settings[key]) - set(instruments))]


def filter_problems(params: dict, instruments: dict) -> list[str]:
    """The filters block, plus one entry per instrument in filters.run and filters.keep (dvc.yaml lists both keys)."""
    from filters.base import check as check_filters

    problems = check_filters(params)
    filters = params.get("filters") if isinstance(params.get("filters"), dict) else {}
    for key in ("run", "keep"):
        block = filters.get(key) if isinstance(filters.get(key), dict) else {}
        missing = sorted(set(instruments) - set(block))
        if missing:
            problems.append(f"params.yaml filters.{key} has no entry for instrument(s) {', '.join(missing)} "
                            f"(dvc.yaml's {'score' if key == 'run' else 'select'} stage reads filters.{key}.<instrument>; use [] or {{}} for none)")
        stray = sorted(set(block) - set(instruments))
        if stray:
            problems.append(f"params.yaml filters.{key}: {', '.join(stray)} is not an instrument ({', '.join(sorted(instruments))})")
    return problems


def main(args) -> int:
    params = load_params(args.params)
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
