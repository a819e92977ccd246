"""image_text: CLIP-style scoring through transformers (models.image_text): one image against several texts,
score = logits_per_image."""

from __future__ import annotations

import logging

from foilforge.errors import ConfigError
from foilforge.models import ModelSpec, load_transformers_model, resolve_path
from foilforge.pipeline.evaluate_scorers.base import (
    SCORERS,
    ImageScorer,
    _image_scorer,
    _transformers_versions,
    model_config,
)
from foilforge.schema import EvaluateBlock

log = logging.getLogger(__name__)


class ImageTextScorer(ImageScorer):
    """CLIP-style scoring through transformers: one image, several texts, score = logits_per_image."""

    name = "image_text"
    PARAM_KEY = "models.image_text"

    def __init__(self, spec: ModelSpec, image_root):
        super().__init__(spec, image_root)
        self.model = load_transformers_model(spec, "AutoModel",
                                             refuse_new_weights=("text_projection", "visual_projection", "logit_scale"))
        self.processor = _load_processor(spec)

    def config(self) -> dict:
        images = getattr(self.processor, "image_processor", self.processor)
        preprocessing = {"processor": type(self.processor).__name__, "image_processor": type(images).__name__}
        for key in ("size", "crop_size", "image_mean", "image_std"):
            preprocessing[key] = getattr(images, key, None)
        return model_config(self.spec, self.model.dtype, "transformers", _transformers_versions(),
                            preprocessing=preprocessing, score="logits_per_image")

    def similarities(self, paths, texts):
        from PIL import Image

        images = []
        for path in paths:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True, truncation=True)
        inputs = {key: value.to(self.device) for key, value in inputs.items()}
        return self.model(**inputs).logits_per_image  # [images, texts]


def _load_processor(spec: ModelSpec):
    from transformers import AutoProcessor

    path, _ = resolve_path(spec)
    try:
        return AutoProcessor.from_pretrained(path, **spec.hub_kwargs())
    except Exception as err:
        raise ConfigError(f"could not load the processor of {spec.describe()!r} for {spec.param_key}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0][:300]}. Set {spec.param_key}.name_or_path "
                          f"to a hub id or a local directory holding the model and its processor.") from err


@SCORERS.register("image_text.v1")
def image_text_scorer(params: dict, settings: EvaluateBlock, skipped: dict):
    return _image_scorer(ImageTextScorer, params, settings, skipped)
