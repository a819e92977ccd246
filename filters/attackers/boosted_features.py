"""`boosted_features`: gradient-boosted trees on the difference of the two texts' dense features.

`boosted_features.v1` grows them with scikit-learn's HistGradientBoostingClassifier; `boosted_features.v2` grows
the same model (histogram trees, the same hyperparameters and HistGradientBoosting's defaults for the rest) with
LightGBM, whose C++ trainer fits the few hundred rows of a filter round's fold 2-4 times faster: a tree of
scikit-learn's grower is grown in Python, and the adversarial filter fits thousands of them a stage
(docs/performance.md, "Boosted trees"). The two bin the features their own ways (LightGBM keeps at least 3 rows a
bin), so their margins differ in detail, not in kind."""

from __future__ import annotations

import functools

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import thread_pools


@functools.lru_cache(maxsize=1 << 16)  # every fold, partition and filter round asks for the same texts
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

    def __init__(self, max_iter: int = 100, max_depth: int = 3, learning_rate: float = 0.1, random_state: int = 0):
        self.max_iter = max_iter
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.random_state = random_state

    def check(self) -> None:
        for name in ("max_iter", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"argument {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, (int, float)) \
                or not 0 < self.learning_rate <= 1:
            raise ConfigError(f"argument learning_rate must be a number in (0, 1], got {self.learning_rate!r}")

    @staticmethod
    def difference(pairs: list[Pair]):
        """Rows d = features(first) - features(second): the scorer numbers and lengths, then surface_features."""
        import numpy as np

        widths = {len(p.caption_features) for p in pairs} | {len(p.foil_features) for p in pairs}
        if len(widths) > 1:
            raise ValueError(f"boosted_features: pairs carry different numbers of features ({sorted(widths)})")
        return np.array([np.subtract(p.caption_features + surface_features(p.caption),
                                     p.foil_features + surface_features(p.foil)) for p in pairs], dtype=float)

    def fit(self, pairs: list[Pair], y=None) -> "BoostedFeaturesAttacker":
        import numpy as np

        pairs = captions_first(pairs, y)
        d = self.difference(pairs)
        self.classifier_ = self.grow(np.vstack([d, -d]), np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))]))
        return self

    def grow(self, x, labels):
        """The fitted trees of rows `x` (d, then -d) and their labels."""
        from sklearn.ensemble import HistGradientBoostingClassifier

        # one OpenMP thread: a few hundred rows gain nothing from more, and on a busy machine threads that wait
        # for each other make each fit several times slower
        with thread_pools().limit(limits=1, user_api="openmp"):
            return HistGradientBoostingClassifier(
                max_iter=self.max_iter, max_depth=self.max_depth, learning_rate=self.learning_rate,
                early_stopping=False, random_state=self.random_state).fit(x, labels)

    def raw_scores(self, x):
        """The trees' raw score f(row) of each row of `x`."""
        with thread_pools().limit(limits=1, user_api="openmp"):
            return self.classifier_.decision_function(x)

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        d = self.difference(pairs)
        # f(d) and f(-d) in one call: a row's trees are walked on its own, so each value is the one a call of its
        # own gives, and the call's fixed cost is paid once
        both = self.raw_scores(np.vstack([d, -d]))
        return both[:len(d)] - both[len(d):]


#: LightGBM's arguments of boosted_features.v2: HistGradientBoostingClassifier's defaults (31 leaves at most, 20 rows
#: a leaf, a leaf's hessian at least 1e-3, no L2 penalty, 255 bins) on one thread, deterministic
LIGHTGBM_PARAMS = {"objective": "binary", "num_leaves": 31, "min_data_in_leaf": 20, "min_sum_hessian_in_leaf": 1e-3,
                   "lambda_l2": 0.0, "max_bin": 255, "num_threads": 1, "deterministic": True, "force_col_wise": True,
                   "verbose": -1}


@ATTACKERS.register("boosted_features.v2")
class LightBoostedFeaturesAttacker(BoostedFeaturesAttacker):
    """boosted_features.v1's model, grown by LightGBM: the same rows d and -d, trees of `max_depth` grown for
    `max_iter` rounds at `learning_rate`, margin f(d) - f(-d) (antisymmetric), one thread a fit."""

    def grow(self, x, labels):
        import lightgbm

        params = {**LIGHTGBM_PARAMS, "max_depth": self.max_depth, "learning_rate": self.learning_rate,
                  "seed": self.random_state}
        rows = lightgbm.Dataset(x, labels, params={key: params[key] for key in ("max_bin", "verbose")})
        return lightgbm.train(params, rows, num_boost_round=self.max_iter)

    def raw_scores(self, x):
        return self.classifier_.predict(x, raw_score=True, num_threads=1)
