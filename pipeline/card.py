"""The export's two cards, rendered from pipeline/templates/: DATACARD.md (counts through every filter, human
validation, the models that ran, the blind checks and the gate, sources) from the export manifest, and README.md,
the Hugging Face dataset card: YAML metadata (configs, features, licence) written with `yaml.safe_dump`, then a
short body.

The templates hold the prose and the tables' layout; the functions here compute the tables' cells.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from foilforge.metrics import CHANCE_MARGIN, MIN_JUDGED_PAIRS, wilson_interval

TEMPLATES = Path(__file__).parent / "templates"
ACCURACY = "accuracy"

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

#: the dataset card's metadata before its configs and features (the Hub's dataset-card fields)
CARD_METADATA = {
    "pretty_name": "foilforge VALSE-style foil benchmark",
    "license": "other",
    "license_name": "source-licences",
    "license_details": "foilforge's files are MIT; captions and images keep their sources' licences (below).",
    "language": ["en"],
    "task_categories": ["image-text-to-text", "zero-shot-classification"],
    "tags": ["foils", "vision-and-language", "valse"],
}


@functools.cache
def _templates():
    import jinja2

    # block tags on lines of their own leave no line behind; the cards are Markdown, nothing is escaped
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True, undefined=jinja2.StrictUndefined, autoescape=False)


def render(template: str, **context) -> str:
    return _templates().get_template(template).render(**context)


# ---------------------------------------------------------------- cells

def fmt(value, digits=3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def pct(value) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def share(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def js_cell(report) -> str:
    if not report or "js_after" not in report:
        return "not bounded"
    met = "" if report.get("js_bound_met") in (True, None) else ", bound not met"
    dropped = f", {report['dropped_for_js']} dropped for JS" if report.get("dropped_for_js") else ""
    floor = f" (noise floor {fmt(report['js_noise_floor'])})" if report.get("js_noise_floor") is not None else ""
    return f"{fmt(report.get('js_before'))} -> {fmt(report.get('js_after'))}{floor}{dropped}{met}"


def acc_r_cell(entry, interval: bool = False) -> str:
    if not entry or entry.get("acc_r") is None:
        return "n/a"
    ties = f", {entry['ties']} ties" if entry.get("ties") else ""
    bounds = wilson_interval(round(entry["acc_r"] * entry["n"]), entry["n"]) if interval else None
    ci = f", 95% CI {100 * bounds[0]:.0f}-{100 * bounds[1]:.0f}%" if bounds else ""
    return f"{100 * entry['acc_r']:.1f}% (n={entry['n']}{ties}{ci})"


def failing_attackers(gate: dict | None) -> list[tuple[str, dict]]:
    """(attacker, its "after" figures) of every attacker above the gate."""
    return [(name, entry["after"]) for name, entry in ((gate or {}).get("attackers") or {}).items()
            if not entry["after"].get("passed")]


# ---------------------------------------------------------------- the verdict table (the card's first screen)

def interval_cell(interval) -> str:
    return "n/a" if not interval else f"{100 * interval[0]:.0f}-{100 * interval[1]:.0f}%"


def standing_cell(figures: dict, gate: dict) -> str:
    """A reading's standing in words: within chance +- margin, solvable, over-balanced, or inconclusive with about
    the pairs it needs (a gate report without tests: its own verdict)."""
    from foilforge.filters.certification import ABOVE, BELOW, INCONCLUSIVE, WITHIN, about

    standing = figures.get("standing")
    if standing == WITHIN:
        return f"within chance ± {100 * gate['margin']:g} points"
    if standing == ABOVE:
        return "solvable (above chance)"
    if standing == BELOW:
        return "over-balanced (below chance)"
    if standing == INCONCLUSIVE:
        return f"inconclusive: about {about(figures.get('needed'))} pairs needed"
    return figures.get("verdict") or "n/a"


def strongest_reading(gate: dict) -> tuple[str, dict] | None:
    """(name, figures) of the gate's reading farthest from chance (`strongest`), within or transfer."""
    from foilforge.filters.certification import transfer_name

    name = gate.get("strongest")
    readings = {attacker: entry["after"] for attacker, entry in (gate.get("attackers") or {}).items()}
    readings.update({transfer_name(attacker): f for attacker, f in (gate.get("transfer") or {}).items()})
    return (name, readings[name]) if name in readings else None


def verdict_cell(entry: dict) -> str:
    """The instrument's certification in a few words: certified, solvable, over-balanced, or inconclusive with N
    pairs and about M needed."""
    from foilforge.filters.certification import UNDECIDED, about

    gate = entry.get("gate")
    if not gate:
        return "not tested (no release gate)"
    status = gate.get("status")
    if status is None or "needed" not in gate:
        return f"not tested: {entry.get('why') or 'rerun the baseline stage'}"
    if status == UNDECIDED:
        strongest = strongest_reading(gate)
        n = strongest[1]["n"] if strongest else entry["counts"]["exported"]
        return f"inconclusive: {n} pairs, about {about(gate.get('needed'))} needed"
    return status


def exported_groups(entry: dict) -> int | None:
    """The groups exported for the instrument (None without a pairer); with group votes, the valid ones."""
    groups = entry.get("groups") or {}
    if not groups.get("pairer"):
        return None
    return groups["valid_groups"] if groups.get("valid_groups") is not None else groups.get("groups") or 0


def what_would_change(entry: dict) -> str:
    """What would change the verdict: nothing (certified), more pairs (inconclusive), a stricter filter (a reading
    off chance; for an addition, groups: no filter removes its length shortcut), and where the instrument has
    groups, a group-only release (blind by construction)."""
    from foilforge.filters.certification import CERTIFIED, OVER_BALANCED, SOLVABLE, UNDECIDED, about

    gate, groups = entry.get("gate") or {}, exported_groups(entry)
    status = gate.get("status")
    group_only = f"a group-only release: {groups} groups" if groups else None
    if not gate:
        return "run the release gate (params.yaml gate)"
    if status == CERTIFIED:
        return "nothing: certified"
    if status == UNDECIDED:
        change = f"about {about(gate.get('needed'))} pairs: more source data"
    elif status == SOLVABLE and str(((entry.get("foil_stats") or {}).get("edit_checks") or {}).get("type", "")
                                     ).startswith("add_"):
        # an addition's foil is always the longer text: no filter removes that from a pair, a second image does
        change = "Winoground groups: an added object or attribute makes every foil the longer text"
    elif status == SOLVABLE:
        change = "a filter that removes what the attacker reads (params.yaml adversarial)"
    elif status == OVER_BALANCED:
        change = "a filter that stops at chance, not past it (params.yaml adversarial)"
    else:
        change = "rerun the baseline stage"
    return f"{change}; or {group_only}" if group_only else change


def verdict_rows(manifest: dict) -> list[list]:
    """The card's first table, a row per instrument: kept pairs, groups exported, the verdict, the strongest
    reading with its 95% interval, and what would change the verdict."""
    rows = []
    for name, entry in manifest["instruments"].items():
        gate = entry.get("gate") or {}
        strongest = strongest_reading(gate) if gate else None
        groups = exported_groups(entry)
        rows.append([name, entry["counts"]["exported"], "n/a (no pairer)" if groups is None else groups,
                     verdict_cell(entry),
                     "n/a" if strongest is None else
                     f"{strongest[0]}: {share(strongest[1].get(ACCURACY))} ({interval_cell(strongest[1].get('ci95'))})",
                     what_would_change(entry)])
    return rows


def verdict_rule(manifest: dict) -> dict | None:
    """The gate's margin and alpha, as the baseline stage used them (None when no instrument was tested)."""
    for entry in manifest["instruments"].values():
        gate = entry.get("gate") or {}
        if gate.get("margin") is not None:
            return {"margin": f"{100 * gate['margin']:g}", "alpha": f"{gate['alpha']:g}",
                    "size": f"{100 * gate['alpha']:g}", "upper": f"{100 * (0.5 + gate['margin']):g}"}
    return None


# ---------------------------------------------------------------- DATACARD.md

def not_blind_proof(manifest: dict) -> str | None:
    """The instruments a trained attacker solves above the gate, with those attackers' figures."""
    failing = [(name, failing_attackers(entry.get("gate"))) for name, entry in manifest["instruments"].items()]
    failing = [(name, bad) for name, bad in failing if bad]
    if not failing:
        return None
    return "; ".join(f"{name} ({', '.join(f'{a} {share(f.get(ACCURACY))}' for a, f in bad)})" for name, bad in failing)


def instrument_rows(manifest: dict) -> list[list]:
    rows = []
    for name, entry in manifest["instruments"].items():
        counts = " -> ".join(f"{k} {v}" for k, v in entry["counts"].items())
        bias = entry.get("bias") or {}
        acc = (entry.get("text_baseline") or {}).get("acc_r")
        rows.append([name, entry["counts"]["exported"], counts, fmt(bias.get("n_lexical_items")), fmt(bias.get("js")),
                     "n/a" if acc is None else f"{100 * acc:.1f}%"])
    return rows


def validation_rows(manifest: dict) -> list[tuple[str, list | None, int]]:
    """VALSE Table 5 columns per instrument (None: not validated): items, % valid, % unanimous, Krippendorff's
    alpha (all / valid), annotators, exported."""
    rows = []
    for name, entry in manifest["instruments"].items():
        t, exported = entry.get("validation"), entry["counts"]["exported"]
        cells = None if not t else [
            f"{t.get('items_voted')} of {t.get('items')}", t.get("valid"), pct(t.get("valid_pct")),
            pct(t.get("unanimous_pct")), fmt(t.get("alpha_all"), 2), fmt(t.get("alpha_valid"), 2),
            f"{t.get('annotators')} ({len(t.get('annotators_excluded') or [])})",
            f"{exported} ({t.get('export', 'valid')})"]
        rows.append((name, cells, exported))
    return rows


def model_lines(manifest: dict) -> list[tuple[str, str]]:
    """Per instrument, what ran: the foiler's provenance, each filter's model and variant, the text-only baseline."""
    lines = []
    for name, entry in manifest["instruments"].items():
        parts = [f"{k}: {', '.join(v)}" for k, v in entry["provenance"].items()]
        parts += [f"filter {f}: model {', '.join(e['model']) or 'n/a'}, variant {', '.join(e['variant']) or 'n/a'}"
                  for f, e in entry["filters"].items()]
        if entry.get("filters_not_run"):
            parts.append(f"filters not run: {', '.join(entry['filters_not_run'])}")
        baseline = (entry.get("text_baseline") or {}).get("model")
        if baseline:
            parts.append(f"text-only baseline: {baseline}")
        lines.append((name, "; ".join(parts) if parts else "no provenance recorded"))
    return lines


def validity_line(manifest: dict) -> str | None:
    """One line: the checks that a foil is false where its caption is true (the manifest's `validity_checks`)."""
    checks = manifest.get("validity_checks")
    if not checks:
        return None
    entailment = checks["entailment"]
    runs = ", ".join(f"{name} ({info['refused']} of {info['candidates']} candidates refused)"
                     if info.get("candidates") is not None else name
                     for name, info in entailment["instruments"].items())
    line = (f"entailment check (WordNet {entailment['wordnet']}, spatial table v{entailment['table_version']} "
            f"sha256 {entailment['table_sha256'][:12]}) on {runs or 'no instrument'}")
    nli = checks["nli"]["instruments"]
    ran = "; ".join(f"{name}: {', '.join(models)}" for name, models in nli.items())
    line += f"; NLI filter {ran}" if ran else "; NLI filter not run"
    # the pairers' own-image checks, one clause a check: "foils refused where <check>: plurals (3), ..."
    by_check: dict[str, list[str]] = {}
    for name, info in ((checks.get("own_image") or {}).get("instruments") or {}).items():
        by_check.setdefault(info["check"], []).append(f"{name} ({sum(info['refused'].values())})")
    for check, counts in by_check.items():
        line += f"; foils refused where {check}: {', '.join(counts)}"
    return line


def blind_check_rows(manifest: dict) -> tuple[list[list], set[str]]:
    """The refinement's acc_r before/after per scorer, the held-out scorer's with its interval and verdict, JS;
    and the held-out scorers' names."""
    rows, held_out_names = [], set()
    for name, entry in manifest["instruments"].items():
        check = (entry.get("text_baseline") or {}).get("blind_check")
        if not check:
            continue
        refinement = "; ".join(f"{scorer}: {acc_r_cell(r['before'])} -> {acc_r_cell(r['after'])}"
                               for scorer, r in check.get("refinement", {}).items()) or "not refined"
        held = check.get("held_out")
        if held:
            held_out_names.add(held["scorer"])
        verdict = (held.get("verdict") if held else None) or "n/a"  # the baseline stage's, not judged again here
        rows.append([name, f"{check['records_before']} -> {check['records_after']}", refinement,
                     acc_r_cell(held["before"], True) + " -> " + acc_r_cell(held["after"], True) if held
                     else "not configured", verdict, js_cell(entry.get("refinement"))])
    return rows, held_out_names


def gate_rows(manifest: dict) -> list[list]:
    """Per instrument and reading (each attacker within the kept pairs, then fitted on the removed ones): accuracy
    before -> after, n, CI, the test's standing (filters/certification.py) and, within, the export's gate."""
    from foilforge.filters.certification import transfer_name

    rows = []
    for name, gate in [(name, entry["gate"]) for name, entry in manifest["instruments"].items() if entry.get("gate")]:
        readings = [(attacker, entry["before"], entry["after"]) for attacker, entry in gate["attackers"].items()]
        readings += [(transfer_name(attacker), None, figures) for attacker, figures in (gate.get("transfer") or {}).items()]
        for reading, before, after in readings:
            rows.append([name, reading, after.get("family") or "",
                         share(before.get(ACCURACY)) if before else f"fitted on {after.get('trained_on')} removed",
                         share(after.get(ACCURACY)), after["n"], interval_cell(after.get("ci95")),
                         standing_cell(after, gate),
                         f"{'pass' if after.get('passed') else 'FAIL'} (<= {100 * after['max_accuracy']:.0f}%)"
                         if before else "n/a"])
    return rows


def group_rows(manifest: dict) -> list[list]:
    """Per instrument with groups: kept pairs, groups formed, coverage, valid groups, the pairer."""
    rows = []
    for name, entry in manifest["instruments"].items():
        entry = entry.get("groups")
        if not entry:
            continue
        coverage = "n/a" if entry.get("coverage") is None else f"{100 * entry['coverage']:.1f}%"
        valid = "no votes" if entry.get("valid_groups") is None else str(entry["valid_groups"])
        rows.append([name, entry["kept_pairs"], entry["groups"], coverage, valid,
                     entry["pairer"] or f"none: {entry.get('why')}"])
    return rows


def sugar_rows(manifest: dict) -> list[list]:
    """Per SugarCrepe-type instrument (its foil metrics carry `edit_checks`): the proposer, the funnel from the
    foiler's sites to the export, and the reasons candidates were refused, most frequent first."""
    rows = []
    for name, entry in manifest["instruments"].items():
        stats = entry.get("foil_stats") or {}
        checks = stats.get("edit_checks")
        if not checks:
            continue
        refused = {**(checks.get("refused") or {})}
        for reason, n in (entry.get("refused") or {}).items():
            refused[f"select: {reason}"] = refused.get(f"select: {reason}", 0) + n
        reasons = "; ".join(f"{reason} {n}" for reason, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])))
        groups = (entry.get("groups") or {}).get("groups")
        rows.append([name, checks.get("proposer", "?"), checks.get("sites", 0), checks.get("answers", 0),
                     checks.get("passed", 0), (stats.get("counts") or {}).get("records", "?"),
                     entry["counts"].get("exported", 0), "n/a" if groups is None else groups, reasons or "none"])
    return rows


def sugar_notes(manifest: dict) -> list[str]:
    """What a reader must know of the SugarCrepe types built: an offline instruct model demonstrates the path, not
    the quality; the additions carry the length shortcut unless grouped (with the length attacker's reading)."""
    notes = []
    for name, entry in manifest["instruments"].items():
        settings = (entry.get("foil_stats") or {}).get("proposer_settings") or {}
        if str(settings.get("model", "")).startswith("package:"):
            notes.append(f"{name}: worded by {settings['model']}, a small offline instruct model: it demonstrates the "
                         "instruct_llm path, not the quality of the instruct models the proposer is meant for "
                         "(docs/sugarcrepe.md); most of its answers are refused by the checks")
        if name.split("@")[0] in ("add_obj", "add_att") and (entry.get("foil_stats") or {}).get("edit_checks"):
            length = (((entry.get("gate") or {}).get("attackers") or {}).get("length") or {}).get("after") or {}
            reading = f" (the length attacker reads {share(length['accuracy'])} of the kept pairs)" \
                if length.get("accuracy") is not None else ""
            groups = (entry.get("groups") or {}).get("groups")
            notes.append(f"{name}: every foil is its caption plus words, so \"the shorter text is the caption\" solves "
                         f"the ungrouped pairs without the image{reading}; no filter can remove that from a pair, only "
                         f"a second image does: use its Winoground groups ({groups or 0} exported)")
    return notes


def format_rows(manifest: dict) -> list[list]:
    """Per instrument and harness format: the records written, the files, what was left out."""
    return [[name, fmt_name, entry["records"], ", ".join(entry["files"]) or "none",
             "; ".join(f"{n} {why}" for why, n in entry["left_out"].items()) or "none"]
            for name, inst in manifest["instruments"].items()
            for fmt_name, entry in (inst.get("formats") or {}).items()]


def datacard_text(manifest: dict) -> str:
    """DATACARD.md of an export manifest."""
    blind_rows, held_out_names = blind_check_rows(manifest)
    roles = manifest.get("text_only_roles") or {}
    instruments = manifest["instruments"]
    return render(
        "datacard.md.j2",
        verdict_rows=verdict_rows(manifest), verdict_rule=verdict_rule(manifest),
        not_blind_proof=not_blind_proof(manifest),
        instrument_rows=instrument_rows(manifest), validation_rows=validation_rows(manifest),
        annotators_excluded=[(name, excluded) for name, entry in instruments.items()
                             for excluded in (entry.get("validation") or {}).get("annotators_excluded") or []],
        models=model_lines(manifest), validity=validity_line(manifest),
        chance_points=f"{100 * CHANCE_MARGIN:.0f}", min_judged_pairs=MIN_JUDGED_PAIRS,
        blind_check_rows=blind_rows,
        refinement_scorers=", ".join(sorted(roles.get("refinement") or {})) or "none",
        held_out_scorers="; ".join(sorted(held_out_names)) or "none",
        gated=any(entry.get("gate") for entry in instruments.values()), gate_rows=gate_rows(manifest),
        group_rows=group_rows(manifest), format_rows=format_rows(manifest),
        sugar_rows=sugar_rows(manifest), sugar_notes=sugar_notes(manifest),
        source_rows=[[source, info["path"], info["sha256"] or "missing"]
                     for source, files in manifest["sources"].items() for info in files.values()],
        not_validated=[name for name, entry in instruments.items() if not entry.get("validation")])


# ---------------------------------------------------------------- README.md, the Hugging Face dataset card

def source_family(source: dict | None, name: str) -> str:
    """The citation key of a params.yaml source (its format, e.g. visdial for visdial_train)."""
    return (source or {}).get("format") or name


def card_metadata(counts: dict[str, int]) -> dict:
    """The dataset card's YAML metadata: one config per instrument with records (split `test`), a default config
    `all` of every instrument, and each config's declared features."""
    from foilforge.pipeline.loadable import DEFAULT_CONFIG, features_yaml, rows_path

    loadable = [name for name, n in counts.items() if n]
    configs = []
    if loadable:
        configs.append({"config_name": DEFAULT_CONFIG, "default": True,
                        "data_files": [{"split": "test", "path": [rows_path(name) for name in loadable]}]})
    configs += [{"config_name": name, "data_files": [{"split": "test", "path": rows_path(name)}]} for name in loadable]
    metadata = {**CARD_METADATA, "configs": configs or None}
    if loadable:
        # declared features keep every column's type even where a config holds only nulls in it
        metadata["dataset_info"] = [{"config_name": name, "features": features_yaml()}
                                    for name in [DEFAULT_CONFIG, *loadable]]
    return metadata


def dataset_card_text(counts: dict[str, int], sources: list[str]) -> str:
    """README.md: the YAML metadata between `---` lines, then the body users read first."""
    metadata = yaml.safe_dump(card_metadata(counts), sort_keys=False, allow_unicode=True, width=float("inf"))
    body = render("dataset_card.md.j2", configs=[(name, n) for name, n in counts.items() if n],
                  empty=[name for name, n in counts.items() if not n],
                  citations=[SOURCE_CITATIONS[key] for key in
                             ["valse", *sorted({s for s in sources if s in SOURCE_CITATIONS} - {"valse"})]])
    return f"---\n{metadata}---\n\n{body}"
