"""`pip install .` gives a foilforge that runs, and pyproject.toml's ranges agree with requirements*.txt's pins.

The install test builds and installs the project (not editable) into a fresh venv whose dependencies come
from the running environment through a .pth file (a path listed in a .pth file is put on sys.path but its
own .pth files, such as this checkout's editable install, are not run), so it needs no index and takes
seconds; then it runs `foilforge --help`, `--version` and `check-params` from that venv.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(files=("requirements.txt", "requirements-nodeps.txt")) -> dict[str, str]:
    out = {}
    for name in files:
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                dist, _, version = line.partition("==")
                assert version, f"{name}: {line!r} is not an exact pin (name==version)"
                out[canonicalize_name(dist.split("[")[0])] = version.strip()   # ray[data]: the extra is not the name
    return out


def declared(extras=("offline", "dev", "harness", "ray")) -> list[Requirement]:
    reqs = [Requirement(r) for r in PYPROJECT["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in PYPROJECT["optional-dependencies"][extra]]
    return reqs


def test_every_declared_dependency_is_pinned_within_its_range():
    pinned = pins()
    problems = []
    for req in declared():
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req} has no exact pin in requirements.txt")
        elif not req.specifier.contains(version.split("+")[0], prereleases=True):
            problems.append(f"{req}: the pin {req.name}=={version} is outside the range")
    assert not problems, "\n".join(problems)


def test_every_third_party_import_is_a_declared_dependency():
    """Each library the code imports (top level or in a function) comes from a dependency pyproject.toml declares."""
    import ast

    optional = {"tensorflow_hub": "use extra", "coreferee": "optional resolver", "linkgrammar": "Debian package"}
    names = {canonicalize_name(r.name) for r in declared(extras=("offline", "dev", "harness", "ray", "use"))}
    dists_of = metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    missing = set()
    for path in [*ROOT.glob("pipeline/**/*.py"), *ROOT.glob("foilers/**/*.py"), *ROOT.glob("filters/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for module in modules:
                top = module.split(".")[0]
                if top in stdlib or top in ("foilforge", "__future__") or top in optional:
                    continue
                dists = {canonicalize_name(d) for d in dists_of.get(top, [top])}
                if not dists & names:
                    missing.add(f"{top} ({path.relative_to(ROOT)})")
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"


def locked() -> dict[str, str]:
    out = {}
    for number, line in enumerate((ROOT / "requirements.lock").read_text().splitlines(), 1):
        line = line.split("#")[0].strip()
        if line:
            dist, sep, version = line.partition("==")
            assert sep and version, f"requirements.lock line {number}: {line!r} is not name==version"
            assert canonicalize_name(dist) == dist, f"requirements.lock line {number}: {dist!r} is not canonical"
            out[dist] = version
    return out


def test_the_lock_pins_what_requirements_txt_pins():
    lock, nodeps = locked(), set(pins(["requirements-nodeps.txt"]))
    differ = [f"{dist}: requirements.txt {version}, requirements.lock {lock.get(dist)}"
              for dist, version in pins().items() if dist not in nodeps and lock.get(dist) != version]
    assert not differ, "rerun `make lock`:\n" + "\n".join(differ)
    assert not ({"foilforge"} | nodeps) & set(lock), "the lock holds foilforge or a --no-deps wheel"


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(), reason="not make setup's .venv")
def test_make_setups_venv_is_the_lock_and_nothing_in_it_misses_a_dependency():
    """`make setup` installs the lock with --no-deps, so a lock missing a dependency would only show here."""
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    # TORCH_INDEX (docs/install.md): torch and torchvision of a local build (2.14.1+cpu satisfies the pin 2.14.1), and
    # the lock without the CUDA wheels, as the Makefile's TORCH_FREE leaves them out
    local_torch = "+" in installed.get("torch", "")

    def as_locked(dist: str, version: str) -> bool:
        if local_torch and dist in ("torch", "torchvision"):
            return installed.get(dist, "").split("+")[0] == version
        if local_torch and (dist.startswith(("nvidia-", "cuda-")) or dist == "triton"):
            return True
        return installed.get(dist) == version

    differ = [f"{dist}: locked {version}, installed {installed.get(dist)}" for dist, version in locked().items()
              if not as_locked(dist, version)]
    assert not differ, "rerun `make setup`:\n" + "\n".join(differ)
    checked = subprocess.run([Path(sys.executable).parent / "uv", "pip", "check", "--python", sys.executable],
                             capture_output=True, text=True)
    nodeps = set(pins(["requirements-nodeps.txt"]))
    problems = [line for line in checked.stdout.splitlines() + checked.stderr.splitlines()
                if line.startswith("The package") and canonicalize_name(line.split("`")[1]) not in nodeps]
    assert not problems, "\n".join(problems)


def test_requires_python_admits_no_python_a_pin_refuses():
    lowest = re.match(r">=\s*(\d+\.\d+)", PYPROJECT["requires-python"]).group(1)
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(sys.version.split()[0])
    refused = []
    for dist, version in pins().items():
        try:
            needs = metadata.metadata(dist).get("Requires-Python")
        except metadata.PackageNotFoundError:
            continue
        if needs and not SpecifierSet(needs).contains(f"{lowest}.0"):
            refused.append(f"{dist}=={version} requires Python {needs}")
    assert not refused, f"requires-python {PYPROJECT['requires-python']} is too wide: {refused}"


def test_version_has_one_source():
    from foilforge import __version__

    assert PYPROJECT["dynamic"] == ["version"] and "version" not in PYPROJECT
    assert metadata.version("foilforge") == __version__


@pytest.mark.slow
def test_pip_install_gives_a_foilforge_that_runs(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "data", "build", "*.egg-info",
                                                                   "__pycache__", ".dvc", "benchmarks", "tests"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the running environment's libraries (pip, setuptools and the pins), without its .pth files
    Path(site, "_foilforge_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                              str(source)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    foilforge = venv / "bin" / "foilforge"
    where = subprocess.run([python, "-c", "import foilforge.pipeline as p; print(p.__file__)"], capture_output=True,
                           text=True, check=True, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(Path(site, "foilforge"))), f"foilforge.pipeline imported from {where}, not the fresh venv"
    # the folders pipeline/, foilers/ and filters/ are foilforge's subpackages: no generic name at the top
    generic = sorted({"pipeline", "foilers", "filters"} & {path.name for path in Path(site).iterdir()})
    assert not generic, f"top-level packages in site-packages: {generic}"

    helped = subprocess.run([foilforge, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert helped.returncode == 0, helped.stderr
    assert all(command in helped.stdout for command in ("ingest", "foil", "score", "export", "check-params"))
    version = subprocess.run([foilforge, "--version"], capture_output=True, text=True, cwd=ROOT)
    assert version.stdout.startswith(f"foilforge {metadata.version('foilforge')}")
    checked = subprocess.run([foilforge, "check-params"], capture_output=True, text=True, cwd=ROOT)
    assert checked.returncode == 0 and checked.stdout.strip().endswith("params.yaml: ok"), checked.stdout + checked.stderr

    # a third-party distribution's foiler, found through the foilforge.foilers entry-point group
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "shout_foiler.py").write_text(
        "from foilforge.foiler import FOILERS, Foiler\n\n\n"
        "@FOILERS.register('shout.v1')\nclass Shout(Foiler):\n    source = 'coco'\n\n"
        "    def foils_for(self, sample, rng):\n        return []\n")
    (plugin / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "shout-foiler"\nversion = "0.1"\n\n[tool.setuptools]\npy-modules = ["shout_foiler"]\n\n'
        '[project.entry-points."foilforge.foilers"]\nshout = "shout_foiler:Shout"\n')
    added = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                            str(plugin)], capture_output=True, text=True)
    assert added.returncode == 0, added.stderr[-2000:]
    found = subprocess.run([python, "-c", "from foilforge.foiler import FOILERS; cls = FOILERS.get('shout.v1'); "
                            "print(cls.__module__, cls.__name__)"], capture_output=True, text=True, cwd=tmp_path)
    assert found.stdout.split() == ["shout_foiler", "Shout"], found.stdout + found.stderr

    # the installed metadata declares the dependencies pyproject.toml lists (each pinned in range: test above)
    built = subprocess.run([python, "-c", "from importlib import metadata; print('\\n'.join(metadata.requires('foilforge')))"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout.splitlines()
    runtime = [Requirement(r) for r in built if "extra ==" not in r]
    assert {r.name for r in runtime} == {Requirement(r).name for r in PYPROJECT["dependencies"]}
