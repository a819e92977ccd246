"""The reader contract: a resolved source block (`Source`), the `READERS` registry, shared parsing helpers.

A reader is a generator function `read_<format>(src: Source) -> Iterator[dict]` registered with
`@reader("<format>", roles=(...))`; every module of this package is one format and is found by
the registry on its first lookup (readers of other packages register through the
`foilforge.readers` entry points). pipeline/stages/ingest.py resolves the params.yaml block and
writes the table.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from foilforge.errors import ConfigError, InputError
from foilforge.io import require
from foilforge.params import block
from foilforge.registry import Registry

COMMON_FIELDS = ("dataset", "original_split", "dataset_idx", "image_file")


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Source:
    """One resolved params.yaml source block."""

    name: str
    format: str
    root: Path
    files: dict = field(default_factory=dict)  # role -> Path
    split: str | None = None
    dataset: str | None = None
    image_file_template: str | tuple[str, ...] | None = None

    def file(self, role: str) -> Path:
        return self.files[role]

    def sample(self, native_id, *, dataset: str, dataset_idx, image_file, original_split, **fields) -> dict:
        record = {
            "id": f"{self.name}:{native_id}",
            "source": self.name,
            "dataset": self.dataset or dataset,
            "original_split": original_split,
            "dataset_idx": dataset_idx,
            "image_file": image_file,
        }
        record.update(fields)
        return record


Reader = Callable[[Source], Iterator[dict]]

#: "format.vN" -> reader (a generator of samples); `reader.roles` are the files it needs
READERS = Registry("reader", packages=("foilforge.pipeline.sources",), skip=("base",), entry_points="foilforge.readers")


def reader(fmt: str, roles: tuple[str, ...], uses_template: bool = False, optional_roles: tuple[str, ...] = (),
           version: int = 1):
    """Register a reader for `fmt` (as "fmt.v<version>") that reads the files of `roles` (and of `optional_roles` when given)."""

    def decorator(fn):
        fn.format_name = fmt
        fn.roles = roles
        fn.optional_roles = optional_roles
        fn.uses_template = uses_template
        return READERS.register(f"{fmt}.v{version}")(fn)

    return decorator


def reader_for(fmt: str) -> Reader:
    """The reader a params.yaml `format` names ("coco": the newest coco reader; "coco.v1": that one)."""
    return READERS.get(READERS.newest(fmt))


# ---------------------------------------------------------------- helpers

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


def progress(iterable: Iterable, desc: str, total: int | None = None, unit: str = "rec"):
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not sys.stderr.isatty(), mininterval=1.0)


def normalise_space(value: str) -> str:
    return " ".join(value.split())


_SPLIT_RE = re.compile(r"(?<![a-z])(train|validation|val|dev|test)(?=\d{4}|[^a-z]|$)")


def split_from_name(path: Path) -> str | None:
    """The split named in a file name (captions_val2017.json -> val), or None."""
    found = _SPLIT_RE.findall(Path(path).stem.lower())
    return found[-1] if found else None


def split_for(src: Source, role: str, from_data: str | None = None) -> str | None:
    if src.split is not None:
        return src.split
    if from_data:
        return from_data
    return split_from_name(src.file(role))


def as_int(value: str, path, record, field_name) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InputError(path, f"expected an integer, got {value!r:.40}", record=record, field=field_name) from None


def as_float(value: str, path, record, field_name) -> float:
    try:
        return float(value)
    except ValueError:
        raise InputError(path, f"expected a number, got {value!r:.40}", record=record, field=field_name) from None


def list_of(record: dict, field_name: str, kind, path, record_id) -> list:
    values = require(record, field_name, list, path, record_id)
    for i, value in enumerate(values):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(path, f"expected a list of {kind.__name__}, item {i} is {type(value).__name__} ({value!r:.40})",
                             record=record_id, field=field_name)
    return values


def nonempty(text: str, path, record, field_name) -> str:
    if not text:
        raise InputError(path, "empty text", record=record, field=field_name)
    return text
