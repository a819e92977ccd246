"""valse: `files: {instrument: existence.json}`, a released `{key: record}`
file; each record needs a `caption` string and a `foil` string or `foils`
list. Missing `dataset`/`original_split`/`dataset_idx`/`image_file` become
null (VALSE's coreference files have no `dataset_idx`); `dataset` and
`split` in params.yaml, when set, replace the released values; a released
field named `id` or `source` is kept as `released_id` / `released_source`.
This lets a released benchmark be re-filtered and re-scored.
"""

from __future__ import annotations

from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import read_json, require
from foilforge.pipeline.sources.base import COMMON_FIELDS, Source, list_of, progress, reader


@reader("valse", roles=("instrument",))
def read_valse(src: Source) -> Iterator[dict]:
    path = src.file("instrument")
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object {{id: record}}, got {type(data).__name__}")
    if not data:
        raise InputError(path, "no records")
    stem = path.stem
    for key, record in progress(data.items(), f"ingest {src.name}", total=len(data), unit="record"):
        require(record, "caption", str, path, key)
        if "foil" in record or "foils" not in record:
            require(record, "foil", str, path, key)
        else:
            list_of(record, "foils", str, path, key)
        fields = {(f"released_{k}" if k in ("id", "source") else k): v for k, v in record.items()}
        for name in COMMON_FIELDS:
            fields.setdefault(name, None)
        fields.update(id=f"{src.name}:{stem}:{key}", source=src.name, valse_instrument=stem, valse_key=key)
        if src.dataset:
            fields["dataset"] = src.dataset
        if src.split is not None:
            fields["original_split"] = src.split
        yield fields
