"""The release: one VALSE-format JSON per instrument, a manifest and a data card (what `foilforge export` writes).

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
filter are never exported. Filters listed in params.yaml `instruments.<I>.filters.run` for an
instrument but absent from its records, and registered filters not run at
all, are named in the manifest (`filters_not_run`) and the data card, so a
reader sees at once that, say, no NLI filter ran on an offline build. The manifest's `validity_checks` says
which checks that a foil is false where its caption is true ran: the offline entailment check (its table's
version and hash, WordNet's version, what it refused per instrument), the NLI filter with its model, and the
pairer's own-image check (the foils select refused because another caption of their image states the foil's part).

An instrument whose foiler has a release format of its own (predicate-noun's
eval_set.json, BD2BB's CSV) also gets that file: the foiler class's
`write_native(records, output_dir, instrument)` writes it.

The harness formats of params.yaml `export.formats` (pipeline/emitters: SugarCrepe JSON, an lmms-eval
task, a VLMEvalKit TSV, Parquet) are written from the same rows as the HF dataset; the manifest lists
each format's files and what it left out (`formats`). `foilforge export --format NAME` writes one format
again from an existing export, without rerunning anything else.
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path

from foilforge.errors import ConfigError, GateError, InputError
from foilforge.filter import filter_funnel
from foilforge.io import atomic_write, file_sha256, read_json, write_json, write_jsonl
from foilforge.metrics import MIN_JUDGED_PAIRS
from foilforge.params import typed_params
from foilforge.pipeline.card import datacard_text, failing_attackers
from foilforge.records import is_valid, passed_all, read_instrument
from foilforge.schema import ExportBlock

log = logging.getLogger(__name__)

INTERNAL_FIELDS = ("id", "sample_id", "instrument", "provenance", "filters", "group")
INTERNAL_KEY = "foilforge"


def to_valse_record(record: dict) -> dict:
    """A foil record in VALSE's released shape; our own fields move under `foilforge`."""
    out = {k: v for k, v in record.items() if k not in INTERNAL_FIELDS}
    out.setdefault("mturk", None)
    out[INTERNAL_KEY] = {k: record[k] for k in INTERNAL_FIELDS if k in record and k != "id"}
    return out


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


def filters_not_run(params: dict, instrument: str, ran: dict) -> list[str]:
    """Registered filters that did not score this instrument's records."""
    from foilforge.filter import filter_names

    names = set(filter_names())
    names |= set(((params.get("instruments") or {}).get(instrument) or {}).get("filters", {}).get("run") or [])
    return sorted(names - set(ran))


def write_native_files(records: list[dict], output_dir: Path, instrument: str) -> list[str]:
    """Files in the source's own release format, written by the foiler that made the records."""
    from foilforge.foiler import FOILERS

    names = {(r.get("provenance") or {}).get("foiler") for r in records} - {None}
    written = []
    for name in sorted(names):
        written += FOILERS.get(name).write_native(records, output_dir, instrument)
    return sorted(written)


def export(params: dict, filtered_dir, bias_dir, baseline_dir, output_dir, rejected_dir=None, validation_dir=None,
           foil_metrics_dir=None, select_metrics_dir=None) -> dict:
    filtered_dir, output_dir = Path(filtered_dir), Path(output_dir)
    files = sorted(filtered_dir.glob("*.jsonl"))
    if not files:
        raise InputError(filtered_dir, "no filtered records (*.jsonl) found")
    from foilforge import provenance

    check_gates(params, files, baseline_dir)  # before anything is written: a refused build leaves no half export
    settings = export_settings(params)
    manifest = {"instruments": {}, "params": params, "sources": source_hashes(params),
                "environment": provenance.environment(params), "models": provenance.models(params),
                "text_only_roles": text_only_roles(params)}
    for path in files:
        instrument = path.stem
        records = read_instrument(path)
        rejected_path = Path(rejected_dir) / path.name if rejected_dir else None
        rejected = read_instrument(rejected_path) if rejected_path and rejected_path.is_file() else []
        funnel_records = records + rejected
        kept = sorted((r for r in records if passed_all(r)), key=lambda r: str(r["id"]))
        kept, validation = human_validation(params, kept, validation_dir, instrument)
        benchmark = {str(r["id"]): to_valse_record(r) for r in kept}
        if len(benchmark) != len(kept):
            raise InputError(path, "duplicate record ids")
        out_path = output_dir / f"{instrument}.json"
        write_json(out_path, benchmark)
        rows = write_loadable_rows(output_dir, instrument, benchmark, settings.image_root)
        bias = _optional_json(Path(bias_dir) / instrument / "bias.json") if bias_dir else None
        baseline = _optional_json(Path(baseline_dir) / f"{instrument}.json") if baseline_dir else None
        selected = (_optional_json(Path(select_metrics_dir) / f"{instrument}.json") if select_metrics_dir else None) or {}
        ran = models_and_variants(funnel_records)
        manifest["instruments"][instrument] = {
            "counts": {**filter_funnel(funnel_records), **validation["counts"], "exported": len(benchmark)},
            "validation": validation["table5"],
            **ran,
            "filters_not_run": filters_not_run(params, instrument, ran["filters"]),
            "native_files": write_native_files(kept, output_dir, instrument) if kept else [],
            "formats": emit_formats(settings, output_dir, instrument, rows),
            # Winoground groups: the kept records that have a second image their foil describes
            "groups": write_groups(params, settings, output_dir, instrument, kept, len(benchmark),
                                   selected.get("pairing")),
            "bias": bias,
            "text_baseline": baseline,
            # the release gate: trained attackers out of fold, per attacker before/after (baseline stage)
            "gate": (baseline or {}).get("gate"),
            # certified: every gate reading shown within chance +- gate.margin; else its status and why, in words
            **certification_entry((baseline or {}).get("gate")),
            # what the foiler reported (skip rules and guards, coreference resolver, pairing, JS): the foil stage's metrics
            "foil_stats": _optional_json(Path(foil_metrics_dir) / f"{instrument}.json") if foil_metrics_dir else None,
            # the refinement's own report (records kept, acc_r, JS before/after and what the JS bound dropped)
            "refinement": (selected.get("refinement") or {}).get("plausibility"),
            # records select refused before any rule, by reason (not a foil at all; not exactly its edit type's edit)
            "refused": selected.get("refused") or {},
            "file": out_path.name,
            "sha256": file_sha256(out_path),
        }
        log.info("%s: exported %d records", instrument, len(benchmark))
    manifest["validity_checks"] = validity_checks(params, manifest["instruments"])
    write_json(output_dir / "manifest.json", manifest)
    write_datacard(output_dir / "DATACARD.md", manifest)
    write_dataset_card(output_dir, params, manifest)
    return manifest


def validity_checks(params: dict, instruments: dict) -> dict:
    """Which checks that a foil is false where its caption is true ran: the entailment check (foilforge/
    entailment.py: its spatial table's version and sha256, WordNet's version) with, per instrument whose foiler
    declares an edit kind, the candidates it saw and refused by reason (the foil stage's metrics); and the NLI
    filter, with its model, on the instruments whose records it scored (none on an offline build)."""
    from foilforge.entailment import describe
    from foilforge.pairing import own_image_check
    from foilforge.pipeline.plugins import instrument_edit_kind

    checked = {}
    for name, entry in sorted(instruments.items()):
        kind = instrument_edit_kind(params, name)
        if kind is None:
            continue
        stats = entry.get("foil_stats") or {}
        ran = stats.get("edit_check") or {}
        checked[name] = {"kind": kind, "candidates": ran.get("candidates"), "refused": ran.get("refused"),
                         "reasons": {k: v for k, v in (stats.get("refused") or {}).items()}}
    nli = {name: (entry.get("filters") or {})["nli"]["model"] for name, entry in sorted(instruments.items())
           if "nli" in (entry.get("filters") or {})}
    configured = ((params.get("models") or {}).get("nli") or {}).get("name_or_path")
    # the pairer's check of a foil against its own image's other annotations (coco_captions: another caption of
    # the image states the foil's part), refused at select
    own = {}
    for name, entry in sorted(instruments.items()):
        groups = entry.get("groups") or {}
        check = own_image_check(groups.get("pairer"))
        if check:
            own[name] = {"check": check, "refused": groups.get("foils_refused") or {}}
    return {"entailment": {**describe(), "instruments": checked},
            "nli": {"instruments": nli, "configured_model": configured},
            "own_image": {"instruments": own}}


# ---------------------------------------------------------------- Winoground groups

GROUPS_DIR = "winoground"


def group_items(groups: list[dict]) -> dict:
    """A group as two VALSE-shaped items ({id: record}), one per image, for the harness formats: image_0 with
    caption_0 against caption_1, image_1 with caption_1 against caption_0."""
    items = {}
    for group in groups:
        for member, (image, caption, foil) in enumerate(((group["image_0"], group["caption_0"], group["caption_1"]),
                                                          (group["image_1"], group["caption_1"], group["caption_0"]))):
            items[f"{group['id']}#{member}"] = {"image_file": image, "caption": caption, "foil": foil,
                                                "linguistic_phenomena": group["tag"], "group_id": group["id"],
                                                "group_member": member}
    return items


def write_groups(params: dict, settings: ExportBlock, output_dir: Path, instrument: str, kept: list[dict], exported: int,
                 select_pairing: dict | None = None) -> dict:
    """winoground/<I>.jsonl (Winoground's layout, image paths as rows/ gives them) and the groups as two items each
    in the harness formats (instrument name `<I>_groups`); returns the manifest entry. `select_pairing`: the
    select stage's pairing report (why the rest stayed unpaired)."""
    from foilforge.groups import group_row
    from foilforge.pipeline.loadable import canonical_rows
    from foilforge.settings import instrument_settings

    pairing = instrument_settings(params, instrument).pairing
    select_report = select_pairing or {}
    entry = {"pairer": pairing.pairer, "why": None if pairing.pairer else pairing.why,
             "kept_pairs": exported, "groups": 0, "coverage": None, "valid_groups": None, "file": None,
             "unpaired": select_report.get("unpaired"),
             "set_aside_for_a_pairable_candidate": select_report.get("set_aside_for_a_pairable_candidate"),
             "foils_refused": select_report.get("foils_refused")}
    if not pairing.pairer:
        return entry
    image_root = settings.image_root
    groups = [group_row(r, lambda name: posixpath.join(image_root, name)) for r in kept if isinstance(r.get("group"), dict)]
    validity = [r["group"].get("valid") for r in kept if isinstance(r.get("group"), dict)]
    path = output_dir / GROUPS_DIR / f"{instrument}.jsonl"
    write_jsonl(path, groups, sort_by_id=False)
    entry.update(groups=len(groups), coverage=round(len(groups) / exported, 4) if exported else None,
                 valid_groups=sum(v is True for v in validity) if any(v is not None for v in validity) else None,
                 min_support=pairing.min_support, fully_supported=sum(g["support"] == 1.0 for g in groups),
                 file=f"{GROUPS_DIR}/{path.name}", sha256=file_sha256(path))
    if groups:
        rows = canonical_rows(f"{instrument}_groups", group_items(groups), "")
        entry["formats"] = emit_formats(settings, output_dir, f"{instrument}_groups", rows)
    return entry


# ---------------------------------------------------------------- human validation (validate stage)

TABLE5_KEYS = ("items", "items_voted", "valid", "valid_pct", "unanimous", "unanimous_pct", "alpha_all", "alpha_valid",
               "annotators", "annotators_excluded", "votes_file")


def human_validation(params: dict, kept: list[dict], validation_dir, instrument: str) -> tuple[list[dict], dict]:
    """The records to export after human validation, and the Table 5 figures for the manifest.

    Once an instrument has votes (records with an `mturk` dict), params.yaml `validation.export: valid`
    keeps only the records voted valid; `all` keeps every record (with its votes). Without votes
    nothing changes.
    """
    settings = typed_params(params).validation
    mode = settings.export
    metrics = _optional_json(Path(validation_dir) / f"{instrument}.json") if validation_dir else None
    table5 = {k: metrics.get(k) for k in TABLE5_KEYS if k in metrics} if metrics and metrics.get("has_votes") else None
    voted = [r for r in kept if isinstance(r.get("mturk"), dict)]
    if not voted:
        return kept, {"counts": {}, "table5": table5}
    # a released VALSE file carries votes without the validate stage's verdict: the votes decide
    valid = [r for r in voted if is_valid(r, settings.valid_min_caption)]
    counts = {"human_voted": len(voted), "human_valid": len(valid)}
    if table5 is not None:
        table5["export"] = mode
    return (valid if mode == "valid" else kept), {"counts": counts, "table5": table5}


def export_settings(params: dict) -> ExportBlock:
    return typed_params(params).export


def write_loadable_rows(output_dir: Path, instrument: str, benchmark: dict, image_root: str) -> list[dict]:
    """rows/<instrument>.jsonl: one type-stable row per record, for `datasets.load_dataset` (pipeline/loadable.py)."""
    from foilforge.pipeline.loadable import canonical_rows, rows_path

    rows = canonical_rows(instrument, benchmark, image_root)
    write_jsonl(output_dir / rows_path(instrument), rows, sort_by_id=False)
    return rows


def emit_formats(settings: ExportBlock, output_dir: Path, instrument: str, rows: list[dict], formats=None) -> dict:
    """Each harness format's files and left-out records for one instrument ({format: Emitted.as_manifest()});
    `settings`: the export block (export_settings), `formats` when not its own list."""
    from foilforge.pipeline.emitters import emit

    return {name: emit(name, output_dir, instrument, rows, settings).as_manifest()
            for name in (settings.formats if formats is None else formats)}


def emit_again(params: dict, output_dir, formats: list[str]) -> dict:
    """`foilforge export --format NAME`: write formats again from an export's VALSE files; the manifest is updated."""
    from foilforge.pipeline.emitters import EMITTERS
    from foilforge.pipeline.loadable import canonical_rows, read_benchmark

    unknown = [name for name in formats if name not in EMITTERS.unversioned() and name not in EMITTERS.names()]
    if unknown:
        raise ConfigError(f"--format: unknown format(s) {', '.join(unknown)}; known: {', '.join(EMITTERS.unversioned())}")
    output_dir = Path(output_dir)
    manifest_path = output_dir / "manifest.json"
    manifest = read_json(manifest_path) if manifest_path.is_file() else None
    settings = export_settings(params)
    written = {}
    for instrument, (_, benchmark) in read_benchmark(output_dir).items():
        rows = canonical_rows(instrument, benchmark, settings.image_root)
        written[instrument] = emit_formats(settings, output_dir, instrument, rows, formats)
        if manifest is not None and instrument in manifest.get("instruments", {}):
            manifest["instruments"][instrument].setdefault("formats", {}).update(written[instrument])
    if manifest is not None:
        write_json(manifest_path, manifest)
    return written


def write_dataset_card(output_dir: Path, params: dict, manifest: dict) -> None:
    """README.md: the Hugging Face dataset card (configs per instrument) for the rows/ files."""
    from foilforge.pipeline.card import dataset_card_text, source_family

    sources = params.get("sources") or {}
    instruments = params.get("instruments") or {}
    used = {source_family(sources.get(spec.get("source")), spec.get("source") or "")
            for name, spec in instruments.items() if name in manifest["instruments"] and isinstance(spec, dict)}
    counts = {name: entry["counts"]["exported"] for name, entry in manifest["instruments"].items()}
    with atomic_write(output_dir / "README.md") as handle:
        handle.write(dataset_card_text(counts, sorted(used)))




def text_only_roles(params: dict) -> dict:
    """Which text-only scorer was used where: refinement (select) vs held-out check vs VALSE's baseline."""
    plausibility = ((params.get("filters") or {}).get("plausibility") or {}).get("scorers") or {}
    return {"refinement": plausibility, "held_out": (params.get("blind_check") or {}).get("held_out"),
            "text_baseline": (params.get("models") or {}).get("text_baseline")}


def check_gates(params: dict, files: list[Path], baseline_dir) -> None:
    """Refuse the export when an instrument fails the gate and is not marked `instruments.<I>.gate: report`."""
    if not baseline_dir:
        return
    for path in files:
        report_path = Path(baseline_dir) / f"{path.stem}.json"
        gate = (_optional_json(report_path) or {}).get("gate")
        if not gate or gate.get("mode") == "report" or gate.get("passed"):
            continue
        # the strongest failing attacker names the problem best
        name, after = max(failing_attackers(gate), key=lambda item: item[1]["accuracy"] or 0.0)
        figure = "n/a" if after["accuracy"] is None else f"{100 * after['accuracy']:.1f}%"
        why = (f"only {after['n']} pairs are left, and fewer than {MIN_JUDGED_PAIRS} are not certified (attacker "
               f"{name}: {figure})" if after["n"] < MIN_JUDGED_PAIRS else
               f"attacker {name} ({after.get('attacker')}) picks the right text on {figure} of {after['n']} pairs out "
               f"of fold")
        raise GateError(
            f"{report_path}: instrument {path.stem} is not blind-proof: {why} (gate: at most "
            f"{100 * gate['max_accuracy']:.0f}% on at least {MIN_JUDGED_PAIRS} pairs). Rebuild it with the adversarial "
            f"filter (params.yaml adversarial), or set params.yaml instruments.{path.stem}.gate: report to export it "
            f"with a data card that says it is not blind-proof")


def certification_entry(gate: dict | None) -> dict:
    """The manifest's `certified`, `status` and `why` of an instrument from its baseline gate
    (filters/certification.py)."""
    if not gate:
        return {"certified": False, "why": "no release gate was run (params.yaml gate)"}
    if "certified" not in gate or "margin" not in gate:
        return {"certified": False, "status": None,
                "why": "the gate report predates the certification tests: rerun the baseline stage"}
    return {"certified": bool(gate["certified"]), "status": gate.get("status"), "why": gate.get("why")}


def write_datacard(path, manifest: dict) -> None:
    with atomic_write(path) as handle:
        handle.write(datacard_text(manifest))
