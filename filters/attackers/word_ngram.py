"""`word_ngram.v1`: logistic regression on the difference of the two texts' binary word n-gram vectors."""

from __future__ import annotations

from foilforge.attacker import ATTACKERS
from foilforge.filters.attackers.base import NgramPairAttacker


@ATTACKERS.register("word_ngram.v1")
class WordNgramAttacker(NgramPairAttacker):
    family = "word n-grams"
    analyzer = "word"
