"""The two record kinds that flow through the pipeline. Imports nothing from foilers or filters.

* A **sample** is one normalised source item, as ingest writes it (one JSONL
  line): `id` (traces back to the source: "coco:<annotation id>",
  "visual7w:<qa_id>", ...: the params.yaml source key, then the native id), `source`, `image_file`, `dataset`,
  `original_split`, `dataset_idx`, and source-specific fields (`caption`,
  `question`/`answer`, SWiG `verb`/`frames`, VisDial `dialog` turn, ...).
* A **foil** is what a foiler makes from a sample: the VALSE record fields
  (`caption`, `foil`, `classes`, `classes_foil`, `linguistic_phenomena`, ...)
  plus `id`, `sample_id`, and `provenance` (foiler name, version, changed
  span) so filters can score just the edit and the report can trace it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from foilforge.errors import InputError
from foilforge.io import iter_jsonl, read_json

# sample fields copied into every foil record, as VALSE released them
SOURCE_FIELDS = ("dataset", "original_split", "dataset_idx", "image_file")


class Sample(TypedDict, total=False):
    """One ingested source item (a line of data/ingested/SOURCE.jsonl); sources add their own fields."""

    id: str
    source: str
    image_file: str
    dataset: str
    original_split: str
    dataset_idx: Any
    caption: str


class Record(TypedDict, total=False):
    """One caption/foil record between the stages (a line of data/foils, scored, filtered, validated JSONL).

    `foil_record` writes the first block; each later stage adds its own field and keeps the rest: score
    `filters` (per filter its `score`; select adds `passed`), select `refused` and `group`, validate
    `mturk` counts and `valid`. Foilers add fields of their own (`foil_method`, `proposal_rank`, ...).
    """

    id: str
    sample_id: str
    instrument: str
    linguistic_phenomena: str
    caption: str
    foil: str
    classes: Any
    classes_foil: Any
    mturk: dict | None
    provenance: dict
    dataset: str
    original_split: str
    dataset_idx: Any
    image_file: str
    filters: dict[str, dict]
    refused: str
    group: dict
    valid: bool


@dataclass
class Foil:
    """One caption/foil pair proposed by a foiler for one sample."""

    caption: str
    foil: str
    classes: Any
    classes_foil: Any
    # character span (start, end) of the changed part in `caption` and in `foil`
    caption_span: tuple[int, int] | None = None
    foil_span: tuple[int, int] | None = None
    #: record fields beyond the VALSE core (foil_method, proposal_rank, ...), written as they are
    extras: dict = field(default_factory=dict)
    #: the sample it was made from (set by the foiler or the default `propose`); records of one sample share it
    sample_id: Any = None
    #: the foiler's preference among the candidates of one sample (0 = best) and the score behind it, if any
    rank: int = 0
    score: float | None = None
    #: what `propose` hands to `choose` and is not part of the record (a parsed statement, a slot)
    internal: dict = field(default_factory=dict, repr=False, compare=False)
    #: fields the record's `provenance` carries beside the foiler and spans (the edit `{type, span, old, new}`)
    provenance: dict = field(default_factory=dict)

    def key(self) -> tuple[str, str]:
        return (self.caption, self.foil)


def foil_record(sample: Sample, foil: Foil, *, instrument: str, foiler: str, phenomenon: str,
                index: int = 0) -> Record:
    """Build the VALSE-format record (plus provenance) for one foil of one sample."""
    suffix = f"#{index}" if index else ""
    record: Record = {
        "id": f"{instrument}:{sample['id']}{suffix}",
        "sample_id": sample["id"],
        "instrument": instrument,
        "linguistic_phenomena": phenomenon,
        "caption": foil.caption,
        "foil": foil.foil,
        "classes": foil.classes,
        "classes_foil": foil.classes_foil,
        "mturk": None,
        "provenance": {
            "foiler": foiler,
            "caption_span": list(foil.caption_span) if foil.caption_span else None,
            "foil_span": list(foil.foil_span) if foil.foil_span else None,
            **foil.provenance,
        },
    }
    for key in SOURCE_FIELDS:
        if key in sample:
            record[key] = sample[key]
    record.update(foil.extras)
    return record


# ---------------------------------------------------------------- record files (shared by the stages)

def read_record_file(path) -> list[tuple[str, Record]]:
    """(id, record) pairs from foil-record JSONL or a released VALSE JSON ({id: record})."""
    path = Path(path)
    if path.suffix == ".json":
        data = read_json(path)
        if not isinstance(data, dict):
            raise InputError(path, f"expected a JSON object {{id: record}}, got {type(data).__name__}")
        for key, record in data.items():
            if not isinstance(record, dict):
                raise InputError(path, f"expected an object, got {type(record).__name__}", record=key)
        return list(data.items())
    records = []
    # an empty file is an instrument whose filters kept nothing: zero records, reported as such
    for line, record in enumerate(iter_jsonl(path, allow_empty=True), start=1):
        records.append((str(record.get("id", f"line {line}")), record))
    return records


def read_instrument(path: Path) -> list[Record]:
    """The records of one instrument file (JSONL or VALSE JSON); each must carry an `id`."""
    records = []
    for record_id, record in read_record_file(path):
        if "id" not in record:
            raise InputError(path, "missing field", record=record_id, field="id")
        records.append(record)
    return records


def passed_all(record: Record) -> bool:
    filters = record.get("filters") or {}
    return all(bool(result.get("passed", True)) for result in filters.values() if isinstance(result, dict))


def valid_by_votes(votes: dict, min_caption: int = 2) -> bool:
    """VALSE's rule: valid when at least `min_caption` annotators chose the caption (and not the foil)."""
    return votes["caption"] >= min_caption


def is_valid(record: Record, min_caption: int = 2) -> bool | None:
    """VALSE's human validation of one record; None: no votes.

    The validate stage's stored verdict (`valid`) when there is one; otherwise the votes decide, as in
    VALSE's release (an `mturk` dict without a verdict): at least `min_caption` annotators chose the caption.
    """
    votes = record.get("mturk")
    if not isinstance(votes, dict) or "caption" not in votes:
        return None
    if isinstance(record.get("valid"), bool):
        return record["valid"]
    return valid_by_votes(votes, min_caption)


# ---------------------------------------------------------------- changed items (VALSE Table 5)
# The items a record changes, as the bias check counts them; the plausibility refinement
# (filters/refinement.py) bounds the JS of the same counts, so both read them here.

#: "swap": both fillers are changed items on both sides (actant swap), so the two distributions are equal
ITEM_MODES = ("direct", "swap")


def _item_keys(value, path, record_id, field) -> list[str]:
    if isinstance(value, list):
        keys = []
        for element in value:
            keys.extend(_item_keys(element, path, record_id, field))
        return keys
    if isinstance(value, (str, int, float, bool)):
        return [str(value)]
    got = "null" if value is None else type(value).__name__
    raise InputError(path, f"expected a word, number or list of them, got {got}", record=record_id, field=field)


def changed_items(record: dict, mode: str, path="<records>", record_id=None) -> tuple[list[str], list[str]]:
    """The changed items on the caption side and on the foil side of one record."""
    for name in ("classes", "classes_foil"):
        if name not in record:
            raise InputError(path, "missing field", record=record_id, field=name)
    caption = _item_keys(record["classes"], path, record_id, "classes")
    foil = _item_keys(record["classes_foil"], path, record_id, "classes_foil")
    if mode == "swap":
        return caption + foil, foil + caption
    return caption, foil


def frequencies(records, mode: str = "direct", path="<records>") -> tuple[Counter, Counter]:
    caption_counts, foil_counts = Counter(), Counter()
    for record_id, record in records:
        caption, foil = changed_items(record, mode, path, record_id)
        caption_counts.update(caption)
        foil_counts.update(foil)
    return caption_counts, foil_counts
