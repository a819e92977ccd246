"""Apply the keep rules of params.yaml to scored records; no model runs, so a threshold change reruns only this.

    foilforge select INSTRUMENT --input data/scored/I.jsonl --output data/filtered/I.jsonl \\
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
(pipeline/stages/annotate.py) puts them first.
"""

from __future__ import annotations

import logging
from collections import Counter

from foilforge.io import atomic_write, write_json, write_jsonl
from foilforge.params import load_params
from foilforge.pipeline.selection import exact_edit_refusals, select

log = logging.getLogger(__name__)


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
    from foilforge.groups import attach_groups, pairing_settings

    settings = pairing_settings(params, instrument)
    kept, pairing = attach_groups(kept, candidates, refusals)
    rejected = sorted([*rejected, *set_aside], key=lambda r: position[str(r["id"])])  # input order, as select's
    foils = refusals.foils if refusals is not None else {}
    report = {"pairer": settings["pairer"], "why": None if settings["pairer"] else settings.get("why"),
              "prefer_pairable": bool(choice is not None), "min_support": settings["min_support"],
              **pairing.report(len(kept)),
              # of select's input, the records the pairer refused as foils (also under metrics `refused`)
              "foils_refused": dict(sorted(Counter(foils[rid] for rid in position if rid in foils).items())),
              **({"set_aside_for_a_pairable_candidate": choice["set_aside"]} if choice is not None else {})}
    if not settings["pairer"]:  # no pairer: no partner was looked for, and the report says so
        report.update(coverage=None, unpaired={"no pairer for this instrument": len(kept)} if kept else {})
    return kept, rejected, report


def run(params: dict, instrument: str, input_path, output_path, rejected_path, metrics_path, funnel_path=None,
        progress: bool = False, partners_path=None) -> dict:
    from foilforge.filter import keep_rules
    from foilforge.filters.adversarial import settings_for
    from foilforge.groups import pairing_settings
    from foilforge.io import read_jsonl
    from foilforge.pipeline.bias_settings import instrument_settings
    from foilforge.pipeline.engine import engine_settings, job_runner

    enabled = keep_rules(params, instrument)
    item_mode = instrument_settings(params, instrument)["items"]  # as the bias stage counts them
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
    if candidates is not None and pairing_settings(params, instrument)["prefer_pairable"]:
        records, set_aside, choice = choose_pairable(records, candidates, enabled, refused_foils)
    with job_runner(engine_settings(params)) as runner:
        kept, rejected, metrics = select(records, enabled, input_path, item_mode=item_mode,
                                         adversarial=settings_for(params, instrument), progress=progress,
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


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (a key of params.yaml instruments)")
    parser.add_argument("--input", required=True, help="scored records (JSONL), from `foilforge score`")
    parser.add_argument("--output", required=True, help="kept records (JSONL)")
    parser.add_argument("--rejected", required=True, help="rejected records with their passed flags (JSONL)")
    parser.add_argument("--metrics", required=True, help="counts per filter and the funnel (JSON)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--partners", default=None, help="each record's partner images (JSONL), from `foilforge pair`: "
                        "prefer candidates with one, and group the kept records (Winoground groups)")
    parser.add_argument("--funnel", default=None, help="the funnel as plot data, `step,records` (CSV; `dvc plots show`)")


def main(args) -> int:
    metrics = run(load_params(args.params), args.instrument, args.input, args.output, args.rejected, args.metrics,
                  args.funnel, progress=not args.no_progress, partners_path=args.partners)
    log.info("%s: kept %d of %d records (%s)", args.instrument, metrics["kept"], metrics["input"],
             ", ".join(f"{k} {v}" for k, v in metrics["funnel"].items()))
    return 0
