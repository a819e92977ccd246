"""benchmarks/suite.py: every benchmark is registered with a quick and a default size its command line accepts, the
runner lists them, runs one into a folder of its own in the one result shape, and skips or fails a benchmark as it
should; no library code imports benchmarks/."""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import os
import re
import sys
from pathlib import Path

import pytest

from benchmarks import common, suite

ROOT = Path(__file__).resolve().parents[1]
ENVELOPE = {"format", "benchmark", "commit", "date", "machine", "argv", "params", "metrics"}


def test_every_benchmark_module_is_registered_and_every_registered_one_imports():
    modules = {path.stem.removeprefix("bench_") for path in (ROOT / "benchmarks").glob("bench_*.py")}
    assert set(suite.BENCHMARKS) == modules  # a script outside the suite is a study: docs/studies.md
    for name, benchmark in suite.BENCHMARKS.items():
        module = importlib.import_module(benchmark.module)
        assert list(inspect.signature(module.main).parameters) == ["argv"], name
        assert module.NAME == name  # the `benchmark` its result files carry
        assert isinstance(benchmark.quick, tuple) and isinstance(benchmark.default, tuple), name
        assert benchmark.measures in ("speed", "memory", "quality"), name


class Parsed(Exception):
    """Raised in place of running a benchmark once its parser accepted the argv."""


@pytest.mark.parametrize("name", sorted(suite.BENCHMARKS))
def test_quick_and_default_sizes_are_accepted_by_the_benchmarks_own_parser(name, monkeypatch):
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        raise Parsed(parse(parser, args, namespace))   # a flag it lacks or a bad value: SystemExit(2) first

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    module = importlib.import_module(suite.BENCHMARKS[name].module)
    for argv in (suite.BENCHMARKS[name].quick, suite.BENCHMARKS[name].default):
        with pytest.raises(Parsed):
            module.main(list(argv))


def test_list_names_every_benchmark_with_its_quick_size(capsys):
    assert suite.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name, benchmark in suite.BENCHMARKS.items():
        assert re.search(rf"^{name}  \({benchmark.measures}\)", out, flags=re.MULTILINE), name
        assert f"python -m benchmarks.bench_{name}" in out
    assert out.count("    quick: ") == len(suite.BENCHMARKS)


def test_an_unknown_name_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        suite.main(["--quick", "no_such_benchmark"])
    assert exit_.value.code == 2
    assert "no benchmark no_such_benchmark" in capsys.readouterr().err


def test_ingest_memory_quick_writes_the_one_result_shape(tmp_path, capsys):
    committed = (ROOT / "benchmarks" / "results" / "ingest_memory.json").read_bytes()
    assert suite.main(["--quick", "--results", str(tmp_path), "ingest_memory"]) == 0
    assert "== ingest_memory: ok" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["ingest_memory.json"]   # no temp file left behind
    result = json.loads((tmp_path / "ingest_memory.json").read_text(encoding="utf-8"))
    assert set(result) == ENVELOPE and result["format"] == common.FORMAT
    assert result["benchmark"] == "ingest_memory"
    assert result["argv"] == list(suite.BENCHMARKS["ingest_memory"].quick)
    assert result["params"]["gib"] == 0.002 and result["params"]["images_with_relationships"] == 20
    metrics = result["metrics"]
    assert metrics["ok"] is True and metrics["samples"] == 20 and metrics["peak_rss_mib"] > 0, metrics
    assert result["machine"]["cpus"] >= 1 and result["machine"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(result["machine"]["speed"]) == {"python_loop_ms", "f64_gemm_gflops"}  # no torch import for it
    assert all(value > 0 for value in result["machine"]["speed"].values())
    assert datetime.datetime.fromisoformat(result["date"]).tzinfo is not None
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", result["commit"])
    assert common.read_metrics(tmp_path / "ingest_memory.json") == metrics
    # a quick run never touches the measured figures
    assert (ROOT / "benchmarks" / "results" / "ingest_memory.json").read_bytes() == committed


CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
           "stepping\t: 1\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n\n"
           "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\n\n")


def test_a_result_names_the_cpu_by_family_model_and_stepping_not_by_its_name_alone(tmp_path):
    from foilforge.host import cpu_info

    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO, encoding="utf-8")
    fields = cpu_info(info)
    assert fields["model name"] == "AMD EPYC" and fields["vendor_id"] == "AuthenticAMD"  # the first processor only
    assert common.cpu_identity(fields) == {"vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1,
                                           "bf16": True}
    no_bf16 = {**fields, "flags": "fpu avx2 avx512f"}
    assert common.cpu_identity(no_bf16)["bf16"] is False
    assert cpu_info(tmp_path / "absent") == {} and common.cpu_identity({}) is None


def test_the_speed_workload_is_fixed_and_its_timing_the_least_of_its_runs(monkeypatch):
    # 7919 is prime to 97: every 97 steps meet each key once, so 11 x 97 steps bring each key to 11 once
    assert common.python_loop(11 * 97) == 97 and common.python_loop(11 * 97 - 1) == 96
    calls = []
    ticks = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # runs of 3, 1 and 2 seconds
    monkeypatch.setattr(common.time, "perf_counter", lambda: next(ticks))
    assert common.best_seconds(lambda: calls.append(1), repeats=3) == 1.0
    assert len(calls) == 3


def fake_benchmark(tmp_path, monkeypatch, body: str, **fields) -> suite.Benchmark:
    (tmp_path / "bench_fake.py").write_text(f"NAME = 'fake'\n\n\ndef main(argv):\n{body}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bench_fake", raising=False)
    importlib.invalidate_caches()
    return suite.Benchmark("fake", "speed", "a test's", quick=("--n", "1"), module="bench_fake", **fields)


def test_a_benchmark_without_its_inputs_is_skipped_and_one_that_writes_nothing_fails(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    skipped = fake_benchmark(tmp_path, monkeypatch, "    raise AssertionError('must not run')",
                             needs=(tmp_path / "absent.json",))
    status, files = suite.run(skipped, quick=True, results=results)
    assert status.startswith("skipped: not found:") and "absent.json" in status and files == []
    silent = fake_benchmark(tmp_path, monkeypatch, "    return {}")
    assert suite.run(silent, quick=True, results=results) == ("failed: it wrote no result file", [])


def test_the_runner_hands_the_quick_argv_and_the_results_folder_to_the_benchmark(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    writes = fake_benchmark(tmp_path, monkeypatch, "    from benchmarks.common import write_result\n"
                                                   "    write_result('fake', {'argv_seen': argv}, argv=argv)\n"
                                                   "    return 0")
    monkeypatch.delenv(common.RESULTS_ENV, raising=False)
    status, files = suite.run(writes, quick=True, results=results)
    assert (status, files) == ("ok", [results / "fake.json"])
    assert common.read_metrics(results / "fake.json") == {"argv_seen": ["--n", "1"]}
    assert common.RESULTS_ENV not in os.environ   # put back as it was


def test_read_metrics_reads_files_written_before_the_one_shape(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"existence": {"kept": 3}}), encoding="utf-8")
    assert common.read_metrics(old) == {"existence": {"kept": 3}}
    assert common.read_metrics(tmp_path / "none.json") == {}
    path = common.write_result("merged", {**common.read_metrics(old), "plurals": {"kept": 4}}, path=tmp_path / "m.json")
    assert common.read_metrics(path) == {"existence": {"kept": 3}, "plurals": {"kept": 4}}


def test_no_library_code_imports_benchmarks():
    importing = re.compile(r"^\s*(from benchmarks[ .]|import benchmarks\b)", flags=re.MULTILINE)
    found = [str(path.relative_to(ROOT)) for package in ("foilforge", "pipeline", "filters", "foilers")
             for path in (ROOT / package).rglob("*.py") if importing.search(path.read_text(encoding="utf-8"))]
    assert found == []


def test_performance_md_lists_every_benchmark_under_what_it_measures():
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    section = text.split("## How to run the benchmarks", 1)[1].split("\n## ", 1)[0]
    rows = {row.split("|")[1].strip(): row.split("|")[2] for row in section.splitlines() if row.startswith("| ")}
    listed = {name: kind for kind, names in rows.items() for name in re.findall(r"[a-z_0-9]+", names)
              if name in suite.BENCHMARKS}
    measures = {"speed": "speed", "memory": "memory", "quality on real data": "quality"}
    assert {name: measures[kind] for name, kind in listed.items()} == {
        name: b.measures for name, b in suite.BENCHMARKS.items()}


def test_cpu_dtype_agreement_on_a_hand_computed_case():
    from benchmarks.bench_cpu_dtype import agreement

    figures = agreement([-1.0, -2.0, -3.0, -2.5], [-1.5, -2.0, -2.5, -2.6])
    # differences 0.5, 0, 0.5, 0.1; orders of neighbours: (>, >, <) against (>, >, >)
    assert figures == {"mean_abs_diff": 0.275, "max_abs_diff": 0.5, "spearman": 0.8, "pair_order_kept": 0.6667,
                       "pairs": 3}


def test_blas_threads_rows_are_the_edit_tokens_rows_of_caption_pairs(tmp_path, monkeypatch):
    """The benchmark fits the rows the edit_tokens attacker builds: each pair's edit one way (label 1), the other
    way (label 0)."""
    from benchmarks import bench_blas_threads

    captions = [f"a dog number {k} on a mat" for k in range(5)] + ["a cat on a sofa", "two birds", "a red bus",
                                                                     "an old man", "a boy"]
    monkeypatch.setattr(bench_blas_threads, "read_captions", lambda path, limit: captions[:limit])
    x, y = bench_blas_threads.rows(2)
    assert x.shape[0] == 4 and list(y) == [1.0, 1.0, 0.0, 0.0]
    # "a dog number 0 on a mat" against "a red bus": out:dog ... in:red in:bus, and each replacement pair
    assert x[0].sum() == x[2].sum() > 0 and (x[0] != x[2]).nnz > 0
