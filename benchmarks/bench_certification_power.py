"""How many pairs a set needs before the gate can certify it, even when no attacker finds anything.

    python -m benchmarks.bench_certification_power [--readings 16] [--trials 20000]

The gate certifies a kept set when every attacker's 95% Wilson interval lies inside [gate.lower, gate.upper]
(filters/certification.py). Take a set that is blind by construction: every attacker's per-pair success is a
fair coin. Its readings still scatter around 50% by sampling, and the interval is about 1.96 * 0.5 / sqrt(n)
wide on each side, so a small set fails the rule however good the filter was. This simulates that ideal set:
for each n, `trials` draws of `--readings` attacker readings (within and transfer, one per attacker: the gate of
params.yaml has 8 attackers, so 16 readings), each Binomial(n, 1/2) / n, and counts the draws where every
reading's interval is inside [lower, upper]. Two bounds, because the readings of attackers on the same pairs are
correlated: independent readings (the lower bound of the chance to pass) and one reading for all (fully
correlated: the upper bound). The binomial scatter is checked on random sentence pairs with the gate's word and
char n-gram attackers (`reading_spread`: averaging 5 partitions does not narrow it below binomial; one partition
scatters wider). Also the released pieces' sizes (benchmarks/results/certification.json: records
before any filtering, the kept pairs after it), so each piece's best case reads off the table.

Writes benchmarks/results/certification_power.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def pass_rate(n: int, readings: int, trials: int, lower: float, upper: float, seed: int = 0) -> float:
    """Share of `trials` in which `readings` independent Binomial(n, 1/2) readings all have their Wilson interval
    inside [lower, upper]."""
    import numpy as np

    from foilforge.metrics import wilson_interval

    inside = np.zeros(n + 1, dtype=bool)  # by the number of successes
    for k in range(n + 1):
        low, high = wilson_interval(k, n)
        inside[k] = lower <= low and high <= upper
    draws = np.random.default_rng(seed).binomial(n, 0.5, size=(trials, readings))
    return float(inside[draws].all(axis=1).mean())


def blind_records(n: int, seed: int) -> list[dict]:
    """n pairs of two random 6-word sentences over 300 made-up words: no text tells the caption from the foil."""
    import random

    rng = random.Random(seed)
    words = [f"w{k}" for k in range(300)]
    out = []
    for k in range(n):
        caption, foil = (" ".join(rng.choice(words) for _ in range(6)) + f" {k}." for _ in range(2))
        out.append({"id": f"{seed}:{k}", "sample_id": f"{seed}:{k}", "caption": caption, "foil": foil})
    return out


def reading_spread(n: int, sets: int, repeats: int) -> dict:
    """The binomial model checked: the mean and standard deviation, over `sets` blind sets of n pairs, of the
    gate's out-of-fold reading (word and char n-grams, `repeats` partitions averaged, as certify computes it)."""
    import numpy as np

    from foilforge.filters.attackers import certify

    blocks = {"word_ngram": {"attacker": "word_ngram.v1", "args": {"ngram_range": [1, 2]}},
              "char_ngram": {"attacker": "char_ngram.v1", "args": {"ngram_range": [2, 4]}}}
    readings = {name: [] for name in blocks}
    for seed in range(sets):
        result = certify(blind_records(n, seed), blocks, folds=5, seed=101, repeats=repeats)
        for name in blocks:
            readings[name].append(result[name]["accuracy"])
    return {name: {"mean": round(float(np.mean(values)), 4), "std": round(float(np.std(values)), 4),
                   "binomial_std": round(0.5 / n ** 0.5, 4)} for name, values in readings.items()}


def smallest_n(target: float, readings: int, trials: int, lower: float, upper: float) -> int:
    """The smallest n (a multiple of 10) at which the pass rate reaches `target`."""
    n = 10
    while pass_rate(n, readings, trials, lower, upper) < target:
        n += 10
    return n


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=16, help="attacker readings per set (default 16)")
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--lower", type=float, default=0.40)
    parser.add_argument("--upper", type=float, default=0.60)
    parser.add_argument("--output", type=Path, default=RESULTS / "certification_power.json")
    args = parser.parse_args(argv)

    sizes = [50, 100, 150, 200, 300, 400, 500, 600, 800, 1000, 1500, 2000]
    table = [{"n": n,
              "pass_independent": round(pass_rate(n, args.readings, args.trials, args.lower, args.upper), 4),
              "pass_one_reading": round(pass_rate(n, 1, args.trials, args.lower, args.upper), 4)} for n in sizes]
    needed = {f"{int(100 * target)}%": {
        "independent": smallest_n(target, args.readings, args.trials, args.lower, args.upper),
        "one_reading": smallest_n(target, 1, args.trials, args.lower, args.upper)} for target in (0.5, 0.9)}

    # does a reading scatter as a binomial proportion? averaging partitions could narrow it; out-of-fold error of a
    # model without signal could widen it
    spread = {f"n={n}, repeats={repeats}": reading_spread(n, 30, repeats) for n in (200, 400) for repeats in (1, 5)}

    pieces = {}
    certification = RESULTS / "certification.json"
    if certification.is_file():
        found = json.loads(certification.read_text())
        for name, piece in found.items():
            if not isinstance(piece, dict) or "records" not in piece:
                continue
            records = piece["records"] - sum((piece.get("refused") or {}).values())
            pieces[name] = {"records": records, "kept": piece.get("kept"),
                            "status_after": (piece.get("after") or {}).get("status"),
                            "ideal_pass_independent_all_records": round(
                                pass_rate(records, args.readings, args.trials, args.lower, args.upper), 4),
                            "ideal_pass_one_reading_all_records": round(
                                pass_rate(records, 1, args.trials, args.lower, args.upper), 4)}
    result = {"what": "chance that a set whose every attacker reads a fair coin on each pair is certified "
                      "(every Wilson 95% interval inside [lower, upper]), by the set's size",
              "readings": args.readings, "trials": args.trials, "lower": args.lower, "upper": args.upper,
              "table": table, "n_needed": needed,
              "reading_spread": {"what": "mean and standard deviation of the gate's out-of-fold reading over 30 "
                                         "sets of random sentence pairs (no signal), against the binomial 0.5/sqrt(n) "
                                         "the table assumes", **spread},
              "pieces": pieces}
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    for row in table:
        print(f"n={row['n']:5d}  independent {row['pass_independent']:.3f}  one reading {row['pass_one_reading']:.3f}")
    print("n needed:", needed)
    for key, figures in spread.items():
        print(key, figures)
    for name, piece in pieces.items():
        print(f"{name}: {piece['records']} records, kept {piece['kept']}: ideal pass "
              f"{piece['ideal_pass_independent_all_records']:.3f} - {piece['ideal_pass_one_reading_all_records']:.3f}")
    return result


if __name__ == "__main__":
    main()
