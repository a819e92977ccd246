"""Validate params.yaml before anything runs: every instrument, filter and model block."""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.params import load_params


def add_arguments(parser) -> None:
    pass


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
    problems += blind_check_problems(params)
    return problems


def blind_check_problems(params: dict) -> list[str]:
    """The held-out blind scorer must be configured validly and must not be one of the refinement's scorers."""
    from filters.plausibility import build_text_scorer
    from pipeline.stages.baseline import HELD_OUT_KEY, held_out_block

    try:
        block = held_out_block(params)
        held_out = build_text_scorer(block, f"params.yaml {HELD_OUT_KEY}") if block is not None else None
    except ConfigError as err:
        return [str(err)]
    settings = (params.get("filters") or {}).get("plausibility") if isinstance(params.get("filters"), dict) else None
    scorers = (settings or {}).get("scorers") if isinstance(settings, dict) else None
    if held_out is None or not isinstance(scorers, dict):
        return []
    problems = []
    for name, scorer_block in sorted(scorers.items()):
        try:
            scorer = build_text_scorer(scorer_block, f"params.yaml filters.plausibility.scorers.{name}")
        except ConfigError:
            continue  # reported by the filters check
        if scorer.identity() == held_out.identity():
            problems.append(f"params.yaml {HELD_OUT_KEY} is the same model as filters.plausibility.scorers.{name} "
                            f"({held_out.describe()}): the held-out blind check must use a scorer the refinement "
                            f"did not balance against (e.g. gpt2 held out when refining on SmolLM2, or another n-gram)")
    return problems


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
    problems = check(load_params(args.params))
    for problem in problems:
        print(problem)
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) in {args.params}")
    print(f"{args.params}: ok")
    return 0
