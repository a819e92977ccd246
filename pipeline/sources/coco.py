"""coco: `files: {captions: captions_<split><year>.json}`, optionally
`instances: instances_<split><year>.json` (COCO's object annotations: each
sample then carries the sorted category ids annotated on its image, [] for
none, which foil_it uses, and `instance_counts` {category id: instances}, which the
COCO pairer reads for foil_it's and plurals' partners). VALSE's plurals file
says `coco2017`, its relations file `coco_2017`; set `dataset` to match the
other one.
"""

from __future__ import annotations

from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import read_json, require
from foilforge.pipeline.sources.base import Source, nonempty, normalise_space, progress, reader, split_for


def read_coco_instances(path) -> dict[int, dict[int, int]]:
    """{image id: {category id: instances annotated on it}} from a COCO `instances_*.json`."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'annotations', got {type(data).__name__}")
    shown: dict[int, dict[int, int]] = {}
    for i, ann in enumerate(require(data, "annotations", list, path, None)):
        where = f"annotations[{i}]"
        counts = shown.setdefault(require(ann, "image_id", int, path, where), {})
        category = require(ann, "category_id", int, path, where)
        counts[category] = counts.get(category, 0) + 1
    return {image: dict(sorted(counts.items())) for image, counts in shown.items()}


@reader("coco", roles=("captions",), optional_roles=("instances",))
def read_coco(src: Source) -> Iterator[dict]:
    path = src.file("captions")
    # optional: per-image category ids, so foil_it never foils with an object that is annotated on the image
    instances = read_coco_instances(src.file("instances")) if "instances" in src.files else None
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'images' and 'annotations', got {type(data).__name__}")
    images = require(data, "images", list, path, None)
    annotations = require(data, "annotations", list, path, None)
    split = split_for(src, "captions")
    files: dict[int, str] = {}
    for i, image in enumerate(images):
        where = f"images[{i}]"
        image_id = require(image, "id", int, path, where)
        file_name = require(image, "file_name", str, path, where)
        if image_id in files:
            raise InputError(path, f"duplicate image id {image_id}", record=where, field="id")
        files[image_id] = file_name
    seen: set[int] = set()
    for i, ann in enumerate(progress(annotations, f"ingest {src.name}", unit="caption")):
        where = f"annotations[{i}]"
        ann_id = require(ann, "id", int, path, where)
        image_id = require(ann, "image_id", int, path, where)
        caption = nonempty(normalise_space(require(ann, "caption", str, path, where)), path, where, "caption")
        if image_id not in files:
            raise InputError(path, f"image_id {image_id} is not in 'images'", record=where, field="image_id")
        if ann_id in seen:
            raise InputError(path, f"duplicate annotation id {ann_id}", record=where, field="id")
        seen.add(ann_id)
        counts = {} if instances is None else instances.get(image_id, {})
        extra = {} if instances is None else {"instance_category_ids": sorted(counts),
                                               "instance_counts": {str(k): n for k, n in counts.items()}}
        yield src.sample(ann_id, dataset="coco2017", dataset_idx=ann_id, image_file=files[image_id],
                         original_split=split, caption=caption, image_id=image_id, **extra)
