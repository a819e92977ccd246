"""visual7w: `files: {telling: dataset_v7w_telling.json}`; the telling file
holds every split, so here `split` *selects* the images of that split
(VALSE used test) instead of labelling them.
"""

from __future__ import annotations

from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import read_json, require
from foilforge.pipeline.sources.base import Source, list_of, normalise_space, progress, reader


def is_how_many(qa_type: str, question: str) -> bool:
    return qa_type == "how" and question.strip().lower().startswith("how many")


@reader("visual7w", roles=("telling",))
def read_visual7w(src: Source) -> Iterator[dict]:
    path = src.file("telling")
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'images', got {type(data).__name__}")
    images = require(data, "images", list, path, None)
    seen: set[int] = set()
    for i, image in enumerate(progress(images, f"ingest {src.name}", unit="image")):
        where = f"images[{i}]"
        image_id = require(image, "image_id", int, path, where)
        filename = require(image, "filename", str, path, where)
        split = require(image, "split", str, path, where)
        qa_pairs = require(image, "qa_pairs", list, path, where)
        if src.split is not None and split != src.split:
            continue
        for j, qa in enumerate(qa_pairs):
            qwhere = f"images[{i}].qa_pairs[{j}]"
            qa_type = require(qa, "type", str, path, qwhere)
            question = require(qa, "question", str, path, qwhere)
            if not is_how_many(qa_type, question):
                continue
            qa_id = require(qa, "qa_id", int, path, qwhere)
            answer = require(qa, "answer", str, path, qwhere)
            choices = list_of(qa, "multiple_choices", str, path, qwhere)
            if qa_id in seen:
                raise InputError(path, f"duplicate qa_id {qa_id}", record=qwhere, field="qa_id")
            seen.add(qa_id)
            yield src.sample(qa_id, dataset="visual7w", dataset_idx=str(image_id), image_file=filename,
                             original_split=split, question=normalise_space(question), answer=normalise_space(answer),
                             multiple_choices=[normalise_space(c) for c in choices], qa_id=qa_id, image_id=image_id,
                             type=qa_type)
