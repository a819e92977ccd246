"""GRUEN grammaticality (Zhu & Bhat 2020), batched; docs/reference.md §3.

For a text: split into sentences, drop sentences of <= 1 word (punctuation
removed); for each remaining sentence

* LM term: exp(mean token cross-entropy) of a BertForMaskedLM run on the
  *unmasked* sentence with labels = input ids, [CLS] and [SEP] included
  (`models.grammar_lm`, paper: bert-base-cased);
* CoLA term: the raw logit of class 1 ("acceptable") of a BERT CoLA
  classifier, input truncated to 128 tokens (`models.cola`);

both averaged over the sentences; g = max(0, (exp(-0.5 * lm) + cola) / 8 + 0.5),
and the GRUEN score of a single text is g clipped to [0, 1].

The reference code scores one sentence at a time. Here sentences of all texts
are deduplicated, sorted by length and run in padded batches (of `batch_size`
sentences, and with `max_batch_tokens` in the model's block at most that many
padded tokens: foilforge/batching.py token_budget_batches); each sentence's
loss is the mean over its own tokens (attention mask), not the batch mean
that `model(..., labels=...)` returns, so padding never changes a score.

Differences from the reference code, kept on purpose: sentences are split by
a small rule (after . ! ? followed by space, and at line breaks) instead of
NLTK's punkt, whose data cannot be downloaded everywhere; the reference's
rewriting of "." into ". " and of "1. 5" into "UNK" is not copied. A text with
no sentence of two or more words gets lm = cola = 0 (g = 0.625), as in the
reference code.
"""

from __future__ import annotations

import math
import re
import string

from foilforge.batching import pad, progress_bar, token_budget_batches
from foilforge.errors import ConfigError
from foilforge.filter import CLASSIFIER_HEAD_KEYS

DEFAULT_LM = "bert-base-cased"
# bert-base-cased fine-tuned on CoLA (GLUE label 1 = acceptable), the same base model as GRUEN's own
# CoLA checkpoint, which the GRUEN authors did not publish on the hub
DEFAULT_COLA = "gchhablani/bert-base-cased-finetuned-cola"
LM_MAX_TOKENS = 512  # the reference keeps 510 word pieces plus [CLS] and [SEP]
COLA_MAX_TOKENS = 128

_LINE_BREAKS = re.compile(r"\s*\n+\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def split_sentences(text: str) -> list[str]:
    pieces = []
    for line in _LINE_BREAKS.split(text.strip()):
        pieces.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return pieces


def word_count(sentence: str) -> int:
    return len(sentence.translate(_PUNCTUATION).split())


def scored_sentences(text: str) -> list[str]:
    """The sentences GRUEN scores: those with more than one word."""
    return [s for s in split_sentences(text) if word_count(s) > 1]


def gruen_score(lm_terms: list[float], cola_terms: list[float]) -> dict:
    """GRUEN from per-sentence LM perplexities and CoLA logits of one text."""
    lm = sum(lm_terms) / len(lm_terms) if lm_terms else 0.0
    cola = sum(cola_terms) / len(cola_terms) if cola_terms else 0.0
    g = max(0.0, (math.exp(-0.5 * lm) + cola) / 8.0 + 0.5)
    return {"score": min(1.0, g), "lm_perplexity": lm, "cola_logit": cola, "n_sentences": len(lm_terms)}


def acceptable_index(config) -> int:
    """Class 1 (GLUE's "acceptable"), unless the config names the acceptable class elsewhere."""
    if getattr(config, "num_labels", 2) != 2:
        raise ConfigError(f"models.cola must be a 2-class CoLA classifier; this one has {config.num_labels} labels")
    names = {int(i): str(n).strip().lower() for i, n in (getattr(config, "id2label", None) or {}).items()}
    for index, name in names.items():
        if name == "acceptable":
            return index
    return 1


class Gruen:
    """Loads both models and scores texts; `score_texts` is what the grammaticality filter calls."""

    def __init__(self, lm_spec, cola_spec):
        from foilforge.lm import MLM_HEAD_KEYS
        from foilforge.models import load_tokenizer, load_transformers_model, torch_device

        self.lm_spec, self.cola_spec = lm_spec, cola_spec
        self.lm_tokenizer = load_tokenizer(lm_spec)
        self.lm = load_transformers_model(lm_spec, "AutoModelForMaskedLM", refuse_new_weights=MLM_HEAD_KEYS, shared=True)
        self.lm_device = torch_device(lm_spec)
        self.cola_tokenizer = load_tokenizer(cola_spec)
        self.cola = load_transformers_model(cola_spec, "AutoModelForSequenceClassification",
                                            refuse_new_weights=CLASSIFIER_HEAD_KEYS, shared=True)
        self.cola_device = torch_device(cola_spec)
        self.cola_class = acceptable_index(self.cola.config)

    def describe(self) -> str:
        return f"{self.lm_spec.describe()} + {self.cola_spec.describe()}"

    def perplexities(self, sentences: list[str], batch_size: int | None = None, progress: bool = False) -> list[float]:
        """exp(mean token loss) of each sentence under the masked LM, labels = input ids."""
        import torch

        encoded = [self.lm_tokenizer(s, truncation=True, max_length=LM_MAX_TOKENS) for s in sentences]
        out = [0.0] * len(sentences)
        bar = progress_bar(len(sentences), "grammaticality: LM term", progress)
        with torch.inference_mode():
            for idx in token_budget_batches([len(e["input_ids"]) for e in encoded], batch_size or self.lm_spec.batch_size,
                                            self.lm_spec.extra.get("max_batch_tokens")):
                batch = pad(self.lm_tokenizer, [encoded[i] for i in idx], self.lm_device)
                logits = self.lm(**batch).logits.float()
                token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch["input_ids"], reduction="none")
                mask = batch["attention_mask"].float()
                mean_loss = (token_loss * mask).sum(1) / mask.sum(1)
                for row, i in enumerate(idx):
                    out[i] = math.exp(float(mean_loss[row]))
                bar.update(len(idx))
        bar.close()
        return out

    def cola_logits(self, sentences: list[str], batch_size: int | None = None, progress: bool = False) -> list[float]:
        import torch

        encoded = [self.cola_tokenizer(s, truncation=True, max_length=COLA_MAX_TOKENS) for s in sentences]
        out = [0.0] * len(sentences)
        bar = progress_bar(len(sentences), "grammaticality: CoLA term", progress)
        with torch.inference_mode():
            for idx in token_budget_batches([len(e["input_ids"]) for e in encoded], batch_size or self.cola_spec.batch_size,
                                            self.cola_spec.extra.get("max_batch_tokens")):
                batch = pad(self.cola_tokenizer, [encoded[i] for i in idx], self.cola_device)
                logits = self.cola(**batch).logits.float()[:, self.cola_class].tolist()
                for row, i in enumerate(idx):
                    out[i] = float(logits[row])
                bar.update(len(idx))
        bar.close()
        return out

    def score_texts(self, texts: list[str], progress: bool = False) -> list[dict]:
        per_text = [scored_sentences(t) for t in texts]
        unique = list(dict.fromkeys(s for sentences in per_text for s in sentences))
        lm = dict(zip(unique, self.perplexities(unique, progress=progress)))
        cola = dict(zip(unique, self.cola_logits(unique, progress=progress)))
        model = self.describe()
        return [{"model": model, "variant": "gruen", **gruen_score([lm[s] for s in sentences], [cola[s] for s in sentences])}
                for sentences in per_text]
