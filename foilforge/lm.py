"""Language-model scoring shared by foilers, filters and the text-only baseline.

* `CausalLM.sentence_logprobs(texts)`: summed log-probability and token count
  of each text under a causal LM, batched with padding masks (a padded
  position never changes a text's score).
* `MaskedLM`: a masked LM whose prediction head must come from the
  checkpoint; a freshly initialised head (SpanBERT hub checkpoints, docs/reference.md §2)
  is refused at load time.

A `CausalLM` loads its tokenizer and model when first used, not when built, and with
$FOILFORGE_SCORE_CACHE set (`make repro` sets it to .foilforge-cache/scores, a directory DVC does
not track) `sentence_logprobs` keeps each call's results there, keyed by everything that decides
their bits: the model (name, revision, GGUF file, its files' names, sizes and modification
times), device, dtype, torch threads, batch size, the scoring code and library versions, and the
texts of the call in order. A CPU matrix product's sums depend on the batch a text is padded in,
so a text scored in another batch may differ in its last bits: only the same call is answered
from the cache, with the bits it gave. The score, baseline and evaluate stages score with the
same model, and a stage whose calls are all in the cache loads no model at all.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from foilforge.batching import ensure_pad_token, pad_ids
from foilforge.models import ModelSpec, load_tokenizer, load_transformers_model, torch_device

SCORE_CACHE_ENV = "FOILFORGE_SCORE_CACHE"

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


def score_cache_dir() -> Path | None:
    """Where `CausalLM.sentence_logprobs` keeps its results ($FOILFORGE_SCORE_CACHE; unset or "off": nowhere)."""
    value = os.environ.get(SCORE_CACHE_ENV)
    return Path(value) if value and value != "off" else None


def model_identity(spec: ModelSpec) -> dict:
    """The model a spec loads: its name, revision and GGUF file, and for a local model (or a `package:` one) the
    (name, size, mtime) of each of its files, so weights replaced under the same path are another model."""
    from foilforge.models import resolve_path

    path, gguf = resolve_path(spec)
    directory = Path(path)
    files = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in directory.iterdir() if f.is_file()) \
        if directory.is_dir() else None
    return {"name_or_path": spec.name_or_path, "revision": spec.revision, "gguf_file": gguf, "files": files}


def _scoring_code() -> dict:
    """This module's and its helpers' code, and the versions of the libraries that compute the numbers (read from
    the installed packages' metadata: no import)."""
    from importlib import metadata

    from foilforge import batching, models

    digest = hashlib.sha256()
    for module_file in (__file__, batching.__file__, models.__file__):
        digest.update(Path(module_file).read_bytes())
    versions = {}
    for package in ("torch", "transformers", "tokenizers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {"code": digest.hexdigest()[:16], **versions}


class CausalLM:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self._tokenizer = self._model = self._device = None
        self._cache_identity = None
        self.cache_hits = self.cache_misses = 0

    def load(self) -> "CausalLM":
        """The tokenizer and model loaded now: a model that cannot load fails here, not at its first use."""
        self.tokenizer, self.model  # noqa: B018  (the properties load)
        return self

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            tokenizer = load_tokenizer(self.spec)
            use_tokenizer_padding(tokenizer, "right")
            self._tokenizer = tokenizer
        return self._tokenizer

    @property
    def model(self):
        if self._model is None:
            self._model = load_transformers_model(self.spec, "AutoModelForCausalLM", refuse_new_weights=CAUSAL_HEAD_KEYS)
        return self._model

    @property
    def device(self):
        if self._device is None:
            self._device = torch_device(self.spec)
        return self._device

    @property
    def bos(self):
        tokenizer = self.tokenizer
        return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id

    def _cache_path(self, texts: list[str], batch_size: int) -> Path | None:
        root = score_cache_dir()
        if root is None:
            return None
        if self._cache_identity is None:
            import torch

            self._cache_identity = json.dumps({"model": model_identity(self.spec), "device": str(self.device),
                                               "dtype": self.spec.dtype, "torch_threads": torch.get_num_threads(),
                                               "scoring": _scoring_code()}, sort_keys=True)
        key = hashlib.sha256(json.dumps([self._cache_identity, batch_size, texts]).encode("utf-8")).hexdigest()
        return root / "causal_lm" / key[:2] / f"{key}.json"

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
        """(sum of log p(token | prefix), number of scored tokens) for each text, in input order; from the score
        cache (module docstring) when this very call was made before."""
        batch_size = batch_size or self.spec.batch_size
        texts = list(texts)
        cached = self._cache_path(texts, batch_size) if texts else None
        if cached is not None and cached.is_file():
            stored = json.loads(cached.read_text(encoding="utf-8"))
            if len(stored) == len(texts):
                self.cache_hits += 1
                return [(float(lp), int(n)) for lp, n in stored]
        results = self._sentence_logprobs(texts, batch_size)
        if cached is not None:
            from foilforge.io import atomic_write

            self.cache_misses += 1
            with atomic_write(cached) as handle:
                handle.write(json.dumps(results))
        return results

    def _sentence_logprobs(self, texts: list[str], batch_size: int) -> list[tuple[float, int]]:
        import torch

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
