"""open_clip: an open_clip model (models.open_clip) scored as CLIP_benchmark's image_caption_selection does."""

from __future__ import annotations

import logging
from pathlib import Path

from foilforge.errors import ConfigError
from foilforge.models import ModelSpec, torch_dtype
from foilforge.pipeline.evaluate_scorers.base import SCORERS, ImageScorer, _dtype_name, _image_scorer, model_config
from foilforge.schema import EvaluateBlock

log = logging.getLogger(__name__)


#: open_clip's `precision` for each params.yaml dtype (fp16/bf16: open_clip's own mixed precision, as OpenAI's CLIP)
OPEN_CLIP_PRECISION = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
OPEN_CLIP_SCHEMAS = ("hf-hub:", "local-dir:")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth")


class OpenClipScorer(ImageScorer):
    """An open_clip model scored as CLIP_benchmark's image_caption_selection (SugarCrepe, Winoground) does: the
    cosine of the L2-normalised `encode_image` and `encode_text` embeddings, the image through open_clip's eval
    transform (`preprocess_val`, which converts it to RGB itself)."""

    name = "open_clip"
    PARAM_KEY = "models.open_clip"

    def __init__(self, spec: ModelSpec, image_root):
        try:
            import open_clip
        except ImportError as err:
            raise ConfigError(f"evaluate.scorers names open_clip but open_clip cannot be imported ({err}): install "
                              f"open-clip-torch (`pip install -e .[harness]`), or take open_clip out of "
                              f"evaluate.scorers") from err

        super().__init__(spec, image_root)
        self.pretrained = _open_clip_pretrained(spec)
        if self.pretrained:
            self.model_id = f"{spec.name_or_path} ({self.pretrained})"
        self.dtype = torch_dtype(spec, self.device)
        self.precision = OPEN_CLIP_PRECISION[_dtype_name(self.dtype)]
        try:
            if spec.name_or_path.startswith("hf-hub:"):
                # open_clip builds an hf-hub model with random weights when they fail to download: fetch them first
                from open_clip.pretrained import download_pretrained_from_hf

                download_pretrained_from_hf(spec.name_or_path.split(":", 1)[1])
            self.model, _, self.preprocess = open_clip.create_model_and_transforms(
                spec.name_or_path, pretrained=self.pretrained or None, precision=self.precision, device=self.device)
            self.tokenizer = open_clip.get_tokenizer(spec.name_or_path)
        except Exception as err:
            raise _open_clip_error(spec, self.pretrained, err) from err
        self.model.eval()
        self.input_dtype = open_clip.get_input_dtype(self.precision)

    def config(self) -> dict:
        import open_clip

        return model_config(self.spec, self.dtype, "open_clip", {"open_clip": open_clip.__version__},
                            pretrained=self.pretrained, preprocessing=self.model.visual.preprocess_cfg, score="cosine")

    def similarities(self, paths, texts):
        import torch
        import torch.nn.functional as F
        from PIL import Image

        pixels = []
        for path in paths:
            with Image.open(path) as image:  # as CLIP_benchmark's SugarCrepe dataset: no convert before the transform
                pixels.append(self.preprocess(image))
        images = torch.stack(pixels).to(self.device, dtype=self.input_dtype)
        image_emb = F.normalize(self.model.encode_image(images).float(), dim=-1)
        text_emb = F.normalize(self.model.encode_text(self.tokenizer(texts).to(self.device)).float(), dim=-1)
        return image_emb @ text_emb.t()


def _open_clip_pretrained(spec: ModelSpec) -> str | None:
    """The spec's `pretrained` once checked: a load that would give random weights or ignore a setting is refused."""
    key = spec.param_key
    unknown = sorted(set(spec.extra) - {"pretrained"})
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {', '.join(unknown)}; allowed: name_or_path, pretrained, device, "
                          f"dtype, batch_size")
    if spec.revision or spec.gguf_file:
        raise ConfigError(f"{key}: open_clip takes no revision or gguf_file; pin a hub model by downloading it and "
                          f"setting {key}.name_or_path to local-dir:/path")
    pretrained = spec.extra.get("pretrained")
    if pretrained is not None and not isinstance(pretrained, str):
        raise ConfigError(f"{key}.pretrained: expected a pretrained tag or a checkpoint file, got {pretrained!r:.60}")
    name = spec.name_or_path
    if name.startswith("local-dir:"):
        directory = Path(name.split(":", 1)[1])
        if directory.is_dir() and not any(p.suffix in WEIGHT_SUFFIXES for p in directory.iterdir()):
            raise ConfigError(f"{key}.name_or_path is {name!r} but that directory holds no weights (*.safetensors, "
                              f"*.bin, *.pth): open_clip would build the model with random weights. Put the "
                              f"checkpoint (open_clip_model.safetensors) beside open_clip_config.json there")
    if name.startswith(OPEN_CLIP_SCHEMAS):
        if pretrained:
            log.warning("%s.pretrained (%s) is ignored: open_clip takes the weights of %s from there",
                        key, pretrained, name)
        return None
    if not pretrained:
        tags = _open_clip_tags(name, " (", ")")
        raise ConfigError(f"{key}.pretrained is not set: open_clip would build {name} with random weights. Set "
                          f"{key}.pretrained to a tag of open_clip.list_pretrained() for {name}{tags}, or to a "
                          f"checkpoint file")
    return pretrained


def _open_clip_tags(name: str, before: str, after: str = "") -> str:
    """The first pretrained tags open_clip ships for model `name` (openai first, as open_clip lists them) between
    `before` and `after`; '' for a name without tags."""
    import open_clip

    try:
        tags = list(open_clip.list_pretrained_tags_by_model(name))
    except Exception:  # a name open_clip does not know
        return ""
    return f"{before}{', '.join(tags[:8])}{', ...' if len(tags) > 8 else ''}{after}" if tags else ""


def _open_clip_error(spec: ModelSpec, pretrained: str | None, err: Exception) -> ConfigError:
    key = spec.param_key
    line = (str(err).splitlines() or [""])[0][:300]
    what = repr(spec.name_or_path) + (f" with pretrained {pretrained!r}" if pretrained else "")
    return ConfigError(
        f"could not load open_clip model {what} for {key}: {type(err).__name__}: {line}. Set {key}.name_or_path "
        f"and {key}.pretrained to a model name and pretrained tag from open_clip.list_pretrained() "
        f"(e.g. ViT-B-32 and openai{_open_clip_tags(spec.name_or_path, f'; tags for {spec.name_or_path}: ')}; "
        f"offline, the tag's weights must already be "
        f"in the Hugging Face cache, and HF_HUB_OFFLINE=1 saves the retries), or {key}.name_or_path to "
        f"hf-hub:org/repo or to local-dir:/path (a directory holding open_clip_config.json and the weights, "
        f"e.g. open_clip_model.safetensors)")


@SCORERS.register("open_clip.v1")
def open_clip_scorer(params: dict, settings: EvaluateBlock, skipped: dict):
    return _image_scorer(OpenClipScorer, params, settings, skipped)
