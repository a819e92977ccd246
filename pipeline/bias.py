"""Bias checks for one instrument (VALSE §4.1, App. E, Table 5): JS divergence, lexical items, class balance, plots.

The changed items of a record are its `classes` (caption side) and
`classes_foil` (foil side). Their normalised frequency distributions c and f
give docs/reference.md §4's

    JS(f || c) = sqrt((KL(f || m) + KL(c || m)) / 2),   m = (f + c) / 2

with logarithms in `bias.log_base` (default 2, which bounds JS in [0, 1]; a
caption/foil pair of disjoint vocabularies gives exactly 1).

How items are counted (the released files need all three rules):

* a list counts each element once (existence's `classes_foil` holds the three
  other Visual7W answers, `[1, 2, 3]`); an empty list adds nothing;
* scalars are compared as text, so the numeral 4 and "4" are one item;
* `items: swap` (params, per instrument) is for instruments whose foil swaps
  two fillers (actant swap): both fillers are changed items on both sides, so
  the two distributions are equal and JS is 0, as in Table 5.

`#lexical items` is the size of the union of both vocabularies. The valid
subset (Table 5's "JS Val.") is the records whose `mturk.caption >= 2`; it is
null when no record carries human votes.
"""

from __future__ import annotations

import csv
import io
import logging
from collections import Counter
from pathlib import Path

from foilforge.io import atomic_write, write_json
from foilforge.metrics import js_divergence, majority
from foilforge.records import frequencies, is_valid
from foilforge.records import read_record_file as read_records
from foilforge.settings import InstrumentBias, instrument_settings

log = logging.getLogger(__name__)


def bias_report(records, instrument: str, settings: InstrumentBias, path="<records>") -> tuple[dict, Counter, Counter]:
    mode, base = settings.items, settings.log_base
    caption_counts, foil_counts = frequencies(records, mode, path)
    valid = [(rid, r) for rid, r in records if is_valid(r)]
    has_votes = any(is_valid(r) is not None for _, r in records)
    js_valid = js_divergence(*frequencies(valid, mode, path), log_base=base) if has_votes else None
    report = {
        "instrument": instrument,
        "n_records": len(records),
        "n_valid": len(valid) if has_votes else None,
        "n_lexical_items": len(set(caption_counts) | set(foil_counts)),
        "n_caption_items": len(caption_counts),
        "n_foil_items": len(foil_counts),
        "js": js_divergence(caption_counts, foil_counts, log_base=base),
        "js_valid": js_valid,
        "log_base": base,
        "items": mode,
        "class_balance": {"caption_majority": majority(caption_counts), "foil_majority": majority(foil_counts)},
    }
    report["violations"] = threshold_violations(report, settings)
    report["status"] = "ok" if not report["violations"] else ("warn" if settings.on_exceed == "warn" else "fail")
    return report, caption_counts, foil_counts


def threshold_violations(report: dict, settings: InstrumentBias) -> list[str]:
    problems = []

    def above(value, limit, name):
        if limit is not None and value is not None and value > limit:
            problems.append(f"{name} {value:.3f} > {limit}")

    above(report["js"], settings.js_max, "js")
    above(report["js_valid"], settings.js_valid_max, "js_valid")
    for side in ("caption_majority", "foil_majority"):
        above(report["class_balance"][side]["share"], settings.max_majority_share, f"{side} share")
    minimum = settings.min_lexical_items
    if minimum is not None and report["n_lexical_items"] < minimum:
        problems.append(f"n_lexical_items {report['n_lexical_items']} < {minimum}")
    return problems


def frequency_rows(caption_counts: Counter, foil_counts: Counter, top_k: int) -> list[dict]:
    """The top_k items by combined frequency, with normalised caption/foil frequencies (plot data)."""
    n_c, n_f = sum(caption_counts.values()) or 1, sum(foil_counts.values()) or 1
    items = sorted(set(caption_counts) | set(foil_counts),
                   key=lambda k: (-(caption_counts[k] / n_c + foil_counts[k] / n_f), k))
    return [{"item": k, "caption": caption_counts[k] / n_c, "foil": foil_counts[k] / n_f} for k in items[:top_k]]


def write_frequency_csv(path, rows: list[dict]) -> None:
    """Long format, one row per item and side (caption, foil), so `dvc plots show` draws both sides side by side."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["item", "side", "frequency"], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        for side in ("caption", "foil"):
            writer.writerow({"item": row["item"], "side": side, "frequency": f"{row[side]:.6f}"})
    with atomic_write(path) as handle:
        handle.write(buffer.getvalue())


def write_frequency_plot(path, rows: list[dict], instrument: str, js: float | None) -> None:
    """Caption vs foil frequencies as grouped horizontal bars (VALSE Figures 3-4)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on CI or DVC runners
    import matplotlib.pyplot as plt

    labels = [r["item"] for r in rows][::-1]
    height = max(2.5, 0.28 * len(labels) + 1.2)
    fig, ax = plt.subplots(figsize=(7, height))
    positions = range(len(labels))
    ax.barh([p + 0.2 for p in positions], [r["caption"] for r in rows][::-1], height=0.4, label="caption")
    ax.barh([p - 0.2 for p in positions], [r["foil"] for r in rows][::-1], height=0.4, label="foil")
    ax.set_yticks(list(positions))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("normalised frequency of the changed item")
    ax.set_title(f"{instrument}: caption vs foil" + (f" (JS {js:.3f})" if js is not None else ""))
    ax.legend(loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    # no timestamp in the PNG, so equal data gives an identical file
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    with atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


def run(params: dict, instrument: str, input_path, output_dir) -> dict:
    settings = instrument_settings(params, instrument).bias
    records = read_records(input_path)
    report, caption_counts, foil_counts = bias_report(records, instrument, settings, path=input_path)
    output_dir = Path(output_dir)
    rows = frequency_rows(caption_counts, foil_counts, settings.plot_top_k)
    write_json(output_dir / "bias.json", report)
    write_frequency_csv(output_dir / "frequencies.csv", rows)
    write_frequency_plot(output_dir / "frequencies.png", rows, instrument, report["js"])
    return report
