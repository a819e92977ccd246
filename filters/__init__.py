"""Filters: batched scorers (GRUEN, NLI, length) and the keep rules applied to their scores."""
