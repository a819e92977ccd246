"""The text-only causal LM (params.yaml `models.text_baseline`) and its perplexities, which the baseline and
evaluate stages share."""

from __future__ import annotations

from foilforge.models import ModelSpec

PARAM_KEY = "models.text_baseline"
CHUNK = 256  # texts per progress-bar step; the LM batches inside each chunk


def load_text_lm(params: dict):
    from foilforge.lm import CausalLM

    block = (params.get("models") or {}).get("text_baseline")
    return CausalLM(ModelSpec.from_params(block, PARAM_KEY))


def perplexities(lm, texts: list[str], desc: str = "perplexity") -> list[float]:
    from tqdm import tqdm

    out: list[float] = []
    for start in tqdm(range(0, len(texts), CHUNK), desc=desc, unit="chunk", disable=len(texts) <= CHUNK):
        out.extend(lm.perplexities(texts[start : start + CHUNK]))
    return out
