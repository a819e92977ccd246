"""Print the built benchmark's verdicts: the data card's first table, one aligned line per instrument.

    foilforge summary                                   # data/benchmark/DATACARD.md
    foilforge summary --benchmark-dir DIR --all-columns

`make repro` ends with it: the kept pairs, Winoground groups, the release gate's verdict and its strongest
reading of every instrument, in a terminal's width. What would change each verdict (`--all-columns`), the
readings behind it and everything else are in the card; every stage's metrics: `dvc metrics show`.
"""

from __future__ import annotations

import re
from pathlib import Path

from foilforge.errors import InputError

CARD = "DATACARD.md"
HEADING = "## Verdicts"
#: the columns shown without --all-columns: the last, what would change a verdict, is a sentence
SHORT_COLUMNS = 5


def add_arguments(parser) -> None:
    parser.add_argument("--benchmark-dir", type=Path, default=Path("data/benchmark"),
                        help="the exported benchmark (default: data/benchmark), holding DATACARD.md")
    parser.add_argument("--all-columns", action="store_true",
                        help="also print the card's last column (what would change each verdict)")


def verdict_rows(text: str, where) -> list[list[str]]:
    """The header and rows of the Markdown table under the card's "## Verdicts" heading, as cells."""
    lines = text.splitlines()
    if HEADING not in lines:
        raise InputError(where, f"no '{HEADING}' section (the data card foilforge export writes has one)")
    rows: list[list[str]] = []
    for line in lines[lines.index(HEADING) + 1:]:
        if re.fullmatch(r"\|[-:| ]+\|", line):
            continue  # the rule under the header
        if line.startswith("|") and line.endswith("|"):
            rows.append([cell.strip() for cell in line[1:-1].split(" | ")])
        elif rows or line.startswith("#"):
            break  # the table ended, or the next section began before one
    if len(rows) < 2:
        raise InputError(where, f"the '{HEADING}' section has no table rows")
    for k, cells in enumerate(rows[1:], start=1):
        if len(cells) != len(rows[0]):
            raise InputError(where, f"has {len(cells)} cells where the header has {len(rows[0])}",
                             record=f"{k} ({cells[0]}) of the '{HEADING}' table")
    return rows


def aligned(rows: list[list[str]]) -> str:
    """The rows as left-aligned columns two spaces apart, a rule under the header."""
    widths = [max(len(cells[j]) for cells in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip() for cells in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]]) + "\n"


def main(args) -> int:
    card = args.benchmark_dir / CARD
    if not card.is_file():
        raise InputError(card, "no data card there; build the benchmark first (make repro) or name its folder "
                               "with --benchmark-dir")
    rows = verdict_rows(card.read_text(encoding="utf-8"), card)
    if not args.all_columns:
        rows = [cells[:SHORT_COLUMNS] for cells in rows]
    print(aligned(rows), end="")
    print(f"\n{len(rows) - 1} instruments. The card: {card}; every stage's metrics: dvc metrics show")
    return 0
