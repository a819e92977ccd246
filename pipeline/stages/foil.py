"""Apply one instrument (params.yaml `instruments.NAME`: a foiler plus its args) to a JSONL of samples.

`instruments.NAME.candidates_per_sample` (optional, an int >= 1) overrides the
foiler's per-sample cap (`max_foils_per_sample`, usually 1), so that a later
stage can choose among several candidates per caption.
`instruments.NAME.max_samples` (optional, an int >= 1) foils only the first
that many samples of the source, in file order: a quick look at an instrument,
or a sample build that keeps a slow foiler's share of the time small while the
source stays large enough for the instruments that need it. `--metrics` writes what
the foiler reported about the run (skip rules, guards, resolver, pairing, JS).
"""

from __future__ import annotations

import logging

from foilforge.errors import ConfigError, InputError
from foilforge.io import iter_jsonl, write_json, write_jsonl
from foilforge.params import block, load_params

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name, a key of params.yaml `instruments`")
    parser.add_argument("--input", required=True, help="samples, one JSON object a line (ingest output or your own)")
    parser.add_argument("--output", required=True, help="foil records, one JSON object a line")
    parser.add_argument("--seed", type=int, default=None, help="override params.yaml `seed`")
    parser.add_argument("--metrics", default=None, help="write the foiler's run statistics here (JSON)")
    parser.add_argument("--cache-dir", default=None,
                        help="journal model scores here (relations: one line per chunk of slots), so a killed run "
                             "resumes where it stopped and a rerun with the same scorer and slots rescores nothing")

def instrument_spec(params: dict, name: str) -> dict:
    """The params.yaml block of instrument `name` (its shape is the schema's: foilforge/schema.py)."""
    spec = block(params, f"instruments.{name}", required=False)
    if spec is None:
        known = ", ".join(sorted((params.get("instruments") or {}).keys()))
        raise ConfigError(f"params.yaml has no instrument {name!r}; instruments: {known}")
    return spec


def build_instrument(params: dict, name: str):
    """The configured foiler for instrument `name`, args validated against its signature."""
    from foilforge.foiler import FOILERS

    spec = instrument_spec(params, name)
    return FOILERS.build(spec["foiler"], spec.get("args") or {}, where=f"params.yaml instruments.{name}.args")


def foil_file(params: dict, instrument: str, input_path, output_path, seed: int | None = None,
              metrics_path=None, cache_dir=None) -> int:
    from foilforge.foiler import RunContext

    foiler = build_instrument(params, instrument)
    spec = instrument_spec(params, instrument)
    cap, limit = spec.get("candidates_per_sample"), spec.get("max_samples")
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
        foiler.validate_sample(sample, str(input_path), sample["id"])
        samples.append(sample)
    seed = params.get("seed", 0) if seed is None else seed
    context = RunContext(instrument, seed=seed, progress=True, params_key=f"instruments.{instrument}",
                         candidates_per_sample=cap, cache_dir=cache_dir)
    records = foiler.run(samples, context=context)
    count = write_jsonl(output_path, records)
    if metrics_path is not None:
        write_json(metrics_path, {"instrument": instrument, "foiler": foiler.registry_name, **context.stats})
    log.info("%s: %d samples -> %d foils (%s)", instrument, len(samples), count, foiler.registry_name)
    return count


def main(args) -> int:
    params = load_params(args.params)
    foil_file(params, args.instrument, args.input, args.output, args.seed, getattr(args, "metrics", None),
              getattr(args, "cache_dir", None))
    return 0
