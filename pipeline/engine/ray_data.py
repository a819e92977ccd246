"""The Ray engine for a stage's batches: Ray Data's `map_batches` over a pool of actors, one Ray row a batch, the
results back in batch order; a JSONL input is read by Ray's read tasks, by byte range."""

from __future__ import annotations

import logging
import os
import pickle

from foilforge.pipeline.engine.journal import journaled
from foilforge.pipeline.engine.reader import JsonlBatches, read_span
from foilforge.pipeline.engine.settings import progress_bar, set_torch_threads
from foilforge.schema import EngineBlock, RayEngineBlock


def start_ray(ray_settings: RayEngineBlock):
    import ray

    if not ray.is_initialized():
        local = ray_settings.address is None
        ray.init(address=ray_settings.address, num_cpus=ray_settings.num_cpus if local else None,
                 include_dashboard=False, ignore_reinit_error=True, logging_level=logging.WARNING,
                 configure_logging=False)
    return ray


def worker_process(threads, cpus) -> None:
    """An actor's threads, before it builds its worker."""
    set_torch_threads(threads)   # Ray starts an actor with 1 thread: the local engine's count, for its bits
    # a fast tokenizer encodes a batch on one thread per core of the machine, in every actor: 16 actors on 16
    # cores would run 256. Its threads change no token, so the actor's share of the cores is enough (a
    # RAYON_NUM_THREADS the user set is kept).
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, int(cpus))))


class _RayWorker:
    """One actor of the pool: builds the stage's worker once, then maps Ray rows (one row = one batch)."""

    def __init__(self, worker_class, args, threads, cpus):
        worker_process(threads, cpus)
        self.worker = worker_class(*args)

    def __call__(self, rows: dict) -> dict:
        import numpy as np

        # pickled, not JSON: a batch's result may hold objects (a foiler's candidates), and tuples stay tuples
        out = [pickle.dumps(self.worker(pickle.loads(blob)), protocol=4) for blob in rows["part"]]
        return {"batch": rows["batch"], "result": np.array(out, dtype=object)}


def ray_stream(parts: list[list], worker_class, args: tuple, settings: EngineBlock, journal, progress, threads):
    keys, results = journaled(journal, parts, threads, worker_class)
    todo = [k for k in range(len(parts)) if k not in results]
    done = _ray_parts([(k, parts[k]) for k in todo], worker_class, args, settings.ray, threads) if todo else ()
    following = 0
    for k, result in progress_bar(done, progress, len(todo)):
        if journal is not None:
            journal.put(keys[k], result)
        results[k] = result
        while following in results:   # yield in batch order, holding only the batches that came back early
            yield parts[following], results.pop(following)
            following += 1
    while following in results:
        yield parts[following], results.pop(following)
        following += 1


def ray_stream_file(source: JsonlBatches, worker_class, args: tuple, settings: EngineBlock, journal, progress, threads):
    """map_stream on Ray for batches of a JSONL file: the read tasks read the batches, the results come back in
    batch order (Ray Data's preserve_order), and each is yielded with its batch, read again here in step."""
    spans = source.spans()
    keys, done = journaled(journal, source, threads, worker_class)
    todo = [k for k in range(len(spans)) if k not in done]
    results = iter(())
    if todo:
        ray = start_ray(settings.ray)
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        rows = ray.data.read_datasource(_batch_spans(str(source.path), [(k, *spans[k]) for k in todo]),
                                        override_num_blocks=len(todo), num_cpus=0)
        results = progress_bar(_ray_map(rows, todo, worker_class, args, settings.ray, threads), progress, len(todo))
    for k, part in enumerate(source):
        if k not in done:
            number, result = next(results)
            if number != k:
                raise RuntimeError(f"Ray returned batch {number} where batch {k} was due")
            if journal is not None:
                journal.put(keys[k], result)
            done[k] = result
        yield part, done.pop(k)


def _batch_spans(path: str, spans: list[tuple[int, int, int]]):
    """A Ray Data datasource of one row a batch, {batch, part}: each read task reads its batch's byte range
    (`spans`: batch number, first byte, end byte). The class is made here, where Ray is imported."""
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata

    def read_task(k: int, start: int, end: int):
        def read():
            import pyarrow as pa

            blob = pickle.dumps(read_span(path, start, end), protocol=4)
            return [pa.table({"batch": [k], "part": pa.array([blob], type=pa.binary())})]

        return ReadTask(read, BlockMetadata(num_rows=1, size_bytes=end - start, exec_stats=None, input_files=(path,)))

    class BatchSpans(Datasource):
        def estimate_inmemory_data_size(self):
            return sum(end - start for _, start, end in spans)

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            return [read_task(*span) for span in spans]

    return BatchSpans()


def _ray_parts(numbered: list[tuple[int, list]], worker_class, args: tuple, ray_settings: RayEngineBlock, threads):
    """(batch number, result) as the pool finishes them, streamed: each is journaled the moment it is back."""
    ray = start_ray(ray_settings)
    # one row per batch: the batches are foilforge's, not Ray's block sizes, so both engines run the same ones
    rows = ray.data.from_items([{"batch": k, "part": pickle.dumps(part, protocol=4)} for k, part in numbered],
                               override_num_blocks=len(numbered))
    yield from _ray_map(rows, [k for k, _ in numbered], worker_class, args, ray_settings, threads)


def _ray_map(rows, numbers: list[int], worker_class, args: tuple, ray_settings: RayEngineBlock, threads):
    """(batch number, result) of each row {batch, part} of the Ray dataset `rows`, mapped on the actor pool."""
    import ray

    from foilforge.pipeline.engine.jobs import release_job_pool  # here: the job pool's module imports this one

    release_job_pool()   # its actors would hold CPUs this pool may need
    ray.data.DataContext.get_current().enable_progress_bars = False
    mapped = rows.map_batches(
        _RayWorker, fn_constructor_args=(worker_class, args, threads, ray_settings.cpus_per_worker),
        batch_size=1, batch_format="numpy",
        # no more actors than batches: each one loads the models
        compute=ray.data.ActorPoolStrategy(size=min(ray_settings.workers, len(numbers))),
        num_cpus=ray_settings.cpus_per_worker,
        num_gpus=ray_settings.gpus_per_worker or None,
        # a killed actor comes back and its batch runs again: nothing is lost, nothing is written twice
        max_restarts=-1, max_task_retries=-1)
    seen = set()
    for row in mapped.iter_rows():
        k = int(row["batch"])
        if k in seen:
            raise RuntimeError(f"Ray returned batch {k} twice")
        seen.add(k)
        yield k, pickle.loads(row["result"])
    if seen != set(numbers):
        raise RuntimeError(f"Ray returned batches {sorted(seen)} for {sorted(numbers)}")
