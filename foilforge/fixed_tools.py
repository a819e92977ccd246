"""Deterministic stand-ins for models: a span ranker and a sentence encoder that read fixed tables.

Model-backed foilers plug them in through `Foiler.golden_tools`, so the contract checks
(foilforge/testing.py) test a foiler's own logic, not a model. Kept apart from the checks so that
a foiler importing them does not depend on the test code.
"""

from __future__ import annotations

import numpy as np


class TableRanker:
    """Span ranker double: a fill's score is its entry in a fixed table (lower-cased), -100 when absent."""

    def __init__(self, table: dict[str, float]):
        self.table = table

    def score(self, items):
        return [[float(self.table.get(fill.lower(), -100.0)) for fill in fills] for _, _, fills in items]


class TableEncoder:
    """Sentence-encoder double: each text's vector is its entry in a fixed table (rows normalised)."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table

    def encode(self, texts, progress=False):
        vectors = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
