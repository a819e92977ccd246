"""pipeline/runner/dvc_api.py: the DVC internals `foilforge repro` calls exist in the installed DVC, with the arguments
it passes, and that DVC lies in the range pyproject.toml pins."""

import inspect
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from foilforge.pipeline.runner import dvc_api

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_pins_the_range_the_adapter_names_and_the_installed_dvc_is_in_it():
    from importlib.metadata import version

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    dvc = [Requirement(text) for text in dependencies if Requirement(text).name == "dvc"]
    assert [str(requirement.specifier) for requirement in dvc] == [str(Requirement("dvc" + dvc_api.SUPPORTED).specifier)]
    assert Version(version("dvc")) in dvc[0].specifier


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_internal_calls_exist_with_the_arguments_used():
    from dvc.dvcfile import PROJECT_FILE, ProjectFile
    from dvc.repo import reproduce
    from dvc.stage import Stage
    from dvc.stage import run as stage_run
    from dvc.stage.cache import RunCacheNotFoundError, StageCache

    assert PROJECT_FILE == "dvc.yaml"
    assert parameters(reproduce.collect_stages)[:2] == ["repo", "targets"]
    assert parameters(reproduce.get_active_graph) == ["graph"]
    assert parameters(reproduce.plan_repro)[:2] == ["graph", "stages"]
    assert parameters(stage_run._enforce_cmd_list) == ["cmd"]
    assert parameters(stage_run._make_cmd)[:2] == ["executable", "cmd"]
    assert parameters(stage_run.prepare_kwargs)[:1] == ["stage"]
    assert callable(stage_run.get_executable)
    assert "update_pipeline" in parameters(ProjectFile.dump_stages)
    assert callable(Stage._check_missing_outputs) and {"allow_missing", "run_cache"} <= set(parameters(Stage.save))
    assert "allow_missing" in parameters(Stage.commit) and "upstream" in parameters(Stage.changed)
    assert callable(StageCache.restore) and issubclass(RunCacheNotFoundError, Exception)


def test_commands_and_shell_argv_read_a_stage_as_dvc_runs_it(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    subprocess.run([str(Path(sys.executable).parent / "dvc"), "init", "--no-scm", "-q"], check=True)
    (tmp_path / "dvc.yaml").write_text("stages:\n  one:\n    cmd: foilforge params-doc --output a.md\n"
                                       "    outs: [a.md]\n  two:\n    cmd: [echo x > b.txt, echo y]\n"
                                       "    deps: [a.md]\n    outs: [b.txt]\n")
    repo = dvc_api.open_repo(str(tmp_path))
    try:
        graph, planned = dvc_api.plan(repo, None)
        assert [stage.addressing for stage in planned] == ["one", "two"]
        one, two = planned
        assert dvc_api.upstream(graph, two) == [one] and dvc_api.upstream(graph, one) == []
        commands, cwd, env = dvc_api.commands(two)
        assert commands == ["echo x > b.txt", "echo y"] and Path(cwd) == tmp_path and "PATH" in env
        assert dvc_api.shell_argv("echo x")[-1] == "echo x"
    finally:
        repo.close()


def test_params_read_once_parses_each_state_of_the_file_once_and_hands_out_copies(tmp_path, monkeypatch):
    """Inside `params_read_once`, DVC's reads of a params file (several keys, flattened or not) parse it once; what a
    read returns is a copy (changing it changes no later read); an edited file is read again; outside, DVC's own
    reader is back."""
    import os

    from dvc.dependency import param
    from dvc.fs import LocalFileSystem
    from dvc.utils.serialize import _yaml

    parses = []
    parse_yaml = _yaml.parse_yaml

    def counted(*args, **kwargs):
        parses.append(args[1])
        return parse_yaml(*args, **kwargs)

    monkeypatch.setattr(_yaml, "parse_yaml", counted)
    path = tmp_path / "params.yaml"
    path.write_text("gate:\n  seed: 101\n  grid: {C: [0.1, 1.0]}\nseed: 7\n")
    fs, original = LocalFileSystem(), param.read_param_file
    with dvc_api.params_read_once():
        first = param.read_param_file(fs, str(path), ["gate.seed", "seed"], flatten=True)
        assert first == {"gate.seed": 101, "seed": 7}
        nested = param.read_param_file(fs, str(path), ["gate"])
        assert nested == {"gate": {"seed": 101, "grid": {"C": [0.1, 1.0]}}}
        nested["gate"]["grid"]["C"].append(10.0)
        assert param.read_param_file(fs, str(path), ["gate"]) == {"gate": {"seed": 101, "grid": {"C": [0.1, 1.0]}}}
        assert param.read_param_file(fs, str(path), ["seed"], flatten=True) == {"seed": 7}
        assert len(parses) == 1
        path.write_text("gate:\n  seed: 202\n  grid: {C: [0.1]}\nseed: 7\n")
        os.utime(path, ns=(1, 1))  # another state even where the clock would give the same mtime
        assert param.read_param_file(fs, str(path), ["gate.seed"], flatten=True) == {"gate.seed": 202}
        assert len(parses) == 2
    assert param.read_param_file is original
    param.read_param_file(fs, str(path), ["seed"], flatten=True)
    assert len(parses) == 3


def test_lock_parsed_once_writes_dvcs_bytes_and_parses_only_a_text_it_did_not_write(tmp_path, monkeypatch):
    """Inside `lock_parsed_once`, rewrites of dvc.lock give the bytes DVC's own rewrites give (a new file, entries
    added, an entry changed), the file written last is not parsed again, and a file changed by someone else is;
    outside, DVC's own `modify_yaml` is back."""
    import subprocess
    import sys

    import dvc.dvcfile as dvcfile
    from dvc.utils.serialize import _yaml

    monkeypatch.chdir(tmp_path)
    dvc = str(Path(sys.executable).parent / "dvc")
    subprocess.run([dvc, "init", "--no-scm", "-q"], check=True)
    (tmp_path / "params.yaml").write_text("rate: 0.001\nname: 'yes'\nsizes: [1, 2.5e-06]\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  one:\n    cmd: echo 1 > a.txt\n    params: [rate, name, sizes]\n    outs: [a.txt]\n"
        "  two:\n    cmd: echo 2 > b.txt\n    deps: [a.txt]\n    outs: [b.txt]\n"
        "  three:\n    cmd: echo 3 > c.txt\n    deps: [b.txt]\n    outs: [c.txt]\n")
    subprocess.run([dvc, "repro", "-q"], check=True)
    lock = tmp_path / "dvc.lock"

    def rewrites(batches, edit_between=None) -> bytes:
        lock.unlink()
        repo = dvc_api.open_repo(str(tmp_path))
        try:
            _, planned = dvc_api.plan(repo, None)
            by_name = {stage.name: stage for stage in planned}
            for n, names in enumerate(batches):
                if edit_between is not None and n == 1:
                    edit_between(by_name)
                dvc_api.write_lock([by_name[name] for name in names])
        finally:
            repo.close()
        return lock.read_bytes()

    def another_writer(by_name):  # the file changed between two rewrites: a comment added by hand (DVC keeps it)
        text = lock.read_text()
        assert text.startswith("schema: '2.0'\n")
        lock.write_text(text.replace("schema: '2.0'\n", "schema: '2.0'\n# checked by hand\n", 1))

    batches = [["one"], ["two", "three"], ["one"]]
    expected = rewrites(batches)
    expected_edited = rewrites(batches, another_writer)
    assert b"# checked by hand" in expected_edited and expected_edited != expected
    parsed = []
    real_parse = _yaml.parse_yaml_for_update
    monkeypatch.setattr(_yaml, "parse_yaml_for_update", lambda text, path: parsed.append(path) or real_parse(text, path))
    with dvc_api.lock_parsed_once():
        assert rewrites(batches) == expected
        assert parsed == []  # a new file, then only texts it wrote itself
        assert rewrites(batches, another_writer) == expected_edited
        assert len(parsed) == 1  # the file someone else changed
    assert dvcfile.modify_yaml is not None and dvcfile.modify_yaml.__module__ == "dvc.utils.serialize._yaml"
