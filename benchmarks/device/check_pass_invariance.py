"""Batch invariance of foilforge/lm.py's canonical pass on a GPU, standalone (torch and transformers only: the device
machine has none of foilforge's other dependencies, so this file goes there as a command's stdin).

    python3 benchmarks/device/check_pass_invariance.py

A model of SmolLM2-135M's shape with drawn weights; random texts of one token length (12 and 21). Each text's
summed log-probability and mean-pooled last layer (row by row, as lm.py pools) in a batch of a fixed row count
(foilforge/batching.py ACCELERATOR_ROWS = 64), at a random place among random companions, against the same texts
in batches of 1, 7 or 33 rows. Prints one JSON line; benchmarks/results/pass_store.json keeps it under
"accelerator".
"""

import json
import random

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ROWS = 64
TEXTS = 20


def passes(model, rows, n):
    """(summed log-probabilities, pooled last layer) of the first n rows of a batch of token ids."""
    with torch.inference_mode():
        ids = rows.cuda()
        out = model(input_ids=ids, output_hidden_states=True)
        logits = out.logits[:, :-1].float()
        logprobs = (logits.gather(-1, ids[:, 1:, None])[..., 0] - logits.logsumexp(-1)).sum(-1)[:n].cpu()
        pooled = torch.stack([out.hidden_states[-1][r, 1:].clone().float().mean(0) for r in range(n)]).cpu()
    return logprobs, pooled


def main() -> dict:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for dtype in ("float32", "bfloat16"):
        model = LlamaForCausalLM(config).to("cuda", getattr(torch, dtype)).eval()
        for length in (12, 21):
            texts = torch.randint(0, 49152, (300, length), generator=torch.Generator().manual_seed(length))
            reference = passes(model, texts[:ROWS], ROWS)
            rng = random.Random(length)
            equal = {"fixed_rows": 0, "fixed_rows_h": 0}
            for t in range(TEXTS):
                companions = rng.sample(range(ROWS, 300), ROWS)
                place = rng.randrange(ROWS)
                companions[place] = t
                logprobs, pooled = passes(model, texts[companions], ROWS)
                equal["fixed_rows"] += bool(logprobs[place] == reference[0][t])
                equal["fixed_rows_h"] += bool(torch.equal(pooled[place], reference[1][t]))
            for rows in (1, 7, 33):
                parts = [passes(model, texts[s:s + rows], rows) for s in range(0, TEXTS, rows)]
                logprobs = torch.cat([p[0] for p in parts])[:TEXTS]
                pooled = torch.cat([p[1] for p in parts])[:TEXTS]
                equal[f"rows_{rows}"] = int((logprobs == reference[0][:TEXTS]).sum())
                equal[f"rows_{rows}_h"] = int((pooled == reference[1][:TEXTS]).all(1).sum())
            result[f"{dtype}_len{length}_of{TEXTS}"] = equal
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
