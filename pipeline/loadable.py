"""The benchmark in a form `datasets.load_dataset` reads: one row per record, type-stable columns, a dataset card.

VALSE's `{id: record}` JSON reads as one column per record, and its fields
change type between records (`classes` is an int in counting, a string in
plurals, a list elsewhere), which Arrow refuses. So each instrument is also
written as `rows/<instrument>.jsonl` with the same columns for every
instrument:

| column | type | value |
|---|---|---|
| `id` | string | the record id (the key of the VALSE file) |
| `instrument` | string | params.yaml instrument name (the config name) |
| `linguistic_phenomena`, `dataset`, `original_split`, `image_file`, `caption`, `foil` | string or null | as in the VALSE file; a value of another type is JSON-encoded |
| `dataset_idx` | string or null | the source's id, as a string |
| `classes`, `classes_foil`, `mturk`, `extras` | string (JSON) | JSON text of the value (`"null"` when absent); `extras` holds every other field of the VALSE record, foilforge's provenance included |
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
JSON_COLUMNS = ("classes", "classes_foil", "mturk")
#: the columns harnesses read: MTEB's image-text pair classification (images, caption, negative_caption), the
#: two-option question of lmms-eval and VLMEvalKit (option_a, option_b, correct_option)
HARNESS_COLUMNS = ("images", "negative_caption", "option_a", "option_b", "correct_option")
COLUMNS = ("id", "instrument", *TEXT_COLUMNS, "dataset_idx", *JSON_COLUMNS, "extras", *HARNESS_COLUMNS)
ROWS_DIR = "rows"
DEFAULT_CONFIG = "all"

SOURCE_CITATIONS = {
    "valse": "Parcalabescu, Cafagna, Muradjan, Frank, Calixto, Gatt. VALSE: A Task-Independent Benchmark for "
             "Vision and Language Models Centered on Linguistic Phenomena. ACL 2022.",
    "coco": "Lin et al. Microsoft COCO: Common Objects in Context. ECCV 2014. (CC BY 4.0 annotations; Flickr image terms)",
    "visual7w": "Zhu, Groth, Bernstein, Fei-Fei. Visual7W: Grounded Question Answering in Images. CVPR 2016.",
    "swig": "Pratt, Yatskar, Weihs, Farhadi, Kembhavi. Grounded Situation Recognition. ECCV 2020 (SWiG; imSitu: "
            "Yatskar, Zettlemoyer, Farhadi. Situation Recognition. CVPR 2016).",
    "visdial": "Das et al. Visual Dialog. CVPR 2017 (VisDial v1.0, CC BY 4.0).",
    "openimages": "Kuznetsova et al. The Open Images Dataset V4. IJCV 2020 (annotations CC BY 4.0). Predicate-noun "
                  "foils after Nikolaus, Salin, Ayache, Fourtassi, Favre. Do Vision-and-Language Transformers Learn "
                  "Grounded Predicate-Noun Dependencies? EMNLP 2022.",
    "bd2bb": "Pezzelle, Greco, Gandolfi, Gualdoni, Bernardi. Be Different to Be Better! A Benchmark to Leverage the "
             "Complementarity of Language and Vision. Findings of EMNLP 2020.",
}


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


def to_row(record_id: str, instrument: str, valse_record: dict, image_root: str = "data/images") -> dict:
    """One row with the columns of COLUMNS, the same types for every record of every instrument."""
    row = {"id": str(record_id), "instrument": instrument}
    for column in TEXT_COLUMNS:
        row[column] = _text(valse_record.get(column))
    idx = valse_record.get("dataset_idx")
    row["dataset_idx"] = None if idx is None else str(idx)
    for column in JSON_COLUMNS:
        row[column] = json.dumps(valse_record.get(column), sort_keys=True)
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


def card_text(counts: dict[str, int], sources: list[str]) -> str:
    """The dataset card: YAML header (configs, license, task categories) and the body users read first."""
    loadable = [name for name, n in counts.items() if n]
    lines = ["---", "pretty_name: foilforge VALSE-style foil benchmark", "license: other",
             "license_name: source-licences",
             "license_details: foilforge's files are MIT; captions and images keep their sources' licences (below).",
             "language:", "- en", "task_categories:", "- image-text-to-text", "- zero-shot-classification",
             "tags:", "- foils", "- vision-and-language", "- valse", "configs:"]
    if loadable:
        lines += [f"- config_name: {DEFAULT_CONFIG}", "  default: true", "  data_files:", "  - split: test",
                  "    path:"] + [f"    - {rows_path(name)}" for name in loadable]
    for name in loadable:
        lines += [f"- config_name: {name}", "  data_files:", "  - split: test", f"    path: {rows_path(name)}"]
    # declared features keep every column a string even where a config holds only nulls in it
    if loadable:
        lines.append("dataset_info:")
        for name in [DEFAULT_CONFIG, *loadable]:
            lines += [f"- config_name: {name}", "  features:"]
            lines += [f"  - name: {column}\n    dtype: string" for column in COLUMNS]
    lines += ["---", "", "# foilforge benchmark", "",
              "Image-caption-foil triples built the way VALSE built them. Load one instrument or all of them:", "",
              "```python", "from datasets import load_dataset", "", 'ds = load_dataset("data/benchmark", "relations")["test"]',
              'everything = load_dataset("data/benchmark")["test"]   # config "all"', "```", "",
              "## Configs", "", "| config | rows |", "|---|---|"]
    lines += [f"| {name} | {counts[name]} |" for name in loadable]
    empty = [name for name, n in counts.items() if not n]
    if empty:
        lines += ["", f"Instruments with no exported record (no config): {', '.join(empty)}."]
    lines += ["", "## Columns", "",
              "Every config has the same columns and types. `classes`, `classes_foil`, `mturk` and `extras` hold JSON",
              "text (`json.loads(row[\"classes\"])`), because their values change type between records (an int in",
              "counting, a string or a list elsewhere); `extras` holds the record's other fields, foilforge's provenance",
              "and filter scores included. `dataset_idx` is a string. The VALSE-format files (`<instrument>.json`,",
              "`{id: record}`, for VALSE's own scripts) hold the same records with their original types.", "",
              "See `DATACARD.md` for counts through every filter, bias checks, the models that ran and source hashes,",
              "and `manifest.json` for the full provenance.", "",
              "## Licences and citation", "",
              "Cite VALSE and the sources whose data you use:", ""]
    for key in ["valse", *sorted({s for s in sources if s in SOURCE_CITATIONS} - {"valse"})]:
        lines.append(f"- {SOURCE_CITATIONS[key]}")
    lines.append("")
    return "\n".join(lines)


def source_family(source: dict | None, name: str) -> str:
    """The citation key of a params.yaml source (its format, e.g. visdial for visdial_train)."""
    fmt = (source or {}).get("format") or name
    return fmt


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
