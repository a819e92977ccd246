"""Apply one instrument (params.yaml `instruments.NAME`: a foiler plus its args) to a JSONL of samples."""

from __future__ import annotations

import logging

from pipeline.errors import ConfigError, InputError
from pipeline.io import iter_jsonl, write_jsonl
from pipeline.params import block, load_params

log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name, a key of params.yaml `instruments`")
    parser.add_argument("--input", required=True, help="samples, one JSON object a line (ingest output or your own)")
    parser.add_argument("--output", required=True, help="foil records, one JSON object a line")
    parser.add_argument("--seed", type=int, default=None, help="override params.yaml `seed`")


def build_instrument(params: dict, name: str):
    """The configured foiler for instrument `name`, args validated against its signature."""
    from foilers.base import FOILERS

    spec = block(params, f"instruments.{name}", required=False)
    if spec is None:
        known = ", ".join(sorted((params.get("instruments") or {}).keys()))
        raise ConfigError(f"params.yaml has no instrument {name!r}; instruments: {known}")
    if not isinstance(spec, dict) or "foiler" not in spec:
        raise ConfigError(f"params.yaml instruments.{name} needs a 'foiler' key (a registered foiler name)")
    unknown = set(spec) - {"foiler", "source", "args", "candidates_per_sample"}
    if unknown:
        raise ConfigError(f"params.yaml instruments.{name}: unknown key(s) {', '.join(sorted(unknown))}; "
                          f"allowed: foiler, source, args, candidates_per_sample")
    candidates_per_sample(params, name)
    return FOILERS.build(spec["foiler"], spec.get("args") or {}, where=f"params.yaml instruments.{name}.args")


def candidates_per_sample(params: dict, name: str) -> int | None:
    """instruments.<name>.candidates_per_sample: foils kept per sample (the refinement picks among them); None = the foiler's own cap."""
    value = (block(params, f"instruments.{name}", required=False) or {}).get("candidates_per_sample")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"params.yaml instruments.{name}.candidates_per_sample must be an integer >= 1, got {value!r}")
    return value


def foil_file(params: dict, instrument: str, input_path, output_path, seed: int | None = None) -> int:
    foiler = build_instrument(params, instrument)
    samples = []
    seen_ids = set()
    for index, sample in enumerate(iter_jsonl(input_path)):
        if "id" not in sample:
            raise InputError(input_path, "missing field", record=f"line {index + 1}", field="id")
        # two samples with one id would give two records with one id (and seed the same generator)
        if sample["id"] in seen_ids:
            raise InputError(input_path, f"duplicate id {sample['id']!r}", record=f"line {index + 1}", field="id")
        seen_ids.add(sample["id"])
        foiler.validate_sample(sample, str(input_path), sample["id"])
        samples.append(sample)
    seed = params.get("seed", 0) if seed is None else seed
    records = foiler.run(samples, seed=seed, instrument=instrument, progress=True,
                         candidates_per_sample=candidates_per_sample(params, instrument))
    count = write_jsonl(output_path, records)
    log.info("%s: %d samples -> %d foils (%s)", instrument, len(samples), count, foiler.registry_name)
    return count


def main(args) -> int:
    params = load_params(args.params)
    foil_file(params, args.instrument, args.input, args.output, args.seed)
    return 0
