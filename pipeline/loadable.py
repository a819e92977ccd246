"""The benchmark in a form `datasets.load_dataset` reads: one row per record, type-stable columns, a dataset card.

VALSE's `{id: record}` JSON reads as one column per record, and its fields
change type between records (`classes` is an int in counting, a string in
plurals, a list elsewhere), which Arrow refuses. So each instrument is also
written as `rows/<instrument>.jsonl` with the same columns and types for every
instrument (FEATURES, declared in the dataset card):

| column | type | value |
|---|---|---|
| `id` | string | the record id (the key of the VALSE file) |
| `instrument` | string | params.yaml instrument name (the config name) |
| `linguistic_phenomena`, `dataset`, `original_split`, `image_file`, `caption`, `foil` | string or null | as in the VALSE file; a value of another type is JSON-encoded |
| `dataset_idx` | string or null | the source's id, as a string |
| `classes`, `classes_foil` | list of strings or null | the value as a list: a list item by item, a single value as a one-item list; a string stays, any other value is its JSON text (counting's `3` is `["3"]`) |
| `mturk` | struct of int64 `caption`, `foil`, `other`, or null | the annotators' votes, as in the VALSE file |
| `extras` | string (JSON) | JSON text of every other field of the VALSE record, foilforge's provenance and filter scores included (their fields change from record to record, so no one type holds them) |
| `images` | string or null | the image's path, params.yaml `export.image_root` / `image_file` (MTEB's image column: `ds.cast_column("images", datasets.Image())` decodes it) |
| `negative_caption` | string or null | the foil, under the name MTEB's image-text pair classification and SugarCrepe use |
| `option_a`, `option_b`, `correct_option` | string or null | the pair as a two-option question (lmms-eval, VLMEvalKit): caption and foil in an order fixed by the record id, and the letter of the caption (`A` or `B`); null for a multiple-choice record |

`README.md` next to them is a Hugging Face dataset card whose YAML header
declares one config per instrument (split `test`) and a default config `all`,
so `load_dataset("data/benchmark")` and `load_dataset("data/benchmark",
"relations")` work.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from pathlib import Path

from foilforge.errors import InputError
from foilforge.io import read_json

TEXT_COLUMNS = ("linguistic_phenomena", "dataset", "original_split", "image_file", "caption", "foil")
LIST_COLUMNS = ("classes", "classes_foil")
VOTES = ("caption", "foil", "other")
#: the columns harnesses read: MTEB's image-text pair classification (images, caption, negative_caption), the
#: two-option question of lmms-eval and VLMEvalKit (option_a, option_b, correct_option)
HARNESS_COLUMNS = ("images", "negative_caption", "option_a", "option_b", "correct_option")
COLUMNS = ("id", "instrument", *TEXT_COLUMNS, "dataset_idx", *LIST_COLUMNS, "mturk", "extras", *HARNESS_COLUMNS)
#: each column's type: a dtype, [dtype] for a list of them, or {field: dtype} for a struct. `extras` stays JSON
#: text: its fields change from instrument to instrument and record to record.
FEATURES = {**{column: "string" for column in COLUMNS}, **{column: ["string"] for column in LIST_COLUMNS},
            "mturk": {vote: "int64" for vote in VOTES}}
ROWS_DIR = "rows"
DEFAULT_CONFIG = "all"

def _text(value):
    return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True)


def caption_goes_first(instrument: str, record_id: str) -> bool:
    """Whether the caption is option A: a hash of the record, so the order is fixed and about half are each way."""
    return hashlib.sha256(f"{instrument}/{record_id}".encode()).digest()[0] % 2 == 0


def harness_columns(record_id: str, instrument: str, valse_record: dict, image_root: str) -> dict:
    image_file, caption, foil = (valse_record.get(k) for k in ("image_file", "caption", "foil"))
    pair = "candidates" not in valse_record and isinstance(caption, str) and isinstance(foil, str)
    columns = {"images": posixpath.join(image_root, image_file) if isinstance(image_file, str) and image_file else None,
               "negative_caption": foil if pair else None, "option_a": None, "option_b": None, "correct_option": None}
    if pair:
        first = caption_goes_first(instrument, record_id)
        columns.update(option_a=caption if first else foil, option_b=foil if first else caption,
                       correct_option="A" if first else "B")
    return columns


def _texts(value):
    """A list of strings: a list item by item, a single value as a one-item list (VALSE's `classes` is a number, a
    string or a list); a string stays, any other value is its JSON text (3 -> "3")."""
    if value is None:
        return None
    return [_text(item) for item in (value if isinstance(value, list) else [value])]


def _votes(value, instrument: str, record_id: str):
    """VALSE's `mturk`, {caption, foil, other} annotator counts, or null."""
    if value is None:
        return None
    if (not isinstance(value, dict) or set(value) - set(VOTES)
            or any(not isinstance(n, int) or isinstance(n, bool) for n in value.values())):
        raise InputError(f"{instrument}.json", f"expected annotator counts {{{', '.join(VOTES)}}} (integers) or null, "
                         f"got {json.dumps(value, sort_keys=True)}", record=record_id, field="mturk")
    return {vote: value.get(vote) for vote in VOTES}


def to_row(record_id: str, instrument: str, valse_record: dict, image_root: str = "data/images") -> dict:
    """One row with the columns of COLUMNS, the types of FEATURES for every record of every instrument."""
    row = {"id": str(record_id), "instrument": instrument}
    for column in TEXT_COLUMNS:
        row[column] = _text(valse_record.get(column))
    idx = valse_record.get("dataset_idx")
    row["dataset_idx"] = None if idx is None else str(idx)
    for column in LIST_COLUMNS:
        row[column] = _texts(valse_record.get(column))
    row["mturk"] = _votes(valse_record.get("mturk"), instrument, str(record_id))
    rest = {k: v for k, v in valse_record.items() if k not in COLUMNS}
    row["extras"] = json.dumps(rest, sort_keys=True)
    row.update(harness_columns(str(record_id), instrument, valse_record, image_root))
    return row


def canonical_rows(instrument: str, benchmark: dict, image_root: str) -> list[dict]:
    """The rows of one instrument's VALSE-format records ({id: record}), sorted by id: the canonical table."""
    return sorted((to_row(key, instrument, record, image_root) for key, record in benchmark.items()),
                  key=lambda row: row["id"])


def rows_path(instrument: str) -> str:
    return f"{ROWS_DIR}/{instrument}.jsonl"


def features_yaml() -> list[dict]:
    """The columns' types as the dataset card's `dataset_info.features` declares them (`sequence:`, which every
    `datasets` release reads as a list)."""
    def feature(name, kind):
        if isinstance(kind, list):
            return {"name": name, "sequence": kind[0]}
        if isinstance(kind, dict):
            return {"name": name, "struct": [feature(field, sub) for field, sub in kind.items()]}
        return {"name": name, "dtype": kind}

    return [feature(column, FEATURES[column]) for column in COLUMNS]


def arrow_schema():
    """FEATURES as an Arrow schema (the Parquet emitter's)."""
    import pyarrow as pa

    def arrow(kind):
        if isinstance(kind, list):
            return pa.list_(arrow(kind[0]))
        if isinstance(kind, dict):
            return pa.struct([(field, arrow(sub)) for field, sub in kind.items()])
        return {"string": pa.string(), "int64": pa.int64()}[kind]

    return pa.schema([(column, arrow(FEATURES[column])) for column in COLUMNS])


# ---------------------------------------------------------------- the export, read back (evaluate, export --format)

NON_INSTRUMENT_FILES = {"manifest.json"}


def instrument_files(directory: Path) -> list[Path]:
    """The instrument files of a benchmark: those the export manifest lists, else every *.json (a VALSE release).

    The manifest matters because an export also writes other JSON (predicate-noun's eval_set.json, elbow curves).
    """
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        return [p for p in sorted(directory.glob("*.json")) if p.name not in NON_INSTRUMENT_FILES]
    manifest = read_json(manifest_path)
    entries = manifest.get("instruments") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict):
        raise InputError(manifest_path, "expected an object with 'instruments'", field="instruments")
    files = []
    for name, entry in sorted(entries.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(manifest_path, "expected the instrument's benchmark file name", record=name, field="file")
        path = directory / entry["file"]
        if not path.is_file():
            raise InputError(manifest_path, f"lists {entry['file']}, which is not in {directory}", record=name, field="file")
        files.append(path)
    return files


def read_benchmark(directory) -> dict[str, tuple[Path, dict[str, dict]]]:
    """{instrument: (file, {id: record})} from the export's VALSE-format files."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "benchmark directory not found")
    benchmark = {}
    for path in instrument_files(directory):
        data = read_json(path)
        if not isinstance(data, dict):
            raise InputError(path, f"expected a JSON object {{id: record}}, got {type(data).__name__}")
        benchmark[path.stem] = (path, data)
    if not benchmark:
        raise InputError(directory, "no benchmark files (*.json) found")
    return benchmark
