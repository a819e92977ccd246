"""`foilforge summary`: the data card's verdicts as aligned lines (what `make repro` ends with), and its errors."""

from __future__ import annotations

from pathlib import Path

from foilforge.pipeline.stages import summary
from foilforge.pipeline.stages.cli import main

ROOT = Path(__file__).resolve().parents[1]

# the head of a card as pipeline/templates/datacard.md.j2 renders it (rows from the sample build's card)
CARD = """# foilforge benchmark: data card

## Verdicts

| instrument | kept pairs | groups | verdict | strongest reading (95% CI) | what would change it |
|---|---|---|---|---|---|
| actant_swap | 144 | 26 | inconclusive: 144 pairs, about 170 needed | minilm_probe from removed: 61.8% (54-69%) | about 170 pairs: more source data; or a group-only release: 26 groups |
| bd2bb_decoys | 150 | n/a (no pairer) | over-balanced | word_ngram: 4.9% (2-9%) | a filter that stops at chance, not past it (params.yaml adversarial) |

Certified: every trained text-only attacker's reading (out of fold within the kept pairs, and fitted on the
removed ones) is shown within chance ± 12 points by two one-sided exact binomial tests at level
0.05: a set that one attacker reads 12 points above chance (62% for pairs) is certified at
most 5% of the time.

## Instruments

| instrument | exported | counts through the filters | #lexical items | JS | text-only acc_r |
|---|---|---|---|---|---|
| actant_swap | 144 | input 272 -> after_length 272 -> exported 144 | 33 | 0.000 | 50.0% |
"""


def card_dir(tmp_path, text=CARD) -> Path:
    (tmp_path / "DATACARD.md").write_text(text, encoding="utf-8")
    return tmp_path


def test_the_verdicts_print_as_aligned_columns_without_the_last_one(tmp_path, capsys):
    assert main(["summary", "--benchmark-dir", str(card_dir(tmp_path))]) == 0
    assert capsys.readouterr().out == (
        "instrument    kept pairs  groups           verdict                                    "
        "strongest reading (95% CI)\n"
        "------------  ----------  ---------------  -----------------------------------------  "
        "-----------------------------------------\n"
        "actant_swap   144         26               inconclusive: 144 pairs, about 170 needed  "
        "minilm_probe from removed: 61.8% (54-69%)\n"
        "bd2bb_decoys  150         n/a (no pairer)  over-balanced                              "
        "word_ngram: 4.9% (2-9%)\n"
        f"\n2 instruments. The card: {tmp_path / 'DATACARD.md'}; every stage's metrics: dvc metrics show\n")


def test_all_columns_adds_what_would_change_each_verdict(tmp_path, capsys):
    assert main(["summary", "--benchmark-dir", str(card_dir(tmp_path)), "--all-columns"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("what would change it")
    assert lines[2].endswith("  about 170 pairs: more source data; or a group-only release: 26 groups")
    assert lines[3].endswith("  a filter that stops at chance, not past it (params.yaml adversarial)")


def test_a_missing_card_a_card_without_verdicts_and_a_short_row_are_named(tmp_path, capsys):
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {tmp_path / 'DATACARD.md'}: no data card there; "
                                       "build the benchmark first (make repro) or name its folder with "
                                       "--benchmark-dir\n")
    card_dir(tmp_path, CARD.replace("## Verdicts", "## Outcomes"))
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {tmp_path / 'DATACARD.md'}: no '## Verdicts' "
                                       "section (the data card foilforge export writes has one)\n")
    card_dir(tmp_path, CARD.replace("| 150 | n/a (no pairer) |", "| 150 |"))
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"foilforge summary: error: {tmp_path / 'DATACARD.md'}, record 2 "
                                       "(bd2bb_decoys) of the '## Verdicts' table: has 5 cells where the header "
                                       "has 6\n")
    card_dir(tmp_path, CARD.split("| instrument | kept")[0] + "## Instruments\n")
    assert main(["summary", "--benchmark-dir", str(tmp_path)]) == 2
    assert "the '## Verdicts' section has no table rows" in capsys.readouterr().err


def test_the_card_template_writes_the_section_and_header_summary_reads():
    template = (ROOT / "pipeline" / "templates" / "datacard.md.j2").read_text(encoding="utf-8")
    lines = template.splitlines()
    assert summary.HEADING in lines
    header = next(line for line in lines[lines.index(summary.HEADING):] if line.startswith("| "))
    assert summary.verdict_rows(f"{summary.HEADING}\n\n{header}\n|---|\n| {' | '.join('x' * 6)} |\n", "t")[0] == [
        "instrument", "kept pairs", "groups", "verdict", "strongest reading (95% CI)", "what would change it"]
