"""Run every benchmark with its defaults; each writes its own file under benchmarks/results/.

    make benchmarks        (or: .venv/bin/python -m benchmarks.run_all [--only NAME ...])

Benchmarks are on demand, never part of `make test`: they time and measure
(speed, peak memory) on this machine's CPU, or on a GPU where one is given.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

BENCHMARKS = ("bench_ingest_memory", "bench_span_scoring", "bench_filters", "bench_bd2bb_clustering",
              "bench_bd2bb_released_overlap", "bench_relations_scaling", "bench_refinement_scale",
              "bench_attackers_real", "bench_unseen_attackers", "bench_ray_scaling", "bench_coco_build",
              "bench_score_memory", "bench_span_passes")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    failed = []
    for name in args.only:
        print(f"== {name}", flush=True)
        try:
            result = importlib.import_module(f"benchmarks.{name}").main([])
        except Exception as err:  # one broken benchmark should not hide the others' figures
            failed.append(name)
            print(f"{name} failed: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        print(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
