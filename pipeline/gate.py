"""The release gate and what the text-only blind check shares with it: trained attackers out of fold on the records
without the refinement ("before") and on the kept ones ("after"), the certification of the kept ones, and the
held-out scorer's block. The baseline stage writes the gate into its summary; refilter runs it on a released file.
"""

from __future__ import annotations

from contextlib import nullcontext

from foilforge.params import typed_params

HELD_OUT_KEY = "blind_check.held_out"
REFINEMENT = "plausibility"


def held_out_block(params: dict):
    """The held-out scorer's block (params.yaml blind_check.held_out), or None when not configured."""
    return typed_params(params).blind_check.held_out


def refinement_candidates(kept: list[dict], rejected: list[dict]) -> list[dict]:
    """Records that passed every filter but the refinement: the set the refinement chose from."""
    def others_passed(record):
        return all(bool(result.get("passed", True)) for name, result in (record.get("filters") or {}).items()
                   if name != REFINEMENT and isinstance(result, dict))

    return kept + [r for r in rejected if others_passed(r) and REFINEMENT in (r.get("filters") or {})]


def unrefined(kept: list[dict], rejected: list[dict]) -> list[dict]:
    """What the instrument would export without the refinement: per sample, the first candidate that passed every
    other filter (the kept records themselves when nothing was refined)."""
    from foilforge.filters.refinement import candidate_order

    candidates = refinement_candidates(kept, rejected)
    first: dict[str, dict] = {}
    for record in sorted(candidates, key=lambda r: candidate_order(r["id"])):
        first.setdefault(str(record.get("sample_id", record["id"])), record)
    return [first[k] for k in sorted(first)]


def release_gate(params: dict, instrument: str, kept: list[dict], rejected: list[dict], runner=None) -> dict | None:
    """The trained attackers of params.yaml `gate` (kept apart from the adversarial filter's) out of fold on the
    records without the refinement ("before"; by default each at the setting its grid search chose on the kept
    pairs, `gate.before_setting`) and on the kept ones ("after"); `passed` when every attacker is at
    or below max_accuracy on the kept records (filters/attackers/gate.py `certify`: what export enforces). With
    `gate.transfer`, every attacker is also fitted on the rejected records and the instrument's pool (never on a
    kept caption) and scored on the kept ones (`transfer`). Every reading on the kept records, within and transfer,
    is tested (filters/certification.py): `certified` when each is shown within chance +- gate.margin at level
    gate.alpha; else `status` solvable, over-balanced or inconclusive (`needed`: about the pairs that would
    decide), `why` in words, and per reading its `standing`. None without a `gate` block. `runner`: where the
    fold fits run (filters/attackers/runs.py; default the engine's of params.yaml)."""
    from foilforge.filters.adversarial import gate_apart, pool_records, transfer_training
    from foilforge.filters.attackers import certify, certify_transfer
    from foilforge.filters.certification import Settle
    from foilforge.pipeline.engine import engine_settings, job_runner
    from foilforge.settings import instrument_settings

    resolved = instrument_settings(params, instrument)
    if gate_apart(resolved) is None:
        return None
    settings = resolved.gate
    from foilforge.validity import has_votes, refuse_invalid, valid_only

    kept, refused = refuse_invalid(kept)
    if has_votes(kept):  # where people voted, only the pairs they judged valid are certified
        kept = valid_only(kept)
    with (nullcontext(runner) if runner is not None else job_runner(engine_settings(params))) as runner:
        args = dict(blocks=settings.attacker_blocks, folds=settings.folds, seed=settings.seed,
                    repeats=settings.repeats, max_accuracy=settings.max_accuracy, runner=runner)
        # each reading on the kept pairs gets partitions while its decisions could still change (Holm runs over
        # every reading: within and, with transfer, fitted on the removed pairs)
        settle = None if settings.min_repeats is None else Settle(
            first=settings.min_repeats, margin=settings.margin, alpha=settings.alpha,
            readings=len(settings.attacker_blocks) * (2 if settings.transfer else 1))
        after = certify(kept, **args, settle=settle)
        # the before readings only describe what the refinement changed: the certification reads the kept pairs
        before_repeats = settings.before_repeats or settings.repeats
        before_blocks = (at_chosen_settings(settings.attacker_blocks, after) if settings.before_setting == "chosen"
                         else settings.attacker_blocks)
        before = certify(unrefined(kept, rejected), **{**args, "repeats": before_repeats,
                                                       "blocks": before_blocks}) if rejected else after
    transfer = {}
    if settings.transfer:
        # not starved: every attacker also learns from the pairs the filters removed and the instrument's pool
        train = transfer_training(kept, rejected, pool_records(resolved.transfer_pool,
                                                               f"params.yaml instruments.{instrument}.adversarial"))
        transfer = certify_transfer(kept, train, settings.attacker_blocks, settings.seed,
                                    settings.max_accuracy)
    return {"max_accuracy": settings.max_accuracy, "mode": settings.mode, "folds": settings.folds,
            "repeats": settings.repeats, "min_repeats": settings.min_repeats,
            "before_repeats": before_repeats if rejected else settings.repeats, "seed": settings.seed,
            "passed": all(a["passed"] for a in after.values()),
            **certify_readings(after, transfer, settings.margin, settings.alpha), "refused": refused,
            # per attacker fitted on the removed pairs and the pool, on the kept ones (part of the certification)
            "transfer": transfer,
            "attackers": {name: {"before": before[name], "after": result} for name, result in after.items()}}


def at_chosen_settings(blocks: dict[str, dict], readings: dict[str, dict]) -> dict[str, dict]:
    """The gate's attacker blocks with each grid replaced by the setting its reading on the kept pairs chose
    (`setting`): the same attacker at one setting, one fit a fold instead of a nested search over the grid. A block
    without a grid, or a reading without a setting, stays as it is."""
    from foilforge.filters.attackers.grid_search import at_setting

    fixed = {}
    for name, block in blocks.items():
        setting = (readings.get(name) or {}).get("setting")
        fixed[name] = at_setting(block, setting) if block.get("grid") and setting is not None else block
    return fixed


def certify_readings(after: dict[str, dict], transfer: dict[str, dict], margin: float, alpha: float) -> dict:
    """The gate's verdict over every reading on the kept records (within and transfer): margin, alpha, certified,
    status, why, needed and strongest (filters/certification.py), each reading's figures gaining its `standing`
    (and `needed` where inconclusive)."""
    from foilforge.filters.certification import certification, transfer_name

    judged = {**after, **{transfer_name(name): result for name, result in transfer.items()}}
    verdict = certification(judged, margin=margin, alpha=alpha)
    for name, result in judged.items():
        reading = verdict["attackers"][name]
        result["standing"] = reading["standing"]
        result.update({key: reading[key] for key in ("needed", "p_within", "p_chance") if reading.get(key) is not None})
    return {key: verdict[key] for key in ("margin", "alpha", "certified", "status", "why", "needed", "strongest")}
