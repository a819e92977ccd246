"""`foilforge repro`'s runner: the pipeline as `dvc repro` runs it, with the `foilforge` stage commands in long-lived workers, several at once.

`dvc repro` starts a new process for every stage command (about a hundred on the sample data), and each of them
imports torch, transformers and spaCy and loads its models again; it runs one stage at a time; and after every
stage it parses and rewrites the whole dvc.lock (seconds a stage on the sample: docs/performance.md). The runner does DVC's work for each stage in this process, with DVC's own calls
(pipeline/runner/dvc_api.py) and in the order `Stage.run` makes them (whether the stage changed, removing its outputs, the run cache, saving
dependencies and outputs, committing them to DVC's cache), and differs in three ways:

* a stage command that is `foilforge ...` runs in a worker process that stays up from stage to stage: it imports
  once and keeps the spaCy pipelines and probe models it loaded. Before each command the worker takes the stage's
  working directory and environment (what DVC would give the command's process), torch's thread count as a new
  process has it, and forgets what the previous stage kept for its own run (foilforge/stage_state.py), so each
  stage writes what it would write in a process of its own. Any other command runs in a shell, as DVC runs it.
* up to `--jobs` commands run at once (one worker each), a stage starting as soon as every stage it depends on
  has finished: DVC's plan, in parallel where the graph allows. The workers start while DVC plans, and one
  stage more waits in their queue, so a worker goes on to it while this process records the stage it finished.
* the dvc.lock entries of finished stages are written together, in a thread beside the build: at most every
  `--lock-every` seconds, at the end, and when a stage fails (then no new stage starts, the running ones finish
  and are recorded, so a rerun starts after them). Ctrl-C or SIGTERM ends the commands under way (a shell
  command with what it started) and writes the entries of the stages that finished; after a SIGKILL, DVC's run
  cache still restores a stage that finished since the last write instead of running it again.

`dvc status` afterwards reads as after `dvc repro`, and either command can continue what the other began.
"""


from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from foilforge.pipeline.runner import dvc_api

log = logging.getLogger(__name__)


def run_in_worker(argv: list[str], cwd: str, env: dict) -> int:
    """One stage command in this (worker) process: `foilforge ARGV` in `cwd` with exactly `env` as environment.
    Returns its exit status; an exception is printed and gives 1."""
    import traceback

    from foilforge import stage_state
    from foilforge.pipeline.stages import cli

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    stage_state.reset()
    _restore_torch_threads()
    try:
        return int(cli.main(argv) or 0)
    except SystemExit as exit_:  # argparse's usage errors
        return exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker outlives the stage; its status says it failed
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


_TORCH_THREADS: list[int] = []

#: stages handed to the workers beyond one a worker: the next one waits in the workers' queue, so a worker that
#: finishes a command takes it at once, while this process records the stage that finished (about 0.1 s a stage
#: of DVC's work, during which the worker sat idle: docs/performance.md)
QUEUED_AHEAD = 1


def _start_worker(jobs: int = 1) -> None:
    """The worker's first acts: to die with the process that started it (Linux; a worker left running after
    `foilforge repro` is killed would go on with a stage nobody waits for), and torch's thread count, to give
    every stage the same.

    With other workers beside it, OpenMP's threads (torch's, scikit-learn's) sleep instead of spinning while they
    wait (OMP_WAIT_POLICY=PASSIVE, unless the environment sets it): spinning, two torch stages side by side on 2
    cores took about twice the CPU for the same outputs (docs/performance.md). And the workers share the cores
    rather than each taking them all: torch, and numpy's and scipy's BLAS, get `cores // jobs` threads (at least
    one; fewer if the environment asked for fewer), so the 2 workers on 2 cores of `make repro` run one thread
    each, and spend less CPU for it.
    The sample build's bits do not move with it: a text's model pass (foilforge/lm.py) and the span ranker
    (foilforge/span_ranking.py) run on one thread on a CPU whatever the process has, and score, baseline and foil write
    the same bytes with the process on 1 and 2 threads (docs/performance.md, "One pass per text"). What else sums
    with torch on a CPU (the paper profile's GRUEN and NLI) takes the process's count, here cores // jobs."""
    import signal

    if jobs > 1:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when OpenMP starts: before torch is imported

    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    share = max(1, (os.cpu_count() or 1) // jobs)
    if jobs > 1:  # numpy's and scipy's BLAS likewise (their threads spin while they wait for each other)
        import numpy  # noqa: F401
        import scipy.linalg  # noqa: F401
        from threadpoolctl import threadpool_info, threadpool_limits

        if any(pool["num_threads"] > share for pool in threadpool_info() if pool["user_api"] == "blas"):
            threadpool_limits(limits=share, user_api="blas")
    try:
        import torch
    except ImportError:
        return
    if jobs > 1 and torch.get_num_threads() > share:
        torch.set_num_threads(share)
    _TORCH_THREADS.append(torch.get_num_threads())


def _restore_torch_threads() -> None:
    # a stage may set torch's intra-op threads (engine.threads_per_worker); the next starts where a process starts
    if _TORCH_THREADS and "torch" in sys.modules:
        import torch

        if torch.get_num_threads() != _TORCH_THREADS[0]:
            torch.set_num_threads(_TORCH_THREADS[0])


#: characters that make a command the shell's business (operators, expansions, redirections, globs)
SHELL_CHARACTERS = set("$`;&|<>()*?[]{}~#\\\n")


def worker_argv(cmd: str) -> list[str] | None:
    """The arguments after `foilforge` when `cmd` is one plain `foilforge ...` command; None when the shell must
    run it (another program, or any operator, expansion or redirection)."""
    if SHELL_CHARACTERS & set(cmd):
        return None
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return None
    return argv[1:] if argv[:1] == ["foilforge"] else None


class StageWorkers:
    """The long-lived worker processes (spawned: they share nothing with DVC's process but the files)."""

    def __init__(self, jobs: int):
        self.jobs, self._pool = jobs, None

    def start(self) -> None:
        """Start every worker now, before there is a command for it: a worker's start (importing torch, numpy and
        scipy) then goes on while DVC plans the build, not after."""
        pool = self._started_pool()
        for _ in range(self.jobs):  # the pool starts a process for a call that finds no idle one
            pool.submit(os.getpid)

    def submit(self, argv: list[str], cwd: str, env: dict):
        """A future of the command's exit status."""
        return self._started_pool().submit(run_in_worker, argv, cwd, env)

    def _started_pool(self):
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=get_context("spawn"),
                                             initializer=_start_worker, initargs=(self.jobs,))
        return self._pool

    def run(self, argv: list[str], cwd: str, env: dict) -> int:
        """The command's exit status, once it has run."""
        return self.status(self.submit(argv, cwd, env))

    def status(self, future) -> int:
        """A finished command's exit status; -9 when its worker was killed (out of memory, a signal): the next
        command gets new workers."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return future.result()
        except BrokenProcessPool:
            self._pool = None
            return -9

    def close(self, stop: bool = False) -> None:
        """Shut the workers down once their commands are done; `stop`: end the commands under way first (a build
        interrupted: what they wrote is not recorded, and they run again next time)."""
        if self._pool is None:
            return
        if stop:
            # the pool has no public way to end a running call; its worker processes are in `_processes`
            for process in list((getattr(self._pool, "_processes", None) or {}).values()):
                process.terminate()
        self._pool.shutdown(wait=not stop, cancel_futures=True)
        self._pool = None


class LockWriter:
    """The lock entries of finished stages, written in one rewrite of their dvc.lock at most every `every` s.

    A rewrite parses and dumps the whole file (seconds on the sample's), so the periodic ones run in a thread of
    their own: the build goes on handing stages to workers meanwhile. `flush` waits for a rewrite under way, then
    writes what is left; one rewrite at a time, so the file is never written twice at once.
    """

    def __init__(self, every: float):
        self.every, self.pending, self.written_at = every, [], time.monotonic()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dvc-lock")
        self._writing = None  # (future, stages) of the rewrite under way

    def add(self, stage) -> None:
        self.pending.append(stage)
        if time.monotonic() - self.written_at < self.every:
            return
        if self._writing is not None:
            if not self._writing[0].done():
                return  # the next rewrite takes these too
            self.pending = self._finished_rewrite() + self.pending
        batch, self.pending, self.written_at = self.pending, [], time.monotonic()
        self._writing = (self._writer.submit(self._write, batch), batch)

    def flush(self) -> None:
        """Every pending entry written before this returns: waits for a rewrite under way (its stages are
        written again with the rest when it failed, and its error raised after)."""
        error = None
        if self._writing is not None:
            error = self._writing[0].exception()  # waits for it; raised once the rest is written
            self.pending = self._finished_rewrite() + self.pending
        batch, self.pending, self.written_at = self.pending, [], time.monotonic()
        self._write(batch)
        if error is not None:
            raise error

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._writer.shutdown()

    def _finished_rewrite(self) -> list:
        """The stages of the finished rewrite to write again (all of them when it failed, none when it worked)."""
        future, batch = self._writing
        self._writing = None
        if future.exception() is not None:
            log.warning("writing dvc.lock failed (%s): trying again with the next entries", future.exception())
            return batch
        return []

    @staticmethod
    def _write(stages: list) -> None:
        dvc_api.write_lock(stages)


#: the shell commands under way, ended when the build is interrupted
_SHELLS: set = set()


def shell_status(cmd: str, cwd: str, env: dict) -> int:
    """A command the shell must run, as DVC runs it (its shell, without rc files)."""
    import subprocess

    process = subprocess.Popen(dvc_api.shell_argv(cmd), cwd=cwd, env=env)
    _SHELLS.add(process)
    try:
        return process.wait()
    finally:
        _SHELLS.discard(process)


def stop_shells() -> None:
    """End every shell command under way, and every process it started (psutil, which DVC requires, finds those).

    A shell keeps starting commands while it is being stopped: one started between reading its children and
    ending the shell would be left behind, an orphan holding the build's terminal and writing into its files. So
    each process is suspended before its children are read (a suspended process starts none), all of them are sent
    SIGTERM, and then let go on to act on it."""
    import psutil

    for process in list(_SHELLS):
        try:
            shell = psutil.Process(process.pid)
        except psutil.NoSuchProcess:
            continue
        frozen = _suspended_tree(shell)
        for each in frozen:
            _signal_quietly(each.terminate)
        for each in frozen:
            _signal_quietly(each.resume)


def _suspended_tree(root) -> list:
    """`root` and every process under it, each suspended (SIGSTOP) before its children are read."""
    import psutil

    frozen, seen, todo = [], set(), [root]
    while todo:
        process = todo.pop()
        if process.pid in seen:
            continue
        seen.add(process.pid)
        try:
            process.suspend()
            frozen.append(process)
            _wait_until_stopped(process)
            todo.extend(process.children())
        except psutil.NoSuchProcess:
            pass
    return frozen


def _wait_until_stopped(process, timeout: float = 5.0) -> None:
    """SIGSTOP is delivered, not obeyed at once: a process running on another core finishes a fork meanwhile, and
    its new child is only certain to be seen once the process has stopped. On a loaded machine that can take a
    while; a process in uninterruptible sleep is not waited for: it obeys the stop before it runs again, so it
    starts nothing meanwhile."""
    import psutil

    deadline = time.monotonic() + timeout
    while (status := process.status()) not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
        if status == psutil.STATUS_DISK_SLEEP or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def _signal_quietly(send) -> None:
    import psutil

    try:
        send()
    except psutil.NoSuchProcess:
        pass


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C is: the build stops, and what finished is recorded."""


def _interrupt(signum, frame):
    raise Interrupted(f"signal {signum}")


class Build:
    """DVC's reproduce of a plan, with up to `jobs` stage commands running at once.

    All of DVC's work happens in this thread, stage by stage, as `Stage.run` does it: whether the stage
    changed (`Stage.changed`, against the stages it depends on), removing its outputs, the run cache, saving the
    dependencies; then the command goes to a worker; when it is done, saving and committing the outputs and the
    stage's lock entry. A stage starts when every stage it depends on has finished."""

    def __init__(self, graph, plan: list, force: bool, workers: StageWorkers, lock: LockWriter):
        self.graph, self.plan, self.force, self.workers, self.lock = graph, plan, force, workers, lock
        self.ran: list = []
        self.shell = None  # the threads that wait on shell commands, while `run` runs

    def upstream(self, stage) -> list:
        return dvc_api.upstream(self.graph, stage)

    def start(self, stage):
        """A future of the stage's commands' exit status, or None when nothing is left to run (unchanged,
        restored from the run cache)."""
        if not self.force and not stage.changed(upstream=self.upstream(stage)):
            log.info("Stage '%s' didn't change, skipping", stage.addressing)
            return None
        if stage.frozen or not stage.cmd:
            log.warning("%s is frozen or has no command: its outputs are checked, not reproduced", stage)
            dvc_api.check_missing_outputs(stage)
            return None
        stage.remove_outs(ignore_remove=False, force=False)
        if not self.force and dvc_api.restore_from_run_cache(stage):
            log.info("Stage '%s' restored from the run cache", stage.addressing)
            self.finish(stage)
            return None
        log.info("Running stage '%s':", stage.addressing)
        commands, cwd, env = dvc_api.commands(stage)
        argv = worker_command(commands)
        if argv is not None:
            log.info("> %s", commands[0])
            return self.workers.submit(argv, cwd, env)

        def in_order():  # several commands, or the shell's: one after another in a thread, as DVC runs them
            for cmd in commands:
                log.info("> %s", cmd)
                status = shell_status(cmd, cwd, env)
                if status:
                    return status
            return 0

        return self.shell.submit(in_order)

    def finish(self, stage) -> None:
        """What `Stage.run` does after the command: save the outputs (and the run cache entry), commit them."""
        dvc_api.save_and_commit(stage)
        self.lock.add(stage)
        self.ran.append(stage)

    def run(self) -> None:
        """Every stage of the plan whose dependencies finished, up to `jobs` at once; on a failure, no new stage
        starts, the running ones finish (and are recorded), and ReproductionError names the failed stages."""
        with ThreadPoolExecutor(max_workers=self.workers.jobs) as self.shell:
            try:
                failed = self._run_plan()
            except KeyboardInterrupt:
                stop_shells()  # before the pool waits for the threads that wait on them
                raise
        if failed:
            names = ", ".join(repr(stage.addressing) for stage in failed)
            raise dvc_api.reproduction_error(f"failed to reproduce {names}")

    def _run_plan(self) -> list:
        """The stages that failed (none when the plan ran through)."""

        waiting, running, finished, failed = list(self.plan), {}, set(), []
        while waiting or running:
            for stage in list(waiting):
                if failed or len(running) >= self.workers.jobs + QUEUED_AHEAD:
                    break
                if len(running) >= self.workers.jobs and not all(map(runs_in_worker, [*running.values(), stage])):
                    break  # a command beyond `jobs` only waits in the workers' queue: a shell would run it at once
                if all(up in finished or up not in self.plan for up in self.upstream(stage)):
                    waiting.remove(stage)
                    future = self.start(stage)
                    if future is None:
                        finished.add(stage)
                    else:
                        running[future] = stage
            if failed and not running:
                break
            if not running:
                if waiting:  # what is left waits on a stage that is not in the plan: DVC would not run it either
                    raise dvc_api.reproduction_error(f"stages wait on stages outside the plan: {waiting}")
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                stage = running.pop(future)
                status = self.workers.status(future)
                if status == 0:
                    self.finish(stage)
                    finished.add(stage)
                else:
                    log.error("%s", dvc_api.command_failed(stage.cmd, status))
                    failed.append(stage)
        return failed


def worker_command(commands: list[str]) -> list[str] | None:
    """The arguments a worker runs for a stage's commands: one plain `foilforge ...` command; None for a shell."""
    return worker_argv(commands[0]) if len(commands) == 1 else None


def runs_in_worker(stage) -> bool:
    """Whether the stage's command goes to a worker, not to a shell."""
    return worker_command(dvc_api.command_list(stage)) is not None


def default_jobs() -> int:
    """Stages at once by default: one per core, at most 4 (each worker holds its own models: 1-3 GB)."""
    return max(1, min(os.cpu_count() or 1, 4))


#: seconds between dvc.lock's rewrites during a build. A rewrite parses and dumps the whole file (about 4 CPU-s on the
#: sample's, beside two busy workers); a build killed between two of them loses no finished stage: the next run
#: restores those from DVC's run cache instead of running them
LOCK_EVERY_S = 180.0


def reproduce(targets: list[str] | None = None, force: bool = False, lock_every: float = LOCK_EVERY_S,
              jobs: int | None = None, root: str | None = None) -> list[str]:
    """DVC's reproduce of `targets` (None: the whole pipeline, dvc.yaml) with the `foilforge` commands in
    long-lived workers, up to `jobs` at once, and dvc.lock written in batches. Returns the addresses of the
    stages that ran; raises DVC's ReproductionError when a stage fails (after recording those that finished)."""
    import signal
    import threading

    repo = dvc_api.open_repo(root)
    workers, lock = StageWorkers(jobs or default_jobs()), LockWriter(lock_every)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        with repo.lock, dvc_api.params_read_once(), dvc_api.lock_parsed_once():
            workers.start()
            try:
                graph, planned = dvc_api.plan(repo, targets)
                build = Build(graph, planned, force, workers, lock)
                build.run()
            except KeyboardInterrupt:
                # interrupted (Ctrl-C, SIGTERM): the commands under way end unrecorded; the lock entries of the
                # stages that finished are written below, so the next run starts after them
                workers.close(stop=True)
                raise
            finally:
                workers.close()
                lock.close()
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        repo.close()
    return [stage.addressing for stage in build.ran]


