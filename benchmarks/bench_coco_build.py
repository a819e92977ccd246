"""Every COCO-sourced instrument's foil, score and select stages and its release gate on COCO val 2017: the
local engine vs Ray pools.

    .venv/bin/python -m benchmarks.bench_coco_build [--n 200] [--workers 1 2 4 8 16] [--batch-size 64]
                                                    [--threads 1] [--device cpu|cuda] [--gpu-workers 0] [--profile]

What it runs: params.yaml as it is (the offline models, every filter the instruments list), with
`sources.coco` pointed at COCO val 2017's captions (../shared/data/real/coco, else the embedded sample) and
every instrument whose source is coco (plurals, relations, foil_it, swap_obj, swap_att) foiling the first
--n captions (`max_samples`; 0: all 25,014), then the score stage on what each foiled, select on the scores
(the refinement and the adversarial filter, whose attackers' fold fits run on the engine) and the release
gate's attackers on what select kept: the stages' own code (pipeline/stages/foil.py foil_file,
pipeline/stages/score.py run, pipeline/stages/select.py run, pipeline/stages/baseline.py release_gate), the
engine from params. The ingest of the captions file is timed once (`ingest_s`; it runs in one process on
either engine). Per run: wall
time of each stage and instrument (Ray start and the actors' model loading included, as a user meets
them), captions/s over the whole build, peak RSS of the driver and of each Ray worker, and whether every
file is byte-identical to the local run's. `--profile` adds the local run's cProfile, the functions with
the most cumulative time (what limits the build, measured). The projection to all of COCO val, COCO train
(591,753 captions) and CC3M (3.3M) divides by the best measured throughput: it assumes that throughput
holds at that size and that foils per caption stay as on the first --n.
`--gpu-workers K` adds a run with K actors sharing the one GPU (`gpus_per_worker: 1/K`, models on cuda).

Writes benchmarks/results/ray_scaling.json's "coco_build" entry (the score-only scaling run,
benchmarks/bench_ray_scaling.py, keeps its own entries).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import platform
import pstats
import resource
import tempfile
import time
from pathlib import Path

from benchmarks.bench_ray_scaling import FULL, RESULTS, ROOT, measured_worker

CAPTIONS = (ROOT.parent / "shared" / "data" / "real" / "coco" / "captions_val2017.json",
            ROOT / "data" / "sample" / "coco" / "captions_val2017.json")


def coco_params(n: int, batch_size: int, device: str, ray_block: dict, root: Path, cores: int,
                threads: int | None) -> dict:
    from foilforge.params import load_params

    params = load_params(ROOT / "params.yaml")
    params["sources"]["coco"] = {**params["sources"]["coco"], "root": str(root)}
    for spec in params["instruments"].values():
        if spec.get("source") == "coco":
            spec["max_samples"] = n or None
            for arg in spec.get("args") or {}:
                if isinstance(spec["args"][arg], dict) and "name_or_path" in spec["args"][arg]:
                    spec["args"][arg] = {**spec["args"][arg], "device": device}
    for block in params["models"].values():
        if isinstance(block, dict) and "name_or_path" in block:
            block["device"] = device
    params["engine"] = {"batch_size": batch_size, "threads_per_worker": threads, "ray": {"num_cpus": cores, **ray_block}}
    return params


def coco_instruments(params: dict) -> list[str]:
    return sorted(name for name, spec in params["instruments"].items() if spec.get("source") == "coco")


def run_build(params: dict, samples: Path, workdir: Path, engine_name: str, measured: bool) -> dict:
    """foil, score, select and the gate for every COCO instrument; wall times, the files' sha256, the workers' peak
    RSS."""
    from foilforge.io import read_jsonl
    from pipeline import engine
    from pipeline.stages import baseline, foil, score, select

    rss_dir = workdir / "rss"
    rss_dir.mkdir(parents=True)
    originals = foil.ProposeWorker, score.ScoreWorker
    if measured:
        foil.ProposeWorker = measured_worker(str(rss_dir), originals[0])
        score.ScoreWorker = measured_worker(str(rss_dir), originals[1])
    os.environ[engine.ENGINE_ENV] = engine_name
    stages, files = {}, {}
    start = time.perf_counter()
    try:
        for name in coco_instruments(params):
            foils, scored = workdir / f"{name}.foils.jsonl", workdir / f"{name}.scored.jsonl"
            t0 = time.perf_counter()
            foil.foil_file(params, name, samples, foils, metrics_path=workdir / f"{name}.metrics.json")
            t1 = time.perf_counter()
            score.run(params, name, foils, scored)
            t2 = time.perf_counter()
            kept, rejected = workdir / f"{name}.kept.jsonl", workdir / f"{name}.rejected.jsonl"
            select.run(params, name, scored, kept, rejected, workdir / f"{name}.select.json")
            t3 = time.perf_counter()
            gate = baseline.release_gate(params, name, read_jsonl(kept, allow_empty=True),
                                         read_jsonl(rejected, allow_empty=True))
            (workdir / f"{name}.gate.json").write_text(json.dumps(gate, sort_keys=True))
            t4 = time.perf_counter()
            stages[name] = {"foil_s": round(t1 - t0, 2), "score_s": round(t2 - t1, 2),
                            "select_s": round(t3 - t2, 2), "gate_s": round(t4 - t3, 2),
                            "foils": sum(1 for _ in foils.open()), "kept": sum(1 for _ in kept.open())}
            for path in (foils, scored, kept, rejected, workdir / f"{name}.metrics.json",
                         workdir / f"{name}.select.json", workdir / f"{name}.gate.json"):
                files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    finally:
        foil.ProposeWorker, score.ScoreWorker = originals
        os.environ.pop(engine.ENGINE_ENV, None)
    wall = time.perf_counter() - start
    rss = sorted(round(int(p.read_text()) / 1024) for p in rss_dir.glob("*.rss"))
    return {"wall_s": round(wall, 2), "stages": stages, "files": files, "peak_rss_mb_per_worker": rss}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="COCO captions each instrument foils (0: all 25,014)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--batch-size", type=int, default=64, help="engine.batch_size: samples / records a batch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gpu-workers", type=int, default=0, help="also a run with this many actors on the one GPU")
    parser.add_argument("--profile", action="store_true", help="cProfile the local run (top cumulative functions)")
    parser.add_argument("--threads", type=int, default=1,
                        help="engine.threads_per_worker for every run, local included (0: the stage process's count, "
                             "which every actor then takes: the pool oversubscribes the cores)")
    args = parser.parse_args(argv)

    from pipeline import engine
    from pipeline.stages.ingest import ingest

    cores = os.cpu_count() or 1
    workers = [w for w in args.workers if w <= cores]
    captions = next(p for p in CAPTIONS if p.is_file())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "coco").mkdir()
        (tmp / "coco" / "captions_val2017.json").symlink_to(captions)
        threads = args.threads or None
        base = coco_params(args.n, args.batch_size, args.device, {}, tmp / "coco", cores, threads)
        samples = tmp / "coco.jsonl"
        t0 = time.perf_counter()
        ingested = ingest(base, "coco", samples)
        ingest_s = round(time.perf_counter() - t0, 2)
        used = min(ingested, args.n) if args.n else ingested
        result = {"benchmark": "coco_build", "machine": {"cpus": cores, "platform": platform.platform()},
                  "source": str(captions), "ingested": ingested, "ingest_s": ingest_s, "captions": used,
                  "instruments": coco_instruments(base),
                  "engine_batch_size": args.batch_size, "threads_per_worker": threads, "device": args.device,
                  "models": "params.yaml's (the offline choices, docs/offline_models.md)", "runs": []}

        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        local = run_build(base, samples, tmp / "local", "local", measured=False)
        if profiler:
            profiler.disable()
            stats = pstats.Stats(profiler)
            top = sorted(stats.stats.items(), key=lambda item: -item[1][3])[:30]
            result["local_profile_top_cumulative_s"] = [
                {"function": f"{Path(file).name}:{line} {func}", "cumulative_s": round(cum, 2), "own_s": round(own, 2),
                 "calls": calls} for (file, line, func), (_, calls, own, cum, _) in top]
        local["peak_rss_mb_driver"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        result["runs"].append({"engine": "local", "workers": 1, **local,
                               "captions_per_s": round(used / local["wall_s"], 3)})
        plans = [({"workers": w, "cpus_per_worker": 1.0}, args.device, f"ray-{w}") for w in workers]
        if args.gpu_workers:
            plans.append(({"workers": args.gpu_workers, "cpus_per_worker": 1.0, "gpus_per_worker": 1 / args.gpu_workers},
                          "cuda", f"ray-gpu-{args.gpu_workers}"))
        for ray_block, device, name in plans:
            params = coco_params(args.n, args.batch_size, device, ray_block, tmp / "coco", cores, threads)
            engine.start_ray({"address": None, "num_cpus": cores})
            run = run_build(params, samples, tmp / name, "ray", measured=True)
            import ray

            ray.shutdown()
            result["runs"].append({"engine": "ray", "workers": ray_block["workers"], "device": device, **run,
                                   "captions_per_s": round(used / run["wall_s"], 3),
                                   "identical_to_local": run["files"] == local["files"]})
    one = next((r for r in result["runs"] if r["engine"] == "ray" and r["workers"] == 1 and r["device"] != "cuda"), None)
    for run in result["runs"][1:]:
        if one and run["device"] != "cuda":
            run["scaling_vs_ray_1"] = round(run["captions_per_s"] / (one["captions_per_s"] * run["workers"]), 3)
    best = max(r["captions_per_s"] for r in result["runs"])
    result["projected_hours_at_best_throughput"] = {name: round(n / best / 3600, 2) for name, n in FULL.items()}
    for run in result["runs"]:
        run["files"] = len(run["files"])   # the hashes were for the comparison; the count says what was compared
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "ray_scaling.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    merged["coco_build"] = result
    path.write_text(json.dumps(merged, indent=2) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
