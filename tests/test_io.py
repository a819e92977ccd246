"""Atomic writes and precise input errors (foilforge/io.py)."""


import pytest

from foilforge.errors import InputError
from foilforge.io import atomic_write, iter_csv, iter_jsonl, read_json, require, write_jsonl


def test_atomic_write_leaves_old_file_when_writer_fails(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(out) as handle:
            handle.write("half")
            raise RuntimeError("boom")
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left behind


def test_write_jsonl_sorts_by_id_and_is_byte_stable(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, [{"id": "2", "x": 1, "a": 0}, {"id": "1", "y": "é"}])
    write_jsonl(b, [{"id": "1", "y": "é"}, {"a": 0, "x": 1, "id": "2"}])
    assert a.read_bytes() == b.read_bytes()
    assert a.read_text(encoding="utf-8").splitlines() == ['{"id": "1", "y": "é"}', '{"a": 0, "id": "2", "x": 1}']


def test_read_json_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError, match=r"nope\.json: file not found$"):
        read_json(missing)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(InputError, match=r"empty\.json: file is empty$"):
        read_json(empty)
    truncated = tmp_path / "trunc.json"
    truncated.write_text('{"images": [1, 2')
    with pytest.raises(InputError, match=r"trunc\.json: invalid JSON at line 1, column 17"):
        read_json(truncated)
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"caption": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(InputError, match=r"latin\.json: not valid UTF-8 at byte 16 \(byte 0xe9\)"):
        read_json(latin)


def test_iter_jsonl_names_the_line(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2\n')
    with pytest.raises(InputError) as err:
        list(iter_jsonl(path))
    assert str(err.value).startswith(f"{path}, record line 3: invalid JSON")


def test_require_names_record_and_field(tmp_path):
    rec = {"id": 7, "caption": 3}
    with pytest.raises(InputError) as err:
        require(rec, "caption", str, "f.json", 7)
    assert str(err.value) == "f.json, record 7, field 'caption': expected str, got int (3)"
    with pytest.raises(InputError) as err:
        require(rec, "image_file", str, "f.json", 7)
    assert str(err.value) == "f.json, record 7, field 'image_file': missing field"
    with pytest.raises(InputError, match="expected int, got bool"):
        require({"n": True}, "n", int, "f.json", 0)


def test_iter_csv_checks_header(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    assert list(iter_csv(path, ["a", "b"])) == [(2, {"a": "1", "b": "2"})]
    with pytest.raises(InputError) as err:
        list(iter_csv(path, ["a", "c"]))
    assert str(err.value) == f"{path}, record header: wrong CSV header: expected a,c, got a,b"


def test_empty_jsonl_is_an_error_unless_allowed(tmp_path):
    from foilforge.io import read_jsonl

    path = tmp_path / "kept.jsonl"
    path.write_bytes(b"")
    with pytest.raises(InputError, match=r"kept.jsonl: file is empty"):
        read_jsonl(path)
    assert read_jsonl(path, allow_empty=True) == []
    with pytest.raises(InputError, match=r"file not found"):
        read_jsonl(tmp_path / "missing.jsonl", allow_empty=True)
