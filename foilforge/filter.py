"""The filter interface, its registry, and the params.yaml layout filters read.

A filter has two separate halves, so that scoring and selecting can be two
DVC stages and a threshold change never reruns a model:

* `score(records) -> list[dict]`: pure and batched; one result per record, in
  input order, e.g. `{"filter": "nli.v1", "model": ..., "variant": ...,
  "score": ...}`. It reads records and never changes them.
* `keep(result, /, **thresholds) -> bool`: the keep rule, applied by
  `foilforge select` to stored results.

`__init__` only stores its arguments (the model blocks of `models.*` and the
settings of `filters.<name>`); models load on the first `score` call.

params.yaml layout (the filters' settings are shared; what runs on an instrument is in its block, in two
keys, because DVC reruns a stage when a params key it lists changes: `score` lists
`instruments.<I>.filters.run`, `select` lists `instruments.<I>.filters.keep`)::

    filters:
      grammaticality: {variant: gruen}          # filters.<name>: constructor settings (score stage)
    instruments:
      relations:
        filters:
          run: [length, grammaticality, nli]    # which filters score it (score stage)
          keep: {length: {max_tokens: 80}, grammaticality: {min_score: 0.8}, nli: {keep: [contradiction]}}
      actant_swap:
        filters: {run: [grammaticality], keep: {grammaticality: null}}   # null = scored and recorded, not applied

A filter in `run` with no entry in `keep` is applied with its default
thresholds. A keep rule for a filter that is not in `run` is inert: it takes
effect when the filter is added to `run` (so the sample's offline params can
carry VALSE's NLI rule while no NLI model runs). An instrument with an empty
`run` is not filtered.
"""

from __future__ import annotations

from foilforge.errors import ConfigError, config_errors
from foilforge.io import require
from foilforge.models import MODEL_BLOCK_KEYS, ModelSpec
from foilforge.registry import Registry, check_args
from foilforge.schema import InstrumentFilters

#: every module of this package is a filter plug-in; filters of other packages: the `foilforge.filters` entry points
FILTERS = Registry("filter", packages=("foilforge.filters",), skip=("gruen", "linkgrammar", "ngram"), entry_points="foilforge.filters")

_MISSING = object()
# weight-name fragments of a sequence-classification head (BERT/ALBERT/RoBERTa, BART, GPT-style): a classifier
# whose head transformers initialises at random is refused, its scores would be noise
CLASSIFIER_HEAD_KEYS = ("classifier", "classification_head", "score.")


class Filter:
    #: the unversioned name used in params.yaml and as the key in record["filters"]
    name: str = ""
    #: run order in the score stage, cheapest first
    cost: int = 0
    #: record fields `score` reads
    fields: tuple[str, ...] = ("foil",)
    #: constructor argument -> models.* key it comes from
    model_params: dict[str, str] = {}
    #: registry name, set by the registry decorator
    registry_name: str = ""
    #: True: the keep rule chooses a subset of the whole candidate set (`keep_subset`), not record by record
    set_rule: bool = False
    #: True: a record's scores depend on the other records scored in the same call (a corpus statistic). The
    #: score stage then keeps only what such a filter may read of every record, its `id` and `fields`, for the
    #: whole-corpus `score` call: declare in `fields` every field `score` reads
    corpus_level: bool = False

    def score(self, records: list[dict], progress: bool = False) -> list[dict]:
        raise NotImplementedError

    def score_batch(self, records: list[dict]) -> list | None:
        """A corpus-level filter's part that needs only a batch's own records (a model's per-text scores): one
        picklable value a record, computed on the engine's workers with the record-level filters and handed
        back to `score(records, progress, batch_parts=...)` in record order. None: no such part (default)."""
        return None

    @staticmethod
    def keep(result: dict, /) -> bool:
        raise NotImplementedError

    def valse_extras(self, result: dict) -> dict:
        """Fields VALSE released on the record itself (grammaticality_scores, nli_scores)."""
        return {}

    def check(self) -> None:
        """Check model blocks and settings without loading anything; raise ConfigError."""

    @classmethod
    def thresholds(cls, args: dict, where: str) -> dict:
        """The keep rule's keyword arguments, checked against its signature, defaults filled in."""
        import inspect

        sig = inspect.signature(cls.keep)
        full = {k: p.default for k, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
        unknown = sorted(set(args) - set(full))
        if unknown:
            raise ConfigError(f"{where}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(sorted(full))}")
        check_args(cls.keep, args, where)
        full.update(args)
        return full

    @classmethod
    def args_from_params(cls, params: dict) -> dict:
        settings = filter_settings(params, cls.name)
        clash = sorted(set(settings) & set(cls.model_params))
        if clash:
            raise ConfigError(f"params.yaml filters.{cls.name}: {', '.join(clash)} is a model; set it under "
                              f"{', '.join(cls.model_params[k] for k in clash)} instead")
        models = params.get("models") or {}
        for arg, key in cls.model_params.items():
            block = models.get(key.split(".", 1)[1], _MISSING)
            if block is not _MISSING:
                settings[arg] = block
        return settings


def texts_of(records: list[dict], field: str, path="<records>", first: int = 0) -> list[str]:
    """`record[field]` of every record, with the standard error for a missing or non-text field; a record without
    an id is named by its position, 1-based, in the file (`first`: how many records of the file came before)."""
    return [require(r, field, str, path, r["id"] if isinstance(r, dict) and "id" in r else f"#{first + i + 1} (no id)")
            for i, r in enumerate(records)]


def model_spec(block, param_key: str, default: str, allowed_extra: tuple[str, ...] = ()) -> ModelSpec:
    """A ModelSpec from a models.* block; an absent block or name gives the documented default.

    An explicit `name_or_path: null` stays an error (ModelSpec names the key to set).
    """
    if block is None:
        block = {"name_or_path": default}
    elif isinstance(block, str):
        block = {"name_or_path": block}
    elif isinstance(block, dict) and "name_or_path" not in block:
        block = {**block, "name_or_path": default}
    if not isinstance(block, dict):
        raise ConfigError(f"{param_key} must be a mapping (name_or_path, device, dtype, batch_size), got {type(block).__name__}")
    spec = ModelSpec.from_params(block, param_key)
    unknown = sorted(set(spec.extra) - set(allowed_extra))
    if unknown:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join((*MODEL_BLOCK_KEYS, *allowed_extra))}")
    return spec


def filters_block(params: dict) -> dict:
    """params.yaml `filters`: each filter's settings, shared by every instrument."""
    block = params.get("filters") or {}
    unknown = sorted(set(block) - set(filter_names()))
    if unknown:
        raise ConfigError(f"params.yaml filters: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(filter_names())} "
                          f"(which filters run, and their keep rules: instruments.<I>.filters.run / .keep)")
    return block


def instrument_filters(params: dict, instrument: str) -> InstrumentFilters:
    """params.yaml `instruments.<I>.filters`: `run` (filter names) and `keep` ({filter name: rule or null})."""
    from foilforge.settings import instrument_settings

    return instrument_settings(params, instrument).filters


def filter_settings(params: dict, name: str) -> dict:
    return dict(filters_block(params).get(name) or {})


def filter_names() -> list[str]:
    """Unversioned names of the registered filters ("grammaticality", "length", "nli")."""
    return FILTERS.unversioned()


def filter_class(name: str) -> type[Filter]:
    return FILTERS.get(FILTERS.newest(name))


def build_filter(params: dict, name: str) -> Filter:
    """Build filter `name` from params.yaml: settings checked against the constructor, then its `check()` (the
    registry's build runs both)."""
    registered = FILTERS.newest(name)
    return FILTERS.build(registered, FILTERS.get(registered).args_from_params(params), where=f"params.yaml filters.{name}")


def has_batch_part(f: Filter) -> bool:
    """Whether a corpus-level filter has work the engine's workers can do batch by batch (`score_batch`)."""
    return f.corpus_level and type(f).score_batch is not Filter.score_batch


def scored_filters(params: dict, instrument: str) -> list[str]:
    """The filters that score an instrument (`instruments.<I>.filters.run`), cheapest first."""
    names = instrument_filters(params, instrument).run
    where = f"params.yaml instruments.{instrument}.filters.run"
    unknown = sorted(set(names) - set(filter_names()))
    if unknown:
        raise ConfigError(f"{where}: unknown filter(s) {', '.join(unknown)}; registered: {', '.join(filter_names())}")
    return sorted(dict.fromkeys(names), key=lambda name: filter_class(name).cost)


def keep_rules(params: dict, instrument: str) -> dict[str, dict]:
    """{filter name: thresholds} applied to an instrument: its scored filters less those whose rule is null."""
    where = f"params.yaml instruments.{instrument}.filters.keep"
    rules = instrument_filters(params, instrument).keep
    unknown = sorted(set(rules) - set(filter_names()))
    if unknown:
        raise ConfigError(f"{where}: unknown filter(s) {', '.join(unknown)}; registered: {', '.join(filter_names())}")
    applied = {}
    for name in scored_filters(params, instrument):
        rule = rules.get(name, {})
        if rule is None:
            continue
        applied[name] = filter_class(name).thresholds(rule, f"{where}.{name}")
    # inert rules are checked too, so a typo surfaces before the filter is switched on
    for name, rule in rules.items():
        if name not in applied and isinstance(rule, dict):
            filter_class(name).thresholds(rule, f"{where}.{name}")
    return applied


def check(params: dict) -> list[str]:
    """Every problem in the filters part of params.yaml, for `foilforge check-params`."""
    problems = config_errors([lambda: filters_block(params)])
    if problems:
        return problems
    used: set[str] = set()
    for instrument in sorted(params.get("instruments") or {}):
        try:
            used.update(scored_filters(params, instrument))
            keep_rules(params, instrument)
        except ConfigError as err:
            problems.append(str(err))
    return problems + config_errors(lambda n=n: build_filter(params, n) for n in sorted(used))


# ---------------------------------------------------------------- the filter funnel (select metrics, export manifest)

def run_order(names: list[str]) -> list[str]:
    """Filters in the order the score stage runs them (cheapest first); unregistered names keep their order, last.

    Records are written with sorted keys, so the order of `record["filters"]` says nothing about it.
    """
    known = set(filter_names())
    return sorted(names, key=lambda n: (0, filter_class(n).cost) if n in known else (1, names.index(n)))


def filter_funnel(records: list[dict]) -> dict:
    """{"input": n, "after_<filter>": n passing it and every earlier one, ...}, filters in run order."""
    order: list[str] = []
    for record in records:
        for name, result in (record.get("filters") or {}).items():
            # a filter scored but not applied (a null keep rule) carries no `passed`: it is no step of the funnel
            if name not in order and isinstance(result, dict) and "passed" in result:
                order.append(name)
    order = run_order(order)
    counts = {"input": len(records)}
    surviving = records
    for name in order:
        surviving = [r for r in surviving if ((r.get("filters") or {}).get(name) or {}).get("passed", True)]
        counts[f"after_{name}"] = len(surviving)
    return counts
