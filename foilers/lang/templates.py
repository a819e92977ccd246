"""Visual7W "how many" question + answer -> a declarative statement, shared by existence and counting.

VALSE (App. A.1, A.3) turns "How many animals are shown? 0" into "There are 0
animals shown" and then rewrites the quantity: existence replaces it by "no" or
drops it, counting writes "exactly N". Both need the same structure, so a
question is parsed once into a `Statement` (frame, counted noun, the words
around it) that renders every variant with correct agreement:

* frame "there":   "There are exactly 4 kites flying." / "There is exactly 1 kite flying."
* frame "subject": "Exactly 3 people have umbrellas." / "Exactly 1 person has umbrellas."
* frame "object":  "The polar bear has exactly 5 toes." / "You can see exactly 1 car."

Question shapes handled (case-insensitive; anything else gives no statement,
so the sample is skipped rather than turned into an ungrammatical caption):
"How many X?", "How many X are/is/were/was [there] Y?", "How many X can be V-ed Y?",
"How many X can you/we see Y?", "How many X do/does/did S have Y?",
"How many X do/does/did you/we/they V Y?", "How many X have/has Y?".

The counted noun is the head of X: the word before the first preposition,
participle or relative pronoun ("pieces of fruit" -> "pieces", "people wearing
hats" -> "people"). X starting with "of" ("of the birds wings") is partitive:
there is no noun to inflect, only the verb ("There is exactly 1 of the ...").
Released declaratives (no question) are parsed by `statement_from_counting_caption`
and `statement_from_existence_caption`, which find the counted noun with spaCy
(the head of the numeral's `nummod` arc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from foilforge.foilers.lang.inflection import NUMBER_WORDS as _CARDINALS
from foilforge.foilers.lang.inflection import ZERO_WORDS, indefinite_article, match_case
from foilforge.foilers.lang.number import (
    MASS_NOUNS,
    SINGULAR_OVERRIDES,
    is_mass,
    plural_of,
    singular_of,
    uncountable_when_counted,
)

#: the words a Visual7W count answer may use ("Three.", "None.")
NUMBER_WORDS = {**_CARDINALS, **ZERO_WORDS}

# words that end the counted noun phrase's pre-head part (the head is the word before them)
_PREPOSITIONS = frozenset(
    "of in on at with near by under over behind above below inside outside from to for around across along "
    "beside between into through without atop against beneath".split()
)
_RELATIVE = frozenset("that who which whose".split())
_BE = {"are": ("is", "are"), "is": ("is", "are"), "were": ("was", "were"), "was": ("was", "were")}
_AGREEING_VERBS = {"are": "is", "were": "was", "have": "has", "do": "does"}
_AGREEING_VERBS_SG = {sg: pl for pl, sg in _AGREEING_VERBS.items()}
_PRONOUN_SUBJECTS = frozenset("you we they i".split())


# ---------------------------------------------------------------- numbers and nouns

def parse_count(answer) -> int | None:
    """The number a Visual7W answer states ("3.", "Three.", "None.", 4) or None when it is not a number."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int):
        return answer if answer >= 0 else None
    if not isinstance(answer, str):
        return None
    words = re.findall(r"[a-z]+|\d+", answer.lower())
    if not words or len(words) > 3:  # "3.", "Three.", "3 people." -- not "A few of them are left"
        return None
    word = words[0]
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


# ---------------------------------------------------------------- the statement

@dataclass(frozen=True)
class Statement:
    """A declarative about a number of things, with its quantity slot left open.

    `head` is the counted noun in its plural form (None: partitive "of the ..."
    phrase, nothing to inflect); `modifiers` come between quantity and head,
    `tail` after it (complements, verb phrase, place). In the "subject" frame
    `verb` is the verb that agrees with the counted phrase ("have", "are", "can
    be seen"); `left` is the text before the quantity in the "object" frame.
    """

    frame: str
    head: str | None
    modifiers: str = ""
    tail: str = ""
    verb: str = ""
    left: str = ""
    past: bool = False
    mass: bool = False
    #: "exactly N" (VALSE's counting template); False reads "N X have ..." as some released captions do
    exact: bool = True

    # -- pieces
    def _plurale_tantum(self) -> bool:
        return bool(self.head) and uncountable_when_counted(self.head)

    def noun_phrase(self, singular: bool) -> str:
        if self.head is None:
            return ""  # partitive: the "of the ..." phrase is in `tail`
        head = self.head if (self.mass or not singular) else singular_of(self.head)
        return _join(self.modifiers, head)

    def _be(self, singular: bool) -> str:
        sg, pl = ("was", "were") if self.past else ("is", "are")
        return sg if singular else pl

    def _agreeing_verb(self, singular: bool) -> str:
        if not self.verb:
            return ""
        first, _, rest = self.verb.partition(" ")
        lower = first.lower()
        if singular and lower in _AGREEING_VERBS:
            first = match_case(first, _AGREEING_VERBS[lower])
        elif not singular and lower in _AGREEING_VERBS_SG:
            first = match_case(first, _AGREEING_VERBS_SG[lower])
        return _join(first, rest)

    def _sentence(self, quantity: str, noun_phrase: str, singular: bool) -> str:
        if self.frame == "there":
            text = _join("There", self._be(singular), quantity, noun_phrase, self.tail)
        elif self.frame == "subject":
            text = _join(quantity, noun_phrase, self.tail, self._agreeing_verb(singular))
            text = text[:1].upper() + text[1:]
        else:
            text = _join(self.left, quantity, noun_phrase, self.tail)
        return text + "."

    # -- the renderings foilers need
    def counting(self, n: int) -> str | None:
        """"There are exactly N X ..." with the noun and verb agreeing with N; None when X is not countable."""
        if self.mass or self._plurale_tantum():
            return None
        quantity = f"exactly {n}" if self.exact else str(n)
        return self._sentence(quantity, self.noun_phrase(singular=n == 1), singular=n == 1)

    def existence(self, negated: bool, singular: bool) -> str | None:
        """"There are no X" (negated) / "There are X" / "There is a X"; None for a partitive phrase."""
        if self.head is None:
            return None
        if self.mass:
            singular = True
        elif self._plurale_tantum():
            singular = False  # "There are pants", never "There is a pant"
        noun_phrase = self.noun_phrase(singular=singular)
        if negated:
            quantity = "no"
        elif singular and not self.mass:
            quantity = indefinite_article(noun_phrase)
        else:
            quantity = ""
        return self._sentence(quantity, noun_phrase, singular=singular)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


# ---------------------------------------------------------------- question -> statement

def _normalise_question(question: str) -> str:
    return re.sub(r"\s+", " ", question.strip()).rstrip("?. ").strip()


def _split_noun_phrase(words: list[str]) -> tuple[str, str | None, str]:
    """(modifiers, head, complement) of the words naming what is counted."""
    if not words:
        return "", None, ""
    if words[0].lower() == "of":
        return "", None, " ".join(words)
    end = len(words)
    for index, word in enumerate(words):
        lower = word.lower()
        if index > 0 and (lower in _PREPOSITIONS or lower in _RELATIVE or lower.endswith("ing")):
            end = index
            break
    head = words[end - 1]
    return " ".join(words[: end - 1]), head, " ".join(words[end:])


_BOUNDARY = frozenset("are is were was can could do does did have has".split())


def statement_from_question(question: str) -> Statement | None:
    """Parse a Visual7W "how many" question; None when its shape has no template."""
    text = _normalise_question(question)
    match = re.match(r"(?i)how many\s+(.*)$", text)
    if not match:
        return None
    words = match.group(1).split()
    cut = next((i for i, w in enumerate(words) if w.lower() in _BOUNDARY), len(words))
    modifiers, head, complement = _split_noun_phrase(words[:cut])
    if head is None and not complement:
        return None
    if head is not None and not _looks_plural(head):
        return None
    # a plural word before the head means the phrase held a verb we did not know ("players wear red shorts")
    if any(_looks_plural(w) and w.lower() not in MASS_NOUNS for w in modifiers.split()):
        return None
    rest = words[cut:]
    base = Statement(frame="there", head=head, modifiers=modifiers, mass=bool(head) and is_mass(head))
    if not rest:
        return replace(base, tail=complement)
    verb, after = rest[0].lower(), rest[1:]
    after_text = " ".join(after)
    if verb in _BE:
        if after and after[0].lower() == "there":  # "are there in the picture" -> "There are N X in the picture"
            after_text = " ".join(after[1:])
        return replace(base, tail=_join(complement, after_text), past=verb in ("were", "was"))
    if verb in ("can", "could") and after:
        if after[0].lower() == "be" and len(after) >= 2:  # "can be seen": a modal, no agreement to fix
            return replace(base, frame="subject", tail=complement, verb=_join(verb, after_text))
        if after[0].lower() in _PRONOUN_SUBJECTS and len(after) >= 2:  # "can you see" -> "You can see N X"
            subject = "I" if after[0].lower() == "i" else after[0].capitalize()
            return replace(base, frame="object", left=_join(subject, verb, after[1]),
                           tail=_join(complement, " ".join(after[2:])))
        return None
    if verb in ("do", "does", "did") and len(after) >= 2:
        return _do_question(base, verb, after, complement)
    if verb in ("have", "has") and after:
        return replace(base, frame="subject", tail=complement, verb=_join("have", after_text))
    return None


def _do_question(base: Statement, aux: str, after: list[str], tail_np: str) -> Statement | None:
    """"do/does/did S V Y": S is a pronoun or a phrase ending before "have"."""
    lowered = [w.lower() for w in after]
    if lowered[0] in _PRONOUN_SUBJECTS:
        subject, verb, rest = after[0], after[1], after[2:]
    elif "have" in lowered[1:]:
        at = lowered.index("have", 1)
        subject, verb, rest = " ".join(after[:at]), after[at], after[at + 1:]
    else:
        return None
    verb = _verb_for_aux(verb, aux)
    subject = "I" if subject.lower() == "i" else subject[:1].upper() + subject[1:]
    return replace(base, frame="object", left=_join(subject, verb), tail=_join(tail_np, " ".join(rest)))


def _verb_for_aux(verb: str, aux: str) -> str:
    if aux == "do":
        return verb
    from lemminflect import getInflection

    tag = "VBZ" if aux == "does" else "VBD"
    forms = getInflection(verb.lower(), tag=tag)
    return forms[0] if forms else verb


def _looks_plural(noun: str) -> bool:
    """Visual7W asks "how many" about plurals; a singular head means we misread the phrase."""
    lower = noun.lower()
    if lower in MASS_NOUNS or uncountable_when_counted(lower) or lower in SINGULAR_OVERRIDES:
        return True
    if not lower.isalpha():
        return False
    return singular_of(lower) != lower or plural_of(lower) == lower


# ---------------------------------------------------------------- released declarative -> statement

def statement_from_counting_caption(caption: str, nlp) -> tuple[Statement, int] | None:
    """Rebuild (statement, N) from a counting caption "There are exactly N X ..." using a spaCy parse.

    The counted noun is the head of the numeral's `nummod` arc, followed up
    compound arcs ("4 lamp shades": "shades", not "lamp"); no such arc means a
    partitive ("exactly 4 of the birds wings"): nothing to inflect.
    """
    doc = nlp(caption)
    end = len(doc) - 1 if doc[len(doc) - 1].is_punct else len(doc)
    numeral = next((t for t in doc[:end] if t.like_num and (t.i == 0 or doc[t.i - 1].lower_ == "exactly")), None)
    if numeral is None or parse_count(numeral.text) is None:
        return None
    count = parse_count(numeral.text)
    exact = numeral.i > 0
    before = doc[: numeral.i - 1].text if exact else ""
    head_token = numeral.head if numeral.dep_ == "nummod" and numeral.head.i > numeral.i else None
    while head_token is not None and head_token.dep_ in ("compound", "amod") and head_token.head.i > head_token.i:
        head_token = head_token.head
    if head_token is not None and head_token.lower_.endswith("ing"):
        # the small parser reads "1 person skiing" as a compound noun "person skiing": the noun is "person"
        nouns = [t for t in head_token.lefts if t.dep_ == "compound" and t.i > numeral.i]
        if nouns:
            head_token = nouns[-1]
    if head_token is not None and head_token.pos_ not in ("NOUN", "PROPN"):
        # a misparse ("3 hands total shown" -> "shown"): take the first noun after the numeral
        phrase = []
        for token in doc[numeral.i + 1: end]:
            if token.pos_ == "ADP":
                break  # a noun after a preposition is not the counted one
            phrase.append(token)
        head_token = next((t for t in phrase if t.pos_ in ("NOUN", "PROPN")), None)
    while (head_token is not None and head_token.i + 1 < end and not _looks_plural(head_token.text)
           and doc[head_token.i + 1].tag_ in ("NNS", "VBZ") and _looks_plural(doc[head_token.i + 1].text)):
        head_token = doc[head_token.i + 1]  # "tree trunks": the plural noun is the head
    if head_token is not None and head_token.i < end:
        modifiers = doc[numeral.i + 1: head_token.i].text
        # the statement stores the plural; released captions sometimes say "exactly 6 building"
        head = head_token.text if _looks_plural(head_token.text) else plural_of(head_token.text)
        tail = doc[head_token.i + 1: end].text
    else:
        head, modifiers, tail = None, "", doc[numeral.i + 1: end].text
    frame, left, verb = _frame_of(before)
    if frame == "subject":
        tail, verb = _split_subject_tail(tail)
    statement = Statement(frame=frame, head=head, modifiers=modifiers, tail=tail, verb=verb, left=left,
                          mass=bool(head) and is_mass(head), exact=exact)
    return statement, count


def _frame_of(before: str) -> tuple[str, str, str]:
    lower = before.lower()
    if lower in ("there are", "there is"):
        return "there", "", ""
    if not before:
        return "subject", "", ""
    return "object", before, ""


def _split_subject_tail(tail: str) -> tuple[str, str]:
    words = tail.split()
    for index, word in enumerate(words):
        if word.lower() in ("are", "is", "have", "has", "can", "could", "were", "was", "do", "does"):
            return " ".join(words[:index]), " ".join(words[index:])
    return tail, ""


def statement_from_existence_caption(caption: str, answer: int) -> Statement | None:
    """Rebuild the statement from a released existence caption and its answer.

    Shapes: "There are no X ...", "There are X ...", "There is a X ...", and
    the subject frame "[No] X can be seen ...". The first word after the
    quantity is taken as the noun (existence keeps its number, so only the
    article depends on it); "S have X" is not recoverable without the question.
    """
    text = caption.rstrip(".")
    match = re.match(r"There (are|is|were|was) (no |an? )?(\S+)(.*)$", text)
    if match:
        verb, word, tail = match.group(1), match.group(3), match.group(4).strip()
        # "There is no X" stated for zero things: only a mass noun takes the singular verb
        mass = answer == 0 and verb in ("is", "was")
        head = plural_of(word) if answer == 1 and not mass else word
        return Statement(frame="there", head=head, tail=tail, past=verb in ("were", "was"), mass=mass)
    match = re.match(r"(?i)(no |an? )?(\S+) (can|could) (.*)$", text)
    if match:
        word = match.group(2).lower()
        head = plural_of(word) if answer == 1 else word
        return Statement(frame="subject", head=head, verb=f"{match.group(3)} {match.group(4)}")
    match = re.match(r"(.+? (?:have|has|had)) (no |an? )?(\S+)(.*)$", text)
    if match:  # "The elephants have tusks" (object frame, from "How many X do S have?")
        word = match.group(3)
        head = plural_of(word) if answer == 1 else word
        return Statement(frame="object", left=match.group(1), head=head, tail=match.group(4).strip())
    return None


# ---------------------------------------------------------------- spans

def changed_spans(caption: str, foil: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Word-aligned character spans of the part that differs (common prefix/suffix stripped)."""
    prefix = 0
    limit = min(len(caption), len(foil))
    while prefix < limit and caption[prefix] == foil[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < limit - prefix and caption[len(caption) - 1 - suffix] == foil[len(foil) - 1 - suffix]):
        suffix += 1
    # widen to whole words so the span is a readable edit ("is exactly 1 tomato")
    while prefix > 0 and not caption[prefix - 1].isspace():
        prefix -= 1
    while suffix > 0 and not caption[len(caption) - suffix].isspace() and caption[len(caption) - suffix] not in ".?!,":
        suffix -= 1
    return (prefix, len(caption) - suffix), (prefix, len(foil) - suffix)


HOW_MANY_FIELDS = ("id", "image_file", "question", "answer")


def check_how_many_sample(sample: dict, phenomenon: str, path: str, index) -> None:
    """The fields existence and counting read from an ingested Visual7W "how many" QA."""
    from foilforge.errors import InputError

    for field in HOW_MANY_FIELDS:
        if field not in sample:
            raise InputError(path, f"missing field ({phenomenon} needs a Visual7W 'how many' question and answer)",
                             record=index, field=field)
    if not isinstance(sample["question"], str):
        raise InputError(path, f"expected a string, got {type(sample['question']).__name__}", record=index, field="question")
