"""The DVC graph cannot go stale, and imports run one way.

1. Every `foilforge SUBCOMMAND` stage of dvc.yaml lists, as deps, every project
   file its command runs: the subcommand's module (pipeline/stages/cli.py
   `COMMANDS`) and every project module it imports, transitively, read
   statically with `ast` (function-level imports included). A module that
   imports a plug-in package's registry (`foilers.base`, `filters.base`) runs
   that package's plug-ins, whatever way they register, so it pulls in the whole
   package. A dep that is a directory covers everything under it.
2. Imports run one way: pipeline.stages -> foilers / filters -> core
   (pipeline/*.py). foilers and filters do not import each other or the stages;
   core imports none of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "foilers", "filters")
# importing a registry's module runs every plug-in of its package
REGISTRY_MODULES = {"foilers.base": "foilers", "filters.base": "filters"}


def module_path(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _has_code(init: Path) -> bool:
    """An __init__.py with imports, functions or classes (not just a docstring and __version__)."""
    tree = ast.parse(init.read_text())
    return any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for n in tree.body)


def imported_modules(path: Path) -> set[str]:
    """Project modules a file imports anywhere in its body (top level and inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from pipeline import metrics` imports the submodule pipeline.metrics
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES and module_path(name) is not None:
                found.add(name)
    return found


def package_modules(package: str) -> set[str]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in ROOT.joinpath(package).rglob("*.py")}


def import_closure(start: str) -> set[Path]:
    seen, todo = set(), [start]
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
    from pipeline.stages.cli import COMMANDS

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


def test_closure_follows_function_level_imports_and_registries():
    # export imports filters.base and foilers.base only inside functions; both run their plug-ins
    closure = import_closure("pipeline.stages.export")
    assert Path("filters/nli.py") in closure
    assert Path("foilers/relations.py") in closure
    assert Path("pipeline/stages/validate.py") in closure  # `from pipeline.stages.validate import settings_from_params` in a function
    # evaluate reaches the LM through baseline, inside a function
    assert Path("pipeline/lm.py") in import_closure("pipeline.stages.evaluate")


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


# ---- imports run one way: pipeline.stages -> foilers / filters -> core
def _layer(module: str) -> str:
    if module.startswith("pipeline.stages"):
        return "stages"
    return module.split(".")[0] if not module.startswith("pipeline") else "core"


ALLOWED = {
    "core": {"core"},
    "foilers": {"foilers", "core"},
    "filters": {"filters", "core"},
    "stages": {"stages", "foilers", "filters", "core"},
}


def test_imports_run_one_way():
    wrong = []
    for package in PACKAGES:
        for path in sorted(ROOT.joinpath(package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for imported in sorted(imported_modules(path)):
                if _layer(imported) not in ALLOWED[_layer(module)]:
                    wrong.append(f"{path.relative_to(ROOT)} ({_layer(module)}) imports {imported} ({_layer(imported)})")
    assert not wrong, "imports against stages -> foilers/filters -> core:\n" + "\n".join(wrong)


def test_direction_check_catches_a_back_import(tmp_path):
    assert _layer("pipeline.io") == "core" and _layer("pipeline.stages.foil") == "stages"
    assert "stages" not in ALLOWED["core"] and "filters" not in ALLOWED["foilers"]
