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

`README.md` next to them is a Hugging Face dataset card whose YAML header
declares one config per instrument (split `test`) and a default config `all`,
so `load_dataset("data/benchmark")` and `load_dataset("data/benchmark",
"relations")` work.
"""

from __future__ import annotations

import json

TEXT_COLUMNS = ("linguistic_phenomena", "dataset", "original_split", "image_file", "caption", "foil")
JSON_COLUMNS = ("classes", "classes_foil", "mturk")
COLUMNS = ("id", "instrument", *TEXT_COLUMNS, "dataset_idx", *JSON_COLUMNS, "extras")
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


def to_row(record_id: str, instrument: str, valse_record: dict) -> dict:
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
    return row


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
