"""Run the pipeline as `dvc repro` does, with every `foilforge` stage command in one long-lived worker process.

`dvc repro` starts a new process for every stage command (about a hundred on the sample data), and each of them
imports torch, transformers and spaCy and loads its models again; after every stage DVC also parses and rewrites
the whole dvc.lock (some 18,000 lines on the sample: 2-4 s a stage; benchmarks/bench_dvc_lock.py). This command is
DVC's own reproduce, in this process, with two changes:

* a stage command that is `foilforge ...` runs in a worker process that stays up from stage to stage: it imports
  once and keeps the spaCy pipelines and probe models it loaded. Before each command the worker takes the stage's
  working directory and environment (what DVC would give the command's process) and forgets what the previous
  stage kept for its own run (foilforge/stage_state.py), so each stage writes what it writes in a process of its
  own. Any other command runs as DVC runs it, in a shell.
* the dvc.lock entries of the stages that ran are written together: at most every `--lock-every` seconds, at the
  end, and when a stage fails (the stages that finished before it are recorded, so a rerun starts after them).

Everything else is DVC's: the plan, which stages changed, the run cache, the outputs' cache and the lock entries
themselves. `dvc status` afterwards reads the same as after `dvc repro`, and either command can continue the other.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("targets", nargs="*", help="stages to reproduce, with what they depend on (default: all)")
    parser.add_argument("-f", "--force", action="store_true",
                        help="run the targets even when nothing they depend on changed (as dvc repro --force)")
    parser.add_argument("--lock-every", type=float, default=60.0,
                        help="seconds between writes of dvc.lock (default 60; it is always written at the end)")


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


def _start_worker() -> None:
    """The worker's first act: torch's thread count as a new process has it, to give every stage the same."""
    try:
        import torch
    except ImportError:
        return
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


class StageWorker:
    """The long-lived worker process (spawned, so it shares nothing with DVC's process but the files)."""

    def __init__(self):
        self._pool = None

    def run(self, argv: list[str], cwd: str, env: dict) -> int:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                             initializer=_start_worker)
        try:
            return self._pool.submit(run_in_worker, argv, cwd, env).result()
        except BrokenProcessPool:  # killed (out of memory, a signal): the next stage gets a new worker
            self._pool = None
            return -9

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class LockWriter:
    """The lock entries of finished stages, written in one rewrite of their dvc.lock at most every `every` s."""

    def __init__(self, every: float):
        self.every, self.pending, self.written_at = every, [], time.monotonic()

    def add(self, stage) -> None:
        self.pending.append(stage)
        if time.monotonic() - self.written_at >= self.every:
            self.flush()

    def flush(self) -> None:
        by_file: dict = {}
        for stage in self.pending:
            by_file.setdefault(stage.dvcfile.path, (stage.dvcfile, []))[1].append(stage)
        for dvcfile, stages in by_file.values():
            dvcfile.dump_stages(stages, update_pipeline=False)
        self.pending, self.written_at = [], time.monotonic()


def reproduce(targets: list[str] | None = None, force: bool = False, lock_every: float = 60.0,
              root: str | None = None) -> list[str]:
    """DVC's reproduce of `targets` (None: the whole pipeline) with the `foilforge` commands in one worker and
    dvc.lock written in batches. Returns the addresses of the stages that ran; raises DVC's ReproductionError
    when a stage fails (after recording the ones that finished)."""
    from dvc.repo import Repo
    from dvc.stage import run as stage_run
    from dvc.stage.exceptions import StageCmdFailedError

    worker, lock = StageWorker(), LockWriter(lock_every)
    shell_run = stage_run._run

    def run(executable, cmd, **kwargs):
        argv = worker_argv(cmd)
        if argv is None:
            return shell_run(executable, cmd, **kwargs)
        status = worker.run(argv, kwargs["cwd"], kwargs["env"])
        if status != 0:
            raise StageCmdFailedError(cmd, status)
        return None

    def reproduce_stage(stage, **kwargs):
        # dvc's own _reproduce_stage, less its lock write after every stage
        if stage.frozen and not stage.is_import:
            log.warning("%s is frozen. Its dependencies are not going to be reproduced.", stage)
        ran = stage.reproduce(**kwargs)
        if ran and not kwargs.get("dry", False):
            lock.add(stage)
        return ran

    repo = Repo(root)
    stage_run._run = run  # the one place DVC starts a command's process
    try:
        ran = repo.reproduce(targets or None, force=force, repro_fn=reproduce_stage)
    finally:
        stage_run._run = shell_run
        worker.close()
        if lock.pending:
            with repo.lock:
                lock.flush()
        repo.close()
    return [stage.addressing for stage in ran]


def main(args) -> int:
    from dvc.exceptions import DvcException

    logging.getLogger("dvc").propagate = False  # DVC prints its own lines; the stage's log setup would repeat them

    try:
        ran = reproduce(args.targets, args.force, args.lock_every)
    except DvcException as err:
        cause = f": {err.__cause__}" if err.__cause__ else ""
        print(f"foilforge repro: error: {err}{cause}", file=sys.stderr)
        return 1
    log.info("%d stage(s) ran%s", len(ran), "" if ran else ": data and pipelines are up to date")
    return 0
