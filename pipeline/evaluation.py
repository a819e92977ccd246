"""What the evaluate stage computes with its scorers (pipeline/evaluate_scorers/: one module each, a registry,
`foilforge.evaluate_scorers` entry points for others): the metrics per instrument, pair and Winoground group, and
the per-item rows (pipeline/stages/evaluate.py says what each figure means)."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

from foilforge import metrics
from foilforge.errors import InputError
from foilforge.io import require, write_jsonl
from foilforge.pipeline.evaluate_scorers import scorer_config

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the benchmark

def record_texts(path, record_id, record: dict) -> list[str]:
    """The texts to score for one record: [caption, foil], or the candidates of a multiple-choice item."""
    if "candidates" in record:
        candidates = require(record, "candidates", list, path, record_id)
        if not candidates or not all(isinstance(c, str) for c in candidates):
            raise InputError(path, "expected a non-empty list of texts", record=record_id, field="candidates")
        require(record, "label", int, path, record_id)
        return candidates
    return [require(record, "caption", str, path, record_id), require(record, "foil", str, path, record_id)]


# ---------------------------------------------------------------- metrics for one instrument

def instrument_metrics(items, scores, threshold: float | None) -> dict:
    """All metrics that apply to one instrument's scored records."""
    binary, choice = [], []
    for (record_id, record, texts), item_scores in zip(items, scores):
        if item_scores is None:
            continue
        if len(item_scores) != len(texts):
            raise ValueError(f"record {record_id}: {len(item_scores)} scores for {len(texts)} texts")
        (choice if "candidates" in record else binary).append((record_id, record, item_scores))
    result = {"n_records": len(items), "n_scored": len(binary) + len(choice)}
    if binary:
        result.update(metrics.binary_metrics([s[0] for _, _, s in binary], [s[1] for _, _, s in binary], threshold))
        paired = [(r["pair_id"], rid, r, s) for rid, r, s in binary if r.get("pair_id") is not None]
        if paired:
            result.update(pair_and_winoground(paired))
    if choice:
        result["multiple_choice"] = metrics.multiple_choice_accuracy((s, r["label"]) for _, r, s in choice)
    return result


def pair_and_winoground(paired) -> dict:
    """Pair accuracy over records sharing a pair_id; Winoground where the two members swap caption and foil."""
    groups = defaultdict(list)
    for pair_id, record_id, record, scores in paired:
        groups[pair_id].append((record, scores))
    complete = {pid: members for pid, members in groups.items() if len(members) == 2}
    result = metrics.pair_accuracy((pid, s[0] > s[1]) for pid, members in complete.items() for _, s in members)
    result["n_incomplete_pairs"] = len(groups) - len(complete)
    examples = []
    for (first, s1), (second, s2) in complete.values():
        if first["caption"] == second["foil"] and first["foil"] == second["caption"]:
            # C0 = first caption, I0 = first image; C1 = second caption, I1 = second image
            examples.append((s1[0], s1[1], s2[1], s2[0]))
    if examples:
        result["winoground"] = metrics.winoground_scores(examples)
    return result


# ---------------------------------------------------------------- the stage


def record_correct(record: dict, scores: list[float] | None) -> bool | None:
    """Whether the model got one record right, as the metrics count it: the caption strictly above the foil, or the
    labelled candidate strictly above every other (a tie is a miss); None when the record was not scored."""
    if scores is None:
        return None
    # a caption/foil pair is a two-candidate item whose target is the caption: one rule, the metrics' own
    label = record["label"] if "candidates" in record else 0
    return metrics.multiple_choice_accuracy([(scores, label)])["accuracy"] == 1.0


def read_groups(benchmark_dir, image_root: str) -> dict[str, tuple[Path, list[dict]]]:
    """winoground/<I>.jsonl of an export, by instrument: the groups, image paths made relative to `image_root`
    again (the export writes them as `<image_root>/<file>`, the way rows/ gives them)."""
    from foilforge.io import read_jsonl

    prefix = image_root.rstrip("/") + "/"
    found = {}
    for path in sorted((Path(benchmark_dir) / "winoground").glob("*.jsonl")):
        rows = read_jsonl(path, allow_empty=True)
        for row in rows:
            for key in ("id", "image_0", "image_1", "caption_0", "caption_1"):
                require(row, key, str, path, row.get("id"))
                if key.startswith("image") and row[key].startswith(prefix):
                    row[key] = row[key][len(prefix):]
        found[path.stem] = (path, rows)
    return found


def group_metrics(scorer, groups: list[dict]) -> dict:
    """Winoground text / image / group scores and the accuracy over each group's two pairs, for one scorer: each
    group is scored as two items (image_0 and image_1, each against caption_0 and caption_1)."""
    items = [(f"{g['id']}#{m}", {"image_file": g[f"image_{m}"]}, [g["caption_0"], g["caption_1"]])
             for g in groups for m in (0, 1)]
    scores = scorer.score(items) if items else []
    examples = []
    for k in range(0, len(scores), 2):
        first, second = scores[k], scores[k + 1]
        if first is not None and second is not None:
            examples.append((first[0], first[1], second[0], second[1]))
    return {"groups": len(groups), **metrics.winoground_scores(examples), **metrics.group_pair_accuracy(examples)}


def evaluate(benchmark: dict, scorers, threshold_for, item_rows: list | None = None, groups: dict | None = None) -> dict:
    """{scorer: {model, config, instruments: {instrument: metrics}, groups: {instrument: Winoground scores}}}; with
    `item_rows`, one row per scored-or-not record is appended to it (the items file's lines: scorer, instrument, id,
    scores, correct)."""
    # texts are checked once, before any model runs, so a bad record fails fast
    items_by_instrument = {instrument: [(rid, r, record_texts(path, rid, r)) for rid, r in records.items()]
                           for instrument, (path, records) in benchmark.items()}
    out = {}
    for scorer in scorers:
        per_instrument = {}
        for instrument, (path, _) in benchmark.items():
            items = items_by_instrument[instrument]
            try:
                scores = scorer.score(items)
                per_instrument[instrument] = instrument_metrics(items, scores, threshold_for(scorer))
            except ValueError as err:
                raise InputError(path, f"{scorer.name}: {err}") from None
            if item_rows is not None:
                item_rows.extend({"scorer": scorer.name, "instrument": instrument, "id": record_id,
                                  "scores": item_scores, "correct": record_correct(record, item_scores)}
                                 for (record_id, record, _), item_scores in zip(items, scores))
        out[scorer.name] = {"model": scorer.model_id, "config": scorer_config(scorer), "instruments": per_instrument}
        if groups:
            out[scorer.name]["groups"] = {}
            for instrument, (path, rows) in groups.items():
                try:
                    out[scorer.name]["groups"][instrument] = group_metrics(scorer, rows)
                except ValueError as err:
                    raise InputError(path, f"{scorer.name}: {err}") from None
    return out


def write_items(path, rows: list[dict]) -> int:
    """The per-item scores file (JSONL, written atomically): sorted by scorer, instrument and id."""
    rows = sorted(rows, key=lambda r: (r["scorer"], r["instrument"], str(r["id"])))
    return write_jsonl(path, rows, sort_by_id=False)
