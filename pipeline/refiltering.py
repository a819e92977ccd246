"""Re-filter a released benchmark file through an instrument's filters, refinement, adversarial filter and gate.

    foilforge refilter FILE --like INSTRUMENT --output DIR [--workers N]

FILE is a VALSE JSON file (`{id: {caption, foil, classes, classes_foil, ...}}`),
a SugarCrepe JSON file (`{"0": {filename, caption, negative_caption}, ...}`) or
a foilforge JSONL file (one record a line with `id`, `caption`, `foil`). Every
pair is scored by the filters of params.yaml `instruments.INSTRUMENT.filters.run`, kept or
dropped by `instruments.INSTRUMENT.filters.keep` (the plausibility refinement with the
adversarial filter of params.yaml `adversarial`, as the select stage does) and
certified by the release gate (params.yaml `gate`; the baseline stage's
attackers). `--like` a SugarCrepe-type instrument (replace_obj, ..., add_att) first refuses the pairs that are
not exactly an edit of its type (foilers/lang/exact_edits.py), counted by reason in `refused`. Writes `DIR/<FILE's name>` in FILE's own format with only the kept
records (as released, in their order) and `DIR/report.json`: `certified` (every gate
reading shown within chance +- gate.margin by equivalence tests at level gate.alpha), else `status`
(solvable, over-balanced or inconclusive: filters/certification.py) and `why`, records
before and after, the records refused by reason (an empty foil, the caption itself, and a foil its caption
entails or paraphrases: the entailment check of foilforge/entailment.py for the edit kind of INSTRUMENT's
foiler, `edit_check` names it with examples) and,
with VALSE's votes, the valid share of all, kept and removed records (the filter
chooses among the valid ones), every gate attacker before/after (accuracy, n, Wilson CI, verdict), the
adversarial filter's rounds, the JS of the changed items and the class balance
before/after. SugarCrepe records carry no changed items: they are the words
that differ between caption and negative caption (difflib). A VALSE record's
pair is its `foil` (or the first of `foils`).

Each text goes through each model once in a run (the pass store of $FOILFORGE_SCORE_CACHE, or with it unset a
temporary one: foilforge/pass_store.py `run_store`), and the model passes and the attackers' fold fits are
spread over `--workers` forked processes (default: the CPUs this process may use); the output is the same bytes
with any number of workers and with or without a store.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from foilforge.io import atomic_write, write_json
from foilforge.released import read_released, to_records

log = logging.getLogger(__name__)


def class_balance(records: list[dict], item_mode: str, path) -> dict:
    from foilforge.filters.adversarial import negation_count
    from foilforge.metrics import js_divergence, majority
    from foilforge.records import frequencies

    captions, foils = frequencies([(r["id"], r) for r in records], item_mode, path)
    return {"records": len(records), "js": js_divergence(captions, foils),
            "caption_majority": majority(captions), "foil_majority": majority(foils),
            "negated_captions": sum(negation_count(r["caption"]) > 0 for r in records),
            "negated_foils": sum(negation_count(r["foil"]) > 0 for r in records)}


def score_released(params: dict, input_path, like: str, progress: bool = True) -> tuple[str, list, list[dict]]:
    """(format, released rows, records scored by `like`'s filters): the model-running half of `refilter`."""
    from foilforge.edits import record_refusal
    from foilforge.filter import build_filter, scored_filters
    from foilforge.pipeline.plugins import instrument_edit_kind
    from foilforge.pipeline.scoring import score_records
    from foilforge.validity import refusal

    if like not in (params.get("instruments") or {}):
        from foilforge.errors import ConfigError

        raise ConfigError(f"--like {like!r} is not an instrument of params.yaml "
                          f"({', '.join(sorted(params.get('instruments') or {}))})")
    fmt, rows = read_released(input_path)
    records = to_records(fmt, rows, input_path, like)
    log.info("%s: %d %s records; filters of %s", input_path, len(records), fmt, like)
    # a pair whose caption entails or paraphrases its foil (foilforge/entailment.py, the edit kind of `like`'s
    # foiler; the edit found by aligning the two texts) is refused and never kept
    kind = instrument_edit_kind(params, like)
    for record in records:
        reason = record_refusal(record, kind) if refusal(record) is None else None
        if reason is not None:
            record[EDIT_REFUSED] = reason
    filters = [build_filter(params, name) for name in scored_filters(params, like)]
    # records that cannot be foils are not scored; they stay in the list, in order, for filter_scored to count
    scorable = [r for r in records if refusal(r) is None and EDIT_REFUSED not in r]
    scored = {r["id"]: r for r in score_records(filters, scorable, input_path, progress)}
    return fmt, rows, [scored.get(r["id"], r) for r in records]


#: the field `score_released` marks a record with when the entailment check refuses it (its reason)
EDIT_REFUSED = "edit_refused"


#: examples of each refusal reason the report shows
EXAMPLES_PER_REASON = 3


def edit_check_report(params: dict, like: str, entailed: list[dict]) -> dict | None:
    """What the entailment check ran with (edit kind, table version and hash, WordNet) and a few pairs it refused
    per reason; None when `like`'s foiler declares no edit kind (its edits are not replacements)."""
    from foilforge.entailment import describe
    from foilforge.pipeline.plugins import instrument_edit_kind

    kind = instrument_edit_kind(params, like)
    if kind is None:
        return None
    examples: dict[str, list] = {}
    for record in entailed:
        shown = examples.setdefault(record[EDIT_REFUSED], [])
        if len(shown) < EXAMPLES_PER_REASON:
            shown.append({"id": record["id"], "caption": record["caption"], "foil": record["foil"]})
    return {**describe(), "kind": kind, "refused": len(entailed), "examples": dict(sorted(examples.items()))}


def edit_refusals_like(params: dict, like: str, records: list[dict]) -> dict[str, str]:
    """{record id: reason} of the released pairs that are not exactly an edit of `like`'s SugarCrepe type (its
    foiler's `exact_edit`; foilers/lang/exact_edits.py); {} when `like` has none. The image's other captions are
    the file's captions of the same image."""
    from foilforge.foiler import FOILERS
    from foilforge.pipeline.selection import exact_edit_refusals

    block = params["instruments"][like]
    edit_type = getattr(FOILERS.get(FOILERS.newest(block["foiler"])), "exact_edit", "") or None
    if edit_type is None:
        return {}
    spacy_model = (block.get("args") or {}).get("spacy_model") or "en_core_web_sm"
    return exact_edit_refusals(records, spacy_model, edit_type, f"params.yaml instruments.{like}.args.spacy_model")


def filter_scored(params: dict, like: str, scored: list[dict], path, progress: bool = True,
                  workers: int = 1) -> tuple[list[dict], dict]:
    """(kept records, report without file names): the keep rules, adversarial filter and gate of `like`; their
    attackers' fold fits on `workers` processes (the same figures with any number)."""
    from foilforge.filter import keep_rules
    from foilforge.filters.adversarial import adversarial_settings
    from foilforge.filters.attackers.runs import ForkedRunner
    from foilforge.pipeline.gate import release_gate
    from foilforge.pipeline.selection import select
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, like)
    entailed = [r for r in scored if EDIT_REFUSED in r]
    checked = [r for r in scored if EDIT_REFUSED not in r]
    kept, rejected, metrics = select(checked, keep_rules(params, like), path, item_mode=settings.bias.items,
                                     adversarial=adversarial_settings(settings), progress=progress,
                                     runner=ForkedRunner(workers),
                                     refused_foils=edit_refusals_like(params, like, checked))
    refinement = (metrics.get("refinement") or {}).get("plausibility") or {}
    refused = dict(metrics["refused"])
    for record in entailed:
        refused[record[EDIT_REFUSED]] = refused.get(record[EDIT_REFUSED], 0) + 1
    return kept, {
        "like": like, "records_before": len(scored), "records_after": len(kept), "funnel": metrics["funnel"],
        # records that cannot be foils (an empty foil, the caption itself) or whose caption entails or paraphrases
        # the foil (the entailment check), by reason: never kept
        "refused": dict(sorted(refused.items())),
        "edit_check": edit_check_report(params, like, entailed),
        # with votes (VALSE's mturk): the valid share of all, kept and removed records; the filter chose among
        # the valid ones only
        "validity": metrics.get("validity"),
        "gate": release_gate(params, like, kept, rejected, runner=ForkedRunner(workers)),
        "adversarial": refinement.get("adversarial"),
        "refinement": {k: v for k, v in refinement.items() if k != "adversarial"},
        "balance": {"before": class_balance(scored, settings.bias.items, path),
                    "after": class_balance(kept, settings.bias.items, path)},
    }


def default_workers() -> int:
    """The CPUs this process may run on."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def refilter(params: dict, input_path, like: str, output_dir, progress: bool = True, workers: int = 1) -> dict:
    from foilforge.lm import pass_workers
    from foilforge.pass_store import run_store

    input_path, output_dir = Path(input_path), Path(output_dir)
    # one model pass per text for the whole run (the plausibility scorer's SmolLM2 pass also gives the probe's
    # states), the passes and the attackers' fits spread over `workers` processes
    with run_store(), pass_workers(workers):
        fmt, rows, scored = score_released(params, input_path, like, progress)
        kept, report = filter_scored(params, like, scored, input_path, progress, workers)
    kept_keys = {r["released_key"] for r in kept}
    output_dir.mkdir(parents=True, exist_ok=True)
    out_path = output_dir / input_path.name
    kept_rows = [(key, row) for key, row in rows if key in kept_keys]
    if fmt == "foilforge":
        with atomic_write(out_path) as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for _, row in kept_rows)
    else:
        write_json(out_path, dict(kept_rows))
    gate = report["gate"] or {}
    report = {"input": str(input_path), "format": fmt, "output": str(out_path),
              # the release gate's verdict first: certified (every reading shown within chance +- gate.margin), else
              # solvable, over-balanced or inconclusive (filters/certification.py), and why
              "certified": bool(gate.get("certified")), "status": gate.get("status"),
              "why": gate.get("why") if gate else "no gate block in params.yaml: nothing certifies the kept pairs",
              **report}
    write_json(output_dir / "report.json", report)
    return report
