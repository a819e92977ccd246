"""Released benchmark files as foilforge records: VALSE JSON, SugarCrepe JSON, foilforge JSONL.

`foilforge refilter` re-filters such a file; the adversarial filter and the release gate read the same files as a
pool of pairs transfer attackers learn from (filters/adversarial.py `pool_records`).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from foilforge.errors import InputError
from foilforge.io import read_json

FORMATS = ("valse", "sugarcrepe", "foilforge")
#: where each format keeps the foil and the image file name
FOIL_FIELD = {"valse": "foil", "sugarcrepe": "negative_caption", "foilforge": "foil"}
IMAGE_FIELD = {"valse": "image_file", "sugarcrepe": "filename", "foilforge": "image_file"}


def released_foil(fmt: str, row: dict):
    """A released record's foil: its format's foil field, or the first of VALSE's `foils` list."""
    foil = row.get(FOIL_FIELD[fmt])
    if foil is None and fmt == "valse" and isinstance(row.get("foils"), list) and row["foils"]:
        foil = row["foils"][0]
    return foil


def detect_format(path: Path, data) -> str:
    if path.suffix == ".jsonl":
        return "foilforge"
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        first = next(iter(data.values()))
        if "negative_caption" in first:
            return "sugarcrepe"
        if "foil" in first or "foils" in first:
            return "valse"
    raise InputError(path, f"unknown benchmark format: expected one of {', '.join(FORMATS)} (VALSE JSON {{id: "
                           "{caption, foil, ...}}}, SugarCrepe JSON {\"0\": {filename, caption, negative_caption}}, "
                           "foilforge JSONL with id, caption, foil)")


def read_released(path) -> tuple[str, list[tuple[str, dict]]]:
    """(format, [(key, record as released)]) in the file's order."""
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise InputError(path, f"not JSON: {err.msg}", record=f"line {number}") from err
                if not isinstance(record, dict) or "id" not in record:
                    raise InputError(path, "expected a JSON object with an id", record=f"line {number}", field="id")
                rows.append((str(record["id"]), record))
        return "foilforge", rows
    data = read_json(path)
    return detect_format(path, data), list(data.items())


def _differing_words(caption: str, foil: str) -> tuple[list[str], list[str]]:
    a, b = caption.lower().split(), foil.lower().split()
    removed, added = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def to_records(fmt: str, rows: list[tuple[str, dict]], path, instrument: str) -> list[dict]:
    """foilforge records (id, sample_id, caption, foil, classes, classes_foil) of the released pairs."""
    foil_field = FOIL_FIELD[fmt]
    records = []
    for key, row in rows:
        if not isinstance(row, dict):
            raise InputError(path, "expected a JSON object", record=key)
        caption = row.get("caption")
        foil = released_foil(fmt, row)
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, "missing or empty: every record needs a caption and a foil", record=key,
                             field="caption")
        if not isinstance(foil, str):
            raise InputError(path, "missing: every record needs a caption and a foil", record=key, field=foil_field)
        # an empty foil, or one equal to its caption, is refused later (foilforge/validity.py), and counted
        if "classes" in row and "classes_foil" in row and row["classes"] is not None and row["classes_foil"] is not None:
            classes, classes_foil = row["classes"], row["classes_foil"]
        else:
            classes, classes_foil = _differing_words(caption, foil)
        image = row.get(IMAGE_FIELD[fmt])
        records.append({"id": f"{instrument}:{key}", "sample_id": f"{instrument}:{key}", "released_key": key,
                        "caption": caption, "foil": foil, "classes": classes, "classes_foil": classes_foil,
                        **({"image_file": image} if isinstance(image, str) else {}),
                        **({"mturk": row["mturk"]} if isinstance(row.get("mturk"), dict) else {})})
    return records
