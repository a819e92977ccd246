"""Relations that hold both ways: "A train is next to an overhang" says what "An overhang is next to a train" says.

An object swap (foilers/swap_obj.py) of two noun phrases linked only by such a relation is a foil true of the
image, whoever wrote it: the rule-based foiler never proposes one, and the exact-edit checks
(foilers/lang/exact_edits.py) refuse one from an instruction-tuned model or a released file (`foilforge refilter`).
Other relations are not symmetric: "a cat in front of a dog" / "a dog in front of a cat" is a foil.
"""

from __future__ import annotations

# as foilers/lang/coref.py's: not imported from there, which would make the select stage (the exact-edit checks
# import this module) depend on the coreference and number rules
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
#: prepositions of a place ("on the floor", "in the kitchen"): two things next to each other share it
LOCATIVE_PREPOSITIONS = frozenset(("on", "in", "at", "inside", "under", "underneath", "beneath", "atop", "upon",
                                   "within", "behind", "above", "below", "over", "outside"))


#: the layers of a picture: "a rainbow in the background" tells it apart from the street in front
VIEW_LAYERS = frozenset(("background", "foreground", "distance"))


def _link(other):
    """(carrier, link tokens): the word the symmetric relation to `other` hangs on in the parse and the tokens that
    make the relation ("near"; "next" of "next to"; a reciprocal verb's object itself), or None."""
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


def _readings(other) -> list[tuple]:
    """The (carrier, link tokens) readings of the symmetric relation to `other`: the parse's, then the higher words
    it may hang on past a place phrase, where that place is likely the other's too: a companion's ("Several birds
    on a perch with some bananas" -> "Some bananas on a perch with several birds") or where a verb puts its subject
    ("A cat sleeping on a couch next to a dog", parsed as a couch next to the dog). Which reading the writer meant
    the words do not tell, so each is tried. A place said without a verb stays the anchor's own: "A small white
    truck on the road next to trees" -> "Trees on the road next to a small white truck" is a foil; so does one
    with another phrase that may be either side's ("A cow stands in a paddock with firewood in the background")."""
    found = _link(other)
    if found is None:
        return []
    readings = [found]
    carrier, link = found
    companion = other.head.lower_ == "with"
    while carrier.dep_ == "pobj" and carrier.head.dep_ == "prep" and carrier.head.lower_ in LOCATIVE_PREPOSITIONS:
        # another phrase on the place ("in a paddock with firewood in the background") may be either side's
        if _said_of(carrier, link) != ([], []):
            break
        carrier = carrier.head.head
        if companion or carrier.pos_ == "VERB":
            readings.append((carrier, link))
    return readings


def _is_place(phrase) -> bool:
    """A prepositional phrase that says where ("on the floor", "in the corner"), not what one wears ("in a red
    shirt"), which layer of the view ("in the background") nor where one is from the other ("behind it")."""
    from foilforge.entailment import spatial_table

    if phrase.dep_ != "prep" or phrase.lower_ not in LOCATIVE_PREPOSITIONS:
        return False
    objects = [c for c in phrase.children if c.dep_ == "pobj"]
    # "behind it": a place relative to the other thing, a relation that does not hold both ways
    if not objects or objects[0].pos_ == "PRON" or objects[0].lower_ in VIEW_LAYERS:
        return False
    noun = objects[0]
    compound = " ".join([c.lower_ for c in noun.children if c.dep_ == "compound" and c.i < noun.i] + [noun.lower_])
    return spatial_table().object_class(compound, ("clothing",)) is None


def _said_of(token, besides: set) -> tuple[list, list]:
    """(places, other relations): the dependents of OWN_RELATIONS of `token` but those in `besides`, split into
    phrases of a place and the rest (an adjective or adverb with a phrase of its own, "a plate full of noodles",
    "with a chair next to it", is one of the rest)."""
    places, rest = [], []
    for c in token.children:
        if c.i in besides or c.dep_ == "prep" and c.lower_ == "of":  # "a glass of beer": part of the noun phrase
            continue
        if c.dep_ in OWN_RELATIONS:
            (places if _is_place(c) else rest).append(c)
        elif c.dep_ in ("amod", "advmod") and any(g.dep_ == "prep" for g in c.children):
            rest.append(c)  # "full of noodles", "(with a chair) next to it"
    return places, rest


def _anchor_side(anchor, carrier, link: set, other) -> tuple[list, list] | None:
    """What the caption says of `anchor` and the verb carrying the link besides the link (places, other relations),
    or None when the link's carrier is no verb of `anchor`'s or `anchor` plays another part in the sentence."""
    if carrier.i == anchor.i:  # a noun-phrase caption: a subject's verb would pass to the other side
        return _said_of(anchor, link) if anchor.dep_ == "ROOT" else None
    if carrier.pos_ not in ("VERB", "AUX"):
        return None
    verb = carrier
    while verb.dep_ == "conj":  # "stands and talks with a woman": the subject is the first verb's
        verb = verb.head
    if anchor.dep_ in SUBJECT_DEPS and anchor.head.i == verb.i:
        besides = set()
    elif verb.dep_ in ("acl", "relcl") and verb.head.i == anchor.i and anchor.dep_ in ("ROOT", *SUBJECT_DEPS):
        besides = {verb.i}
    else:
        return None
    places, rest = _said_of(anchor, besides)
    verb_places, verb_rest = _said_of(carrier, link | {other.i})
    return places + verb_places, rest + verb_rest


def symmetric_link(anchor, other) -> bool:
    """`other` is linked to `anchor` by a relation that holds both ways and the caption says nothing else that
    tells them apart: "A train is next to an overhang", "A white dog sleeping next to a black cat on the floor",
    "A dog playing with a cat", "A man hugging a woman". Swapping such a pair says the same thing ("A black cat
    sleeping next to a white dog on the floor"), a foil true of the image. The link hangs on `anchor` itself (the
    head of a noun-phrase caption), or on a verb whose subject `anchor` is, or which describes it as the
    caption's head or a subject ("a dirt bike parked near a tent" -> "a tent parked near a dirt bike", true
    whenever the tent is parked too, which the caption leaves open), in the parse's reading or past a place phrase
    both likely share (`_readings`: "A cat sleeping on a couch next to a dog").

    A place said of one side only ("on the floor", "sitting on a couch") is where both are: things next to each
    other share it, whichever noun the phrase hangs on. What tells them apart, and so moves with the swap and makes
    it a foil: an object of the verb ("A woman holding a phone next to a man" -> the man holds it; "cutting a cake
    with a knife": "with" names the tool), any other phrase or clause ("A man in a red shirt next to a woman",
    "a plate full of noodles next to a fork"), a place on each side ("A cat sitting on a couch with a dog on the
    floor"), or the anchor's own part in the sentence ("The table near the kitchen has a bowl of fruit on it")."""
    other_places, other_rest = _said_of(other, set())
    if other_rest:
        return False
    for carrier, link in _readings(other):
        anchor_side = _anchor_side(anchor, carrier, link, other)
        if anchor_side is not None:
            anchor_places, anchor_rest = anchor_side
            if not anchor_rest and not (anchor_places and other_places):
                return True
    return False


def symmetric_pair(a, b) -> bool:
    """True when the noun heads `a` and `b` (spaCy tokens of one parse) are linked only by a relation that holds
    both ways, either way round."""
    return symmetric_link(a, b) or symmetric_link(b, a)
