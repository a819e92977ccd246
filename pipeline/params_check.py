"""Validate params.yaml before anything runs: every instrument, filter and model block.
"""

from __future__ import annotations

from functools import partial

from foilforge.errors import ConfigError, config_errors


def check(params: dict, where: str = "params.yaml") -> list[str]:
    """Every problem of a params mapping: the schema's (shape, types, references; foilforge/schema.py), then what
    the plug-ins check against their own signatures (foiler and filter arguments, readers' files, attackers)."""
    from foilforge.schema import problems as schema_problems

    found = schema_problems(params, where, dvc_keys=True)
    for plugin_problems in (instrument_problems, filter_problems, source_problems, evaluate_problems,
                            blind_check_problems, attacker_problems, pairing_problems):
        try:
            found += plugin_problems(params)
        except (TypeError, AttributeError, KeyError, ValueError):
            if not found:
                raise
            # a block the schema already rejected can trip a plug-in check up: its schema problem is reported
    return sorted(dict.fromkeys(found), key=found.index)


def instrument_problems(params: dict) -> list[str]:
    """Every instrument builds: its foiler is registered and takes its args."""
    from foilforge.pipeline.plugins import build_instrument

    return config_errors(partial(build_instrument, params, name) for name in sorted(params.get("instruments") or {}))


def pairing_problems(params: dict) -> list[str]:
    """Every instrument's pairer is registered and takes its args; a null pairer says why."""
    from foilforge.pairing import instrument_pairer
    from foilforge.settings import instrument_settings

    found = config_errors(partial(instrument_pairer, params, name) for name in sorted(params.get("instruments") or {}))
    for name in sorted(params.get("instruments") or {}):
        try:
            settings = instrument_settings(params, name).pairing
        except ConfigError:
            continue  # instrument_pairer above met the same problem and reported it
        if not settings.pairer and not settings.why:
            found.append(f"params.yaml instruments.{name}.pairing: pairer is null and `why` is not given (the data "
                         "card prints why an instrument has no Winoground groups)")
    return found


def attacker_problems(params: dict) -> list[str]:
    """Every attacker block builds; the adversarial filter's and the gate's settings hold for every instrument
    (the gate keeps a family the filter did not use, and fresh seeds)."""
    from foilforge.filters.adversarial import adversarial_settings, gate_apart
    from foilforge.filters.attackers import build_attacker
    from foilforge.settings import instrument_settings

    attackers = sorted((params.get("attackers") or {}).items())
    instruments = sorted(params.get("instruments") or {})
    return config_errors([*(partial(build_attacker, block, f"params.yaml attackers.{name}") for name, block in attackers),
                          *(partial(check, instrument_settings(params, name)) for name in instruments
                            for check in (adversarial_settings, gate_apart))])


def blind_check_problems(params: dict) -> list[str]:
    """The held-out blind scorer must be configured validly and must not be one of the refinement's scorers."""
    from foilforge.filters.plausibility import build_text_scorer
    from foilforge.pipeline.gate import HELD_OUT_KEY, held_out_block

    try:
        block = held_out_block(params)
        held_out = build_text_scorer(block, f"params.yaml {HELD_OUT_KEY}") if block is not None else None
    except ConfigError as err:
        return [str(err)]
    scorers = ((params.get("filters") or {}).get("plausibility") or {}).get("scorers")
    if held_out is None or not scorers:
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


def source_problems(params: dict) -> list[str]:
    """Every `sources` block: a known format, the files its reader needs named (not read)."""
    from foilforge.pipeline.sources.base import resolve_source

    return config_errors(partial(resolve_source, params, name) for name in sorted(params.get("sources") or {}))


def missing_source_roots(params: dict, where: str = "params.yaml") -> list[str]:
    """Every source whose `root` is not a folder here: check-params names the files a source reads, a build needs
    them there (read on the mapping as written, so that it is reported beside the schema's problems)."""
    from pathlib import Path

    return [f"{where} sources.{name}.root: {block.get('root')!r} is not a folder (point it at your download: "
            f"-S sources.{name}.root=DIR{'; make coco-val takes COCO=DIR' if name == 'coco' else ''})"
            for name, block in sorted((params.get("sources") or {}).items())
            if isinstance(block, dict) and not Path(str(block.get("root"))).is_dir()]


def evaluate_problems(params: dict) -> list[str]:
    from foilforge.pipeline.evaluate_scorers import check_settings

    return config_errors([partial(check_settings, params)])


def filter_problems(params: dict) -> list[str]:
    """The filters' settings and every instrument's filters.run / filters.keep, against the registered filters."""
    from foilforge.filter import check as check_filters

    return check_filters(params)
