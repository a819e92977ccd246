"""Span scoring on a GPU: the CUDA branch of foilforge/span_ranking.py, measured side by side in one run.

    python -m benchmarks.bench_relations_cuda [--captions FILE] [--limit 300] [--params params.yaml]

Needs a CUDA device (the project's machines have none). The slots and candidates are those of benchmarks/bench_relations_scaling.py
(the first --limit captions of a COCO captions file, the spans attested in
the whole file). The reference is the exhaustive scoring in float32 on the
GPU; every variant is timed (one warm-up call first) and compared with it:

* float32, the default pruning, max_batch_tokens 1024 (the offline defaults);
* float32 and bfloat16, the default pruning, max_batch_tokens 8192 (what the
  scorer's docs advise on CUDA);
* bfloat16 exhaustive: what half precision alone does to the rankings.

Seconds, speed ratio against the reference, top-1 agreement and mean top-k
overlap go to benchmarks/results/relations_cuda.json, with the device name.
"""

from __future__ import annotations

import argparse

from benchmarks.common import REAL_COCO, result_path, write_result

NAME = "relations_cuda"

VARIANTS = {
    "float32_default": {},
    "float32_default_8192_tokens": {"max_batch_tokens": 8192},
    "bfloat16_default_8192_tokens": {"dtype": "bfloat16", "max_batch_tokens": 8192},
    "bfloat16_exhaustive_8192_tokens": {"dtype": "bfloat16", "max_batch_tokens": 8192, "exhaustive": True},
}


def main(argv=None) -> dict:
    import torch

    from benchmarks.bench_relations_scaling import agreement, relations_setup, timed
    from foilforge.foilers.relations import rank_fills
    from foilforge.span_ranking import build_span_ranker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", default=str(REAL_COCO))
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_relations_cuda needs a CUDA device")
    args.attested_from = "file"
    instrument, candidates, slots = relations_setup(args)
    block = {**instrument["ranker"], "device": "cuda", "dtype": "float32"}
    key = "instruments.relations.args.ranker"

    def run(scorer, warm_up=False):
        return rank_fills(scorer, slots[:2] if warm_up else slots, candidates, args.top_k)

    def warm_and_time(scorer):
        run(scorer, warm_up=True)
        torch.cuda.synchronize()
        return timed(lambda: run(scorer))  # rank_fills reads the scores back to the host: the last kernel is in

    reference, reference_s = warm_and_time(build_span_ranker({**block, "exhaustive": True}, key))
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "captions": args.limit,
              "slots": len(slots), "candidates": len(candidates), "top_k": args.top_k,
              "reference": {"args": {"dtype": "float32", "exhaustive": True}, "seconds": round(reference_s, 2)},
              "variants": {}}
    print("reference", result["reference"], flush=True)
    for label, extra in VARIANTS.items():
        torch.cuda.reset_peak_memory_stats()
        ranked, seconds = warm_and_time(build_span_ranker({**block, **extra}, key))
        entry = {"args": extra, "seconds": round(seconds, 2), "speed_ratio": round(reference_s / seconds, 2),
                 "peak_gpu_memory_mib": round(torch.cuda.max_memory_allocated() / 2 ** 20),
                 **agreement(reference, ranked, args.top_k)}
        result["variants"][label] = entry
        print(label, entry, flush=True)
    write_result(NAME, result, args, argv, path=args.output)
    return result


if __name__ == "__main__":
    main()
