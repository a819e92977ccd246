"""SugarCrepe's annotation JSON: `sugarcrepe/<instrument>.json`.

`{"0": {"filename", "caption", "negative_caption"}, ...}` with keys "0".."n-1" and `filename` relative to
the image root, as CLIP_benchmark's `clip_benchmark.datasets.sugar_crepe.SugarCrepe(root, ann_file)` and
t2v_metrics read it. Each entry also carries `id`, the record's key in `<instrument>.json` (the readers take
only the three fields above), so a harness's per-item output joins back to foilforge's records.
"""

from __future__ import annotations

import json
from pathlib import Path

from foilforge.io import atomic_write
from foilforge.pipeline.emitters import EMITTERS, Emitted, image_pairs
from foilforge.schema import ExportBlock

FOLDER = "sugarcrepe"


@EMITTERS.register("sugarcrepe.v1")
def emit_sugarcrepe(output_dir, instrument: str, rows: list[dict], settings: ExportBlock) -> Emitted:
    pairs, left_out = image_pairs(rows)
    if not pairs:
        return Emitted(left_out=left_out)
    annotations = {str(k): {"filename": row["image_file"], "caption": row["caption"],
                            "negative_caption": row["negative_caption"], "id": row["id"]}
                   for k, row in enumerate(pairs)}
    relative = f"{FOLDER}/{instrument}.json"
    # keys in numeric order ("0", "1", ..., "10"), the order CLIP_benchmark iterates them in
    with atomic_write(Path(output_dir) / relative) as handle:
        json.dump(annotations, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    return Emitted(files=[relative], records=len(pairs), left_out=left_out)
