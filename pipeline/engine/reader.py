"""A JSONL file's records in batches, read when needed: in order here, or by byte range in Ray's read tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


class JsonlBatches:
    """The records of a JSONL file in batches of `size`, read when needed: iterating gives the batches in order
    (one in memory at a time), and on Ray each read task reads its own batch from the file, by the byte range
    `spans` found, so the stage process never holds the input. The file must then be where every node of
    the cluster can read it, as for any Ray Data read (one machine, or shared storage)."""

    def __init__(self, path, size: int):
        self.path, self.size = Path(path), size

    def __iter__(self) -> Iterator[list[dict]]:
        from foilforge.io import iter_jsonl

        part = []
        for record in iter_jsonl(self.path, allow_empty=True):
            part.append(record)
            if len(part) == self.size:
                yield part
                part = []
        if part:
            yield part

    def spans(self) -> list[tuple[int, int]]:
        """(first byte, end byte) of each batch: `size` non-blank lines each, as `iter_jsonl` counts them."""
        spans, start, offset, lines = [], 0, 0, 0
        with self.path.open("rb") as handle:
            for raw in handle:
                offset += len(raw)
                if raw.decode("utf-8").strip():   # what iter_jsonl skips (the stage read the file as UTF-8 already)
                    lines += 1
                    if lines == self.size:
                        spans.append((start, offset))
                        start, lines = offset, 0
        if lines:
            spans.append((start, offset))
        return spans


def read_span(path: str, start: int, end: int) -> list[dict]:
    """The records of bytes [start, end) of a JSONL file (a batch of `JsonlBatches.spans`)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    # split at newlines only, as reading a file by lines does (a record may hold U+2028, which splitlines cuts at)
    lines = (raw.decode("utf-8") for raw in data.split(b"\n"))
    return [json.loads(line) for line in lines if line.strip()]
