"""`length.v1`: the pair model on the two texts' lengths alone, in words and in characters.

The shortcut an addition builds into its pairs: an add-obj or add-att foil is the caption plus words, so "the
shorter text is the caption" solves the ungrouped pairs without the image (98-99% of SugarCrepe's add pairs).
This attacker measures exactly that and nothing else, so the gate's reading of it says how far a set's lengths
give its foils away. `scorer_features` sees lengths too, beside the scorers' numbers; only a second image (a
Winoground group) takes the shortcut away.
"""

from __future__ import annotations

from foilforge.attacker import ATTACKERS
from foilforge.filters.attackers.base import LinearPairAttacker


@ATTACKERS.register("length.v1")
class LengthAttacker(LinearPairAttacker):
    """Per side: the text's length in words and in characters (standardised on the training texts)."""

    family = "text length"

    def fit_features(self, pairs):
        import numpy as np

        rows = np.array([_lengths(t) for p in pairs for t in (p.caption, p.foil)], dtype=float).reshape(-1, 2)
        scale = rows.std(axis=0) if len(rows) else np.ones(2)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        return self

    def features(self, texts, sides):
        import numpy as np

        return np.array([_lengths(t) for t in texts], dtype=float).reshape(len(texts), 2) / self.scale_

    def feature_names_out(self) -> list[str]:
        return ["words", "characters"]


def _lengths(text: str) -> tuple[int, int]:
    return len(text.split()), len(text)
