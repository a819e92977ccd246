"""What the annotate and validate stages (and the export) share: the validation settings, and the seeded coins
that order an item's texts and a group's images and texts, so the page an annotator saw and the votes read back
agree."""

from __future__ import annotations

import hashlib

from foilforge.params import instrument_part, typed_params
from foilforge.schema import InstrumentValidation

#: an instrument's own keys (instruments.<I>.validation): the schema's
INSTRUMENT_KEYS = tuple(InstrumentValidation.model_fields)


def settings_from_params(params: dict) -> dict:
    """params.yaml `validation` merged over the defaults, with every instrument's gold items and votes file
    (`instruments.<I>.validation`) as `gold` / `votes` {instrument: value} (shapes: foilforge/schema.py)."""
    settings = typed_params(params).validation.model_dump()
    settings["gold"], settings["votes"] = {}, {}
    for instrument in sorted(params.get("instruments") or {}):
        own = instrument_part(params, instrument, "validation", {})
        for key in INSTRUMENT_KEYS:
            if own.get(key):
                settings[key][instrument] = own[key]
    return settings


def caption_first(item_id: str, seed: int = 0) -> bool:
    """Whether text 1 is the caption: a seeded coin per item, stable when other items come and go."""
    return hashlib.sha256(f"{seed}\0{item_id}".encode("utf-8")).digest()[0] % 2 == 0


def group_orders(group_id: str, seed: int = 0) -> tuple[bool, bool]:
    """(image_0 shown as A, caption_0 shown as text 1): two seeded coins per group, on distinct keys."""
    return caption_first(f"{group_id}\0image order", seed), caption_first(f"{group_id}\0text order", seed)
