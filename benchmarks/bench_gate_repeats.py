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

Writes benchmarks/results/gate_repeats.json.
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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=300, help="sets a row (default 300)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[150, 400, 550], help="pairs a set")
    parser.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 5], help="partitions averaged")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    rows = []
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
