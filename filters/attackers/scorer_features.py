"""`scorer_features.v1`: the pair model on the text-only scorers' numbers stored on the records.

Per side: each plausibility scorer's score of the text (`filters.plausibility.scores`), its length in words
and in characters, standardised.
"""

from __future__ import annotations

from foilforge.attacker import ATTACKERS
from foilforge.filters.attackers.base import LinearPairAttacker


@ATTACKERS.register("scorer_features.v1")
class ScorerFeaturesAttacker(LinearPairAttacker):
    """Per side: each plausibility scorer's score of the text, its length in words and in characters."""

    family = "text-only scorer features"

    def fit_features(self, pairs):
        import numpy as np

        widths = {len(p.caption_features) for p in pairs} | {len(p.foil_features) for p in pairs}
        if len(widths) > 1:
            raise ValueError(f"scorer_features: pairs carry different numbers of features ({sorted(widths)})")
        self.width_ = widths.pop() if widths else 0
        rows = np.array([p.caption_features for p in pairs] + [p.foil_features for p in pairs], dtype=float)
        scale = rows.std(axis=0) if len(rows) else np.ones(self.width_)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        return self

    def features(self, texts, sides):
        import numpy as np

        rows = np.array(sides, dtype=float).reshape(len(texts), self.width_)
        return rows / self.scale_

    def feature_names_out(self) -> list[str]:
        return [f"feature {k}" for k in range(self.width_ - 2)] + ["words", "characters"]
