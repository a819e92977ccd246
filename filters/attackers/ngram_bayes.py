"""`ngram_bayes.v1`: naive Bayes over word and character n-grams of each text alone.

A generative learner that scores each text alone (no pair difference): another family than the
discriminative pair models, for a gate that must not reuse the filter's attackers.
"""

from __future__ import annotations

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.filters.attackers.base import WORD_TOKENS, check_positive, side_by_side, sides


@ATTACKERS.register("ngram_bayes.v1")
class NgramBayesAttacker(Attacker):
    """Naive Bayes over word and character n-grams of single texts: P(caption | text), compared across the pair.

    `random_state` is taken like every attacker's and changes nothing: naive Bayes draws no random numbers.
    """

    family = "naive Bayes on single texts"

    def __init__(self, word_ngram_range: list[int] = (1, 2), char_ngram_range: list[int] = (2, 4),
                 alpha: float = 1.0, random_state: int = 0):
        self.word_ngram_range = word_ngram_range
        self.char_ngram_range = char_ngram_range
        self.alpha = alpha
        self.random_state = random_state

    def check(self) -> None:
        check_positive("alpha", self.alpha)

    #: the naive Bayes fit alone: grid settings that differ only in it share one feature map
    fit_only_params = ("alpha",)
    #: a vocabulary built once on every text of an out-of-fold run (it sees no label) gives the margins of a
    #: vocabulary built per fold: `fit_difference` keeps the columns its training texts have, which are that
    #: fold's vocabulary in its order, so the counts, the smoothing's vocabulary size and every sum are the same
    shares_features = True

    def _union(self):
        from sklearn.pipeline import make_union

        from foilforge.filters.attackers.ngrams import BinaryNgramVectorizer

        # binary n-gram counts (CountVectorizer's rows), each text split once a stage
        return make_union(
            BinaryNgramVectorizer(analyzer="word", ngram_range=tuple(self.word_ngram_range),
                                  token_pattern=WORD_TOKENS),
            BinaryNgramVectorizer(analyzer="char_wb", ngram_range=tuple(self.char_ngram_range)))

    def fit(self, pairs: list[Pair], y=None) -> "NgramBayesAttacker":
        from sklearn.naive_bayes import MultinomialNB
        from sklearn.pipeline import make_pipeline

        pairs = captions_first(pairs, y)
        texts = [p.caption for p in pairs] + [p.foil for p in pairs]
        labels = [1] * len(pairs) + [0] * len(pairs)
        self.pipeline_ = make_pipeline(self._union(), MultinomialNB(alpha=self.alpha)).fit(texts, labels)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        return self._margins(self.pipeline_.predict_log_proba([p.caption for p in pairs]),
                             self.pipeline_.predict_log_proba([p.foil for p in pairs]))

    @staticmethod
    def _margins(first, second):
        return (first[:, 1] - first[:, 0]) - (second[:, 1] - second[:, 0])

    # the shared feature map (foilforge.attacker.shared_differences): a pair's row is its caption's n-gram row
    # beside its foil's, on a vocabulary of every text of the run
    def fit_features(self, pairs: list[Pair]) -> "NgramBayesAttacker":
        self.union_ = self._union().fit([t for p in pairs for t in (p.caption, p.foil)])
        return self

    def vectorize(self, pairs: list[Pair]):
        return side_by_side(self.union_.transform([p.caption for p in pairs]),
                            self.union_.transform([p.foil for p in pairs]))

    @staticmethod
    def _sides(rows, columns):
        """(caption rows, foil rows) of paired rows, on `columns` of the run's vocabulary."""
        first, second = (side[:, columns] for side in sides(rows))
        first.sort_indices()
        second.sort_indices()
        return first, second

    def fit_difference(self, rows) -> "NgramBayesAttacker":
        """Fit on paired rows (`vectorize`) of the training pairs, on the n-grams their texts have."""
        import numpy as np
        from scipy import sparse
        from sklearn.naive_bayes import MultinomialNB

        # the n-grams some training text has, in either side's column
        self.columns_ = np.flatnonzero(sum(np.diff(side.tocsc().indptr) for side in sides(rows)))
        if not len(self.columns_):  # what the per-fold vocabulary raises
            raise ValueError("empty vocabulary: no text has an n-gram")
        first, second = self._sides(rows, self.columns_)
        x = sparse.vstack([first, second], format="csr")
        labels = [1] * first.shape[0] + [0] * second.shape[0]
        self.classifier_ = MultinomialNB(alpha=self.alpha).fit(x, labels)
        return self

    def margins_difference(self, rows):
        import numpy as np

        if not rows.shape[0]:
            return np.zeros(0)
        first, second = self._sides(rows, self.columns_)
        return self._margins(self.classifier_.predict_log_proba(first), self.classifier_.predict_log_proba(second))
