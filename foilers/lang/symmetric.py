"""Relations that hold both ways: "A train is next to an overhang" says what "An overhang is next to a train" says.

An object swap (foilers/swap_obj.py) of two noun phrases linked only by such a relation is a foil true of the
image, whoever wrote it: the rule-based foiler never proposes one, and the exact-edit checks
(foilers/lang/exact_edits.py) refuse one from an instruction-tuned model or a released file (`foilforge refilter`).
Other relations are not symmetric: "a cat in front of a dog" / "a dog in front of a cat" is a foil.
"""

from __future__ import annotations

SUBJECT_DEPS = ("nsubj", "nsubjpass")
# "X near Y" holds exactly when "Y near X" does
SYMMETRIC_PREPOSITIONS = frozenset(("near", "beside", "besides", "alongside", "by", "opposite", "with"))
# the first word of a two-word symmetric preposition: "next to", "close to", "across from", "along with"
SYMMETRIC_PREPOSITION_HEADS = frozenset(("next", "close", "adjacent", "across", "opposite", "along", "together"))
# verbs whose act both sides do at once: "a man hugging a woman" is a woman hugging a man
RECIPROCAL_VERBS = frozenset(("hug", "kiss", "embrace", "meet", "marry", "greet", "cuddle", "snuggle", "nuzzle",
                              "fight", "wrestle", "race", "battle"))


#: dependents that say something of their head besides the link: an object, a prepositional phrase, a clause
OWN_RELATIONS = frozenset(("dobj", "dative", "prep", "agent", "acl", "relcl", "advcl", "xcomp", "ccomp"))


def _link(other):
    """(carrier, link tokens): the word the symmetric relation to `other` hangs on and the tokens that make the
    relation ("near"; "next" of "next to"; a reciprocal verb's object itself), or None."""
    if other.dep_ == "dobj" and other.head.lemma_.lower() in RECIPROCAL_VERBS:
        return other.head, {other.i}
    if other.dep_ != "pobj" or other.head.dep_ != "prep":
        return None
    preposition = other.head
    word = preposition.lower_
    if word in SYMMETRIC_PREPOSITIONS:
        # "a bowl filled with oranges": after a participle "with" names the content, not a companion
        if word == "with" and preposition.head.tag_ == "VBN":
            return None
        return preposition.head, {preposition.i}
    if word in ("to", "from", "with") and preposition.head.lower_ in SYMMETRIC_PREPOSITION_HEADS:
        return preposition.head.head, {preposition.head.i}  # "next" of "next to" hangs on the verb or the noun
    particles = [c for c in preposition.head.children if c.dep_ == "prt" and c.lower_ == "across"]
    if word == "from" and particles:  # "sitting across from": "across" a particle of the verb
        return preposition.head, {preposition.i, particles[0].i}
    return None


def _says_more(token, besides: set) -> bool:
    """`token` has a dependent of OWN_RELATIONS other than those in `besides`, or an adjective with a phrase of
    its own ("a plate full of noodles")."""
    return any((c.dep_ in OWN_RELATIONS or c.dep_ == "amod" and any(g.dep_ == "prep" for g in c.children))
               and c.i not in besides for c in token.children)


def symmetric_link(anchor, other) -> bool:
    """`other` is linked to `anchor` by a relation that holds both ways and the caption says nothing else of
    either: "A train is next to an overhang", "A refrigerator next to a red wall", "A dog playing with a cat",
    "A man hugging a woman". Swapping such a pair says the same thing ("An overhang is next to a train"), a foil
    true of the image. The link hangs on `anchor` itself (the head of a noun-phrase caption), or on a verb whose
    subject `anchor` is, or which describes it as the caption's head or a subject ("a dirt bike parked near a
    tent" -> "a tent parked near a dirt bike", true whenever the tent is parked too, which the caption leaves
    open).

    Anything else said of either side moves with the swap and makes it a foil: an object of the verb ("A woman
    holding a phone next to a man" -> the man holds it; "cutting a cake with a knife": "with" names the tool),
    another phrase of the verb ("A girl sitting on a bed next to a lamp" -> the lamp is on the bed), of the
    anchor ("A man in a red shirt next to a woman", "a plate full of noodles next to a fork") or of the other
    ("A cat sitting with a dog on the floor"), the anchor's own part in the sentence ("The table near the
    kitchen has a bowl of fruit on it" -> the kitchen has it).
    Whether a phrase such as "in the kitchen" holds of both is a question for the image, not the text."""
    found = _link(other)
    if found is None:
        return False
    carrier, link = found
    if _says_more(other, set()):
        return False
    if carrier.i == anchor.i:  # a noun-phrase caption: a subject's verb would pass to the other side
        return anchor.dep_ == "ROOT" and not _says_more(anchor, link)
    if carrier.pos_ not in ("VERB", "AUX") or _says_more(carrier, link | {other.i}):
        return False
    verb = carrier
    while verb.dep_ == "conj":  # "stands and talks with a woman": the subject is the first verb's
        verb = verb.head
    if anchor.dep_ in SUBJECT_DEPS and anchor.head.i == verb.i:
        return not _says_more(anchor, set())
    if verb.dep_ in ("acl", "relcl") and verb.head.i == anchor.i and anchor.dep_ in ("ROOT", *SUBJECT_DEPS):
        return not _says_more(anchor, {verb.i})
    return False


def symmetric_pair(a, b) -> bool:
    """True when the noun heads `a` and `b` (spaCy tokens of one parse) are linked only by a relation that holds
    both ways, either way round."""
    return symmetric_link(a, b) or symmetric_link(b, a)
