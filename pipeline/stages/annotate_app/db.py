"""The annotation database: items, annotators (token hashes only) and answers, in SQLite WAL mode.

Every write is one `BEGIN IMMEDIATE ... COMMIT` on a fresh connection with
`synchronous=FULL`: when a request returns 200 its answer is on disk, so a
killed server loses nothing it acknowledged. The primary key (annotator, item)
makes a second answer impossible, whatever the timing of concurrent requests.

Two kinds of item share the tables: a pair (`kind` 'pair': one image, two texts, one `choice`) and a
Winoground group (`kind` 'group': images A and B, two texts, and for each text the image it describes,
`choice` for text 1 and `choice_2` for text 2). The group columns are added to an existing database
on first use (`MIGRATIONS`), so databases made before them keep their items and answers.
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
#: columns added after the first schema: (table, column, definition); only ever appended to
MIGRATIONS = (
    ("items", "kind", "TEXT NOT NULL DEFAULT 'pair'"),
    ("items", "image_file_b", "TEXT"),          # a group's image B (image_file is image A)
    ("items", "image_first", "INTEGER"),        # a group's key: image A is the record's own image; never sent
    ("answers", "choice_2", "TEXT"),            # a group's answer for text 2 (choice: for text 1)
)


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
    migrate(path)
    return path


def _columns(conn, table: str) -> set:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def migrate(path) -> list[str]:
    """Add the columns of MIGRATIONS that the database lacks (additive: no row is changed); returns those added.
    Under the write lock, so two processes starting at once add each column once."""
    conn = connect(path)
    try:
        if all(column in _columns(conn, table) for table, column, _ in MIGRATIONS):
            return []
    finally:
        conn.close()
    added = []
    with transaction(path) as conn:
        for table, column, definition in MIGRATIONS:
            if column not in _columns(conn, table):
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                added.append(f"{table}.{column}")
    return added


def add_annotator(path, name: str) -> str:
    """Register an annotator; return a new token (only its sha256 is stored, so it is shown once)."""
    init(path)
    token = secrets.token_urlsafe(24)
    with transaction(path) as conn:
        if conn.execute("SELECT 1 FROM annotators WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"annotator {name!r} already exists")
        conn.execute("INSERT INTO annotators(name, token_sha256) VALUES (?, ?)", (name, token_hash(token)))
    return token


ITEM_COLUMNS = ("instrument", "kind", "image_file", "image_file_b", "text_1", "text_2", "caption_first", "image_first")


def load_items(path, instrument: str, items: list[dict]) -> tuple[int, int]:
    """Insert items (item_id, image_file, text_1, text_2, caption_first; a group also kind 'group', image_file_b
    and image_first); existing identical ones are kept.

    Returns (added, already there). An item id that exists with other content is an error: annotators may
    already have answered the old version.
    """
    init(path)
    added = same = 0
    with transaction(path) as conn:
        start = conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM items").fetchone()[0]
        for offset, item in enumerate(items):
            row = conn.execute(f"SELECT {', '.join(ITEM_COLUMNS)} FROM items WHERE item_id = ?",
                               (item["item_id"],)).fetchone()
            group = item.get("kind", "pair") == "group"
            new = (instrument, "group" if group else "pair", item["image_file"],
                   item["image_file_b"] if group else None, item["text_1"], item["text_2"], int(item["caption_first"]),
                   int(item["image_first"]) if group else None)
            if row is not None:
                if tuple(row) != new:
                    raise ValueError(f"item {item['item_id']!r} is already loaded with different content")
                same += 1
                continue
            conn.execute(f"INSERT INTO items(item_id, position, {', '.join(ITEM_COLUMNS)}) "
                         f"VALUES (?, ?, {', '.join('?' * len(ITEM_COLUMNS))})", (item["item_id"], start + offset, *new))
            added += 1
    return added, same


def answers_for(path, instrument: str, kind: str = "pair") -> list[tuple]:
    """One instrument's answers, sorted by item then annotator: (item_id, annotator name, choice, answered_at) for
    its pairs; (item_id, annotator name, text 1's answer, text 2's answer, answered_at) for its groups."""
    init(path)
    answer = "a.choice, a.choice_2" if kind == "group" else "a.choice"
    conn = connect(path)
    try:
        return conn.execute(
            f"SELECT a.item_id, n.name, {answer}, a.answered_at FROM answers a "
            "JOIN annotators n ON n.annotator_id = a.annotator_id JOIN items i ON i.item_id = a.item_id "
            "WHERE i.instrument = ? AND i.kind = ? ORDER BY a.item_id, n.name", (instrument, kind)).fetchall()
    finally:
        conn.close()


def instruments(path, kind: str | None = None) -> list[str]:
    """The instruments with items loaded (of one kind, 'pair' or 'group', when given)."""
    init(path)
    conn = connect(path)
    try:
        if kind is None:
            return [r[0] for r in conn.execute("SELECT DISTINCT instrument FROM items ORDER BY instrument")]
        return [r[0] for r in conn.execute("SELECT DISTINCT instrument FROM items WHERE kind = ? ORDER BY instrument",
                                           (kind,))]
    finally:
        conn.close()
