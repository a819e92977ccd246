"""The maps a stage calls: the local engine runs the batches here, one worker in this process; with the Ray
engine they go to `ray_data`'s actor pool."""

from __future__ import annotations

from typing import Iterable, Iterator

from foilforge.pipeline.engine import ray_data
from foilforge.pipeline.engine.journal import BatchJournal, log_reused
from foilforge.pipeline.engine.reader import JsonlBatches
from foilforge.pipeline.engine.settings import batches, checked, progress_bar, set_torch_threads, worker_threads
from foilforge.schema import EngineBlock


def map_batches(records: list[dict], worker_class, args: tuple, settings: EngineBlock,
                journal: BatchJournal | None = None, progress: str | None = None) -> list[dict]:
    """worker_class(*args)(batch) over `records` cut into batches of settings.batch_size; one result per
    record, in input order."""
    parts = batches(records, settings.batch_size)
    results = map_parts(records, worker_class, args, settings, journal, progress)
    return [record for part, result in zip(parts, results) for record in checked(result, part, worker_class)]


def map_parts(records: list, worker_class, args: tuple, settings: EngineBlock,
              journal: BatchJournal | None = None, progress: str | None = None) -> list:
    """worker_class(*args)(batch) over `records` cut into batches of settings.batch_size; one result per
    batch, in batch order. Batches found in `journal` are not run again; the others are added to it."""
    parts = batches(records, settings.batch_size)
    return [result for _, result in map_stream(parts, worker_class, args, settings, journal, progress, len(parts))]


def map_stream(parts: Iterable[list], worker_class, args: tuple, settings: EngineBlock,
               journal: BatchJournal | None = None, progress: str | None = None,
               total: int | None = None) -> Iterator[tuple[list, object]]:
    """(batch, worker_class(*args)(batch)) for each batch of `parts`, in their order, as they are done.

    The local engine reads one batch from `parts`, runs it and yields it before it reads the next, so a stage
    that streams its input and output holds one batch at a time. On Ray, `parts` given as a `JsonlBatches`
    are read by Ray's read tasks and come back in order (what the stage process holds: the batches' byte
    ranges and the results on their way); any other `parts` go to the pool at once, by value, and their
    results come back in any order and are yielded in batch order.
    Batches found in `journal` are not run again (and the worker, with its models, is built only if some
    batch is not there); the others are added to it as they come back. `total`: the number of batches, for
    the progress bar."""
    threads = settings.threads_per_worker
    if journal is not None or settings.name == "ray":
        # the journal's keys and Ray's actors need the count itself; a local run without a journal leaves the
        # process's threads as they are, and a stage whose work has no torch model does not import torch for it
        threads = worker_threads(settings)
    if settings.name == "ray" and isinstance(parts, JsonlBatches):
        yield from ray_data.ray_stream_file(parts, worker_class, args, settings, journal, progress, threads)
        return
    if settings.name == "ray":
        yield from ray_data.ray_stream(list(parts), worker_class, args, settings, journal, progress, threads)
        return
    worker, reused, ran = None, 0, 0
    for part in progress_bar(parts, progress, total or 0):
        key = journal.key(part, threads) if journal is not None else None
        found, result = journal.get(key) if journal is not None else (False, None)
        if found:
            reused += 1
        else:
            if worker is None:
                set_torch_threads(threads)
                worker = worker_class(*args)
            result = worker(part)
            ran += 1
            if journal is not None:
                journal.put(key, result)
        yield part, result
    log_reused(worker_class, reused, reused + ran, journal)
