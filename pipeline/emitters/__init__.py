"""The export's harness formats: files evaluation harnesses load as they are.

One module per format, each registering `emit(output_dir, instrument, rows, settings) -> Emitted` in
`EMITTERS` under a versioned name ("sugarcrepe.v1"); params.yaml `export.formats` names them unversioned.
An emitter reads the canonical table of one instrument (the rows of `pipeline/loadable.py`, one per
record, sorted by id) and writes its files under the export directory; a record or instrument the format
cannot hold (a multiple-choice item in a two-text format, a record without an image) is left out, and the
`Emitted` says how many and why, for the manifest and the data card. docs/harnesses.md shows the
one command per harness.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foilforge.registry import Registry
from foilforge.schema import ExportBlock

# lmms_eval_task_utils is a file the lmms_eval format copies out, not an emitter
EMITTERS = Registry("export format", packages=("foilforge.pipeline.emitters",), skip=("lmms_eval_task_utils",))


@dataclass
class Emitted:
    files: list[str] = field(default_factory=list)   # relative to the export directory
    records: int = 0                                 # how many records the files hold
    left_out: dict[str, int] = field(default_factory=dict)   # reason -> records the format cannot hold

    def as_manifest(self) -> dict:
        return {"files": sorted(self.files), "records": self.records, "left_out": dict(sorted(self.left_out.items()))}


def emit(name: str, output_dir, instrument: str, rows: list[dict], settings: ExportBlock) -> Emitted:
    return EMITTERS.get(EMITTERS.newest(name))(output_dir, instrument, rows, settings)


def image_pairs(rows: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """The rows a caption-vs-foil harness can score (a pair with an image), and what was left out and why."""
    kept, left_out = [], {}
    for row in rows:
        reason = ("multiple-choice item (no single foil)" if row["option_a"] is None else
                  "no image_file" if row["images"] is None else None)
        if reason:
            left_out[reason] = left_out.get(reason, 0) + 1
        else:
            kept.append(row)
    return kept, left_out
