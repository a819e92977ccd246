"""What a build ran with: foilforge's version and commit, library versions, and the exact weights of every model.

The export stage writes this into the manifest (`environment`, `models`), so a
benchmark says which code and which weights made it:

* a hub model: the commit its files resolve to in the local hub cache (the
  `revision` of its block, or `main`), read offline from the cache;
* a local directory or a `package:` model: the sha256 of its files (and, for a
  package, the distribution and its version);
* anything else (a TF Hub URL, a hub id not in the cache): recorded with the
  reason it could not be resolved.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

from foilforge.io import file_sha256

LIBRARIES = ("torch", "transformers", "tokenizers", "sentence-transformers", "spacy", "numpy", "scipy", "dvc")
MODEL_ARG_KEYS = ("ranker", "proposer", "encoder")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def foilforge_version() -> str:
    try:
        return metadata.version("foilforge")
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        from foilforge import __version__

        return __version__


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_commit(root: Path = PROJECT_ROOT) -> dict | None:
    """{commit, dirty} of the checkout foilforge runs from; None outside a git checkout (an installed wheel)."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


def version_line() -> str:
    """`foilforge --version`: the version, and the commit when run from a checkout."""
    git = git_commit()
    suffix = f" (git {git['commit'][:12]}{', modified' if git['dirty'] else ''})" if git else ""
    return f"foilforge {foilforge_version()}{suffix}"


def spacy_pipelines(params: dict) -> dict:
    """{spaCy pipeline package named in an instrument's args: its installed version, or None}."""
    names = set()
    for spec in (params.get("instruments") or {}).values():
        args = (spec or {}).get("args") if isinstance(spec, dict) else None
        if isinstance(args, dict) and isinstance(args.get("spacy_model"), str):
            names.add(args["spacy_model"])
    return {name: _dist_version(name) for name in sorted(names)}


def environment(params: dict) -> dict:
    return {
        "foilforge": foilforge_version(),
        "git": git_commit(),
        "python": platform.python_version(),
        "libraries": {name: _dist_version(name) for name in LIBRARIES},
        "spacy_pipelines": spacy_pipelines(params),
    }


def model_blocks(params: dict) -> dict[str, dict]:
    """Every model block of params.yaml by its key: models.* and the model args of instruments."""
    blocks = {}
    for role, block in sorted((params.get("models") or {}).items()):
        if isinstance(block, dict) and block.get("name_or_path"):
            blocks[f"models.{role}"] = block
    for name, spec in sorted((params.get("instruments") or {}).items()):
        args = (spec or {}).get("args") if isinstance(spec, dict) else None
        for arg in MODEL_ARG_KEYS:
            block = (args or {}).get(arg)
            if isinstance(block, dict) and block.get("name_or_path"):
                blocks[f"instruments.{name}.args.{arg}"] = block
            # a proposer plug-in's block ({name, args}; foilforge/proposers.py): the models among its args
            inner = block.get("args") if isinstance(block, dict) and "name" in block else None
            for key, value in sorted((inner or {}).items()):
                if isinstance(value, dict) and value.get("name_or_path"):
                    blocks[f"instruments.{name}.args.{arg}.args.{key}"] = value
    return blocks


@functools.lru_cache(maxsize=None)  # one package often serves several roles (SmolLM2: four)
def directory_sha256(path: Path) -> str:
    """One sha256 over every file under `path` (relative name + content hash, in sorted order)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(f"{file.relative_to(path).as_posix()}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def _package_dist(module: str) -> tuple[str | None, str | None]:
    dists = metadata.packages_distributions().get(module) or []
    return (dists[0], _dist_version(dists[0])) if dists else (None, None)


def hub_commit(repo_id: str, revision: str | None, filename: str = "config.json") -> str | None:
    """The commit `revision` of a hub repo resolves to in the local hub cache (no network), or None."""
    if revision and COMMIT.match(revision):
        return revision
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in (filename, "config.json", "tokenizer_config.json", "modules.json"):
        found = try_to_load_from_cache(repo_id, name, revision=revision or "main")
        if isinstance(found, str):
            # <cache>/models--org--name/snapshots/<commit>/<file>
            parts = Path(found).parts
            return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None
    return None


def model_provenance(block: dict) -> dict:
    name = str(block["name_or_path"])
    revision = block.get("revision")
    entry = {"name_or_path": name, "revision": revision}
    if block.get("gguf_file"):
        entry["gguf_file"] = block["gguf_file"]
    if name.startswith("package:"):
        import importlib.util

        module = name.split(":", 1)[1]
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            return {**entry, "unresolved": f"Python package {module!r} is not installed"}
        directory = Path(list(found.submodule_search_locations)[0])
        dist, version = _package_dist(module)
        return {**entry, "package": dist, "package_version": version, "sha256": directory_sha256(directory)}
    if "://" in name:
        return {**entry, "unresolved": "a URL (not a hub id or a local path): its version is the one in the URL"}
    path = Path(name)
    if path.is_dir():
        return {**entry, "sha256": directory_sha256(path)}
    if path.is_file():
        return {**entry, "sha256": file_sha256(path)}
    commit = hub_commit(name, revision, block.get("gguf_file") or "config.json")
    if commit:
        return {**entry, "commit": commit}
    return {**entry, "unresolved": "not in the local hub cache (the stage that loads it downloads it; "
                                   "pin `revision` to a commit to make the build reproducible)"}


def models(params: dict) -> dict:
    return {key: model_provenance(block) for key, block in model_blocks(params).items()}
