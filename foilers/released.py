"""Pass-through foiler for released benchmarks: the foils exist already (re-filtering VALSE).

An instrument whose source is a released VALSE file (`format: valse` in
params.yaml `sources`, pipeline.stages.ingest's valse reader) uses this
foiler to go through score, select (with the plausibility refinement), bias,
baseline and export like any other instrument, so a user can debias VALSE
itself and compare. Each ingested record gives one foil record per released
foil (`foil`, or each element of `foils`), with the released caption, foil,
classes, classes_foil, linguistic_phenomena, mturk votes and every other
released field kept as released; `valse_key` says where it came from.
"""

from __future__ import annotations

import random
from typing import Iterable

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS, Foiler
from foilforge.records import SOURCE_FIELDS, Foil

# fields of an ingested sample that are not released record fields, or that foil_record writes itself
# (the released `linguistic_phenomena` is the instrument's `phenomenon` arg: one value per instrument, as for every foiler)
NOT_EXTRAS = {"id", "source", "caption", "foil", "foils", "classes", "classes_foil", "valse_instrument",
              "linguistic_phenomena", *SOURCE_FIELDS}


@FOILERS.register("released.v1")
class Released(Foiler):
    phenomenon = "released"
    source = "valse"
    golden = (
        ({"id": "valse:relations:1", "source": "valse", "caption": "A cat sits on a mat.", "foil": "A cat sits under a mat.",
          "classes": "on", "classes_foil": "under", "linguistic_phenomena": "relations", "valse_key": "1"},
         ("A cat sits on a mat.", "A cat sits under a mat.")),
        # a released pair whose foil equals its caption is no foil (dropped like any identity foil)
        ({"id": "valse:relations:2", "source": "valse", "caption": "A dog on a bed.", "foil": "A dog on a bed.",
          "classes": "on", "classes_foil": "on", "linguistic_phenomena": "relations", "valse_key": "2"}, None),
    )

    def __init__(self, phenomenon: str = "released"):
        # VALSE's `linguistic_phenomena` of the re-filtered file ("relations", "actions", ...)
        self.phenomenon = phenomenon

    def check(self) -> None:
        if not isinstance(self.phenomenon, str) or not self.phenomenon.strip():
            raise ConfigError(f"released.v1 argument 'phenomenon' must name the released phenomenon (e.g. relations), got {self.phenomenon!r}")

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        if not isinstance(sample.get("caption"), str):
            raise InputError(path, "needs the released caption string (ingest a VALSE file with format: valse)",
                             record=index, field="caption")
        foils = sample.get("foils") if "foil" not in sample else [sample.get("foil")]
        if not isinstance(foils, list) or not foils or not all(isinstance(f, str) for f in foils):
            raise InputError(path, "needs the released foil string (or a non-empty foils list)", record=index, field="foil")

    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        foils = [sample["foil"]] if "foil" in sample else list(sample["foils"])
        extras = {k: v for k, v in sample.items() if k not in NOT_EXTRAS}
        for foil in foils:
            if foil.strip() == sample["caption"].strip():
                continue
            yield Foil(caption=sample["caption"], foil=foil, classes=sample.get("classes"),
                       classes_foil=sample.get("classes_foil"), extras=dict(extras))
