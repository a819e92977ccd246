"""The grammaticality filter: GRUEN (the paper's) or Link Grammar (offline), on the foil.

params.yaml:

    models:
      grammar_lm: {name_or_path: bert-base-cased}                       # GRUEN LM term
      cola: {name_or_path: gchhablani/bert-base-cased-finetuned-cola}   # GRUEN CoLA term
    filters:
      grammaticality: {variant: gruen}       # gruen | linkgrammar (+ max_null_count, max_parse_time,
                                             #   relative_to_caption: count only null links the foil adds)
      run: {relations: [grammaticality]}
      keep: {relations: {grammaticality: {min_score: 0.8}}}

Result per record: {filter, model, variant, score, ...}; VALSE's
`grammaticality_scores` ([score] of the foil) is written for GRUEN only.
"""

from __future__ import annotations

from foilforge.batching import check_max_batch_tokens
from foilforge.errors import ConfigError
from foilforge.filter import FILTERS, Filter, model_spec, texts_of
from foilforge.filters.gruen import DEFAULT_COLA, DEFAULT_LM

VARIANTS = ("gruen", "linkgrammar")


@FILTERS.register("grammaticality.v1")
class Grammaticality(Filter):
    name = "grammaticality"
    cost = 1
    model_params = {"grammar_lm": "models.grammar_lm", "cola": "models.cola"}

    def __init__(self, variant: str = "gruen", grammar_lm: dict | None = None, cola: dict | None = None,
                 max_null_count: int = 3, max_parse_time: int = 10, relative_to_caption: bool = False):
        self.variant = variant
        self.grammar_lm = grammar_lm
        self.cola = cola
        self.max_null_count = max_null_count
        self.max_parse_time = max_parse_time
        self.relative_to_caption = relative_to_caption
        self._scorer = None

    @property
    def fields(self) -> tuple[str, ...]:
        return ("foil", "caption") if self.relative_to_caption else ("foil",)

    def check(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"params.yaml filters.grammaticality.variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.variant == "gruen":
            if self.relative_to_caption:
                raise ConfigError("params.yaml filters.grammaticality.relative_to_caption applies to the linkgrammar "
                                  "variant only (GRUEN scores the foil alone, as the paper did)")
            self._specs()

    def _specs(self):
        specs = (model_spec(self.grammar_lm, "models.grammar_lm", DEFAULT_LM, allowed_extra=("max_batch_tokens",)),
                 model_spec(self.cola, "models.cola", DEFAULT_COLA, allowed_extra=("max_batch_tokens",)))
        for spec in specs:
            check_max_batch_tokens(spec.extra.get("max_batch_tokens"), spec.param_key)
        return specs

    def scorer(self):
        if self._scorer is None:
            self.check()
            if self.variant == "gruen":
                from foilforge.filters.gruen import Gruen

                self._scorer = Gruen(*self._specs())
            else:
                from foilforge.filters.linkgrammar import LinkGrammar

                self._scorer = LinkGrammar(self.max_null_count, self.max_parse_time)
        return self._scorer

    def score(self, records: list[dict], progress: bool = False) -> list[dict]:
        texts = texts_of(records, "foil")
        if not texts:
            return []
        extra = {"captions": texts_of(records, "caption")} if self.relative_to_caption else {}
        return [{"filter": self.registry_name, **r} for r in self.scorer().score_texts(texts, progress=progress, **extra)]

    @staticmethod
    def keep(result: dict, /, *, min_score: float = 0.8) -> bool:
        return result["score"] >= min_score

    def valse_extras(self, result: dict) -> dict:
        return {"grammaticality_scores": [result["score"]]} if result.get("variant") == "gruen" else {}
