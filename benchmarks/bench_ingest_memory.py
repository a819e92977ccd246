"""Peak memory of `foilforge ingest` on a ~1 GB Open Images boxes CSV (the boxes file must stream).

    .venv/bin/python -m benchmarks.bench_ingest_memory [--gib 1.0] [--images-with-relationships 2000] [--tmpdir DIR]

Writes a synthetic Open Images v6 source into a temporary directory: a boxes
CSV of about --gib GiB in the validation layout (13 columns, ~12M rows for
1 GiB, 8 boxes an image), a relationships CSV for --images-with-relationships
of those images and a class file. Runs `foilforge ingest` on it in a
subprocess, takes that child's peak resident memory
(`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`) and its wall time, checks
the output has one sample per image with relationships, deletes the temporary
data, and writes benchmarks/results/ingest_memory.json:
`{file_bytes, peak_rss_mib, seconds, limit_mib, ok, ...}`. `ok` means the
ingest succeeded, gave the expected samples and stayed under limit_mib (1.5
GiB, below what reading the whole 2 GB train file would take).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, result_path, write_result

NAME = "ingest_memory"
LIMIT_MIB = 1536
# the ingest command, printing its own peak resident memory (VmHWM) at exit: getrusage's ru_maxrss of a child
# counts the pages of the process it was forked from (a test runner's, torch loaded) before its exec
PEAK_REPORTING_CLI = """import runpy, sys
sys.argv = ["foilforge", *sys.argv[1:]]
try:
    runpy.run_module("foilforge.pipeline.stages.cli", run_name="__main__")
finally:
    print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).strip(), file=sys.stderr)
"""
BOXES_PER_IMAGE = 8
LABELS = [f"/m/0{n:05x}" for n in range(600)]  # the boxable vocabulary has 601 classes
PREDICATES = ("wears", "holds", "at", "on", "is", "plays", "ride", "inside_of")


def image_id(n: int) -> str:
    return f"{(n * 0x9E3779B1) % (1 << 64):016x}"


def write_source(directory: Path, target_bytes: int, related_images: int, seed: int = 0) -> dict:
    """Write the three files; returns sizes and counts."""
    from foilforge.pipeline.sources.openimages import BOX_HEADER, VRD_HEADER

    rng = random.Random(seed)
    boxes_path = directory / "train-annotations-bbox.csv"
    rows = images = 0
    with open(boxes_path, "w", encoding="utf-8", newline="") as handle:
        handle.write(",".join(BOX_HEADER) + "\n")
        written = handle.tell()
        while written < target_bytes:
            lines = []
            for _ in range(1000):
                image = image_id(images)
                images += 1
                for _ in range(BOXES_PER_IMAGE):
                    x0, y0 = rng.random() * 0.5, rng.random() * 0.5
                    lines.append(f"{image},xclick,{rng.choice(LABELS)},1,{x0:.6f},{x0 + 0.4:.6f},{y0:.6f},{y0 + 0.4:.6f},"
                                 f"{rng.randint(0, 1)},0,{rng.randint(0, 1)},0,0\n")
            chunk = "".join(lines)
            handle.write(chunk)
            written += len(chunk)
            rows += len(lines)
    # relationships on images spread over the whole boxes file
    related = sorted(rng.sample(range(images), min(related_images, images)))
    vrd_path = directory / "train-annotations-vrd.csv"
    relationships = 0
    with open(vrd_path, "w", encoding="utf-8", newline="") as handle:
        handle.write(",".join(VRD_HEADER) + "\n")
        for n in related:
            for _ in range(rng.randint(1, 4)):
                a, b = rng.choice(LABELS), rng.choice(LABELS)
                handle.write(f"{image_id(n)},{a},{b},0.1,0.5,0.1,0.9,0.4,0.6,0.2,0.5,{rng.choice(PREDICATES)}\n")
                relationships += 1
    classes_path = directory / "class-descriptions-boxable.csv"
    classes_path.write_text("".join(f"{label},Class {i}\n" for i, label in enumerate(LABELS)), encoding="utf-8")
    return {"file_bytes": boxes_path.stat().st_size, "box_rows": rows, "images": images,
            "images_with_relationships": len(related), "relationships": relationships,
            "files": {"boxes": boxes_path.name, "relationships": vrd_path.name, "classes": classes_path.name}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of the boxes CSV in GiB (default 1.0)")
    parser.add_argument("--images-with-relationships", type=int, default=2000)
    parser.add_argument("--tmpdir", default=None, help="where the temporary data goes (default: the system temp dir)")
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)

    directory = Path(tempfile.mkdtemp(prefix="foilforge-bench-ingest-", dir=args.tmpdir))
    try:
        start = time.perf_counter()
        info = write_source(directory, int(args.gib * (1 << 30)), args.images_with_relationships)
        generate_s = time.perf_counter() - start
        params = directory / "params.yaml"
        params.write_text(
            "sources:\n  openimages:\n    format: openimages\n"
            f"    root: {directory}\n    files: {{boxes: {info['files']['boxes']}, "
            f"relationships: {info['files']['relationships']}, classes: {info['files']['classes']}}}\n"
            "    split: train\n", encoding="utf-8")
        output = directory / "openimages.jsonl"
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        start = time.perf_counter()
        log = directory / "ingest.log"
        with log.open("w", encoding="utf-8") as out:
            proc = subprocess.run([sys.executable, "-c", PEAK_REPORTING_CLI, "ingest", "openimages", "--params",
                                   str(params), "--output", str(output)], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - start
        text = log.read_text(encoding="utf-8")
        peak = re.findall(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
        peak_mib = int(peak[-1]) / 1024 if peak else float("inf")
        samples = sum(1 for _ in output.open(encoding="utf-8")) if output.exists() else 0
        ok = proc.returncode == 0 and samples == info["images_with_relationships"] and peak_mib <= LIMIT_MIB
        result = {
            "file_bytes": info["file_bytes"], "peak_rss_mib": round(peak_mib, 1), "seconds": round(seconds, 1),
            "limit_mib": LIMIT_MIB, "ok": ok,
            "box_rows": info["box_rows"], "box_rows_per_s": round(info["box_rows"] / seconds) if seconds else None,
            "images": info["images"], "images_with_relationships": info["images_with_relationships"],
            "relationships": info["relationships"], "samples": samples, "returncode": proc.returncode,
            "generate_s": round(generate_s, 1),
        }
        if proc.returncode != 0:
            result["stderr_tail"] = text[-2000:]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    write_result(NAME, result, args, argv, path=args.output)
    print(result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
