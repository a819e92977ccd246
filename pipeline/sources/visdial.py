"""visdial: `files: {dialogs: visdial_1.0_<split>.json}`; `image_file_template`
is required. val: `VisualDialog_val2018_{image_id:012d}.jpg`. train draws on
COCO train2014 *and* val2014 images and the dialog file does not say which,
so give both templates as a list and the image folder as `files.images`
(a directory under `root`, read for its file names only; a symlink works):
each image id gets the template whose file exists there, and an id with no
file or two is an error naming it. A single template names every image
without looking. VALSE's coreference records have no `dataset_idx`; samples
carry the VisDial image id there.
"""

from __future__ import annotations

import re
from typing import Iterator

from foilforge.errors import ConfigError, InputError
from foilforge.io import read_json, require
from foilforge.pipeline.sources.base import Source, list_of, normalise_space, progress, reader, split_for


def _fill(src: Source, template: str, image_id: int) -> str:
    try:
        return template.format(image_id=image_id)
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        raise ConfigError(f"params.yaml sources.{src.name}.image_file_template {template!r} "
                          f"cannot be filled ({type(err).__name__}: {err}); the one field is {{image_id}}") from None


def _image_file(src: Source, image_id: int, existing: set[str] | None = None, path=None, where=None) -> str:
    """The image's file name: the template filled in, or, with several templates, the one whose file exists.

    VisDial v1.0 train draws on COCO train2014 *and* val2014 images and its dialog file does not say which,
    so a list of templates is tried against the names under `files.images`.
    """
    if isinstance(src.image_file_template, str):
        return _fill(src, src.image_file_template, image_id)
    names = [_fill(src, template, image_id) for template in src.image_file_template]
    found = [name for name in names if name in existing]
    if len(found) != 1:
        problem = "no image file" if not found else f"{len(found)} image files"
        raise InputError(path, f"{problem} for image_id {image_id} under {src.file('images')} "
                               f"(tried {', '.join(names)})", record=where, field="image_id")
    return found[0]


@reader("visdial", roles=("dialogs",), uses_template=True, optional_roles=("images",))
def read_visdial(src: Source) -> Iterator[dict]:
    path = src.file("dialogs")
    if not src.image_file_template:
        raise ConfigError(f"params.yaml sources.{src.name} needs image_file_template "
                          "(e.g. [\"COCO_train2014_{image_id:012d}.jpg\", \"COCO_val2014_{image_id:012d}.jpg\"] "
                          "with files.images for train, \"VisualDialog_val2018_{image_id:012d}.jpg\" for val)")
    for template in (src.image_file_template,) if isinstance(src.image_file_template, str) else src.image_file_template:
        _fill(src, template, 0)
    existing = None
    if isinstance(src.image_file_template, tuple):
        images = src.file("images")
        if not images.is_dir():
            raise InputError(images, "not a directory (params.yaml files.images: the folder holding the images)")
        existing = {entry.name for entry in images.iterdir()}  # one listing, not a stat per image
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'data', got {type(data).__name__}")
    file_split = data.get("split")
    if file_split is not None and not isinstance(file_split, str):
        raise InputError(path, f"expected str, got {type(file_split).__name__}", field="split")
    split = split_for(src, "dialogs", re.sub(r"\d+$", "", file_split) if file_split else None)
    body = require(data, "data", dict, path, None)
    questions = list_of(body, "questions", str, path, "data")
    answers = list_of(body, "answers", str, path, "data")
    dialogs = require(body, "dialogs", list, path, "data")
    seen: set[int] = set()

    def resolve(turn: dict, key: str, table: list, table_name: str, where: str) -> str:
        index = require(turn, key, int, path, where)
        if not 0 <= index < len(table):
            raise InputError(path, f"index {index} out of range (data.{table_name} has {len(table)} entries)",
                             record=where, field=key)
        return table[index]

    for i, dialog in enumerate(progress(dialogs, f"ingest {src.name}", unit="dialog")):
        where = f"data.dialogs[{i}]"
        image_id = require(dialog, "image_id", int, path, where)
        caption = normalise_space(require(dialog, "caption", str, path, where))
        turns = require(dialog, "dialog", list, path, where)
        if image_id in seen:
            raise InputError(path, f"duplicate image_id {image_id}", record=where, field="image_id")
        seen.add(image_id)
        image_file = _image_file(src, image_id, existing, path, where)
        for j, turn in enumerate(turns):
            twhere = f"{where}.dialog[{j}]"
            question = resolve(turn, "question", questions, "questions", twhere)
            answer = resolve(turn, "answer", answers, "answers", twhere)
            yield src.sample(f"{image_id}:{j}", dataset="VisDial_v1.0", dataset_idx=image_id, image_file=image_file,
                             original_split=split, caption=caption, question=normalise_space(question), answer=normalise_space(answer),
                             turn=j, image_id=image_id)
