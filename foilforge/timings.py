"""Where a stage process's time goes: imports, model loads and the rest, when asked for.

Switched on by the environment variable FOILFORGE_STAGE_TIMINGS (a directory; benchmarks/bench_sample_build.py
sets it around `dvc repro`). Off, every function here is a no-op and nothing is patched. On, the `foilforge`
console script (pipeline/stages/cli.py) calls `start()` first and `finish()` last, and one JSON file per stage
process lands in that directory:

    {"argv": [...], "rc": 0, "wall_s": ..., "startup_s": ..., "import_s": ..., "model_load_s": ..., "work_s": ...,
     "cpu_user_s": ..., "cpu_sys_s": ..., "max_rss_mb": ..., "imports": {top-level module: seconds},
     "loads": [[what, seconds], ...]}

* `startup_s`: from the process's start (the kernel's clock, /proc/self/stat) to `start()`: the interpreter,
  site-packages and the console script's own first imports. In a worker that runs stage after stage
  (`foilforge repro`), the first stage's file has it and the later ones 0.
* `import_s`: time inside imports of modules not loaded yet, wherever they happen (module level, or the lazy
  imports inside a stage's `main`). It wraps importlib's `_find_and_load`, the function every first import of a
  module goes through (what `python -X importtime` measures), and counts only the outermost import.
* `model_load_s`: time inside `load_section(...)` (tokenizers, transformers models, spaCy pipelines, sentence
  encoders, the Link Grammar dictionary), less the imports that happen inside it (counted under import_s).
* `work_s`: wall_s - startup_s - import_s - model_load_s: reading, scoring, writing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

ENV = "FOILFORGE_STAGE_TIMINGS"

_state: dict | None = None
_process_timed = False


def _process_start_age() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat's start time against the boot clock)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of proc(5); fields[0] is field 3
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def start() -> None:
    """Begin timing this process (a no-op unless FOILFORGE_STAGE_TIMINGS is set, or when already started)."""
    global _state
    if _state is not None or not os.environ.get(ENV):
        return
    import importlib._bootstrap as bootstrap

    global _process_timed
    now = time.perf_counter()
    # a long-lived worker (`foilforge repro`) times stage after stage: only its first stage paid the start-up
    age = None if _process_timed else _process_start_age()
    # CPU seconds of this stage only: a later stage of the worker starts from what the process has spent so far
    cpu_before = (0.0, 0.0, 0.0, 0.0) if not _process_timed else tuple(os.times())[:4]
    _process_timed = True
    _state = {"started": now - (age or 0.0), "startup_s": age, "cpu_before": cpu_before, "import_s": 0.0,
              "inside": False, "imports": {}, "load_s": 0.0, "loads": [], "bootstrap": bootstrap, "original": bootstrap._find_and_load}
    original = bootstrap._find_and_load

    def timed_find_and_load(name, import_):
        state = _state
        if state is None or state["inside"]:  # not timing, or inside an outer import that counts this one
            return original(name, import_)
        state["inside"] = True
        began = time.perf_counter()
        try:
            return original(name, import_)
        finally:
            spent = time.perf_counter() - began
            state["inside"] = False
            state["import_s"] += spent
            top = name.split(".", 1)[0]
            state["imports"][top] = state["imports"].get(top, 0.0) + spent

    bootstrap._find_and_load = timed_find_and_load


@contextlib.contextmanager
def load_section(what: str):
    """Time a model load (`what` names it in the report); imports inside it count as imports, not as the load."""
    state = _state
    if state is None:
        yield
        return
    began, imports_before = time.perf_counter(), state["import_s"]
    try:
        yield
    finally:
        spent = time.perf_counter() - began - (state["import_s"] - imports_before)
        state["load_s"] += spent
        state["loads"].append([what, round(spent, 3)])


def finish(argv: list[str], rc: int) -> None:
    """Write this process's timings (a no-op unless `start()` ran); the file name is unique per process."""
    global _state
    state = _state
    if state is None:
        return
    state["bootstrap"]._find_and_load = state["original"]
    _state = None
    wall = time.perf_counter() - state["started"]
    times, before = os.times(), state["cpu_before"]
    try:
        import resource

        max_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except ImportError:
        max_rss_mb = None
    startup = state["startup_s"] or 0.0
    report = {
        "argv": list(argv), "rc": rc, "pid": os.getpid(), "wall_s": round(wall, 3),
        "startup_s": round(startup, 3), "import_s": round(state["import_s"], 3),
        "model_load_s": round(state["load_s"], 3),
        "work_s": round(wall - startup - state["import_s"] - state["load_s"], 3),
        # the process and the children it waited for (a Ray or tokenizer helper process, if any)
        "cpu_user_s": round(times.user + times.children_user - before[0] - before[2], 3),
        "cpu_sys_s": round(times.system + times.children_system - before[1] - before[3], 3),
        "max_rss_mb": None if max_rss_mb is None else round(max_rss_mb, 1),
        "imports": {name: round(s, 3) for name, s in sorted(state["imports"].items(), key=lambda kv: -kv[1]) if s >= 0.01},
        "loads": state["loads"],
    }
    directory = os.environ.get(ENV)
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}.json"
    with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
