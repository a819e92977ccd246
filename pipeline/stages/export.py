"""Export the benchmark: one VALSE-format JSON per instrument, a manifest and a data card.

Benchmark files (`<output-dir>/<instrument>.json`) are `{id: record}` with the
fields VALSE released (dataset, original_split, dataset_idx, image_file,
linguistic_phenomena, caption, foil, classes, classes_foil, mturk, and piece
extras such as grammaticality_scores / nli_scores / foil_method). foilforge's
own fields (sample_id, instrument, provenance, filters) are kept under one key,
`foilforge`, so VALSE loaders read the files unchanged and every foil stays
traceable.

Counts per filter come from the records' `filters` field ({name: {model,
variant, score, passed}}): starting from every record the select stage saw
(the kept ones plus `--rejected-dir`, when given), each filter's count is the
number that passed it and every filter before it. Records that failed any
filter are never exported. Filters listed in params.yaml `filters.run` for an
instrument but absent from its records, and registered filters not run at
all, are named in the manifest (`filters_not_run`) and the data card, so a
reader sees at once that, say, no NLI filter ran on an offline build.

An instrument whose foiler has a release format of its own (predicate-noun's
eval_set.json, BD2BB's CSV) also gets that file: the foiler class's
`write_native(records, output_dir, instrument)` writes it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.errors import InputError
from pipeline.io import atomic_write, file_sha256, read_json, write_json
from pipeline.params import load_params

log = logging.getLogger(__name__)

INTERNAL_FIELDS = ("id", "sample_id", "instrument", "provenance", "filters")
INTERNAL_KEY = "foilforge"


def to_valse_record(record: dict) -> dict:
    """A foil record in VALSE's released shape; our own fields move under `foilforge`."""
    out = {k: v for k, v in record.items() if k not in INTERNAL_FIELDS}
    out.setdefault("mturk", None)
    out[INTERNAL_KEY] = {k: record[k] for k in INTERNAL_FIELDS if k in record and k != "id"}
    return out


def passed_all(record: dict) -> bool:
    filters = record.get("filters") or {}
    return all(bool(result.get("passed", True)) for result in filters.values() if isinstance(result, dict))


def run_order(names: list[str]) -> list[str]:
    """Filters in the order the score stage runs them (cheapest first); unregistered names keep their order, last.

    Records are written with sorted keys, so the order of `record["filters"]` says nothing about it.
    """
    from filters.base import filter_class, filter_names

    known = set(filter_names())
    return sorted(names, key=lambda n: (0, filter_class(n).cost) if n in known else (1, names.index(n)))


def filter_funnel(records: list[dict]) -> dict:
    """{"input": n, "after_<filter>": n passing it and every earlier one, ...}, filters in run order."""
    order: list[str] = []
    for record in records:
        for name, result in (record.get("filters") or {}).items():
            # a filter scored but not applied (a null keep rule) carries no `passed`: it is no step of the funnel
            if name not in order and isinstance(result, dict) and "passed" in result:
                order.append(name)
    order = run_order(order)
    counts = {"input": len(records)}
    surviving = records
    for name in order:
        surviving = [r for r in surviving if ((r.get("filters") or {}).get(name) or {}).get("passed", True)]
        counts[f"after_{name}"] = len(surviving)
    return counts


def models_and_variants(records: list[dict]) -> dict:
    """Which model and variant each filter ran with, and which foiler/resolver made the foils."""
    filters: dict[str, dict[str, set]] = {}
    provenance: dict[str, set] = {}
    for record in records:
        for name, result in (record.get("filters") or {}).items():
            if not isinstance(result, dict):
                continue
            entry = filters.setdefault(name, {"model": set(), "variant": set()})
            for key in ("model", "variant"):
                if result.get(key) is not None:
                    entry[key].add(str(result[key]))
        for key, value in (record.get("provenance") or {}).items():
            # spans differ per record; the rest (foiler, resolver, ...) names what ran
            if key.endswith("_span") or isinstance(value, (dict, list)) or value is None:
                continue
            provenance.setdefault(key, set()).add(str(value))
    return {
        "filters": {n: {k: sorted(v) for k, v in e.items()} for n, e in sorted(filters.items())},
        "provenance": {k: sorted(v) for k, v in sorted(provenance.items())},
    }


def source_hashes(params: dict) -> dict:
    """sha256 of every file named in params.yaml `sources` (null when the file is absent)."""
    out = {}
    for name, source in sorted((params.get("sources") or {}).items()):
        root = Path(source.get("root", "."))
        out[name] = {}
        for key, filename in sorted((source.get("files") or {}).items()):
            path = root / filename
            out[name][key] = {"path": str(path), "sha256": file_sha256(path) if path.is_file() else None}
    return out


def _optional_json(path: Path):
    return read_json(path) if path.is_file() else None


def read_instrument(path: Path) -> list[dict]:
    from pipeline.stages.bias import read_records

    records = []
    for record_id, record in read_records(path):
        if "id" not in record:
            raise InputError(path, "missing field", record=record_id, field="id")
        records.append(record)
    return records


def filters_not_run(params: dict, instrument: str, ran: dict) -> list[str]:
    """Registered filters that did not score this instrument's records."""
    from filters.base import filter_names

    names = set(filter_names())
    names |= set(((params.get("filters") or {}).get("run") or {}).get(instrument) or [])
    return sorted(names - set(ran))


def write_native_files(records: list[dict], output_dir: Path, instrument: str) -> list[str]:
    """Files in the source's own release format, written by the foiler that made the records."""
    from foilers.base import FOILERS

    names = {(r.get("provenance") or {}).get("foiler") for r in records} - {None}
    written = []
    for name in sorted(names):
        written += FOILERS.get(name).write_native(records, output_dir, instrument)
    return sorted(written)


def export(params: dict, filtered_dir, bias_dir, baseline_dir, output_dir, rejected_dir=None) -> dict:
    filtered_dir, output_dir = Path(filtered_dir), Path(output_dir)
    files = sorted(filtered_dir.glob("*.jsonl"))
    if not files:
        raise InputError(filtered_dir, "no filtered records (*.jsonl) found")
    manifest = {"instruments": {}, "params": params, "sources": source_hashes(params), "text_only_roles": text_only_roles(params)}
    for path in files:
        instrument = path.stem
        records = read_instrument(path)
        rejected_path = Path(rejected_dir) / path.name if rejected_dir else None
        rejected = read_instrument(rejected_path) if rejected_path and rejected_path.is_file() else []
        funnel_records = records + rejected
        kept = sorted((r for r in records if passed_all(r)), key=lambda r: str(r["id"]))
        benchmark = {str(r["id"]): to_valse_record(r) for r in kept}
        if len(benchmark) != len(kept):
            raise InputError(path, "duplicate record ids")
        out_path = output_dir / f"{instrument}.json"
        write_json(out_path, benchmark)
        bias = _optional_json(Path(bias_dir) / instrument / "bias.json") if bias_dir else None
        baseline = _optional_json(Path(baseline_dir) / f"{instrument}.json") if baseline_dir else None
        ran = models_and_variants(funnel_records)
        manifest["instruments"][instrument] = {
            "counts": {**filter_funnel(funnel_records), "exported": len(benchmark)},
            **ran,
            "filters_not_run": filters_not_run(params, instrument, ran["filters"]),
            "native_files": write_native_files(kept, output_dir, instrument) if kept else [],
            "bias": bias,
            "text_baseline": baseline,
            "file": out_path.name,
            "sha256": file_sha256(out_path),
        }
        log.info("%s: exported %d records", instrument, len(benchmark))
    write_json(output_dir / "manifest.json", manifest)
    write_datacard(output_dir / "DATACARD.md", manifest)
    return manifest


def text_only_roles(params: dict) -> dict:
    """Which text-only scorer was used where (issue 14): refinement (select) vs held-out check vs VALSE's baseline."""
    plausibility = ((params.get("filters") or {}).get("plausibility") or {}).get("scorers") or {}
    return {"refinement": plausibility, "held_out": (params.get("blind_check") or {}).get("held_out"),
            "text_baseline": (params.get("models") or {}).get("text_baseline")}


def _pct(entry) -> str:
    if not entry or entry.get("acc_r") is None:
        return "n/a"
    return f"{100 * entry['acc_r']:.1f}% (n={entry['n']})"


def blind_check_lines(manifest: dict) -> list[str]:
    lines = ["", "## Text-only blind check (adversarial refinement)", "",
             "acc_r = share of pairs a text-only scorer prefers the caption (chance 50%). `before`: the records",
             "that passed every other filter; `after`: those the refinement kept. The refinement balances its own",
             "scorers' caption-minus-foil gaps, so their `after` is at most 50% by construction; the held-out",
             "scorer was not used by the refinement and is the real check.", "",
             "| instrument | records before -> after | refinement scorers, before -> after | held-out scorer, before -> after |",
             "|---|---|---|---|"]
    held_out_names = set()
    for name, entry in manifest["instruments"].items():
        check = (entry.get("text_baseline") or {}).get("blind_check")
        if not check:
            continue
        refinement = "; ".join(f"{scorer}: {_pct(r['before'])} -> {_pct(r['after'])}"
                               for scorer, r in check.get("refinement", {}).items()) or "not refined"
        held = check.get("held_out")
        if held:
            held_out_names.add(held["scorer"])
        lines.append(f"| {name} | {check['records_before']} -> {check['records_after']} | {refinement} | "
                     f"{_pct(held['before']) + ' -> ' + _pct(held['after']) if held else 'not configured'} |")
    roles = manifest.get("text_only_roles") or {}
    lines += ["", f"- refinement scorers (filters.plausibility.scorers): {', '.join(sorted(roles.get('refinement') or {})) or 'none'}",
              f"- held-out scorer (blind_check.held_out): {'; '.join(sorted(held_out_names)) or 'none'}"]
    return lines


def _fmt(value, digits=3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def datacard_text(manifest: dict) -> str:
    lines = [
        "# foilforge benchmark: data card",
        "",
        "Image-caption-foil triples built the way VALSE (Parcalabescu et al., ACL 2022) built them: each foil",
        "changes one linguistic phenomenon of a correct caption. A model is asked to score the caption above",
        "the foil for the same image. Files are VALSE-format JSON (`{id: record}`); foilforge's provenance",
        "is under each record's `foilforge` key.",
        "",
        "## Instruments",
        "",
        "| instrument | exported | counts through the filters | #lexical items | JS | text-only acc_r |",
        "|---|---|---|---|---|---|",
    ]
    for name, entry in manifest["instruments"].items():
        counts = " -> ".join(f"{k} {v}" for k, v in entry["counts"].items())
        bias = entry.get("bias") or {}
        baseline = entry.get("text_baseline") or {}
        acc = baseline.get("acc_r")
        lines.append(f"| {name} | {entry['counts']['exported']} | {counts} | {_fmt(bias.get('n_lexical_items'))} | "
                     f"{_fmt(bias.get('js'))} | {'n/a' if acc is None else f'{100 * acc:.1f}%'} |")
    lines += ["", "## Models and variants that ran", ""]
    for name, entry in manifest["instruments"].items():
        parts = [f"{k}: {', '.join(v)}" for k, v in entry["provenance"].items()]
        parts += [f"filter {f}: model {', '.join(e['model']) or 'n/a'}, variant {', '.join(e['variant']) or 'n/a'}"
                  for f, e in entry["filters"].items()]
        if entry.get("filters_not_run"):
            parts.append(f"filters not run: {', '.join(entry['filters_not_run'])}")
        baseline = (entry.get("text_baseline") or {}).get("model")
        if baseline:
            parts.append(f"text-only baseline: {baseline}")
        lines.append(f"- **{name}**: " + ("; ".join(parts) if parts else "no provenance recorded"))
    lines += blind_check_lines(manifest)
    lines += ["", "## Sources", "", "| source | file | sha256 |", "|---|---|---|"]
    for source, files in manifest["sources"].items():
        for key, info in files.items():
            lines.append(f"| {source} | {info['path']} | {info['sha256'] or 'missing'} |")
    lines += [
        "",
        "## Checks and how to read them",
        "",
        "- JS: Jensen-Shannon divergence between the caption and foil distributions of the changed items",
        "  (VALSE §4.1, Table 5); 0 = foils reuse the caption vocabulary, 1 = disjoint. High values mean the",
        "  changed word alone can give the foil away.",
        "- text-only acc_r: share of pairs where a text-only LM gives the caption lower perplexity than the",
        "  foil (VALSE Table 2); far above 50% signals a plausibility bias a V&L model can exploit without the image.",
        "",
        "## Limitations",
        "",
        "- Foils are produced and filtered automatically; without human validation (VALSE §4.4) some foils",
        "  may still describe the image. `mturk` is null until votes are collected.",
        "- The offline build uses substitute models (see the models above); scores from them are not the",
        "  paper's. Rebuild with the documented models for a release.",
        "- Source licences apply to the images and captions (COCO, Visual7W, SWiG, VisDial, Open Images).",
        "",
    ]
    return "\n".join(lines)


def write_datacard(path, manifest: dict) -> None:
    with atomic_write(path) as handle:
        handle.write(datacard_text(manifest))


def add_arguments(parser) -> None:
    parser.add_argument("--filtered-dir", required=True, help="directory of filtered foil records, <instrument>.jsonl")
    parser.add_argument("--bias-dir", default=None, help="directory with <instrument>/bias.json")
    parser.add_argument("--baseline-dir", default=None, help="directory with <instrument>.json (text-only baseline)")
    parser.add_argument("--rejected-dir", default=None,
                        help="records the select stage rejected, <instrument>.jsonl (for counts before each filter)")
    parser.add_argument("--output-dir", required=True, help="benchmark directory (data/benchmark)")


def main(args) -> int:
    export(load_params(args.params), args.filtered_dir, args.bias_dir, args.baseline_dir, args.output_dir, args.rejected_dir)
    return 0
