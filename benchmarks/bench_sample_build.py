"""The sample build (`make repro` after setup) timed stage by stage, in a git worktree of its own.

    python3 -m benchmarks.bench_sample_build --label before [--commit HEAD] [--reference-lock REF]

Adds a detached git worktree of `--commit` (default HEAD) under /tmp, runs there what `make repro` runs after
setup (`foilforge check-params`, `foilforge repro`, `dvc metrics show`; `--runner dvc`: `dvc repro` instead) with this checkout's .venv and the worktree's
own code (PYTHONPATH), and FOILFORGE_STAGE_TIMINGS set, so every stage process writes its wall, CPU time
(user + sys), startup, import, model-load and work time (foilforge/timings.py). The worktree has no DVC outputs,
no DVC cache and no .foilforge-cache: every stage runs, as on a fresh clone. The GGUF conversion cache
(foilforge/models.py) is a fresh directory too unless `--warm-gguf`.

Then every DVC out the worktree's dvc.lock lists is compared by md5 with the reference dvc.lock (`git show
REF:dvc.lock`, default: the same commit; or a dvc.lock file, e.g. another label's `--save-lock`), and the
worktree is removed (`--keep` keeps it). `--cherry-pick` applies commits on top of `--commit` in the worktree, so
a change is measured against the same base. `make repro` exports FOILFORGE_SCORE_CACHE (Makefile); so does
this run, to the worktree's .foilforge-cache/scores.

The machine may be shared: besides the stages' own CPU time, the run records the whole machine's busy CPU
seconds (/proc/stat) over the build, so the CPU others used meanwhile is in the results. Results: one entry per
`--label` in benchmarks/results/sample_build.json (other labels kept) and the per-stage table on stdout
(`--table` prints the table of labels already measured, side by side, without running anything).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from benchmarks.common import ROOT, machine, read_metrics, result_path, write_result

NAME = "sample_build"
# stage kinds in pipeline order (dvc.yaml); check-params is `make repro`'s first command
KINDS = ("check-params", "ingest", "foil", "score", "partners", "select", "validate", "bias", "baseline", "export", "evaluate")
TIMES = ("wall_s", "cpu_s", "startup_s", "import_s", "model_load_s", "work_s")


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class LoadSampler(threading.Thread):
    """The 1-minute load average every `every` seconds while the build runs."""

    def __init__(self, every: float = 10.0):
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))


def stage_name(argv: list[str]) -> str:
    """`foil relations --input ...` -> foil@relations; `export ...` -> export (dvc.yaml's stage names)."""
    command = argv[0] if argv else "?"
    if command in ("ingest", "foil", "score", "partners", "select", "validate", "bias", "baseline") and len(argv) > 1:
        return f"{command}@{argv[1]}"
    return command


def stage_events(log_path: Path, offset: int) -> dict:
    """What a repro command logged from `offset` on: the stages it ran, restored from DVC's run cache, found
    unchanged (foilforge repro's and dvc repro's log lines)."""
    import re

    with log_path.open() as handle:
        handle.seek(offset)
        text = handle.read()
    events = {"ran": r"Running stage '([^']+)'", "restored": r"Stage '([^']+)' restored from the run cache",
              "unchanged": r"Stage '([^']+)' didn't change"}
    return {f"stages_{kind}": sorted(set(re.findall(pattern, text))) for kind, pattern in events.items()}


def lock_outs(lock: dict) -> dict[str, str]:
    """path -> md5 of every out, metric and plot a dvc.lock records."""
    return {out["path"]: out.get("md5") for stage in (lock.get("stages") or {}).values()
            for out in stage.get("outs") or []}


def run_logged(command: list[str], env: dict, cwd: Path, log, kill_after: float | None = None
               ) -> tuple[int, float, float]:
    """(exit status, wall seconds, CPU seconds of the command and its children) of one command. `kill_after`: the
    command and every process it started are killed (SIGKILL, nothing cleaned up) after that many seconds."""
    import signal

    before = os.times()
    began = time.perf_counter()
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        rc = process.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        rc = process.wait()
        log.write(f"\n[killed after {kill_after:.0f} s]\n")
        log.flush()
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return rc, time.perf_counter() - began, cpu


def build(args) -> dict:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.commit], check=True, capture_output=True,
                            text=True).stdout.strip()
    worktree = Path(args.worktree or f"/tmp/wt-bench-{args.label}")
    if worktree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(worktree, ignore_errors=True)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), commit], check=True,
                   capture_output=True)
    for picked in args.cherry_pick or []:
        subprocess.run(["git", "-C", str(worktree), "-c", "user.name=bench", "-c", "user.email=bench@localhost",
                        "cherry-pick", picked], check=True, capture_output=True)
    built_commit = subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], check=True, capture_output=True,
                                  text=True).stdout.strip()
    if args.seed_data:  # another build's outputs as the inputs of the stages run here (--only)
        shutil.copytree(args.seed_data, worktree / "data", dirs_exist_ok=True)
    timings_dir = worktree / ".bench" / "timings"
    timings_dir.mkdir(parents=True)
    venv_bin = ROOT / ".venv" / "bin"
    # what `make repro` exports besides PATH (Makefile): the score cache under the checkout's .foilforge-cache
    env = dict(os.environ, PATH=f"{venv_bin}:{os.environ.get('PATH', '')}", PYTHONPATH=str(worktree),
               FOILFORGE_STAGE_TIMINGS=str(timings_dir),
               FOILFORGE_SCORE_CACHE=str(worktree / ".foilforge-cache" / "scores"))
    if not args.warm_gguf:
        env["FOILFORGE_GGUF_CACHE"] = str(worktree / ".bench" / "gguf")
    log_path = worktree / ".bench" / "build.log"
    steps = {}
    host = machine(bf16=True)  # before the build: its timings are not the build's
    sampler = LoadSampler()
    busy_before, began = machine_busy_seconds(), time.perf_counter()
    sampler.start()
    try:
        with log_path.open("w") as log:
            if args.only:
                repro = ["dvc", "repro", "--force", "--single-item", *args.only]
            else:  # what `make repro` runs (foilforge repro), or DVC's own stage-per-process run
                repro = ["foilforge", "repro"] if args.runner == "foilforge" else ["dvc", "repro"]
            profile = ["--profile", args.profile] if args.profile else []
            sets = [word for value in args.set or [] for word in ("-S", value)]
            if profile or sets:  # `make coco-val`: foilforge repro writes the profile into params.yaml first
                repro = [*repro, *profile, *sets]
            commands = [("check-params", ["foilforge", "check-params", *profile]), ("dvc repro", repro)]
            if args.kill_after:  # killed once, then the same command again: what it runs again is in the log
                commands.append(("dvc repro (resumed)", repro))
            for name, command in (*commands, ("dvc metrics show", ["dvc", "metrics", "show"])):
                offset = log.tell()
                rc, wall, cpu = run_logged(command, env, worktree, log,
                                           args.kill_after if name == "dvc repro" else None)
                steps[name] = {"rc": rc, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                               **stage_events(log_path, offset)}
                print(f"{name}: rc {rc}, {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
                if name == "dvc repro" and args.kill_after and rc < 0:
                    steps[name]["killed_after_s"] = args.kill_after
                    continue
                if rc:
                    break
    finally:
        sampler.stop.set()
    total_wall = time.perf_counter() - began
    busy = machine_busy_seconds() - busy_before
    own_cpu = sum(step["cpu_s"] for step in steps.values())
    failed = [name for name, step in steps.items() if step["rc"]]
    if failed:
        tail = log_path.read_text()[-4000:]
        print(tail, file=sys.stderr)

    stages = read_timings(timings_dir)

    reference_ref = args.reference_lock or commit
    if Path(reference_ref).is_file():  # a dvc.lock file (another label's build), else a commit
        reference_text = Path(reference_ref).read_text()
    else:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{reference_ref}:dvc.lock"], capture_output=True,
                               text=True)
        reference_text = shown.stdout if shown.returncode == 0 else ""
        if shown.returncode:
            print(f"no reference dvc.lock at {reference_ref}: outs not compared", file=sys.stderr)
    reference = lock_outs(yaml.safe_load(reference_text) or {})
    built_lock = worktree / "dvc.lock"
    built_yaml = yaml.safe_load(built_lock.read_text()) if built_lock.is_file() else {}
    if args.only:  # only the outs of the stages run here
        built_yaml = {"stages": {name: stage for name, stage in (built_yaml.get("stages") or {}).items()
                                 if name in args.only}}
    built = lock_outs(built_yaml)
    if args.save_lock:
        args.save_lock.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built_lock, args.save_lock)
    differ = sorted(p for p in reference if p in built and built[p] != reference[p])
    missing = sorted(set(built) - set(reference)) if args.only else sorted(set(reference) - set(built))

    result = {
        "label": args.label, "commit": built_commit, "profile": args.profile, "set": args.set or [],
        "kill_after_s": args.kill_after, "only": args.only, "seed_data": args.seed_data, "base_commit": commit, "cherry_picked": args.cherry_pick or [],
        "runner": None if args.only else args.runner,
        "reference_lock": reference_ref,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": host,
        "gguf_cache": "warm (shared)" if args.warm_gguf else "fresh (the first SmolLM2 load converts the GGUF file)",
        "steps": steps, "failed": failed, "total_wall_s": round(total_wall, 1),
        "stage_processes": len(stages),
        "sum_stage_wall_s": round(sum(s["wall_s"] for s in stages.values()), 1),
        "sharing": {
            "note": "measured on a machine shared with other agents' jobs: wall times include waiting for a core; "
                    "CPU seconds (user + sys) are the steadier figure",
            "machine_busy_cpu_s": round(busy, 1), "this_build_cpu_s": round(own_cpu, 1),
            "others_cpu_s": round(max(busy - own_cpu, 0.0), 1),
            "load_average_1min": {"mean": round(sum(sampler.samples) / len(sampler.samples), 2) if sampler.samples else None,
                                  "max": max(sampler.samples, default=None)},
        },
        "outs": {"compared": len([p for p in reference if p in built]), "differ": differ, "missing": missing,
                 "md5": built},
        "kinds": kind_totals(stages),
        "stages": stages,
    }
    if not args.keep:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(worktree, ignore_errors=True)
    return result


def read_timings(timings_dir: Path) -> dict:
    """{stage name: its process's timings} from the files foilforge/timings.py wrote."""
    stages = {}
    for path in sorted(Path(timings_dir).glob("*.json")):
        entry = json.loads(path.read_text())
        entry["cpu_s"] = round(entry["cpu_user_s"] + entry["cpu_sys_s"], 3)
        stages[stage_name(entry["argv"])] = {key: entry[key] for key in ("rc", *TIMES, "cpu_user_s", "cpu_sys_s",
                                                                         "max_rss_mb", "imports", "loads")}
    return stages


def kind_totals(stages: dict) -> dict:
    """Per stage kind (foil, score, ...): processes and the sums of their times."""
    totals = {}
    for name, entry in stages.items():
        kind = name.split("@", 1)[0]
        row = totals.setdefault(kind, {"processes": 0, **{key: 0.0 for key in TIMES}})
        row["processes"] += 1
        for key in TIMES:
            row[key] += entry[key]
    ordered = {kind: totals[kind] for kind in KINDS if kind in totals}
    ordered.update({kind: row for kind, row in totals.items() if kind not in ordered})
    for row in ordered.values():
        for key in TIMES:
            row[key] = round(row[key], 1)
    return ordered


def table(results: dict, labels: list[str]) -> str:
    """Markdown: per stage kind, wall / CPU / import / model load / work seconds of each label, side by side."""
    heads = ["stage (processes)"] + [f"{label} {what}" for label in labels
                                     for what in ("wall", "CPU", "import", "load", "work")]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    kinds = []
    for label in labels:  # `repro`: foilforge repro's own process, which holds its workers' time: not a stage
        kinds += [k for k in results[label]["kinds"] if k not in kinds and k != "repro"]
    for kind in kinds:
        counts = {results[label]["kinds"].get(kind, {}).get("processes", 0) for label in labels}
        cells = [f"{kind} ({'/'.join(str(c) for c in sorted(counts))})"]
        for label in labels:
            row = results[label]["kinds"].get(kind)
            cells += ["-"] * 5 if row is None else [f"{row[key]:.1f}" for key in
                                                    ("wall_s", "cpu_s", "import_s", "model_load_s", "work_s")]
        lines.append("| " + " | ".join(cells) + " |")
    sums = ["all stage processes"]
    for label in labels:
        rows = [row for kind, row in results[label]["kinds"].items() if kind != "repro"]
        sums += [f"{sum(r[key] for r in rows):.1f}" for key in ("wall_s", "cpu_s", "import_s", "model_load_s", "work_s")]
    lines.append("| " + " | ".join(sums) + " |")
    dvc = ["DVC itself (`dvc repro` or `foilforge repro` less its stage commands)"]
    for label in labels:
        repro = (results[label].get("steps") or {}).get("dvc repro")
        stage_rows = [row for kind, row in results[label]["kinds"].items() if kind not in ("check-params", "repro")]
        if repro is None:  # a build recorded from its timings (--from-timings): DVC's share unknown
            dvc += ["-", "-", "", "", ""]
            continue
        # foilforge repro runs stages side by side: their wall times overlap, only the CPU seconds subtract
        overlapping = "repro" in results[label]["kinds"]
        dvc += ["-" if overlapping else f"{repro['wall_s'] - sum(r['wall_s'] for r in stage_rows):.1f}",
                f"{repro['cpu_s'] - sum(r['cpu_s'] for r in stage_rows):.1f}", "", "", ""]
    lines.append("| " + " | ".join(dvc) + " |")
    totals = ["`make repro` after setup (check-params, dvc repro, dvc metrics show)"]
    for label in labels:
        steps = (results[label].get("steps") or {}).values()
        wall = results[label].get("total_wall_s")
        totals += ["-" if wall is None else f"{wall:.1f}", f"{sum(step['cpu_s'] for step in steps):.1f}", "", "", ""]
    lines.append("| " + " | ".join(totals) + " |")
    return "\n".join(lines)


def compare(results: dict, first: str, second: str) -> str:
    """Markdown: the stage processes both labels ran (the build's, or another label's merged in with `+`), wall and
    CPU / import / model-load seconds side by side."""
    def stages_of(label):
        merged = {}
        for part in label.split("+"):
            merged.update(results[part]["stages"])
        return merged

    a, b = stages_of(first), stages_of(second)
    heads = ["stage", f"{first} wall", f"{second} wall", f"{first} CPU", f"{second} CPU",
             f"{first} import", f"{second} import", f"{first} load", f"{second} load"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    sums = [0.0] * 8
    for name in [n for n in a if n in b and n != "check-params"]:
        values = [a[name]["wall_s"], b[name]["wall_s"], a[name]["cpu_s"], b[name]["cpu_s"], a[name]["import_s"],
                  b[name]["import_s"], a[name]["model_load_s"], b[name]["model_load_s"]]
        sums = [x + y for x, y in zip(sums, values)]
        lines.append("| " + " | ".join([name] + [f"{v:.1f}" for v in values]) + " |")
    lines.append("| " + " | ".join(["all of these"] + [f"{v:.1f}" for v in sums]) + " |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="current", help="this run's key in the results file (before, after, ...)")
    parser.add_argument("--commit", default="HEAD", help="the commit to build (default HEAD)")
    parser.add_argument("--reference-lock", default=None,
                        help="a dvc.lock file, or the commit whose dvc.lock holds the reference md5s (default: --commit's)")
    parser.add_argument("--cherry-pick", nargs="*", default=None, metavar="COMMIT",
                        help="commits applied on top of --commit in the worktree (a change measured alone)")
    parser.add_argument("--save-lock", type=Path, default=None, help="copy the build's dvc.lock here")
    parser.add_argument("--only", nargs="*", default=None, metavar="STAGE",
                        help="run only these stages (dvc repro --force --single-item), on --seed-data's inputs")
    parser.add_argument("--seed-data", default=None,
                        help="a data/ directory of another build copied into the worktree first (the inputs of --only)")
    parser.add_argument("--worktree", default=None, help="where the worktree goes (default /tmp/wt-bench-LABEL)")
    parser.add_argument("--runner", choices=("foilforge", "dvc"), default="foilforge",
                        help="foilforge repro (make repro's: the stage commands in one worker) or dvc repro")
    parser.add_argument("--profile", default=None,
                        help="build with a profile (foilforge repro --profile NAME, as `make coco-val` runs it)")
    parser.add_argument("--set", action="append", default=None, metavar="KEY=VALUE",
                        help="a param set for the build (foilforge repro -S; e.g. sources.coco.root=DIR)")
    parser.add_argument("--kill-after", type=float, default=None, metavar="SECONDS",
                        help="kill the build (SIGKILL, its workers with it) after SECONDS, then run the same "
                             "command again; the results say which stages each run ran")
    parser.add_argument("--warm-gguf", action="store_true", help="use the user's GGUF conversion cache")
    parser.add_argument("--keep", action="store_true", help="keep the worktree (its outputs) after the run")
    parser.add_argument("--results", type=Path, default=result_path(NAME))
    parser.add_argument("--table", nargs="*", default=None, metavar="LABEL",
                        help="print the table of these labels (all when none given) from the results file and exit")
    parser.add_argument("--from-timings", type=Path, default=None,
                        help="record the stage timings a build wrote to this directory so far under --label, and exit")
    parser.add_argument("--compare", nargs=2, default=None, metavar=("LABEL", "LABEL"),
                        help="print the stages both labels ran side by side (LABEL+LABEL merges runs) and exit")
    args = parser.parse_args(argv)
    if (args.profile or args.set) and (args.runner != "foilforge" or args.only):
        parser.error("--profile and --set are foilforge repro's (make coco-val): not with --runner dvc or --only")
    results = read_metrics(args.results)
    if args.compare:
        print(compare(results, *args.compare))
        return {}
    if args.from_timings:  # a build that did not finish (killed, or still running): the stages it timed so far
        stages = read_timings(args.from_timings)
        result = {"label": args.label, "partial": True, "from_timings": str(args.from_timings),
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "stage_processes": len(stages), "kinds": kind_totals(stages), "stages": stages,
                  "steps": {}, "total_wall_s": None}
        results[args.label] = result
        write_result(NAME, results, args, argv, path=args.results)
        return result
    if args.table is not None:
        labels = args.table or list(results)
        print(table(results, labels))
        return {label: results[label] for label in labels}
    result = build(args)
    # read again: another run may have written its label meanwhile
    results = read_metrics(args.results)
    results[args.label] = result
    write_result(NAME, results, args, argv, path=args.results)
    print(table(results, [args.label]))
    print(f"outs compared {result['outs']['compared']}, differ: {result['outs']['differ'] or 'none'}, "
          f"missing: {result['outs']['missing'] or 'none'}")
    return result


if __name__ == "__main__":
    main()
