"""Language-model scoring shared by foilers, filters and the text-only baseline.

* `CausalLM.sentence_logprobs(texts)`: summed log-probability and token count
  of each text under a causal LM, batched with padding masks (a padded
  position never changes a text's score).
* `MaskedLM`: a masked LM whose prediction head must come from the
  checkpoint; a freshly initialised head (SpanBERT hub checkpoints, docs/reference.md §2)
  is refused at load time.
"""

from __future__ import annotations

from foilforge.batching import ensure_pad_token, pad_ids
from foilforge.models import ModelSpec, load_tokenizer, load_transformers_model, torch_device

# weight-name fragments of the heads that must be trained
MLM_HEAD_KEYS = ("cls.predictions", "lm_head", "predictions.", "generator_lm_head", "vocab_projector", "vocab_transform")
CAUSAL_HEAD_KEYS = ("lm_head",)


def use_tokenizer_padding(tokenizer, side: str) -> None:
    """Let `tokenizer.pad` do the padding: a pad token (eos when the checkpoint has none) and a chosen side.

    Padded positions are always masked out, so which id pads does not change a
    score; the side does matter to a causal LM (right padding keeps position ids
    0..n-1 without passing them), so callers choose it.
    """
    ensure_pad_token(tokenizer)
    tokenizer.padding_side = side


def token_logprobs(logits, targets):
    """log p(target) at every position, in float32, without materialising a second vocabulary-sized tensor."""
    import torch

    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def encode_batch(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens: what `tokenizer(texts, add_special_tokens=False)` gives.

    A fast tokenizer with neither padding nor truncation set in its tokenizer.json is asked directly: the
    wrapper's conversion of every encoding to a Python dict took as long as the tokenizing itself (about
    1.5 s of the 6 s relations spends on 375 captions on an H200: benchmarks/results/relations_profile.json).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.padding is not None or backend.truncation is not None:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]


class CausalLM:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.tokenizer = load_tokenizer(spec)
        self.model = load_transformers_model(spec, "AutoModelForCausalLM", refuse_new_weights=CAUSAL_HEAD_KEYS)
        self.device = torch_device(spec)
        use_tokenizer_padding(self.tokenizer, "right")
        self.bos = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.tokenizer.cls_token_id

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text with a start token first, so the first word is scored too."""
        if not texts:
            return []
        start = [self.bos] if self.bos is not None else []
        return [start + ids for ids in encode_batch(self.tokenizer, list(texts))]

    def pad(self, sequences: list[list[int]]):
        """(input ids, attention mask) as CPU tensors, padded on the right by the tokenizer."""
        return pad_ids(self.tokenizer, sequences)

    def sentence_logprobs(self, texts: list[str], batch_size: int | None = None) -> list[tuple[float, int]]:
        """(sum of log p(token | prefix), number of scored tokens) for each text, in input order."""
        import torch

        batch_size = batch_size or self.spec.batch_size
        encoded = self.encode(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        results: list[tuple[float, int] | None] = [None] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                ids, mask = self.pad([encoded[i] for i in idx])
                # one copy per batch; right padding keeps every text at positions 0..n-1
                ids, mask = ids.to(self.device), mask.to(self.device)
                logits = self.model(input_ids=ids, attention_mask=mask).logits
                token_lp = token_logprobs(logits[:, :-1], ids[:, 1:]) * mask[:, 1:]
                sums = token_lp.sum(-1).tolist()
                counts = mask[:, 1:].sum(-1).tolist()
                for row, i in enumerate(idx):
                    results[i] = (float(sums[row]), int(counts[row]))
        return results  # type: ignore[return-value]

    def perplexities(self, texts: list[str], batch_size: int | None = None) -> list[float]:
        import math

        return [math.exp(-lp / max(n, 1)) for lp, n in self.sentence_logprobs(texts, batch_size)]


class MaskedLM:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.tokenizer = load_tokenizer(spec)
        self.model = load_transformers_model(spec, "AutoModelForMaskedLM", refuse_new_weights=MLM_HEAD_KEYS)
        self.device = torch_device(spec)
        if self.tokenizer.mask_token_id is None:
            from foilforge.errors import ConfigError

            raise ConfigError(f"{spec.param_key}: tokenizer of {spec.describe()!r} has no mask token; a masked LM is needed here")
        use_tokenizer_padding(self.tokenizer, "right")
