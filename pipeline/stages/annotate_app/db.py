"""The annotation database: items, annotators (token hashes only) and answers, in SQLite WAL mode.

Every write is one `BEGIN IMMEDIATE ... COMMIT` on a fresh connection with
`synchronous=FULL`: when a request returns 200 its answer is on disk, so a
killed server loses nothing it acknowledged. The primary key (annotator, item)
makes a second answer impossible, whatever the timing of concurrent requests.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    item_id TEXT PRIMARY KEY,
    instrument TEXT NOT NULL,
    position INTEGER NOT NULL,
    image_file TEXT NOT NULL,
    text_1 TEXT NOT NULL,
    text_2 TEXT NOT NULL,
    caption_first INTEGER NOT NULL  -- the key: never sent to annotators
);
CREATE TABLE IF NOT EXISTS annotators (
    annotator_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    token_sha256 TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS answers (
    annotator_id INTEGER NOT NULL REFERENCES annotators(annotator_id),
    item_id TEXT NOT NULL REFERENCES items(item_id),
    choice TEXT NOT NULL,
    answered_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (annotator_id, item_id)
);
CREATE INDEX IF NOT EXISTS answers_by_item ON answers(item_id);
"""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def connect(path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, full fsync, waiting on locks."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


@contextlib.contextmanager
def transaction(path):
    """BEGIN IMMEDIATE (take the write lock at once, so check-then-insert is atomic), COMMIT or ROLLBACK."""
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


def init(path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(path)
    try:
        conn.executescript(SCHEMA)
    finally:
        conn.close()
    return path


def add_annotator(path, name: str) -> str:
    """Register an annotator; return a new token (only its sha256 is stored, so it is shown once)."""
    init(path)
    token = secrets.token_urlsafe(24)
    with transaction(path) as conn:
        if conn.execute("SELECT 1 FROM annotators WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"annotator {name!r} already exists")
        conn.execute("INSERT INTO annotators(name, token_sha256) VALUES (?, ?)", (name, token_hash(token)))
    return token


def load_items(path, instrument: str, items: list[dict]) -> tuple[int, int]:
    """Insert items (item_id, image_file, text_1, text_2, caption_first); existing identical ones are kept.

    Returns (added, already there). An item id that exists with other content is an error: annotators may
    already have answered the old version.
    """
    init(path)
    added = same = 0
    with transaction(path) as conn:
        start = conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM items").fetchone()[0]
        for offset, item in enumerate(items):
            row = conn.execute("SELECT instrument, image_file, text_1, text_2, caption_first FROM items WHERE item_id = ?",
                               (item["item_id"],)).fetchone()
            new = (instrument, item["image_file"], item["text_1"], item["text_2"], int(item["caption_first"]))
            if row is not None:
                if tuple(row) != new:
                    raise ValueError(f"item {item['item_id']!r} is already loaded with different content")
                same += 1
                continue
            conn.execute("INSERT INTO items(item_id, instrument, position, image_file, text_1, text_2, caption_first) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", (item["item_id"], instrument, start + offset, *new[1:]))
            added += 1
    return added, same


def answers_for(path, instrument: str) -> list[tuple[str, str, str, str]]:
    """(item_id, annotator name, choice, answered_at) for one instrument, sorted by item then annotator."""
    conn = connect(path)
    try:
        return conn.execute(
            "SELECT a.item_id, n.name, a.choice, a.answered_at FROM answers a "
            "JOIN annotators n ON n.annotator_id = a.annotator_id JOIN items i ON i.item_id = a.item_id "
            "WHERE i.instrument = ? ORDER BY a.item_id, n.name", (instrument,)).fetchall()
    finally:
        conn.close()


def instruments(path) -> list[str]:
    conn = connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT DISTINCT instrument FROM items ORDER BY instrument")]
    finally:
        conn.close()
