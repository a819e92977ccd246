"""VLMEvalKit's multiple-choice TSV: `vlmevalkit/foilforge_<instrument>.tsv`.

VLMEvalKit is not on PyPI, so this follows its documented custom-MCQ layout: one row per question with
`index` (int), `image_path` (used when a row has no base64 `image`), `question`, the options `A`, `B`, the
correct letter in `answer`, and `category`; `id` joins a row back to the record. Copy the file to
VLMEvalKit's data folder (`$LMUData`) and run it by its file name (docs/harnesses.md).
"""

from __future__ import annotations

import csv
from pathlib import Path

from foilforge.io import atomic_write
from foilforge.pipeline.emitters import EMITTERS, Emitted, image_pairs
from foilforge.schema import ExportBlock

FOLDER = "vlmevalkit"
HEADER = ("index", "id", "image_path", "question", "A", "B", "answer", "category")
QUESTION = "Which caption describes the image?"


@EMITTERS.register("vlmevalkit.v1")
def emit_vlmevalkit(output_dir, instrument: str, rows: list[dict], settings: ExportBlock) -> Emitted:
    pairs, left_out = image_pairs(rows)
    if not pairs:
        return Emitted(left_out=left_out)
    relative = f"{FOLDER}/foilforge_{instrument}.tsv"
    with atomic_write(Path(output_dir) / relative, mode="w") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(HEADER)
        for index, row in enumerate(pairs):
            writer.writerow([index, row["id"], row["images"], QUESTION, row["option_a"], row["option_b"],
                             row["correct_option"], row["linguistic_phenomena"] or instrument])
    return Emitted(files=[relative], records=len(pairs), left_out=left_out)
