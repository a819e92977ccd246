"""The score stage on the local engine vs Ray with 1, 2, 4, 8, 16 workers (as many as the machine has cores).

    .venv/bin/python -m benchmarks.bench_ray_scaling [--n 1024] [--workers 1 2 4 8 16] [--batch-size 64]
                                                     [--device cpu|cuda] [--gpu-workers 0]

What it scores: the first --n COCO val 2017 captions (../shared/data/real/coco, else the embedded sample),
each paired with the next caption as its "foil" (only the texts' lengths matter to the time), through the
score stage's own code (pipeline/scoring.py run, engine from params) with GRUEN's grammaticality filter
on random BERT models of a realistic shape (benchmarks/bench_filters.py SHAPE: no real masked LM runs
offline, docs/offline_models.md). Every run writes the stage's JSONL; each Ray run is compared byte for
byte with the local one. Per run: wall time (Ray start and actor model loading included, as a user meets
them), captions/s, peak RSS of the driver and of each Ray worker, identical or not. The projection to COCO
train (591,753 captions) and CC3M (3.3M) divides by the best measured throughput; it assumes the throughput
holds at that size (the score stage collects results in the driver: see docs/scaling.md).
`--gpu-workers K` adds a run with K actors sharing the one GPU (`gpus_per_worker: 1/K`, models on cuda).
Writes benchmarks/results/ray_scaling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

from benchmarks.common import coco_captions_file, read_captions, read_metrics, result_path, write_result

NAME = "ray_scaling"
FULL = {"coco_val2017": 25_014, "coco_train2017": 591_753, "cc3m": 3_318_333}


def measured_worker(folder: str, worker_class):
    """A stage's worker class, noting its process's peak RSS in `folder` after each batch, and each batch's
    start, end and size (`steady_rates`). Made in a function, so it travels to the Ray workers by value (they
    cannot import benchmarks/)."""
    kind = worker_class.__name__

    class Measured:
        def __init__(self, *args):
            self.worker = worker_class(*args)

        def __call__(self, records):
            import os
            import resource
            import time
            from pathlib import Path

            start = time.time()
            out = self.worker(records)
            end = time.time()
            Path(folder, f"{os.getpid()}.rss").write_text(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
            with open(Path(folder, f"{os.getpid()}.batches"), "a") as log:
                log.write(f"{kind} {start} {end} {len(records)}\n")
            return out

    return Measured


def steady_rates(folder: Path) -> dict:
    """Per worker class: the rows a second the workers processed once warm, summed over workers (each worker's
    rows after its first batch over the time it spent on them: the pool's start and each actor's first batch,
    where the models load, left out), and the workers and batches it saw. Rates of pools of different sizes
    compare their scaling without the start-up that a short run is dominated by."""
    per_worker: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for path in folder.glob("*.batches"):
        for line in path.read_text().splitlines():
            kind, start, end, rows = line.split()
            per_worker.setdefault((kind, path.stem), []).append((float(start), float(end), int(rows)))
    out: dict[str, dict] = {}
    for (kind, _), batches in sorted(per_worker.items()):
        batches.sort()
        entry = out.setdefault(kind, {"workers": 0, "batches": 0, "warm_rows": 0, "rows_per_s": 0.0})
        entry["workers"] += 1
        entry["batches"] += len(batches)
        warm = batches[1:]
        seconds = sum(end - start for start, end, _ in warm)
        rows = sum(rows for _, _, rows in warm)
        if warm and seconds > 0:
            entry["warm_rows"] += rows
            entry["rows_per_s"] = round(entry["rows_per_s"] + rows / seconds, 3)
    return out


def records_from_coco(n: int) -> tuple[list[dict], str]:
    path = coco_captions_file()
    captions = read_captions(path, n + 1, strip=True)
    return [{"id": f"coco:{k:06d}", "caption": captions[k], "foil": captions[k + 1]} for k in range(len(captions) - 1)], str(path)


def run_once(params: dict, records: list[dict], workdir: Path, name: str, engine_name: str) -> tuple[float, bytes, dict]:
    from foilforge.pipeline import engine
    from foilforge.pipeline import scoring as score

    source = workdir / "foils.jsonl"
    if not source.exists():
        source.write_text("".join(json.dumps(r) + "\n" for r in records))
    rss_dir = workdir / f"rss-{name}"
    rss_dir.mkdir()
    original = score.ScoreWorker
    Measured = measured_worker(str(rss_dir), original)
    os.environ[engine.ENGINE_ENV] = engine_name
    score.ScoreWorker = Measured if engine_name == "ray" else original
    try:
        start = time.perf_counter()
        score.run(params, "bench", source, workdir / f"{name}.jsonl")
        wall = time.perf_counter() - start
    finally:
        score.ScoreWorker = original
        os.environ.pop(engine.ENGINE_ENV, None)
    rss = {p.stem: int(p.read_text()) / 1024 for p in rss_dir.glob("*.rss")}
    return wall, (workdir / f"{name}.jsonl").read_bytes(), rss


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="COCO captions to score")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--batch-size", type=int, default=64, help="engine.batch_size: records a batch")
    parser.add_argument("--model-batch-size", type=int, default=32, help="models.*.batch_size: sentences a forward pass")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gpu-workers", type=int, default=0, help="also a run with this many actors on the one GPU")
    args = parser.parse_args(argv)

    from benchmarks.bench_filters import build_models
    from foilforge.pipeline import engine

    cores = os.cpu_count() or 1
    workers = [w for w in args.workers if w <= cores]
    records, source = records_from_coco(args.n)
    result = {"benchmark": "ray_scaling", "machine": {"cpus": cores, "platform": platform.platform()},
              "captions": len(records), "source": source, "engine_batch_size": args.batch_size,
              "filter": "grammaticality (GRUEN) on random BERT models of bench_filters.SHAPE", "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = build_models(tmp / "models", [r["caption"] for r in records] + [records[-1]["foil"]])

        def params(ray_block: dict, device: str) -> dict:
            block = {"device": device, "batch_size": args.model_batch_size}
            return {"models": {"grammar_lm": {"name_or_path": str(paths["mlm"]), **block},
                               "cola": {"name_or_path": str(paths["cola"]), **block}},
                    "instruments": {"bench": {"filters": {"run": ["grammaticality"]}}},
                    "engine": {"batch_size": args.batch_size, "ray": {"num_cpus": cores, **ray_block}}}

        wall, local, _ = run_once(params({}, args.device), records, tmp, "local", "local")
        local_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result["runs"].append({"engine": "local", "workers": 1, "wall_s": round(wall, 2),
                               "captions_per_s": round(len(records) / wall, 2), "peak_rss_mb_driver": round(local_rss)})
        plans = [({"workers": w, "cpus_per_worker": 1.0}, args.device, f"ray-{w}") for w in workers]
        if args.gpu_workers:
            plans.append(({"workers": args.gpu_workers, "cpus_per_worker": 1.0, "gpus_per_worker": 1 / args.gpu_workers},
                          "cuda", f"ray-gpu-{args.gpu_workers}"))
        for ray_block, device, name in plans:
            engine.start_ray({"address": None, "num_cpus": cores})
            wall, out, rss = run_once(params(ray_block, device), records, tmp, name, "ray")
            import ray

            ray.shutdown()
            result["runs"].append({"engine": "ray", "workers": ray_block["workers"], "device": device,
                                   "wall_s": round(wall, 2), "captions_per_s": round(len(records) / wall, 2),
                                   "peak_rss_mb_per_worker": sorted(round(v) for v in rss.values()),
                                   "identical_to_local": out == local})
    base = result["runs"][0]["captions_per_s"]
    one = next((r for r in result["runs"] if r["engine"] == "ray" and r["workers"] == 1 and r.get("device") != "cuda"), None)
    for run in result["runs"][1:]:
        if one and run.get("device") != "cuda":
            run["scaling_vs_ray_1"] = round(run["captions_per_s"] / (one["captions_per_s"] * run["workers"]), 3)
    best = max(r["captions_per_s"] for r in result["runs"])
    result["projected_hours_at_best_throughput"] = {name: round(n / best / 3600, 2) for name, n in FULL.items()}
    result["local_captions_per_s"] = base
    path = result_path(NAME)
    # the entries benchmarks/bench_coco_build.py wrote here before it had a file of its own are kept
    result = {**{k: v for k, v in read_metrics(path).items() if k.startswith("coco_build")}, **result}
    write_result(NAME, result, args, argv, path=path)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
