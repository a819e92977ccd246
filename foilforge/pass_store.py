"""The pass store: what one forward pass of a model gives for one text, kept across stages and runs.

A text's model outputs (foilforge/lm.py: a causal LM's summed log-probability and token count, the pooled
hidden states the probes read) are computed in a canonical way that makes them a function of the model and the
text alone (batches of texts of one token length, no padding: foilforge/batching.py `same_length_batches`).
So they can be kept content-addressed: one row per (model key, text, field), the model key a digest of
everything that decides the bits (the model's files, dtype, device kind, the scoring code and library versions:
foilforge/lm.py `StoredPasses.store_key`), the text by its SHA-256. foil, score, baseline and evaluate then run a text through
a model once between them, whichever stage asks first, and a warm store gives the bytes a cold one gives.

Where: $FOILFORGE_SCORE_CACHE/passes.sqlite3 (`make repro` sets the variable to .foilforge-cache/scores, which
DVC does not track; unset or "off": no store, every pass is computed, with the same bits). SQLite in WAL mode:
several worker processes read and write at once, a write is one transaction (a reader never sees half of it),
and a writer waits for another's lock (up to `TIMEOUT_S`). Each row carries a checksum of its key and value: a
row that does not match it (a disk or copy fault, an edit by hand) is reported once and computed again, never
read; a file that is no SQLite database is reported and the run goes on without the store.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)

SCORE_CACHE_ENV = "FOILFORGE_SCORE_CACHE"
STORE_FILE = "passes.sqlite3"
TIMEOUT_S = 120.0  # how long a writer waits for another process's write lock

_SCHEMA = """CREATE TABLE IF NOT EXISTS passes (
    model TEXT NOT NULL, text BLOB NOT NULL, field TEXT NOT NULL, value BLOB NOT NULL, checksum BLOB NOT NULL,
    PRIMARY KEY (model, text, field)) WITHOUT ROWID"""


def store_dir() -> Path | None:
    """The store's directory ($FOILFORGE_SCORE_CACHE; unset or "off": none)."""
    value = os.environ.get(SCORE_CACHE_ENV)
    return Path(value) if value and value != "off" else None


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def _checksum(model: str, text: bytes, field: str, value: bytes) -> bytes:
    digest = hashlib.sha256()
    for part in (model.encode(), text, field.encode(), value):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.digest()[:16]


class PassStore:
    """One SQLite file of pass outputs; a connection per process (a forked worker opens its own)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._connection = self._pid = None
        self.broken = False
        self.bad_rows = 0

    def _connect(self) -> sqlite3.Connection | None:
        if self.broken:
            return None
        if self._connection is None or self._pid != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, timeout=TIMEOUT_S, isolation_level=None)
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(_SCHEMA)
            except (sqlite3.DatabaseError, OSError) as err:
                self._give_up(err)
                return None
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def _give_up(self, err: Exception) -> None:
        self.broken = True
        log.warning("the pass store %s cannot be used (%s: %s); computing every pass without it. Remove the file "
                    "to start a new store", self.path, type(err).__name__, err)

    def get(self, model: str, texts: list[str], fields: list[str]) -> dict[str, dict[str, bytes]]:
        """{text: {field: value}} of the stored rows among `texts` x `fields` (missing or unsound rows left out)."""
        connection = self._connect()
        if connection is None or not texts or not fields:
            return {}
        keys = {text_key(t): t for t in texts}
        found: dict[str, dict[str, bytes]] = {}
        bad = 0
        field_marks = ",".join("?" * len(fields))
        key_list = list(keys)
        try:
            for start in range(0, len(key_list), 500):
                part = key_list[start:start + 500]
                rows = connection.execute(
                    f"SELECT text, field, value, checksum FROM passes WHERE model = ? AND field IN ({field_marks}) "
                    f"AND text IN ({','.join('?' * len(part))})", [model, *fields, *part]).fetchall()
                for key, field, value, checksum in rows:
                    if not isinstance(value, bytes) or checksum != _checksum(model, key, field, value):
                        bad += 1
                        continue
                    found.setdefault(keys[key], {})[field] = value
        except sqlite3.DatabaseError as err:
            self._give_up(err)
            return {}
        if bad:
            self.bad_rows += bad
            log.warning("the pass store %s holds %d row(s) whose checksum does not match; they are computed again "
                        "and replaced", self.path, bad)
        return found

    def put(self, model: str, rows: dict[str, dict[str, bytes]]) -> None:
        """Store {text: {field: value}} in one transaction (a row already there is replaced by the same bytes,
        or, where it was unsound, by sound ones)."""
        connection = self._connect()
        if connection is None or not rows:
            return
        values = []
        for text, fields in rows.items():
            key = text_key(text)
            values += [(model, key, field, value, _checksum(model, key, field, value)) for field, value in fields.items()]
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany("INSERT OR REPLACE INTO passes VALUES (?, ?, ?, ?, ?)", values)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        except sqlite3.DatabaseError as err:
            self._give_up(err)

    def close(self) -> None:
        if self._connection is not None and self._pid == os.getpid():
            self._connection.close()
        self._connection = None


_STORES: dict[Path, PassStore] = {}


def open_store() -> PassStore | None:
    """The store $FOILFORGE_SCORE_CACHE names (one object per path in a process), or None."""
    root = store_dir()
    if root is None:
        return None
    path = (root / STORE_FILE).resolve()
    if path not in _STORES:
        _STORES[path] = PassStore(path)
    return _STORES[path]
