"""GRUEN and NLI at the paper's model shapes, one at a time vs batched by rows vs batched by token budget.

    .venv/bin/python -m benchmarks.bench_filters_paper [--n 64] [--nli-n 16] [--device auto] [--dtype auto]
        [--batch-size 32] [--max-batch-tokens 4096] [--repeats 1]

Throughput needs the architecture, not trained weights, and no model hub is reachable here, so the three models
are built from their configs (written out below: bert-base-cased's and albert-xxlarge-v2's config.json) with
random weights, saved, and loaded back through the filters' own code (filters/gruen.py Gruen: the LM term's
BertForMaskedLM and the CoLA term's BertForSequenceClassification; filters/nli.py NLIModel: ALBERT-xxlarge with
a 3-way head), on the device and dtype a user's params.yaml block would give. The tokenizer is a WordPiece one
over the texts' words (padded to the model's vocabulary size), so a sentence is about one token a word: real
BERT and ALBERT vocabularies split some words, so real inputs run a little longer.

Texts: the first --n COCO val captions (the real file under ../shared when present, else the sample), and for
NLI --nli-n (caption, other caption) pairs. Each mode runs --repeats times, alternating; the fastest counts.
Modes: `single` (batch_size 1: the reference code's one sentence at a time), `rows` (batches of --batch-size
sentences, sorted by length), `budget` (sorted by length, at most --max-batch-tokens padded tokens and
--budget-rows rows a batch). Also the largest difference of each batched mode from `single`.
Defaults: bfloat16 on CUDA, float32 on a CPU. Writes benchmarks/results/filters_paper_<device>.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import tempfile
import time
from pathlib import Path

from benchmarks.common import CAPTION_FILES, read_captions, result_path, write_result

NAME = "filters_paper"

# bert-base-cased's config.json (GRUEN's LM term; the CoLA classifier is the same body with a 2-way head)
BERT_BASE_CASED = {
    "architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": 28996, "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
    "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
}
# albert-xxlarge-v2's config.json (the NLI checkpoint ynie/albert-xxlarge-v2-snli_mnli_fever_anli_R1_R2_R3-nli is
# this body with a 3-way classification head)
ALBERT_XXLARGE_V2 = {
    "architectures": ["AlbertForMaskedLM"], "model_type": "albert", "vocab_size": 30000, "embedding_size": 128,
    "hidden_size": 4096, "num_hidden_layers": 12, "num_hidden_groups": 1, "num_attention_heads": 64,
    "intermediate_size": 16384, "inner_group_num": 1, "hidden_act": "gelu_new", "hidden_dropout_prob": 0,
    "attention_probs_dropout_prob": 0, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3,
}
NLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


def write_tokenizer(directory: Path, texts: list[str], vocab_size: int) -> None:
    """A WordPiece tokenizer of the texts' words and characters, padded with unused entries to `vocab_size`."""
    from transformers import BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)})
    chars = sorted({c for w in words for c in w})
    vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *[f"##{c}" for c in chars]]))
    if len(vocab) > vocab_size:
        raise ValueError(f"{len(vocab)} words do not fit a vocabulary of {vocab_size}; use fewer texts")
    vocab += [f"[unused{k}]" for k in range(vocab_size - len(vocab))]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab=str(directory / "vocab.txt"), do_lower_case=False).save_pretrained(directory)


def build_models(directory: Path, texts: list[str]) -> dict[str, Path]:
    """The three random models of the paper's shapes, each saved with its tokenizer."""
    import torch
    from transformers import (
        AlbertConfig,
        AlbertForSequenceClassification,
        BertConfig,
        BertForMaskedLM,
        BertForSequenceClassification,
    )

    torch.manual_seed(0)
    built = {
        "grammar_lm": (BertForMaskedLM, BertConfig(**BERT_BASE_CASED)),
        "cola": (BertForSequenceClassification, BertConfig(**{**BERT_BASE_CASED, "num_labels": 2})),
        "nli": (AlbertForSequenceClassification, AlbertConfig(**{
            **ALBERT_XXLARGE_V2, "num_labels": 3, "id2label": NLI_LABELS,
            "label2id": {label: k for k, label in NLI_LABELS.items()}})),
    }
    paths = {}
    for name, (cls, config) in built.items():
        path = directory / name
        write_tokenizer(path, texts, config.vocab_size)
        cls(config).save_pretrained(path)
        paths[name] = path
    return paths


def timed(modes: dict, repeats: int, synchronize) -> dict:
    """{mode: (fastest seconds, outputs of the last run, CPU seconds of the fastest run)}, the modes alternating
    `repeats` times."""
    best, cpu, outputs = {}, {}, {}
    for _ in range(repeats):
        for name, run in modes.items():
            synchronize()
            start, start_cpu = time.perf_counter(), time.process_time()
            outputs[name] = run()
            synchronize()
            seconds = time.perf_counter() - start
            if seconds < best.get(name, float("inf")):
                best[name], cpu[name] = seconds, time.process_time() - start_cpu
    return {name: (best[name], outputs[name], cpu[name]) for name in modes}


def report(results: dict, n: int, diff, unit: str) -> dict:
    single_s = results["single"][0]
    out = {"n": n, "unit": unit}
    for name, (seconds, values, cpu_seconds) in results.items():
        # CPU seconds of this process (all its threads): on a shared machine the steadier figure
        out[name] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3), "per_s": round(n / seconds, 2),
                     "speedup_over_single": round(single_s / seconds, 2)}
        if name != "single":
            out[name]["max_diff_from_single"] = diff(values, results["single"][1])
    return out


def main(argv=None) -> dict:
    import torch

    from foilforge.filters.gruen import Gruen
    from foilforge.filters.nli import NLIModel
    from foilforge.models import ModelSpec, torch_device

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", default=next((str(p) for p in CAPTION_FILES if p.exists()), str(CAPTION_FILES[-1])))
    parser.add_argument("--n", type=int, default=64, help="sentences for GRUEN's two terms (default 64)")
    parser.add_argument("--nli-n", type=int, default=16, help="sentence pairs for NLI (default 16)")
    parser.add_argument("--device", default="auto", help="cpu | cuda | auto (default auto)")
    parser.add_argument("--dtype", default="auto", help="float32 | bfloat16 | float16 | auto (bfloat16 on CUDA)")
    parser.add_argument("--batch-size", type=int, default=32, help="rows a batch in the `rows` mode")
    parser.add_argument("--max-batch-tokens", type=int, default=4096, help="padded tokens a batch in the `budget` mode")
    parser.add_argument("--budget-rows", type=int, default=1024, help="rows a batch at most in the `budget` mode")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output", default=None, help="default: benchmarks/results/filters_paper_<device>.json")
    args = parser.parse_args(argv)

    texts = read_captions(args.captions, max(args.n, 2 * args.nli_n), strip=True)
    sentences = texts[: args.n]
    pairs = list(zip(texts[: args.nli_n], texts[args.nli_n : 2 * args.nli_n]))
    probe = ModelSpec.from_params({"name_or_path": "x", "device": args.device}, "models.nli")
    device = torch_device(probe)
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    result = {"device": str(device), "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
              "dtype": dtype, "captions_file": args.captions, "torch": torch.__version__,
              "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
              "python": platform.python_version(), "weights": "random (built from the configs in the script)",
              "batch_size": args.batch_size, "max_batch_tokens": args.max_batch_tokens, "budget_rows": args.budget_rows,
              # a shared machine's other jobs slow the wall times (cpu_seconds less so)
              "load_average_1min_at_start": os.getloadavg()[0]}

    def spec(path, role, **extra):
        return ModelSpec.from_params({"name_or_path": str(path), "device": args.device, "dtype": dtype,
                                      "batch_size": args.batch_size, **extra}, f"models.{role}")

    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        paths = build_models(Path(tmp), texts)
        result["build_and_save_s"] = round(time.perf_counter() - began, 1)
        began = time.perf_counter()
        gruen = Gruen(spec(paths["grammar_lm"], "grammar_lm"), spec(paths["cola"], "cola"))
        nli = NLIModel(spec(paths["nli"], "nli"), None, sanity_check=False)  # the config names its labels
        result["load_s"] = round(time.perf_counter() - began, 1)
        result["lengths"] = {"sentences_mean_tokens": round(sum(len(gruen.lm_tokenizer(s)["input_ids"]) for s in sentences)
                                                            / len(sentences), 1),
                             "pairs_mean_tokens": round(sum(len(nli.tokenizer(p, h)["input_ids"]) for p, h in pairs)
                                                        / len(pairs), 1)}

        def with_budget(model_spec, budget: bool):
            extra = dict(model_spec.extra)
            extra.pop("max_batch_tokens", None)
            if budget:
                extra["max_batch_tokens"] = args.max_batch_tokens
            return model_spec.model_copy(update={"extra": extra,
                                                 "batch_size": args.budget_rows if budget else args.batch_size})

        def gruen_term(method, spec_attr):
            def run(mode):
                def go():
                    setattr(gruen, spec_attr, with_budget(getattr(gruen, spec_attr), mode == "budget"))
                    return method(sentences, batch_size=1 if mode == "single" else None)
                return go
            return {mode: run(mode) for mode in ("single", "rows", "budget")}

        gruen.perplexities(sentences[:4])  # warm-up: first-call allocations and kernel choices are not scoring time
        gruen.cola_logits(sentences[:4])
        nli.probabilities(pairs[:2])
        relative = lambda a, b: max(abs(x - y) / abs(y) for x, y in zip(a, b))  # noqa: E731
        absolute = lambda a, b: max(abs(x - y) for x, y in zip(a, b))  # noqa: E731
        lm = timed(gruen_term(gruen.perplexities, "lm_spec"), args.repeats, synchronize)
        result["gruen_lm_term"] = {"model": "BertForMaskedLM, bert-base-cased shape", **report(
            lm, len(sentences), relative, "sentences"), "diff_is": "relative (perplexity)"}
        cola = timed(gruen_term(gruen.cola_logits, "cola_spec"), args.repeats, synchronize)
        result["gruen_cola_term"] = {"model": "BertForSequenceClassification (2 labels), bert-base-cased shape",
                                     **report(cola, len(sentences), absolute, "sentences"), "diff_is": "absolute (logit)"}

        def nli_mode(mode):
            def go():
                nli.spec = with_budget(nli.spec, mode == "budget")
                if mode == "single":
                    nli.spec = nli.spec.model_copy(update={"batch_size": 1})
                return [p["contradiction"] for p in nli.probabilities(pairs)]
            return go

        classified = timed({mode: nli_mode(mode) for mode in ("single", "rows", "budget")}, args.repeats, synchronize)
        result["nli"] = {"model": "AlbertForSequenceClassification (3 labels), albert-xxlarge-v2 shape",
                         **report(classified, len(pairs), absolute, "pairs"),
                         "diff_is": "absolute (contradiction probability)"}
    result["load_average_1min_at_end"] = os.getloadavg()[0]
    if device.type == "cuda":
        result["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    output = args.output or result_path(f"filters_paper_{device.type}")
    write_result(NAME, result, args, argv, path=output)
    print(result)
    return result


if __name__ == "__main__":
    main()
