"""The keep rules of params.yaml applied to scored records: what the select stage runs on an instrument (`run`) and
refilter on a released file (`select`); no model runs, so a threshold change reruns only select.

    foilforge select INSTRUMENT --input data/scored/I.jsonl --output data/filtered/I.jsonl \
        --rejected data/rejected/I.jsonl --metrics data/metrics/select/I.json

The rules are params.yaml `instruments.INSTRUMENT.filters.keep` for the filters in
`instruments.INSTRUMENT.filters.run` (a filter with a null rule is not applied); those
filters must have scored the records. Each record's
`filters.<name>.passed` is set; records passing all filters go to --output,
the others to --rejected, both in input order. Metrics: {input, kept,
filters: {name: {passed, failed, model, variant, threshold}}, funnel: {input,
after_<filter>: records passing it and every cheaper one}}.

A set rule (a filter with `set_rule`, the plausibility refinement) runs after
the record-by-record rules, on the records that passed all of them: it picks
the subset (and, among a sample's candidates, which one) as a whole; its
report (scorers, records kept, acc_r before/after under each scorer) is under
metrics `refinement.<filter>`, and each kept or dropped record's result gets
`refined_on` (the scorers it was balanced on).

A record that cannot be a foil (an empty foil, or its caption again: foilforge/validity.py), one the pair stage
refused as a foil (`foil_refused` in the partners file: its own image's other captions state the foil's part, so
the foil may be true of its image), or a SugarCrepe-type record that is not exactly the edit of its type (its
`provenance.edit` checked again: foilers/lang/exact_edits.py), is refused before any rule and counted by reason
under metrics `refused`; the pairing-aware choice never counts it as a sibling, so another candidate of its caption
is chosen. Where records carry human votes (`valid`, VALSE's `mturk`) a set
rule chooses among the valid ones only, and metrics `validity` gives the valid share of all, kept and removed
records; without votes, the kept pairs the adversarial filter's attackers get confidently wrong are marked
`suspect: true` in the set rule's result (counted under metrics `suspects`), and the annotation batch
(pipeline/annotation.py) puts them first.
"""

from __future__ import annotations

import logging
from collections import Counter

from foilforge.errors import InputError
from foilforge.io import atomic_write, write_json, write_jsonl
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


def write_funnel_csv(path, funnel: dict) -> None:
    """The funnel as plot data: `step,records`, steps numbered in run order so a plot's sorted axis keeps it."""
    lines = ["step,records"] + [f"{i} {name.removeprefix('after_')},{count}" for i, (name, count) in enumerate(funnel.items())]
    with atomic_write(path) as handle:
        handle.write("\n".join(lines) + "\n")


def read_partners(path) -> tuple[dict, object]:
    """(each record's candidate partners, what the pairer refused: foilforge.groups.Refusals)."""
    from foilforge.groups import candidates_from_rows
    from foilforge.io import read_jsonl

    return candidates_from_rows(read_jsonl(path, allow_empty=True), path)


def choose_pairable(records: list[dict], candidates: dict, enabled: dict,
                    refused_foils: dict | None = None) -> tuple[list[dict], list[dict], dict]:
    """The pairing-aware choice: among a sample's candidates that pass the record-by-record keep rules (and are
    not refused as foils), those without a partner image are set aside when another has one
    (foilforge/groups.py `prefer_pairable`)."""
    from foilforge.filter import filter_class
    from foilforge.groups import prefer_pairable

    rules = {n: t for n, t in enabled.items() if not filter_class(n).set_rule}
    refused_foils = refused_foils or {}

    def passes(record) -> bool:
        results = record.get("filters") or {}
        return str(record.get("id")) not in refused_foils and all(isinstance(results.get(n), dict) and "score" in results[n]
                   and filter_class(n).keep(results[n], **t) for n, t in rules.items())

    chosen, set_aside = prefer_pairable(records, candidates, passes)
    return chosen, set_aside, {"set_aside": len(set_aside)}


def group_kept(params: dict, instrument: str, kept: list[dict], rejected: list[dict], set_aside: list[dict],
               candidates: dict, choice: dict | None, position: dict, refusals=None) -> tuple[list[dict], list[dict], dict]:
    """Each kept record's partner image (at most one; an image at most once): `group` on the record, and the
    pairing metrics (coverage of the kept pairs, why the rest stayed unpaired, partners refused by reason)."""
    from foilforge.groups import attach_groups
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, instrument).pairing
    kept, pairing = attach_groups(kept, candidates, refusals)
    rejected = sorted([*rejected, *set_aside], key=lambda r: position[str(r["id"])])  # input order, as select's
    foils = refusals.foils if refusals is not None else {}
    report = {"pairer": settings.pairer, "why": None if settings.pairer else settings.why,
              "prefer_pairable": bool(choice is not None), "min_support": settings.min_support,
              **pairing.report(len(kept)),
              # of select's input, the records the pairer refused as foils (also under metrics `refused`)
              "foils_refused": dict(sorted(Counter(foils[rid] for rid in position if rid in foils).items())),
              **({"set_aside_for_a_pairable_candidate": choice["set_aside"]} if choice is not None else {})}
    if not settings.pairer:  # no pairer: no partner was looked for, and the report says so
        report.update(coverage=None, unpaired={"no pairer for this instrument": len(kept)} if kept else {})
    return kept, rejected, report


def run(params: dict, instrument: str, input_path, output_path, rejected_path, metrics_path, funnel_path=None,
        progress: bool = False, partners_path=None) -> dict:
    from foilforge.filter import keep_rules
    from foilforge.filters.adversarial import adversarial_settings
    from foilforge.io import read_jsonl
    from foilforge.pipeline.engine import engine_settings, job_runner
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, instrument)
    enabled = keep_rules(params, instrument)
    item_mode = settings.bias.items  # as the bias stage counts them
    records = read_jsonl(input_path, allow_empty=True)
    candidates, refusals = read_partners(partners_path) if partners_path else (None, None)
    # records refused as foils before any rule: a SugarCrepe-type record that is not exactly the edit of its type
    # (the foil stage's checks, again), and those the pair stage refused (their own image's captions state the foil)
    args = (params["instruments"][instrument].get("args") or {})
    refused_foils = exact_edit_refusals(records, args.get("spacy_model") or "en_core_web_sm",
                                        param_key=f"params.yaml instruments.{instrument}.args.spacy_model")
    refused_foils.update(refusals.foils if refusals is not None else {})
    position = {str(r.get("id")): i for i, r in enumerate(records)}
    set_aside, choice = [], None
    if candidates is not None and settings.pairing.prefer_pairable:
        records, set_aside, choice = choose_pairable(records, candidates, enabled, refused_foils)
    with job_runner(engine_settings(params)) as runner:
        kept, rejected, metrics = select(records, enabled, input_path, item_mode=item_mode,
                                         adversarial=adversarial_settings(settings), progress=progress,
                                         runner=runner, refused_foils=refused_foils)
    if candidates is not None:
        metrics["input"] = len(position)
        kept, rejected, metrics["pairing"] = group_kept(params, instrument, kept, rejected, set_aside, candidates, choice,
                                                        position, refusals)
    write_jsonl(output_path, kept, sort_by_id=False)
    write_jsonl(rejected_path, rejected, sort_by_id=False)
    write_json(metrics_path, metrics)
    if funnel_path:
        write_funnel_csv(funnel_path, metrics["funnel"])
    return metrics
