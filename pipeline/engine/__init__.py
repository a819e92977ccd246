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

The modules: `settings` (params.yaml `engine`, the batches, the workers' torch threads), `reader` (a JSONL
file's batches by byte range), `journal` (`BatchJournal`), `local` (the maps, run here or handed to Ray),
`ray_data` (the Ray Data actor pool) and `jobs` (independent jobs on a pool of actors kept from call to call).
"""

from foilforge.pipeline.engine.jobs import JobRunner, job_runner, release_job_pool
from foilforge.pipeline.engine.journal import BatchJournal, journal_identity
from foilforge.pipeline.engine.local import map_batches, map_parts, map_stream
from foilforge.pipeline.engine.ray_data import start_ray
from foilforge.pipeline.engine.reader import JsonlBatches, read_span
from foilforge.pipeline.engine.settings import (
                                      ENGINE_ENV,
                                      ENGINES,
                                      batches,
                                      checked,
                                      engine_settings,
                                      set_torch_threads,
                                      stage_threads,
                                      worker_threads,
)

__all__ = ["ENGINE_ENV", "ENGINES", "BatchJournal", "JobRunner", "JsonlBatches", "batches", "checked",
           "engine_settings", "job_runner", "journal_identity", "map_batches", "map_parts", "map_stream",
           "read_span", "release_job_pool", "set_torch_threads", "stage_threads", "start_ray", "worker_threads"]
