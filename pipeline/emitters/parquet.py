"""The canonical table as Parquet: `parquet/<instrument>.parquet`, one row per record.

The same rows and columns as `rows/<instrument>.jsonl` (pipeline/loadable.py), typed by an explicit schema (the
dataset card's features, `loadable.FEATURES`) so an instrument whose column holds only nulls still has its type,
and in one fixed row order (by id).
"""

from __future__ import annotations

from pathlib import Path

from foilforge.io import atomic_write
from foilforge.pipeline.emitters import EMITTERS, Emitted
from foilforge.schema import ExportBlock

FOLDER = "parquet"


def arrow_table(rows: list[dict]):
    import pyarrow as pa

    from foilforge.pipeline.loadable import COLUMNS, arrow_schema

    return pa.Table.from_pylist([{c: row.get(c) for c in COLUMNS} for row in rows], schema=arrow_schema())


@EMITTERS.register("parquet.v1")
def emit_parquet(output_dir, instrument: str, rows: list[dict], settings: ExportBlock) -> Emitted:
    import pyarrow.parquet as pq

    relative = f"{FOLDER}/{instrument}.parquet"
    with atomic_write(Path(output_dir) / relative, mode="wb") as handle:
        pq.write_table(arrow_table(rows), handle)
    return Emitted(files=[relative], records=len(rows))
