"""Filter throughput, batched vs one sentence at a time: GRUEN's LM term and the NLI classifier.

    .venv/bin/python -m benchmarks.bench_filters [--n 512] [--device cpu|cuda] [--dtype float32] [--batch-size 32]

No real masked LM or NLI model loads here (docs/offline_models.md), so both models are
random but of a realistic shape, built from a config and saved, then loaded
through the filters' own code (filters.gruen.Gruen, filters.nli.NLIModel):
a BertForMaskedLM with 4 layers, hidden size 256 and BERT-base-cased's
28,996-word output layer, and a BERT classifier of the same body with 3
labels. Texts are the first --n COCO captions (premise) and the next --n
(hypothesis). The two modes alternate for --repeats runs and the fastest of
each counts (a shared machine slows single runs). Also reports the largest
difference between batched and single scores. Writes
benchmarks/results/filters_<device>.json, <device> being where it ran.
"""

from __future__ import annotations

import argparse
import platform
import re
import tempfile
import time
from pathlib import Path

from benchmarks.common import CAPTION_FILES, read_captions, result_path, write_result

NAME = "filters"
SHAPE = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024,
         "vocab_size": 28996, "max_position_embeddings": 512}


def build_models(directory: Path, texts: list[str]) -> dict[str, Path]:
    """Random BERT MLM, CoLA (2-way) and NLI (3-way) classifiers of SHAPE, with a WordPiece vocabulary of the texts' words."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)})
    pieces = sorted({c for w in words for c in w})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *[f"##{c}" for c in pieces if f"##{c}" not in words]]
    torch.manual_seed(0)
    paths = {}
    for name, cls, extra in (("mlm", BertForMaskedLM, {}),
                             ("cola", BertForSequenceClassification, {"num_labels": 2}),
                             ("nli", BertForSequenceClassification,
                              {"num_labels": 3, "id2label": {0: "entailment", 1: "neutral", 2: "contradiction"},
                               "label2id": {"entailment": 0, "neutral": 1, "contradiction": 2}})):
        d = directory / name
        d.mkdir(parents=True)
        (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=False).save_pretrained(d)
        cls(BertConfig(**SHAPE, **extra)).save_pretrained(d)
        paths[name] = d
    return paths


def time_modes(batched, single, repeats: int):
    """Fastest run of each mode, alternating, and the outputs of the last runs."""
    batched_times, single_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        out_batched = batched()
        batched_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        out_single = single()
        single_times.append(time.perf_counter() - start)
    return min(batched_times), min(single_times), out_batched, out_single


def entry(model: str, n: int, batched_s: float, single_s: float, max_diff: float, batch_size: int) -> dict:
    return {"model": model, "n_sentences": n, "batch_size": batch_size,
            "batched_sps": round(n / batched_s, 1), "single_sps": round(n / single_s, 1),
            "ratio": round(single_s / batched_s, 2), "max_abs_diff_batched_vs_single": max_diff}


def main(argv=None) -> dict:
    import torch

    from foilforge.filters.gruen import Gruen
    from foilforge.filters.nli import NLIModel
    from foilforge.models import ModelSpec, torch_device

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", default=next((str(p) for p in CAPTION_FILES if p.exists()), str(CAPTION_FILES[-1])))
    parser.add_argument("--n", type=int, default=512, help="sentences (and sentence pairs) to score (default 512)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    parser.add_argument("--dtype", default="float32", help="float32 | float16 | bfloat16")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each mode (the fastest counts)")
    parser.add_argument("--output", default=None, help="default: benchmarks/results/filters_<device>.json")
    args = parser.parse_args(argv)

    texts = read_captions(args.captions, 2 * args.n, strip=True)
    premises, hypotheses = texts[: args.n], texts[args.n :]
    pairs = list(zip(premises, hypotheses))
    with tempfile.TemporaryDirectory() as tmp:
        dirs = build_models(Path(tmp), texts)
        block = {"device": args.device, "dtype": args.dtype, "batch_size": args.batch_size}
        mlm_spec = ModelSpec.from_params({"name_or_path": str(dirs["mlm"]), **block}, "models.grammar_lm")
        nli_spec = ModelSpec.from_params({"name_or_path": str(dirs["nli"]), **block}, "models.nli")
        device = torch_device(mlm_spec)
        gruen = Gruen(mlm_spec, ModelSpec.from_params({"name_or_path": str(dirs["cola"]), **block}, "models.cola"))
        nli = NLIModel(nli_spec, sanity_check=False)
        gruen.perplexities(premises[:8])  # warm-up: first-call allocations are not scoring time
        nli.probabilities(pairs[:8])

        lm = time_modes(lambda: gruen.perplexities(premises),
                        lambda: [gruen.perplexities([s], batch_size=1)[0] for s in premises], args.repeats)
        single_nli = NLIModel(nli_spec.model_copy(update={"batch_size": 1}), sanity_check=False)
        cls = time_modes(lambda: nli.probabilities(pairs),
                         lambda: [single_nli.probabilities([p])[0] for p in pairs], args.repeats)

    shape = "BERT {num_hidden_layers} layers, hidden {hidden_size}, vocab {vocab_size}, random weights".format(**SHAPE)
    result = {
        "device": str(device), "dtype": args.dtype, "captions_file": str(args.captions),
        "gruen_lm_term": entry(f"BertForMaskedLM ({shape})", args.n, lm[0], lm[1],
                               max(abs(a - b) / b for a, b in zip(lm[2], lm[3])), args.batch_size),
        "nli": entry(f"BertForSequenceClassification, 3 labels ({shape})", args.n, cls[0], cls[1],
                     max(abs(a[k] - b[k]) for a, b in zip(cls[2], cls[3]) for k in a), args.batch_size),
        "machine": platform.machine(), "python": platform.python_version(), "torch_threads": torch.get_num_threads(),
    }
    result["gruen_lm_term"]["diff_is"] = "relative (perplexity)"
    output = args.output or result_path(f"filters_{device.type}")
    write_result(NAME, result, args, argv, path=output)
    print(result)
    return result


if __name__ == "__main__":
    main()
