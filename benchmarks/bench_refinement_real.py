"""Adversarial refinement on real data: acc_r, records kept and JS before/after.

Three runs, each through the same stage commands a user runs (ingest, foil, score, select, bias, baseline),
with the repository's params.yaml for filters, refinement scorers and the held-out scorer:

* `valse_<piece>`: every released VALSE dev file (../shared/data/valse-dev/: a quarter of each released
  instrument) re-filtered through the pass-through foiler `released.v1`, each with the filters and
  refinement of the foilforge instrument it corresponds to (`VALSE_PIECES`);
* `coco_relations`: relations foiled from the first N real COCO val 2017 captions (default 1,000).

Figures per run: records before/after the refinement, records kept when choosing among a caption's own
proposals vs dropping captions only, acc_r before/after under each refinement scorer and under the
held-out scorer, and the JS divergence of the changed items before (one candidate per sample: what would
be exported without the refinement) and after. Written to benchmarks/results/refinement_real.json.

    python -m benchmarks.bench_refinement_real [--captions 1000] [--only coco_relations] [--keep DIR [--reuse-scores]]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import ROOT, SHARED, read_metrics, result_path, write_result

NAME = "refinement_real"

#: released VALSE file -> (the foilforge instrument whose filters and refinement it gets, its phenomenon).
#: counting-hard is VALSE's "balanced" counting piece, coreference-hard its "clean" one.
VALSE_PIECES = {
    "existence.json": ("existence", "existence"),
    "plurals.json": ("plurals", "plurals"),
    "counting-hard.json": ("counting_balanced", "counting"),
    "counting-small-quant.json": ("counting_small", "counting"),
    "counting-adversarial.json": ("counting_adversarial", "counting"),
    "relations.json": ("relations", "relations"),
    "action-replacement.json": ("action_replacement", "actions"),
    "actant-swap.json": ("actant_swap", "actions"),
    "coreference-standard.json": ("coreference_standard", "coreference"),
    "coreference-hard.json": ("coreference_clean", "coreference"),
    "foil-it.json": ("foil_it", "noun phrases"),
}


#: an instrument's keys that say what it foils and from what (the rest are its filters, bias, gate, ...)
FOILING_KEYS = ("foiler", "source", "args", "max_samples", "samples_per_image", "candidates_per_sample")


def _params(work: Path, name: str, source: dict, instrument: dict, like: str) -> None:
    """The repo's params.yaml with one source and one instrument, filtered and refined like `like`: the
    instrument's own settings (filters, bias, adversarial filter, gate, ...) are `like`'s where it gives none."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    settings = {key: value for key, value in params["instruments"][like].items() if key not in FOILING_KEYS}
    params["sources"] = {name: source}
    params["instruments"] = {name: {**settings, **instrument}}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _run(work: Path, *args: str) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(["foilforge", *args], cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=(work / "log.txt").open("a"))


def _js(work: Path, name: str, records_file: str) -> float | None:
    _run(work, "bias", name, "--input", records_file, "--output-dir", f"bias_{Path(records_file).stem}")
    report = json.loads((work / f"bias_{Path(records_file).stem}" / "bias.json").read_text())
    return report.get("js")


def _first_candidate_per_sample(work: Path, kept: str, rejected: str, out: str) -> int:
    """Records that passed every filter but the refinement, one per sample (the first candidate): the
    benchmark without the refinement, for the JS 'before'."""
    from foilforge.filters.refinement import candidate_order
    from foilforge.pipeline.baseline import refinement_candidates

    def read(path):
        return [json.loads(line) for line in (work / path).read_text().splitlines() if line.strip()]

    seen, rows = set(), []
    for record in sorted(refinement_candidates(read(kept), read(rejected)), key=lambda r: candidate_order(r["id"])):
        sample = str(record.get("sample_id", record["id"]))
        if sample not in seen:
            seen.add(sample)
            rows.append(record)
    rows.sort(key=lambda r: r["id"])
    (work / out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def measure(work: Path, name: str, source: dict, instrument: dict, like: str, samples_from=None,
            reuse_scores: bool = False) -> dict:
    _params(work, name, source, instrument, like)
    started = time.perf_counter()
    if not (reuse_scores and (work / "scored.jsonl").is_file()):
        _run(work, "ingest", name, "--output", "ingested.jsonl")
        if samples_from:
            samples_from(work / "ingested.jsonl")
        _run(work, "foil", name, "--input", "ingested.jsonl", "--output", "foils.jsonl", "--metrics", "foil_metrics.json")
        _run(work, "score", name, "--input", "foils.jsonl", "--output", "scored.jsonl", "--no-progress")
    _run(work, "select", name, "--input", "scored.jsonl", "--output", "kept.jsonl", "--rejected", "rejected.jsonl",
         "--metrics", "select.json")
    _run(work, "baseline", name, "--input", "kept.jsonl", "--rejected", "rejected.jsonl", "--output", "baseline.json")
    before_n = _first_candidate_per_sample(work, "kept.jsonl", "rejected.jsonl", "before.jsonl")
    select = json.loads((work / "select.json").read_text())
    baseline = json.loads((work / "baseline.json").read_text())
    refinement = (select.get("refinement") or {}).get("plausibility") or {}
    check = baseline["blind_check"]
    return {
        "samples": sum(1 for _ in (work / "ingested.jsonl").open()),
        "candidates": sum(1 for _ in (work / "foils.jsonl").open()),
        "refinement_candidates": check["records_before"],
        "samples_before_refinement": before_n,
        "kept": check["records_after"],
        "kept_dropping_captions_only": refinement.get("kept_drop_captions_only",
                                                      refinement.get("kept_choosing_among_proposals")),
        "refinement_scorers": {n: {"before": r["before"], "after": r["after"]} for n, r in check["refinement"].items()},
        "held_out": check["held_out"],
        "js_before_one_candidate_per_sample": _js(work, name, "before.jsonl"),
        "js_after": _js(work, name, "kept.jsonl"),
        # the refinement's JS bound (filters.keep...plausibility.max_js_rise; with the adversarial filter the stricter
        # of it and adversarial.max_js_rise): JS of the largest balanced set, the item weight / L1 budget it took, and
        # how many records it dropped to stay within the bound. `bounded` false (the data card's "not bounded"): no
        # bound applied and the other fields null; the adversarial filter's max_js_rise null switches it off
        # (existence: its negation balance instead)
        "js_bound": {"bounded": "js_after" in refinement,
                     **{k: refinement.get(k) for k in ("max_js_rise", "js_before", "js_matched", "js_after",
                                                         "dropped_for_js", "imbalance_weight", "imbalance_l1",
                                                         "js_bound_met", "js_noise_floor")}},
        "text_baseline_after": {"model": baseline["model"], "acc_r": baseline["acc_r"], "n": baseline["n"]},
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", type=int, default=1000, help="real COCO captions to foil for coco_relations")
    parser.add_argument("--only", action="append", default=None, help="run only these (repeatable)")
    parser.add_argument("--keep", default=None, help="keep each run's files under this directory (default: a temp dir)")
    parser.add_argument("--reuse-scores", action="store_true",
                        help="with --keep: where a run's scored.jsonl exists, rerun only select and later (params changes)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found (the shared real data)")
        return 0
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    valse = {"format": "valse", "root": str(SHARED / "valse-dev")}

    def first_captions(path: Path) -> None:
        lines = path.read_text().splitlines(keepends=True)[: args.captions]
        path.write_text("".join(lines))

    runs = {
        f"valse_{like}": ({**valse, "files": {"instrument": file}},
                          {"foiler": "released.v1", "source": f"valse_{like}", "args": {"phenomenon": phenomenon}},
                          like, None)
        for file, (like, phenomenon) in VALSE_PIECES.items()
    }
    runs["coco_relations"] = ({"format": "coco", "root": str(SHARED / "real" / "coco"),
                               "files": {"captions": "captions_val2017.json"}},
                              {**params["instruments"]["relations"], "source": "coco_relations"}, "relations",
                              first_captions)
    # an earlier file's figures of runs not rerun now stay; entries of runs that no longer exist go
    old = read_metrics(result_path(NAME))
    results = {k: v for k, v in old.items() if k in runs}
    results.update({"params": "params.yaml of the repository (filters, refinement scorers, blind_check.held_out)",
                    "coco_captions": args.captions})
    for name, (source, instrument, like, samples_from) in runs.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"refine_{name}_") as tmp:
            work = Path(args.keep) / name if args.keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            print(f"{name} ...", flush=True)
            results[name] = measure(work, name, source, instrument, like, samples_from, args.reuse_scores)
            print(json.dumps(results[name], indent=1), flush=True)
        write_result(NAME, results, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
