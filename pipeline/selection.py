"""The keep rules applied to scored records (`select`): what the select stage runs on an instrument and refilter
on a released file. The select stage's docstring (pipeline/stages/select.py) says what the rules, the set rules
and the refusals do."""

from __future__ import annotations

import logging

from foilforge.errors import InputError
from foilforge.records import Record

log = logging.getLogger(__name__)


def _one_or_all(values: set):
    values = sorted(str(v) for v in values if v is not None)
    return values[0] if len(values) == 1 else (values or None)


def exact_edit_refusals(records: list[Record], spacy_model: str, edit_type: str | None = None,
                        param_key: str = "spacy_model") -> dict[str, str]:
    """{record id: why it is not exactly an edit of its SugarCrepe type} (foilers/lang/exact_edits.py): the type of
    each record's `provenance.edit`, or `edit_type` for records without one (a released file refiltered `--like` a
    SugarCrepe-type instrument); records of neither are not judged here."""
    typed: dict[str, list] = {}
    for record in records:
        edit_type_of = ((record.get("provenance") or {}).get("edit") or {}).get("type") or edit_type
        if edit_type_of:
            typed.setdefault(edit_type_of, []).append(record)
    if not typed:
        return {}
    from foilforge.foilers.lang.exact_edits import record_refusals
    from foilforge.nlp import load_spacy

    nlp = load_spacy(spacy_model, param_key=param_key)
    out = {}
    for type_, group in sorted(typed.items()):
        out.update(record_refusals(group, type_, nlp))
    return out


def select(records: list[Record], enabled: dict[str, dict], path="<records>",
           item_mode: str = "direct", adversarial: dict | None = None,
           progress: bool = False, runner=None, refused_foils: dict[str, str] | None = None
           ) -> tuple[list[Record], list[Record], dict]:
    """(kept, rejected, metrics); copies of the records with `passed` set, input order kept.

    `refused_foils`: {record id: reason} of records refused as foils before any rule besides the ones that cannot
    be foils (the pair stage's: its own image's captions state the foil's part; `exact_edit_refusals`: not exactly
    the edit of its SugarCrepe type), counted by reason under metrics `refused` with the others.

    `item_mode`: how the bias stage counts the instrument's changed items (a set rule bounds their JS).
    `adversarial`: the adversarial filter's settings, handed to the set rules that take them (the refinement).
    `runner`: where the adversarial filter's fold fits run (pipeline/engine/jobs.py `job_runner`; None: here).
    """
    from foilforge.filter import filter_class, filter_funnel
    from foilforge.records import is_valid
    from foilforge.validity import has_votes, refusal

    unused = sorted({n for r in records for n in (r.get("filters") or {}) if n not in enabled})
    if unused:
        log.info("scores of %s are recorded but not applied (no rule in params.yaml instruments.<I>.filters.keep)", ", ".join(unused))
    marked, refused = [], {}
    refused_foils = refused_foils or {}
    for index, record in enumerate(records):
        reason = refusal(record) or refused_foils.get(str(record.get("id")))
        if reason is not None:  # no foil (the caption again, true of its image, not its edit): never kept
            marked.append({**record, "refused": reason})
            refused[reason] = refused.get(reason, 0) + 1
            continue
        results = dict(record.get("filters") or {})
        for name, thresholds in enabled.items():
            result = results.get(name)
            if not isinstance(result, dict) or "score" not in result:
                raise InputError(path, f"no '{name}' score: run `foilforge score` with this params.yaml first",
                                 record=record.get("id", index), field=f"filters.{name}")
            results[name] = {**result, "passed": bool(filter_class(name).keep(result, **thresholds))}
        marked.append({**record, "filters": results})
    refused = dict(sorted(refused.items()))
    # where people voted, the set rules choose among the pairs they judged valid only
    voted = has_votes(marked)
    refinement = {}
    for name, thresholds in enabled.items():
        cls = filter_class(name)
        if not cls.set_rule:
            continue
        candidates = [r for r in marked if "refused" not in r and (not voted or is_valid(r) is True)
                      and all(r["filters"][n]["passed"] for n in enabled if not filter_class(n).set_rule)]
        extra = {"adversarial": adversarial, "progress": progress, "runner": runner} if adversarial is not None else {}
        kept_ids, refinement[name] = cls.keep_subset(candidates, path, item_mode=item_mode, **thresholds, **extra)
        # without votes: the pairs the attackers get confidently wrong, for people to look at first
        suspects = set() if voted else set((refinement[name].get("adversarial") or {}).get("suspects") or [])
        for record in (r for r in marked if "refused" not in r):
            record["filters"][name] = {**record["filters"][name], "passed": record["id"] in kept_ids,
                                       "refined_on": refinement[name].get("scorers", []),
                                       **({"suspect": True} if record["id"] in suspects else {})}

    def kept_record(record):
        return "refused" not in record and all(record["filters"][n]["passed"] for n in enabled)

    kept = [r for r in marked if kept_record(r)]
    rejected = [r for r in marked if not kept_record(r)]
    metrics = {"input": len(records), "kept": len(kept), "filters": {}, "funnel": filter_funnel(marked),
               "refused": refused,
               "suspects": sum(any(res.get("suspect") for res in r.get("filters", {}).values()
                                   if isinstance(res, dict)) for r in kept)}
    if voted:
        from foilforge.validity import validity_shares

        metrics["validity"] = validity_shares(marked, kept)
    if refinement:
        metrics["refinement"] = refinement
    for name, thresholds in enabled.items():
        results = [r["filters"][name] for r in marked if "refused" not in r]
        passed = sum(res["passed"] for res in results)
        metrics["filters"][name] = {
            "passed": passed, "failed": len(results) - passed, "threshold": thresholds,
            "model": _one_or_all({res.get("model") for res in results}),
            "variant": _one_or_all({res.get("variant") for res in results}),
        }
    return kept, rejected, metrics
