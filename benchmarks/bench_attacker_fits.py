"""The attackers' two fits this build changed, each against the one it replaced, side by side on a built sample's rows.

    python -m benchmarks.bench_attacker_fits [--build DIR] [--instruments coreference_standard foil_it ...]
                                             [--repeats 3]

DIR (default: this checkout, after `make repro`) is a built sample, or a `bench_sample_build --keep` worktree.

* **Boosted trees** (filters/attackers/boosted_features.py): `boosted_features.v1` (scikit-learn's
  HistGradientBoosting) against `boosted_features.v2` (LightGBM, the same hyperparameters), on the rows the
  adversarial filter fits: every scored record of the instrument (data/scored/<I>.jsonl), trained on four of five
  grouped folds. Per way: CPU milliseconds a fit and a prediction (the median of `repeats`, the ways taking turns),
  and the out-of-fold accuracy of each on the scored records (5 grouped folds, seed 0).
* **Dense logistic fits** (filters/attackers/base.py): liblinear's primal solver (`fit_logistic`, what dense rows
  had) against Newton's method (`fit_dense_logistic`), on the hidden-state rows of the gate's probes
  (smollm2_probe, minilm_probe: params.yaml's blocks) of the kept pairs (data/filtered/<I>.jsonl; bd2bb_decoys'
  target-against-decoy pairs), trained on four of five grouped folds, at each C of the gate's grid. Per C: CPU
  milliseconds a fit of each, the objective each reaches (Newton's is the optimum: never above liblinear's) and
  the largest difference of their margins on the held-out fold against the largest margin.

The probes' vectors come from the build's pass store (.foilforge-cache/scores). Results:
benchmarks/results/attacker_fits.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from benchmarks.common import ROOT, machine, write_result

NAME = "attacker_fits"
BOOSTED = ("boosted_features.v1", "boosted_features.v2")
PROBES = ("smollm2_probe", "minilm_probe")


def records(build: Path, folder: str, instrument: str) -> list[dict]:
    from foilforge.io import read_jsonl

    return read_jsonl(build / "data" / folder / f"{instrument}.jsonl")


def pairs_of(found: list[dict]):
    """The pairs an attacker reads: caption and foil, or a multiple-choice item's target against each decoy."""
    from foilforge.attacker import pairs_from_records
    from foilforge.filters.attackers.choices import choice_items, multiple_choice_pairs

    items = choice_items(found)
    return multiple_choice_pairs(*items) if items is not None else pairs_from_records(found)


def cpu_ms(work) -> tuple[float, object]:
    start = time.process_time()
    result = work()
    return 1000 * (time.process_time() - start), result


def boosted(build: Path, instrument: str, repeats: int) -> dict:
    import numpy as np

    from foilforge.attacker import grouped_folds, out_of_fold_margins
    from foilforge.filters.attackers import build_attacker
    from foilforge.filters.attackers.gate import attack_summary

    pairs = pairs_of(records(build, "scored", instrument))
    fold = np.array(grouped_folds([p.group for p in pairs], 5, 0))
    train = [p for p, f in zip(pairs, fold) if f != 0]
    held = [p for p, f in zip(pairs, fold) if f == 0]
    times = {way: {"fit_ms": [], "margins_ms": []} for way in BOOSTED}
    for _ in range(repeats):
        for way in BOOSTED:
            fit_ms, model = cpu_ms(lambda way=way: build_attacker({"attacker": way}, "bench").fit(train))
            margins_ms, _ = cpu_ms(lambda model=model: model.margins(held))
            times[way]["fit_ms"].append(fit_ms)
            times[way]["margins_ms"].append(margins_ms)
    out = {"pairs": len(pairs), "train_pairs": len(train)}
    for way in BOOSTED:
        margins, _ = out_of_fold_margins(lambda way=way: build_attacker({"attacker": way}, "bench"), pairs, 5, 0)
        out[way] = {key: round(statistics.median(values), 2) for key, values in times[way].items()}
        out[way]["out_of_fold_accuracy"] = attack_summary(margins)["accuracy"]
    out["fit_speedup"] = round(out[BOOSTED[0]]["fit_ms"] / out[BOOSTED[1]]["fit_ms"], 2)
    return out


def dense(build: Path, instrument: str, repeats: int) -> dict:
    import numpy as np
    from scipy.special import log_expit

    from foilforge.attacker import grouped_folds
    from foilforge.filters.attackers.base import fit_dense_logistic, fit_logistic
    from foilforge.filters.attackers.runs import maker
    from foilforge.params import load_params
    from foilforge.settings import instrument_settings

    settings = instrument_settings(load_params(str(build / "params.yaml")), instrument).gate
    pairs = pairs_of(records(build, "filtered", instrument))
    fold = np.array(grouped_folds([p.group for p in pairs], 5, 0))
    out: dict = {"pairs": len(pairs)}
    for probe in PROBES:
        if probe not in settings.attacker_blocks:
            continue
        grid = maker(settings.attacker_blocks, probe)()
        attacker = grid.make(grid.settings[0]) if hasattr(grid, "settings") else grid
        attacker.fit_features(pairs)
        rows = np.asarray(attacker.vectorize(pairs), dtype=float)
        train, held = rows[fold != 0], rows[fold == 0]
        stacked = np.vstack([train, -train])
        labels = np.r_[np.ones(len(train)), np.zeros(len(train))]
        found = {"train_rows": list(train.shape)}
        for C in sorted({s["C"] for s in getattr(grid, "settings", [{"C": attacker.C}])}):
            spent = {"liblinear_primal": [], "newton": []}
            for _ in range(repeats):
                ms, old = cpu_ms(lambda C=C: fit_logistic(stacked, labels, C, 0, dual=False))
                spent["liblinear_primal"].append(ms)
                ms, new = cpu_ms(lambda C=C: fit_dense_logistic(train, C))
                spent["newton"].append(ms)

            def objective(fit, C=C):
                w = fit.coef_[0]
                return 0.5 * float(w @ w) - 2 * C * float(log_expit(train @ w).sum())

            before, after = held @ old.coef_[0], held @ new.coef_[0]
            found[f"C={C}"] = {
                **{f"{way}_ms": round(statistics.median(values), 2) for way, values in spent.items()},
                "objective_liblinear": objective(old), "objective_newton": objective(new),
                "largest_margin_change": round(float(np.abs(before - after).max()), 6) if len(held) else 0.0,
                "largest_margin": round(float(np.abs(after).max()), 4) if len(held) else 0.0,
                "sign_changes": int((np.sign(before) != np.sign(after)).sum())}
        out[probe] = found
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=ROOT,
                        help="a built sample's directory (data/scored, data/filtered; default: this checkout)")
    parser.add_argument("--instruments", nargs="*",
                        default=["coreference_standard", "plurals", "foil_it", "relations", "bd2bb_decoys"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    build = args.build.resolve()
    os.environ.setdefault("FOILFORGE_SCORE_CACHE", str(build / ".foilforge-cache" / "scores"))
    metrics: dict = {"build": str(build), "boosted": {}, "dense": {}}
    for instrument in args.instruments:
        if (build / "data" / "scored" / f"{instrument}.jsonl").is_file() and instrument != "bd2bb_decoys":
            metrics["boosted"][instrument] = boosted(build, instrument, args.repeats)
            print(instrument, "boosted", json.dumps(metrics["boosted"][instrument]), flush=True)
        if (build / "data" / "filtered" / f"{instrument}.jsonl").is_file():
            metrics["dense"][instrument] = dense(build, instrument, args.repeats)
            print(instrument, "dense", json.dumps(metrics["dense"][instrument]), flush=True)
    metrics["machine"] = machine()
    print(write_result(NAME, metrics, args, argv))


if __name__ == "__main__":
    main()
