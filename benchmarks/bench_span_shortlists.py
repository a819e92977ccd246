"""Cheaper first passes for relations' span scorer, measured against exact scores of every fill.

    .venv/bin/python -m benchmarks.bench_span_shortlists [--limit 120] [--captions FILE]

Why the default (two-word lookahead, prune_to 15) is 2.3x and not 10x: the
offline LM runs at a fixed number of tokens a second on this CPU, and an exact
top-10 needs at least 10 exact continuations a slot. This benchmark measures
the shortcuts that would cut tokens further, on the first --limit real COCO
val captions with the 58 spans attested in all of COCO val (as
bench_relations_scaling), against exact scores of all 57 fills a slot:

* `int8`: torch's dynamic int8 quantization of every Linear layer of the same
  model (CPU), all fills scored exactly: seconds and ranking agreement;
* `fill_only`: log P(left + fill) (the fill given the left context, the right
  context unseen) as the cheap pass, the best M rescored exactly;
* `trigram`: a word trigram LM (filters.ngram, Kneser-Ney, on every caption of
  the file) over the left context, the fill and the right context: no LM
  pass at all, the best M rescored exactly;
* `fill_only_plus_trigram_right`: `fill_only` plus the trigram's log-probability
  of the two words after the fill given the fill.

For each shortlist and M: top-1 agreement and mean top-10 overlap with the
exact ranking, and the cost in seconds *estimated* as the measured cheap pass
plus the exact pass's measured seconds times the share of fills rescored.
Writes benchmarks/results/span_shortlists.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from pathlib import Path

from benchmarks.bench_relations_scaling import REAL_CAPTIONS, read_captions

RESULTS = Path(__file__).resolve().parent / "results" / "span_shortlists.json"
SHORTLIST_SIZES = (10, 15, 20, 25, 30, 40)


def top(scores: list[float], k: int) -> list[int]:
    return sorted(range(len(scores)), key=lambda j: (-scores[j], j))[:k]


def agreement(exact: list[list[float]], cheap: list[list[float]], shortlist: int | None, k: int = 10) -> dict:
    """Rescore the `shortlist` best fills by `cheap` exactly (None: rank by `cheap` alone); compare to the exact top-k."""
    first = overlap = 0
    for ex, ch in zip(exact, cheap):
        reference = top(ex, k)
        chosen = top(ch, shortlist) if shortlist else top(ch, len(ch))
        ranked = sorted(chosen, key=lambda j: (-ex[j], j))[:k] if shortlist else chosen[:k]
        first += ranked[0] == reference[0]
        overlap += len(set(ranked) & set(reference)) / k
    return {"top1_agreement": round(first / len(exact), 4), "mean_top10_overlap": round(overlap / len(exact), 4)}


def main(argv=None) -> dict:
    import torch

    from foilforge.filters.ngram import BOS, EOS, CrossFitNGram, units
    from foilforge.foilers.lang.prepositions import attested_spans, parse, preposition_spans
    from foilforge.foilers.relations import Slot, candidate_spans
    from foilforge.io import write_json
    from foilforge.nlp import load_spacy
    from foilforge.params import load_params
    from foilforge.scorers import build_span_scorer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", default=str(REAL_CAPTIONS))
    parser.add_argument("--limit", type=int, default=120)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    if not Path(args.captions).exists():
        raise SystemExit(f"{args.captions} not found: give --captions (a COCO captions json)")

    instrument = load_params(args.params)["instruments"]["relations"]["args"]
    nlp = load_spacy(instrument.get("spacy_model", "en_core_web_sm"))
    every_caption = read_captions(args.captions, 10 ** 9)
    attested: Counter = attested_spans(parse(every_caption, nlp))
    candidates = candidate_spans(attested, instrument.get("max_span_words", 3), 2)
    docs = parse(read_captions(args.captions, args.limit), nlp)
    slots = [Slot(str(i), doc.text, span) for i, doc in enumerate(docs) for span in preposition_spans(doc)
             if span.words <= instrument.get("max_span_words", 3)]
    items = [(s.left, s.right, [c for c in candidates if c != s.span.key]) for s in slots]

    block = {**instrument["scorer"], "device": "cpu", "prune_to": None}
    scorer = build_span_scorer(block, "instruments.relations.args.scorer")
    scorer.score(items[:2])  # warm-up
    start = time.perf_counter()
    exact = scorer.score(items)
    exact_s = time.perf_counter() - start
    start = time.perf_counter()
    fill_only = scorer.score([(left, "", fills) for left, _, fills in items])
    fill_only_s = time.perf_counter() - start

    ngram = CrossFitNGram(order=3)
    model = ngram._fit(every_caption)

    def trigram(left: str, fill: str, right: str, right_words: int | None, with_fill: bool = True) -> float:
        """Natural-log trigram probability of fill + right (or its first `right_words` words) after `left`.

        `with_fill=False`: of the right context's words alone, the fill still in their history.
        """
        history = [BOS, BOS] + [model.lookup(u) for u in units(left, "word")]
        fill_tokens = [model.lookup(u) for u in units(fill, "word")]
        rest = [model.lookup(u) for u in units(right, "word")] + [EOS]
        rest = rest if right_words is None else rest[:right_words]
        total = 0.0
        for position, token in enumerate(fill_tokens + rest):
            if with_fill or position >= len(fill_tokens):
                total += ngram.logprob(model, token, tuple(history[-2:]))
            history.append(token)
        return total * math.log(2)

    start = time.perf_counter()
    trigram_scores = [[trigram(left, fill, right, None) for fill in fills] for left, right, fills in items]
    trigram_s = time.perf_counter() - start
    right_only = [[trigram(left, fill, right, 2, with_fill=False) for fill in fills] for left, right, fills in items]
    combined = [[a + b for a, b in zip(f, r)] for f, r in zip(fill_only, right_only)]

    fills_total = sum(len(fills) for _, _, fills in items)
    result = {"captions_file": str(args.captions), "captions": args.limit, "slots": len(items),
              "candidates": len(candidates), "fills_scored_exactly_by_reference": fills_total,
              "exact_all_fills_s": round(exact_s, 2), "torch_threads": torch.get_num_threads(), "shortlists": {}}
    for name, cheap, cheap_s in (("fill_only", fill_only, fill_only_s), ("trigram", trigram_scores, trigram_s),
                                 ("fill_only_plus_trigram_right", combined, fill_only_s + trigram_s)):
        rows = {}
        for size in SHORTLIST_SIZES:
            rescored = sum(min(size, len(fills)) for _, _, fills in items)
            rows[str(size)] = {**agreement(exact, cheap, size),
                               "estimated_s": round(cheap_s + exact_s * rescored / fills_total, 2)}
        result["shortlists"][name] = {"cheap_pass_s": round(cheap_s, 2), "by_shortlist_size": rows}

    quantized = torch.ao.quantization.quantize_dynamic(scorer.lm.model, {torch.nn.Linear}, dtype=torch.qint8)
    scorer.lm.model = quantized
    scorer.score(items[:2])
    start = time.perf_counter()
    int8 = scorer.score(items)
    int8_s = time.perf_counter() - start
    result["int8"] = {"seconds": round(int8_s, 2), "speed_ratio_vs_float32": round(exact_s / int8_s, 2),
                      **agreement(exact, int8, None)}
    write_json(args.output, result)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
