"""Every DVC call `foilforge repro` makes (pipeline/runner/repro.py), in one place.

`foilforge repro` does DVC's own work for each stage, in the order `Stage.run` does it, and some of those calls are
DVC's internals rather than its public API (`_enforce_cmd_list`, `_make_cmd`, `Stage._check_missing_outputs`, the
planning functions of `dvc.repo.reproduce`, `dump_stages(update_pipeline=False)`). They can change in any DVC
release, so pyproject.toml pins the range they are known to work in (`SUPPORTED`), and tests/test_dvc_api.py checks
that the installed DVC lies in it and has each call with the arguments used here.
"""

from __future__ import annotations

from contextlib import contextmanager

#: the DVC versions these calls are known to work with; pyproject.toml's requirement says the same
SUPPORTED = ">=3.50,<4"


def open_repo(root: str | None = None):
    from dvc.repo import Repo

    return Repo(root)


def plan(repo, targets: list[str] | None) -> tuple:
    """(graph, stages in DVC's order) of `targets` with what they depend on (None: dvc.yaml's whole pipeline)."""
    from dvc.dvcfile import PROJECT_FILE
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    stages = collect_stages(repo, targets or [PROJECT_FILE])
    graph = get_active_graph(repo.index.graph)
    return graph, plan_repro(graph, stages)


@contextmanager
def params_read_once():
    """Within it, DVC parses each state of a local params file once: `read_param_file` (DVC's reader of params.yaml
    for a stage's params: whether they changed, their hash for the run cache, the lock entry) keeps the parsed file
    under its state (size, mtime, inode) and what it found for the keys asked, and gives a copy the next time.

    DVC parses the whole file for every such read, about seven times a stage (1,092 parses of params.yaml in the
    sample build, most of the runner's own CPU time: docs/performance.md). An edited file has another state, so it
    is read again: the values are the file's, as DVC would read them."""
    import copy
    import threading

    from dvc.dependency import param
    from dvc.fs import LocalFileSystem

    original_read, original_load = param.read_param_file, param.load_path
    kept: dict = {}
    guard = threading.Lock()  # the lock writer's thread may read beside the main one

    def once(key, read):
        """A copy of what `read()` gave the first time `key` was asked."""
        with guard:
            value = kept.get(key)
        if value is None:
            value = read()
            with guard:
                kept[key] = value
        return copy.deepcopy(value)

    def load_path(path, fs, **load_kwargs):
        state = _file_state(path) if isinstance(fs, LocalFileSystem) else None
        if state is None:
            return original_load(path, fs, **load_kwargs)
        return once(("file", state, tuple(sorted(load_kwargs.items()))),
                    lambda: original_load(path, fs, **load_kwargs))

    def read_param_file(fs, path, key_paths=None, flatten=False, **load_kwargs):
        state = _file_state(path) if isinstance(fs, LocalFileSystem) else None
        if state is None:
            return original_read(fs, path, key_paths, flatten, **load_kwargs)
        return once(("keys", state, tuple(key_paths or ()), flatten, tuple(sorted(load_kwargs.items()))),
                    lambda: original_read(fs, path, key_paths, flatten, **load_kwargs))

    param.read_param_file, param.load_path = read_param_file, load_path
    try:
        yield
    finally:
        param.read_param_file, param.load_path = original_read, original_load


@contextmanager
def lock_parsed_once():
    """Within it, a dvc.lock this process wrote is not parsed again for its next rewrite: DVC's `modify_yaml` (how
    Lockfile.dump_stages reads, changes and dumps the file) gets the round-trip structure it dumped last time, when
    the file still holds exactly the text dumped from it; any other text is parsed as DVC parses it.

    Each rewrite parses the whole file with ruamel's round-trip parser, most of a rewrite's 3-4 CPU-s on the
    sample's dvc.lock, and the last rewrite holds up the end of the build (docs/performance.md). The text written
    is what DVC's own dumper makes of the structure (tests/test_dvc_api.py compares the bytes with DVC's)."""
    import io
    import os
    import threading

    import dvc.dvcfile as dvcfile
    from dvc.utils.serialize._yaml import _dump, parse_yaml_for_update

    original = dvcfile.modify_yaml
    kept: dict = {}  # real path -> (the text last dumped there, the structure it was dumped from)
    guard = threading.Lock()  # one rewrite at a time (the lock writer's thread and the main one's last)

    @contextmanager
    def modify_yaml(path, fs=None):
        opener = fs.open if fs is not None else open
        exists = fs.exists(os.fspath(path)) if fs is not None else os.path.exists(path)
        key = os.path.realpath(os.fspath(path))
        with guard:
            text = None
            if exists:
                with opener(path, encoding="utf-8") as handle:
                    text = handle.read()
            last = kept.pop(key, None)
            if text is None:
                data = {}
            elif last is not None and last[0] == text:
                data = last[1]
            else:
                data = parse_yaml_for_update(text, path)
            yield data
            buffer = io.StringIO()
            _dump(data, buffer)
            written = buffer.getvalue()
            with opener(path, "w+", encoding="utf-8") as handle:
                handle.write(written)
            kept[key] = (written, data)

    dvcfile.modify_yaml = modify_yaml
    try:
        yield
    finally:
        dvcfile.modify_yaml = original


def _file_state(path) -> tuple | None:
    """(real path, size, mtime in ns, inode, ctime in ns) of a file; None when it cannot be read."""
    import os

    try:
        found = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), found.st_size, found.st_mtime_ns, found.st_ino, found.st_ctime_ns


def upstream(graph, stage) -> list:
    """The stages `stage` depends on (DVC's graph points from a stage to those it depends on)."""
    return list(graph.successors(stage))


def check_missing_outputs(stage) -> None:
    """What DVC does for a frozen stage, or one without a command: raise when an output is missing."""
    stage._check_missing_outputs()


def restore_from_run_cache(stage) -> bool:
    """The stage's outputs from DVC's run cache when it holds this stage's dependencies and params; False when not
    (then the dependencies are saved, as before DVC runs a command)."""
    from dvc.stage.cache import RunCacheNotFoundError

    try:
        stage.repo.stage_cache.restore(stage)
        return True
    except RunCacheNotFoundError:
        stage.save_deps()
        return False


def commands(stage) -> tuple[list[str], str, dict]:
    """(the stage's commands, the directory and the environment DVC runs them in)."""
    from dvc.stage.run import prepare_kwargs

    options = prepare_kwargs(stage)
    return command_list(stage), options["cwd"], options["env"]


def command_list(stage) -> list[str]:
    """The stage's commands (`cmd` as one or several)."""
    from dvc.stage.run import _enforce_cmd_list

    return _enforce_cmd_list(stage.cmd)


def shell_argv(cmd: str) -> list[str]:
    """The argv DVC runs a shell command with (its shell, without rc files)."""
    from dvc.stage.run import _make_cmd, get_executable

    return _make_cmd(get_executable(), cmd)


def save_and_commit(stage) -> None:
    """What `Stage.run` does after the command: save the outputs (and the run cache entry), commit them."""
    no_cache_outs = any(not out.use_cache for out in stage.outs if not (out.is_metric or out.is_plot))
    stage.save(allow_missing=False, run_cache=not no_cache_outs)
    stage.commit(allow_missing=False)


def write_lock(stages: list) -> None:
    """The lock entries of `stages`, one rewrite of each dvc.lock they belong to."""
    by_file: dict = {}
    for stage in stages:
        by_file.setdefault(stage.dvcfile.path, (stage.dvcfile, []))[1].append(stage)
    for dvcfile, group in by_file.values():
        dvcfile.dump_stages(group, update_pipeline=False)


def write_params(params_path, overrides: list[str], check) -> list[str]:
    """Write `overrides` (`dvc exp run --set-param` syntax) into the params file as `dvc exp run -S` does (DVC's
    Hydra code: comments and layout kept), once `check(params)` finds no problem in the result. Returns the
    problems; with any, the file is left as it was."""
    import os
    import tempfile
    from pathlib import Path

    from dvc.utils import hydra

    from foilforge.params import load_params

    path = Path(params_path)
    written = load_params(path, check=False)
    left_out = [o for o in overrides if _sets_a_key_left_out(written, o)]
    if left_out:  # Hydra's own message ("Invalid `--set-param` value") does not say why
        return [f"{path}: {o.split('=', 1)[0]} is not written in the file (left out, it takes the schema's default; "
                f"docs/params.md); add it with -S +{o}" for o in left_out]
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    try:
        Path(temporary).write_bytes(path.read_bytes())
        hydra.apply_overrides(temporary, overrides)
        found = check(load_params(temporary, check=False))
        if not found:
            os.replace(temporary, path)
        return found
    finally:
        Path(temporary).unlink(missing_ok=True)


def _sets_a_key_left_out(params: dict, override: str) -> bool:
    """Whether `override` (`a.b=value`, not `+a.b=...` or `~a.b`) names a key the params mapping does not have."""
    if override[:1] in "+~" or "=" not in override:
        return False
    node = params
    for part in override.split("=", 1)[0].split("."):
        if not isinstance(node, dict) or part not in node:
            return True
        node = node[part]
    return False


def reproduction_error(message: str) -> Exception:
    from dvc.exceptions import ReproductionError

    return ReproductionError(message)


def command_failed(cmd, status: int) -> Exception:
    from dvc.stage.exceptions import StageCmdFailedError

    return StageCmdFailedError(cmd, status)


def dvc_error_type() -> type:
    """DVC's base exception: what a failed reproduce raises."""
    from dvc.exceptions import DvcException

    return DvcException
