"""Scores computed elsewhere (`foilforge evaluate --scores FILE`): a documented CSV or JSONL file of per-record
scores."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from foilforge.errors import InputError
from foilforge.io import file_sha256, iter_csv, iter_jsonl

log = logging.getLogger(__name__)


class ScoresFileScorer:
    """Scores computed elsewhere, read from a documented CSV/JSONL file."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = f"scores_{self.path.stem}"
        self.model_id = str(self.path)
        self.scores = read_scores_file(self.path)

    def config(self) -> dict:
        return {"library": "scores file", "path": str(self.path), "sha256": file_sha256(self.path)}

    def score(self, items) -> list[list[float] | None]:
        return [self.scores.get(record_id) for record_id, _, _ in items]


def _number(value, path, row, field) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(path, f"expected a number, got {value!r:.40}", record=row, field=field) from None
    if isinstance(value, bool) or math.isnan(number):
        raise InputError(path, f"expected a number, got {value!r:.40}", record=row, field=field)
    return number


def read_scores_file(path) -> dict[str, list[float]]:
    path = Path(path)
    scores: dict[str, list[float]] = {}

    def add(record_id, values, row):
        if record_id in scores:
            raise InputError(path, f"duplicate id {record_id!r}", record=row, field="id")
        scores[record_id] = values

    if path.suffix.lower() == ".csv":
        for rowno, row in iter_csv(path, expected_header=["id", "caption_score", "foil_score"]):
            where = f"row {rowno}"
            add(row["id"], [_number(row["caption_score"], path, where, "caption_score"),
                            _number(row["foil_score"], path, where, "foil_score")], where)
        return scores
    for line, row in enumerate(iter_jsonl(path), start=1):
        where = f"line {line}"
        if "id" not in row:
            raise InputError(path, "missing field", record=where, field="id")
        if "candidate_scores" in row:
            values = row["candidate_scores"]
            if not isinstance(values, list) or not values:
                raise InputError(path, "expected a non-empty list of numbers", record=where, field="candidate_scores")
            add(str(row["id"]), [_number(v, path, where, "candidate_scores") for v in values], where)
            continue
        for field in ("caption_score", "foil_score"):
            if field not in row:
                raise InputError(path, "missing field", record=where, field=field)
        add(str(row["id"]), [_number(row["caption_score"], path, where, "caption_score"),
                             _number(row["foil_score"], path, where, "foil_score")], where)
    return scores
