"""The fine-tuned transformer pair classifier (params.yaml `attackers.minilm_pair`, transformer_pair.v1) on every
VALSE dev piece as released: out-of-fold accuracy at picking the caption without the image, folds grouped by
caption, with its 95% Wilson interval.

The records are the released piece less what cannot be a foil (foilforge/validity.py), read through the scored
cache the other real-data benchmarks share (`--keep`, benchmarks/common.py). One fresh grouped partition
(`--repeats`, default 1) and params.yaml's epochs unless `--epochs` lowers them for a slow machine; the results
say which were used. Pieces already in the results file are skipped (`--again` reruns them), so a run stopped
half-way resumes. Written to benchmarks/results/transformer_pair.json after every piece.

    python -m benchmarks.bench_transformer_pair [--only existence.json] [--keep DIR] [--epochs 3] [--again]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

from benchmarks.common import scored_pieces, start_pieces, write_result

NAME = "transformer_pair"
ATTACKER = "minilm_pair"


def main(argv=None) -> int:
    from foilforge.filters.attackers import certify
    from foilforge.validity import refusal

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=None, help="fine-tuning epochs (default: params.yaml)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1, help="fresh grouped partitions, averaged")
    parser.add_argument("--again", action="store_true", help="rerun pieces already in the results")
    started = start_pieces(parser, argv, NAME)
    if started is None:
        return 0
    args, params, results = started
    block = copy.deepcopy(params["attackers"][ATTACKER])
    if args.epochs is not None:
        block["args"]["epochs"] = args.epochs
    results["settings"] = {"attacker": ATTACKER, "block": block, "folds": args.folds, "repeats": args.repeats,
                           "seed": 1, "records": "the released piece less refused records (foil empty or = caption)"}
    for relative, _, _, scored, _ in scored_pieces(params, args.only, args.keep):
        if not relative.startswith("valse-dev/") or (relative in results and not args.again):
            continue
        records = [r for r in scored if refusal(r) is None]
        begun = time.perf_counter()
        figures = certify(records, {ATTACKER: block}, folds=args.folds, seed=1, repeats=args.repeats)[ATTACKER]
        results[relative] = {"records": len(records), "seconds": round(time.perf_counter() - begun, 1),
                             **{k: figures[k] for k in ("accuracy", "n", "ties", "ci95") if k in figures}}
        print(relative, results[relative], flush=True)
        write_result(NAME, results, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
