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
from foilforge.io import dumps

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


class _ShardStaging:
    """Shards of at most `shard_rows` rows written into a temp directory beside `directory`, swapped in by
    `commit` (nothing under `directory` changes before that), removed by `discard`."""

    def __init__(self, directory, shard_rows: int, staging: Path | None = None):
        if not isinstance(shard_rows, int) or isinstance(shard_rows, bool) or shard_rows < 1:
            raise ValueError(f"shard_rows must be an integer >= 1, got {shard_rows!r}")
        self.directory, self.shard_rows = Path(directory), shard_rows
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        if staging is None:
            staging = Path(tempfile.mkdtemp(prefix=f".{self.directory.name}.", suffix=".tmp", dir=self.directory.parent))
        else:
            staging.mkdir()
        self.staging = staging
        self.count, self.shard, self.rows = 0, 0, []

    def add(self, record: dict) -> None:
        self.rows.append(to_row(record))
        self.count += 1
        if len(self.rows) == self.shard_rows:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(self.rows, schema=schema()), self.staging / f"part-{self.shard:05d}.parquet")
        self.shard, self.rows = self.shard + 1, []

    def commit(self) -> int:
        if self.rows or self.shard == 0:   # no records: one empty shard, so a reader still finds the schema
            self._flush()
        _replace_directory(self.staging, self.directory)
        return self.count

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def write_shards(directory, records: Iterable[dict], shard_rows: int = DEFAULT_SHARD_ROWS) -> int:
    """Write `records` (in their order) as Parquet shards of at most `shard_rows` rows into `directory`, replacing
    what was there only once all are written; returns the number of records. No records: one empty shard, so a
    reader still finds the schema."""
    staging = _ShardStaging(directory, shard_rows)
    try:
        for record in records:
            staging.add(record)
        return staging.commit()
    except BaseException:
        staging.discard()
        raise


class RecordWriter:
    """A stage's output written record by record, for a stage that streams: the JSONL at `path` and its shards
    beside it (`shards_path`), in the order written. They are written to `.<name>.partial` files beside the
    outputs and renamed into place when the `with` block ends without an error; an error removes them and
    leaves the previous outputs (or none). A killed process cannot clean up: the next writer of the same
    output removes what it left, so partial files never pile up and never stand where an output belongs.

        with RecordWriter(path, shard_rows) as out:
            for record in records:
                out.write(record)
    """

    def __init__(self, path, shard_rows: int = DEFAULT_SHARD_ROWS):
        self.path, self.shard_rows = Path(path), shard_rows
        self.partial = partial_path(self.path)
        self.partial_shards = partial_path(shards_path(self.path))

    def __enter__(self) -> "RecordWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.partial.unlink(missing_ok=True)   # a killed run's
        shutil.rmtree(self.partial_shards, ignore_errors=True)
        self._shards = _ShardStaging(shards_path(self.path), self.shard_rows, staging=self.partial_shards)
        self._handle = self.partial.open("w", encoding="utf-8", newline="\n")
        return self

    @property
    def count(self) -> int:
        """Records written so far."""
        return self._shards.count

    def write(self, record: dict) -> None:
        self._handle.write(dumps(record) + "\n")
        self._shards.add(record)

    def __exit__(self, kind, error, trace) -> bool:
        self._handle.close()
        try:
            if kind is None:
                os.replace(self.partial, self.path)
                self._shards.commit()
        finally:
            self.partial.unlink(missing_ok=True)
            self._shards.discard()
        return False


def partial_path(path) -> Path:
    """Where a streaming stage writes `path` until it is complete: `.<name>.partial` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial")


def write_records(path, records: Iterable[dict], shard_rows: int = DEFAULT_SHARD_ROWS, sort_by_id: bool = True) -> int:
    """A stage's output: the JSONL at `path` and the same records, in the same order, as shards beside it
    (`shards_path`); returns the number of records."""
    if sort_by_id:
        records = sorted(records, key=lambda r: str(r["id"]))   # write_jsonl's order, for both files
    with RecordWriter(path, shard_rows) as out:
        for record in records:
            out.write(record)
    return out.count


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
