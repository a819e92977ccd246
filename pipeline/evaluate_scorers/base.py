"""What every evaluate scorer shares: the registry (`SCORERS`: `evaluate.scorers` names its entries; others come
through the `foilforge.evaluate_scorers` entry points), the `config` block that pins a model scorer's results, and
the scorers that look at a record's image (`ImageScorer`)."""

from __future__ import annotations

import logging
from pathlib import Path

from foilforge.errors import ConfigError
from foilforge.models import ModelSpec, torch_device
from foilforge.params import typed_params
from foilforge.registry import Registry
from foilforge.schema import EvaluateBlock

log = logging.getLogger(__name__)


#: scorers `evaluate.scorers` may name ("text_lm" means the newest text_lm.vN); others: `foilforge.evaluate_scorers`
#: entry points. A factory takes (params, settings, skipped) and returns a scorer, or None after noting in `skipped` why not.
SCORERS = Registry("evaluate scorer", entry_points="foilforge.evaluate_scorers")


def _plain(value):
    """`value` as JSON data: tuples to lists, a dataclass (transformers' SizeDict) to a dict without its unset
    (None) fields, anything else to its str."""
    import dataclasses

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def model_config(spec: ModelSpec, dtype, library: str, versions: dict, **more) -> dict:
    """What pins a model scorer's results (the `config` of its block in metrics.json): the model as configured,
    the dtype it ran in, its preprocessing (`more`) and the versions of the libraries that ran it."""
    import torch

    return {"library": library, "name_or_path": spec.name_or_path, "revision": spec.revision,
            **({"gguf_file": spec.gguf_file} if spec.gguf_file else {}), "dtype": _dtype_name(dtype),
            **{key: _plain(value) for key, value in more.items()},
            "versions": {**versions, "torch": torch.__version__}}


def _transformers_versions() -> dict:
    import transformers

    return {"transformers": transformers.__version__}


class ImageScorer:
    """What the scorers that look at a record's image share: where the image is, and batches of the records that
    have one (`spec.batch_size` records a batch; a record without an image file gets None).

    A subclass sets `name` and gives `similarities(paths, texts)`: the [images, texts] score matrix of one batch
    (the batch's images, and every text of its records in order)."""

    name = "image"

    def __init__(self, spec: ModelSpec, image_root):
        self.spec = spec
        self.model_id = spec.describe()
        self.image_root = Path(image_root)
        self.device = torch_device(spec)

    def image_path(self, record: dict) -> Path | None:
        name = record.get("image_file")
        if not isinstance(name, str) or not name:
            return None
        path = self.image_root / name
        return path if path.is_file() else None

    def similarities(self, paths: list[Path], texts: list[str]):
        raise NotImplementedError

    def score(self, items) -> list[list[float] | None]:
        import torch
        from tqdm import tqdm

        out: list[list[float] | None] = [None] * len(items)
        present = [k for k, (_, record, _) in enumerate(items) if self.image_path(record) is not None]
        batch = max(1, self.spec.batch_size)
        with torch.inference_mode():
            for start in tqdm(range(0, len(present), batch), desc=self.name, disable=len(present) <= batch):
                chunk = present[start : start + batch]
                scores = self.similarities([self.image_path(items[k][1]) for k in chunk],
                                           [t for k in chunk for t in items[k][2]]).float().cpu()
                offset = 0
                for row, k in enumerate(chunk):  # each image against its own record's texts
                    n = len(items[k][2])
                    out[k] = scores[row, offset : offset + n].tolist()
                    offset += n
        return out


#: what counts as an image under evaluate.image_root (its README.md, which keeps the DVC dep present, does not)
IMAGE_SUFFIXES = frozenset((".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"))


def has_images(root) -> bool:
    return any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in Path(root).rglob("*"))


def _image_scorer(cls, params: dict, settings: EvaluateBlock, skipped: dict):
    """An ImageScorer subclass built from its `models.<role>` block, or None (noted in `skipped`) without images."""
    root = settings.image_root
    if not root or not Path(root).is_dir() or not has_images(root):
        skipped[cls.name] = f"no image files under evaluate.image_root ({root!r})"
        log.info("%s scorer skipped: %s", cls.name, skipped[cls.name])
        return None
    block = (params.get("models") or {}).get(cls.PARAM_KEY.split(".", 1)[1])
    return cls(ModelSpec.from_params(block, cls.PARAM_KEY), root)


def check_settings(params: dict) -> EvaluateBlock:
    """The `evaluate` block (typed, the schema's defaults filled in, as scorer factories get it), its scorers
    checked against the registry."""
    settings = typed_params(params).evaluate
    names = settings.scorers
    unknown = [n for n in names if n not in SCORERS.unversioned() and n not in SCORERS.names()]
    if unknown:
        raise ConfigError(f"params.yaml evaluate.scorers: unknown scorer(s) {', '.join(unknown)}; "
                          f"known: {', '.join(SCORERS.unversioned())}")
    return settings


def scorer_config(scorer) -> dict:
    """The `config` block of a scorer's results; {} for a scorer (an entry point's) that does not say."""
    config = getattr(scorer, "config", None)
    return config() if callable(config) else {}
