"""Proposers: one module per way of wording an edit the foiler chose (foilforge/proposers.py)."""
