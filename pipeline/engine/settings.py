"""The engine's settings (params.yaml `engine`, $FOILFORGE_ENGINE), the batches both engines cut, and the torch
threads every worker sums with."""

from __future__ import annotations

import os

from foilforge.errors import ConfigError
from foilforge.schema import EngineBlock

ENGINE_ENV = "FOILFORGE_ENGINE"
ENGINES = ("local", "ray")


def engine_settings(params: dict) -> EngineBlock:
    """params.yaml `engine` with its defaults, the engine's name overridden by $FOILFORGE_ENGINE when set."""
    from foilforge.params import typed_params

    settings = typed_params(params).engine
    override = os.environ.get(ENGINE_ENV)
    if override:
        if override not in ENGINES:
            raise ConfigError(f"${ENGINE_ENV} is {override!r}; expected one of {', '.join(ENGINES)}")
        settings = settings.model_copy(update={"name": override})
    return settings


def batches(records: list, size: int) -> list[list]:
    return [records[start : start + size] for start in range(0, len(records), size)]


def checked(results: list, part: list, worker_class) -> list:
    """A batch's results, one a record: a worker that drops or adds records is an error, not a shifted output."""
    if len(results) != len(part):
        raise RuntimeError(f"{worker_class.__name__} returned {len(results)} results for a batch of {len(part)}")
    return results


def progress_bar(iterator, desc: str | None, total: int):
    if desc is None or total < 2:
        return iterator
    from tqdm import tqdm

    return tqdm(iterator, total=total, desc=desc, unit="batch")


def set_torch_threads(threads: int | None) -> None:
    """torch's intra-op threads in this process (None: leave them), before a worker builds its models."""
    if threads is None:
        return
    try:
        import torch
    except ImportError:  # a stage whose work has no torch model: nothing sums in threads
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def stage_threads() -> int | None:
    """The torch threads of this process (what the local engine's worker runs with when the params leave it);
    None without torch."""
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def worker_threads(settings: EngineBlock) -> int | None:
    """The torch threads every worker of this run sums with: `threads_per_worker`, or the stage process's."""
    return settings.threads_per_worker or stage_threads()
