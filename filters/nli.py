"""The NLI filter (VALSE §4.3): premise = caption, hypothesis = foil; keep the foils the model calls a contradiction.

params.yaml:

    models:
      nli:
        name_or_path: ynie/albert-xxlarge-v2-snli_mnli_fever_anli_R1_R2_R3-nli
        device: auto
        batch_size: 16
        label_map: null       # {0: entailment, 1: neutral, 2: contradiction} when config.id2label is LABEL_0..
        sanity_check: true    # check the label order on unmistakable pairs before filtering
    filters:
      run: {relations: [nli]}
      keep: {relations: {nli: {keep: [contradiction]}}}

The label-order trap (docs/reference.md §3): the ynie/* checkpoints name their labels
LABEL_0..LABEL_2, and public code reusing them has the order wrong. So labels
are read from `config.id2label` only when it names them (any case or prefix:
"ENTAILMENT", "contradict"); generic names require `models.nli.label_map`;
a map given in params that contradicts named labels is an error; and before
any record is scored the map is checked on pairs no NLI model gets wrong.

Result: {filter, model, variant (the label order used and where it came from),
score = p(contradiction), label, probs}; on the record, VALSE's `nli_scores`
= {entail: [p], neutral: [p], contradict: [p], pred: [entail|neutral|contradict]}.
"""

from __future__ import annotations

import re

from foilforge.batching import check_max_batch_tokens, pad, progress_bar, token_budget_batches
from foilforge.errors import ConfigError
from foilforge.filter import CLASSIFIER_HEAD_KEYS, FILTERS, Filter, model_spec, texts_of

DEFAULT_NLI = "ynie/albert-xxlarge-v2-snli_mnli_fever_anli_R1_R2_R3-nli"
PARAM_KEY = "models.nli"
LABELS = ("entailment", "neutral", "contradiction")
# the label strings VALSE's release uses in nli_scores (relations.json, plurals.json)
VALSE_NAMES = {"entailment": "entail", "neutral": "neutral", "contradiction": "contradict"}
# (premise, hypothesis, label) that any usable NLI model gets right; a wrong label order fails at least one
SANITY_PAIRS = (
    ("A man is sleeping.", "A man is sleeping.", "entailment"),
    ("A dog runs on the grass.", "No animal is outside.", "contradiction"),
    ("A woman is riding a red bicycle.", "A woman is riding a bicycle.", "entailment"),
    ("Two children are playing in the snow.", "Nobody is outside.", "contradiction"),
)
_INFLECTED = {"entailment": ("entails", "entailed"), "contradiction": ("contradicts", "contradictory")}
_GENERIC = re.compile(r"^label_?\d+$", re.IGNORECASE)


def canonical_label(name) -> str | None:
    """'ENTAILMENT', 'entail', 'Contradict', 'neu' (a prefix of 3+ letters, any case) -> the label; else None."""
    key = re.sub(r"[^a-z]", "", str(name).lower())
    for label in LABELS:
        if (len(key) >= 3 and label.startswith(key)) or key in _INFLECTED.get(label, ()):
            return label
    return None


def _parse_label_map(label_map, num_labels: int) -> dict[int, str]:
    where = f"{PARAM_KEY}.label_map"
    if not isinstance(label_map, dict):
        raise ConfigError(f"{where} must map class indices to labels, e.g. {{0: entailment, 1: neutral, 2: contradiction}}")
    parsed = {}
    for index, name in label_map.items():
        try:
            index = int(index)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: key {index!r} is not a class index (0..{num_labels - 1})") from None
        label = canonical_label(name)
        if label is None:
            raise ConfigError(f"{where}: {name!r} is not one of {', '.join(LABELS)}")
        parsed[index] = label
    if sorted(parsed) != list(range(num_labels)) or sorted(parsed.values()) != sorted(LABELS):
        raise ConfigError(f"{where} must give each of the model's {num_labels} classes (0..{num_labels - 1}) one of "
                          f"{', '.join(LABELS)}, each once; got {label_map}")
    return parsed


def resolve_labels(id2label: dict, label_map, model: str) -> tuple[dict[int, str], str]:
    """(class index -> label, where the order came from) from the model config and params."""
    names = {int(i): str(n) for i, n in (id2label or {}).items()}
    if len(names) != 3:
        raise ConfigError(f"model {model!r} for {PARAM_KEY} has {len(names)} classes; an NLI filter needs a "
                          f"3-way {'/'.join(LABELS)} classifier (set {PARAM_KEY}.name_or_path)")
    from_config = {i: canonical_label(n) for i, n in names.items()}
    named = sorted(v for v in from_config.values() if v) == sorted(LABELS)
    if label_map is not None:
        parsed = _parse_label_map(label_map, len(names))
        if named and parsed != from_config:
            raise ConfigError(f"{PARAM_KEY}.label_map {parsed} contradicts the labels model {model!r} names in its "
                              f"config ({names}); remove {PARAM_KEY}.label_map or fix it")
        return parsed, "params"
    if named:
        return from_config, "id2label"
    ordered = [names[i] for i in sorted(names)]
    if all(_GENERIC.match(n) for n in ordered):
        raise ConfigError(f"model {model!r} for {PARAM_KEY} names its labels generically ({', '.join(ordered)}), so their "
                          f"order is unknown: set {PARAM_KEY}.label_map in params.yaml, e.g. "
                          f"{{0: entailment, 1: neutral, 2: contradiction}} (the order of the ynie/* ANLI checkpoints; "
                          f"check your model's training code)")
    raise ConfigError(f"model {model!r} for {PARAM_KEY} has labels {ordered}, not {'/'.join(LABELS)}: use a 3-way NLI "
                      f"model, or set {PARAM_KEY}.label_map if these names are in fact those labels")


class NLIModel:
    def __init__(self, spec, label_map=None, sanity_check: bool = True):
        from foilforge.models import load_tokenizer, load_transformers_model, torch_device

        self.spec = spec
        self.tokenizer = load_tokenizer(spec)
        self.model = load_transformers_model(spec, "AutoModelForSequenceClassification", refuse_new_weights=CLASSIFIER_HEAD_KEYS,
                                             shared=True)
        self.device = torch_device(spec)
        self.labels, source = resolve_labels(self.model.config.id2label, label_map, spec.describe())
        self.variant = ",".join(f"{i}={self.labels[i]}" for i in sorted(self.labels)) + f" ({source})"
        limits = [n for n in (self.tokenizer.model_max_length, getattr(self.model.config, "max_position_embeddings", None))
                  if isinstance(n, int) and 0 < n < 100_000]
        self.max_length = min(limits + [512])
        if sanity_check:
            self.check_labels()

    def probabilities(self, pairs: list[tuple[str, str]], progress: bool = False) -> list[dict[str, float]]:
        """{label: probability} for each (premise, hypothesis), in input order; sorted by length and batched by
        `batch_size` pairs (and `max_batch_tokens` padded tokens, when the block sets it)."""
        import torch

        encoded = [self.tokenizer(p, h, truncation=True, max_length=self.max_length) for p, h in pairs]
        out: list[dict] = [{}] * len(pairs)
        bar = progress_bar(len(pairs), "nli", progress)
        with torch.inference_mode():
            for idx in token_budget_batches([len(e["input_ids"]) for e in encoded], self.spec.batch_size,
                                            self.spec.extra.get("max_batch_tokens")):
                batch = pad(self.tokenizer, [encoded[i] for i in idx], self.device)
                probs = torch.softmax(self.model(**batch).logits.float(), dim=-1).tolist()
                for row, i in enumerate(idx):
                    out[i] = {self.labels[k]: float(p) for k, p in enumerate(probs[row])}
                bar.update(len(idx))
        bar.close()
        return out

    def check_labels(self) -> None:
        predicted = [max(p, key=p.get) for p in self.probabilities([(p, h) for p, h, _ in SANITY_PAIRS])]
        wrong = [f"{p!r} -> {h!r}: predicted {got}, expected {want}"
                 for (p, h, want), got in zip(SANITY_PAIRS, predicted) if got != want]
        if wrong:
            raise ConfigError(f"{PARAM_KEY}: model {self.spec.describe()!r} with label order {self.variant} fails the "
                              f"sanity check ({'; '.join(wrong)}). The label order is probably wrong: set "
                              f"{PARAM_KEY}.label_map in params.yaml to the order the model was trained with. "
                              f"({PARAM_KEY}.sanity_check: false skips this check; only for test models.)")


@FILTERS.register("nli.v1")
class NLI(Filter):
    name = "nli"
    cost = 2
    fields = ("caption", "foil")
    model_params = {"model": PARAM_KEY}

    def __init__(self, model: dict | None = None):
        self.model = model
        self._nli = None

    def _spec(self):
        return model_spec(self.model, PARAM_KEY, DEFAULT_NLI, allowed_extra=("label_map", "sanity_check", "max_batch_tokens"))

    def check(self) -> None:
        spec = self._spec()
        check_max_batch_tokens(spec.extra.get("max_batch_tokens"), PARAM_KEY)
        if not isinstance(spec.extra.get("sanity_check", True), bool):
            raise ConfigError(f"{PARAM_KEY}.sanity_check must be true or false")
        if spec.extra.get("label_map") is not None:
            _parse_label_map(spec.extra["label_map"], len(LABELS))

    def classifier(self) -> NLIModel:
        if self._nli is None:
            self.check()
            spec = self._spec()
            self._nli = NLIModel(spec, spec.extra.get("label_map"), spec.extra.get("sanity_check", True))
        return self._nli

    def score(self, records: list[dict], progress: bool = False) -> list[dict]:
        pairs = list(zip(texts_of(records, "caption"), texts_of(records, "foil")))
        if not pairs:
            return []
        nli = self.classifier()
        results = []
        for probs in nli.probabilities(pairs, progress=progress):
            results.append({"filter": self.registry_name, "model": nli.spec.describe(), "variant": nli.variant,
                            "score": probs["contradiction"], "label": max(probs, key=probs.get), "probs": probs})
        return results

    @classmethod
    def thresholds(cls, args: dict, where: str) -> dict:
        if isinstance(args.get("keep"), str):
            args = {**args, "keep": [args["keep"]]}
        labels = super().thresholds(args, where)["keep"]
        canonical = [canonical_label(label) for label in labels or ()]
        if not labels or None in canonical:
            raise ConfigError(f"{where}.keep must list labels to keep among {', '.join(LABELS)}, got {labels!r}")
        return {"keep": sorted(set(canonical), key=LABELS.index)}

    @staticmethod
    def keep(result: dict, /, *, keep: tuple = ("contradiction",)) -> bool:
        return result["label"] in keep

    def valse_extras(self, result: dict) -> dict:
        probs = result["probs"]
        scores = {VALSE_NAMES[label]: [probs[label]] for label in LABELS}
        return {"nli_scores": {**scores, "pred": [VALSE_NAMES[result["label"]]]}}
