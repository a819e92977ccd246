"""`foilforge refilter` of a released file before and after a change, side by side in one run: wall and CPU
seconds, where they go, and what moved in the output.

    python -m benchmarks.bench_refilter_speed --base-ref REF --input FILE --like relations [--first 400]
        [--full] [--repeat-new] [--workdir DIR]

`--base-ref` is a git commit of this repository: its tree (`git archive`) is the old side, this checkout the new.
Both sides run the same file (its first `--first` records, written to the work directory as a file of the same
format; 0: all of it) as a new user runs it: the `foilforge` command line in a fresh process, from the side's own
checkout (its params.yaml), one OpenMP/MKL thread, no pass store configured (FOILFORGE_SCORE_CACHE unset), one
side after the other on the same machine. Per side: wall and CPU seconds (the process and its children), the
seconds of the three phases (scoring with the filters, the keep rules with the refinement and the adversarial
filter, the release gate), records kept, the verdict, every gate reading, and the SHA-256 of the kept file.
`--repeat-new` runs the new side a second time (same bytes expected); `--full` then runs the new side alone on
the whole file. The outputs of the two sides compared: kept records on one side only, and each gate reading's
accuracy before/after. Writes benchmarks/results/refilter_speed.json (a part already there is kept unless rerun).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, read_metrics, result_path, write_result

NAME = "refilter_speed"
PYTHON = sys.executable

#: runs the refilter command with its three phases timed (wall and this process's CPU), written to argv[1]
RUNNER = """
import json, sys, time
timed = {}

def timing(modules, name, label):  # the first of `modules` the checkout has (a function moved between commits)
    import importlib
    import importlib.util
    mod = importlib.import_module(next(m for m in modules if importlib.util.find_spec(m) is not None))
    inner = getattr(mod, name)
    def wrapped(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            part = timed.setdefault(label, {"wall_s": 0.0, "cpu_s": 0.0})
            part["wall_s"] += time.perf_counter() - wall
            part["cpu_s"] += time.process_time() - cpu
    setattr(mod, name, wrapped)

timing(["foilforge.pipeline.refiltering", "foilforge.pipeline.stages.refilter"], "score_released", "score")
timing(["foilforge.pipeline.selection"], "select", "select")
timing(["foilforge.pipeline.gate"], "release_gate", "gate")
from foilforge.pipeline.stages import cli
rc = cli.main(sys.argv[2:])
with open(sys.argv[1], "w") as handle:
    json.dump({k: {n: round(v, 1) for n, v in part.items()} for k, part in timed.items()}, handle)
sys.exit(rc)
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def subset(source: Path, first: int, workdir: Path) -> Path:
    """The first `first` records of `source` (JSON object or JSONL), as a file of the same name and format."""
    target = workdir / "input" / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".jsonl":
        lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        target.write_text("\n".join(lines[:first] if first else lines) + "\n", encoding="utf-8")
    else:
        data = json.loads(source.read_text(encoding="utf-8"))
        keys = list(data)[:first] if first else list(data)
        target.write_text(json.dumps({k: data[k] for k in keys}, ensure_ascii=False, indent=1), encoding="utf-8")
    return target


def checkout(ref: str, workdir: Path) -> Path:
    """The tree of commit `ref` of this repository, unpacked under `workdir`."""
    target = workdir / f"base-{ref}"
    if not target.exists():
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run_side(code: Path, input_path: Path, like: str, out: Path) -> dict:
    """One refilter run from checkout `code`, as a new user runs it (module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    phases = out / "phases.json"
    env = {k: v for k, v in os.environ.items() if k != "FOILFORGE_SCORE_CACHE"}
    env.update(PYTHONPATH=str(code), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    argv = [PYTHON, "-c", RUNNER, str(phases), "refilter", str(input_path), "--like", like,
            "--output", str(out / "kept"), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(argv, cwd=code, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (out / "log.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        raise RuntimeError(f"refilter from {code} failed (rc {done.returncode}); log: {out / 'log.txt'}")
    report = json.loads((out / "kept" / "report.json").read_text(encoding="utf-8"))
    kept_file = out / "kept" / input_path.name
    gate = report.get("gate") or {}
    readings = {name: {"before": entry["before"]["accuracy"], "after": entry["after"]["accuracy"]}
                for name, entry in (gate.get("attackers") or {}).items()}
    transfer = {name: entry.get("accuracy") for name, entry in (gate.get("transfer") or {}).items()}
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "phases": json.loads(phases.read_text(encoding="utf-8")),
        "records_before": report["records_before"], "kept": report["records_after"],
        "certified": report["certified"], "status": report["status"],
        "adversarial_rounds": (report.get("adversarial") or {}).get("rounds"),
        "gate_after_accuracy": {n: r["after"] for n, r in readings.items()},
        "gate_before_accuracy": {n: r["before"] for n, r in readings.items()},
        "gate_transfer_accuracy": transfer,
        "kept_sha256": digest(kept_file),
        "kept_keys": sorted(json.loads(kept_file.read_text(encoding="utf-8")))
        if input_path.suffix != ".jsonl" else None,
    }


def compare(old: dict, new: dict) -> dict:
    """What moved between the two sides' outputs."""
    old_keys, new_keys = set(old["kept_keys"] or []), set(new["kept_keys"] or [])

    def moved(name):
        return {attacker: [old[name].get(attacker), new[name].get(attacker)] for attacker in new[name]
                if old[name].get(attacker) != new[name].get(attacker)}

    return {"same_kept_bytes": old["kept_sha256"] == new["kept_sha256"],
            "kept_only_old": len(old_keys - new_keys), "kept_only_new": len(new_keys - old_keys),
            "verdict": [old["status"], new["status"]],
            "gate_after_moved": moved("gate_after_accuracy"), "gate_before_moved": moved("gate_before_accuracy"),
            "gate_transfer_moved": moved("gate_transfer_accuracy")}


def brief(side: dict) -> dict:
    return {k: v for k, v in side.items() if k != "kept_keys"}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-ref", required=True, help="the git commit whose code is the old side")
    parser.add_argument("--input", required=True, type=Path, help="a released file refilter reads")
    parser.add_argument("--like", default="relations")
    parser.add_argument("--first", type=int, default=400, help="records of the file both sides run (0: all)")
    parser.add_argument("--full", action="store_true", help="then the new side alone on the whole file")
    parser.add_argument("--repeat-new", action="store_true", help="run the new side twice on the subset")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-refilter-"))
    base = checkout(args.base_ref, workdir)
    part = subset(args.input, args.first, workdir)
    results = read_metrics(result_path(NAME))
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "omp_threads": 1}
    old = run_side(base, part, args.like, workdir / "old")
    new = run_side(ROOT, part, args.like, workdir / "new")
    side_by_side = {"input": f"{args.input.name}, first {args.first or 'all'} records", "like": args.like,
                    "base_ref": args.base_ref, "machine": machine, "old": brief(old), "new": brief(new),
                    "speedup_wall": round(old["wall_s"] / new["wall_s"], 2), "moved": compare(old, new)}
    if args.repeat_new:
        again = run_side(ROOT, part, args.like, workdir / "new-again")
        side_by_side["new_again"] = {"wall_s": again["wall_s"], "cpu_s": again["cpu_s"],
                                     "same_kept_bytes": again["kept_sha256"] == new["kept_sha256"]}
    results["subset"] = side_by_side
    if args.full:
        full = run_side(ROOT, subset(args.input, 0, workdir / "full"), args.like, workdir / "new-full")
        results["full"] = {"input": f"{args.input.name}, all records", "like": args.like, "machine": machine,
                           "new": brief(full)}
    write_result(NAME, results, args, argv)
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
