"""`ngram_bayes.v1`: naive Bayes over word and character n-grams of each text alone.

A generative learner that scores each text alone (no pair difference): another family than the
discriminative pair models, for a gate that must not reuse the filter's attackers.
"""

from __future__ import annotations

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.filters.attackers.base import WORD_TOKENS, check_positive


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

    def fit(self, pairs: list[Pair], y=None) -> "NgramBayesAttacker":
        from sklearn.naive_bayes import MultinomialNB
        from sklearn.pipeline import make_pipeline, make_union

        from foilforge.filters.attackers.ngrams import BinaryNgramVectorizer

        pairs = captions_first(pairs, y)
        # binary n-gram counts (CountVectorizer's rows), each text split once a stage
        features = make_union(
            BinaryNgramVectorizer(analyzer="word", ngram_range=tuple(self.word_ngram_range),
                                  token_pattern=WORD_TOKENS),
            BinaryNgramVectorizer(analyzer="char_wb", ngram_range=tuple(self.char_ngram_range)))
        texts = [p.caption for p in pairs] + [p.foil for p in pairs]
        labels = [1] * len(pairs) + [0] * len(pairs)
        self.pipeline_ = make_pipeline(features, MultinomialNB(alpha=self.alpha)).fit(texts, labels)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        first = self.pipeline_.predict_log_proba([p.caption for p in pairs])
        second = self.pipeline_.predict_log_proba([p.foil for p in pairs])
        return (first[:, 1] - first[:, 0]) - (second[:, 1] - second[:, 0])
