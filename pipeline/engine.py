"""Where a stage's per-batch work runs: in this process, or on a Ray Data actor pool (params.yaml `engine`).

A stage hands the engine its records and a worker: a class whose constructor loads what the work needs
once (the filters' models, spaCy, a foiler) and whose call maps one batch of records to its result. The
records are cut into batches of `engine.batch_size`, in input order, and each batch is one call whichever
engine runs it:

* `local` (the default, what `make repro` runs): one worker in this process, batch after batch;
* `ray`: Ray Data's `map_batches` over a pool of `engine.ray.workers` actors (each with
  `cpus_per_worker` / `gpus_per_worker`), one Ray row per batch, the results put back in input order.
  `engine.ray.address: null` starts a Ray on this machine (`num_cpus` of its CPUs); a cluster address
  (`auto`, `ray://head:10001`) sends the work there. An actor that dies is restarted and its batch run
  again (`max_restarts`, `max_task_retries`), so no record is lost or counted twice.

`map_batches` is for work that maps each record to one result (the score stage); `map_parts` returns one
result per batch, whatever its shape (the foil stage: a batch's candidates and its counts). Both take a
list; `map_stream` takes the batches as an iterator and yields each result as it is done, so a stage that
reads and writes record by record (the score stage) holds one batch at a time on the local engine.

The batches are the same for both engines, so are the records, byte for byte: a model that pads a batch
gives the same bits for the same batch. So do torch's threads: a CPU matrix product sums in an order that
depends on how many threads share it, and Ray starts each actor with one thread where the stage process has
one per core. Every worker therefore runs with `engine.threads_per_worker` torch threads, on both engines
(null: the stage process's own count, handed to the actors). That is why `batch_size` and
`threads_per_worker` are tracked parameters of the stages and the engine's name is not:
`FOILFORGE_ENGINE=ray` (what `make repro ENGINE=ray` sets) picks Ray without changing anything DVC tracks.
The bits also depend on the CPU's instruction set: a cluster of other CPUs gives the same records up to
the last bits of the model scores.

A `BatchJournal` makes a stage resumable: each batch's result is appended to it as it comes back, and a
rerun of the stage after a kill (a preempted node, Ctrl-C, the OOM killer) takes the batches it finds there
instead of running them again, so only the batches that were in flight are redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import pickle
from typing import Iterable, Iterator
from pathlib import Path

from foilforge.errors import ConfigError

log = logging.getLogger(__name__)

ENGINE_ENV = "FOILFORGE_ENGINE"
ENGINES = ("local", "ray")


def engine_settings(params: dict) -> dict:
    """params.yaml `engine` with its defaults, the engine's name overridden by $FOILFORGE_ENGINE when set."""
    from foilforge.schema import EngineBlock

    settings = EngineBlock.model_validate(params.get("engine") or {}).model_dump()
    override = os.environ.get(ENGINE_ENV)
    if override:
        if override not in ENGINES:
            raise ConfigError(f"${ENGINE_ENV} is {override!r}; expected one of {', '.join(ENGINES)}")
        settings["name"] = override
    return settings


def batches(records: list, size: int) -> list[list]:
    return [records[start : start + size] for start in range(0, len(records), size)]


class JsonlBatches:
    """The records of a JSONL file in batches of `size`, read when needed: iterating gives the batches in order
    (one in memory at a time), and on Ray each read task reads its own batch from the file, by the byte range
    `spans` found, so the stage process never holds the input. The file must then be where every node of
    the cluster can read it, as for any Ray Data read (one machine, or shared storage)."""

    def __init__(self, path, size: int):
        self.path, self.size = Path(path), size

    def __iter__(self) -> Iterator[list[dict]]:
        from foilforge.io import iter_jsonl

        part = []
        for record in iter_jsonl(self.path, allow_empty=True):
            part.append(record)
            if len(part) == self.size:
                yield part
                part = []
        if part:
            yield part

    def spans(self) -> list[tuple[int, int]]:
        """(first byte, end byte) of each batch: `size` non-blank lines each, as `iter_jsonl` counts them."""
        spans, start, offset, lines = [], 0, 0, 0
        with self.path.open("rb") as handle:
            for raw in handle:
                offset += len(raw)
                if raw.decode("utf-8").strip():   # what iter_jsonl skips (the stage read the file as UTF-8 already)
                    lines += 1
                    if lines == self.size:
                        spans.append((start, offset))
                        start, lines = offset, 0
        if lines:
            spans.append((start, offset))
        return spans


def read_span(path: str, start: int, end: int) -> list[dict]:
    """The records of bytes [start, end) of a JSONL file (a batch of `JsonlBatches.spans`)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    # split at newlines only, as reading a file by lines does (a record may hold U+2028, which splitlines cuts at)
    lines = (raw.decode("utf-8") for raw in data.split(b"\n"))
    return [json.loads(line) for line in lines if line.strip()]


class BatchJournal:
    """The finished batches of one stage run, on disk: a stream of length-prefixed pickled (key, result) entries.

    A batch's key is the sha256 of the run's `identity` (what else decides the result: the worker, its
    settings, the whole input when the work reads corpus-level state) and the batch itself, so a changed
    setting or input never reuses a stale result. An entry is appended and fsynced as its batch comes back; a
    kill loses at most the entry being written, whose torn tail is cut off when the journal is opened. The
    file is this machine's own cache (`--cache-dir`), read only by the stage that wrote it.
    """

    def __init__(self, path, identity: str):
        self.path = Path(path)
        self.identity = identity
        self.reused = self.written = 0
        self._done: dict[str, object] = {}
        if self.path.exists():
            with self.path.open("r+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                data = handle.read()
                good = 0
                # each entry: its length (8 bytes, big-endian), then the pickled (key, result)
                while good + 8 <= len(data):
                    size = int.from_bytes(data[good : good + 8], "big")
                    if good + 8 + size > len(data):
                        break
                    try:
                        key, result = pickle.loads(data[good + 8 : good + 8 + size])
                    except Exception as error:  # a damaged entry: it and what follows it are run again
                        log.warning("journal %s: entry at byte %d unreadable (%s: %s); its batch and the later "
                                    "ones are run again", self.path, good, type(error).__name__, error)
                        break
                    self._done[key] = result
                    good += 8 + size
                if good < len(data):
                    handle.truncate(good)  # the entry a kill cut short, or the next append would follow it

    def key(self, batch: list, threads: int | None = None) -> str:
        """The batch's key under this run's identity; `threads`, the torch threads its worker sums with, is part
        of it (a batch scored under another count has other bits)."""
        return journal_identity(self.identity, threads, batch)

    def get(self, key: str):
        if key in self._done:
            self.reused += 1
            return True, self._done[key]
        return False, None

    def put(self, key: str, result) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            blob = pickle.dumps((key, result), protocol=4)
            handle.write(len(blob).to_bytes(8, "big") + blob)
            handle.flush()
            os.fsync(handle.fileno())
        self._done[key] = result
        self.written += 1

    def finish(self) -> None:
        """The stage's output is written: the journal has done its job (DVC's cache keeps the output)."""
        log.info("journal %s: %d batches reused, %d run", self.path, self.reused, self.written)
        self.path.unlink(missing_ok=True)


def journal_identity(*parts) -> str:
    """A run's identity for BatchJournal from JSON-able parts (params, names, the input's records)."""
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def map_batches(records: list[dict], worker_class, args: tuple, settings: dict,
                journal: BatchJournal | None = None, progress: str | None = None) -> list[dict]:
    """worker_class(*args)(batch) over `records` cut into batches of settings["batch_size"]; one result per
    record, in input order."""
    parts = batches(records, settings["batch_size"])
    results = map_parts(records, worker_class, args, settings, journal, progress)
    return [record for part, result in zip(parts, results) for record in checked(result, part, worker_class)]


def map_parts(records: list, worker_class, args: tuple, settings: dict,
              journal: BatchJournal | None = None, progress: str | None = None) -> list:
    """worker_class(*args)(batch) over `records` cut into batches of settings["batch_size"]; one result per
    batch, in batch order. Batches found in `journal` are not run again; the others are added to it."""
    parts = batches(records, settings["batch_size"])
    return [result for _, result in map_stream(parts, worker_class, args, settings, journal, progress, len(parts))]


def map_stream(parts: Iterable[list], worker_class, args: tuple, settings: dict,
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
    threads = settings.get("threads_per_worker")
    if journal is not None or settings["name"] == "ray":
        # the journal's keys and Ray's actors need the count itself; a local run without a journal leaves the
        # process's threads as they are, and a stage whose work has no torch model does not import torch for it
        threads = worker_threads(settings)
    if settings["name"] == "ray" and isinstance(parts, JsonlBatches):
        yield from _ray_stream_file(parts, worker_class, args, settings, journal, progress, threads)
        return
    if settings["name"] == "ray":
        yield from _ray_stream(list(parts), worker_class, args, settings, journal, progress, threads)
        return
    worker, reused, ran = None, 0, 0
    for part in _progress(parts, progress, total or 0):
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
    _log_reused(worker_class, reused, reused + ran, journal)


def _ray_stream(parts: list[list], worker_class, args: tuple, settings: dict, journal, progress, threads):
    keys, results = _journaled(journal, parts, threads, worker_class)
    todo = [k for k in range(len(parts)) if k not in results]
    done = _ray_parts([(k, parts[k]) for k in todo], worker_class, args, settings["ray"], threads) if todo else ()
    following = 0
    for k, result in _progress(done, progress, len(todo)):
        if journal is not None:
            journal.put(keys[k], result)
        results[k] = result
        while following in results:   # yield in batch order, holding only the batches that came back early
            yield parts[following], results.pop(following)
            following += 1
    while following in results:
        yield parts[following], results.pop(following)
        following += 1


def _journaled(journal: BatchJournal | None, parts: Iterable[list], threads, worker_class) -> tuple[list, dict]:
    """Every batch's journal key, and the results the journal holds by batch number (none without a journal)."""
    if journal is None:
        return [], {}
    keys, found = [], {}
    for k, part in enumerate(parts):
        keys.append(journal.key(part, threads))
        hit, result = journal.get(keys[k])
        if hit:
            found[k] = result
    _log_reused(worker_class, len(found), len(keys), journal)
    return keys, found


def _log_reused(worker_class, reused: int, total: int, journal: BatchJournal | None) -> None:
    if journal is not None and reused:
        log.info("%s: %d of %d batches taken from the journal %s", worker_class.__name__, reused, total, journal.path)


def job_runner(settings: dict) -> "JobRunner":
    """A runner for work cut into independent jobs (filters/attackers.py: one fold fit a job) on this engine."""
    return JobRunner(settings)


class JobRunner:
    """`runner(jobs, worker_class, args)`: worker_class(*args) mapped over the jobs, one result a job, in order.

    Locally one worker in this process, job after job. On Ray the jobs go, in chunks, to a pool of long-lived
    actors that this runner starts on its first call and keeps for the next ones: the adversarial filter calls
    it once a round with that round's pairs, and a Ray Data pool started for every round took 10-12 s to come up
    with 16 actors on the H200 machine (most of a round's time: benchmarks/results/ray_scaling.json,
    coco_build_device.gpu_ray_16_actors_1500_captions). An actor builds the worker once per call (per args) and
    keeps it for that call's chunks. An actor that dies is restarted and its chunk run again, as on the
    stages' pools. The jobs are CPU work (scikit-learn fits): the actors take `cpus_per_worker` and no GPU.
    `close()` (or leaving a `with` block) stops the actors; so does the next Ray Data map, which may need
    their CPUs."""

    def __init__(self, settings: dict):
        self.settings = settings

    def __call__(self, jobs: list, worker_class, args: tuple) -> list:
        if self.settings["name"] != "ray":
            return map_batches(jobs, worker_class, args, {**self.settings, "batch_size": 1})
        if not jobs:
            return []
        return _job_pool(self.settings).run(jobs, worker_class, args)

    def close(self) -> None:
        release_job_pool()

    def __enter__(self) -> "JobRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _JobActor:
    """One actor of the job pool: a worker built from a call's args (a Ray object, fetched once per call)."""

    def __init__(self, threads, cpus):
        _worker_process(threads, cpus)
        self.call, self.worker = None, None

    def run(self, call: int, worker_class, args_ref: list, jobs: list) -> list:
        if call != self.call:
            import ray

            self.worker, self.call = worker_class(*ray.get(args_ref[0])), call
        return checked(self.worker(jobs), jobs, worker_class)


class _JobPool:
    def __init__(self, settings: dict, threads):
        import ray

        ray_settings = settings["ray"]
        self.identity = _pool_identity(settings, threads)
        actor = ray.remote(_JobActor).options(num_cpus=ray_settings["cpus_per_worker"], num_gpus=0,
                                              max_restarts=-1, max_task_retries=-1)
        # no more actors than the cluster's CPUs hold: a chunk handed to an actor that cannot start would wait forever
        fits = int(ray.cluster_resources().get("CPU", 1) // ray_settings["cpus_per_worker"])
        self.actors = [actor.remote(threads, ray_settings["cpus_per_worker"])
                       for _ in range(max(1, min(ray_settings["workers"], fits)))]
        self.calls = 0

    def run(self, jobs: list, worker_class, args: tuple) -> list:
        """The jobs in chunks, a few per actor (each actor computes an attacker's shared features once per call,
        so neighbouring jobs, which share the attacker, go together), the next chunk to whichever actor is free."""
        import ray

        self.calls += 1
        args_ref = [ray.put(args)]   # in a list: Ray passes it on as a reference, fetched once per actor and call
        size = max(1, -(-len(jobs) // (4 * len(self.actors))))
        chunks = [jobs[start : start + size] for start in range(0, len(jobs), size)]
        results: list = [None] * len(chunks)
        pending, free, next_chunk = {}, list(self.actors), 0
        while next_chunk < len(chunks) or pending:
            while free and next_chunk < len(chunks):
                actor = free.pop()
                pending[actor.run.remote(self.calls, worker_class, args_ref, chunks[next_chunk])] = (actor, next_chunk)
                next_chunk += 1
            [ready], _ = ray.wait(list(pending), num_returns=1)
            actor, k = pending.pop(ready)
            results[k] = ray.get(ready)
            free.append(actor)
        return [result for chunk in results for result in chunk]

    def stop(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # its Ray is gone (shut down): nothing left to stop
                pass


_live_pool: _JobPool | None = None   # the one job pool of this process, while a runner uses it


def _pool_identity(settings: dict, threads) -> tuple:
    """What a job pool was started for: the Ray session, the pool settings and the workers' torch threads."""
    import ray

    return ray.get_runtime_context().get_job_id(), json.dumps(settings["ray"], sort_keys=True), threads


def _job_pool(settings: dict) -> _JobPool:
    """The live job pool for these settings, started if there is none (or only one of another Ray session or
    other settings, which is stopped first)."""
    global _live_pool
    start_ray(settings["ray"])
    threads = worker_threads(settings)
    if _live_pool is not None and _live_pool.identity != _pool_identity(settings, threads):
        release_job_pool()
    if _live_pool is None:
        _live_pool = _JobPool(settings, threads)
    return _live_pool


def release_job_pool() -> None:
    """Stop the job pool's actors, if any: their CPUs go back to Ray."""
    global _live_pool
    pool, _live_pool = _live_pool, None
    if pool is not None:
        pool.stop()


def _progress(iterator, desc: str | None, total: int):
    if desc is None or total < 2:
        return iterator
    from tqdm import tqdm

    return tqdm(iterator, total=total, desc=desc, unit="batch")


def checked(results: list, part: list, worker_class) -> list:
    """A batch's results, one a record: a worker that drops or adds records is an error, not a shifted output."""
    if len(results) != len(part):
        raise RuntimeError(f"{worker_class.__name__} returned {len(results)} results for a batch of {len(part)}")
    return results


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


def worker_threads(settings: dict) -> int | None:
    """The torch threads every worker of this run sums with: `threads_per_worker`, or the stage process's."""
    return settings.get("threads_per_worker") or stage_threads()


def _worker_process(threads, cpus) -> None:
    """An actor's threads, before it builds its worker."""
    set_torch_threads(threads)   # Ray starts an actor with 1 thread: the local engine's count, for its bits
    # a fast tokenizer encodes a batch on one thread per core of the machine, in every actor: 16 actors on 16
    # cores would run 256. Its threads change no token, so the actor's share of the cores is enough (a
    # RAYON_NUM_THREADS the user set is kept).
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, int(cpus))))


class _RayWorker:
    """One actor of the pool: builds the stage's worker once, then maps Ray rows (one row = one batch)."""

    def __init__(self, worker_class, args, threads, cpus):
        _worker_process(threads, cpus)
        self.worker = worker_class(*args)

    def __call__(self, rows: dict) -> dict:
        import numpy as np

        # pickled, not JSON: a batch's result may hold objects (a foiler's candidates), and tuples stay tuples
        out = [pickle.dumps(self.worker(pickle.loads(blob)), protocol=4) for blob in rows["part"]]
        return {"batch": rows["batch"], "result": np.array(out, dtype=object)}


def start_ray(ray_settings: dict):
    import ray

    if not ray.is_initialized():
        local = ray_settings["address"] is None
        ray.init(address=ray_settings["address"], num_cpus=ray_settings["num_cpus"] if local else None,
                 include_dashboard=False, ignore_reinit_error=True, logging_level=logging.WARNING,
                 configure_logging=False)
    return ray


def _ray_stream_file(source: JsonlBatches, worker_class, args: tuple, settings: dict, journal, progress, threads):
    """map_stream on Ray for batches of a JSONL file: the read tasks read the batches, the results come back in
    batch order (Ray Data's preserve_order), and each is yielded with its batch, read again here in step."""
    spans = source.spans()
    keys, done = _journaled(journal, source, threads, worker_class)
    todo = [k for k in range(len(spans)) if k not in done]
    results = iter(())
    if todo:
        ray = start_ray(settings["ray"])
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        rows = ray.data.read_datasource(_batch_spans(str(source.path), [(k, *spans[k]) for k in todo]),
                                        override_num_blocks=len(todo), num_cpus=0)
        results = _progress(_ray_map(rows, todo, worker_class, args, settings["ray"], threads), progress, len(todo))
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


def _ray_parts(numbered: list[tuple[int, list]], worker_class, args: tuple, ray_settings: dict, threads):
    """(batch number, result) as the pool finishes them, streamed: each is journaled the moment it is back."""
    ray = start_ray(ray_settings)
    # one row per batch: the batches are foilforge's, not Ray's block sizes, so both engines run the same ones
    rows = ray.data.from_items([{"batch": k, "part": pickle.dumps(part, protocol=4)} for k, part in numbered],
                               override_num_blocks=len(numbered))
    yield from _ray_map(rows, [k for k, _ in numbered], worker_class, args, ray_settings, threads)


def _ray_map(rows, numbers: list[int], worker_class, args: tuple, ray_settings: dict, threads):
    """(batch number, result) of each row {batch, part} of the Ray dataset `rows`, mapped on the actor pool."""
    import ray

    release_job_pool()   # its actors would hold CPUs this pool may need
    ray.data.DataContext.get_current().enable_progress_bars = False
    mapped = rows.map_batches(
        _RayWorker, fn_constructor_args=(worker_class, args, threads, ray_settings["cpus_per_worker"]),
        batch_size=1, batch_format="numpy",
        # no more actors than batches: each one loads the models
        compute=ray.data.ActorPoolStrategy(size=min(ray_settings["workers"], len(numbers))),
        num_cpus=ray_settings["cpus_per_worker"],
        num_gpus=ray_settings["gpus_per_worker"] or None,
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
