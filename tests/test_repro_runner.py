"""`foilforge repro`: DVC's reproduce with the foilforge stage commands in one long-lived worker process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from foilforge import stage_state
from foilforge.pipeline.runner.repro import worker_argv

BIN = Path(sys.executable).parent


def test_only_a_plain_foilforge_command_goes_to_the_worker():
    assert worker_argv("foilforge foil plurals --input data/a.jsonl") == ["foil", "plurals", "--input", "data/a.jsonl"]
    assert worker_argv('foilforge export --name "two words" --k=v') == ["export", "--name", "two words", "--k=v"]
    for shell_command in ("cp a b", "foilforge a && test -s b", "foilforge a > log", "foilforge a $HOME",
                          "foilforge a data/*.jsonl", "foilforge a; rm b", "python -m foilforge a"):
        assert worker_argv(shell_command) is None, shell_command


def test_reset_empties_what_a_stage_keeps_for_its_run():
    from foilforge.filters.attackers import hidden_probe

    hidden_probe._CACHE[("model", -1, "mean", 64)] = {"a text": [0.0]}
    kept = stage_state.per_stage({"x": 1})
    stage_state.reset()
    assert hidden_probe._CACHE == {} and kept == {}


class FakeLockFile:
    """A dvc.lock stand-in: records each rewrite's stage names; a rewrite waits for `release`, or fails once."""

    path = "dvc.lock"

    def __init__(self, fail_first: bool = False):
        import threading

        self.rewrites, self.fail_first, self.release = [], fail_first, threading.Event()
        self.started = threading.Event()

    def dump_stages(self, stages, update_pipeline=False):
        self.started.set()
        self.release.wait(10)
        if self.fail_first:
            self.fail_first = False
            raise OSError("disk full")
        self.rewrites.append([stage.name for stage in stages])


def fake_stage(name, lockfile):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, dvcfile=lockfile)


def test_periodic_lock_rewrite_does_not_hold_up_the_build():
    from foilforge.pipeline.runner.repro import LockWriter

    lockfile = FakeLockFile()
    writer = LockWriter(every=0.0)
    writer.add(fake_stage("a", lockfile))  # due: handed to the writer thread, which waits for `release`
    assert lockfile.started.wait(5)
    writer.add(fake_stage("b", lockfile))  # returns at once: a rewrite is under way, b waits for the next
    assert lockfile.rewrites == []
    lockfile.release.set()
    writer.close()
    assert lockfile.rewrites == [["a"], ["b"]]


def test_a_failed_lock_rewrite_is_written_again_at_the_end_and_raised():
    import pytest

    from foilforge.pipeline.runner.repro import LockWriter

    lockfile = FakeLockFile(fail_first=True)
    lockfile.release.set()
    writer = LockWriter(every=0.0)
    writer.add(fake_stage("a", lockfile))
    writer._writing[0].exception(5)  # the rewrite of a failed
    writer.every = 3600.0
    writer.add(fake_stage("b", lockfile))
    with pytest.raises(OSError, match="disk full"):
        writer.close()
    assert lockfile.rewrites == [["a", "b"]]


def project(root: Path, stages: dict) -> None:
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(BIN / "dvc"), "init", "--no-scm", "-q"], cwd=root, check=True)
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))


def repro(root: Path, timings: Path, *options: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}", FOILFORGE_STAGE_TIMINGS=str(timings))
    return subprocess.run([str(BIN / "foilforge"), "repro", *options], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def stage_pids(timings: Path) -> dict[str, list[int]]:
    """{foilforge subcommand: the pids of the processes that ran it} from the timing files."""
    found: dict[str, list[int]] = {}
    for path in sorted(timings.glob("*.json")):
        entry = json.loads(path.read_text())
        found.setdefault(entry["argv"][0], []).append(entry["pid"])
    return found


def lock_stages(root: Path) -> set[str]:
    import yaml

    lock = root / "dvc.lock"
    return set((yaml.safe_load(lock.read_text()) or {}).get("stages") or {}) if lock.is_file() else set()


def status(root: Path) -> dict:
    out = subprocess.run([str(BIN / "dvc"), "status", "--json"], cwd=root, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_foilforge_stages_share_one_worker_and_dvc_reads_the_build_as_its_own(tmp_path):
    root, timings = tmp_path / "project", tmp_path / "timings"
    project(root, {
        "doc_a": {"cmd": "foilforge params-doc --output a.md", "outs": ["a.md"]},
        "doc_b": {"cmd": "foilforge params-doc --output b.md", "deps": ["a.md"], "outs": ["b.md"]},
        "copy": {"cmd": "cp b.md c.md", "deps": ["b.md"], "outs": ["c.md"]},
    })
    run = repro(root, timings, "--jobs", "1")
    assert run.returncode == 0, run.stderr
    assert (root / "a.md").read_text() == (root / "b.md").read_text() == (root / "c.md").read_text()
    assert "## " in (root / "a.md").read_text()
    pids = stage_pids(timings)
    # both stage commands in one worker process, which is not the process running DVC's reproduce
    assert len(pids["params-doc"]) == 2 and len(set(pids["params-doc"])) == 1
    assert pids["repro"] != pids["params-doc"][:1]
    assert lock_stages(root) == {"doc_a", "doc_b", "copy"}
    assert status(root) == {}

    again = repro(root, timings)
    assert again.returncode == 0, again.stderr
    assert len(stage_pids(timings)["params-doc"]) == 2  # nothing changed: nothing ran
    assert "0 stage(s) ran" in again.stderr

    (root / "b.md").write_text("edited\n")  # an output changed by hand: DVC's run cache restores it, no rerun
    third = repro(root, timings)
    assert third.returncode == 0, third.stderr
    assert len(stage_pids(timings)["params-doc"]) == 2
    assert (root / "b.md").read_text() == (root / "c.md").read_text() == (root / "a.md").read_text()
    assert status(root) == {}


def test_a_failed_stage_keeps_what_finished_before_it(tmp_path):
    root, timings = tmp_path / "project", tmp_path / "timings"
    project(root, {
        "first": {"cmd": "foilforge params-doc --output first.md", "outs": ["first.md"]},
        "broken": {"cmd": "foilforge ingest no_such_source --output broken.jsonl", "deps": ["first.md"],
                   "outs": ["broken.jsonl"]},
    })
    run = repro(root, timings)
    assert run.returncode == 1
    assert "failed to reproduce 'broken'" in run.stderr and "exited with 2" in run.stderr
    assert lock_stages(root) == {"first"}
    assert not (root / "broken.jsonl").exists()

    import yaml

    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    stages["broken"]["cmd"] = "cp first.md broken.jsonl"
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    rerun = repro(root, timings)
    assert rerun.returncode == 0, rerun.stderr
    assert len(stage_pids(timings)["params-doc"]) == 1  # the stage that had finished did not run again
    assert lock_stages(root) == {"first", "broken"} and status(root) == {}


def build_stopped_in_a_slow_stage(tmp_path, stderr=subprocess.DEVNULL):
    """(project root, timings dir, its stages, the `foilforge repro` process) once the build has finished `first`
    and started `slow` (120 s); dvc.lock is not rewritten on the way (`--lock-every 3600`)."""
    import time

    root, timings = tmp_path / "project", tmp_path / "timings"
    # DVC's run cache keeps a stage with dependencies (every stage of dvc.yaml has its code at least)
    stages = {"first": {"cmd": "foilforge params-doc --output first.md", "deps": ["seed.txt"], "outs": ["first.md"]},
              "slow": {"cmd": "touch slow.started && sleep 120 && cp first.md slow.md", "deps": ["first.md"],
                       "outs": ["slow.md"]}}
    project(root, stages)
    (root / "seed.txt").write_text("a dependency\n")
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}", FOILFORGE_STAGE_TIMINGS=str(timings))
    build = subprocess.Popen([str(BIN / "foilforge"), "repro", "--lock-every", "3600"], cwd=root, env=env,
                             stdout=subprocess.DEVNULL, stderr=stderr, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (root / "slow.started").exists():
        assert build.poll() is None and time.monotonic() < deadline, "the slow stage never started"
        time.sleep(0.2)
    return root, timings, stages, build


def rerun_with_a_quick_slow_stage(root: Path, timings: Path, stages: dict) -> subprocess.CompletedProcess:
    import yaml

    stages["slow"]["cmd"] = "cp first.md slow.md"
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    rerun = repro(root, timings)
    assert rerun.returncode == 0, rerun.stderr
    assert len(stage_pids(timings)["params-doc"]) == 1  # what had finished was not run again
    assert lock_stages(root) == {"first", "slow"} and status(root) == {}
    return rerun


def test_a_killed_build_resumes_from_what_it_wrote(tmp_path):
    import signal

    root, timings, stages, build = build_stopped_in_a_slow_stage(tmp_path)
    os.killpg(build.pid, signal.SIGKILL)  # the build and its workers: all at once, nothing cleaned up
    build.wait(30)
    # dvc.lock was not rewritten before the kill: only the run cache knows that `first` finished
    assert lock_stages(root) == set() and not (root / "slow.md").exists()
    assert "restored from the run cache" in rerun_with_a_quick_slow_stage(root, timings, stages).stderr


def test_sigterm_ends_the_build_and_records_what_finished(tmp_path):
    """SIGTERM to the runner alone: the command under way ends, the finished stage is written to dvc.lock at once
    (no run cache needed), and the same command goes on from there."""
    import signal
    import time

    root, timings, stages, build = build_stopped_in_a_slow_stage(tmp_path, stderr=subprocess.PIPE)
    began = time.monotonic()
    build.send_signal(signal.SIGTERM)  # the runner only, as `kill PID` sends it
    _, err = build.communicate(timeout=60)
    assert time.monotonic() - began < 30  # not after the 120 s the slow command would take
    assert build.returncode == 130 and "interrupted" in err
    assert lock_stages(root) == {"first"} and not (root / "slow.md").exists()
    rerun = rerun_with_a_quick_slow_stage(root, timings, stages)
    assert "Stage 'first' didn't change" in rerun.stderr and "restored from the run cache" not in rerun.stderr


def test_each_command_runs_with_its_own_environment_and_directory(tmp_path):
    """The worker takes each command's environment and directory as DVC gives them, not the previous command's;
    a failed command is that stage's failure and the worker lives on."""
    from foilforge.pipeline.runner.repro import StageWorkers

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    base = {k: v for k, v in os.environ.items() if k != "FOILFORGE_STAGE_TIMINGS"}
    worker = StageWorkers(1)
    try:
        assert worker.run(["params-doc", "--output", "doc.md"], str(first),
                          dict(base, FOILFORGE_STAGE_TIMINGS=str(tmp_path / "t1"))) == 0
        assert worker.run(["no-such-command"], str(second), base) == 2
        assert worker.run(["params-doc", "--output", "doc.md"], str(second),
                          dict(base, FOILFORGE_STAGE_TIMINGS=str(tmp_path / "t2"))) == 0
        assert worker.run(["params-doc", "--output", "doc2.md"], str(second), base) == 0
    finally:
        worker.close()
    assert (first / "doc.md").read_text() == (second / "doc.md").read_text() == (second / "doc2.md").read_text()
    one, two = stage_pids(tmp_path / "t1"), stage_pids(tmp_path / "t2")
    assert one == two and len(one["params-doc"]) == 1  # one process; each timed only where its env said


def waits_for(mine: str, other: str) -> str:
    """A shell command that marks its start and succeeds only if the other stage starts within 10 s."""
    return (f"touch {mine}.started; for i in $(seq 100); do [ -e {other}.started ] && break; sleep 0.1; done; "
            f"test -e {other}.started && echo {mine} > {mine}.out")


def test_independent_stages_run_at_once_with_jobs_and_one_after_another_without(tmp_path):
    stages = {"left": {"cmd": waits_for("left", "right"), "outs": ["left.out"]},
              "right": {"cmd": waits_for("right", "left"), "outs": ["right.out"]},
              "after": {"cmd": "foilforge params-doc --output after.md", "deps": ["left.out", "right.out"],
                        "outs": ["after.md"]}}
    together, alone = tmp_path / "together", tmp_path / "alone"
    project(together, stages)
    run = repro(together, tmp_path / "t1", "--jobs", "2")
    assert run.returncode == 0, run.stderr  # each saw the other start: they ran at the same time
    assert lock_stages(together) == {"left", "right", "after"} and status(together) == {}

    project(alone, stages)
    serial = repro(alone, tmp_path / "t2", "--jobs", "1")
    assert serial.returncode == 1 and "failed to reproduce" in serial.stderr
    assert not (alone / "after.md").exists()  # a stage after a failed one does not start


def test_workers_beside_each_other_let_openmp_threads_sleep_and_share_the_cores(tmp_path):
    """With more than one worker, OpenMP's waiting threads sleep (set before torch starts OpenMP) and torch takes
    its share of the cores, cores // jobs threads, and so do numpy's and scipy's BLAS; one worker alone, or a
    policy or thread count the user set, is left as it is."""
    script = ("import os, sys\nfrom foilforge.pipeline.runner.repro import _start_worker, _TORCH_THREADS\n"
              "_start_worker(int(sys.argv[1]))\nimport torch\nfrom threadpoolctl import threadpool_info\n"
              "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules, torch.get_num_threads(), "
              "_TORCH_THREADS == [torch.get_num_threads()], "
              "max(p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    cores = os.cpu_count()

    def policy(jobs: str, **extra) -> list[str]:
        return subprocess.run([sys.executable, "-c", script, jobs], env={**env, **extra}, capture_output=True,
                              text=True, check=True).stdout.split()

    alone = policy("1")
    assert alone[:2] == ["None", "True"] and alone[3] == "True"     # torch's own default count (physical cores)
    assert policy(str(cores)) == ["PASSIVE", "True", "1", "True", "1"]   # as many workers as cores: one thread each
    assert policy("2", OMP_WAIT_POLICY="ACTIVE")[:3] == ["ACTIVE", "True", str(min(int(alone[2]), max(1, cores // 2)))]
    assert policy("2")[4] == str(max(1, cores // 2))
    assert policy("1", OMP_NUM_THREADS="1")[2] == "1"


def test_one_stage_more_than_the_workers_waits_in_their_queue_and_never_a_shell_command(monkeypatch):
    """A worker that finishes a command finds the next one waiting (the runner records the finished stage
    meanwhile): one stage beyond `jobs` is handed to the workers ahead. A shell command is never started beyond
    `jobs`: it would run at once, beside the workers."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from foilforge.pipeline.runner import repro as runner

    class Stage(SimpleNamespace):
        __hash__ = object.__hash__

    stages = [Stage(name=n, addressing=n, cmd="cp a b" if n.startswith("shell") else f"foilforge {n}")
              for n in ("a", "b", "c", "shell", "d")]
    outstanding: list = []  # (stage name, future) handed out and not finished
    seen: list = []  # (stage started, names of the stages outstanding then)

    def start(self, stage):
        seen.append((stage.name, [name for name, f in outstanding if not f.done()]))
        future = Future()
        outstanding.append((stage.name, future))
        return future

    def oldest_finishes(futures, return_when):  # each time the runner waits, the oldest command it started ends
        oldest = next(f for _, f in outstanding if not f.done())
        oldest.set_result(0)
        return {oldest}, set(futures) - {oldest}

    monkeypatch.setattr(runner.Build, "start", start)
    monkeypatch.setattr(runner.Build, "finish", lambda self, stage: self.ran.append(stage))
    monkeypatch.setattr(runner.Build, "upstream", lambda self, stage: [])
    monkeypatch.setattr(runner, "wait", oldest_finishes)
    workers = SimpleNamespace(jobs=1, status=lambda future: future.result())
    build = runner.Build(graph=None, plan=stages, force=True, workers=workers, lock=None)
    assert build._run_plan() == []
    assert [name for name, _ in seen] == ["a", "b", "c", "shell", "d"]
    # the shell command waits for the workers to be idle, and nothing waits behind it
    assert dict(seen) == {"a": [], "b": ["a"], "c": ["b"], "shell": [], "d": []}
    assert [stage.name for stage in build.ran] == ["a", "b", "c", "shell", "d"]


def test_stopping_a_shell_command_ends_the_children_it_starts_while_it_is_being_stopped(tmp_path):
    """A shell that keeps starting long commands: what it started just before or while it was being stopped ends
    with it, none is left behind holding the build's terminal or files."""
    import threading
    import time

    import psutil

    from foilforge.pipeline.runner import repro as runner

    marker = "31.4159"  # a sleep's seconds no other process here uses
    started = tmp_path / "started"
    command = (f"touch {started}; i=0; while [ $i -lt 400 ]; do sleep {marker} & i=$((i+1)); done; wait")
    statuses = []
    shell = threading.Thread(target=lambda: statuses.append(runner.shell_status(command, str(tmp_path),
                                                                                  dict(os.environ))))
    shell.start()
    deadline = time.monotonic() + 30
    while not started.exists() or not runner._SHELLS:
        assert time.monotonic() < deadline, "the shell never started"
        time.sleep(0.01)
    time.sleep(0.05)  # the shell is busy starting sleeps
    runner.stop_shells()
    shell.join(30)
    assert not shell.is_alive() and statuses and statuses[0] != 0

    def left_behind():
        found = []
        for process in psutil.process_iter(["cmdline", "status"]):
            # a zombie has ended: only its exit status waits for a parent to read it
            if process.info["cmdline"] and marker in process.info["cmdline"] and \
                    process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        return found

    # a process sent SIGTERM and let go runs to its end when the scheduler gets to it: on a loaded machine (the
    # suite's other worker, Ray) not always within half a second. One left behind sleeps 31 s: 10 s tell them apart
    deadline = time.monotonic() + 10
    while (left := left_behind()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in left:
        process.kill()
    assert left == []
