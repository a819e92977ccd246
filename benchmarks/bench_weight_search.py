"""The adversarial filter's JS weight search started at the last round's weight, against the search from scratch.

    python -m benchmarks.bench_weight_search [--build DIR] [--instruments foil_it action_replacement] [--repeats 1]

DIR (default: this checkout, after `make repro`) is a built sample, or a `bench_sample_build --keep` worktree: its
data/scored and data/partners files are the select stage's inputs. Each instrument's `foilforge select` runs in
a process of its own, the two ways taking turns (reference first), outputs to a temporary directory:

* `from_scratch`: every round's search doubles the weight from the last of JS_WEIGHTS, then bisects
  (filters/refinement.py `_weight_search` without `start_weight`);
* `from_last_round`: what the adversarial filter does, each round starting at the weight the round before it
  settled on.

Figures per instrument and way: the refinement programs solved, their CPU seconds (HiGHS), the process's CPU
seconds, and the md5 of the filtered file and the metrics. Results: benchmarks/results/weight_search.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, machine, write_result

NAME = "weight_search"
WAYS = ("from_scratch", "from_last_round")


def child(way: str, instrument: str, out: Path) -> None:
    """Run `foilforge select INSTRUMENT` in this process (the current directory a build), the weight search `way`,
    and print one JSON line of figures."""
    from foilforge.filters import refinement
    from foilforge.pipeline.stages.cli import main

    solves: list[float] = []
    solve, refine = refinement.RefinementProgram.solve, refinement.refine

    def timed_solve(self, weight):
        start = time.process_time()
        try:
            return solve(self, weight)
        finally:
            solves.append(time.process_time() - start)

    def from_scratch(*args, **kwargs):
        kwargs.pop("start_weight", None)
        return refine(*args, **kwargs)

    refinement.RefinementProgram.solve = timed_solve
    if way == "from_scratch":
        refinement.refine = from_scratch
    sys.argv = ["foilforge", "select", instrument, "--input", f"data/scored/{instrument}.jsonl",
                "--output", str(out / "filtered.jsonl"), "--rejected", str(out / "rejected.jsonl"),
                "--metrics", str(out / "metrics.json"), "--funnel", str(out / "funnel.csv"),
                "--partners", f"data/partners/{instrument}.jsonl"]
    try:
        main()
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"solves": len(solves), "solve_cpu_s": round(sum(solves), 2),
                      "process_cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}))


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def run(build: Path, way: str, instrument: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT),
               "FOILFORGE_SCORE_CACHE": str(build / ".foilforge-cache" / "scores")}
        # the script by its path, not `-m`: with -m the build's directory would come first on sys.path, and a
        # build that is a worktree of another commit would lend its own foilforge
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", way, instrument, str(out)],
                              cwd=build, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"select {instrument} ({way}) failed:\n{done.stderr[-3000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        metrics = json.loads((out / "metrics.json").read_text())
        adversarial = ((metrics.get("refinement") or {}).get("plausibility") or {}).get("adversarial") or {}
        return {**figures, "kept": sum(1 for _ in (out / "filtered.jsonl").open()),
                "rounds": len(adversarial.get("history") or []),
                "filtered_md5": md5(out / "filtered.jsonl"), "metrics_md5": md5(out / "metrics.json")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, default=ROOT,
                        help="a built sample's directory (data/scored, data/partners; default: this checkout)")
    parser.add_argument("--instruments", nargs="*", default=["foil_it", "action_replacement"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", nargs=3, metavar=("WAY", "INSTRUMENT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        way, instrument, out = args.child
        child(way, instrument, Path(out))
        return
    build = args.build.resolve()
    metrics: dict = {"build": str(build), "instruments": {}}
    for instrument in args.instruments:
        rows: dict[str, list[dict]] = {way: [] for way in WAYS}
        for repeat in range(args.repeats):
            for way in WAYS:
                rows[way].append(run(build, way, instrument))
                print(instrument, way, repeat, json.dumps(rows[way][-1]), flush=True)
        same = len({(r["filtered_md5"], r["metrics_md5"]) for way in WAYS for r in rows[way]}) == 1
        metrics["instruments"][instrument] = {**rows, "same_bytes": same}
    metrics["machine"] = machine()
    print(write_result(NAME, metrics, args, argv))


if __name__ == "__main__":
    main()
