"""What a caption states, as claims that another image's captions can be checked against (the evidence of a group).

A *statement* is a lemma-level claim read from a spaCy parse. The kinds:

* noun: a thing named ("dog"); a noun modifying another noun is not one (a "fire hydrant" names no fire);
* number: a noun's grammatical number ("dogs": plural), read for every noun (a plural in a foil is a claim: "a
  group of cars" is not said of an image with one car);
* attribute: an adjective or participle on a noun, before it ("a brown dog") or after a copula ("the dog is brown");
* compound: a noun modifying a noun ("a party hat");
* numeral: a number on a noun ("two dogs": 2);
* relation: a preposition between two nouns (left noun, preposition, right noun), the left noun being what the
  preposition attaches to: its head noun, or the subject of the verb it attaches to ("a man sitting on a bench":
  man on bench). A part noun followed by "of" belongs to the preposition ("in front of a car": X in front of car),
  and so does "next" / "close" before "to";
* action: a verb with its subject or its object ("a man riding a horse": subject of ride: man, object of ride:
  horse). A participle on a noun takes the noun as its subject (-ing) or object (-ed, "a pizza topped with ...");
  a passive subject is an object; a coordinated verb shares its subject; coordinated nouns share their role;
* word: a noun, verb or adjective that no statement above reads.

Framing and quantity nouns followed by "of" ("a picture of", "a group of") state nothing about the scene of their
own: what follows the "of" takes their place.
Lemmas are spaCy's, verbs' through lemminflect, so two captions that say the same thing in the same words give the
same statements; a paraphrase ("a guy" for "a man") does not, which is the rule's strictness, not an oversight.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

#: nouns that frame the picture or count a group: no statement about the scene
FRAME_NOUNS = frozenset(("picture", "photo", "photograph", "image", "pic", "shot", "snapshot", "view", "scene",
                         "closeup", "close", "camera"))
GROUP_NOUNS = frozenset(("couple", "lot", "lots", "number", "plenty", "variety", "assortment", "handful", "dozen",
                         "dozens", "ton", "tons", "few", "array", "selection", "mix", "amount", "abundance",
                         "multitude", "several", "hundreds", "thousands", "plethora", "range", "series", "host",
                         "group", "bunch", "kind", "type", "sort"))
#: what an attribute of a framing noun is about ("a black and white photo": black picture)
FRAME = "picture"
#: part nouns that with "of" make one preposition ("in front of", "on top of", "on the side of")
PART_NOUNS = frozenset(("front", "top", "side", "middle", "back", "edge", "bottom", "center", "centre", "corner",
                        "end", "rear", "inside", "outside", "left", "right"))
NUMERALS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
            "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "single": "1", "dozen": "12"}
NOUN_POS = ("NOUN", "PROPN")
RELATIVE_PRONOUNS = frozenset(("who", "that", "which", "whom"))
#: the kinds, in the order a reader meets them
KINDS = ("noun", "number", "attribute", "compound", "numeral", "relation", "action", "word")


@dataclass(frozen=True)
class Statement:
    kind: str
    key: tuple[str, ...]
    #: the token indices the statement reads (to find the statements an edit touches)
    tokens: tuple[int, ...]

    @property
    def ref(self) -> tuple:
        """What two captions must share to state the same thing: kind and key."""
        return (self.kind, *self.key)

    def text(self) -> str:
        return statement_text(self.kind, self.key)


#: the kinds that describe one noun: itself, its number, attributes, compounds, numerals, where it is (a relation
#: describes its first noun: "man on table" says where the man is) and the actions it takes part in; a word is no
#: noun's
NOUN_KINDS = ("noun", "number", "attribute", "compound", "numeral", "relation", "action")


def noun_of(statement: Statement) -> int | None:
    """The token index of the noun a statement describes (a relation's first noun, an action's subject or object),
    or None (a word): what says which claims are about one instance of a noun."""
    if statement.kind == "action":
        return statement.tokens[1]
    return statement.tokens[0] if statement.kind in NOUN_KINDS else None


def statement_text(kind: str, key: tuple[str, ...]) -> str:
    if kind == "number":
        return f"{key[0]} ({key[1]})"
    if kind in ("attribute", "compound", "numeral"):
        return f"{key[1]} {key[0]}"
    if kind == "relation":
        return " ".join(key)
    if kind == "action":
        verb, role, noun = key
        return f"{'subject' if role == 'subj' else 'object'} of {verb}: {noun}"
    return key[0]


@functools.lru_cache(maxsize=65536)
def _verb_lemma(word: str) -> str:
    from foilforge.foilers.lang.wordnet_constraints import verb_lemma

    return verb_lemma(word)


def lemma(token) -> str:
    """A token's lemma, lower case; a verb's through lemminflect (spaCy's small model reads "riding" as "rid")."""
    if token.pos_ in ("VERB", "AUX"):
        return _verb_lemma(token.lower_)
    return (token.lemma_ or token.text).lower()


def noun_number(token) -> str:
    return "plural" if token.tag_ in ("NNS", "NNPS") else "singular"


def numeral_value(token) -> str:
    word = token.lower_.replace(",", "")
    return NUMERALS.get(word, word)


def _conjuncts(token) -> list:
    """The token and the nouns coordinated with it ("a man and a woman")."""
    return [token, *(c for c in token.conjuncts if c.pos_ in NOUN_POS)]


def _of_objects(token) -> list:
    """The objects of a noun's "of" ("people" in "a group of people")."""
    return [c for child in token.children if child.dep_ == "prep" and child.lower_ == "of"
            for c in child.children if c.dep_ == "pobj" and c.pos_ in NOUN_POS]


def _is_frame(token) -> bool:
    """A framing or quantity noun that frames or counts what follows its "of" ("a picture of", "a group of"); with
    a noun modifier it names a thing ("a parking lot of")."""
    return lemma(token) in FRAME_NOUNS | GROUP_NOUNS and bool(_of_objects(token)) and not any(
        c.dep_ == "compound" for c in token.children)


def _is_scene_noun(token) -> bool:
    return token.pos_ in NOUN_POS and not _is_frame(token)


def scene_nouns(token) -> list:
    """The nouns a noun stands for in the scene: itself and its coordinated nouns; for a framing or quantity noun
    ("a picture of", "a group of"), what follows its "of"."""
    found = []
    for noun in _conjuncts(token):
        if _is_scene_noun(noun):
            found.append(noun)
        elif noun.pos_ in NOUN_POS:
            found.extend(n for c in _of_objects(noun) for n in scene_nouns(c))
    return found


def left_noun(token):
    """The noun a preposition's relation is about: its head noun, or the subject of the verb it attaches to."""
    head = token.head
    for _ in range(4):
        if head.pos_ in NOUN_POS:
            return head
        if head.pos_ in ("VERB", "AUX"):
            if head.dep_ in ("acl", "relcl") and head.head.pos_ in NOUN_POS:
                return head.head
            subjects = [c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")]
            if subjects:
                return subjects[0] if subjects[0].pos_ in NOUN_POS else None
            if head.dep_ == "conj" and head.head is not head:
                head = head.head
                continue
        if head.head is head:
            return None
        head = head.head
    return None


def _part_of(obj):
    """For a part noun with "of" ("front" in "in front of a car"): (the "of" token, its objects), else None."""
    if lemma(obj) not in PART_NOUNS:
        return None
    for child in obj.children:
        if child.dep_ == "prep" and child.lower_ == "of":
            objects = [c for c in child.children if c.dep_ == "pobj" and c.pos_ in NOUN_POS]
            if objects:
                return child, objects
    return None


def _relations(doc, consumed: set) -> list[Statement]:
    found = []
    for token in doc:
        if token.dep_ not in ("prep", "agent") or token.i in consumed or (
                token.lower_ == "of" and token.head.lower_ == "one"):   # "one of the benches": read with "on"
            continue
        objects = [c for c in token.children if c.dep_ == "pobj" and c.pos_ in NOUN_POS]
        # "on one of the benches": the benches
        objects += [o for c in token.children if c.dep_ == "pobj" and c.lower_ == "one" for o in _of_objects(c)]
        if not objects:
            continue
        words, anchor = [token.lower_], token
        # "next to", "close to", "out of", "inside of", "away from": a word right before that governs the preposition
        # and has no object of its own belongs to it
        while anchor.head is not anchor and anchor.head.i == anchor.i - 1 and anchor.head.pos_ in ("ADP", "ADV", "ADJ") \
                and not any(c.dep_ == "pobj" for c in anchor.head.children):
            anchor = anchor.head
            words.insert(0, anchor.lower_)
        left = left_noun(anchor)
        if left is None or (token.lower_ == "of" and _is_frame(left)):
            continue
        for obj in objects:
            part = _part_of(obj)
            if part is not None:
                of, inner = part
                consumed.update((obj.i, of.i))
                for owner in scene_nouns(left):
                    for right in (r for i in inner for r in scene_nouns(i)):
                        found.append(Statement("relation", (lemma(owner), " ".join([*words, lemma(obj), "of"]),
                                                            lemma(right)), (owner.i, token.i, obj.i, right.i)))
            else:
                for owner in scene_nouns(left):
                    for right in scene_nouns(obj):
                        found.append(Statement("relation", (lemma(owner), " ".join(words), lemma(right)),
                                               (owner.i, token.i, right.i)))
    return found


def _subjects(verb) -> tuple[list, list]:
    """(subjects, objects) of a verb, as nouns: its own, or its head noun's when it is a participle or relative
    clause, or its head verb's subject when it is coordinated."""
    subjects, objects = [], []
    for child in verb.children:
        if child.dep_ == "nsubj":
            subjects.append(child)
        elif child.dep_ == "nsubjpass":
            objects.append(child)
        elif child.dep_ == "dobj":
            objects.append(child)
        elif child.dep_ == "agent":
            subjects.extend(c for c in child.children if c.dep_ == "pobj")
    relative = [s for s in subjects if s.lower_ in RELATIVE_PRONOUNS]
    subjects = [s for s in subjects if s not in relative]
    if verb.dep_ in ("acl", "relcl") and verb.head.pos_ in NOUN_POS and not subjects:
        if verb.tag_ == "VBN" and not relative:
            if verb.head not in objects:
                objects.append(verb.head)
        else:
            subjects.append(verb.head)
    if not subjects and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX") and verb.head is not verb:
        subjects = _subjects(verb.head)[0]
    return subjects, objects


def caption_statements(doc) -> list[Statement]:
    """Every statement of a parsed caption, in token order (duplicates of one `ref` kept once)."""
    consumed: set = set()
    statements = _relations(doc, consumed)
    read = {i for s in statements for i in s.tokens}
    for token in doc:
        if token.pos_ in NOUN_POS and token.i not in consumed and _is_scene_noun(token) and not (
                token.dep_ == "compound" and token.head.pos_ in NOUN_POS):
            noun = lemma(token)
            statements.append(Statement("noun", (noun,), (token.i,)))
            statements.append(Statement("number", (noun, noun_number(token)), (token.i,)))
            read.add(token.i)
            for child in token.children:
                if child.dep_ == "amod" and child.pos_ in ("ADJ", "VERB"):
                    for adjective in (child, *(c for c in child.conjuncts if c.pos_ == "ADJ")):
                        statements.append(Statement("attribute", (noun, lemma(adjective)), (token.i, adjective.i)))
                        read.add(adjective.i)
                elif child.dep_ == "compound" and child.pos_ in NOUN_POS:
                    statements.append(Statement("compound", (noun, lemma(child)), (token.i, child.i)))
                    read.add(child.i)
                elif child.dep_ == "nummod" and child.pos_ == "NUM":
                    statements.append(Statement("numeral", (noun, numeral_value(child)), (token.i, child.i)))
                    read.add(child.i)
        elif token.pos_ in NOUN_POS and _is_frame(token):
            # "a black and white photo of": what it says of the picture, about the picture
            for child in token.children:
                if child.dep_ == "amod" and child.pos_ in ("ADJ", "VERB"):
                    for adjective in (child, *(c for c in child.conjuncts if c.pos_ == "ADJ")):
                        statements.append(Statement("attribute", (FRAME, lemma(adjective)), (token.i, adjective.i)))
                        read.add(adjective.i)
        elif token.dep_ == "acomp" and token.pos_ == "ADJ":
            owners = [s for s in token.head.children if s.dep_ in ("nsubj", "nsubjpass") and s.pos_ in NOUN_POS]
            if token.head.dep_ == "relcl" and token.head.head.pos_ in NOUN_POS and any(
                    s.dep_ in ("nsubj", "nsubjpass") and s.lower_ in RELATIVE_PRONOUNS for s in token.head.children):
                owners.append(token.head.head)   # "a bed that is very clean"
            for owner in (o for s in owners for o in scene_nouns(s)):
                for adjective in (token, *(c for c in token.conjuncts if c.pos_ == "ADJ")):
                    statements.append(Statement("attribute", (lemma(owner), lemma(adjective)), (owner.i, adjective.i)))
                    read.add(adjective.i)
        elif token.pos_ == "VERB" and lemma(token) != "be":
            subjects, objects = _subjects(token)
            verb = lemma(token)
            for role, nouns in (("subj", subjects), ("obj", objects)):
                for noun in (n for s in nouns if s.pos_ in NOUN_POS for n in scene_nouns(s)):
                    statements.append(Statement("action", (verb, role, lemma(noun)), (token.i, noun.i)))
                    read.add(token.i)
    for token in doc:
        # whatever content no statement reads still has to be said ("a self service lot" read wrongly)
        if token.i not in read and token.i not in consumed and token.pos_ in ("NOUN", "PROPN", "VERB", "ADJ") \
                and lemma(token) != "be" and token.dep_ != "aux" and not _is_frame(token):
            statements.append(Statement("word", (lemma(token),), (token.i,)))
    seen, unique = set(), []
    for statement in sorted(statements, key=lambda s: (min(s.tokens), KINDS.index(s.kind), s.key)):
        if statement.ref not in seen:
            seen.add(statement.ref)
            unique.append(statement)
    return unique


def content_lemmas(doc) -> list[str]:
    """The lemmas of a caption's nouns, verbs and adjectives (not auxiliaries or "be"), in order."""
    return [lemma(t) for t in doc if t.pos_ in ("NOUN", "PROPN", "VERB", "ADJ") and t.dep_ not in ("aux", "auxpass")
            and lemma(t) != "be"]


_WORDS = re.compile(r"[a-z0-9']+")
ARTICLES = frozenset(("a", "an", "the"))


def minimal_key(text: str) -> str:
    """A caption as the minimal-pair route compares two: lower case, words only, no articles ("A dog on the
    bed." == "a dog on a bed")."""
    return " ".join(w for w in _WORDS.findall(str(text).lower()) if w not in ARTICLES)
