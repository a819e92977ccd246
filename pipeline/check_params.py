"""Validate params.yaml before anything runs: every instrument, filter and model block."""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.params import load_params


def add_arguments(parser) -> None:
    pass


def check(params: dict) -> list[str]:
    from pipeline.foil_stage import build_instrument

    problems = []
    for name in sorted((params.get("instruments") or {})):
        try:
            build_instrument(params, name)
        except ConfigError as err:
            problems.append(str(err))
    sources = params.get("sources") or {}
    for name, spec in sorted((params.get("instruments") or {}).items()):
        if isinstance(spec, dict) and spec.get("source") and spec["source"] not in sources:
            problems.append(f"params.yaml instruments.{name}.source {spec['source']!r} is not a key of `sources` ({', '.join(sorted(sources))})")
    return problems


def main(args) -> int:
    problems = check(load_params(args.params))
    for problem in problems:
        print(problem)
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) in {args.params}")
    print(f"{args.params}: ok")
    return 0
