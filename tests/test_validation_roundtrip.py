"""Round trip on the sample: foils -> crowd batch -> a results CSV -> `dvc repro` -> a validated benchmark.

A small DVC project in a temp dir runs the repository's own validate, bias and export stages
(dvc.yaml, params.yaml) on existence foils made from the embedded Visual7W sample, plus a
second instrument that gets no votes. The test writes the votes, so it knows the expected
counts, the valid subset and the agreement, which it recomputes with `krippendorff` itself.
"""

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import krippendorff
import numpy as np
import pytest
import yaml

from tests.annotation_helpers import ROOT, foil_records, foilforge, write_jsonl

BIN = Path(sys.executable).parent
CATEGORIES = ["caption", "foil", "both", "neither", "cannot_tell"]


def _run(cmd, cwd):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT),
           "DVC_NO_ANALYTICS": "1"}   # no analytics daemon, no network
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{cmd}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _sample_existence_foils(tmp: Path) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert (ROOT / params["sources"]["visual7w"]["root"]).is_dir(), "the embedded Visual7W sample is missing"
    samples, foils = tmp / "v7w.jsonl", tmp / "existence.jsonl"
    for args in (("ingest", "visual7w", "--output", str(samples)),
                 ("foil", "existence", "--input", str(samples), "--output", str(foils))):
        done = foilforge(*args)
        assert done.returncode == 0, done.stderr
    return foils


def _project(tmp: Path, existence_foils: Path) -> Path:
    """The repository's validate, bias and export stages over two instruments, inputs as plain files."""
    project = tmp / "project"
    project.mkdir()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    keep = {name: stages[name] for name in ("validate", "bias", "export")}
    for stage in keep.values():
        body = stage.get("do", stage)
        # code lives in ROOT: drop the code deps (foilforge/, pipeline/, foilers, filters), keep the data deps
        body["deps"] = [d for d in body["deps"] if not str(d).startswith(("foilforge/", "pipeline/", "foilers", "filters"))]
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": keep}, sort_keys=False))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["instruments"] = {"existence": params["instruments"]["existence"],
                             "relations": params["instruments"]["relations"]}
    params["bias"]["on_exceed"] = "warn"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy(ROOT / ".dvcignore", project / ".dvcignore")
    (project / "data" / "filtered").mkdir(parents=True)
    shutil.copy(existence_foils, project / "data" / "filtered" / "existence.jsonl")
    write_jsonl(project / "data" / "filtered" / "relations.jsonl", foil_records(5))
    for folder in ("rejected", "baseline", "annotations", "metrics/foil", "metrics/select"):
        (project / "data" / folder).mkdir(parents=True, exist_ok=True)
        (project / "data" / folder / "README.md").write_text("kept in git so the directory exists\n")
    _run([str(BIN / "dvc"), "init", "--no-scm", "-q"], project)
    return project


def _plain(text_html: str) -> str:
    return html.unescape(re.sub(r"</?b>", "", text_html))


def _write_results(batch: Path, records: dict, out: Path) -> tuple[dict, list]:
    """Three workers per item; item k gets 3, 2, 1, 0 caption votes in turn. Returns expected counts, and the votes."""
    expected, votes = {}, []
    with open(batch, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["item_id"] for r in rows] == sorted(records)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["HITId", "AssignmentId", "WorkerId", "Input.item_id", "Input.text_1", "Input.text_2",
                         "Answer.choice", "Approve"])
        for k, row in enumerate(rows):
            record = records[row["item_id"]]
            caption_is_first = _plain(row["text_1"]) == record["caption"]
            assert _plain(row["text_2" if caption_is_first else "text_1"]) == record["foil"]
            n_caption = [3, 2, 1, 0][k % 4]
            wanted = ["caption"] * n_caption + ["foil", "neither", "both"][: 3 - n_caption]
            counts = {"caption": 0, "foil": 0, "other": 0}
            for worker, relative in zip(("W1", "W2", "W3"), wanted):
                choice = {"caption": "first" if caption_is_first else "second",
                          "foil": "second" if caption_is_first else "first"}.get(relative, relative)
                writer.writerow([f"H{k}", f"A{k}{worker}", worker, row["item_id"], row["text_1"], row["text_2"], choice, ""])
                counts[relative if relative in ("caption", "foil") else "other"] += 1
                votes.append((row["item_id"], worker, relative))
            expected[row["item_id"]] = counts
    return expected, votes


def _alpha(votes, item_ids):
    workers = sorted({w for _, w, _ in votes})
    matrix = np.full((len(workers), len(item_ids)), np.nan)
    for item, worker, relative in votes:
        if item in item_ids:
            matrix[workers.index(worker), item_ids.index(item)] = CATEGORIES.index(relative)
    return krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal", value_domain=range(5))


def test_batch_votes_and_dvc_repro_give_the_validated_benchmark(tmp_path):
    project = _project(tmp_path, _sample_existence_foils(tmp_path))
    dvc = str(BIN / "dvc")
    first = _run([dvc, "repro"], project)
    assert "Running stage 'validate@existence'" in first and "Running stage 'export'" in first
    assert "no votes file" in first
    unvalidated = json.loads((project / "data" / "benchmark" / "existence.json").read_text())
    assert all(r["mturk"] is None for r in unvalidated.values())

    records = {r["id"]: r for r in map(json.loads, (project / "data" / "filtered" / "existence.jsonl").read_text().splitlines())}
    batch = project / "batch.csv"
    _run([sys.executable, "-m", "foilforge.pipeline.stages.cli", "annotate", "export", "existence", "--format", "mturk",
          "--input", "data/filtered/existence.jsonl", "--output", str(batch)], project)
    template = batch.with_suffix(".html").read_text()
    for field in ("${image_url}", "${text_1}", "${text_2}", 'name="choice" value="cannot_tell"'):
        assert field in template
    # the server's database next to the votes does not count as a change (.dvcignore)
    (project / "data" / "annotations" / "annotations.sqlite").write_bytes(b"not votes")
    assert "up to date" in _run([dvc, "status"], project)

    expected, votes = _write_results(batch, records, project / "data" / "annotations" / "existence.csv")
    status = _run([dvc, "status"], project)
    assert "validate@existence" in status and "bias@" not in status and "export" not in status
    second = _run([dvc, "repro"], project)
    assert "Running stage 'validate@existence'" in second and "Running stage 'bias@existence'" in second
    assert "Running stage 'export'" in second
    assert "Stage 'bias@relations' didn't change, skipping" in second    # its validated records did not change

    valid_ids = sorted(i for i, c in expected.items() if c["caption"] >= 2)
    benchmark = json.loads((project / "data" / "benchmark" / "existence.json").read_text())
    assert sorted(benchmark) == valid_ids and 0 < len(valid_ids) < len(records)
    assert {i: r["mturk"] for i, r in benchmark.items()} == {i: expected[i] for i in valid_ids}
    metrics = json.loads((project / "data" / "metrics" / "validate" / "existence.json").read_text())
    assert metrics["alpha_all"] == pytest.approx(_alpha(votes, sorted(expected)))
    assert metrics["alpha_valid"] == pytest.approx(_alpha(votes, valid_ids))
    unanimous = sum(c["caption"] == 3 for c in expected.values())
    assert (metrics["items_voted"], metrics["valid"], metrics["unanimous"]) == (len(records), len(valid_ids), unanimous)
    relations = json.loads((project / "data" / "benchmark" / "relations.json").read_text())
    assert len(relations) == 5 and all(r["mturk"] is None for r in relations.values())

    manifest = json.loads((project / "data" / "benchmark" / "manifest.json").read_text())
    assert manifest["instruments"]["existence"]["counts"]["human_valid"] == len(valid_ids)
    assert manifest["instruments"]["existence"]["validation"]["valid_pct"] == pytest.approx(100 * len(valid_ids) / len(records))
    card = (project / "data" / "benchmark" / "DATACARD.md").read_text()
    assert "| instrument | items voted | valid | % valid | % unanimous | α (all) | α (valid) | annotators (excluded) | exported |" in card
    row = (f"| existence | {len(records)} of {len(records)} | {len(valid_ids)} | {100 * len(valid_ids) / len(records):.1f}% | "
           f"{100 * unanimous / len(records):.1f}% | {metrics['alpha_all']:.2f} | {metrics['alpha_valid']:.2f} | 3 (0) | "
           f"{len(valid_ids)} (valid) |")
    assert row in card
    assert "| relations | not validated yet (no votes) |" in card
    assert "Not yet validated by humans: relations." in card
