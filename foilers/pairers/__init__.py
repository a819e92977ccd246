"""Pairers: one module per kind of evidence that a second image makes a foil true (foilforge/pairing.py)."""
