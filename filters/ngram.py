"""A blind caption prior: an n-gram language model estimated on captions, cross-fitted so no caption scores itself.

Used as a text-only plausibility scorer (filters.plausibility) and as the
offline held-out scorer of the baseline stage. It is a different family of
model from the causal LMs (counts and smoothing, no parameters learned by
gradient), so "plausible" has two unlike views on a machine without a hub.

Estimation: interpolated Kneser-Ney (`kneser_ney`, one absolute discount
`discount`, continuation counts below the top order) or interpolated
Witten-Bell (`witten_bell`), both ending in an add-one unigram over the
vocabulary, over word tokens (`unit: word`, lower-cased `\\w+|[^\\w\\s]`) or
characters (`unit: char`). Units seen fewer than `unk_cutoff` times in
training become `<UNK>`, so an unseen word in a foil gets the probability of
rare words instead of zero. Every conditional distribution sums to one over
the vocabulary (tests/test_plausibility.py checks it). nltk.lm implements the
same estimators, but scores one sentence at a time through Python objects (5 folds x
thousands of captions and foils an instrument), so the counts live in plain
dicts.

Why cross-fitting: a model that has seen a caption verbatim prefers it to any
edit of it by memory alone (every n-gram of the caption is attested, the
foil's changed n-grams are not), which would make every caption look
plausible for a reason no other model shares. The captions are split into
`folds` groups by a hash of their normalised text (identical captions share a
fold, so a duplicate cannot leak); a pair is scored by the model trained on
the other folds. Leave-one-out would be the ideal; `folds` fits instead of
one per caption keep it cheap, and each model still sees (folds-1)/folds of
the corpus. Deterministic: folds depend on the text only, the counts on
the set of training captions (sorted before fitting).

A score is the mean log2-probability per unit including the end-of-sentence
marker (higher = more plausible), the same per-token rule VALSE's perplexity
baseline uses.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

from foilforge.errors import ConfigError

UNITS = ("word", "char")
SMOOTHING = ("kneser_ney", "witten_bell")
WORD = re.compile(r"\w+|[^\w\s]")
BOS, EOS, UNK = "<s>", "</s>", "<UNK>"


class _Counts:
    """n-gram counts of padded unit sequences: raw counts per history, continuation counts per history."""

    def __init__(self, sentences: list[list[str]], order: int, unk_cutoff: int):
        frequency = Counter(u for sentence in sentences for u in sentence)
        self.vocab = {u for u, n in frequency.items() if n >= unk_cutoff} | {EOS, UNK}
        self.counts: dict[tuple, Counter] = {}
        ngrams: set[tuple] = set()
        for sentence in sentences:
            tokens = [BOS] * (order - 1) + [self.lookup(u) for u in sentence] + [EOS]
            for i in range(order - 1, len(tokens)):
                for n in range(1, order + 1):
                    if i - n + 1 < 0:
                        break
                    gram = tuple(tokens[i - n + 1:i + 1])
                    self.counts.setdefault(gram[:-1], Counter())[gram[-1]] += 1
                    ngrams.add(gram)
        # continuation: N1+(. h w), the number of distinct units seen before (h w)
        self.continuation: dict[tuple, Counter] = {}
        for gram in ngrams:
            if len(gram) >= 2:
                self.continuation.setdefault(gram[1:-1], Counter())[gram[-1]] += 1
        self.continuation.setdefault((), Counter())
        self.counts.setdefault((), Counter())
        self.totals = {h: sum(c.values()) for h, c in self.counts.items()}
        self.cont_total = {h: sum(c.values()) for h, c in self.continuation.items()}

    def lookup(self, unit: str) -> str:
        return unit if unit in self.vocab else UNK


def units(text: str, unit: str) -> list[str]:
    text = " ".join(text.lower().split())
    return WORD.findall(text) if unit == "word" else list(text)


def fold_of(text: str, folds: int) -> int:
    digest = hashlib.sha256(" ".join(text.lower().split()).encode()).digest()
    return int.from_bytes(digest[:8], "big") % folds


class CrossFitNGram:
    kind = "ngram"

    def __init__(self, order: int = 3, unit: str = "word", smoothing: str = "kneser_ney", folds: int = 5,
                 unk_cutoff: int = 2, discount: float = 0.75, param_key: str = "ngram"):
        if unit not in UNITS:
            raise ConfigError(f"{param_key}.unit must be one of {', '.join(UNITS)}, got {unit!r}")
        if smoothing not in SMOOTHING:
            raise ConfigError(f"{param_key}.smoothing must be one of {', '.join(SMOOTHING)}, got {smoothing!r}")
        for name, value, low in (("order", order, 1), ("folds", folds, 2), ("unk_cutoff", unk_cutoff, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"{param_key}.{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(discount, (int, float)) or not 0 < discount < 1:
            raise ConfigError(f"{param_key}.discount must be in (0, 1), got {discount!r}")
        self.order, self.unit, self.smoothing, self.folds, self.unk_cutoff = order, unit, smoothing, folds, unk_cutoff
        self.discount = float(discount)

    def identity(self) -> tuple:
        """What makes two n-gram scorers the same model (given the same captions)."""
        return ("ngram", self.unit, self.order, self.smoothing, self.folds, self.unk_cutoff, self.discount)

    def describe(self) -> str:
        return (f"{self.unit} {self.order}-gram LM (interpolated {self.smoothing.replace('_', '-')}), estimated on the "
                f"instrument's captions, {self.folds}-fold cross-fitted")

    def _fit(self, captions: list[str]) -> "_Counts":
        return _Counts([units(c, self.unit) for c in sorted(captions)], self.order, self.unk_cutoff)

    def logprob(self, model: "_Counts", unit: str, history: tuple) -> float:
        """log2 P(unit | history) under the fitted counts; history is already mapped to the vocabulary."""
        return math.log2(self._prob(model, unit, history, top=True))

    def _prob(self, model: "_Counts", unit: str, history: tuple, top: bool) -> float:
        if not history:
            # add-one unigram: continuation counts for Kneser-Ney, plain counts for Witten-Bell
            counts = model.continuation[()] if self.smoothing == "kneser_ney" else model.counts[()]
            total = model.cont_total[()] if self.smoothing == "kneser_ney" else model.totals[()]
            return (counts.get(unit, 0) + 1) / (total + len(model.vocab))
        lower = self._prob(model, unit, history[1:], top=False)
        if self.smoothing == "witten_bell":
            counts, total = model.counts.get(history), model.totals.get(history, 0)
            if not total:
                return lower
            types = len(counts)
            return (counts.get(unit, 0) + types * lower) / (total + types)
        # Kneser-Ney: raw counts at the top order, continuation counts below it
        table = model.counts if top else model.continuation
        counts = table.get(history)
        total = (model.totals if top else model.cont_total).get(history, 0)
        if not total:
            return lower
        discount = self.discount
        return (max(counts.get(unit, 0) - discount, 0) + discount * len(counts) * lower) / total

    def _score(self, model: "_Counts", text: str) -> float:
        tokens = [BOS] * (self.order - 1) + [model.lookup(u) for u in units(text, self.unit)] + [EOS]
        start = self.order - 1
        values = [self.logprob(model, tokens[i], tuple(tokens[max(0, i - self.order + 1):i])) for i in range(start, len(tokens))]
        return sum(values) / len(values)

    def score_pairs(self, pairs: list[tuple[str, str]], corpus: list[str], progress: bool = False) -> list[tuple[float, float]]:
        """(caption score, foil score) for each (caption, foil); the model of the caption's fold never saw that fold."""
        corpus = sorted(set(corpus))
        by_fold: dict[int, list[int]] = {}
        for index, (caption, _) in enumerate(pairs):
            by_fold.setdefault(fold_of(caption, self.folds), []).append(index)
        out: list[tuple[float, float] | None] = [None] * len(pairs)
        folds = sorted(by_fold)
        if progress:
            from tqdm import tqdm

            folds = tqdm(folds, desc=f"{self.unit} {self.order}-gram folds", unit="fold")
        for fold in folds:
            training = [c for c in corpus if fold_of(c, self.folds) != fold]
            if not training:  # every caption in one fold (a tiny corpus): nothing to learn from, a tie
                for index in by_fold[fold]:
                    out[index] = (0.0, 0.0)
                continue
            model = self._fit(training)
            cache: dict[str, float] = {}
            for index in by_fold[fold]:
                caption, foil = pairs[index]
                for text in (caption, foil):
                    if text not in cache:
                        cache[text] = self._score(model, text)
                out[index] = (cache[caption], cache[foil])
        return out  # type: ignore[return-value]
