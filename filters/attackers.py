"""Trained text-only attackers: models fitted on some caption/foil pairs that try to tell caption from foil on others.

A fixed scorer (an LM's perplexity, an n-gram prior) is one judge; a set refined
against it can still be solved by a model *trained* on the benchmark's own
pairs (a logistic regression on word n-grams solves refined VALSE existence
at 65% and SugarCrepe's replace_rel at 83%). An attacker sees only the
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
* `edit_tokens`: logistic regression on the edit itself, the words each text
  has where they differ and which word replaced which;
* `boosted_features`: gradient-boosted trees on the difference of the dense
  features (scorer numbers, lengths, numeral/negation/-s counts): non-linear;
* `transformer_pair` (filters/transformer_attacker.py): a small transformer
  fine-tuned as a pair classifier.

Accuracy (`attack_summary`) counts a margin of 0 as half a pair: an attacker
without a preference flips a coin. Multiple-choice items (BD2BB: the target
among 5) are answered from pairwise margins (`choose`): the option that wins
the most of its comparisons, ties shared.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from foilforge.errors import ConfigError
from foilforge.registry import Registry

ATTACKERS = Registry("attacker", modules=("filters.attackers", "filters.transformer_attacker", "filters.probe_attacker"),
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

    #: True when the feature map may be built once on every text of an out-of-fold run (a label-free vocabulary):
    #: a feature no training text has is a zero column, which L2 logistic regression weighs 0, so the margins equal
    #: those of per-fold features (out_of_fold_margins then vectorises once instead of once per fold)
    shares_features = False

    def fit(self, pairs: list[Pair], seed: int = 0) -> "LinearPairAttacker":
        self._fit_features(pairs)
        return self.fit_difference(self._difference(pairs), seed)

    def fit_difference(self, difference, seed: int = 0) -> "LinearPairAttacker":
        """Fit on rows phi(caption) - phi(foil) of the current feature map (both orders: antisymmetric)."""
        import numpy as np
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression

        stack = sparse.vstack if sparse.issparse(difference) else np.vstack
        x = stack([difference, -difference])
        y = np.concatenate([np.ones(difference.shape[0]), np.zeros(difference.shape[0])])
        # the dual solver for sparse n-gram rows (far more features than pairs): the same optimum, several times faster
        self._model = LogisticRegression(C=self.C, fit_intercept=False, solver="liblinear", max_iter=2000,
                                         dual=sparse.issparse(difference), random_state=seed).fit(x, y)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        return self.margins_difference(self._difference(pairs))

    def margins_difference(self, difference):
        import numpy as np

        return np.asarray(difference @ self._model.coef_[0]).ravel()

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

    @property
    def shares_features(self) -> bool:  # a vocabulary with min_df > 1 counts documents: it must see only training texts
        return self.min_df == 1

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


@functools.lru_cache(maxsize=1 << 16)  # every fold and partition of an out-of-fold run asks for the same pairs' edits
def _edit(first: str, second: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(tokens only the first text has, tokens only the second has) where the two texts differ (difflib)."""
    import difflib
    import re

    a, b = (re.findall(r"\w+|n't", t.lower()) for t in (first, second))
    removed, added = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return tuple(removed), tuple(added)


@ATTACKERS.register("edit_tokens.v1")
class EditTokensAttacker(Attacker):
    """Logistic regression on the edit itself: the words the first text has where they differ ("out:X"), the words
    the second has ("in:Y"), and each replacement pair ("X>Y"), read from the first text to the second.

    A pair-difference of bags of n-grams weighs X and Y separately; this family sees which word replaced which
    ("policeman>man" may give the foil away where neither word does alone). Trained on both orders; the margin is
    the score of (caption, foil) minus that of (foil, caption): antisymmetric.
    """

    family = "edited tokens"

    def __init__(self, C: float = 1.0, pairs: bool = True):
        self.C = C
        self.pairs = pairs
        self._vectorizer = None
        self._model = None

    def validate(self) -> None:
        if isinstance(self.C, bool) or not isinstance(self.C, (int, float)) or self.C <= 0:
            raise ConfigError(f"argument C must be a number > 0, got {self.C!r}")
        if not isinstance(self.pairs, bool):
            raise ConfigError(f"argument pairs must be true or false, got {self.pairs!r}")

    def _document(self, first: str, second: str) -> str:
        removed, added = _edit(first, second)
        words = [f"out:{x}" for x in removed] + [f"in:{y}" for y in added]
        if self.pairs:
            words += [f"{x}>{y}" for x in removed for y in added]
        return " ".join(words)

    def fit(self, pairs: list[Pair], seed: int = 0) -> "EditTokensAttacker":
        import numpy as np
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.linear_model import LogisticRegression

        documents = [self._document(p.caption, p.foil) for p in pairs] + [self._document(p.foil, p.caption)
                                                                             for p in pairs]
        self._vectorizer = CountVectorizer(token_pattern=r"\S+", binary=True, lowercase=False)
        try:
            x = self._vectorizer.fit_transform(documents).astype(float)
        except ValueError:  # identical texts everywhere: no edit to learn from
            self._vectorizer, self._model = None, None
            return self
        y = np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))])
        self._model = LogisticRegression(C=self.C, fit_intercept=False, solver="liblinear", dual=True,
                                         max_iter=2000, random_state=seed).fit(x, y)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs or self._model is None:
            return np.zeros(len(pairs))

        def score(documents):
            return self._model.decision_function(self._vectorizer.transform(documents).astype(float))

        return (score([self._document(p.caption, p.foil) for p in pairs])
                - score([self._document(p.foil, p.caption) for p in pairs]))


def surface_features(text: str) -> tuple[float, ...]:
    """Words, characters, mean word length, numerals, negations and words ending in -s of one text."""
    import re

    words = re.findall(r"\w+|n't", text.lower())
    negations = sum(w in {"no", "not", "none", "nobody", "nothing", "never", "zero", "n't"} for w in words)
    return (float(len(words)), float(len(text)), sum(map(len, words)) / max(1, len(words)),
            float(sum(w.isdigit() for w in words)), float(negations), float(sum(w.endswith("s") for w in words)))


@ATTACKERS.register("boosted_features.v1")
class BoostedFeaturesAttacker(Attacker):
    """Gradient-boosted trees on the difference of the two texts' dense features: every plausibility scorer's
    score and the lengths (as scorer_features.v1 sees them) plus surface counts (`surface_features`).

    A non-linear learner: it finds thresholds and interactions ("the foil is longer by two words and less
    probable") that the linear pair models cannot. Trained on d and -d; margin f(d) - f(-d): antisymmetric.
    """

    family = "boosted trees on dense features"

    def __init__(self, max_iter: int = 100, max_depth: int = 3, learning_rate: float = 0.1):
        self.max_iter = max_iter
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self._model = None

    def validate(self) -> None:
        for name in ("max_iter", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"argument {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, (int, float)) \
                or not 0 < self.learning_rate <= 1:
            raise ConfigError(f"argument learning_rate must be a number in (0, 1], got {self.learning_rate!r}")

    @staticmethod
    def _difference(pairs: list[Pair]):
        import numpy as np

        widths = {len(p.caption_features) for p in pairs} | {len(p.foil_features) for p in pairs}
        if len(widths) > 1:
            raise ValueError(f"boosted_features: pairs carry different numbers of features ({sorted(widths)})")
        return np.array([np.subtract(p.caption_features + surface_features(p.caption),
                                     p.foil_features + surface_features(p.foil)) for p in pairs], dtype=float)

    def fit(self, pairs: list[Pair], seed: int = 0) -> "BoostedFeaturesAttacker":
        import numpy as np
        from sklearn.ensemble import HistGradientBoostingClassifier

        d = self._difference(pairs)
        x = np.vstack([d, -d])
        y = np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))])
        # one OpenMP thread: a few hundred rows gain nothing from more, and on a busy machine threads that wait
        # for each other made each fit 5-15x slower (measured: 0.09 s alone, 0.45-1.4 s threaded beside a build)
        with _openmp_threads().limit(limits=1, user_api="openmp"):
            self._model = HistGradientBoostingClassifier(max_iter=self.max_iter, max_depth=self.max_depth,
                                                         learning_rate=self.learning_rate, early_stopping=False,
                                                         random_state=seed).fit(x, y)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        d = self._difference(pairs)
        with _openmp_threads().limit(limits=1, user_api="openmp"):
            return self._model.decision_function(d) - self._model.decision_function(-d)


@functools.lru_cache(maxsize=1)
def _openmp_threads():
    """threadpoolctl's controller of this process's thread pools, found once. `threadpool_limits` looks for them
    through every loaded library on each call, about 3 ms, twice a fold (1.2 s of the sample's foil_it select).
    scikit-learn's estimators are imported first, so the OpenMP runtime the fits use is among them (one loaded
    later, torch's say, is not, and no fit here runs on it)."""
    import sklearn.ensemble  # noqa: F401  (loads scikit-learn's OpenMP runtime)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class GridSearchAttacker(Attacker):
    """An attacker at the strongest setting of a small declared grid, chosen by nested cross-validation.

    `fit(pairs)` runs every setting out of fold on grouped `inner_folds` of `pairs` alone, keeps the one whose
    accuracy is furthest from chance (either side: the gate is two-sided), and refits it on all of `pairs`. The
    caller's held-out pairs never reach `fit`, so the choice never sees the fold it is scored on. `chosen` is
    the setting of the last fit (a dict of the grid's arguments).
    """

    relative_messages = True

    def __init__(self, make, settings: list[dict], inner_folds: int = 3):
        self.make, self.settings, self.inner_folds = make, list(settings), inner_folds
        probe = make(self.settings[0])
        self.family, self.registry_name = probe.family, probe.registry_name
        self.chosen: dict | None = None
        self._model = None

    def describe(self) -> str:
        options = "; ".join(", ".join(f"{k}={v}" for k, v in setting.items()) for setting in self.settings)
        return f"{self.make(self.settings[0]).describe()} at the strongest of [{options}] (nested {self.inner_folds}-fold CV)"

    def choose(self, pairs: list[Pair], seed: int = 0) -> dict:
        """The setting whose out-of-fold accuracy on `pairs` (grouped inner folds) is furthest from chance."""
        if len(self.settings) == 1 or len({p.group for p in pairs}) < 2:
            return self.settings[0]
        distance = []
        for setting in self.settings:
            margins, _ = out_of_fold_margins(lambda setting=setting: self.make(setting), pairs, self.inner_folds, seed)
            distance.append(abs(float(correctness(margins).mean()) - 0.5))
        return self.settings[max(range(len(self.settings)), key=lambda k: (distance[k], -k))]

    def fit(self, pairs: list[Pair], seed: int = 0) -> "GridSearchAttacker":
        self.chosen = self.choose(pairs, seed)
        self._model = self.make(self.chosen).fit(pairs, seed=seed)
        return self

    def margins(self, pairs: list[Pair]):
        return self._model.margins(pairs)


def grid_settings(grid: dict, param_key: str) -> list[dict]:
    """Every combination of a grid `{argument: [values]}`, in the order the values are listed."""
    import itertools

    if not isinstance(grid, dict) or not grid or not all(isinstance(v, list) and v for v in grid.values()):
        raise ConfigError(f"{param_key} must map argument names to non-empty lists of values, got {grid!r:.80}")
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]


def build_attacker(block, param_key: str) -> Attacker:
    """An attacker from a params block `{attacker: word_ngram.v1, args: {...}}` (args checked against __init__).

    With `grid: {argument: [values], ...}` (the release gate's `gate.grid`), a GridSearchAttacker over the
    combinations, each built (and checked) as `args` with the grid's values."""
    if not isinstance(block, dict) or "attacker" not in block:
        raise ConfigError(f"{param_key} must be a mapping with attacker (one of {', '.join(ATTACKERS.names())}) "
                          f"and optional args, got {block!r:.80}")
    unknown = sorted(set(block) - {"attacker", "args", "grid"})
    if unknown:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: attacker, args, grid")
    if block.get("grid"):
        settings = grid_settings(block["grid"], f"{param_key}.grid")

        def make(setting, block=block):
            return build_attacker({"attacker": block["attacker"], "args": {**(block.get("args") or {}), **setting}},
                                  param_key)

        for setting in settings:
            make(setting)  # every combination's arguments checked before any fitting
        attacker = GridSearchAttacker(make, settings)
        attacker._where = param_key
        return attacker
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


def out_of_fold_margins(make, pairs: list[Pair], folds: int = 5, seed: int = 0, extra: list[Pair] = (),
                        shared=None):
    """Margins of every pair from an attacker (`make()` builds a fresh one) fitted on the other folds only.

    `extra`: pairs scored but never trained on (a caption's alternative foils); each is scored by the model of
    the fold its group falls in, or by the last fold's model when its group is not among `pairs`.
    `shared`: `shared_differences(make, pairs, extra)`, when the caller already has it (several partitions).
    Returns (margins of pairs, margins of extra).
    """
    import numpy as np

    if not pairs:
        return np.zeros(0), np.zeros(len(extra))
    if shared is None:
        shared = shared_differences(make, pairs, extra)
    fold = grouped_folds([p.group for p in pairs], folds, seed)
    fits = [fold_margins(make, pairs, extra, shared, fold, k, seed) for k in sorted(set(fold))]
    return _assemble_margins(fits, len(pairs), len(extra))


def fold_margins(make, pairs: list[Pair], extra: list[Pair], shared, fold: list[int], k: int, seed: int):
    """One fold's work, the unit the engine maps (`FoldFits`): an attacker fitted on every fold but `k`, its
    margins on fold k and on the extra pairs whose group falls in k (or in no fold: the last k scores those).

    Returns (held indices, their margins, extra indices, their margins); no indices when every pair is in fold k.
    """
    fold_of_group = dict(zip((p.group for p in pairs), fold))
    train = [i for i, f in enumerate(fold) if f != k]
    if not train:  # one group only: nothing to learn from, no preference
        return [], [], [], []
    held = [i for i, f in enumerate(fold) if f == k]
    extra_held = [i for i, p in enumerate(extra) if fold_of_group.get(p.group, k) == k]
    if shared is not None:
        rows, extra_rows = shared
        model = make().fit_difference(rows[train], seed=seed)
        return (held, list(model.margins_difference(rows[held])), extra_held,
                list(model.margins_difference(extra_rows[extra_held])) if extra_held else [])
    model = make().fit([pairs[i] for i in train], seed=seed)
    return (held, list(model.margins([pairs[i] for i in held])), extra_held,
            list(model.margins([extra[i] for i in extra_held])) if extra_held else [])


def _assemble_margins(fits, n_pairs: int, n_extra: int):
    """(margins, extra margins) from fold_margins results in fold order (a later fold overwrites, as documented)."""
    import numpy as np

    margins, extra_margins = np.zeros(n_pairs), np.zeros(n_extra)
    for held, held_margins, extra_held, extra_held_margins in fits:
        margins[held] = held_margins
        extra_margins[extra_held] = extra_held_margins
    return margins, extra_margins


def run_here(jobs: list, worker_class, args: tuple) -> list:
    """The default runner of fold jobs: one worker in this process. A stage passes the engine's instead
    (pipeline/engine.py `job_runner`), which maps the same worker over the same jobs on a Ray actor pool."""
    return worker_class(*args)(jobs)


def _maker(blocks: dict, name: str):
    return lambda: build_attacker(blocks[name], f"params.yaml attackers.{name}")


class FoldFits:
    """The engine's worker for out-of-fold margins: a job (attacker name, seed, fold k) is `fold_margins` of
    that attacker on the folds `grouped_folds(groups, folds, seed)` of these pairs.

    Built once per worker with every pair; an attacker's shared feature map (`shared_differences`, a function of
    the texts alone) is computed the first time a job of that attacker comes, so each worker computes it at most
    once and every worker gets the same rows.
    """

    def __init__(self, blocks: dict, pairs: list[Pair], extra: list[Pair] = (), folds: int = 5):
        self.blocks, self.pairs, self.extra, self.folds = blocks, list(pairs), list(extra), folds
        self._shared: dict = {}

    def __call__(self, jobs: list[tuple[str, int, int]]) -> list:
        results = []
        for name, seed, k in jobs:
            make = _maker(self.blocks, name)
            if name not in self._shared:
                self._shared[name] = shared_differences(make, self.pairs, self.extra)
            fold = grouped_folds([p.group for p in self.pairs], self.folds, seed)
            results.append(fold_margins(make, self.pairs, self.extra, self._shared[name], fold, k, seed))
        return results


def fold_jobs(names, groups: list[str], folds: int, seeds) -> list[tuple[str, int, int]]:
    """Every (attacker, seed, held-out fold) of out-of-fold runs of `names` under each seed's partition."""
    return [(name, seed, k) for name in names for seed in seeds
            for k in sorted(set(grouped_folds(groups, folds, seed)))]


def out_of_fold_runs(blocks: dict, pairs: list[Pair], folds: int, seeds, extra: list[Pair] = (),
                     runner=run_here) -> dict:
    """{(attacker name, seed): (margins of pairs, margins of extra)}: `out_of_fold_margins` of every attacker
    of `blocks` under each seed, all their fold fits handed to `runner` as one list of jobs (on the Ray engine,
    fits of several attackers and partitions run side by side)."""
    import numpy as np

    if not pairs:
        return {(name, seed): (np.zeros(0), np.zeros(len(extra))) for name in blocks for seed in seeds}
    jobs = fold_jobs(list(blocks), [p.group for p in pairs], folds, seeds)
    fits: dict = {}
    for (name, seed, _), fit in zip(jobs, runner(jobs, FoldFits, (blocks, pairs, extra, folds))):
        fits.setdefault((name, seed), []).append(fit)
    return {key: _assemble_margins(found, len(pairs), len(extra)) for key, found in fits.items()}


def shared_differences(make, pairs: list[Pair], extra: list[Pair] = ()):
    """(difference rows of pairs, of extra) on a feature map built once on all their texts, for attackers whose
    margins do not change by it (`shares_features`); None for the others (they build features per fold).

    The map sees no label, only which n-grams occur; a caller that runs several partitions of the same pairs
    computes this once and passes it as `shared`.
    """
    probe = make()
    if not getattr(probe, "shares_features", False):
        return None
    probe._fit_features(list(pairs) + list(extra))
    return probe._difference(list(pairs)), probe._difference(list(extra)) if extra else None


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
            max_accuracy: float = 0.55, runner=run_here) -> dict:
    """The release gate's figures: per attacker, out-of-fold accuracy on the records averaged over `repeats`
    fresh grouped partitions (seeds seed, seed+1, ...), with n, ties, Wilson CI, verdict, family and `passed`.

    Multiple-choice records (a `candidates` list and the caption among them, BD2BB) are answered among their
    options (`out_of_fold_choices`); chance is then 1/k, and `max_accuracy` is read as chance + (max_accuracy - 0.5).
    """
    import numpy as np

    out = {}
    multiple = bool(records) and all(isinstance(r.get("candidates"), list) and r.get("caption") in r["candidates"]
                                     for r in records)
    attackers = {name: _maker(blocks, name)() for name in blocks}  # configuration errors before any fitting
    seeds = [seed + k for k in range(repeats)]
    if multiple:
        options = [list(r["candidates"]) for r in records]
        labels = [opts.index(r["caption"]) for opts, r in zip(options, records)]
        groups = [group_key(r["caption"]) for r in records]
        runs = out_of_fold_choice_runs(blocks, options, labels, groups, folds, seeds, runner)
        chance = float(np.mean([1 / len(o) for o in options]))
    else:
        pairs = pairs_from_records(records)
        runs = out_of_fold_runs(blocks, pairs, folds, seeds, runner=runner)
    for name, attacker in attackers.items():
        if multiple:
            shares = np.mean([runs[name, s] for s in seeds], axis=0)
            summary = _summary(shares, chance + (max_accuracy - 0.5), chance)
        else:
            scores = np.mean([correctness(runs[name, s][0]) for s in seeds], axis=0) if pairs else np.zeros(0)
            summary = _summary(scores, max_accuracy, 0.5)
        out[name] = {"attacker": attacker.describe(), "family": attacker.family, "repeats": repeats, **summary}
        if isinstance(attacker, GridSearchAttacker) and not multiple:
            # the setting the nested choice makes on all the records (each fold chose on its training pairs)
            out[name]["setting"] = attacker.choose(pairs, seed)
    return out


def transfer_margins(blocks: dict, train: list[Pair], scored: list[Pair], seed: int = 0) -> dict:
    """{attacker name: margins of `scored`} from each attacker of `blocks` fitted once on `train`: pairs outside
    the scored set (those a filter removed, a pool of the same phenomenon), so the attacker learns from all the
    data a language prior could have come from, not only from the other folds of the kept pairs. Pairs of
    `train` whose caption group is among the scored pairs' are dropped first (the attacker never sees a caption
    it scores). Empty when fewer than 2 training pairs remain."""
    import numpy as np

    held_groups = {p.group for p in scored}
    train = [p for p in train if p.group not in held_groups]
    if len(train) < 2:
        return {}
    return {name: (np.asarray(_maker(blocks, name)().fit(train, seed=seed).margins(scored)) if scored
                   else np.zeros(0)) for name in blocks}


def certify_transfer(records: list[dict], train_records: list[dict], blocks: dict, seed: int = 1,
                     max_accuracy: float = 0.55) -> dict:
    """The release gate's transfer figures: per attacker fitted on `train_records` (`transfer_margins`), its
    accuracy on `records` with n, Wilson CI, verdict, family and `trained_on` (the training pairs it kept)."""
    # one feature layout for both: the plausibility scorers every record of either set has
    both = pairs_from_records(list(records) + list(train_records))
    pairs = both[:len(records)]
    train = [p for p in both[len(records):] if p.group not in {q.group for q in pairs}]
    margins = transfer_margins(blocks, train, pairs, seed)
    out = {}
    for name, values in margins.items():
        attacker = _maker(blocks, name)()
        out[name] = {"attacker": attacker.describe(), "family": attacker.family, "trained_on": len(train),
                     **_summary(correctness(values), max_accuracy, 0.5)}
    return out


def _summary(scores, max_accuracy: float | None, chance: float) -> dict:
    """Figures of per-item success shares (1, 0, a tie's 0.5, or averaged over repeats).

    `passed` (with `max_accuracy`): at or below it, on at least MIN_JUDGED_PAIRS items (fewer are not
    certified). Below chance passes: an over-balanced set (a span that is caption in one fold and foil in
    another) is reported, not failed.
    """
    from foilforge.metrics import CHANCE_MARGIN, MIN_JUDGED_PAIRS, blind_verdict, wilson_interval

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
    fits = [fold_choices(make, options, labels, group, fold, k, seed) for k in sorted(set(fold))]
    return _assemble_shares(fits, len(options))


def fold_choices(make, options: list[list[str]], labels: list[int], group: list[str], fold: list[int], k: int,
                 seed: int) -> tuple[list[int], list[float]]:
    """One fold's work for multiple choice: (held item indices, the target's share of each one's pick) from an
    attacker fitted on the target-vs-decoy pairs of every other fold (the pick shared equally without any)."""
    train = [i for i, f in enumerate(fold) if f != k]
    held = [i for i, f in enumerate(fold) if f == k]
    if not train:
        return held, [1 / len(options[i]) for i in held]
    model = make().fit(multiple_choice_pairs([options[i] for i in train], [labels[i] for i in train],
                                             [group[i] for i in train]), seed=seed)
    shares = choose(model.margins, [options[i] for i in held], [group[i] for i in held])
    return held, [float(row[labels[i]]) for i, row in zip(held, shares)]


def _assemble_shares(fits, n_items: int) -> list[float]:
    share = [0.0] * n_items
    for held, shares in fits:
        for i, value in zip(held, shares):
            share[i] = value
    return share


class FoldChoices:
    """The engine's worker for multiple-choice items: a job (attacker name, seed, fold k) is `fold_choices`."""

    def __init__(self, blocks: dict, options: list[list[str]], labels: list[int], group: list[str], folds: int = 5):
        self.blocks, self.options, self.labels, self.group, self.folds = blocks, options, labels, group, folds

    def __call__(self, jobs: list[tuple[str, int, int]]) -> list:
        return [fold_choices(_maker(self.blocks, name), self.options, self.labels, self.group,
                             grouped_folds(self.group, self.folds, seed), k, seed) for name, seed, k in jobs]


def out_of_fold_choice_runs(blocks: dict, options: list[list[str]], labels: list[int], group: list[str],
                            folds: int, seeds, runner=run_here) -> dict:
    """{(attacker name, seed): per item, the target's share}: `out_of_fold_choices` of every attacker under each
    seed, all fold fits handed to `runner` as one list of jobs."""
    jobs = fold_jobs(list(blocks), group, folds, seeds)
    fits: dict = {}
    for (name, seed, _), fit in zip(jobs, runner(jobs, FoldChoices, (blocks, options, labels, group, folds))):
        fits.setdefault((name, seed), []).append(fit)
    return {key: _assemble_shares(found, len(options)) for key, found in fits.items()}
