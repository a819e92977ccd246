"""Where a stage's per-batch work runs: in this process, or on a Ray Data actor pool (params.yaml `engine`).

A stage hands `map_batches` its records and a worker: a class whose constructor loads what the work needs
once (the filters' models, spaCy) and whose call maps one batch of records to their results, the same
number in the same order. The records are cut into batches of `engine.batch_size`, in input order, and
each batch is one call whichever engine runs it:

* `local` (the default, what `make repro` runs): one worker in this process, batch after batch;
* `ray`: Ray Data's `map_batches` over a pool of `engine.ray.workers` actors (each with
  `cpus_per_worker` / `gpus_per_worker`), one Ray row per batch, the results put back in input order.
  `engine.ray.address: null` starts a Ray on this machine (`num_cpus` of its CPUs); a cluster address
  (`auto`, `ray://head:10001`) sends the work there. An actor that dies is restarted and its batch run
  again (`max_restarts`, `max_task_retries`), so no record is lost or counted twice.

The batches are the same for both engines, so are the records, byte for byte: a model that pads a batch
gives the same bits for the same batch. That is why `batch_size` is a tracked parameter of the stages and
the engine's name is not: `FOILFORGE_ENGINE=ray` (what `make repro ENGINE=ray` sets) picks Ray without
changing anything DVC tracks.
"""

from __future__ import annotations

import json
import logging
import os

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


def map_batches(records: list[dict], worker_class, args: tuple, settings: dict) -> list[dict]:
    """worker_class(*args)(batch) over `records` cut into batches of settings["batch_size"]; results in input order."""
    parts = batches(records, settings["batch_size"])
    if not parts:
        return []
    if settings["name"] == "ray":
        results = _ray_map(parts, worker_class, args, settings["ray"])
    else:
        worker = worker_class(*args)
        results = [_checked(worker(part), part, worker_class) for part in parts]
    return [record for part in results for record in part]


def _checked(results: list, part: list, worker_class) -> list:
    if len(results) != len(part):
        raise RuntimeError(f"{worker_class.__name__} returned {len(results)} results for a batch of {len(part)}")
    return results


class _RayWorker:
    """One actor of the pool: builds the stage's worker once, then maps Ray rows (one row = one batch)."""

    def __init__(self, worker_class, args):
        self.worker_class = worker_class
        self.worker = worker_class(*args)

    def __call__(self, rows: dict) -> dict:
        import numpy as np

        out = []
        for text in rows["records"]:
            part = json.loads(text)
            out.append(json.dumps(_checked(self.worker(part), part, self.worker_class)))
        return {"batch": rows["batch"], "records": np.array(out, dtype=object)}


def start_ray(ray_settings: dict):
    import ray

    if not ray.is_initialized():
        local = ray_settings["address"] is None
        ray.init(address=ray_settings["address"], num_cpus=ray_settings["num_cpus"] if local else None,
                 include_dashboard=False, ignore_reinit_error=True, logging_level=logging.WARNING,
                 configure_logging=False)
    return ray


def _ray_map(parts: list[list[dict]], worker_class, args: tuple, ray_settings: dict) -> list[list[dict]]:
    ray = start_ray(ray_settings)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    # one row per batch: the batches are foilforge's, not Ray's block sizes, so both engines score the same ones
    rows = ray.data.from_items([{"batch": k, "records": json.dumps(part)} for k, part in enumerate(parts)],
                               override_num_blocks=len(parts))
    mapped = rows.map_batches(
        _RayWorker, fn_constructor_args=(worker_class, args), batch_size=1, batch_format="numpy",
        concurrency=ray_settings["workers"], num_cpus=ray_settings["cpus_per_worker"],
        num_gpus=ray_settings["gpus_per_worker"] or None,
        # a killed actor comes back and its batch runs again: nothing is lost, nothing is written twice
        max_restarts=-1, max_task_retries=-1)
    done = sorted(mapped.take_all(), key=lambda row: int(row["batch"]))
    if [int(row["batch"]) for row in done] != list(range(len(parts))):
        raise RuntimeError(f"Ray returned batches {[int(r['batch']) for r in done]} for {len(parts)} batches")
    return [json.loads(row["records"]) for row in done]
