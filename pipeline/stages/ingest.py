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
from pathlib import Path

from foilforge.errors import ConfigError, InputError
from foilforge.io import write_jsonl
from foilforge.params import block, load_params
from pipeline.sources.base import READERS, Source, reader_for

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the stage

def resolve_source(params: dict, name: str) -> Source:
    """The Source of params.yaml `sources.NAME`: its format's reader, the files that reader needs.

    The block's shape (keys, types) is the schema's (foilforge/schema.py); this checks it against the reader.
    """
    sources = block(params, "sources")
    if name not in sources:
        raise ConfigError(f"params.yaml has no source {name!r}; sources: {', '.join(sorted(sources))}")
    spec = sources[name]
    key = f"params.yaml sources.{name}"
    fmt = spec.get("format")
    try:
        read = reader_for(fmt)
    except ConfigError:
        raise ConfigError(f"{key}.format {fmt!r} is not a known format; formats: {', '.join(READERS.unversioned())}") from None
    root, files = spec["root"], spec["files"]
    missing = [role for role in read.roles if role not in files]
    extra = sorted(set(files) - set(read.roles) - set(read.optional_roles))
    if missing or extra:
        problem = f"missing role(s) {', '.join(missing)}" if missing else f"unknown role(s) {', '.join(extra)}"
        optional = f" (optional: {', '.join(read.optional_roles)})" if read.optional_roles else ""
        raise ConfigError(f"{key}.files: {problem}; format {fmt} reads {', '.join(read.roles)}{optional}")
    template = spec.get("image_file_template")
    if isinstance(template, list):
        template = tuple(template) if len(template) > 1 else template[0]
    if isinstance(template, tuple) and "images" not in files:
        raise ConfigError(f"{key}.image_file_template lists {len(template)} templates: set {key}.files.images to the "
                          f"directory holding the images, so each image id is named by the template whose file exists")
    if spec.get("image_file_template") is not None and not read.uses_template:
        raise ConfigError(f"{key}.image_file_template is not used by format {fmt} "
                          f"(formats that use it: {', '.join(sorted({READERS.get(n).format_name for n in READERS.names() if READERS.get(n).uses_template}))})")
    root_path = Path(root)
    roles = [*read.roles, *(r for r in read.optional_roles if r in files)]
    return Source(name=name, format=fmt, root=root_path, files={role: root_path / files[role] for role in roles},
                  split=spec.get("split"), dataset=spec.get("dataset"), image_file_template=template)


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
