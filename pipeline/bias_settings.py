"""The lexical-bias settings of one instrument, which the bias, select and refilter stages read (its `items` mode
decides how they count an instrument's lexical items)."""

from __future__ import annotations

from foilforge.params import instrument_part, typed_params
from foilforge.schema import BiasSettings

THRESHOLD_KEYS = tuple(k for k in BiasSettings.model_fields if k != "items")


def instrument_settings(params: dict, instrument: str) -> dict:
    """Merged settings for one instrument: `bias.defaults`, then `instruments.<I>.bias` (shapes: foilforge/schema.py)."""
    block = typed_params(params).bias
    settings = {"items": "direct", **{k: None for k in THRESHOLD_KEYS}}
    for overrides in (block.defaults.model_dump(), instrument_part(params, instrument, "bias", {})):
        settings.update({k: v for k, v in (overrides or {}).items() if k != "items" or v is not None})
    settings.update(log_base=block.log_base, on_exceed=block.on_exceed, plot_top_k=block.plot_top_k)
    return settings
