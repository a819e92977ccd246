"""What the benchmarks share: where results go, the one shape every result file has, and the inputs several read.

A result file (benchmarks/results/<name>.json, or where `--output` says) is one JSON object:

    {"format": 1, "benchmark": "ingest_memory", "commit": "<sha of HEAD>[+changes]", "date": "<UTC, ISO 8601>",
     "machine": {"platform", "python", "cpus", "cpu", "cpu_id", "speed", "gpu"}, "argv": [...], "params": {...},
     "metrics": {...}}

`params` is the benchmark's parsed command line (defaults filled in), `metrics` what it measured. Files written
before this shape existed (no "format" key) are still read: `read_metrics` returns such a file whole. A benchmark
that adds entries to its file (sample_build's labels, one entry per released piece) keeps the entries already there;
`commit`, `date` and `machine` are those of the run that wrote the file last.

Hosts that print the same CPU name ("AMD EPYC") differ: one ran the sample build 4x slower than another, and gave
other last bits in two of its outputs. So `machine` names the CPU's family, model and stepping (`cpu_id`) and
times three small fixed workloads on it (`speed`, `host_speed`): only timings of hosts of one `cpu_id` and about
the same `speed` compare.

FOILFORGE_BENCH_RESULTS, when set, is the folder results go to instead of benchmarks/results/ (the suite's
`--results`, the tests).
"""

from __future__ import annotations

import datetime
import functools
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import foilforge  # noqa: F401  (before numpy and torch: the kernels foilforge pins, so a benchmark measures them)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = ROOT.parent / "shared" / "data"
REAL_COCO = SHARED / "real" / "coco" / "captions_val2017.json"
SAMPLE_COCO = ROOT / "data" / "sample" / "coco" / "captions_val2017.json"
#: COCO val 2017's captions where the real file is present, else the embedded sample's
CAPTION_FILES = [REAL_COCO, SAMPLE_COCO]
FORMAT = 1
RESULTS_ENV = "FOILFORGE_BENCH_RESULTS"


def results_dir() -> Path:
    """benchmarks/results/, or the folder FOILFORGE_BENCH_RESULTS names."""
    return Path(os.environ[RESULTS_ENV]) if os.environ.get(RESULTS_ENV) else RESULTS


def result_path(name: str) -> Path:
    return results_dir() / f"{name}.json"


def committed_result(name: str) -> Path:
    """The results file of `name` in the results folder in use, else the committed one (an input another reads)."""
    path = result_path(name)
    return path if path.is_file() else RESULTS / f"{name}.json"


def commit() -> str | None:
    """HEAD's sha, with "+changes" when tracked files outside benchmarks/results/ differ from it; None outside git."""
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", ".",
                                ":(exclude)benchmarks/results"], capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("+changes" if dirty else "")


def cpu_identity(fields: dict[str, str]) -> dict | None:
    """vendor, family, model, stepping and whether the CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16),
    from foilforge.host `cpu_info`'s fields; None without them."""
    if "cpu family" not in fields:
        return None
    flags = set(fields.get("flags", "").split())
    return {"vendor": fields.get("vendor_id"), "family": int(fields["cpu family"]),
            "model": int(fields.get("model", -1)), "stepping": int(fields.get("stepping", -1)),
            "bf16": bool(flags & {"avx512_bf16", "amx_bf16"})}


def best_seconds(work, repeats: int = 5) -> float:
    """The least wall time of `repeats` runs of `work()`: the run least disturbed by the rest of the machine."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return min(times)


def python_loop(iterations: int = 200_000) -> int:
    """A fixed pure-Python workload (arithmetic, a dict, a list): what the stages' Python code runs on."""
    counts: dict[int, int] = {}
    kept = []
    for i in range(iterations):
        key = (i * 7919) % 97
        counts[key] = counts.get(key, 0) + 1
        if counts[key] % 11 == 0:
            kept.append(key)
    return len(kept)


@functools.lru_cache(maxsize=2)
def host_speed(bf16: bool = False) -> dict:
    """This host's speed on three fixed workloads, each the best of 5 runs on one thread (about a second in all):
    `python_loop_ms` (`python_loop`), `f64_gemm_gflops` (numpy's float64 256x256 product, the BLAS liblinear and
    the filters use) and, with `bf16` (imports torch), `bf16_gemm_gflops` (torch's bfloat16 product of SmolLM2's
    shape, 256 x 576 by 576 x 1536: most of its CPU time)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((256, 256))
    with threadpool_limits(limits=1):
        gemm = best_seconds(lambda: [a @ a for _ in range(10)])
    speed = {"python_loop_ms": round(1000 * best_seconds(python_loop), 1),
             "f64_gemm_gflops": round(10 * 2 * 256 ** 3 / gemm / 1e9, 1)}
    if bf16:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            x = torch.ones(256, 576, dtype=torch.bfloat16)
            w = torch.ones(576, 1536, dtype=torch.bfloat16)
            seconds = best_seconds(lambda: [x @ w for _ in range(10)])
        finally:
            torch.set_num_threads(threads)
        speed["bf16_gemm_gflops"] = round(10 * 2 * 256 * 576 * 1536 / seconds / 1e9, 1)
    return speed


def machine(bf16: bool = False) -> dict:
    """Where a result was measured: platform, Python, cores, the CPU's name and identity, its `host_speed`
    (`bf16`: the bfloat16 product too) and the GPU where the benchmark loaded torch and has one."""
    from foilforge.host import cpu_info

    fields = cpu_info()
    gpu = None
    torch = sys.modules.get("torch")  # asked only when the benchmark loaded torch: no import for this alone
    if torch is not None and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "cpu": fields.get("model name"), "cpu_id": cpu_identity(fields), "speed": host_speed(bf16), "gpu": gpu}


def plain(value):
    """JSON-ready: paths and other objects as strings, containers walked."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def envelope(benchmark: str, metrics: dict, args=None, argv=None) -> dict:
    return {"format": FORMAT, "benchmark": benchmark, "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "argv": plain(list(sys.argv[1:] if argv is None else argv)),
            "params": plain(vars(args)) if args is not None else {}, "metrics": plain(metrics)}


def write_result(benchmark: str, metrics: dict, args=None, argv=None, path=None) -> Path:
    """Write `metrics` in the one result shape, atomically (foilforge.io.write_json: a temp file renamed over the
    target), to `path` or results_dir()/<benchmark>.json. `argv` is what the benchmark's main parsed (None: the
    process's command line)."""
    from foilforge.io import write_json

    path = Path(path) if path is not None else result_path(benchmark)
    write_json(path, envelope(benchmark, metrics, args, argv))
    return path


def is_result(document) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT and "metrics" in document


def read_metrics(path) -> dict:
    """The metrics of a result file: its `metrics` in the one shape, the whole object in a file written before it,
    {} when the file is absent."""
    import json

    path = Path(path)
    if not path.is_file():
        return {}
    document = json.loads(path.read_text(encoding="utf-8"))
    return document["metrics"] if is_result(document) else document


def read_captions(path, limit: int, strip: bool = False) -> list[str]:
    """The first `limit` captions of a COCO captions file, in annotation-id order."""
    from foilforge.errors import InputError
    from foilforge.io import read_json

    data = read_json(path)
    annotations = data.get("annotations") if isinstance(data, dict) else None
    if not isinstance(annotations, list):
        raise InputError(path, "expected a COCO captions file with an 'annotations' list", field="annotations")
    captions = [a["caption"] for a in sorted(annotations, key=lambda a: a["id"])[:limit]]
    return [c.strip() for c in captions] if strip else captions


def coco_captions_file() -> Path:
    """The first of CAPTION_FILES that exists."""
    return next(path for path in CAPTION_FILES if path.is_file())


# --- the released pieces (VALSE dev, SugarCrepe) several real-data benchmarks score once and share -----------------

#: released file (relative to the shared data) -> the foilforge instrument whose filters, refinement, adversarial
#: filter and gate it gets
PIECES = {
    "valse-dev/existence.json": "existence",
    "valse-dev/plurals.json": "plurals",
    "valse-dev/counting-hard.json": "counting_balanced",
    "valse-dev/counting-small-quant.json": "counting_small",
    "valse-dev/counting-adversarial.json": "counting_adversarial",
    "valse-dev/relations.json": "relations",
    "valse-dev/action-replacement.json": "action_replacement",
    "valse-dev/actant-swap.json": "actant_swap",
    "valse-dev/coreference-standard.json": "coreference_standard",
    "valse-dev/coreference-hard.json": "coreference_clean",
    "valse-dev/foil-it.json": "foil_it",
    "real/sugarcrepe/replace_rel.json": "relations",
    "real/sugarcrepe/swap_obj.json": "swap_obj",
}


def scored_records(params: dict, path: Path, like: str, keep: str | None) -> list[dict]:
    """`path` scored by `like`'s filters (the models run here), read from / written to the cache `keep` when given."""
    import json

    from foilforge.pipeline.refiltering import score_released

    cache = Path(keep) / f"{path.parent.name}_{path.stem}.scored.jsonl" if keep else None
    if cache and cache.is_file():
        return [json.loads(line) for line in cache.read_text().splitlines()]
    _, _, scored = score_released(params, path, like, progress=False)
    if cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(json.dumps(r) + "\n" for r in scored))
    return scored


def start_pieces(parser, argv, name: str):
    """(args, params, the metrics written so far) for a benchmark over PIECES with `--only` and `--keep`;
    None when the shared real data is absent (the benchmark is skipped)."""
    from foilforge.params import load_params

    parser.add_argument("--only", action="append", default=None, help="file names to run (repeatable)")
    parser.add_argument("--keep", default=None, help="cache the scored records here (reruns skip the models; "
                                                     "shared by the benchmarks over the released pieces)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found (the shared real data)")
        return None
    return args, load_params(ROOT / "params.yaml"), read_metrics(result_path(name))


def scored_pieces(params: dict, only: list[str] | None, keep: str | None):
    """(released file relative to the shared data, its instrument, its path, its scored records, seconds scoring)
    for every file of PIECES that `only` admits."""
    for relative, like in PIECES.items():
        path = SHARED / relative
        if only and path.name not in only:
            continue
        started = time.perf_counter()
        scored = scored_records(params, path, like, keep)
        yield relative, like, path, scored, time.perf_counter() - started
