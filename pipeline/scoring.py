"""Scoring records with filters: each filter's result on its record (`filters.<name>`) and the VALSE fields it
implies. The score stage runs `ScoreWorker` batch by batch on the engine; refilter scores a released file with
`score_records`."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def check_texts(filters, records: list[dict], path, first: int = 0) -> None:
    """Every filter's text fields of `records` (the file's records after its first `first`) checked."""
    from foilforge.filter import texts_of

    for f in filters:
        for field in f.fields:
            texts_of(records, field, path, first)  # fail on a bad record before any model loads


def score_records(filters: list, records: list[dict], path="<records>", progress: bool = False) -> list[dict]:
    """Copies of `records` with each filter's result and VALSE extras added; inputs are not changed."""
    check_texts(filters, records, path)
    out = [dict(r, filters=dict(r.get("filters") or {})) for r in records]
    for f in filters:
        for record, result in zip(out, filter_results(f, records, progress)):
            add_result(record, f, result)
    return out


def filter_results(f, records: list[dict], progress: bool = False, batch_parts: list | None = None) -> list[dict]:
    """`f.score` on `records` (with its `score_batch` values, one a record, where it has them): one result a
    record, or an error."""
    log.info("scoring %d records with %s", len(records), f.registry_name)
    kwargs = {"batch_parts": batch_parts} if batch_parts is not None else {}
    results = f.score(records, progress=progress, **kwargs)
    if len(results) != len(records):
        raise RuntimeError(f"{f.registry_name} returned {len(results)} results for {len(records)} records")
    return results


def add_result(record: dict, f, result: dict) -> None:
    """A filter's result on its record (copied: `filters.<name>`) and VALSE's own fields it implies."""
    record["filters"][f.name] = result
    record.update(f.valse_extras(result))


class ScoreWorker:
    """The score stage's work on one batch: the record-level filters and the batch parts of the corpus-level
    ones (`Filter.score_batch`: plausibility's language models), built (models loaded) once per worker.
    Returns, per record, (the scored record, {corpus-level filter: its batch part})."""

    def __init__(self, params: dict, names: list[str], path: str, progress: bool = False,
                 batch_part_names: tuple = ()):
        from foilforge.filter import build_filter

        self.filters = [build_filter(params, name) for name in names]
        self.batch_filters = [build_filter(params, name) for name in batch_part_names]
        self.path, self.progress = path, progress

    def __call__(self, records: list[dict]) -> list[tuple[dict, dict]]:
        scored = score_records(self.filters, records, self.path, self.progress)
        parts = {f.name: f.score_batch(records) for f in self.batch_filters}
        return [(record, {name: values[k] for name, values in parts.items()}) for k, record in enumerate(scored)]
