"""Certification of released benchmarks: `foilforge refilter`'s filter and gate on every VALSE dev piece and both
SugarCrepe files, before and after, with the repository's params.yaml.

Each file is scored once by the filters of its foilforge instrument (benchmarks/common.py `PIECES`, the same
`--keep` cache), its records get VALSE's votes as released (`mturk`), and it goes through `filter_scored`: records
that cannot be foils refused, the filter choosing among the valid pairs, the gate's attackers within the kept set
(each at the strongest setting of its grid, the hidden-state probes included) and fitted on the rejected pairs
(transfer), certified when every reading is shown within chance +- gate.margin (filters/certification.py).
"Before" is the same certification of the gate's attackers on the records without the refinement (per sample the
first candidate that passed the other filters: the released piece less what length and grammaticality drop).
`--repeats` lowers the gate's partitions per attacker (params.yaml: 5) to fit a slow machine; the results say
which was used. Written to benchmarks/results/certification.json after every piece.

    python -m benchmarks.bench_certification [--only existence.json] [--keep DIR] [--repeats 2]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

from benchmarks.common import scored_pieces, start_pieces, write_result

NAME = "certification"


def with_votes(scored: list[dict], path) -> list[dict]:
    """The scored records with the released file's `mturk` votes (a cache written before records carried them)."""
    from foilforge.released import read_released

    _, rows = read_released(path)
    votes = {key: row.get("mturk") for key, row in rows if isinstance(row, dict) and isinstance(row.get("mturk"), dict)}
    return [{**r, "mturk": votes[r["released_key"]]} if r.get("released_key") in votes and "mturk" not in r else r
            for r in scored]


def figures(entry: dict) -> dict:
    return {"accuracy": entry.get("accuracy"), "n": entry.get("n"), "ci95": entry.get("ci95"),
            **({"setting": entry["setting"]} if entry.get("setting") else {})}


def summarise(report: dict, gate_settings: dict, seconds: float) -> dict:
    from foilforge.filters.certification import certification

    gate = report["gate"] or {}
    before = {name: e["before"] for name, e in (gate.get("attackers") or {}).items()}
    verdict_before = certification(before, margin=gate_settings["margin"], alpha=gate_settings["alpha"])
    adversarial = report["adversarial"] or {}
    return {
        "records": report["records_before"], "refused": report["refused"], "kept": report["records_after"],
        "validity": report["validity"],
        "before": {"n": next(iter(before.values()))["n"] if before else None,
                   "certified": verdict_before["certified"], "status": verdict_before["status"],
                   "why": verdict_before["why"], "attackers": {name: figures(e) for name, e in before.items()}},
        "after": {"certified": gate.get("certified"), "status": gate.get("status"), "why": gate.get("why"),
                  "attackers": {name: figures(e["after"]) for name, e in (gate.get("attackers") or {}).items()},
                  "transfer": {name: {**figures(e), "trained_on": e.get("trained_on")}
                               for name, e in (gate.get("transfer") or {}).items()}},
        "filter": {"stopped": adversarial.get("stopped"), "rounds": adversarial.get("rounds"),
                   "returned_round": adversarial.get("returned_round"),
                   "suspects": len(adversarial.get("suspects") or [])},
        "seconds": round(seconds, 1),
    }


def main(argv=None) -> int:
    from foilforge.pipeline.refiltering import filter_scored

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="the gate's partitions per attacker (default: params)")
    setup = start_pieces(parser, argv, NAME)
    if setup is None:
        return 0
    args, params, results = setup
    run_params = copy.deepcopy(params)
    if args.repeats:
        run_params["gate"]["repeats"] = args.repeats
    from foilforge.schema import GateBlock

    gate_settings = GateBlock.model_validate(run_params["gate"]).model_dump()
    results["params"] = ("params.yaml of the repository (filters, refinement, adversarial, gate with its grids, "
                         f"probes and transfer); gate repeats {gate_settings['repeats']}")
    for relative, like, path, scored, scoring in scored_pieces(params, args.only, args.keep):
        started = time.perf_counter()
        _, report = filter_scored(run_params, like, with_votes(scored, path), path, progress=False)
        entry = {"like": like, "scoring_seconds": round(scoring, 1),
                 **summarise(report, gate_settings, time.perf_counter() - started)}
        results[relative] = entry
        print(relative, entry["kept"], "of", entry["records"], "before:", entry["before"]["status"], "after:",
              entry["after"]["status"], f"({entry['seconds']} s)", flush=True)
        pieces = {k: v for k, v in results.items() if isinstance(v, dict) and "after" in v}
        results["summary"] = {"pieces": len(pieces),
                              "certified_before": sum(bool(v["before"]["certified"]) for v in pieces.values()),
                              "certified_after": sum(bool(v["after"]["certified"]) for v in pieces.values())}
        write_result(NAME, results, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
