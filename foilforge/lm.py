"""Language-model scoring shared by foilers, filters, the text-only baseline and the probes.

* `CausalLM.sentence_logprobs(texts)`: summed log-probability and token count of each text under a causal LM;
  `CausalLM.pooled_states(texts, layer, pooling, max_length)`: its pooled hidden states, from the same pass.
* `TextEncoder.pooled_states(...)`: the pooled hidden states of an encoder (a BERT-style model) over each text.
* `MaskedLM`: a masked LM whose prediction head must come from the checkpoint; a freshly initialised head
  (SpanBERT hub checkpoints, docs/reference.md §2) is refused at load time.

A text's pass is computed in one canonical way: in a batch of texts of its own token length with no padding, of a
row count the device's shape rule sets (foilforge/batching.py `same_length_batches`, `batch_rows`), so its bits are
a function of the model and the text alone, not of the other texts of the call or the batch size. That makes them
storable: with $FOILFORGE_SCORE_CACHE set (`make repro` sets it to .foilforge-cache/scores, which DVC does not
track) every pass is kept in the pass store (foilforge/pass_store.py), keyed by the model (its name, revision, GGUF
file, its files' names, sizes and modification times), dtype, device kind, shape rule and the scoring code, and the
text. A causal LM's pass stores the log-probability and the pooled states the probes ask by default (`STORED_POOLS`)
at once, so foil, score, baseline (text LM and probe) and evaluate run each text through SmolLM2 once between them,
and a stage whose texts are all stored loads no model. Without the store every pass is computed, with the same bits.
Inside `pass_workers(n)` (refilter's `--workers`) a CPU call's batches are spread over n forked processes, each
batch on one torch thread as always: the same bits.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from contextlib import contextmanager
from pathlib import Path

from foilforge.batching import (
    ACCELERATOR_ROWS,
    AMX_BATCH_TOKENS,
    batch_rows,
    ensure_pad_token,
    fill_rows,
    pad_ids,
    same_length_batches,
)
from foilforge.errors import ConfigError
from foilforge.models import ModelSpec, dtype_name, load_tokenizer, load_transformers_model, torch_device
from foilforge.pass_store import open_store

POOLINGS = ("mean", "last")
#: the pooled states every causal LM pass stores beside its log-probability (layer, pooling, max_length): what
#: the probes of params.yaml ask for by default (filters/attackers/hidden_probe.py), so they read the pass the
#: text LM and the plausibility scorer made
STORED_POOLS = ((-1, "mean", 64),)

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


#: float32 logits converted at a time by `token_logprobs` on a CPU: half a MiB, which stays in a core's cache
CPU_LOGPROB_CHUNK = 1 << 17


def token_logprobs(logits, targets):
    """log p(target) at every position, in float32, without materialising a second vocabulary-sized tensor.

    On a CPU the positions go a few at a time (`CPU_LOGPROB_CHUNK` floats): a batch's float32 copy of its logits
    (hundreds of MiB) left the cache between the conversion and the log-sum-exp, which then waited on memory
    for four times as long as it computed. Each position's log-sum-exp is a reduction over its own row alone,
    so its bits are those of one call over the whole batch (tests/test_pass_store.py).
    """
    import torch

    if logits.device.type != "cpu" or logits.dim() < 2:
        logits = logits.float()
        return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    out = torch.empty(targets.shape, dtype=torch.float32)
    step = max(1, CPU_LOGPROB_CHUNK // max(1, logits.shape[-1]))
    rows = logits.reshape(-1, logits.shape[-1]) if logits.dim() == 2 or logits.is_contiguous() else None
    if rows is None:  # a slice such as logits[:, :-1]: row by row of the first dimension, no copy of the whole
        for index in range(logits.shape[0]):
            out[index] = token_logprobs(logits[index], targets[index])
        return out
    flat_targets, flat_out = targets.reshape(-1), out.view(-1)
    for start in range(0, rows.shape[0], step):
        part = rows[start : start + step].float()
        flat_out[start : start + step] = (part.gather(-1, flat_targets[start : start + step].unsqueeze(-1)).squeeze(-1)
                                          - torch.logsumexp(part, dim=-1))
    return out


def encode_batch(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens: what `tokenizer(texts, add_special_tokens=False)` gives.

    A fast tokenizer with neither padding nor truncation set in its tokenizer.json is asked directly: the
    wrapper's conversion of every encoding to a Python dict took as long as the tokenizing itself (docs/performance.md,
    "Span scoring on a GPU").
    """
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.padding is not None or backend.truncation is not None:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]


def model_identity(spec: ModelSpec) -> dict:
    """The model a spec loads: its name, revision and GGUF file, and for a local model (or a `package:` one) the
    (name, size, mtime) of each of its files, so weights replaced under the same path are another model."""
    from foilforge.models import resolve_path

    path, gguf = resolve_path(spec)
    directory = Path(path)
    files = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in directory.iterdir() if f.is_file()) \
        if directory.is_dir() else None
    return {"name_or_path": spec.name_or_path, "revision": spec.revision, "gguf_file": gguf, "files": files}


def device_kind(device) -> str:
    """The kind of device a pass runs on, as far as it decides the bits: on the CPU its vector instruction set (the
    kernels torch picks), the processor (vendor, family, model: an Intel and an AMD CPU with AVX512-BF16 gave
    SmolLM2 other bits) and oneDNN's cap if the user set one (ONEDNN_MAX_CPU_ISA); a GPU's model name. So a pass
    store shared by machines of several kinds never hands one kind's passes to another."""
    import torch

    if device.type == "cpu":
        from foilforge.host import cpu_info

        info = cpu_info()
        processor = f"{info.get('vendor_id', '?')} {info.get('cpu family', '?')}/{info.get('model', '?')}"
        return (f"cpu:{torch.backends.cpu.get_cpu_capability()}:{processor}:"
                f"onednn<={os.environ.get('ONEDNN_MAX_CPU_ISA', 'default')}")
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return device.type


def _ranking_code() -> dict:
    """This module's and its helpers' code, and the versions of the libraries that compute the numbers (read from
    the installed packages' metadata: no import)."""
    from importlib import metadata

    from foilforge import batching, models, pass_store

    digest = hashlib.sha256()
    for module_file in (__file__, batching.__file__, models.__file__, pass_store.__file__):
        digest.update(Path(module_file).read_bytes())
    versions = {}
    for package in ("torch", "transformers", "tokenizers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {"code": digest.hexdigest()[:16], **versions}


@contextmanager
def one_thread(on: bool = True):
    """torch on one intra-op thread while a CPU pass runs (foilforge/batching.py: how threads share a product
    decides its bits), the process's count after."""
    import torch

    before = torch.get_num_threads()
    if on and before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if on and before != 1:
            torch.set_num_threads(before)


def pool_field(layer: int, pooling: str, max_length: int | None) -> str:
    return f"pool:{layer}:{pooling}:{max_length}"


def _pack_logprob(logprob: float, count: int) -> bytes:
    return struct.pack("<dq", logprob, count)


def _unpack_logprob(value: bytes) -> tuple[float, int]:
    logprob, count = struct.unpack("<dq", value)
    return logprob, count


#: processes a CPU pass's batches are spread over (`pass_workers`); 1: this process
_PASS_WORKERS = [1]
#: (passes object, pools, where) a forked process computes batches of (set just before the fork)
_FORKED = None


def _forked_batch(batch: list[list[int]]) -> list[dict[str, bytes]]:
    passes, pools, where = _FORKED
    return passes._batch(batch, pools, where)


@contextmanager
def pass_workers(workers: int):
    """CPU passes spread over `workers` forked processes while inside (each batch on one torch thread, in whichever
    process: the bits are the same, foilforge/batching.py); 1 or less, or a system without fork: this process."""
    before = _PASS_WORKERS[0]
    _PASS_WORKERS[0] = max(1, int(workers))
    try:
        yield
    finally:
        _PASS_WORKERS[0] = before


class StoredPasses:
    """A model's passes over whole texts: read from the pass store where they are, computed canonically (batches of
    one token length, no padding, rows by the device's shape rule) where they are not, and stored.

    Subclasses say how a text is encoded (`encode`) and what a batch's pass gives (`_pass_fields`)."""

    pass_kind = ""

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self._tokenizer = self._model = self._device = None
        self._store_key = self._shapes = None
        self.cache_hits = self.cache_misses = 0  # texts answered from the store / computed and stored

    @property
    def device(self):
        if self._device is None:
            self._device = torch_device(self.spec)
        return self._device

    @property
    def shapes(self) -> str:
        """The rule this model's batches are shaped by (foilforge/batching.py `batch_rows`): "accelerator", "amx"
        (bfloat16 on a CPU with AMX) or "cpu"."""
        if self._shapes is None:
            from foilforge.host import has_amx

            if self.device.type != "cpu":
                self._shapes = "accelerator"
            elif dtype_name(self.spec, self.device) == "bfloat16" and has_amx():
                self._shapes = "amx"
            else:
                self._shapes = "cpu"
        return self._shapes

    def store_key(self) -> str:
        """The digest of everything that decides a pass's bits but the text (module docstring)."""
        if self._store_key is None:
            shape = {"accelerator": ACCELERATOR_ROWS, "amx": AMX_BATCH_TOKENS, "cpu": None}[self.shapes]
            identity = {"pass": self.pass_kind, "model": model_identity(self.spec), "dtype": dtype_name(self.spec, self.device),
                        "device": device_kind(self.device), "shapes": [self.shapes, shape],
                        "scoring": _ranking_code()}
            self._store_key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
        return self._store_key

    def _fields(self, texts: list[str], wanted: list[str], pools: tuple, where: str,
                rows: int | None = None) -> dict[str, dict[str, bytes]]:
        """{text: {field: bytes}} holding every `wanted` field of every text; a text missing any of them gets a
        pass, which computes `pools` (and whatever else the pass gives) and stores it. `rows`: texts a batch on
        the CPU (speed only; default the spec's batch_size)."""
        unique = list(dict.fromkeys(texts))
        store = open_store()
        found = store.get(self.store_key(), unique, wanted) if store is not None else {}
        missing = [t for t in unique if any(f not in found.get(t, {}) for f in wanted)]
        if store is not None:
            self.cache_hits += len(unique) - len(missing)
            self.cache_misses += len(missing)
        if missing:
            computed = self._passes(missing, pools, where, rows or self.spec.batch_size)
            if store is not None:
                store.put(self.store_key(), computed)
            found.update(computed)
        return found

    def _encode_for(self, texts: list[str], pools: tuple) -> list[list[int]]:
        return self.encode(texts)

    def _passes(self, texts: list[str], pools: tuple, where: str, rows: int) -> dict[str, dict[str, bytes]]:
        import multiprocessing

        encoded = self._encode_for(texts, pools)
        shapes = self.shapes
        lengths = [len(e) for e in encoded]
        batches = [[encoded[i] for i in batch]
                   for batch in same_length_batches(lengths, lambda length: batch_rows(length, shapes, rows)[0])]
        if _PASS_WORKERS[0] > 1 and shapes != "accelerator" and len(batches) > 1 \
                and "fork" in multiprocessing.get_all_start_methods():
            global _FORKED
            self.model  # noqa: B018  (loaded here: the forked processes inherit it)
            _FORKED = (self, pools, where)
            try:
                with multiprocessing.get_context("fork").Pool(min(_PASS_WORKERS[0], len(batches))) as pool:
                    results = pool.map(_forked_batch, batches, chunksize=1)
            finally:
                _FORKED = None
        else:
            results = [self._batch(batch, pools, where) for batch in batches]
        by_ids = {tuple(ids): fields for batch, found in zip(batches, results) for ids, fields in zip(batch, found)}
        return {text: by_ids[tuple(ids)] for text, ids in zip(texts, encoded)}

    def _batch(self, batch: list[list[int]], pools: tuple, where: str) -> list[dict[str, bytes]]:
        """The fields of one batch of encoded texts of one length, filled to its shape rule's rows (a CPU batch on
        one torch thread)."""
        import torch

        with torch.inference_mode(), one_thread(self.shapes != "accelerator"):
            filled = batch_rows(len(batch[0]), self.shapes, len(batch))[1]
            ids = fill_rows(torch.tensor(batch, dtype=torch.long), filled)
            return self._pass_fields(ids.to(self.device), len(batch), pools, where)

    def _pooled(self, states, rows: int, pools: tuple, span, where: str) -> list[dict[str, bytes]]:
        """The `pools` of the first `rows` rows of a batch's hidden states (a tuple, 0 = embeddings), over the
        positions [first, end) that `span(width, max_length)` gives (`last`: the state at end - 1); row by row, so
        each row's reduction has one shape whatever the batch."""
        fields: list[dict[str, bytes]] = [{} for _ in range(rows)]
        for layer, pooling, max_length in pools:
            if not -len(states) <= layer < len(states):
                raise ConfigError(f"{where}: layer is {layer} but the model has {len(states)} hidden-state layers "
                                  "(0 = embeddings)")
            if pooling not in POOLINGS:
                raise ConfigError(f"{where}: pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
            hidden = states[layer]
            first, end = span(hidden.shape[1], max_length)
            for row in range(rows):
                part = hidden[row, first:end].clone().float()
                vector = part.mean(0) if pooling == "mean" else part[-1]
                fields[row][pool_field(layer, pooling, max_length)] = vector.cpu().numpy().astype("<f4").tobytes()
        return fields

    def _states(self, texts: list[str], layer: int, pooling: str, max_length: int | None, pools: tuple,
                where: str):
        import numpy as np

        field = pool_field(layer, pooling, max_length)
        found = self._fields(texts, [field], pools, where)
        rows = [np.frombuffer(found[t][field], dtype="<f4") for t in texts]
        return np.stack(rows) if rows else np.zeros((0, 0), dtype="<f4")


class CausalLM(StoredPasses):
    pass_kind = "causal_lm"

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
            self._model = load_transformers_model(self.spec, "AutoModelForCausalLM", refuse_new_weights=CAUSAL_HEAD_KEYS,
                                                  shared=True)
        return self._model

    @property
    def bos(self):
        tokenizer = self.tokenizer
        return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id

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
        """(sum of log p(token | prefix), number of scored tokens) for each text, in input order: from the pass
        store, or computed (module docstring). `batch_size`: texts a batch on the CPU (speed only: no bits move)."""
        texts = list(texts)
        found = self._fields(texts, ["logprob"], STORED_POOLS, self.spec.param_key, batch_size)
        return [_unpack_logprob(found[t]["logprob"]) for t in texts]

    def pooled_states(self, texts: list[str], layer: int = -1, pooling: str = "mean", max_length: int | None = 64,
                      where: str | None = None):
        """(texts x hidden size) float32: each text's hidden states of `layer` (0 = embeddings, -1 the last),
        pooled over its first `max_length` tokens (`mean`) or taken at the last of them (`last`); the start token
        is left out (a text without tokens: the start token's state). From the pass that gives the log-probability,
        whichever of the two was asked first."""
        pools = tuple(dict.fromkeys((*STORED_POOLS, (layer, pooling, max_length))))
        return self._states(list(texts), layer, pooling, max_length, pools, where or self.spec.param_key)

    def _pass_fields(self, ids, rows: int, pools: tuple, where: str) -> list[dict[str, bytes]]:
        out = self.model(input_ids=ids, output_hidden_states=bool(pools))
        length = ids.shape[1]
        # every row of the filled batch, then the real ones
        sums = token_logprobs(out.logits[:, :-1], ids[:, 1:]).sum(-1)[:rows].tolist() if length > 1 else [0.0] * rows
        start = 1 if self.bos is not None else 0

        def span(width, max_length):
            text_tokens = width - start
            if text_tokens <= 0:
                return 0, width
            return start, start + (text_tokens if max_length is None else min(text_tokens, max_length))

        fields = self._pooled(out.hidden_states, rows, pools, span, where) if pools else [{} for _ in range(rows)]
        for row in range(rows):
            fields[row]["logprob"] = _pack_logprob(float(sums[row]), length - 1)
        return fields

    def _encode_for(self, texts: list[str], pools: tuple) -> list[list[int]]:
        encoded = self.encode(texts)
        empty = [t for t, ids in zip(texts, encoded) if not ids]
        if empty:
            raise ValueError(f"{self.spec.describe()}: {empty[0]!r} has no tokens, and the tokenizer no start token")
        return encoded

    def perplexities(self, texts: list[str], batch_size: int | None = None) -> list[float]:
        import math

        return [math.exp(-lp / max(n, 1)) for lp, n in self.sentence_logprobs(texts, batch_size)]


class TextEncoder(StoredPasses):
    """An encoder's (a BERT-style model's) pooled hidden states of whole texts, with the tokenizer's special tokens,
    truncated to `max_length` tokens; pooled over every token (`mean`) or the last (`last`)."""

    pass_kind = "encoder"

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.spec)  # no padding: a batch's texts have one length
        return self._tokenizer

    @property
    def model(self):
        if self._model is None:
            self._model = load_transformers_model(self.spec, "AutoModel", shared=True)
        return self._model

    def encode(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids of each text with the tokenizer's special tokens, at most `max_length` of them."""
        if not texts:
            return []
        return self.tokenizer(list(texts), truncation=max_length is not None, max_length=max_length)["input_ids"]

    def _encode_for(self, texts: list[str], pools: tuple) -> list[list[int]]:
        [(_, _, max_length)] = pools  # an encoder pass is asked for one pool: its truncation is the pass's input
        return self.encode(texts, max_length)

    def pooled_states(self, texts: list[str], layer: int = -1, pooling: str = "mean", max_length: int | None = 64,
                      where: str | None = None):
        return self._states(list(texts), layer, pooling, max_length, ((layer, pooling, max_length),),
                            where or self.spec.param_key)

    def _pass_fields(self, ids, rows: int, pools: tuple, where: str) -> list[dict[str, bytes]]:
        out = self.model(input_ids=ids, output_hidden_states=True)
        return self._pooled(out.hidden_states, rows, pools, lambda width, _: (0, width), where)


class MaskedLM:
    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.tokenizer = load_tokenizer(spec)
        self.model = load_transformers_model(spec, "AutoModelForMaskedLM", refuse_new_weights=MLM_HEAD_KEYS, shared=True)
        self.device = torch_device(spec)
        if self.tokenizer.mask_token_id is None:
            from foilforge.errors import ConfigError

            raise ConfigError(f"{spec.param_key}: tokenizer of {spec.describe()!r} has no mask token; a masked LM is needed here")
        use_tokenizer_padding(self.tokenizer, "right")
