"""Scoring records with filters: each filter's result on its record (`filters.<name>`) and the VALSE fields it
implies. The score stage runs `run` on an instrument (`ScoreWorker` batch by batch on the engine); refilter scores
a released file with `score_records`. Keep rules are applied later by `select`.

    foilforge score INSTRUMENT --input data/foils/I.jsonl --output data/scored/I.jsonl

The filters listed in params.yaml `instruments.INSTRUMENT.filters.run` (none when the
instrument is not listed) run cheapest first (length, grammaticality, nli),
each on every record, so a threshold change needs only `select` again. Each record gets `filters.<name>` = {filter, model, variant,
score, ...} and VALSE's own fields (`grammaticality_scores`, `nli_scores`).
A filter not listed is neither run nor recorded. Reads: models.grammar_lm,
models.cola, models.nli, models.length_tokenizer, filters.<name>, and
instruments.INSTRUMENT.filters.run.

The record-level filters run batch by batch on the engine of params.yaml `engine` (pipeline/engine/:
this process, or a Ray actor pool whose actors load the models once), and so does the per-text part of a
corpus-level filter (`Filter.score_batch`: plausibility's language models); what needs the whole
instrument (plausibility's n-gram prior, fitted on all its captions) runs once here. With `--cache-dir`,
each scored batch is journaled, so a killed run rescores only the batches it had not finished. The stage
streams (`run`): its memory is one batch and the corpus-level filters' texts, not the instrument.
"""

from __future__ import annotations

import logging
from pathlib import Path

from foilforge.io import dumps, iter_jsonl, read_jsonl
from foilforge.records import Record

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


def read_records(path) -> list[Record]:
    """Records of a JSONL file; an empty file (a foiler that made no foils) is zero records."""
    return read_jsonl(path, allow_empty=True)


def run(params: dict, instrument: str, input_path, output_path, progress: bool = False,
        cache_dir=None) -> int:
    """Score the records of `input_path` into `output_path` (the JSONL and its Parquet shards); returns the number
    of records written (a record that cannot be a foil, foilforge/validity.py, is refused with a logged count).
    With `cache_dir`, a killed run resumes from the batches it had scored (pipeline/engine/journal.py
    BatchJournal).

    The input is read in batches and the output written record by record, so on the local engine the stage
    holds one batch of records, plus what a corpus-level filter needs of every record: the texts it reads
    (`Filter.fields`) and its per-batch values. Such a filter's result waits for all of them, so the scored
    records go to a temp file first and get it on a second pass."""
    from foilforge.filter import build_filter, has_batch_part, scored_filters
    from foilforge.pipeline.engine import (
        BatchJournal,
        JsonlBatches,
        checked,
        engine_settings,
        journal_identity,
        map_stream,
    )

    enabled = scored_filters(params, instrument)
    # built here for the checks (a filter loads its model when it first scores); the engine's workers build their own
    filters = {name: build_filter(params, name) for name in enabled}
    if not enabled:
        log.info("%s: no filters listed in params.yaml instruments.%s.filters.run; records pass through", instrument, instrument)
    per_record = [name for name, f in filters.items() if not f.corpus_level]
    corpus = [f for f in filters.values() if f.corpus_level]
    engine = engine_settings(params)
    size = engine.batch_size
    # first pass: every record's texts are checked before any model loads; a corpus-level filter keeps its texts
    texts = sorted({field for f in corpus for field in f.fields})
    corpus_records, count = [], 0
    for part in JsonlBatches(input_path, size):
        check_texts(filters.values(), part, input_path, first=count)
        corpus_records += [{"id": r.get("id"), **{field: r[field] for field in texts}} for r in part] if corpus else []
        count += len(part)
    # a corpus-level filter's per-text model scores run on the engine too; only what needs all records runs here
    batch_part_names = tuple(f.name for f in corpus if has_batch_part(f))
    args = (params, per_record, str(input_path), progress, batch_part_names)
    journal = None
    if cache_dir is not None and (per_record or batch_part_names):
        # everything a batch's scores depend on: the filters' and models' settings, the batches (the workers'
        # torch threads enter each batch's key)
        settings = {key: params.get(key) for key in ("filters", "models")}
        identity = journal_identity("score", settings, per_record, batch_part_names, size)
        journal = BatchJournal(Path(cache_dir) / "batches" / "score" / f"{instrument}.pickle", identity)
    mapped = map_stream(JsonlBatches(input_path, size), ScoreWorker, args, engine, journal=journal,
                        progress=f"score {instrument}" if progress else None, total=-(-count // size))
    from foilforge.pipeline.shards import RecordWriter
    from foilforge.validity import refusal

    refused: dict[str, int] = {}

    def refused_here(record) -> bool:
        """True for a record that cannot be a foil (foilforge/validity.py): counted, not written."""
        reason = refusal(record)
        if reason is not None:
            refused[reason] = refused.get(reason, 0) + 1
        return reason is not None

    if not corpus:
        with RecordWriter(output_path, engine.shard_rows) as out:
            for part, result in mapped:
                for record, _ in checked(result, part, ScoreWorker):
                    if not refused_here(record):
                        out.write(record)
    else:
        parts: dict[str, list] = {name: [] for name in batch_part_names}
        # beside the output, under a fixed name: the next run replaces what a killed one left
        spill = Path(output_path).with_name(f".{Path(output_path).name}.per-record")
        spill.parent.mkdir(parents=True, exist_ok=True)
        try:
            with spill.open("w", encoding="utf-8", newline="\n") as handle:
                for part, result in mapped:
                    for record, values in checked(result, part, ScoreWorker):
                        handle.write(dumps(record) + "\n")
                        for name in batch_part_names:
                            parts[name].append(values[name])
            results = {f.name: filter_results(f, corpus_records, progress, parts.get(f.name)) for f in corpus}
            with RecordWriter(output_path, engine.shard_rows) as out:
                for k, record in enumerate(iter_jsonl(spill, allow_empty=True)):
                    for f in corpus:
                        add_result(record, f, results[f.name][k])
                    if not refused_here(record):
                        out.write(record)
        finally:
            spill.unlink(missing_ok=True)
    if journal is not None:
        journal.finish()
    if refused:
        log.warning("%s: refused %s (not written: no model can tell such a foil from its caption)", input_path,
                    ", ".join(f"{n} records with {reason}" for reason, n in sorted(refused.items())))
    return count - sum(refused.values())
