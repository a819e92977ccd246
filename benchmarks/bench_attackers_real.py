"""Trained attackers on released benchmarks: `foilforge refilter` on every VALSE dev piece and both
SugarCrepe files, before/after per attacker, records kept, and AFLite against feature balancing.

Each file is scored once by the filters of the foilforge instrument it corresponds to (`PIECES`; SmolLM2 and the
word trigram for the refinement, Link Grammar where the instrument has it), then filtered by every method of
params.yaml `adversarial.method` (`--methods`) and certified by the release gate (params.yaml `gate`: fresh folds
and seeds, and naive Bayes, a family the filter never used). `--transformer` adds the fine-tuned MiniLM pair
classifier (params.yaml attackers.minilm_pair) to the gate of the default method: minutes per file on a CPU.
Written to benchmarks/results/attackers_real.json.

    python -m benchmarks.bench_attackers_real [--only existence.json] [--methods aflite balance_features]
        [--transformer] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "attackers_real.json"

#: released file -> the foilforge instrument whose filters, refinement, adversarial filter and gate it gets
PIECES = {
    "valse-dev/existence.json": "existence",
    "valse-dev/plurals.json": "plurals",
    "valse-dev/counting-hard.json": "counting_balanced",
    "valse-dev/counting-small-quant.json": "counting_small",
    "valse-dev/counting-adversarial.json": "counting_adversarial",
    "valse-dev/relations.json": "relations",
    "valse-dev/action-replacement.json": "action_replacement",
    "valse-dev/actant-swap.json": "actant_swap",
    "valse-dev/coreference-standard.json": "coreference_standard",
    "valse-dev/coreference-hard.json": "coreference_clean",
    "valse-dev/foil-it.json": "foil_it",
    "real/sugarcrepe/replace_rel.json": "relations",
    "real/sugarcrepe/swap_obj.json": "swap_obj",
}


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


def scored_records(params: dict, path: Path, like: str, keep: str | None) -> list[dict]:
    """`path` scored by `like`'s filters (the models run here), read from / written to the cache `keep` when given."""
    from foilforge.pipeline.refiltering import score_released

    cache = Path(keep) / f"{path.parent.name}_{path.stem}.scored.jsonl" if keep else None
    if cache and cache.is_file():
        return [json.loads(line) for line in cache.read_text().splitlines()]
    _, _, scored = score_released(params, path, like, progress=False)
    if cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(json.dumps(r) + "\n" for r in scored))
    return scored


def write_results(path: Path, results: dict) -> None:
    """After every piece: a long run stopped half-way keeps what it measured."""
    from foilforge.io import write_json

    write_json(path, results)


def start(parser: argparse.ArgumentParser, argv, result: Path):
    """(args, params, the results written so far) for a benchmark over PIECES with `--only` and `--keep`;
    None when the shared real data is absent (the benchmark is skipped)."""
    from foilforge.params import load_params

    parser.add_argument("--only", action="append", default=None, help="file names to run (repeatable)")
    parser.add_argument("--keep", default=None, help="cache the scored records here (reruns skip the models; "
                                                     "shared by bench_attackers_real and bench_unseen_attackers)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found (the shared real data)")
        return None
    return args, load_params(ROOT / "params.yaml"), json.loads(result.read_text()) if result.is_file() else {}


def scored_pieces(params: dict, only: list[str] | None, keep: str | None):
    """(released file relative to the shared data, its instrument, its path, its scored records, seconds scoring)
    for every file of PIECES that `only` admits."""
    for relative, like in PIECES.items():
        path = SHARED / relative
        if only and path.name not in only:
            continue
        started = time.perf_counter()
        scored = scored_records(params, path, like, keep)
        yield relative, like, path, scored, time.perf_counter() - started


def main(argv=None) -> int:
    from foilforge.pipeline.refiltering import filter_scored

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["aflite", "balance_features"])
    parser.add_argument("--transformer", action="store_true", help="add attackers.minilm_pair to the gate")
    setup = start(parser, argv, RESULT)
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
        write_results(RESULT, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
