"""Reading inputs with precise errors, and writing outputs atomically.

Every stage writes through `atomic_write`: the output appears whole or not at
all, so a failed stage never leaves a half-written file for DVC to cache.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from foilforge.errors import InputError


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Yield a file handle on a temp file next to `path`; rename over `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding, newline=None if "b" in mode else "\n") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dumps(record: Any) -> str:
    """Canonical JSON for one record: stable key order, so equal inputs give byte-identical files."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def write_jsonl(path, records: Iterable[dict], sort_by_id: bool = True) -> int:
    records = list(records)
    if sort_by_id:
        records.sort(key=lambda r: str(r["id"]))
    with atomic_write(path) as handle:
        for record in records:
            handle.write(dumps(record) + "\n")
    return len(records)


def write_json(path, obj: Any, indent: int | None = 2) -> None:
    with atomic_write(path) as handle:
        json.dump(obj, handle, ensure_ascii=False, indent=indent, sort_keys=True)
        handle.write("\n")


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise InputError(path, "file not found")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a file")
    if path.stat().st_size == 0:
        raise InputError(path, "file is empty")


def _decode_error(path: Path, err: UnicodeDecodeError, line: int | None = None) -> InputError:
    where = f"line {line}" if line is not None else f"byte {err.start}"
    return InputError(path, f"not valid UTF-8 at {where} (byte 0x{err.object[err.start]:02x})")


def read_json(path) -> Any:
    """Load one JSON document; truncated or non-UTF-8 files give an InputError."""
    path = Path(path)
    _check_exists(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _decode_error(path, err) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(path, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None


def iter_jsonl(path, allow_empty: bool = False) -> Iterator[dict]:
    """Stream a JSONL file, one dict a line; the error names the line number.

    `allow_empty`: an empty file is zero records (a stage's output that kept nothing), not an error.
    """
    path = Path(path)
    if allow_empty and path.is_file() and path.stat().st_size == 0:
        return
    _check_exists(path)
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _decode_error(path, err, lineno) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(path, f"invalid JSON: {err.msg}", record=f"line {lineno}") from None
            if not isinstance(record, dict):
                raise InputError(path, f"expected a JSON object, got {type(record).__name__}", record=f"line {lineno}")
            yield record


def read_jsonl(path, allow_empty: bool = False) -> list[dict]:
    return list(iter_jsonl(path, allow_empty))


def _utf8_lines(handle, path: Path) -> Iterator[str]:
    """Decode a binary file line by line, so a bad byte is reported on its own line."""
    for lineno, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(path, f"not valid UTF-8 (byte 0x{err.object[err.start]:02x})", record=f"line {lineno}") from None


def iter_csv(path, expected_header: list[str] | None = None, has_header: bool = True,
             required_prefix: bool = False) -> Iterator[tuple[int, dict | list]]:
    """Stream CSV rows as (row number, dict) without loading the file; row 1 is the first line.

    `expected_header` is checked exactly, or as a prefix when `required_prefix`
    (Open Images train boxes add XClick columns after the documented ones).
    Without a header, rows come back as lists.
    """
    path = Path(path)
    _check_exists(path)
    with open(path, "rb") as handle:
        reader = csv.reader(_utf8_lines(handle, path))
        rowno = 0
        header = None
        if has_header:
            header = [h.strip().lstrip("\ufeff") for h in next(reader, [])]
            rowno = 1
            if expected_header is not None:
                ok = header[: len(expected_header)] == expected_header if required_prefix else header == expected_header
                if not ok:
                    raise InputError(path, f"wrong CSV header: expected {','.join(expected_header)}, got {','.join(header)}",
                                     record="header")
        for row in reader:
            rowno += 1
            if not row:
                continue
            if header is None:
                yield rowno, row
                continue
            if len(row) < len(header):
                raise InputError(path, f"expected {len(header)} columns, got {len(row)}", record=f"row {rowno}")
            yield rowno, dict(zip(header, row))


def require(record: dict, field: str, kinds, path, record_id) -> Any:
    """Fetch `record[field]`, checking presence and type, with the standard message."""
    if not isinstance(record, dict):
        raise InputError(path, f"expected an object, got {type(record).__name__}", record=record_id)
    if field not in record:
        raise InputError(path, "missing field", record=record_id, field=field)
    value = record[field]
    if not isinstance(kinds, tuple):
        kinds = (kinds,)
    # bool is an int in Python; a JSON true where a number is expected is still a type error
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise InputError(path, f"expected {names}, got {type(value).__name__} ({value!r:.40})", record=record_id, field=field)
    return value


def file_sha256(path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()
