"""What DVC pays after every stage of `dvc repro`: reading and rewriting dvc.lock, and how big the lock is.

    .venv/bin/python -m benchmarks.bench_dvc_lock [--lock dvc.lock] [--repeats 3]

After each stage DVC updates that stage's entry in dvc.lock: it parses the whole file with ruamel's round-trip
loader (to keep its layout), replaces the entry and dumps the whole file again; it also reads the lock when it
collects the stages. This times those calls of DVC's own serializer (dvc.utils.serialize) on the lock, wall and
CPU seconds (the fastest of --repeats), and counts the lock's lines by what they record (deps, params, outs) per
stage kind. Writes benchmarks/results/dvc_lock.json.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def fastest(call, repeats: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `repeats` calls."""
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def main(argv=None) -> dict:
    import yaml
    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml, parse_yaml_for_update

    from foilforge.io import write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, default=ROOT / "dvc.lock")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "dvc_lock.json")
    args = parser.parse_args(argv)

    text = args.lock.read_text()
    parsed = parse_yaml_for_update(text, str(args.lock))
    timings = {
        "round_trip_parse": fastest(lambda: parse_yaml_for_update(text, str(args.lock)), args.repeats),
        "dump": fastest(lambda: dumps_yaml(parsed), args.repeats),
        "plain_parse": fastest(lambda: parse_yaml(text, str(args.lock)), args.repeats),
    }
    lines: Counter = Counter()
    stages = yaml.safe_load(text)["stages"]
    for name, stage in stages.items():
        kind = name.split("@", 1)[0]
        for part in ("deps", "params", "outs"):
            lines[f"{kind}.{part}"] += len(yaml.safe_dump(stage.get(part) or {}).splitlines())
    per_update = timings["round_trip_parse"][1] + timings["dump"][1] + timings["plain_parse"][1]
    result = {
        "lock": str(args.lock.relative_to(ROOT) if args.lock.is_relative_to(ROOT) else args.lock),
        "lock_lines": text.count("\n"), "stages": len(stages),
        "seconds": {name: {"wall": round(w, 3), "cpu": round(c, 3)} for name, (w, c) in timings.items()},
        "cpu_s_per_stage_update": round(per_update, 2),
        "cpu_s_for_all_stages": round(per_update * len(stages), 1),
        "lines_by_kind_and_part": dict(lines.most_common()),
        "load_average_1min": os.getloadavg()[0],
    }
    write_json(args.output, result)
    print(result)
    return result


if __name__ == "__main__":
    main()
