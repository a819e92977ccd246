"""Language-model scoring shared by foilers, filters and the text-only baseline.

* `CausalLM.sentence_logprobs(texts)`: summed log-probability and token count
  of each text under a causal LM, batched with padding masks (a padded
  position never changes a text's score).
* `MaskedLM`: a masked LM whose prediction head must come from the
  checkpoint; a freshly initialised head (SpanBERT hub checkpoints, SPEC §2)
  is refused at load time.
"""

from __future__ import annotations

from pipeline.models import ModelSpec, load_tokenizer, load_transformers_model, torch_device

# weight-name fragments of the heads that must be trained
MLM_HEAD_KEYS = ("cls.predictions", "lm_head", "predictions.", "generator_lm_head", "vocab_projector", "vocab_transform")
CAUSAL_HEAD_KEYS = ("lm_head",)


class CausalLM:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.tokenizer = load_tokenizer(spec)
        self.model = load_transformers_model(spec, "AutoModelForCausalLM", refuse_new_weights=CAUSAL_HEAD_KEYS)
        self.device = torch_device(spec)
        if self.tokenizer.pad_token_id is None:
            # padding positions are masked out, so any id will do
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.bos = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.tokenizer.cls_token_id

    def _encode(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        # a start token so the first word is scored too
        return ([self.bos] if self.bos is not None else []) + ids

    def sentence_logprobs(self, texts: list[str], batch_size: int | None = None) -> list[tuple[float, int]]:
        """(sum of log p(token | prefix), number of scored tokens) for each text, in input order."""
        import torch

        batch_size = batch_size or self.spec.batch_size
        encoded = [self._encode(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        results: list[tuple[float, int] | None] = [None] * len(texts)
        pad = self.tokenizer.pad_token_id
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                width = max(len(encoded[i]) for i in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for row, i in enumerate(idx):
                    ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
                    mask[row, : len(encoded[i])] = 1
                ids, mask = ids.to(self.device), mask.to(self.device)
                logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
                logp = torch.log_softmax(logits[:, :-1], dim=-1)
                target = ids[:, 1:]
                token_lp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1) * mask[:, 1:]
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
            from pipeline.errors import ConfigError

            raise ConfigError(f"{spec.param_key}: tokenizer of {spec.describe()!r} has no mask token; a masked LM is needed here")
