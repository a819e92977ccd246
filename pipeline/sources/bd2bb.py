"""bd2bb: `files: {actions: test.csv}`, header
`id,sent1,sent2,ending0..ending4,end0type..end4type,label`; `label` must
point at the `targ` ending.
"""

from __future__ import annotations

from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import iter_csv
from foilforge.pipeline.sources.base import Source, as_int, nonempty, normalise_space, progress, reader, split_for

BD2BB_HEADER = ["id", "sent1", "sent2", *(f"ending{i}" for i in range(5)), *(f"end{i}type" for i in range(5)), "label"]


@reader("bd2bb", roles=("actions",))
def read_bd2bb(src: Source) -> Iterator[dict]:
    path = src.file("actions")
    split = split_for(src, "actions")
    seen: set[int] = set()
    for rowno, row in progress(iter_csv(path, BD2BB_HEADER), f"ingest {src.name}", unit="row"):
        where = f"row {rowno}"
        row_id = as_int(row["id"], path, where, "id")
        label = as_int(row["label"], path, where, "label")
        endings = [normalise_space(row[f"ending{i}"]) for i in range(5)]
        types = [row[f"end{i}type"].strip() for i in range(5)]
        if not 0 <= label < 5:
            raise InputError(path, f"expected 0..4, got {label}", record=where, field="label")
        if types[label] != "targ":
            raise InputError(path, f"label {label} points at a {types[label]!r} ending, expected 'targ'",
                             record=where, field="label")
        nonempty(endings[label], path, where, f"ending{label}")
        if row_id in seen:
            raise InputError(path, f"duplicate id {row_id}", record=where, field="id")
        seen.add(row_id)
        yield src.sample(row_id, dataset="BD2BB", dataset_idx=row_id, image_file=None, original_split=split,
                         intention=normalise_space(row["sent1"]), sent2=normalise_space(row["sent2"]), endings=endings, types=types,
                         label=label, target=endings[label])
