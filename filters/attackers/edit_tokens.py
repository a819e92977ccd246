"""`edit_tokens.v1`: logistic regression on the edit itself, the words each text has where the two differ."""

from __future__ import annotations

import functools

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import check_positive, fit_logistic, side_by_side, sides


@functools.lru_cache(maxsize=1 << 16)  # every fold and partition of an out-of-fold run asks for the same pairs' edits
def edit(first: str, second: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
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

    def __init__(self, C: float = 1.0, pairs: bool = True, random_state: int = 0):
        self.C = C
        self.pairs = pairs
        self.random_state = random_state

    def check(self) -> None:
        check_positive("C", self.C)
        if not isinstance(self.pairs, bool):
            raise ConfigError(f"argument pairs must be true or false, got {self.pairs!r}")

    def document(self, first: str, second: str) -> str:
        """The edit from `first` to `second` as the tokens the vectorizer counts."""
        removed, added = edit(first, second)
        words = [f"out:{x}" for x in removed] + [f"in:{y}" for y in added]
        if self.pairs:
            words += [f"{x}>{y}" for x in removed for y in added]
        return " ".join(words)

    #: the logistic fit alone: grid settings that differ only in it share one feature map
    fit_only_params = ("C",)
    #: a vocabulary of edits built once on every pair of an out-of-fold run (it sees no label) gives the fit of one
    #: built per fold (foilforge.attacker.shared_differences): an edit no training pair has is a zero column, weighed
    #: 0. The dual solver's sums are the same; where a fit falls back to the primal solver (fit_logistic), whose
    #: vector sums run over every column, the last bits can differ (tests/test_attackers.py bounds the difference)
    shares_features = True

    def _documents(self, pairs: list[Pair]) -> tuple[list[str], list[str]]:
        """(each pair's edit from caption to foil, from foil to caption)."""
        return ([self.document(p.caption, p.foil) for p in pairs], [self.document(p.foil, p.caption) for p in pairs])

    @staticmethod
    def _vectorizer():
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(token_pattern=r"\S+", binary=True, lowercase=False)

    def fit(self, pairs: list[Pair], y=None) -> "EditTokensAttacker":
        pairs = captions_first(pairs, y)
        forward, backward = self._documents(pairs)
        self.vectorizer_ = self._vectorizer()
        try:
            x = self.vectorizer_.fit_transform(forward + backward).astype(float)
        except ValueError:  # identical texts everywhere: no edit to learn from
            self.vectorizer_, self.classifier_ = None, None
            return self
        return self._fit_rows(x, len(pairs))

    def _fit_rows(self, x, n: int) -> "EditTokensAttacker":
        """Fit on rows of n forward edits then their n backward edits (labels 1, then 0)."""
        import numpy as np

        labels = np.concatenate([np.ones(n), np.zeros(n)])
        self.classifier_ = fit_logistic(x, labels, self.C, self.random_state, dual=True)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs or self.classifier_ is None:
            return np.zeros(len(pairs))
        forward, backward = self._documents(pairs)
        return self._margins_rows(self.vectorizer_.transform(forward).astype(float),
                                  self.vectorizer_.transform(backward).astype(float))

    def _margins_rows(self, forward, backward):
        return self.classifier_.decision_function(forward) - self.classifier_.decision_function(backward)

    # the shared feature map: a pair's row is its forward edit's row beside its backward edit's
    def fit_features(self, pairs: list[Pair]) -> "EditTokensAttacker":
        forward, backward = self._documents(pairs)
        self.vectorizer_ = self._vectorizer()
        try:
            self.vectorizer_.fit(forward + backward)
        except ValueError:  # no edit in any pair
            self.vectorizer_ = None
        return self

    def vectorize(self, pairs: list[Pair]):
        from scipy import sparse

        if self.vectorizer_ is None:
            return sparse.csr_matrix((len(pairs), 0))
        forward, backward = self._documents(pairs)
        return side_by_side(self.vectorizer_.transform(forward), self.vectorizer_.transform(backward)).astype(float)

    def fit_difference(self, rows) -> "EditTokensAttacker":
        """Fit on paired rows (`vectorize`) of the training pairs."""
        from scipy import sparse

        forward, backward = sides(rows)
        if not forward.nnz:  # no edit in the training pairs: no preference, as `fit`
            self.classifier_ = None
            return self
        return self._fit_rows(sparse.vstack([forward, backward], format="csr"), rows.shape[0])

    def margins_difference(self, rows):
        import numpy as np

        if self.classifier_ is None or not rows.shape[0]:
            return np.zeros(rows.shape[0])
        return self._margins_rows(*sides(rows))
