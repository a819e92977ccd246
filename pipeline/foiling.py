"""Apply one instrument (params.yaml `instruments.NAME`: a foiler plus its args) to a JSONL of samples.

`instruments.NAME.candidates_per_sample` (optional, an int >= 1) overrides the
foiler's per-sample cap (`max_foils_per_sample`, usually 1), so that a later
stage can choose among several candidates per caption.
`instruments.NAME.max_samples` (optional, an int >= 1) foils only the first
that many samples of the source, in file order: a quick look at an instrument,
or a sample build that keeps a slow foiler's share of the time small while the
source stays large enough for the instruments that need it.
`instruments.NAME.samples_per_image` (optional) foils at most that many samples
of each image, the first in file order (applied before `max_samples`): COCO's
first caption of each image with 1, while the pair stage still reads all of an
image's captions as evidence for a group. `--metrics` writes what
the foiler reported about the run (skip rules, guards, resolver, pairing, JS).

The proposals run batch by batch on the engine of params.yaml `engine` (pipeline/engine/: this process,
or a Ray actor pool whose actors build the foiler, its spaCy pipeline and models once): the foiler's
`corpus_pass` (what every batch needs of the whole run) runs once here, then `propose_batch` on each batch of
`engine.batch_size` samples; `choose` (balance, pairing) and the records run once here on all candidates.
With `--cache-dir`, each finished batch is journaled there, so a killed stage rerun proposes only the
batches it had not finished.
"""

from __future__ import annotations

import logging
from pathlib import Path

from foilforge.errors import InputError
from foilforge.io import iter_jsonl, write_json
from foilforge.params import typed_params
from foilforge.pipeline.plugins import build_instrument, instrument_spec
from foilforge.schema import EngineBlock

log = logging.getLogger(__name__)


class ProposeWorker:
    """The foil stage's work on one batch: the instrument's foiler proposing the batch's candidates.

    Returns (candidates, the counts the batch put in its stats). The local engine hands it the stage's own
    foiler; a Ray actor builds one from the params (spaCy and the foiler's models loaded once per actor)."""

    def __init__(self, foiler, params: dict, instrument: str, context_fields: dict, corpus):
        self.foiler = foiler if foiler is not None else build_instrument(params, instrument)
        self.context_fields, self.corpus = context_fields, corpus

    def __call__(self, samples: list[dict]) -> tuple[list, dict]:
        from foilforge.foiler import RunContext

        context = RunContext(**self.context_fields)
        context.samples = {s["id"]: s for s in samples}
        return self.foiler.propose_batch(samples, context, self.corpus), context.stats


class EngineProposer:
    """A `propose(samples, context)` for Foiler.run that runs `propose_batch` on the engine's batches.

    `finish()`, once the stage's output is written, drops the batch journal (a killed run's resume point)."""

    def __init__(self, foiler, params: dict, instrument: str, settings: EngineBlock, cache_dir=None):
        self.foiler, self.params, self.instrument, self.settings = foiler, params, instrument, settings
        self.cache_dir = cache_dir
        self.journal = None

    def __call__(self, samples: list[dict], context) -> list:
        from dataclasses import fields as dataclass_fields

        from foilforge.foiler import merge_stats, proposes_in_batches
        from foilforge.pipeline.engine import BatchJournal, journal_identity, map_parts

        foiler, params, instrument, settings = self.foiler, self.params, self.instrument, self.settings
        if not proposes_in_batches(foiler):
            return foiler.propose(samples, context)
        corpus = foiler.corpus_pass(samples, context)
        fields = {f.name: getattr(context, f.name) for f in dataclass_fields(context) if f.name not in ("samples", "stats")}
        local = settings.name == "local"
        # a bar inside each batch only when there is one batch: bars from many batches or actors would interleave
        fields["progress"] = context.progress and local and len(samples) <= settings.batch_size
        if self.cache_dir is not None:
            # what decides a batch's candidates; not the progress bar, which differs between the engines
            decisive = {k: v for k, v in fields.items() if k != "progress"}
            identity = journal_identity("foil", instrument_spec(params, instrument), decisive, samples)
            self.journal = BatchJournal(Path(self.cache_dir) / "batches" / "foil" / f"{instrument}.pickle", identity)
        parts = map_parts(samples, ProposeWorker, (foiler if local else None, params, instrument, fields, corpus),
                          settings, journal=self.journal, progress=f"foil {instrument}" if context.progress else None)
        proposed = []
        for foils, stats in parts:
            proposed.extend(foils)
            merge_stats(context.stats, stats, f"instruments.{instrument} foil stats")
        return proposed

    def finish(self) -> None:
        if self.journal is not None:
            self.journal.finish()


def foil_file(params: dict, instrument: str, input_path, output_path, seed: int | None = None,
              metrics_path=None, cache_dir=None) -> int:
    from foilforge.foiler import RunContext

    foiler = build_instrument(params, instrument)
    spec = instrument_spec(params, instrument)
    cap, limit = spec.get("candidates_per_sample"), spec.get("max_samples")
    per_image, taken_of_image = spec.get("samples_per_image"), {}
    samples = []
    seen_ids = set()
    for index, sample in enumerate(iter_jsonl(input_path)):
        if limit is not None and len(samples) == limit:
            break
        if "id" not in sample:
            raise InputError(input_path, "missing field", record=f"line {index + 1}", field="id")
        # two samples with one id would give two records with one id (and seed the same generator)
        if sample["id"] in seen_ids:
            raise InputError(input_path, f"duplicate id {sample['id']!r}", record=f"line {index + 1}", field="id")
        seen_ids.add(sample["id"])
        image = sample.get("image_id")
        if per_image is not None and image is not None:
            if taken_of_image.get(image, 0) == per_image:
                continue
            taken_of_image[image] = taken_of_image.get(image, 0) + 1
        foiler.check_sample(sample, str(input_path), sample["id"])
        samples.append(sample)
    seed = typed_params(params).seed if seed is None else seed
    context = RunContext(instrument, seed=seed, progress=True, params_key=f"instruments.{instrument}",
                         candidates_per_sample=cap, cache_dir=cache_dir)
    from foilforge.pipeline.engine import engine_settings
    from foilforge.pipeline.shards import write_records

    settings = engine_settings(params)
    propose = EngineProposer(foiler, params, instrument, settings, cache_dir)
    records = foiler.run(samples, context=context, propose=propose)
    count = write_records(output_path, records, settings.shard_rows)
    if metrics_path is not None:
        write_json(metrics_path, {"instrument": instrument, "foiler": foiler.registry_name, **context.stats})
    propose.finish()
    log.info("%s: %d samples -> %d foils (%s)", instrument, len(samples), count, foiler.registry_name)
    return count
