"""A stage's finished batches on disk, so a killed stage resumes from them (`BatchJournal`)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import pickle
from pathlib import Path
from typing import Iterable

log = logging.getLogger(__name__)


class BatchJournal:
    """The finished batches of one stage run, on disk: a stream of length-prefixed pickled (key, result) entries.

    A batch's key is the sha256 of the run's `identity` (what else decides the result: the worker, its
    settings, the whole input when the work reads corpus-level state) and the batch itself, so a changed
    setting or input never reuses a stale result. An entry is appended and fsynced as its batch comes back; a
    kill loses at most the entry being written, whose torn tail is cut off when the journal is opened. The
    file is this machine's own cache (`--cache-dir`), read only by the stage that wrote it.
    """

    def __init__(self, path, identity: str):
        self.path = Path(path)
        self.identity = identity
        self.reused = self.written = 0
        self._done: dict[str, object] = {}
        if self.path.exists():
            with self.path.open("r+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                data = handle.read()
                good = 0
                # each entry: its length (8 bytes, big-endian), then the pickled (key, result)
                while good + 8 <= len(data):
                    size = int.from_bytes(data[good : good + 8], "big")
                    if good + 8 + size > len(data):
                        break
                    try:
                        key, result = pickle.loads(data[good + 8 : good + 8 + size])
                    except Exception as error:  # a damaged entry: it and what follows it are run again
                        log.warning("journal %s: entry at byte %d unreadable (%s: %s); its batch and the later "
                                    "ones are run again", self.path, good, type(error).__name__, error)
                        break
                    self._done[key] = result
                    good += 8 + size
                if good < len(data):
                    handle.truncate(good)  # the entry a kill cut short, or the next append would follow it

    def key(self, batch: list, threads: int | None = None) -> str:
        """The batch's key under this run's identity; `threads`, the torch threads its worker sums with, is part
        of it (a batch scored under another count has other bits)."""
        return journal_identity(self.identity, threads, batch)

    def get(self, key: str):
        if key in self._done:
            self.reused += 1
            return True, self._done[key]
        return False, None

    def put(self, key: str, result) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            blob = pickle.dumps((key, result), protocol=4)
            handle.write(len(blob).to_bytes(8, "big") + blob)
            handle.flush()
            os.fsync(handle.fileno())
        self._done[key] = result
        self.written += 1

    def finish(self) -> None:
        """The stage's output is written: the journal has done its job (DVC's cache keeps the output)."""
        log.info("journal %s: %d batches reused, %d run", self.path, self.reused, self.written)
        self.path.unlink(missing_ok=True)


def journal_identity(*parts) -> str:
    """A run's identity for BatchJournal from JSON-able parts (params, names, the input's records)."""
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def journaled(journal: BatchJournal | None, parts: Iterable[list], threads, worker_class) -> tuple[list, dict]:
    """Every batch's journal key, and the results the journal holds by batch number (none without a journal)."""
    if journal is None:
        return [], {}
    keys, found = [], {}
    for k, part in enumerate(parts):
        keys.append(journal.key(part, threads))
        hit, result = journal.get(keys[k])
        if hit:
            found[k] = result
    log_reused(worker_class, len(found), len(keys), journal)
    return keys, found


def log_reused(worker_class, reused: int, total: int, journal: BatchJournal | None) -> None:
    if journal is not None and reused:
        log.info("%s: %d of %d batches taken from the journal %s", worker_class.__name__, reused, total, journal.path)
