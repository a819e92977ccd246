"""The DVC graph cannot go stale, and imports run one way.

1. Every `foilforge SUBCOMMAND` stage of dvc.yaml lists, as deps, exactly the
   project files its command runs, no fewer and no more: the subcommand's module (pipeline/stages/cli.py
   `COMMANDS`) and every project module it imports, transitively, read
   statically with `ast` (function-level imports included). A module that
   imports a plug-in package's registry (`foilforge.foiler`, `foilforge.filter`) runs
   that package's plug-ins, whatever way they register, so it pulls in the whole
   package. A dep that is a directory covers everything under it.
2. Imports run one way: pipeline (stages, CLI, annotation app) -> foilers /
   filters -> foilforge (the core). foilers and filters do not import each
   other or pipeline; foilforge imports none of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("foilforge",)
#: the folders installed under foilforge (pyproject.toml package-dir)
SUBPACKAGE_FOLDERS = ("pipeline", "foilers", "filters")
# importing a registry's module runs every plug-in of its package
REGISTRY_MODULES = {"foilforge.foiler": "foilforge.foilers", "foilforge.filter": "foilforge.filters", "foilforge.pairing": "foilforge.foilers.pairers",
                    "foilforge.proposers": "foilforge.foilers.proposers",
                    "foilforge.attacker": "foilforge.filters.attackers",
                    "foilforge.pipeline.sources.base": "foilforge.pipeline.sources",
                    "foilforge.pipeline.emitters": "foilforge.pipeline.emitters"}


def folder_parts(name: str) -> list[str]:
    """A module's path parts in the checkout: foilforge.pipeline.x lives in pipeline/x.py."""
    parts = name.split(".")
    return parts[1:] if len(parts) > 1 and parts[0] == "foilforge" and parts[1] in SUBPACKAGE_FOLDERS else parts


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("foilforge",) * (parts[0] in SUBPACKAGE_FOLDERS) + parts).removesuffix(".__init__")


def module_path(name: str) -> Path | None:
    base = ROOT.joinpath(*folder_parts(name))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _has_code(init: Path) -> bool:
    """An __init__.py with imports, functions or classes (not just a docstring and __version__).

    foilforge/__init__.py only says where the subpackages load from in a checkout (not what they compute) and
    pins the kernels through foilforge/host.py, a dependency of every stage."""
    if init == ROOT / "foilforge" / "__init__.py":
        return False
    tree = ast.parse(init.read_text())
    return any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for n in tree.body)


def imported_modules(path: Path) -> set[str]:
    """Project modules a file imports anywhere in its body (top level and inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from foilforge import metrics` imports the submodule foilforge.metrics
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES and module_path(name) is not None:
                found.add(name)
    return found


def package_modules(package: str) -> set[str]:
    return {module_name(p) for p in ROOT.joinpath(*folder_parts(package)).rglob("*.py")}


def import_closure(start: str) -> set[Path]:
    # every command imports the package first: what foilforge/__init__.py imports (the kernel pins) runs in each
    seen, todo = set(), [start, "foilforge"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_path(name)
        todo += sorted(imported_modules(path))
        if name in REGISTRY_MODULES:
            todo += sorted(package_modules(REGISTRY_MODULES[name]))
    files = set()
    for name in seen:
        path = module_path(name)
        if path.name != "__init__.py" or _has_code(path):
            files.add(path.relative_to(ROOT))
    return files


def dvc_stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def stage_command(stage: dict) -> str:
    return " ".join(((stage.get("do") or stage).get("cmd")).split())


def stage_deps(stage: dict) -> list[str]:
    return [d for d in (stage.get("do") or stage).get("deps") or [] if "${" not in d]


def covered(path: Path, deps: list[str]) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in deps)


def commands():
    from foilforge.pipeline.stages.cli import COMMANDS

    return COMMANDS


@pytest.mark.parametrize("stage_name", sorted(dvc_stages()))
def test_stage_deps_cover_the_import_closure_of_its_command(stage_name):
    stage = dvc_stages()[stage_name]
    words = stage_command(stage).split()
    assert words[0] == "foilforge", f"{stage_name}: command does not start with foilforge: {words}"
    module = commands()[words[1]][0]
    closure = import_closure(module)
    assert module_path(module).relative_to(ROOT) in closure
    missing = sorted(str(p) for p in closure if not covered(p, stage_deps(stage)))
    assert not missing, f"dvc.yaml stage {stage_name!r} runs these files but does not list them as deps: {missing}"
    extra = code_deps_outside(closure, stage_deps(stage))
    assert not extra, f"dvc.yaml stage {stage_name!r} lists code its command never imports (a needless rerun): {extra}"


def code_deps_outside(closure: set[Path], deps: list[str]) -> list[str]:
    """Code deps (files or folders of the project's packages) that name a file outside the closure."""
    extra = []
    for dep in deps:
        if Path(dep).parts[0] not in ("foilforge", *SUBPACKAGE_FOLDERS):
            continue  # data and image roots
        path = ROOT / dep
        if path.is_file() and path.suffix != ".py":
            continue  # a data file the code reads (foilers/lang/attribute_classes.yaml)
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        outside = [f.relative_to(ROOT) for f in files
                   if f.relative_to(ROOT) not in closure and not (f.name == "__init__.py" and not _has_code(f))]
        if outside:
            extra.append(f"{dep} ({', '.join(map(str, outside[:3]))})")
    return extra


def test_a_needless_dep_is_reported():
    closure = import_closure(commands()["validate"][0])
    assert code_deps_outside(closure, ["pipeline/stages/validate.py", "pipeline/validation.py", "foilforge/io.py"]) == []
    assert code_deps_outside(closure, ["pipeline/stages/export.py"]) == ["pipeline/stages/export.py (pipeline/stages/export.py)"]
    assert code_deps_outside(closure, ["filters"])[0].startswith("filters (")


def test_closure_follows_function_level_imports_and_registries():
    # export imports foilforge.filter and foilforge.foiler only inside functions; both run their plug-ins
    closure = import_closure("foilforge.pipeline.stages.export")  # its library, pipeline/release.py, with it
    assert Path("filters/nli.py") in closure
    assert Path("foilers/relations.py") in closure
    assert Path("foilforge/settings.py") in closure  # `from foilforge.settings import instrument_settings` in a function
    # evaluate reaches the LM through baseline, inside a function
    assert Path("foilforge/lm.py") in import_closure("foilforge.pipeline.stages.evaluate")


def test_a_missing_dep_is_reported():
    stage = {"cmd": "foilforge select x", "deps": ["pipeline/stages/select.py"]}
    closure = import_closure(commands()["select"][0])
    assert any(not covered(p, stage_deps(stage)) for p in closure)
    assert covered(Path("filters/nli.py"), ["filters"])
    assert not covered(Path("filters_extra/x.py"), ["filters"])


def test_evaluate_lists_the_image_root_it_reads():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    stage = dvc_stages()["evaluate"]
    assert "${evaluate.image_root}" in stage["deps"]
    # a dep that does not exist makes `dvc repro` fail: the default root ships in the repository
    assert (ROOT / params["evaluate"]["image_root"]).is_dir()


def test_score_lists_every_filters_setting_it_reads():
    params_keys = dvc_stages()["score"]["do"]["params"]
    assert "filters.length" in params_keys or "filters" in params_keys


# ---- imports run one way: pipeline -> foilers / filters -> foilforge
def _layer(module: str) -> str:
    top = folder_parts(module)[0]
    return {"foilforge": "core", "pipeline": "top"}.get(top, top)


ALLOWED = {
    "core": {"core"},
    "foilers": {"foilers", "core"},
    "filters": {"filters", "core"},
    "top": {"top", "foilers", "filters", "core"},
}


def direction_errors(root: Path = ROOT) -> list[str]:
    wrong = []
    for package in ("foilforge", *SUBPACKAGE_FOLDERS):
        for path in sorted(root.joinpath(package).rglob("*.py")):
            module = module_name(path) if root == ROOT else ".".join(path.relative_to(root).with_suffix("").parts)
            for imported in sorted(imported_modules(path)):
                if _layer(imported) not in ALLOWED[_layer(module)]:
                    wrong.append(f"{path.relative_to(root)} ({_layer(module)}) imports {imported} ({_layer(imported)})")
    return wrong


def test_imports_run_one_way():
    wrong = direction_errors()
    assert not wrong, "imports against pipeline -> foilers/filters -> foilforge:\n" + "\n".join(wrong)


def test_direction_check_catches_a_back_import(monkeypatch):
    assert _layer("foilforge.io") == "core" and _layer("foilforge.pipeline.stages.foil") == "top"
    assert _layer("foilforge.pipeline.loadable") == "top"
    real = imported_modules

    def with_back_imports(path):
        found = real(path)
        if path.name == "io.py" and path.parent.name == "foilforge":
            found.add("foilforge.foilers.existence")
        if path.name == "nli.py":
            found.add("foilforge.foilers.lang.inflection")
        return found

    monkeypatch.setitem(globals(), "imported_modules", with_back_imports)
    wrong = direction_errors()
    assert "foilforge/io.py (core) imports foilforge.foilers.existence (foilers)" in wrong
    assert "filters/nli.py (filters) imports foilforge.foilers.lang.inflection (foilers)" in wrong
    assert len(wrong) == 2
