"""`foilforge summary`: the data card's verdicts, from the manifest, as aligned lines (what `make repro` ends
with), and its errors."""

from __future__ import annotations

import json
from pathlib import Path

from foilforge.pipeline.stages import summary
from foilforge.pipeline.stages.cli import main
from tests.test_verdicts import gate_of, reading

ROOT = Path(__file__).resolve().parents[1]


def manifest() -> dict:
    """Two instruments as export writes them (the card's first-screen test, tests/test_verdicts.py)."""
    from foilforge.pipeline.release import certification_entry

    gates = {"existence": gate_of({"word": reading(200, 400)}, {"word": reading(205, 400)}),
             "counting_balanced": gate_of({"word": reading(120, 400)})}
    groups = {"existence": None, "counting_balanced": {"pairer": "counting.v1", "groups": 40, "kept_pairs": 400,
                                                       "valid_groups": None}}
    return {"instruments": {name: {"gate": gate, **certification_entry(gate), "counts": {"exported": 400},
                                   "groups": groups[name], "provenance": {}, "filters": {}}
                            for name, gate in gates.items()}, "sources": {}}


def benchmark_dir(tmp_path, document) -> Path:
    (tmp_path / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
    return tmp_path


def test_the_verdicts_print_as_aligned_columns_without_the_last_one(tmp_path, capsys):
    assert main(["summary", "--benchmark-dir", str(benchmark_dir(tmp_path, manifest()))]) == 0
    assert capsys.readouterr().out == (
        "instrument         kept pairs  groups           verdict        strongest reading (95% CI)\n"
        "-----------------  ----------  ---------------  -------------  ---------------------------------\n"
        "existence          400         n/a (no pairer)  certified      word from removed: 51.2% (46-56%)\n"
        "counting_balanced  400         40               over-balanced  word: 30.0% (26-35%)\n"
        f"\n2 instruments. The card: {tmp_path / 'DATACARD.md'}; every stage's metrics: dvc metrics show\n")


def test_all_columns_adds_what_would_change_each_verdict_and_the_rows_are_the_cards(tmp_path, capsys):
    from foilforge.pipeline.card import datacard_text

    assert main(["summary", "--benchmark-dir", str(benchmark_dir(tmp_path, manifest())), "--all-columns"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("what would change it")
    assert lines[2].endswith("  nothing: certified")
    assert lines[3].endswith("  a filter that stops at chance, not past it (params.yaml adversarial); or a "
                             "group-only release: 40 groups")
    card = datacard_text(manifest()).splitlines()
    table = [line for line in card[card.index("## Verdicts"):] if line.startswith("| ")][:3]
    assert [" ".join(line.split()) for line in lines[:1] + lines[2:4]] == [
        " ".join(line.strip("| ").replace(" | ", " ").split()) for line in table]


def test_a_missing_or_foreign_manifest_and_a_broken_entry_are_named(tmp_path, capsys):
    path = tmp_path / "manifest.json"
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {path}: no manifest there; build the benchmark "
                                       "first (make repro) or name its folder with --benchmark-dir\n")
    benchmark_dir(tmp_path, {"pieces": {}})
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {path}, field 'instruments': expected a mapping "
                                       "of instruments (the manifest foilforge export writes)\n")
    broken = manifest()
    del broken["instruments"]["counting_balanced"]["counts"]
    benchmark_dir(tmp_path, broken)
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {path}, record instrument counting_balanced: not "
                                       "an entry foilforge export writes (KeyError: 'counts')\n")


def test_the_header_is_the_card_templates():
    template = (ROOT / "pipeline" / "templates" / "datacard.md.j2").read_text(encoding="utf-8").splitlines()
    header = next(line for line in template[template.index("## Verdicts"):] if line.startswith("| "))
    assert header == "| " + " | ".join(summary.HEADER) + " |"
