"""`edit_tokens.v1`: logistic regression on the edit itself, the words each text has where the two differ."""

from __future__ import annotations

import functools

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import check_positive, fit_logistic


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

    def fit(self, pairs: list[Pair], y=None) -> "EditTokensAttacker":
        import numpy as np
        from sklearn.feature_extraction.text import CountVectorizer

        pairs = captions_first(pairs, y)
        documents = [self.document(p.caption, p.foil) for p in pairs] + [self.document(p.foil, p.caption)
                                                                           for p in pairs]
        self.vectorizer_ = CountVectorizer(token_pattern=r"\S+", binary=True, lowercase=False)
        try:
            x = self.vectorizer_.fit_transform(documents).astype(float)
        except ValueError:  # identical texts everywhere: no edit to learn from
            self.vectorizer_, self.classifier_ = None, None
            return self
        labels = np.concatenate([np.ones(len(pairs)), np.zeros(len(pairs))])
        self.classifier_ = fit_logistic(x, labels, self.C, self.random_state, dual=True)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs or self.classifier_ is None:
            return np.zeros(len(pairs))

        def score(documents):
            return self.classifier_.decision_function(self.vectorizer_.transform(documents).astype(float))

        return (score([self.document(p.caption, p.foil) for p in pairs])
                - score([self.document(p.foil, p.caption) for p in pairs]))
