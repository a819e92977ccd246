"""Parquet shards of a stage's records, next to the JSONL that the later stages read.

At scale (COCO train, CC3M) the foil and score stages' outputs are what other tools read: Spark, DuckDB,
pandas, `ray.data.read_parquet`, `datasets.load_dataset("parquet", ...)`. So those stages also write their
records as a directory of Parquet files, `<output stem>.parquet/part-00000.parquet`, ..., each at most
`engine.shard_rows` rows, in the JSONL's order.

A record's fields change type between instruments (`classes` is an int in counting, a string in plurals,
a list elsewhere; `dataset_idx` an int for COCO, a string for Visual7W), which one Arrow column cannot
hold. The shards' schema (`SCHEMA`) is therefore fixed and the same for every instrument:

| column | type | value |
|---|---|---|
| `id`, `sample_id`, `instrument`, `linguistic_phenomena`, `dataset`, `original_split`, `image_file`, `caption`, `foil`, `foil_method` | string | the field when it is a string; null when the record has no such field or holds another type there |
| `fields` | string (JSON) | every other field of the record as a JSON object (`filters`, `provenance`, `classes`, ...), and any of the columns above whose value is not a string |

So the common text columns are typed and filterable, nothing is lost, and `read_shards` gives back the
very records (`tests/test_shards.py` rewrites the JSONL from the shards byte for byte). The schema's
metadata names the format (`foilforge.record_shards` = `FORMAT_VERSION`) and which column holds what.

Writing is atomic for the directory as a whole: shards go to a temp directory beside it, which replaces
the old directory only once every shard is written, so a killed stage leaves the previous shards or none.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from foilforge.errors import InputError
from foilforge.io import dumps, write_jsonl

FORMAT_VERSION = "1"
TEXT_COLUMNS = ("id", "sample_id", "instrument", "linguistic_phenomena", "dataset", "original_split", "image_file",
                "caption", "foil", "foil_method")
FIELDS_COLUMN = "fields"
DEFAULT_SHARD_ROWS = 100_000


def schema():
    import pyarrow as pa

    columns = [pa.field(name, pa.string()) for name in TEXT_COLUMNS] + [pa.field(FIELDS_COLUMN, pa.string())]
    metadata = {"foilforge.record_shards": FORMAT_VERSION, "foilforge.text_columns": ",".join(TEXT_COLUMNS),
                "foilforge.fields_column": FIELDS_COLUMN}
    return pa.schema(columns, metadata=metadata)


def shards_path(jsonl_path) -> Path:
    """Where the shards of a stage output go: `data/scored/relations.jsonl` -> `data/scored/relations.parquet`."""
    path = Path(jsonl_path)
    return path.with_suffix(".parquet")


def to_row(record: dict) -> dict:
    row = {name: record[name] if isinstance(record.get(name), str) else None for name in TEXT_COLUMNS}
    rest = {key: value for key, value in record.items() if not (key in TEXT_COLUMNS and isinstance(value, str))}
    row[FIELDS_COLUMN] = dumps(rest)
    return row


def from_row(row: dict) -> dict:
    record = {name: row[name] for name in TEXT_COLUMNS if row[name] is not None}
    record.update(json.loads(row[FIELDS_COLUMN]))
    return record


def write_shards(directory, records: Iterable[dict], shard_rows: int = DEFAULT_SHARD_ROWS) -> int:
    """Write `records` (in their order) as Parquet shards of at most `shard_rows` rows into `directory`, replacing
    what was there only once all are written; returns the number of records. No records: one empty shard, so a
    reader still finds the schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(shard_rows, int) or isinstance(shard_rows, bool) or shard_rows < 1:
        raise ValueError(f"shard_rows must be an integer >= 1, got {shard_rows!r}")
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    table_schema = schema()
    count, shard, rows = 0, 0, []

    def flush():
        nonlocal shard, rows
        table = pa.Table.from_pylist(rows, schema=table_schema)
        pq.write_table(table, staging / f"part-{shard:05d}.parquet")
        shard, rows = shard + 1, []

    try:
        for record in records:
            rows.append(to_row(record))
            count += 1
            if len(rows) == shard_rows:
                flush()
        if rows or shard == 0:
            flush()
        _replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return count


def write_records(path, records: Iterable[dict], shard_rows: int = DEFAULT_SHARD_ROWS, sort_by_id: bool = True) -> int:
    """A stage's output: the JSONL at `path` and the same records, in the same order, as shards beside it
    (`shards_path`); returns the number of records."""
    records = list(records)
    if sort_by_id:
        records.sort(key=lambda r: str(r["id"]))   # write_jsonl's order, for both files
    write_jsonl(path, records, sort_by_id=False)
    return write_shards(shards_path(path), records, shard_rows)


def _replace_directory(staging: Path, directory: Path) -> None:
    """Swap the finished staging directory in for `directory` (a rename of each; the old one is removed last)."""
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        os.replace(directory, old)
    os.replace(staging, directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_shards(directory) -> Iterator[dict]:
    """The records of a shard directory, in the order they were written."""
    import pyarrow.parquet as pq

    directory = Path(directory)
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        raise InputError(directory, "no part-*.parquet shards in this directory")
    for part in parts:
        table = pq.read_table(part)
        if table.schema.metadata is None or table.schema.metadata.get(b"foilforge.record_shards") is None:
            raise InputError(part, "not a foilforge record shard (no foilforge.record_shards in its schema metadata)")
        for index, row in enumerate(table.to_pylist()):
            try:
                yield from_row(row)
            except (KeyError, json.JSONDecodeError, TypeError) as error:
                raise InputError(part, f"unreadable row: {error}", record=row.get("id") or index,
                                 field=FIELDS_COLUMN) from None
