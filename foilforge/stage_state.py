"""What a stage keeps for its own run in module-level state, forgotten between the stages of one process.

A stage process usually runs one stage and exits. `foilforge repro` runs many stages one after another in one
long-lived worker (pipeline/runner/repro.py). A module-level cache that holds results of one run (the probe's
hidden-state vectors of the stage's texts) registers with `per_stage`, and the worker calls `reset()` before each
stage, so what a stage writes never depends on which stage ran before it in the same process, and a worker does
not hold every stage's results. Loaded models and pipelines are tools, not run state: they stay loaded; what
outlives a stage on purpose is in files (the pass store, foilforge/pass_store.py).
"""

from __future__ import annotations

_PER_STAGE: list = []


def per_stage(container):
    """Register a module-level container (anything with `clear()`) as one stage's state; returns it."""
    _PER_STAGE.append(container)
    return container


def reset() -> None:
    """Empty every registered container: the state a fresh stage process starts with."""
    for container in _PER_STAGE:
        container.clear()
