"""The params.yaml schema: one typed model of the whole file (pydantic v2), checked before anything runs.

`load_params` validates every file it reads against `Params`, and `foilforge check-params` prints every
problem it finds, each with its path:

    params.yaml instruments.relations.candidates_per_sample: expected an integer, got '3'
    params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'ignore'
    params.yaml evaluate.image_rot: unknown key; allowed: image_root, scorers, scores_threshold

The schema holds the file's fixed shape: blocks, keys, types, ranges, choices, and the references
between blocks (an instrument's source is a key of `sources`; the attackers that `adversarial` and
`gate` name are defined under `attackers`). What depends on plug-ins (a foiler's or filter's
arguments, a reader's files, an attacker's family) is checked by the registries against the plug-in's
own signature (foilforge/registry.py), with the same `params.yaml <path>: ...` messages.

Validation never changes the file's values: stages read the dicts as written.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foilforge.errors import ConfigError
from foilforge.models import ModelFields
from foilforge.records import ITEM_MODES

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Share = Annotated[float, Field(ge=0, le=1)]


class Block(BaseModel):
    """A params.yaml mapping: unknown keys are errors, values keep their YAML types (no "16" -> 16)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------- sources and models

NonEmptyStr = Annotated[str, Field(min_length=1)]


class SourceBlock(Block):
    format: str
    root: NonEmptyStr
    files: dict[str, NonEmptyStr]                 # role -> file name under root (the roles are the reader's)
    split: str | None = None
    dataset: str | None = None
    image_file_template: NonEmptyStr | Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None


class ModelBlock(ModelFields):
    """A `models.<role>` block: which model (a hub id, a local directory, or package:<module>) and how to run it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name_or_path: str | None = None      # absent: the role's documented default (the stage that loads it says so)
    # the NLI role's extras: the label order of its checkpoint, and the check of that order before filtering
    label_map: dict[int, Literal["entailment", "neutral", "contradiction"]] | None = None
    sanity_check: bool | None = None
    # GRUEN's and NLI's extra (grammar_lm, cola, nli): padded tokens a batch besides batch_size rows (a GPU's knob)
    max_batch_tokens: PositiveInt | None = None
    # the open_clip role's extra: a pretrained tag of open_clip (e.g. openai, laion2b_s34b_b79k) or a checkpoint file
    pretrained: str | None = None


# ---------------------------------------------------------------- one instrument

class InstrumentFilters(Block):
    run: list[str] = []                                   # score stage: which filters score it
    keep: dict[str, dict[str, Any] | None] = {}           # select stage: their keep rules (null: not applied)


class BiasSettings(Block):
    items: Literal[ITEM_MODES] | None = None
    js_max: float | None = None
    js_valid_max: float | None = None
    max_majority_share: Share | None = None
    min_lexical_items: NonNegativeInt | None = None


class AdversarialOverrides(Block):
    """`adversarial`'s keys, each optional (an instrument's overrides), plus `enabled`."""

    enabled: bool = True
    attackers: Annotated[list[str], Field(min_length=1)] | None = None
    target: Share | None = None
    min_keep: Share | None = None
    method: Literal["aflite", "balance_features"] | None = None
    folds: Annotated[int, Field(ge=2)] | None = None
    rounds: PositiveInt | None = None
    slice: Annotated[float, Field(gt=0, le=1)] | None = None
    features_per_round: PositiveInt | None = None
    max_js_rise: Share | None = None
    balance: list[str] | None = None          # side features (filters/adversarial.py SIDE_FEATURES)
    seed: NonNegativeInt | None = None
    max_iterations: PositiveInt | None = None
    patience: PositiveInt | None = None
    suspect_below: Share | None = None
    transfer: bool | None = None
    pool: list[str] | None = None             # released files of this instrument's phenomenon


class InstrumentValidation(Block):
    gold: list[str | int] = []          # item ids whose caption is known to be right (qualification)
    votes: str | None = None            # the votes file; null: data/annotations/<instrument>.csv


class InstrumentPairing(Block):
    pairer: str | None = None             # a registered pairer (foilers/pairers/); null: no source evidence, say `why`
    args: dict[str, Any] = {}
    why: str | None = None                # printed by the data card when pairer is null
    prefer_pairable: bool | None = None   # null: the top-level `pairing.prefer_pairable`


class InstrumentBlock(Block):
    foiler: str
    source: str
    args: dict[str, Any] = {}
    candidates_per_sample: PositiveInt | None = None
    max_samples: PositiveInt | None = None
    filters: InstrumentFilters = InstrumentFilters()
    bias: BiasSettings = BiasSettings()
    adversarial: AdversarialOverrides = AdversarialOverrides()
    gate: Literal["fail", "report"] = "fail"
    validation: InstrumentValidation = InstrumentValidation()
    pairing: InstrumentPairing = InstrumentPairing()


# ---------------------------------------------------------------- shared blocks

class AttackerBlock(Block):
    attacker: str
    args: dict[str, Any] = {}


class AdversarialBlock(Block):
    attackers: Annotated[list[str], Field(min_length=1)] = ["word_ngram", "char_ngram"]
    target: Share = 0.55
    min_keep: Share = 0.25
    method: Literal["aflite", "balance_features"] = "aflite"
    folds: Annotated[int, Field(ge=2)] = 5
    rounds: PositiveInt = 8
    slice: Annotated[float, Field(gt=0, le=1)] = 0.05
    features_per_round: PositiveInt = 5
    max_js_rise: Share | None = 0.0
    balance: list[str] = []
    seed: NonNegativeInt = 0
    max_iterations: PositiveInt = 60
    patience: PositiveInt = 3               # rounds without coming closer to chance before the filter stops
    suspect_below: Share = 0.2              # a kept pair predicted right this rarely is a suspect (select report)
    transfer: bool = True                   # attackers also fitted on the removed pairs and the pool count
    pool: list[str] = []                    # released files of the same phenomenon: transfer training only


class GateBlock(Block):
    attackers: Annotated[list[str], Field(min_length=1)] = ["word_ngram", "char_ngram", "scorer_features", "ngram_bayes"]
    max_accuracy: Annotated[float, Field(gt=0, le=1)] = 0.55
    folds: Annotated[int, Field(ge=2)] = 5
    repeats: PositiveInt = 5
    seed: NonNegativeInt = 101
    lower: Share = 0.40                   # certified: every attacker's 95% interval inside [lower, upper]
    upper: Share = 0.60
    transfer: bool = True                 # also certify each attacker fitted on the removed pairs and the pool
                                          # (the instrument's adversarial.pool)
    grid: dict[str, dict[str, list]] = {}  # attacker -> {argument: [values]}: certified at the strongest setting

    @model_validator(mode="after")
    def _lower_below_upper(self):
        if not self.lower < 0.5 < self.upper:
            raise ValueError(f"lower ({self.lower}) and upper ({self.upper}) must hold chance: lower < 0.5 < upper")
        return self


class BiasBlock(Block):
    log_base: Annotated[float, Field(gt=1)] = 2
    on_exceed: Literal["fail", "warn"] = "fail"
    plot_top_k: PositiveInt = 30
    defaults: BiasSettings = BiasSettings()


class BlindCheckBlock(Block):
    held_out: dict[str, Any] | None = None      # a text scorer block (filters/plausibility.py build_text_scorer)


class EvaluateBlock(Block):
    scorers: list[str] = ["text_lm"]
    image_root: str | None = None
    scores_threshold: float | None = None


class RayEngineBlock(Block):
    address: str | None = None                  # null: start a local Ray here; else a cluster ("ray://host:10001", "auto")
    num_cpus: PositiveInt | None = None         # a local Ray's CPUs (null: all of this machine's)
    workers: PositiveInt = 2                    # actors in each stage's pool; each loads the models once
    cpus_per_worker: Annotated[float, Field(gt=0)] = 1.0
    gpus_per_worker: Annotated[float, Field(ge=0)] = 0.0


class EngineBlock(Block):
    """Where the per-batch stage work runs (pipeline/engine.py). Only batch_size and threads_per_worker change
    the output (a CPU model's float sums depend on both)."""

    name: Literal["local", "ray"] = "local"
    batch_size: PositiveInt = 4096              # records a batch, for both engines: batched model scores depend on it
    threads_per_worker: PositiveInt | None = None  # torch threads in every worker (null: the stage process's own)
    shard_rows: PositiveInt = 100_000             # rows a Parquet shard of the foil and score outputs (pipeline/shards.py)
    ray: RayEngineBlock = RayEngineBlock()


#: the export stage's harness formats (pipeline/emitters); VALSE JSON, the HF rows and the manifest are always written
EXPORT_FORMATS = ("sugarcrepe", "lmms_eval", "vlmevalkit", "parquet")


class ExportBlock(Block):
    formats: list[Literal[EXPORT_FORMATS]] = list(EXPORT_FORMATS)
    image_root: str = "data/images"             # where image_file lives: the harness files name images under it


class ValidationBlock(Block):
    seed: NonNegativeInt = 0
    annotators_per_item: PositiveInt = 3
    valid_min_caption: PositiveInt = 2
    gold_threshold: Share = 0.7
    export: Literal["valid", "all"] = "valid"

    @model_validator(mode="after")
    def _majority_possible(self):
        if self.valid_min_caption > self.annotators_per_item:
            raise ValueError(f"valid_min_caption ({self.valid_min_caption}) cannot exceed annotators_per_item "
                             f"({self.annotators_per_item})")
        return self


class PairingBlock(Block):
    prefer_pairable: bool = True          # select: among a sample's candidates that pass, prefer one with a partner


class Params(Block):
    seed: NonNegativeInt = 0
    sources: dict[str, SourceBlock] = {}
    shared: dict[str, Any] = {}                  # values the instrument blocks use by reference (YAML anchors)
    instruments: dict[str, InstrumentBlock] = {}
    models: dict[str, ModelBlock | str] = {}     # a bare string is a name_or_path (foilforge.models.ModelSpec)
    filters: dict[str, dict[str, Any] | None] = {}   # each filter's settings (checked by the filter's signature)
    blind_check: BlindCheckBlock = BlindCheckBlock()
    attackers: dict[str, AttackerBlock] = {}
    adversarial: AdversarialBlock | None = None
    gate: GateBlock | None = None
    bias: BiasBlock = BiasBlock()
    evaluate: EvaluateBlock = EvaluateBlock()
    export: ExportBlock = ExportBlock()
    engine: EngineBlock = EngineBlock()
    validation: ValidationBlock = ValidationBlock()
    pairing: PairingBlock = PairingBlock()


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def reference_problems(params: dict) -> list[str]:
    """Names one block uses that another must define: an instrument's source, the attackers named.

    Read off the raw mapping, so they are reported alongside the shape problems, not only once those are fixed.
    """
    sources, attackers = _mapping(params.get("sources")), _mapping(params.get("attackers"))
    defined = ", ".join(sorted(attackers)) or "none"
    found = []
    for name, spec in _mapping(params.get("instruments")).items():
        spec = _mapping(spec)
        source = spec.get("source")
        if isinstance(source, str) and sources and source not in sources:
            found.append(f"instruments.{name}.source: {source!r} is not a key of `sources` ({', '.join(sorted(sources))})")
        named = _mapping(spec.get("adversarial")).get("attackers")
        for attacker in named if isinstance(named, list) else []:
            if attacker not in attackers:
                found.append(f"instruments.{name}.adversarial.attackers: {attacker!r} is not defined under `attackers` "
                             f"(defined: {defined})")
    for key in ("adversarial", "gate"):
        named = _mapping(params.get(key)).get("attackers")
        for attacker in named if isinstance(named, list) else []:
            if attacker not in attackers:
                found.append(f"{key}.attackers: {attacker!r} is not defined under `attackers` (defined: {defined})")
    return found


#: keys dvc.yaml's per-instrument stages track (DVC fails on a tracked key the file lacks): `<<: *instrument` gives them
DVC_TRACKED_KEYS = tuple(InstrumentBlock.model_fields)


# ---------------------------------------------------------------- messages

def problems(params: dict, where: str = "params.yaml", dvc_keys: bool = False) -> list[str]:
    """Every schema problem of a params mapping, one line each: `<where> <path>: <what>, got <value>`.

    `dvc_keys`: also require each instrument block to spell out the keys dvc.yaml tracks (`<<: *instrument`).
    """
    if not isinstance(params, dict):
        return [f"{where}: expected a mapping at the top level, got {type(params).__name__}"]
    found = []
    try:
        Params.model_validate(params)
    except ValidationError as err:
        found += _messages(err, f"{where} ")
    found += [f"{where} {line}" for line in reference_problems(params)]
    if dvc_keys:
        for name, spec in sorted((params.get("instruments") or {}).items()):
            if isinstance(spec, dict):
                missing = [k for k in DVC_TRACKED_KEYS if k not in spec]
                if missing:
                    found.append(f"{where} instruments.{name}: missing key(s) {', '.join(missing)}, which dvc.yaml's "
                                 f"stages track (start the block with `<<: *instrument`)")
    return sorted(dict.fromkeys(found), key=found.index)


def validate(params: dict, where: str = "params.yaml") -> dict:
    """params unchanged, or a ConfigError listing every problem."""
    found = problems(params, where)
    if found:
        raise ConfigError(f"{len(found)} problem(s) in {where}:\n" + "\n".join(found))
    return params


def error_lines(err: ValidationError, prefix: str) -> list[str]:
    """A ValidationError of a block at `prefix` (a params key) as `<prefix>.<key>: <what>, got <value>` lines."""
    return _messages(err, f"{prefix}.")


def _messages(err: ValidationError, prefix: str) -> list[str]:
    """One line per problem, `<prefix><path>: ...`. A value that fits no member of a union is reported by every
    member: one report is kept, the deepest (`[3]` for `str | list[str]`: "image_file_template.0: expected a
    string", not "image_file_template: expected a string")."""
    errors = err.errors(include_url=False)
    locs = [[part for part in error["loc"] if not _is_union_tag(part)] for error in errors]
    paths = [".".join(map(str, loc)) for loc in locs]
    found, reported = [], set()
    for error, loc, path in zip(errors, locs, paths):
        if path not in reported and not any(other.startswith(path + ".") for other in paths):
            reported.add(path)
            found.append(f"{prefix}{path}: {_problem(error, loc)}")
    return found


def _problem(error: dict, loc: list) -> str:
    kind, value = error["type"], error.get("input")
    if kind == "value_error":  # a model validator's own message (a rule across keys of one block)
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    if kind == "missing":
        return "missing (required)"
    return f"{_expected(error)}, got {value!r:.60}"


def _expected(error: dict) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "expected an integer"
    if kind in ("float_type", "float_parsing"):
        return "expected a number"
    if kind in ("string_type",):
        return "expected a string"
    if kind in ("bool_type", "bool_parsing"):
        return "expected true or false"
    if kind in ("list_type",):
        return "expected a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "expected a mapping"
    if kind == "literal_error":
        return f"expected {ctx.get('expected', error['msg'])}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"expected a value {sign} {bound}"
    if kind == "too_short":
        return "expected a non-empty list"
    if kind == "string_pattern_mismatch":
        return "expected cpu, cuda, cuda:N, mps or auto"
    return error["msg"].lower()


def _is_union_tag(part) -> bool:
    """Union members appear in pydantic's error locations ('int', "literal['fail','warn']"): not keys of the file."""
    return isinstance(part, str) and (part in ("int", "float", "str", "bool", "list[str]", "none")
                                      or part.startswith(("literal[", "constrained-", "list[", "dict[", "function-"))
                                      or part[:1].isupper() and part in _MODEL_NAMES)


_MODEL_NAMES = {name for name, obj in dict(globals()).items() if isinstance(obj, type) and issubclass(obj, BaseModel)}


def _allowed_keys(loc: list) -> list[str]:
    """The keys the schema allows at a location (walking Params' annotations), for 'unknown key' messages."""
    node: Any = Params
    for part in loc:
        node = _model_of(node)
        if node is None:
            return []
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(str(part))
            if field is None:
                return []
            node = field.annotation
        elif typing.get_origin(node) is dict:
            node = typing.get_args(node)[1]
    node = _model_of(node)
    return sorted(node.model_fields) if isinstance(node, type) and issubclass(node, BaseModel) else []


def _model_of(annotation):
    """The model (or dict type) inside Optional[...] / Union[...] / Annotated[...]."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin is Union or isinstance(annotation, types.UnionType):
        for option in typing.get_args(annotation):
            found = _model_of(option)
            if found is not None and found is not type(None):
                return found
        return None
    return annotation
