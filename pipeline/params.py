"""Loading params.yaml and finding the block a stage reads."""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import ConfigError, InputError

DEFAULT_PARAMS = "params.yaml"


def load_params(path=DEFAULT_PARAMS) -> dict:
    import yaml

    path = Path(path)
    if not path.exists():
        raise InputError(path, "params file not found (run from the project root or pass --params)")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise InputError(path, f"invalid YAML: {err}") from None
    if not isinstance(params, dict):
        raise InputError(path, "expected a mapping at the top level")
    return params


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
