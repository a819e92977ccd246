"""Print the built benchmark's verdicts: the data card's first table, one aligned line per instrument.

    foilforge summary                                   # data/benchmark/manifest.json
    foilforge summary --benchmark-dir DIR --all-columns

`make repro` ends with it: the kept pairs, Winoground groups, the release gate's verdict and its strongest
reading of every instrument, in a terminal's width. The rows are the card's own (pipeline/card.py
`verdict_rows`, from the manifest export writes). What would change each verdict (`--all-columns`), the readings
behind it and everything else are in the card, DATACARD.md; every stage's metrics: `dvc metrics show`.
"""

from __future__ import annotations

from pathlib import Path

from foilforge.errors import InputError

MANIFEST = "manifest.json"
CARD = "DATACARD.md"
#: the card's first table's header (pipeline/templates/datacard.md.j2)
HEADER = ("instrument", "kept pairs", "groups", "verdict", "strongest reading (95% CI)", "what would change it")
#: the columns shown without --all-columns: the last, what would change a verdict, is a sentence
SHORT_COLUMNS = 5


def add_arguments(parser) -> None:
    parser.add_argument("--benchmark-dir", type=Path, default=Path("data/benchmark"),
                        help="the exported benchmark (default: data/benchmark), holding manifest.json")
    parser.add_argument("--all-columns", action="store_true",
                        help="also print the card's last column (what would change each verdict)")


def manifest_rows(manifest, where) -> list[list[str]]:
    """The card's verdict rows of a manifest, as strings; an entry the card cannot read is named."""
    from foilforge.pipeline.card import verdict_rows

    instruments = manifest.get("instruments") if isinstance(manifest, dict) else None
    if not isinstance(instruments, dict):
        raise InputError(where, "expected a mapping of instruments (the manifest foilforge export writes)",
                         field="instruments")
    rows = []
    for name, entry in instruments.items():
        try:
            (row,) = verdict_rows({"instruments": {name: entry}})
        except (KeyError, TypeError, AttributeError) as err:
            raise InputError(where, f"not an entry foilforge export writes ({type(err).__name__}: {err})",
                             record=f"instrument {name}") from None
        rows.append([str(cell) for cell in row])
    return rows


def aligned(rows: list[list[str]]) -> str:
    """The rows as left-aligned columns two spaces apart, a rule under the header."""
    widths = [max(len(cells[j]) for cells in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip() for cells in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]]) + "\n"


def main(args) -> int:
    from foilforge.io import read_json

    path = args.benchmark_dir / MANIFEST
    if not path.is_file():
        raise InputError(path, "no manifest there; build the benchmark first (make repro) or name its folder "
                               "with --benchmark-dir")
    rows = [list(HEADER), *manifest_rows(read_json(path), path)]
    if not args.all_columns:
        rows = [cells[:SHORT_COLUMNS] for cells in rows]
    print(aligned(rows), end="")
    print(f"\n{len(rows) - 1} instruments. The card: {args.benchmark_dir / CARD}; every stage's metrics: "
          "dvc metrics show")
    return 0
