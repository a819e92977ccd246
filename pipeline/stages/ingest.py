"""Normalise one source (params.yaml `sources.NAME`) into a JSONL table of samples.

    foilforge ingest SOURCE --output data/ingested/SOURCE.jsonl [--params params.yaml]

A source block names a `format` (one reader function each, registered in the
`READERS` registry as "coco.v1", ...; params.yaml writes `format: coco`, which
means the newest version, or pins one with `format: coco.v1`; readers of other
packages register through the `foilforge.readers` entry points), a
`root` directory (relative paths are relative to the working directory, the
project root under DVC), the `files` it reads by role, and optionally `split`,
`dataset` (overrides the default dataset name below) and, for VisDial,
`image_file_template`. Unknown keys, roles or formats are a ConfigError listing
what is allowed.

Every sample (one JSON object a line, sorted by `id`, written atomically) has

| field | value |
|---|---|
| `id` | `<source key>:<native id>` (native ids below), unique in the table |
| `source` | the params.yaml key |
| `dataset`, `original_split`, `dataset_idx`, `image_file` | as VALSE released them (see below) |

`original_split` is `split` from params.yaml when set, else read from the data
(Visual7W image `split`, VisDial `split` with its year dropped: "val2018" ->
"val"), else from the file name (`captions_val2017.json` -> "val",
`oidv6-train-annotations-vrd.csv` -> "train"), else null.

Each `format` is one reader module in pipeline/sources/ (coco.py, visual7w.py, swig.py,
visdial.py, openimages.py, bd2bb.py, valse.py; the table of fields each gives is in
pipeline/sources/__init__.py, the details of its files in its module's docstring).

Bad input stops the stage with one foilforge.errors.InputError naming the file,
the record (index path such as `annotations[12]`, CSV `row N`, image name or
key) and the field, and no output file is written. A source that gives no
samples at all is an error too.
"""

from __future__ import annotations

import logging

from foilforge.errors import InputError
from foilforge.io import write_jsonl
from foilforge.params import load_params
from foilforge.pipeline.sources.base import reader_for, resolve_source

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the stage

def read_source(params: dict, name: str) -> list[dict]:
    """All samples of source `name`, in reading order; raises on bad input or config."""
    src = resolve_source(params, name)
    samples, seen = [], set()
    for sample in reader_for(src.format)(src):
        if sample["id"] in seen:  # readers check their own ids; this is the last guard
            raise InputError(src.root, f"two samples with id {sample['id']!r}", record=sample["id"], field="id")
        seen.add(sample["id"])
        samples.append(sample)
    return samples


def ingest(params: dict, name: str, output) -> int:
    samples = read_source(params, name)
    if not samples:
        src = resolve_source(params, name)
        raise InputError(next(iter(src.files.values())), f"no samples for source {name!r} (format {src.format})")
    return write_jsonl(output, samples)


def add_arguments(parser) -> None:
    parser.add_argument("source", help="source name, a key of params.yaml `sources`")
    parser.add_argument("--output", required=True, help="samples, one JSON object a line (sorted by id)")


def main(args) -> int:
    params = load_params(args.params)
    count = ingest(params, args.source, args.output)
    log.info("%s: %d samples -> %s", args.source, count, args.output)
    return 0
