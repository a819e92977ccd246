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
correlated: the upper bound). Also the released pieces' sizes (benchmarks/results/certification.json: records
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
              "table": table, "n_needed": needed, "pieces": pieces}
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    for row in table:
        print(f"n={row['n']:5d}  independent {row['pass_independent']:.3f}  one reading {row['pass_one_reading']:.3f}")
    print("n needed:", needed)
    for name, piece in pieces.items():
        print(f"{name}: {piece['records']} records, kept {piece['kept']}: ideal pass "
              f"{piece['ideal_pass_independent_all_records']:.3f} - {piece['ideal_pass_one_reading_all_records']:.3f}")
    return result


if __name__ == "__main__":
    main()
