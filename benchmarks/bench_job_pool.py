"""The select stage on Ray with the attackers' fits on actors kept for the stage (pipeline/engine/jobs.py JobRunner)
against a Ray Data pool started for every round (the runner before it) and the local engine (one fit after
another in this process), side by side in one process.

    python3 -m benchmarks.bench_job_pool [--instrument foil_it] [--repeats 2] [--workers 2]

Reads data/scored/<instrument>.jsonl (run `make repro` first), runs select's `select` with each runner in turn
(`--repeats` times each, alternating, on one local Ray), checks that all give the same kept set and
metrics, and writes benchmarks/results/job_pool.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


class PoolPerCall:
    """The runner before JobRunner: every call maps its jobs with Ray Data, whose actor pool starts with it."""

    def __init__(self, settings: dict):
        self.settings = settings

    def __call__(self, jobs, worker_class, args):
        from foilforge.pipeline import engine

        return engine.map_batches(jobs, worker_class, args, {**self.settings, "batch_size": 1})


def main(argv=None) -> dict:
    from foilforge.filter import keep_rules
    from foilforge.filters.adversarial import settings_for
    from foilforge.io import write_json
    from foilforge.params import load_params
    from foilforge.pipeline import engine
    from foilforge.pipeline.bias import instrument_settings
    from foilforge.pipeline.scoring import read_records
    from foilforge.pipeline.selection import select

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrument", default="foil_it")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", type=Path, default=RESULTS / "job_pool.json")
    args = parser.parse_args(argv)

    params = load_params("params.yaml")
    settings = engine.engine_settings(params)
    settings = {**settings, "name": "ray", "ray": {**settings["ray"], "workers": args.workers}}
    engine.start_ray(settings["ray"])
    source = Path("data/scored") / f"{args.instrument}.jsonl"
    records = read_records(source)
    enabled, item_mode = keep_rules(params, args.instrument), instrument_settings(params, args.instrument)["items"]
    adversarial = settings_for(params, args.instrument)
    runs: dict[str, list[float]] = {"kept_actors": [], "pool_per_round": [], "local": []}
    outputs = {}
    for _ in range(args.repeats):
        for name in runs:
            runner = {"kept_actors": engine.job_runner(settings), "pool_per_round": PoolPerCall(settings),
                      "local": None}[name]
            start = time.perf_counter()
            kept, _, metrics = select(records, enabled, source, item_mode=item_mode, adversarial=adversarial,
                                      runner=runner)
            runs[name].append(round(time.perf_counter() - start, 2))
            if name == "kept_actors":
                runner.close()
            outputs.setdefault(name, json.dumps([kept, metrics], sort_keys=True))
    rounds = len(json.loads(outputs["kept_actors"])[1]["refinement"]["plausibility"]["adversarial"]["history"])
    result = {"benchmark": "job_pool", "instrument": args.instrument, "records": len(records),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "ray_workers": args.workers, "adversarial_rounds": rounds, "select_s": runs,
              "identical_kept_and_metrics": len(set(outputs.values())) == 1}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.results, result)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
