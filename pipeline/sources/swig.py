"""swig: `files: {annotations: test.json, space: imsitu_space.json}`; a verb or
noun id missing from the space file is an error naming the annotation.
`verb_abstract`/`verb_order` are the verb's `abstract`/`order` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import read_json, require
from foilforge.pipeline.sources.base import Source, list_of, progress, reader, split_for


def _imsitu_space(path: Path) -> tuple[dict, dict]:
    space = read_json(path)
    if not isinstance(space, dict):
        raise InputError(path, f"expected a JSON object with 'nouns' and 'verbs', got {type(space).__name__}")
    return require(space, "nouns", dict, path, None), require(space, "verbs", dict, path, None)


@reader("swig", roles=("annotations", "space"))
def read_swig(src: Source) -> Iterator[dict]:
    path, space_path = src.file("annotations"), src.file("space")
    nouns, verbs = _imsitu_space(space_path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object {{image_name: record}}, got {type(data).__name__}")
    split = split_for(src, "annotations")
    glosses: dict[str, list] = {}

    def gloss(noun_id: str, image: str, where: str) -> list:
        if noun_id not in glosses:
            if noun_id not in nouns:
                raise InputError(path, f"noun id {noun_id!r} is not in {space_path.name} 'nouns'", record=image, field=where)
            entry = nouns[noun_id]
            glosses[noun_id] = list_of(entry, "gloss", str, space_path, f"nouns.{noun_id}")
            if not glosses[noun_id]:
                raise InputError(space_path, "expected at least one gloss", record=f"nouns.{noun_id}", field="gloss")
        return glosses[noun_id]

    for image, ann in progress(data.items(), f"ingest {src.name}", total=len(data), unit="image"):
        verb = require(ann, "verb", str, path, image)
        if verb not in verbs:
            raise InputError(path, f"verb {verb!r} is not in {space_path.name} 'verbs'", record=image, field="verb")
        entry = verbs[verb]
        abstract = require(entry, "abstract", str, space_path, f"verbs.{verb}")
        order = list_of(entry, "order", str, space_path, f"verbs.{verb}")
        frames = require(ann, "frames", list, path, image)
        if not frames:
            raise InputError(path, "expected at least one frame", record=image, field="frames")
        used: dict[str, list] = {}
        for k, frame in enumerate(frames):
            if not isinstance(frame, dict):
                raise InputError(path, f"expected an object {{role: noun id}}, got {type(frame).__name__}",
                                 record=image, field=f"frames[{k}]")
            for role, noun_id in frame.items():
                if not isinstance(noun_id, str):
                    raise InputError(path, f"expected a noun id string, got {type(noun_id).__name__} ({noun_id!r:.40})",
                                     record=image, field=f"frames[{k}].{role}")
                if noun_id:
                    used[noun_id] = gloss(noun_id, image, f"frames[{k}].{role}")
        extra = {}
        if "bb" in ann:
            extra["bb"] = require(ann, "bb", dict, path, image)
        for key in ("height", "width"):
            if key in ann:
                extra[key] = require(ann, key, int, path, image)
        yield src.sample(image, dataset="SWiG", dataset_idx=image, image_file=image, original_split=split,
                         verb=verb, frames=frames, nouns=dict(sorted(used.items())), verb_abstract=abstract,
                         verb_order=order, **extra)
