"""The gate's logistic fits on one BLAS thread against the process's default, on an idle machine and beside busy cores.

    python -m benchmarks.bench_blas_threads [--pairs 480] [--repeats 3]

liblinear (the solver behind every linear attacker's fit, filters/attackers/base.py `fit_logistic`) calls scipy's
OpenBLAS for its vector operations, thousands of times a fit. Here: the edit_tokens attacker's rows of `--pairs`
caption pairs (the first COCO val 2017 captions, each against the caption 7 further on: two descriptions of
different images, long edits, as BD2BB's target-against-decoy pairs have; the embedded sample's captions where the
real file is absent), fitted with each of `fit_logistic`'s two fits (`fit`) at C = 0.1, 1 and 10, once with BLAS
limited to one thread and once with the process's own count, the faster of `--repeats` timings each: on an idle machine, beside a process spinning on each core but one (as the
other worker of `make repro` on 2 cores keeps its core busy), and beside one spinning on every core (more busy
processes than cores: a second build, the test suite). Also: how far the coefficients of the two counts differ.

Writes benchmarks/results/blas_threads.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

from benchmarks.common import coco_captions_file, read_captions, write_result

NAME = "blas_threads"
CS = (0.1, 1.0, 10.0)


def rows(n_pairs: int):
    """(x, y): the edit_tokens attacker's rows of the first `n_pairs` caption pairs, both orders."""
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer

    from foilforge.filters.attackers.edit_tokens import EditTokensAttacker

    captions = read_captions(coco_captions_file(), n_pairs + 7)
    pairs = [(captions[k], captions[k + 7]) for k in range(n_pairs)]
    attacker = EditTokensAttacker()
    documents = [attacker.document(a, b) for a, b in pairs] + [attacker.document(b, a) for a, b in pairs]
    x = CountVectorizer(token_pattern=r"\S+", binary=True, lowercase=False).fit_transform(documents).astype(float)
    return x, np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))])


def fit(x, y, C: float, solver: str):
    """One of fit_logistic's two fits without its thread limit (the caller sets one or not): the dual solver capped
    at DUAL_MAX_ITER passes (where most n-gram fits end), or the primal one at tol 1e-8 (the fits the dual one did
    not end, BD2BB's multiple-choice pairs at C=1 and 10, and the dense probe rows)."""
    from foilforge.filters.attackers.base import DUAL_MAX_ITER, MAX_ITER, liblinear_fit

    if solver == "dual":
        return liblinear_fit(x, y, C, 0, True, DUAL_MAX_ITER)
    return liblinear_fit(x, y, C, 0, False, MAX_ITER, tol=1e-8)


def timed(x, y, C: float, solver: str, threads: int | None, repeats: int):
    """(fastest seconds, model) of `repeats` fits, BLAS limited to `threads` (None: the process's count)."""
    import contextlib

    from threadpoolctl import threadpool_limits

    best, model = None, None
    for _ in range(repeats):
        limit = threadpool_limits(limits=threads, user_api="blas") if threads else contextlib.nullcontext()
        with limit:
            start = time.perf_counter()
            model = fit(x, y, C, solver)
            elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, model


def spin(stop) -> None:
    while not stop.is_set():
        pass


def measure(x, y, repeats: int) -> list[dict]:
    import numpy as np
    from threadpoolctl import threadpool_info

    default = max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
    fit(x, y, CS[0], "dual")  # the first fit's one-off costs out of the timings
    out = []
    for solver in ("dual", "primal"):
        for C in CS:
            one_s, one = timed(x, y, C, solver, 1, repeats)
            own_s, own = timed(x, y, C, solver, None, repeats)
            out.append({"solver": solver, "C": C, "passes": int(one.n_iter_.max()), "one_thread_s": round(one_s, 4),
                        "default_threads": default, "default_threads_s": round(own_s, 4),
                        "slower_by": round(own_s / one_s, 2),
                        "coef_max_abs_diff": float(np.abs(one.coef_ - own.coef_).max())})
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=480)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    x, y = rows(args.pairs)
    cores = os.cpu_count() or 1
    metrics = {"rows": int(x.shape[0]), "features": int(x.shape[1]), "captions": str(coco_captions_file()),
               "cores": cores, "by_busy_neighbours": {}}
    for neighbours in sorted({0, max(1, cores - 1), cores}):
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(neighbours)]
        for process in spinners:
            process.start()
        try:
            metrics["by_busy_neighbours"][str(neighbours)] = measure(x, y, args.repeats)
        finally:
            stop.set()
            for process in spinners:
                process.join()
    for neighbours, found in metrics["by_busy_neighbours"].items():
        for row in found:
            print(f"{neighbours} busy neighbour(s) {row['solver']:6s} C={row['C']:<5} one thread "
                  f"{row['one_thread_s']:.4f} s, {row['default_threads']} threads {row['default_threads_s']:.4f} s "
                  f"({row['slower_by']}x), coef differ by {row['coef_max_abs_diff']:.2e}")
    write_result(NAME, metrics, args, argv)
    return metrics


if __name__ == "__main__":
    main()
