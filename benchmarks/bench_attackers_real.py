"""Trained attackers on released benchmarks: `foilforge refilter` on every VALSE dev piece and both
SugarCrepe files, before/after per attacker, records kept, and AFLite against feature balancing.

Each file is scored once by the filters of the foilforge instrument it corresponds to (`PIECES`; SmolLM2 and the
word trigram for the refinement, Link Grammar where the instrument has it), then filtered by every method of
params.yaml `adversarial.method` (`--methods`) and certified by the release gate (params.yaml `gate`: fresh folds
and seeds, and naive Bayes, a family the filter never used). `--transformer` adds the fine-tuned MiniLM pair
classifier (params.yaml attackers.minilm_pair) to the gate of the default method: minutes per file on a CPU.
Written to benchmarks/results/attackers_real.json (benchmarks/common.py: the result shape, the released pieces).

    python -m benchmarks.bench_attackers_real [--only existence.json] [--methods aflite balance_features]
        [--transformer] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time

from benchmarks.common import scored_pieces, start_pieces, write_result

NAME = "attackers_real"


def summarise(report: dict, seconds: float) -> dict:
    gate = report["gate"] or {}
    adversarial = report["adversarial"] or {}
    return {
        "records": report["records_before"], "kept": report["records_after"],
        "kept_share": round(report["records_after"] / max(1, report["records_before"]), 3),
        "kept_without_adversarial_filter": adversarial.get("kept_without_adversarial_filter"),
        "gate_passed": gate.get("passed"),
        "gate": {name: {"before": e["before"]["accuracy"], "after": e["after"]["accuracy"], "n": e["after"]["n"],
                        "ci95": e["after"]["ci95"], "verdict": e["after"]["verdict"], "passed": e["after"]["passed"]}
                 for name, e in (gate.get("attackers") or {}).items()},
        "filter": {"before": adversarial.get("accuracy_before"), "after": adversarial.get("accuracy_after"),
                   "target_met": adversarial.get("target_met"), "stopped": adversarial.get("stopped"),
                   "rounds": adversarial.get("rounds")},
        "js": {"before": report["balance"]["before"]["js"], "after": report["balance"]["after"]["js"]},
        "negation": {side: [report["balance"][side]["negated_captions"], report["balance"][side]["negated_foils"]]
                     for side in ("before", "after")},
        "seconds": round(seconds, 1),
    }


def main(argv=None) -> int:
    from foilforge.pipeline.refiltering import filter_scored

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["aflite", "balance_features"])
    parser.add_argument("--transformer", action="store_true", help="add attackers.minilm_pair to the gate")
    setup = start_pieces(parser, argv, NAME)
    if setup is None:
        return 0
    args, params, results = setup
    results["params"] = "params.yaml of the repository (filters, refinement, adversarial, gate)"
    for relative, like, path, scored, scoring in scored_pieces(params, args.only, args.keep):
        entry = {"like": like, "scoring_seconds": round(scoring, 1)}
        for method in args.methods:
            run_params = copy.deepcopy(params)
            run_params["adversarial"]["method"] = method
            if args.transformer and method == args.methods[0]:
                run_params["gate"]["attackers"] = [*run_params["gate"]["attackers"], "minilm_pair"]
                run_params["gate"]["repeats"] = 1
            started = time.perf_counter()
            _, report = filter_scored(run_params, like, scored, path, progress=False)
            entry[method] = summarise(report, time.perf_counter() - started)
            print(relative, method, json.dumps(entry[method]), flush=True)
        results[relative] = entry
        write_result(NAME, results, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
