"""An instrument's foiler as params.yaml configures it, built and checked against its signature: the foil stage
runs it, check-params builds it for every instrument."""

from __future__ import annotations

from foilforge.errors import ConfigError
from foilforge.params import block


def instrument_spec(params: dict, name: str) -> dict:
    """The params.yaml block of instrument `name` (its shape is the schema's: foilforge/schema.py)."""
    spec = block(params, f"instruments.{name}", required=False)
    if spec is None:
        known = ", ".join(sorted((params.get("instruments") or {}).keys()))
        raise ConfigError(f"params.yaml has no instrument {name!r}; instruments: {known}")
    return spec


def build_instrument(params: dict, name: str):
    """The configured foiler for instrument `name`, args validated against its signature."""
    from foilforge.foiler import FOILERS

    spec = instrument_spec(params, name)
    return FOILERS.build(spec["foiler"], spec.get("args") or {}, where=f"params.yaml instruments.{name}.args")


def instrument_edit_kind(params: dict, name: str) -> str | None:
    """The `edit_kind` of the foiler params.yaml names for instrument `name` (foilforge/edits.py; None: its edits
    are not replacements and the entailment check does not judge them)."""
    from foilforge.foiler import FOILERS

    spec = (params.get("instruments") or {}).get(name) or {}
    foiler = spec.get("foiler") if isinstance(spec, dict) else None
    return getattr(FOILERS.get(foiler), "edit_kind", None) if foiler else None
