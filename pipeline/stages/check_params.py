"""Validate params.yaml before anything runs: every instrument, filter and model block."""

from __future__ import annotations

from foilforge.errors import ConfigError
from foilforge.params import load_params, load_profile, merge_profile


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


    problems += source_problems(params)
    problems += bias_problems(params, instruments)
    problems += evaluate_problems(params)
    problems += model_problems(params)


    problems += blind_check_problems(params)
    problems += attacker_problems(params, instruments)
    return problems


def attacker_problems(params: dict, instruments: dict) -> list[str]:
    """Every attacker block builds; the adversarial filter's and the gate's settings hold for every instrument
    (the gate keeps a family the filter did not use, and fresh seeds); no per-instrument entry names a stranger."""
    from filters.adversarial import gate_settings, settings_for
    from filters.attackers import build_attacker

    problems = []
    attackers = params.get("attackers") or {}
    if not isinstance(attackers, dict):
        return ["params.yaml attackers must map names to {attacker: <registered name>, args: {...}}"]
    for name, block in sorted(attackers.items()):
        try:
            build_attacker(block, f"params.yaml attackers.{name}")
        except ConfigError as err:
            problems.append(str(err))
    for key in ("adversarial", "gate"):
        entries = (params.get(key) or {}).get("instruments") or {} if isinstance(params.get(key), dict) else {}
        stray = sorted(set(entries) - set(instruments))
        if stray:
            problems.append(f"params.yaml {key}.instruments: {', '.join(stray)} is not an instrument")
    seen = set()
    for name in sorted(instruments):
        for check in (settings_for, gate_settings):
            try:
                check(params, name)
            except ConfigError as err:
                if str(err) not in seen:
                    seen.add(str(err))
                    problems.append(str(err))
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


def source_problems(params: dict) -> list[str]:
    """Every `sources` block: a known format, the files its reader needs named (not read)."""
    from pipeline.stages.ingest import resolve_source

    problems = []
    sources = params.get("sources")
    if not isinstance(sources, dict):
        return ["params.yaml sources must map source names to {format, root, files}"]
    for name in sorted(sources):
        try:
            resolve_source(params, name)
        except ConfigError as err:
            problems.append(str(err))
    return problems


def bias_problems(params: dict, instruments: dict) -> list[str]:
    from pipeline.stages.bias import THRESHOLD_KEYS, instrument_settings

    bias = params.get("bias")
    if bias is not None and not isinstance(bias, dict):
        return [f"params.yaml bias must be a mapping, got {type(bias).__name__}"]
    problems = []
    for name in sorted(set(instruments) | set((bias or {}).get("instruments") or {})):
        try:
            settings = instrument_settings(bias, name)
        except (ConfigError, TypeError, ValueError) as err:
            problems.append(str(err) if isinstance(err, ConfigError) else f"params.yaml bias: {err}")
            continue
        for key, value in settings.items():
            if key in THRESHOLD_KEYS and value is not None and (
                    isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append(f"params.yaml bias ({name}): {key} must be a number or null, got {value!r}")
    stray = sorted(set((bias or {}).get("instruments") or {}) - set(instruments))
    if stray:
        problems.append(f"params.yaml bias.instruments: {', '.join(stray)} is not an instrument")
    return sorted(set(problems), key=problems.index)


def evaluate_problems(params: dict) -> list[str]:
    from pipeline.stages.evaluate import check_settings

    try:
        check_settings(params)
    except ConfigError as err:
        return [str(err)]
    return []


#: model-block keys beyond ModelSpec's own that a role may carry (nli's label map and sanity check, a pinned revision)
MODEL_EXTRA_KEYS = ("label_map", "sanity_check", "revision")


def model_problems(params: dict) -> list[str]:
    """Every `models.*` block: keys and types (name_or_path, device, dtype, batch_size), nothing loaded."""
    from foilforge.models import ModelSpec

    models = params.get("models")
    if models is None:
        return []
    if not isinstance(models, dict):
        return ["params.yaml models must map model roles to model blocks"]
    problems = []
    for role in sorted(models):
        key = f"models.{role}"
        block = models[role]
        if not isinstance(block, (dict, str)):
            problems.append(f"params.yaml {key} must be a mapping (name_or_path, device, dtype, batch_size), got {block!r:.40}")
            continue
        try:
            spec = ModelSpec.from_params(block, key)
        except ConfigError as err:
            problems.append(f"params.yaml {err}")
            continue
        if not isinstance(spec.name_or_path, str):
            problems.append(f"params.yaml {key}.name_or_path must be a string, got {spec.name_or_path!r}")
        if isinstance(spec.batch_size, bool) or not isinstance(spec.batch_size, int) or spec.batch_size < 1:
            problems.append(f"params.yaml {key}.batch_size must be an integer >= 1, got {spec.batch_size!r}")
        unknown = sorted(set(spec.extra) - set(MODEL_EXTRA_KEYS))
        if unknown:
            problems.append(f"params.yaml {key}: unknown key(s) {', '.join(unknown)}; allowed: name_or_path, gguf_file, "
                            f"device, dtype, batch_size, {', '.join(MODEL_EXTRA_KEYS)}")
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
    from foilforge.filter import check as check_filters

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
