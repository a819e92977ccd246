"""Trained text-only attackers: models fitted on some caption/foil pairs that try to tell caption from foil on others.

A fixed scorer (an LM's perplexity, an n-gram prior) is one judge; a set refined
against it can still be solved by a model *trained* on the benchmark's own
pairs (issue 27: a logistic regression on word n-grams solved refined VALSE
existence at 65%, SugarCrepe's replace_rel at 83%). An attacker sees only the
two texts (never the image) and is only ever evaluated out of fold, with the
folds grouped by caption: the pairs of one caption are all in training or all
held out (`grouped_folds`), so no attacker scores a pair whose caption it saw.

The contract (after scikit-learn's estimators): `__init__` stores its
arguments; `fit(pairs, seed)` returns a fitted copy's state on self;
`margins(pairs)` gives one number per pair, > 0 when the attacker picks the
caption, < 0 the foil, 0 when it cannot tell. Attackers are pair-antisymmetric:
swapping a pair's two texts negates its margin, so the order in which the
texts are shown carries no information. `family` names what the attacker
sees; the release gate needs a family the filter did not use.

Families here (each registered as `<name>.v1` in ATTACKERS):

* `word_ngram`: logistic regression on the difference of the two texts' binary
  word n-gram vectors (no intercept, both orders in training: antisymmetric);
* `char_ngram`: the same on character n-grams within word boundaries;
* `scorer_features`: the same on the text-only scorers' numbers stored on the
  records (each plausibility scorer's log-probability of each side) plus
  lengths in words and characters, standardised;
* `ngram_bayes`: naive Bayes over word and character n-grams of each text
  alone (generative, per text: another learner than the pair models);
* `transformer_pair` (filters/transformer_attacker.py): a small transformer
  fine-tuned as a pair classifier.

Accuracy (`attack_summary`) counts a margin of 0 as half a pair: an attacker
without a preference flips a coin. Multiple-choice items (BD2BB: the target
among 5) are answered from pairwise margins (`choose`): the option that wins
the most of its comparisons, ties shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.errors import ConfigError
from pipeline.registry import Registry

ATTACKERS = Registry("attacker", modules=("filters.attackers", "filters.transformer_attacker"),
                     entry_points="foilforge.attackers")


@dataclass(frozen=True)
class Pair:
    """What an attacker may see of one record: its two texts, per-side numbers, and its fold group."""

    caption: str
    foil: str
    group: str
    caption_features: tuple = field(default=())
    foil_features: tuple = field(default=())

    def swapped(self) -> "Pair":
        return Pair(self.foil, self.caption, self.group, self.foil_features, self.caption_features)


def group_key(caption: str) -> str:
    """Pairs with the same caption (whitespace and case aside) share a fold group."""
    return " ".join(caption.lower().split())


def pairs_from_records(records: list[dict], scorers: list[str] | None = None) -> list[Pair]:
    """Pairs of records with `caption`/`foil`; per-side features from `filters.plausibility.scores` when scored.

    `scorers`: the plausibility scorers whose numbers become features (default: those every record has).
    """
    def scores(record):
        return ((record.get("filters") or {}).get("plausibility") or {}).get("scores") or {}

    if scorers is None:
        names = [set(scores(r)) for r in records]
        scorers = sorted(set.intersection(*names)) if names else []
    pairs = []
    for record in records:
        found = scores(record)
        caption_side = tuple(float(found[s]["caption"]) for s in scorers if s in found)
        foil_side = tuple(float(found[s]["foil"]) for s in scorers if s in found)
        pairs.append(Pair(record["caption"], record["foil"], group_key(record["caption"]),
                          caption_side + _lengths(record["caption"]), foil_side + _lengths(record["foil"])))
    return pairs


def _lengths(text: str) -> tuple[float, float]:
    return float(len(text.split())), float(len(text))


def text_pair(first: str, second: str, group: str) -> Pair:
    """A pair of bare texts (multiple-choice options): their lengths are the only per-side numbers."""
    return Pair(first, second, group, _lengths(first), _lengths(second))


class Attacker:
    """Base contract; subclasses set `family` and implement `fit` and `margins`."""

    family = ""
    registry_name = ""
    #: validate() names arguments relative to the block; the registry prepends where the block is
    relative_messages = True

    def fit(self, pairs: list[Pair], seed: int = 0) -> "Attacker":
        raise NotImplementedError

    def margins(self, pairs: list[Pair]):
        raise NotImplementedError

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{self.registry_name}({args})"


class LinearPairAttacker(Attacker):
    """Logistic regression on phi(first) - phi(second), no intercept, trained on both orders: antisymmetric."""

    def __init__(self, C: float = 1.0):
        self.C = C
        self._model = None

    def validate(self) -> None:
        if isinstance(self.C, bool) or not isinstance(self.C, (int, float)) or self.C <= 0:
            raise ConfigError(f"argument C must be a number > 0, got {self.C!r}")

    # subclasses: the feature map, fitted on the training pairs' texts
    def _fit_features(self, pairs: list[Pair]) -> None:
        raise NotImplementedError

    def _features(self, texts: list[str], sides: list[tuple]):
        raise NotImplementedError

    def _difference(self, pairs: list[Pair]):
        first = self._features([p.caption for p in pairs], [p.caption_features for p in pairs])
        second = self._features([p.foil for p in pairs], [p.foil_features for p in pairs])
        return first - second

    def fit(self, pairs: list[Pair], seed: int = 0) -> "LinearPairAttacker":
        import numpy as np
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression

        self._fit_features(pairs)
        difference = self._difference(pairs)
        stack = sparse.vstack if sparse.issparse(difference) else np.vstack
        x = stack([difference, -difference])
        y = np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))])
        self._model = LogisticRegression(C=self.C, fit_intercept=False, solver="liblinear", max_iter=2000,
                                         random_state=seed).fit(x, y)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        return np.asarray(self._difference(pairs) @ self._model.coef_[0]).ravel()

    def feature_names(self) -> list[str]:
        raise NotImplementedError

    def top_features(self, k: int = 10) -> list[tuple[str, float]]:
        """The k features with the largest weights: > 0 marks captions, < 0 foils (why the attacker wins)."""
        import numpy as np

        weights = self._model.coef_[0]
        names = self.feature_names()
        order = np.argsort(-np.abs(weights), kind="stable")[:k]
        return [(names[j], round(float(weights[j]), 4)) for j in order if weights[j]]


class NgramPairAttacker(LinearPairAttacker):
    analyzer = "word"

    def __init__(self, ngram_range: list[int] = (1, 2), C: float = 1.0, min_df: int = 1):
        super().__init__(C)
        self.ngram_range = tuple(ngram_range)
        self.min_df = min_df
        self._vectorizer = None

    def validate(self) -> None:
        super().validate()
        low_high = self.ngram_range
        if len(low_high) != 2 or not all(isinstance(v, int) and v >= 1 for v in low_high) or low_high[0] > low_high[1]:
            raise ConfigError(f"argument ngram_range must be [low, high] with 1 <= low <= high, "
                              f"got {list(low_high)!r}")
        if not isinstance(self.min_df, int) or self.min_df < 1:
            raise ConfigError(f"argument min_df must be an integer >= 1, got {self.min_df!r}")

    def _fit_features(self, pairs):
        from sklearn.feature_extraction.text import CountVectorizer

        # word tokens keep one-letter words and punctuation-free numerals ("a", "0"): they carry the shortcuts
        pattern = r"(?u)\b\w+\b|n't" if self.analyzer == "word" else None
        self._vectorizer = CountVectorizer(analyzer=self.analyzer, ngram_range=self.ngram_range, binary=True,
                                           lowercase=True, min_df=self.min_df,
                                           **({"token_pattern": pattern} if pattern else {}))
        try:
            self._vectorizer.fit([t for p in pairs for t in (p.caption, p.foil)])
        except ValueError:  # no token at all (empty texts): a vocabulary of nothing, every margin 0
            self._vectorizer = CountVectorizer(analyzer=lambda text: [], binary=True).fit(["x"])

    def _features(self, texts, sides):
        return self._vectorizer.transform(texts).astype(float)

    def feature_names(self) -> list[str]:
        return list(self._vectorizer.get_feature_names_out())


@ATTACKERS.register("word_ngram.v1")
class WordNgramAttacker(NgramPairAttacker):
    family = "word n-grams"
    analyzer = "word"


@ATTACKERS.register("char_ngram.v1")
class CharNgramAttacker(NgramPairAttacker):
    family = "character n-grams"
    analyzer = "char_wb"

    def __init__(self, ngram_range: list[int] = (2, 5), C: float = 1.0, min_df: int = 1):
        super().__init__(ngram_range, C, min_df)


@ATTACKERS.register("scorer_features.v1")
class ScorerFeaturesAttacker(LinearPairAttacker):
    """Per side: each plausibility scorer's score of the text, its length in words and in characters."""

    family = "text-only scorer features"

    def __init__(self, C: float = 1.0):
        super().__init__(C)
        self._scale = None
        self._width = 0

    def _fit_features(self, pairs):
        import numpy as np

        widths = {len(p.caption_features) for p in pairs} | {len(p.foil_features) for p in pairs}
        if len(widths) > 1:
            raise ValueError(f"scorer_features: pairs carry different numbers of features ({sorted(widths)})")
        self._width = widths.pop() if widths else 0
        rows = np.array([p.caption_features for p in pairs] + [p.foil_features for p in pairs], dtype=float)
        scale = rows.std(axis=0) if len(rows) else np.ones(self._width)
        self._scale = np.where(scale > 0, scale, 1.0)

    def _features(self, texts, sides):
        import numpy as np

        rows = np.array(sides, dtype=float).reshape(len(texts), self._width)
        return rows / self._scale

    def feature_names(self) -> list[str]:
        return [f"feature {k}" for k in range(self._width - 2)] + ["words", "characters"]


@ATTACKERS.register("ngram_bayes.v1")
class NgramBayesAttacker(Attacker):
    """Naive Bayes over word and character n-grams of single texts: P(caption | text), compared across the pair.

    A generative learner that scores each text alone (no pair difference): another family than the
    discriminative pair models above, for a gate that must not reuse the filter's attackers.
    """

    family = "naive Bayes on single texts"

    def __init__(self, word_ngram_range: list[int] = (1, 2), char_ngram_range: list[int] = (2, 4),
                 alpha: float = 1.0):
        self.word_ngram_range = tuple(word_ngram_range)
        self.char_ngram_range = tuple(char_ngram_range)
        self.alpha = alpha
        self._model = None

    def validate(self) -> None:
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or self.alpha <= 0:
            raise ConfigError(f"argument alpha must be a number > 0, got {self.alpha!r}")

    def fit(self, pairs: list[Pair], seed: int = 0) -> "NgramBayesAttacker":
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.naive_bayes import MultinomialNB
        from sklearn.pipeline import make_pipeline, make_union

        features = make_union(
            CountVectorizer(analyzer="word", ngram_range=self.word_ngram_range, binary=True,
                            token_pattern=r"(?u)\b\w+\b|n't"),
            CountVectorizer(analyzer="char_wb", ngram_range=self.char_ngram_range, binary=True))
        texts = [p.caption for p in pairs] + [p.foil for p in pairs]
        labels = [1] * len(pairs) + [0] * len(pairs)
        self._model = make_pipeline(features, MultinomialNB(alpha=self.alpha)).fit(texts, labels)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        first = self._model.predict_log_proba([p.caption for p in pairs])
        second = self._model.predict_log_proba([p.foil for p in pairs])
        return (first[:, 1] - first[:, 0]) - (second[:, 1] - second[:, 0])


def build_attacker(block, param_key: str) -> Attacker:
    """An attacker from a params block `{attacker: word_ngram.v1, args: {...}}` (args checked against __init__)."""
    if not isinstance(block, dict) or "attacker" not in block:
        raise ConfigError(f"{param_key} must be a mapping with attacker (one of {', '.join(ATTACKERS.names())}) "
                          f"and optional args, got {block!r:.80}")
    unknown = sorted(set(block) - {"attacker", "args"})
    if unknown:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: attacker, args")
    attacker = ATTACKERS.build(ATTACKERS.newest(block["attacker"]), block.get("args") or {}, where=param_key)
    attacker._where = param_key
    return attacker


def grouped_folds(groups: list[str], folds: int, seed: int) -> list[int]:
    """A fold index per pair; the pairs of one group share a fold; groups spread over folds by a seeded shuffle."""
    import numpy as np

    unique = sorted(set(groups))
    folds = max(1, min(folds, len(unique)))
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[j]: rank % folds for rank, j in enumerate(order)}
    return [fold_of[g] for g in groups]


def out_of_fold_margins(make, pairs: list[Pair], folds: int = 5, seed: int = 0, extra: list[Pair] = ()):
    """Margins of every pair from an attacker (`make()` builds a fresh one) fitted on the other folds only.

    `extra`: pairs scored but never trained on (a caption's alternative foils); each is scored by the model of
    the fold its group falls in, or by a model of all folds when its group is not among `pairs`.
    Returns (margins of pairs, margins of extra).
    """
    import numpy as np

    if not pairs:
        return np.zeros(0), np.zeros(len(extra))
    groups = [p.group for p in pairs]
    fold = grouped_folds(groups, folds, seed)
    fold_of_group = dict(zip(groups, fold))
    margins, extra_margins = np.zeros(len(pairs)), np.zeros(len(extra))
    for k in sorted(set(fold)):
        train = [p for p, f in zip(pairs, fold) if f != k]
        if not train:  # one group only: nothing to learn from, no preference
            continue
        model = make().fit(train, seed=seed)
        held = [i for i, f in enumerate(fold) if f == k]
        margins[held] = model.margins([pairs[i] for i in held])
        extra_held = [i for i, p in enumerate(extra) if fold_of_group.get(p.group, k) == k]
        if extra_held:
            extra_margins[extra_held] = model.margins([extra[i] for i in extra_held])
    return margins, extra_margins


def correctness(margins):
    """Per pair: 1 when the attacker picks the caption, 0 the foil, 0.5 when it has no preference."""
    import numpy as np

    margins = np.asarray(margins, dtype=float)
    return np.where(margins > 0, 1.0, np.where(margins < 0, 0.0, 0.5))


def attack_summary(margins, max_accuracy: float | None = None) -> dict:
    """accuracy (ties count half), n, ties, the 95% Wilson interval, the reading and, with `max_accuracy`, the gate."""
    scores = correctness(margins)
    return {**_summary(scores, max_accuracy, 0.5), "ties": int((scores == 0.5).sum())}


def certify(records: list[dict], blocks: dict, folds: int = 5, seed: int = 1, repeats: int = 5,
            max_accuracy: float = 0.55) -> dict:
    """The release gate's figures: per attacker, out-of-fold accuracy on the records averaged over `repeats`
    fresh grouped partitions (seeds seed, seed+1, ...), with n, ties, Wilson CI, verdict, family and `passed`.

    Multiple-choice records (a `candidates` list and the caption among them, BD2BB) are answered among their
    options (`out_of_fold_choices`); chance is then 1/k, and `max_accuracy` is read as chance + (max_accuracy - 0.5).
    """
    import numpy as np

    out = {}
    multiple = bool(records) and all(isinstance(r.get("candidates"), list) and r.get("caption") in r["candidates"]
                                     for r in records)
    for name, block in blocks.items():
        make = (lambda b=block, n=name: build_attacker(b, f"params.yaml attackers.{n}"))
        attacker = make()
        if multiple:
            options = [list(r["candidates"]) for r in records]
            labels = [opts.index(r["caption"]) for opts, r in zip(options, records)]
            groups = [group_key(r["caption"]) for r in records]
            shares = np.mean([out_of_fold_choices(make, options, labels, groups, folds, seed + k)
                              for k in range(repeats)], axis=0)
            chance = float(np.mean([1 / len(o) for o in options]))
            summary = _summary(shares, chance + (max_accuracy - 0.5), chance)
        else:
            pairs = pairs_from_records(records)
            scores = np.mean([correctness(out_of_fold_margins(make, pairs, folds, seed + k)[0])
                              for k in range(repeats)], axis=0) if pairs else np.zeros(0)
            summary = _summary(scores, max_accuracy, 0.5)
        out[name] = {"attacker": attacker.describe(), "family": attacker.family, "repeats": repeats, **summary}
    return out


def _summary(scores, max_accuracy: float | None, chance: float) -> dict:
    """Figures of per-item success shares (1, 0, a tie's 0.5, or averaged over repeats).

    `passed` (with `max_accuracy`): at or below it, on at least MIN_JUDGED_PAIRS items (fewer are not
    certified). Below chance passes: an over-balanced set (a span that is caption in one fold and foil in
    another) is reported, not failed.
    """
    from pipeline.metrics import CHANCE_MARGIN, MIN_JUDGED_PAIRS, blind_verdict, wilson_interval

    n = len(scores)
    accuracy = float(scores.mean()) if n else None
    interval = wilson_interval(round(float(scores.sum())), n) if n else None
    if chance == 0.5:
        verdict = blind_verdict(accuracy, n)
    elif accuracy is None or n < MIN_JUDGED_PAIRS:
        verdict = "too few pairs"
    elif abs(accuracy - chance) <= CHANCE_MARGIN + 1e-12:
        verdict = "at chance"
    elif interval[0] <= chance <= interval[1]:
        verdict = "chance within the 95% CI"
    else:  # multiple choice: the target picked more (or less) often than 1/k
        verdict = "target preferred" if accuracy > chance else "target avoided"
    return {"accuracy": None if accuracy is None else round(accuracy, 4), "n": n, "chance": round(chance, 4),
            "ci95": None if interval is None else [round(v, 4) for v in interval], "verdict": verdict,
            **({} if max_accuracy is None else {
                "max_accuracy": round(max_accuracy, 4),
                "passed": accuracy is not None and n >= MIN_JUDGED_PAIRS and accuracy <= max_accuracy + 1e-12})}


def choose(attacker_margins, options: list[list[str]], group: list[str]) -> list[list[float]]:
    """Multiple choice from pairwise margins: per item, each option's share of the pick.

    `attacker_margins(pairs)` scores ordered pairs; an option's score is the number of comparisons it wins
    (margin > 0, half for 0); the pick is shared among the options with the top score.
    """
    import numpy as np

    ordered = [text_pair(a, b, g) for opts, g in zip(options, group)
               for i, a in enumerate(opts) for j, b in enumerate(opts) if i != j]
    wins = correctness(attacker_margins(ordered)) if ordered else np.zeros(0)
    shares, at = [], 0
    for opts in options:
        k = len(opts)
        score = np.zeros(k)
        for i in range(k):
            for j in range(k):
                if i != j:
                    score[i] += wins[at]
                    at += 1
        top = score == score.max()
        shares.append(list(top / top.sum()))
    return shares


def multiple_choice_pairs(options: list[list[str]], labels: list[int], group: list[str]) -> list[Pair]:
    """Training pairs of multiple-choice items: the target against each decoy (caption = target)."""
    return [text_pair(opts[label], opt, g) for opts, label, g in zip(options, labels, group)
            for j, opt in enumerate(opts) if j != label]


def out_of_fold_choices(make, options: list[list[str]], labels: list[int], group: list[str],
                        folds: int = 5, seed: int = 0) -> list[float]:
    """Per item, the share of the pick the attacker gives the target, from a model fitted on the other folds."""
    fold = grouped_folds(group, folds, seed)
    share = [0.0] * len(options)
    for k in sorted(set(fold)):
        train = [i for i, f in enumerate(fold) if f != k]
        held = [i for i, f in enumerate(fold) if f == k]
        if not train:
            share_k = [[1 / len(options[i])] * len(options[i]) for i in held]
        else:
            model = make().fit(multiple_choice_pairs([options[i] for i in train], [labels[i] for i in train],
                                                     [group[i] for i in train]), seed=seed)
            share_k = choose(model.margins, [options[i] for i in held], [group[i] for i in held])
        for i, shares in zip(held, share_k):
            share[i] = float(shares[labels[i]])
    return share
