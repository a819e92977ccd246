"""Loading params.yaml and finding the block a stage reads.

`load_params` returns a `TypedParams`: the file's mapping as written (a dict, which is what plug-in arguments,
provenance and manifest copies, profiles and DVC read) whose attributes are its blocks as the schema's typed
models, the schema's defaults filled in (`params.bias.on_exceed`, `params.engine.ray.workers`; foilforge/schema.py).
"""

from __future__ import annotations

from pathlib import Path

from foilforge.errors import ConfigError, InputError

DEFAULT_PARAMS = "params.yaml"


class TypedParams(dict):
    """A params mapping as written, whose attributes are its top-level blocks typed by the schema: `params.bias` is
    a `BiasBlock` with the schema's defaults for what the file leaves out, `params.seed` an int. A block is
    validated when read, so a mapping changed after loading reads its current values."""

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        from foilforge.schema import typed_block

        try:
            return typed_block(self, name)
        except KeyError:
            raise AttributeError(f"params have no block {name!r} (foilforge/schema.py Params)") from None


def _represent_typed_params(dumper, data):
    return dumper.represent_dict(dict(data))


def _register_yaml_representer() -> None:
    """yaml.safe_dump writes a TypedParams as the mapping it is (SafeDumper only knows the exact dict type)."""
    import yaml

    yaml.SafeDumper.add_representer(TypedParams, _represent_typed_params)


_register_yaml_representer()


def typed_params(params: dict) -> TypedParams:
    """`params` with typed block attributes (itself when it has them already): stages take plain dicts too."""
    return params if isinstance(params, TypedParams) else TypedParams(params)


def load_params(path=DEFAULT_PARAMS, check: bool = True) -> TypedParams:
    """params.yaml as a TypedParams (the mapping as written, typed blocks as attributes), checked against the schema
    (foilforge/schema.py): a ConfigError lists every problem.

    `check=False` reads an overlay (a profile), which is only checked once merged into params.yaml.
    """
    import yaml

    path = Path(path)
    if not path.exists():
        raise InputError(path, "params file not found (run from the project root or pass --params)")
    try:
        # libyaml's parser where PyYAML has it (3 ms for params.yaml against 20 ms, and every stage reads it);
        # both feed the same safe constructor, so the mapping is the same
        params = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as err:
        raise InputError(path, f"invalid YAML: {err}") from None
    if not isinstance(params, dict):
        raise InputError(path, "expected a mapping at the top level")
    if check:
        from foilforge.schema import check as check_schema

        check_schema(params, str(path))
    return TypedParams(params)


def block(params: dict, dotted: str, required: bool = True):
    """params['a']['b'] for 'a.b'; a missing block names the key to add."""
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if required:
                raise ConfigError(f"params.yaml has no '{dotted}' block")
            return None
        node = node[part]
    return node


# ---------------------------------------------------------------- profiles
PROFILES_DIR = "profiles"


def profile_path(name_or_path) -> Path:
    """`paper` -> profiles/paper.yaml (relative to the working directory, the project root); a path stays a path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = Path(PROFILES_DIR) / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in Path(PROFILES_DIR).glob("*.yaml"))
        raise ConfigError(f"profile {str(name_or_path)!r}: {path} not found (profiles: {', '.join(known) or 'none'})")
    return path


def merge_profile(params: dict, overlay: dict) -> dict:
    """params with overlay applied: mappings merge key by key, every other value replaces (a copy; inputs untouched)."""
    merged = dict(params)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_profile(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_profile(name_or_path) -> dict:
    return load_params(profile_path(name_or_path), check=False)


def profile_overrides(overlay: dict, params: dict, prefix: str = "") -> list[str]:
    """The overlay as `dvc exp run --set-param` (Hydra) overrides: one per leaf, `+key=` for a key params lacks.

    Values are JSON without spaces (JSON is YAML), so the list survives shell word splitting.
    """
    import json

    out = []
    for key, value in overlay.items():
        dotted = f"{prefix}{key}"
        present = isinstance(params, dict) and key in params
        if isinstance(value, dict) and present and isinstance(params[key], dict):
            out += profile_overrides(value, params[key], dotted + ".")
        else:
            text = json.dumps(value, separators=(",", ":"))
            if isinstance(value, str) and all(c.isalnum() or c in "-_./" for c in value) and value not in ("null", "true", "false"):
                text = value  # plain Hydra string: no quotes to lose in a Makefile
            out.append(f"{'' if present else '+'}{dotted}={text}")
    return out
