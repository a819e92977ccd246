"""Out-of-fold runs of several attackers and partitions as one list of fold jobs, and transfer fits.

A stage hands the jobs to a runner: `run_here` (one worker in this process) or the engine's (pipeline/engine/
`job_runner`), which maps the same worker over the same jobs on a Ray actor pool.
"""

from __future__ import annotations

from foilforge.attacker import Pair, assemble_margins, fold_margins, grouped_folds, shared_differences
from foilforge.filters.attackers.grid_search import GridSearchAttacker, build_attacker


def run_here(jobs: list, worker_class, args: tuple) -> list:
    """The default runner of fold jobs: one worker in this process."""
    return worker_class(*args)(jobs)


#: the worker a forked runner's processes share (set in the parent just before the fork, read in the children)
_FORKED_WORKER = None


def _forked_job(job):
    return _FORKED_WORKER([job])[0]


class ForkedRunner:
    """A runner of fold jobs on `workers` processes forked from this one: the worker is built and
    `prepare`d here (the feature maps, the models' passes: label-free, the same in every fold), the processes
    inherit it and run the fits, one job at a time, and the results come back in job order. A job's result is a
    function of the job and the pairs alone (FoldFits), so any number of workers gives the same results as
    `run_here`. One worker, one job, or a system without fork (Windows): here."""

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))

    def __call__(self, jobs: list, worker_class, args: tuple) -> list:
        import multiprocessing

        global _FORKED_WORKER
        worker = worker_class(*args)
        if self.workers == 1 or len(jobs) < 2 or "fork" not in multiprocessing.get_all_start_methods():
            return worker(jobs)
        if hasattr(worker, "prepare"):
            worker.prepare(jobs)
        _FORKED_WORKER = worker
        try:
            with multiprocessing.get_context("fork").Pool(min(self.workers, len(jobs))) as pool:
                return pool.map(_forked_job, jobs, chunksize=1)
        finally:
            _FORKED_WORKER = None


def maker(blocks: dict, name: str):
    """A function that builds a fresh attacker of `blocks[name]` (the params.yaml `attackers.<name>` block)."""
    return lambda: build_attacker(blocks[name], f"params.yaml attackers.{name}")


class FoldFits:
    """The engine's worker for out-of-fold margins: a job (attacker name, seed, fold k) is `fold_margins` of
    that attacker on the folds `grouped_folds(groups, folds, seed)` of these pairs.

    Built once per worker with every pair; an attacker's shared feature map (`shared_differences`, a function of
    the texts alone) is computed the first time a job of that attacker comes, so each worker computes it at most
    once and every worker gets the same rows.
    """

    def __init__(self, blocks: dict, pairs: list[Pair], extra: list[Pair] = (), folds: int = 5):
        self.blocks, self.pairs, self.extra, self.folds = blocks, list(pairs), list(extra), folds
        self._shared: dict = {}

    def prepare(self, jobs: list[tuple[str, int, int]]) -> None:
        """Every shared feature map the jobs use, and the texts' model passes every attacker of them reads (a
        hidden-state probe's vectors, in a grid too), computed now: a runner that forks after this computes them
        once, not once a process."""
        for name in dict.fromkeys(name for name, _, _ in jobs):
            make = maker(self.blocks, name)
            if name not in self._shared:
                self._shared[name] = shared_differences(make, self.pairs, self.extra)
            attacker = make()
            if isinstance(attacker, GridSearchAttacker):
                attacker = attacker.make(attacker.settings[0])
            if hasattr(attacker, "vectors"):  # a hidden-state probe: its vectors are kept for the stage
                attacker.vectors([t for p in self.pairs + self.extra for t in (p.caption, p.foil)])

    def __call__(self, jobs: list[tuple[str, int, int]]) -> list:
        results = []
        for name, seed, k in jobs:
            make = maker(self.blocks, name)
            if name not in self._shared:
                self._shared[name] = shared_differences(make, self.pairs, self.extra)
            fold = grouped_folds([p.group for p in self.pairs], self.folds, seed)
            results.append(fold_margins(make, self.pairs, self.extra, self._shared[name], fold, k, seed))
        return results


def fold_jobs(names, groups: list[str], folds: int, seeds) -> list[tuple[str, int, int]]:
    """Every (attacker, seed, held-out fold) of out-of-fold runs of `names` under each seed's partition."""
    return [(name, seed, k) for name in names for seed in seeds
            for k in sorted(set(grouped_folds(groups, folds, seed)))]


def out_of_fold_runs(blocks: dict, pairs: list[Pair], folds: int, seeds, extra: list[Pair] = (),
                     runner=run_here) -> dict:
    """{(attacker name, seed): (margins of pairs, margins of extra)}: `out_of_fold_margins` of every attacker
    of `blocks` under each seed, all their fold fits handed to `runner` as one list of jobs (on the Ray engine,
    fits of several attackers and partitions run side by side)."""
    import numpy as np

    if not pairs:
        return {(name, seed): (np.zeros(0), np.zeros(len(extra))) for name in blocks for seed in seeds}
    jobs = fold_jobs(list(blocks), [p.group for p in pairs], folds, seeds)
    fits: dict = {}
    for (name, seed, _), fit in zip(jobs, runner(jobs, FoldFits, (blocks, pairs, extra, folds))):
        fits.setdefault((name, seed), []).append(fit)
    return {key: assemble_margins(found, len(pairs), len(extra)) for key, found in fits.items()}


def transfer_margins(blocks: dict, train: list[Pair], scored: list[Pair], seed: int = 0) -> dict:
    """{attacker name: margins of `scored`} from each attacker of `blocks` fitted once (random_state `seed`) on
    `train`: pairs outside the scored set (those a filter removed, a pool of the same phenomenon), so the
    attacker learns from all the data a language prior could have come from, not only from the other folds of
    the kept pairs. Pairs of `train` whose caption group is among the scored pairs' are dropped first (the
    attacker never sees a caption it scores). Empty when fewer than 2 training pairs remain."""
    import numpy as np

    held_groups = {p.group for p in scored}
    train = [p for p in train if p.group not in held_groups]
    if len(train) < 2:
        return {}
    return {name: (np.asarray(maker(blocks, name)().set_params(random_state=seed).fit(train).margins(scored))
                   if scored else np.zeros(0)) for name in blocks}
