"""How many partitions the gate must average on the kept pairs: its readings' scatter, power and size by repeats.

    python -m benchmarks.bench_gate_repeats [--sets 300] [--sizes 150 400 550] [--repeats 1 2 5]

The gate's word n-gram attacker out of fold (`certify`, folds 5, seed 101), averaged over 1, 2 or 5 partitions,
on `--sets` sets of n random sentence pairs (no text tells caption from foil: the share certified is the power)
and on the same pairs with a cue word in 24% of the captions (it reads about 0.62, chance + margin: the share
certified is the size, which the equivalence test promises at about alpha = 0.05) (bench_certification_power's
`real_check`). Per row: the readings' mean and scatter, the share the equivalence test passes (within chance
+- 0.12 at 0.05) and the share whose exact test excludes chance at 0.05 / 16 (Holm's first step over 16 readings),
each beside what the binomial model says.

Fewer partitions make every reading noisier: the power falls and the size rises, so the gate keeps `repeats`
for the kept pairs; only the readings before the refinement, which the certification does not read, average
fewer (`gate.before_repeats`, docs/performance.md).

    python -m benchmarks.bench_gate_repeats --settled [--sets 300] [--sizes 150 400 550]

compares, on the same sets, the reading of all five partitions with the reading where the gate's settled rule
stops (`gate.min_repeats`: filters/certification.py `settled`): the shares certified and called off chance by
each, the partitions used on average, and the sets on which the two readings take another decision.

Writes benchmarks/results/gate_repeats.json (`--settled`: gate_repeats_settled.json).
"""

from __future__ import annotations

import argparse
import json

from benchmarks.common import write_result

NAME = "gate_repeats"
MARGIN, ALPHA, READINGS = 0.12, 0.05, 16


def row(n: int, sets: int, share: float, repeats: int) -> dict:
    from benchmarks.bench_certification_power import real_check

    return {"repeats": repeats, **real_check(n, sets, share, MARGIN, ALPHA, READINGS, repeats=repeats)}


def settled_row(n: int, sets: int, share: float) -> dict:
    """Five partitions against the settled rule on the same sets: each set's five partition accuracies (`certify`'s
    `partitions`), the reading of all five and the reading where `settled` stops (at least 2), with the share each
    certifies (the equivalence test), the share whose chance test excludes chance at Holm's first step, the
    partitions the rule used on average, and the sets where the two readings take another decision."""
    import numpy as np

    from benchmarks.bench_certification_power import word_ngram_reading
    from foilforge.filters.certification import Settle, chance_p, decisions, within_p

    # the gate's rule as pipeline/gate.py builds it (gate.min_repeats 2), replayed on the five partitions
    settle = Settle(first=2, margin=MARGIN, alpha=ALPHA, readings=READINGS)
    five, early, used, changed = [], [], [], 0
    for seed in range(sets):
        partitions = word_ngram_reading(n, seed, share)["partitions"]
        r = settle.first
        while not settle.settled(partitions[:r], n, 5, chance=0.5, max_accuracy=0.55):
            r += 1
        five.append(float(np.mean(partitions)))
        early.append(float(np.mean(partitions[:r])))
        used.append(r)
        counts = [round(five[-1] * n)], [round(early[-1] * n)]
        changed += decisions(counts[0], n, 0.5, MARGIN, ALPHA, READINGS, 0.55) != \
            decisions(counts[1], n, 0.5, MARGIN, ALPHA, READINGS, 0.55)

    def rates(values):
        figures = [{"accuracy": v, "n": n} for v in values]
        return {"std": round(float(np.std(values, ddof=1)), 4),
                "within": round(float(np.mean([within_p(f, MARGIN) <= ALPHA for f in figures])), 4),
                "off_chance": round(float(np.mean([chance_p(f) <= ALPHA / READINGS for f in figures])), 4)}

    return {"n": n, "sets": sets, "cue_share": share, "five": rates(five), "settled": rates(early),
            "partitions_mean": round(float(np.mean(used)), 3), "decisions_changed": changed}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=300, help="sets a row (default 300)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[150, 400, 550], help="pairs a set")
    parser.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 5], help="partitions averaged")
    parser.add_argument("--settled", action="store_true",
                        help="instead: five partitions against the settled rule (gate.min_repeats) on the same sets")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    rows = []
    if args.settled:
        for n in args.sizes:
            for share in (0.0, 0.24):
                rows.append(settled_row(n, args.sets, share))
                print(json.dumps(rows[-1]), flush=True)
        path = write_result(NAME + "_settled", {"rows": rows, "margin": MARGIN, "alpha": ALPHA, "readings": READINGS},
                            args, argv, path=args.output)
        print(f"written: {path}")
        return {"rows": rows}
    for n in args.sizes:
        for share in (0.0, 0.24):
            for repeats in args.repeats:
                rows.append(row(n, args.sets, share, repeats))
                print(json.dumps(rows[-1]), flush=True)
    path = write_result(NAME, {"rows": rows, "margin": MARGIN, "alpha": ALPHA, "readings": READINGS}, args, argv,
                        path=args.output)
    print(f"written: {path}")
    return {"rows": rows}


if __name__ == "__main__":
    main()
