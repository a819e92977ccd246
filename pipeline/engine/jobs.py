"""Work cut into independent jobs (the attackers' fold fits) on the engine: here, job after job, or on a pool of
long-lived Ray actors kept from call to call."""

from __future__ import annotations

from foilforge.pipeline.engine.local import map_batches
from foilforge.pipeline.engine.ray_data import start_ray, worker_process
from foilforge.pipeline.engine.settings import checked, worker_threads
from foilforge.schema import EngineBlock


def job_runner(settings: EngineBlock) -> "JobRunner":
    """A runner for work cut into independent jobs (filters/attackers/: one fold fit a job) on this engine."""
    return JobRunner(settings)


class JobRunner:
    """`runner(jobs, worker_class, args)`: worker_class(*args) mapped over the jobs, one result a job, in order.

    Locally one worker in this process, job after job. On Ray the jobs go, in chunks, to a pool of long-lived
    actors that this runner starts on its first call and keeps for the next ones: the adversarial filter calls
    it once a round with that round's pairs, and a Ray Data pool started for every round took most of a round's
    time to come up (docs/performance.md). An actor builds the worker once per call (per args) and
    keeps it for that call's chunks. An actor that dies is restarted and its chunk run again, as on the
    stages' pools. The jobs are CPU work (scikit-learn fits): the actors take `cpus_per_worker` and no GPU.
    `close()` (or leaving a `with` block) stops the actors; so does the next Ray Data map, which may need
    their CPUs."""

    def __init__(self, settings: EngineBlock):
        self.settings = settings

    def __call__(self, jobs: list, worker_class, args: tuple) -> list:
        if self.settings.name != "ray":
            return map_batches(jobs, worker_class, args, self.settings.model_copy(update={"batch_size": 1}))
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
        worker_process(threads, cpus)
        self.call, self.worker = None, None

    def run(self, call: int, worker_class, args_ref: list, jobs: list) -> list:
        if call != self.call:
            import ray

            self.worker, self.call = worker_class(*ray.get(args_ref[0])), call
        return checked(self.worker(jobs), jobs, worker_class)


class _JobPool:
    def __init__(self, settings: EngineBlock, threads):
        import ray

        ray_settings = settings.ray
        self.identity = _pool_identity(settings, threads)
        actor = ray.remote(_JobActor).options(num_cpus=ray_settings.cpus_per_worker, num_gpus=0,
                                              max_restarts=-1, max_task_retries=-1)
        # no more actors than the cluster's CPUs hold: a chunk handed to an actor that cannot start would wait forever
        fits = int(ray.cluster_resources().get("CPU", 1) // ray_settings.cpus_per_worker)
        self.actors = [actor.remote(threads, ray_settings.cpus_per_worker)
                       for _ in range(max(1, min(ray_settings.workers, fits)))]
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
        """Kill the actors and return once Ray has them dead: ray.kill only asks, and an actor still alive a moment
        later would run a call made to it and keep its CPUs from the map that comes next."""
        import ray

        killed = []
        for actor in self.actors:
            try:
                ray.kill(actor)
                killed.append(actor)
            except Exception:  # its Ray is gone (shut down): nothing left to stop
                pass
        for actor in killed:
            _await_death(actor)


def _await_death(actor, timeout_s: float = 60.0) -> None:
    """Wait until a killed actor refuses calls (Ray says it died); a bounded wait, then an error naming the wait."""
    import time

    import ray

    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=left)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:  # no answer either way within the bound
            break
        time.sleep(0.01)
    raise RuntimeError(f"a job-pool actor was killed but had not died after {timeout_s:.0f} s")


_live_pool: _JobPool | None = None   # the one job pool of this process, while a runner uses it


def _pool_identity(settings: EngineBlock, threads) -> tuple:
    """What a job pool was started for: the Ray session, the pool settings and the workers' torch threads."""
    import ray

    return ray.get_runtime_context().get_job_id(), settings.ray, threads


def _job_pool(settings: EngineBlock) -> _JobPool:
    """The live job pool for these settings, started if there is none (or only one of another Ray session or
    other settings, which is stopped first)."""
    global _live_pool
    start_ray(settings.ray)
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
