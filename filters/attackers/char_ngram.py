"""`char_ngram.v1`: the word n-gram pair model on character n-grams within word boundaries."""

from __future__ import annotations

from foilforge.attacker import ATTACKERS
from foilforge.filters.attackers.base import NgramPairAttacker


@ATTACKERS.register("char_ngram.v1")
class CharNgramAttacker(NgramPairAttacker):
    family = "character n-grams"
    analyzer = "char_wb"

    def __init__(self, ngram_range: list[int] = (2, 5), C: float = 1.0, min_df: int = 1, random_state: int = 0):
        super().__init__(ngram_range, C, min_df, random_state)
