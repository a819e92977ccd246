"""Parquet shards of the foil and score outputs (pipeline/shards.py): typed text columns, nothing lost."""

from __future__ import annotations

import json

import pytest

from foilforge.errors import InputError
from foilforge.io import dumps
from foilforge.pipeline.shards import TEXT_COLUMNS, read_shards, shards_path, write_shards


@pytest.fixture
def released_records(shared):
    """VALSE's released records of three pieces whose fields change type between them (`classes`: an int in
    counting, a string in relations; `classes_foil` a list in existence), with an id and the instrument as the stages add them."""
    records = []
    for piece in ("counting-hard", "relations", "existence"):
        released = json.loads(shared("data", "valse-dev", f"{piece}.json").read_text())
        records += [{**record, "id": f"{piece}:{key}", "instrument": piece,
                     "filters": {"length": {"score": len(record["foil"].split()), "passed": True}}}
                    for key, record in sorted(released.items())[:9]]
    return records


def test_shards_give_back_every_record_byte_for_byte(released_records, tmp_path):
    import pyarrow.dataset as ds

    assert {type(r["classes_foil"]).__name__ for r in released_records} == {"int", "str", "list"}
    directory = tmp_path / "scored" / "mixed.parquet"
    assert write_shards(directory, iter(released_records), shard_rows=10) == 27
    assert sorted(p.name for p in directory.iterdir()) == ["part-00000.parquet", "part-00001.parquet",
                                                           "part-00002.parquet"]
    back = list(read_shards(directory))
    assert [dumps(r) for r in back] == [dumps(r) for r in released_records]
    # any Parquet reader sees one table with typed text columns
    table = ds.dataset(directory, format="parquet").to_table()
    assert table.num_rows == 27 and str(table.schema.field("caption").type) == "string"
    assert table.column("id").to_pylist() == [r["id"] for r in released_records]
    assert json.loads(table.column("fields")[0].as_py())["classes"] == released_records[0]["classes"]
    assert list(table.schema.names) == [*TEXT_COLUMNS, "fields"]


def test_a_value_of_another_type_in_a_text_column_is_kept_in_fields(tmp_path):
    records = [{"id": "a", "caption": 3, "foil": None, "dataset": ["x"]}, {"id": "b", "caption": "A dog."}]
    write_shards(tmp_path / "odd.parquet", records)
    assert list(read_shards(tmp_path / "odd.parquet")) == records
    import pyarrow.parquet as pq

    row = pq.read_table(tmp_path / "odd.parquet" / "part-00000.parquet").to_pylist()[0]
    assert row["caption"] is None and json.loads(row["fields"]) == {"caption": 3, "dataset": ["x"], "foil": None}


def test_no_records_is_one_empty_shard(tmp_path):
    assert write_shards(tmp_path / "none.parquet", []) == 0
    assert list(read_shards(tmp_path / "none.parquet")) == []


def test_a_failed_write_keeps_the_previous_shards_and_leaves_no_temp(tmp_path):
    directory = tmp_path / "foils.parquet"
    write_shards(directory, [{"id": "old", "caption": "A cat."}])

    def broken():
        yield {"id": "new", "caption": "A dog."}
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        write_shards(directory, broken(), shard_rows=1)
    assert list(read_shards(directory)) == [{"id": "old", "caption": "A cat."}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foils.parquet"]


def test_unreadable_shards_name_the_file(tmp_path):
    with pytest.raises(InputError, match="no part-\\*.parquet shards"):
        list(read_shards(tmp_path))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["x"]}), tmp_path / "part-00000.parquet")
    with pytest.raises(InputError, match="part-00000.parquet.*not a foilforge record shard"):
        list(read_shards(tmp_path))


def test_the_shards_sit_next_to_the_jsonl():
    assert str(shards_path("data/scored/relations.jsonl")) == "data/scored/relations.parquet"


def test_a_record_writer_renames_into_place_only_when_done(tmp_path):
    from foilforge.pipeline.shards import RecordWriter

    path = tmp_path / "scored" / "relations.jsonl"
    records = [{"id": f"r{k}", "caption": "a dog", "foil": "a cat", "filters": {"length": {"score": k}}}
               for k in range(5)]
    with RecordWriter(path, shard_rows=2) as out:
        for record in records[:3]:
            out.write(record)
        # while it writes, nothing stands where the outputs belong
        assert not path.exists() and not shards_path(path).exists()
        assert (tmp_path / "scored" / ".relations.jsonl.partial").is_file()
    assert path.read_text() == "".join(dumps(r) + "\n" for r in records[:3])
    assert list(read_shards(shards_path(path))) == records[:3]
    assert sorted(p.name for p in shards_path(path).iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    assert {p.name for p in path.parent.iterdir()} == {"relations.jsonl", "relations.parquet"}

    with pytest.raises(RuntimeError, match="the model died"):
        with RecordWriter(path, shard_rows=2) as out:
            out.write(records[3])
            raise RuntimeError("the model died")
    # the failed run left the previous outputs and no partial files
    assert list(read_shards(shards_path(path))) == records[:3]
    assert {p.name for p in path.parent.iterdir()} == {"relations.jsonl", "relations.parquet"}


def test_a_record_writer_removes_what_a_killed_writer_left(tmp_path):
    from foilforge.pipeline.shards import RecordWriter, partial_path

    path = tmp_path / "relations.jsonl"
    partial_path(path).write_text('{"id": "half-writ')
    partial_path(shards_path(path)).mkdir()
    (partial_path(shards_path(path)) / "part-00000.parquet").write_bytes(b"PAR1")
    with RecordWriter(path) as out:
        out.write({"id": "r0", "caption": "a dog", "foil": "a cat"})
    assert path.read_text() == dumps({"id": "r0", "caption": "a dog", "foil": "a cat"}) + "\n"
    assert {p.name for p in tmp_path.iterdir()} == {"relations.jsonl", "relations.parquet"}
