"""foilforge/timings.py: a stage process's imports, model loads and work, written only when asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import time
    from foilforge import timings

    timings.start()
    import slow_a                      # 0.3 s at import
    with timings.load_section("model x"):
        time.sleep(0.2)
        import slow_b                  # 0.3 s at import, inside the load: an import, not the load
    time.sleep(0.1)
    timings.finish(["score", "relations", "--input", "x"], 0)
""")


def run_script(tmp_path, env_extra: dict) -> subprocess.CompletedProcess:
    for name in ("slow_a", "slow_b"):
        (tmp_path / f"{name}.py").write_text("import time\ntime.sleep(0.3)\n")
    env = {k: v for k, v in os.environ.items() if k != "FOILFORGE_STAGE_TIMINGS"}
    env.update(PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}", **env_extra)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                          check=True)


def test_report_splits_imports_loads_and_work(tmp_path):
    out = tmp_path / "timings"
    run_script(tmp_path, {"FOILFORGE_STAGE_TIMINGS": str(out)})
    (path,) = out.glob("*.json")
    report = json.loads(path.read_text())
    assert report["argv"] == ["score", "relations", "--input", "x"] and report["rc"] == 0
    assert 0.6 <= report["import_s"] < 0.9
    assert set(report["imports"]) >= {"slow_a", "slow_b"} and report["imports"]["slow_a"] >= 0.3
    assert 0.2 <= report["model_load_s"] < 0.45          # the sleep, not the 0.3 s import inside it
    assert [what for what, _ in report["loads"]] == ["model x"]
    assert report["work_s"] >= 0.1
    parts = report["startup_s"] + report["import_s"] + report["model_load_s"] + report["work_s"]
    assert abs(parts - report["wall_s"]) < 0.01
    assert report["cpu_user_s"] + report["cpu_sys_s"] > 0


def test_nothing_is_written_or_patched_without_the_variable(tmp_path):
    import importlib._bootstrap as bootstrap

    from foilforge import timings

    original = bootstrap._find_and_load
    timings.start()  # the variable is not set in the test process
    assert bootstrap._find_and_load is original
    with timings.load_section("nothing"):
        pass
    timings.finish(["x"], 0)
    result = run_script(tmp_path, {})
    assert result.returncode == 0 and not (tmp_path / "timings").exists()


SECOND_STAGE = textwrap.dedent("""
    import time
    from foilforge import timings

    timings.start()
    import slow_a                      # 0.3 s at import, in the first stage only
    began = time.process_time()
    while time.process_time() - began < 0.3:
        pass                           # 0.3 CPU-s of work in the first stage
    timings.finish(["foil", "a"], 0)
    timings.start()                    # a long-lived worker's next stage
    import slow_a                      # already imported: no time
    began = time.process_time()
    while time.process_time() - began < 0.2:
        pass                           # 0.2 CPU-s of work in this stage
    timings.finish(["foil", "b"], 0)
""")


def test_a_worker_times_each_stage_from_its_own_start(tmp_path):
    """In a process that runs stage after stage (foilforge repro's worker), only the first stage has start-up
    time, and each stage's CPU seconds are its own, not the process's total."""
    (tmp_path / "slow_a.py").write_text("import time\ntime.sleep(0.3)\n")
    out = tmp_path / "timings"
    env = {k: v for k, v in os.environ.items() if k != "FOILFORGE_STAGE_TIMINGS"}
    env.update(PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}", FOILFORGE_STAGE_TIMINGS=str(out))
    subprocess.run([sys.executable, "-c", SECOND_STAGE], env=env, cwd=tmp_path, check=True)
    reports = {tuple(r["argv"]): r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    first, second = reports[("foil", "a")], reports[("foil", "b")]
    assert first["startup_s"] > 0 and first["import_s"] >= 0.3
    assert second["startup_s"] == 0 and second["import_s"] < 0.05 and second["pid"] == first["pid"]
    assert first["cpu_user_s"] + first["cpu_sys_s"] >= 0.3
    # 0.2 CPU-s by the clock the loop reads; os.times() counts user and system time in clock ticks (0.01 s), so
    # their sum may come out a little lower on a busy machine. The process's total would be >= 0.5
    assert 0.15 <= second["cpu_user_s"] + second["cpu_sys_s"] < 0.45
    assert second["wall_s"] < 1.0  # from its own start, not the process's
