"""text_lm: the text-only causal LM (models.text_baseline): a text's score is minus its perplexity (VALSE Table 2)."""

from __future__ import annotations

import logging

from foilforge.models import torch_dtype
from foilforge.pipeline.evaluate_scorers.base import SCORERS, _transformers_versions, model_config
from foilforge.schema import EvaluateBlock

log = logging.getLogger(__name__)


class TextLMScorer:
    name = "text_lm"

    def __init__(self, lm):
        self.lm = lm
        self.model_id = lm.spec.describe()

    def config(self) -> dict:
        # the dtype the model loads in (foilforge/models.py torch_dtype), read without loading it: a run whose
        # scores all came from the score cache (foilforge/lm.py) loads no model
        return model_config(self.lm.spec, torch_dtype(self.lm.spec, self.lm.device), "transformers",
                            _transformers_versions(), score="-perplexity")

    def score(self, items) -> list[list[float] | None]:
        from foilforge.pipeline.text_lm import perplexities

        texts = [t for _, _, item_texts in items for t in item_texts]
        ppl = perplexities(self.lm, texts, desc="text_lm")
        out, k = [], 0
        for _, _, item_texts in items:
            out.append([-p for p in ppl[k : k + len(item_texts)]])
            k += len(item_texts)
        return out


@SCORERS.register("text_lm.v1")
def text_lm_scorer(params: dict, settings: EvaluateBlock, skipped: dict):
    from foilforge.pipeline.text_lm import load_text_lm

    return TextLMScorer(load_text_lm(params))
