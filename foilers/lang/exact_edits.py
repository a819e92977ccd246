"""Checks that a foil is exactly the edit of its SugarCrepe type, shared by both proposers and `foilforge refilter`.

A model asked for one edit often makes another: in SugarCrepe's unrefined replace_rel, "making pizzas" became
"cleaning up after making pizzas" (an insertion, not a replacement), and about a third of its swap pairs are not
pure swaps. Every foil of the seven types (foilforge/proposers.py) goes through these checks, whichever proposer
wrote it; each refusal is a short stable reason, counted by reason in the foil metrics, the select report and
`refilter`'s report.

Words are compared as tokens (words and punctuation marks), lower-cased, with "an" read as "a": whitespace, case
and an article's a/an aside, nothing else may differ.

* **exact edit** (a foil whose edit is known: `{type, span, old, new}` from its foiler): the caption's text at the
  span is `old`, and the foil is the caption with `old` replaced by `new` there and nothing else changed.
* **replace** (`replace_obj`, `replace_att`, `replace_rel`): one stretch of at most `MAX_REPLACED_WORDS` words
  replaced by another (nothing inserted or deleted elsewhere; punctuation-only differences aside); both
  stretches of the same kind, the kind of the type (nouns; adjectives, the attribute classes' words included
  however the parser tags them; verbs, or prepositions, for a relation); the new word not related to the old one
  as synonym, hypernym or hyponym, nor a spatial paraphrase (the entailment check, foilforge/entailment.py: WordNet
  and the spatial-relation table); the new word not already in the caption (nor, when given, in another caption of
  the image); an age word of the kind of noun it is said of ("young" of a living thing, "new" of the rest:
  foilers/lang/attributes.py).
* **swap** (`swap_obj`, `swap_att`): the same words (verbs and auxiliaries by lemma, so "is" / "are" agreement
  may follow the moved subject), and the foil is the caption with two stretches exchanged; for swap_obj each holds
  a noun, for swap_att each is one adjective; two noun phrases linked only by a relation that holds both ways
  ("a train next to an overhang", "a man hugging a woman": foilers/lang/symmetric.py) are refused, the swap
  saying the same thing, and so is a swap that moves a time ("on a sunny day": `names_a_time`).
* **add** (`add_obj`, `add_att`): the caption is the foil with exactly one stretch removed (punctuation aside):
  one adjective (add_att; an age word of the kind of noun it is said of, as above), or one noun phrase with at most its joining words ("and a dog", "next to a lamp";
  add_obj); the added noun or adjective is stated by no caption of the image (`image_texts`), and an added noun is
  no synonym, hypernym or hyponym of a noun they state (a "dog" added to a picture of "an animal" may be true).
* **duplicates**: one (caption, foil) per image (`duplicate_refusals`).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from foilforge.edits import changed_span
from foilforge.foilers.lang.symmetric import symmetric_pair

#: the types these checks know: SugarCrepe's seven (foilforge/proposers.py SUGAR_TYPES), by family
TYPES = ("replace_obj", "replace_att", "replace_rel", "swap_obj", "swap_att", "add_obj", "add_att")
#: words (with inner apostrophes: "don't"), a possessive "'s" on its own ("a woman's head": the noun moves in a
#: swap, its "'s" stays), and single punctuation marks
TOKEN = re.compile(r"\w+(?:['’](?![sS]\b)\w+)*|['’][sS]\b|[^\w\s]")
#: the most words a replacement may replace or put in ("a park bench", "on top of", "is stuck in")
MAX_REPLACED_WORDS = 3
#: how far an exchanged stretch may reach into the words both texts share at its ends (an article, a noun)
REACH = 3
#: an added noun phrase's joining words and modifiers (the rest of the added stretch must be one noun phrase)
JOINING_POS = ("DET", "ADJ", "NUM", "CCONJ", "ADP", "PUNCT", "ADV", "PART")

# ---- reasons (stable strings: counted in metrics and reports)
NOT_OLD = "edit: the caption's text at the span is not `old`"
NOT_THE_EDIT = "edit: the foil is not the caption with old -> new"
REPLACE_MORE_THAN_ONE = "replace: more than one change"
REPLACE_NOT_REPLACEMENT = "replace: words added or removed, not replaced"
REPLACE_TOO_LONG = "replace: more than a word or phrase replaced"
REPLACE_NEW_IN_CAPTION = "replace: the new word is already in the caption"
REPLACE_NEW_ON_IMAGE = "replace: the new word is stated by a caption of the image"
REL_STATIC_POSITION = "replace_rel: both verbs only say where a thing is (a bowl sitting / standing on a counter)"
ATT_AGE_MISFIT = "attribute: an age word of the wrong kind of noun (young of a thing, new of a living thing)"
ATT_COAT_COLOUR = "attribute: a colour that names the same coat (a brown dog may be called red, red hair orange)"
SWAP_WORDS = "swap: not the same words"
SWAP_NOT_EXCHANGE = "swap: not two stretches exchanged"
SWAP_OBJ_KIND = "swap_obj: the exchanged stretches are not two noun phrases"
SWAP_ATT_KIND = "swap_att: the exchanged words are not two adjectives"
SWAP_OBJ_SYMMETRIC = "swap_obj: the two phrases are linked by a relation that holds both ways"
SWAP_OBJ_TIME = "swap_obj: a time moved (\"on a sunny day\"), which says when under any preposition"
SWAP_NOT_SITE = "swap: not the two phrases asked for"
ADD_NOT_ONE = "add: not one insertion"
ADD_ATT_KIND = "add_att: the added words are not one adjective"
ADD_OBJ_KIND = "add_obj: the added words are not one noun phrase"
ADD_ON_IMAGE = "add: the added word is stated by a caption of the image"
ADD_IMPLIED = "add: the added object is implied by a caption of the image"
DUPLICATE = "duplicate (caption, foil) for the image"
ANSWER_OLD = "answer: old is not the site's words"
ANSWER_NEW = "answer: new is not the other phrase of the swap"

#: the entailment check's edit kind (foilforge/edits.py EDIT_KINDS) for each kind of replaced words
EDIT_KIND = {"noun": "noun", "adjective": "adjective", "verb": "relation", "preposition": "relation"}


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(normalised token, start, end) of each word and punctuation mark: lower case, "an" read as "a"."""
    out = []
    for match in TOKEN.finditer(text):
        word = match.group().lower()
        out.append(("a" if word == "an" else word, match.start(), match.end()))
    return out


def same_text(a: str, b: str) -> bool:
    """Equal but for whitespace, case and a/an."""
    return [t[0] for t in tokens(a)] == [t[0] for t in tokens(b)]


def _punctuation(words: Sequence[str]) -> bool:
    return all(not any(ch.isalnum() for ch in word) for word in words)


@dataclass(frozen=True)
class Change:
    """One stretch that differs between caption and foil: the caption's tokens [i1, i2) -> the foil's [j1, j2)."""

    tag: str
    i1: int
    i2: int
    j1: int
    j2: int


def changes(caption_tokens, foil_tokens) -> list[Change]:
    """The stretches that differ (difflib over normalised tokens), punctuation-only ones left out."""
    a, b = [t[0] for t in caption_tokens], [t[0] for t in foil_tokens]
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal" and not _punctuation(a[i1:i2] + b[j1:j2]):
            out.append(Change(tag, i1, i2, j1, j2))
    return out


def edit_of(type_: str, caption: str, foil: str, span: tuple[int, int]) -> dict:
    """The `{type, span, old, new}` record of a foil made at `span`: the span widened to every character that
    differs (a swap's moved verb, an article), `old` the caption's text there and `new` the foil's."""
    (start, caption_end), _ = changed_span(caption, foil)
    s, e = min(span[0], start), max(span[1], caption_end)
    tail = len(caption) - e
    return {"type": type_, "span": [s, e], "old": caption[s:e], "new": foil[s:len(foil) - tail]}


# ---------------------------------------------------------------- WordNet


def _synsets(word: str, pos: str) -> tuple:
    """WordNet synsets of a word or phrase in any inflection (`pos` "n", "v" or "a", satellites with "a")."""
    from foilforge.entailment import _synsets as lookup

    return lookup(word, pos)[1]


def first_noun_sense(word: str, lemma: str):
    """A noun's first WordNet sense (a synset), by its lemma and else its form; None for a word WordNet does not
    know as a noun."""
    synsets = _synsets(lemma, "n") or _synsets(word, "n")
    return synsets[0] if synsets else None


def first_noun_lexname(word: str, lemma: str) -> str | None:
    """The WordNet lexicographer file of a noun's first sense ("noun.time", "noun.person", ...); None for a word
    WordNet does not know as a noun."""
    sense = first_noun_sense(word, lemma)
    return sense.lexname() if sense else None


#: verbs that, said of a thing, only say where it is: a bowl sitting, standing, resting or lying on a counter is a
#: bowl on the counter, a car parked or sitting on the street the same; of a person or an animal each is a posture
STATIC_POSITION_VERBS = frozenset(("sit", "stand", "lie", "lay", "rest", "set", "place", "park", "lean", "position",
                                   "situate", "locate"))


def static_position_subject(verb) -> bool:
    """Whether a verb (a spaCy token) of STATIC_POSITION_VERBS is said of a thing: its subject, or the noun it
    modifies ("A bowl of fruit sitting on a counter"), names neither a person, an animal, a plant nor a group by
    its first WordNet sense."""
    from foilforge.foilers.lang.attributes import names_a_living_thing

    if verb.lemma_.lower() not in STATIC_POSITION_VERBS:
        return False
    head = verb
    while head.dep_ == "conj" and not any(c.dep_ in ("nsubj", "nsubjpass") for c in head.children):
        head = head.head  # "The laptop is turned off and sitting on a desk": the first verb's subject
    subjects = [c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")]
    if head.dep_ in ("acl", "relcl") and head.head.pos_ in ("NOUN", "PROPN") and \
            all(s.tag_ in ("WDT", "WP") for s in subjects):
        subjects = [head.head]  # "A bowl of fruit sitting ...", "A city bus that is parked ...": the noun modified
    return bool(subjects) and all(names_a_living_thing(s.lower_, s.lemma_.lower()) is False for s in subjects)


def names_a_time(noun) -> bool:
    """Whether a noun (a spaCy token) names a time ("day", "night", "sunset"), its first WordNet sense a noun.time:
    moved by a swap it still says when ("People playing in the water on a sunny day" -> "People playing in a sunny
    day on the water" says what the caption says), and the phrase it trades places with says where as before."""
    return first_noun_lexname(noun.lower_, noun.lemma_.lower()) == "noun.time"


def lexical_relation(old: str, new: str, kind: str) -> str | None:
    """The entailment check's reason when `new` is the same word as `old`, a synonym, hypernym or hyponym of it
    (foilforge/entailment.py `word_refusal`: WordNet over its senses; `kind` noun, verb or adjective), else None."""
    from foilforge.entailment import WORDNET_POS, word_refusal

    return word_refusal(old, new, WORDNET_POS[kind])


# ---------------------------------------------------------------- the parse


def _span_tokens(doc, start: int, end: int) -> list:
    return [t for t in doc if t.idx < end and t.idx + len(t) > start and not t.is_space]


#: words that name a spatial relation however the parser tags them ("outside" and "inside" are adverbs there)
SPATIAL_WORDS = frozenset("""aboard above across against ahead along alongside amid among around at atop behind below
beneath beside between beyond by down from in inside into near nearby next off on onto opposite out outside over past
through toward towards under underneath up upon with within without""".split())
#: pronouns that stand for a participant as a noun phrase does ("while someone looks on")
PARTICIPANT_PRONOUNS = frozenset("someone somebody something everyone everybody anyone anybody nobody".split())


def is_verb(token, gerunds: bool = False) -> bool:
    """A verb by its part of speech or its tag; with `gerunds`, also an -ing word the parser took for a noun that
    WordNet knows as a verb ("a shopping bag standing.": where a relation is replaced, the word is the relation)."""
    if token.pos_ in ("VERB", "AUX") or token.tag_.startswith("VB"):
        return True
    return gerunds and token.tag_ == "NN" and token.lower_.endswith("ing") and bool(_synsets(token.lower_, "v"))


def kind_of(span_tokens, gerunds: bool = False) -> str | None:
    """What a stretch of parsed tokens is: "noun", "adjective", "verb", "preposition", or None (`gerunds`:
    `is_verb`'s)."""
    from foilforge.foilers.lang.attributes import class_of

    content = [t for t in span_tokens if t.pos_ not in ("DET", "PUNCT")]
    if not content:
        return None
    if any(t.pos_ == "VERB" or (is_verb(t, gerunds) and t.pos_ != "AUX") for t in content) or (
            all(t.pos_ in ("AUX", "PART", "ADP", "ADV") for t in content) and any(t.pos_ == "AUX" for t in content)):
        return "verb"
    if all(t.lower_ in SPATIAL_WORDS for t in content):
        return "preposition"
    if all(t.pos_ == "ADJ" or class_of(t.lower_) is not None for t in content) and len(content) == 1:
        return "adjective"
    if content[-1].pos_ in ("NOUN", "PROPN") and (
            all(t.pos_ in ("NOUN", "PROPN") for t in content) or _synsets(" ".join(t.lower_ for t in content), "n")):
        # a noun, a compound ("park bench") or a phrase WordNet names ("hot dog"): not a noun with a new adjective
        return "noun"
    if any(t.pos_ == "ADP" for t in content) and all(t.pos_ in ("ADP", "ADV", "PART", "ADJ", "NOUN") for t in content):
        return "preposition"
    if all(t.pos_ == "ADJ" for t in content):
        return "adjective"
    return None


def last_word(span_tokens) -> str:
    """The last word of a stretch, articles and punctuation aside (the adjective of "a red")."""
    content = [t for t in span_tokens if t.pos_ not in ("DET", "PUNCT")]
    return content[-1].lower_ if content else ""


def lemmas_of(doc) -> frozenset:
    """The lower-cased lemmas and words of a parsed text's content tokens."""
    return frozenset(w for t in doc if t.pos_ not in ("PUNCT", "DET", "SPACE") for w in (t.lemma_.lower(), t.lower_))


def nouns_of(doc) -> frozenset:
    return frozenset(t.lemma_.lower() for t in doc if t.pos_ in ("NOUN", "PROPN"))


class ExactEditChecker:
    """The checks of the module docstring over one spaCy pipeline (`nlp`); `parse` caches the texts it parsed."""

    def __init__(self, nlp):
        self.nlp = nlp
        self._docs: dict = {}

    def parse(self, text: str):
        doc = self._docs.get(text)
        if doc is None:
            doc = self._docs[text] = self.nlp(text)
        return doc

    def parse_all(self, texts: Iterable[str]) -> None:
        """Parse many texts in one batch (spaCy's pipe) before checking them one by one."""
        todo = sorted({t for t in texts if t not in self._docs})
        for text, doc in zip(todo, self.nlp.pipe(todo, batch_size=256)):
            self._docs[text] = doc

    def check(self, type_: str, caption: str, foil: str, edit: dict | None = None,
              image_texts: Iterable[str] = ()) -> str | None:
        """Why `foil` is not exactly an edit of `type_` of `caption` (a reason of the module docstring), or None.

        `edit`: the `{span, old, new}` the foil was made with, when known; `image_texts`: the other captions of
        the image (what an added or replacing word must not be)."""
        if type_ not in TYPES:
            raise ValueError(f"unknown edit type {type_!r}; one of {', '.join(TYPES)}")
        if edit is not None:
            reason = exact_edit_refusal(caption, foil, edit)
            if reason:
                return reason
        check = {"replace": self._replace, "swap": self._swap, "add": self._add}[type_.split("_")[0]]
        return check(type_, caption, foil, tuple(image_texts))

    # ---- replace

    def _replace(self, type_: str, caption: str, foil: str, image_texts: tuple) -> str | None:
        ct, ft = tokens(caption), tokens(foil)
        found = changes(ct, ft)
        if not found:
            return None  # the caption again: foilforge/validity.py refuses it
        if len(found) > 1:
            return REPLACE_MORE_THAN_ONE
        change = found[0]
        if change.tag != "replace":
            return REPLACE_NOT_REPLACEMENT
        old_words = [t for t in ct[change.i1:change.i2] if t[0] != "a"]
        new_words = [t for t in ft[change.j1:change.j2] if t[0] != "a"]
        if len(old_words) > MAX_REPLACED_WORDS or len(new_words) > MAX_REPLACED_WORDS:
            return REPLACE_TOO_LONG
        cdoc, fdoc = self.parse(caption), self.parse(foil)
        old_span = _span_tokens(cdoc, ct[change.i1][1], ct[change.i2 - 1][2])
        new_span = _span_tokens(fdoc, ft[change.j1][1], ft[change.j2 - 1][2])
        if type_ == "replace_rel":
            # a word the replacement shares with its neighbours belongs to the phrase ("next to" -> "close to")
            old_span, new_span = _widen_relation(cdoc, old_span), _widen_relation(fdoc, new_span)
        gerunds = type_ == "replace_rel"
        old_kind, new_kind = kind_of(old_span, gerunds), kind_of(new_span, gerunds)
        expected = {"replace_obj": ("noun",), "replace_att": ("adjective",),
                    "replace_rel": ("verb", "preposition")}[type_]
        if old_kind not in expected:
            return f"{type_}: the replaced words are not {' or '.join(expected)}s"
        if new_kind != old_kind:
            return f"replace: not the same part of speech ({old_kind} -> {new_kind or 'other'})"
        # the caption's words entail or paraphrase the foil's (foilforge/entailment.py: WordNet, the spatial table)
        from foilforge.edits import pair_refusal

        reason = pair_refusal(caption, foil, EDIT_KIND[old_kind])
        if reason:
            return reason
        if old_kind == "verb" and type_ == "replace_rel":
            from lemminflect import getLemma

            # the main verb of "is sitting", else an auxiliary read as the verb ("A cup is on ...")
            verb = next((t for t in old_span if t.pos_ == "VERB"), None) or \
                next((t for t in old_span if t.pos_ == "AUX"), None)
            # the foil's word by its form: its parse may read the new verb otherwise ("A surfboard standing ...")
            new_lemmas = {lemma for t in new_span if t.pos_ not in ("ADP", "DET", "PART", "PUNCT")
                          for lemma in getLemma(t.lower_, upos="VERB")}
            if verb is not None and static_position_subject(verb) and new_lemmas & STATIC_POSITION_VERBS:
                return REL_STATIC_POSITION
        if type_ == "replace_att":
            from foilforge.entailment import SYNONYM
            from foilforge.foilers.lang.attributes import (
                coat_colours_alike,
                described_nouns,
                misfit_age_words,
                same_attribute,
            )

            if same_attribute(last_word(old_span), last_word(new_span)):
                return SYNONYM
            adjective = new_span[-1]
            if adjective.lower_ in misfit_age_words(described_nouns(adjective)):
                return ATT_AGE_MISFIT
            # the nouns as the caption's parse reads them ("orange hair" may parse as a compound)
            if adjective.lower_ in coat_colours_alike(last_word(old_span), described_nouns(old_span[-1])):
                return ATT_COAT_COLOUR
        new_lemmas = {t.lemma_.lower() for t in new_span if t.pos_ not in ("DET", "ADP", "PUNCT", "AUX", "PART")}
        outside = frozenset(w for t in cdoc if not (old_span and old_span[0].i <= t.i <= old_span[-1].i)
                            and t.pos_ not in ("PUNCT", "DET") for w in (t.lemma_.lower(), t.lower_))
        if new_lemmas & outside:
            return REPLACE_NEW_IN_CAPTION
        if image_texts and new_lemmas & self._image_lemmas(image_texts):
            return REPLACE_NEW_ON_IMAGE
        return None

    # ---- swap

    def _keys(self, text: str) -> list[tuple[str, int, int]]:
        """Tokens keyed for a swap: verbs and auxiliaries by lemma (agreement may follow the moved subject)."""
        doc = self.parse(text)
        verbs = {(t.idx, t.idx + len(t)): t.lemma_.lower() for t in doc if t.pos_ in ("AUX", "VERB")}
        return [(verbs.get((s, e), word), s, e) for word, s, e in tokens(text)]

    def exchange(self, caption: str, foil: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The caption's two stretches (characters) whose exchange gives the foil (verbs by lemma, punctuation
        aside), or None when no exchange of two stretches does."""
        ck = [t for t in self._keys(caption) if not _punctuation([t[0]])]
        fk = [t for t in self._keys(foil) if not _punctuation([t[0]])]
        found = find_exchange([t[0] for t in ck], [t[0] for t in fk])
        if found is None:
            return None
        (a1, a2), (b1, b2) = found
        return (ck[a1][1], ck[a2 - 1][2]), (ck[b1][1], ck[b2 - 1][2])

    def exchanges(self, caption: str, foil: str, first: tuple[int, int], second: tuple[int, int]) -> bool:
        """True when the foil is the caption with the stretches `first` and `second` (characters, `first` before
        `second`) exchanged, as `same_text` and the swap's verb lemmas compare them."""
        keys = [t for t in self._keys(caption) if not _punctuation([t[0]])]

        def part(lo, hi):
            return [t[0] for t in keys if t[1] >= lo and t[2] <= hi]

        before, middle, after = part(0, first[0]), part(first[1], second[0]), part(second[1], len(caption))
        expected = before + part(*second) + middle + part(*first) + after
        return expected == [t[0] for t in self._keys(foil) if not _punctuation([t[0]])]

    def _swap(self, type_: str, caption: str, foil: str, image_texts: tuple) -> str | None:
        ck = [t for t in self._keys(caption) if not _punctuation([t[0]])]
        fk = [t for t in self._keys(foil) if not _punctuation([t[0]])]
        if Counter(t[0] for t in ck) != Counter(t[0] for t in fk):
            return SWAP_WORDS
        if [t[0] for t in ck] == [t[0] for t in fk]:
            return None  # the caption again: foilforge/validity.py refuses it
        exchange = self.exchange(caption, foil)
        if exchange is None:
            return SWAP_NOT_EXCHANGE
        cdoc = self.parse(caption)
        first, second = (_span_tokens(cdoc, s, e) for s, e in exchange)
        if type_ == "swap_obj":
            if not all(any(t.pos_ in ("NOUN", "PROPN") or t.lower_ in PARTICIPANT_PRONOUNS for t in part)
                       for part in (first, second)):
                return SWAP_OBJ_KIND
            heads = [_phrase_head(part) for part in (first, second)]
            if None not in heads and _same_words_swapped(*heads) and symmetric_pair(heads[0][0], heads[1][0]):
                return SWAP_OBJ_SYMMETRIC
            if any(head is not None and names_a_time(head[0]) for head in heads):
                return SWAP_OBJ_TIME
        elif not all(kind_of(part) == "adjective" for part in (first, second)):
            return SWAP_ATT_KIND
        return None

    # ---- add

    def _add(self, type_: str, caption: str, foil: str, image_texts: tuple) -> str | None:
        ct, ft = tokens(caption), tokens(foil)
        found = changes(ct, ft)
        if not found:
            return None  # the caption again: foilforge/validity.py refuses it
        if len(found) != 1 or found[0].tag != "insert":
            return ADD_NOT_ONE
        change = found[0]
        fdoc = self.parse(foil)
        added = _span_tokens(fdoc, ft[change.j1][1], ft[change.j2 - 1][2])
        words = [t for t in added if t.pos_ != "PUNCT"]
        if type_ == "add_att":
            if len(words) != 1 or kind_of(words) != "adjective":
                return ADD_ATT_KIND
            added_word = words[0].lower_
        else:
            heads = [t for t in words if t.pos_ in ("NOUN", "PROPN") and t.dep_ != "compound"]
            others = [t for t in words if t not in heads and not (t.dep_ == "compound" and t.pos_ in ("NOUN", "PROPN"))]
            if len(heads) != 1 or any(t.pos_ not in JOINING_POS for t in others):
                return ADD_OBJ_KIND
            added_word = heads[0].lemma_.lower()
        image = (caption, *image_texts)
        if added_word in self._image_lemmas(image):
            return ADD_ON_IMAGE
        if type_ == "add_att":
            from foilforge.foilers.lang.attributes import (
                coat_colours_alike,
                described_nouns,
                misfit_age_words,
                same_attribute,
            )

            if any(same_attribute(added_word, w) for w in self._image_lemmas(image)):
                return ADD_ON_IMAGE
            if coat_colours_alike(added_word, described_nouns(words[0])) & self._image_lemmas(image):
                return ADD_ON_IMAGE  # "a dog" -> "a red dog" where the image's captions call it brown
            if added_word in misfit_age_words(described_nouns(words[0])):
                return ATT_AGE_MISFIT
            return None
        for noun in sorted(self._image_nouns(image)):
            if lexical_relation(noun, added_word, "noun") is not None:
                return ADD_IMPLIED
        return None

    def _image_lemmas(self, texts: Iterable[str]) -> frozenset:
        return frozenset().union(*(lemmas_of(self.parse(t)) for t in texts))

    def _image_nouns(self, texts: Iterable[str]) -> frozenset:
        return frozenset().union(*(nouns_of(self.parse(t)) for t in texts))


def _phrase_head(span_tokens):
    """(the noun that heads an exchanged stretch, its head outside the stretch; the words before it in its phrase
    that the stretch leaves behind, articles aside), or None."""
    inside = {t.i for t in span_tokens}
    for token in span_tokens:
        if token.pos_ in ("NOUN", "PROPN") and (token.head.i not in inside or token.head.i == token.i):
            left_behind = [t.lower_ for t in token.subtree if t.i < token.i and t.i not in inside]
            return token, [w for w in left_behind if w not in ("a", "an", "the")]
    return None


def _same_words_swapped(first, second) -> bool:
    """Whether the exchange swaps two whole noun phrases: whatever the stretches leave before their nouns is the
    same on both ("a white truck" / "a white trailer"); a modifier left behind on one side only ("a large vase" ->
    "a large candle") moves what it says to the other noun, a change of its own."""
    return first[1] == second[1]


def _widen_relation(doc, span_tokens) -> list:
    """A changed stretch with the prepositions right beside it: "next" of "next to", "on" of "sitting on"."""
    if not span_tokens:
        return span_tokens
    first, last = span_tokens[0].i, span_tokens[-1].i
    while last + 1 < len(doc) and doc[last + 1].pos_ == "ADP" and doc[last + 1].dep_ != "prt":
        last += 1
    while first > 0 and doc[first - 1].pos_ == "ADP" and doc[first - 1].dep_ != "prt" and \
            all(t.pos_ in ("ADP", "ADV", "ADJ") for t in span_tokens):
        first -= 1
    return [t for t in doc[first:last + 1] if not t.is_space]


def find_exchange(a: Sequence[str], b: Sequence[str]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((a1, a2), (b1, b2)): `b` is `a` with a[a1:a2] and a[b1:b2] (a2 <= b1) exchanged, the shortest such
    stretches (reaching at most REACH tokens into the words both share at either end); None when no exchange of
    two stretches turns `a` into `b`."""
    n = len(a)
    if len(b) != n:
        return None
    start = 0
    while start < n and a[start] == b[start]:
        start += 1
    end = n
    while end > start and a[end - 1] == b[end - 1]:
        end -= 1
    best = None
    # the exchanged stretches may reach into the equal ends ("a man" <-> "a woman": the article is shared)
    for lo in range(start, max(start - REACH, 0) - 1, -1):
        for hi in range(end, min(end + REACH, n) + 1):
            mid_a, mid_b = a[lo:hi], b[lo:hi]
            m = len(mid_a)
            for i in range(1, m):
                for j in range(1, m - i + 1):
                    first, second, middle = mid_a[:i], mid_a[m - j:], mid_a[i:m - j]
                    if list(mid_b) == list(second) + list(middle) + list(first):
                        size = i + j
                        if best is None or size < best[0]:
                            best = (size, ((lo, lo + i), (lo + m - j, hi)))
    return best[1] if best is not None else None


def exact_edit_refusal(caption: str, foil: str, edit: dict) -> str | None:
    """Why the foil is not the caption with `edit["old"]` -> `edit["new"]` at `edit["span"]` (case, whitespace and
    a/an aside), or None."""
    start, end = edit["span"]
    if not same_text(caption[start:end], edit["old"]):
        return NOT_OLD
    if not same_text(foil, caption[:start] + edit["new"] + caption[end:]):
        return NOT_THE_EDIT
    return None


def duplicate_refusals(records: Sequence[dict]) -> dict[str, str]:
    """{record id: DUPLICATE} for every record after the first with the same image, caption and foil (compared
    as `same_text` does), in the given order."""
    seen, out = set(), {}
    for record in records:
        key = (record.get("image_file"), tuple(t[0] for t in tokens(record["caption"])),
               tuple(t[0] for t in tokens(record["foil"])))
        if key in seen:
            out[str(record["id"])] = DUPLICATE
        seen.add(key)
    return out


def record_refusals(records: Sequence[dict], type_: str, nlp, image_texts: dict | None = None) -> dict[str, str]:
    """{record id: reason} for the records that are not exactly an edit of `type_`: each record's own edit
    (`provenance.edit`, when it has one) and the type's checks, then one (caption, foil) per image.

    `image_texts`: {image_file: captions of the image}, what an added or replacing word must not be; default: the
    captions of the records of each image."""
    checker = ExactEditChecker(nlp)
    checker.parse_all([t for r in records for t in (r["caption"], r["foil"])])
    if image_texts is None:
        image_texts = {}
        for record in records:
            image_texts.setdefault(record.get("image_file"), [])
            if record["caption"] not in image_texts[record.get("image_file")]:
                image_texts[record.get("image_file")].append(record["caption"])
    out = {}
    for record in records:
        edit = (record.get("provenance") or {}).get("edit")
        others = [t for t in image_texts.get(record.get("image_file"), ()) if t != record["caption"]]
        reason = checker.check(type_, record["caption"], record["foil"], edit, others)
        if reason:
            out[str(record["id"])] = reason
    for record_id, reason in duplicate_refusals([r for r in records if str(r["id"]) not in out]).items():
        out[record_id] = reason
    return out


def proposal_refusal(checker: ExactEditChecker, proposal) -> str | None:
    """Why a proposer's answer (foilforge/proposers.py `Proposal`) is not exactly the edit its site asked for:
    its `old` is not the site's words; for a swap, its `new` is not the other phrase, the foil fails the swap checks
    or is not the exchange of the site's two phrases; otherwise the foil is not the caption with old -> new at the
    site, or fails its type's checks. None when it is the edit asked for."""
    site = proposal.site
    if not same_text(proposal.old, site.old):
        return ANSWER_OLD
    if site.second_span is None:
        edit = {"span": list(site.span), "old": site.old, "new": proposal.new}
        return checker.check(site.type, site.caption, proposal.foil, edit)
    if not same_text(proposal.new, site.second_old):
        return ANSWER_NEW
    reason = checker.check(site.type, site.caption, proposal.foil)
    if reason:
        return reason
    if not checker.exchanges(site.caption, proposal.foil, site.span, site.second_span):
        return SWAP_NOT_SITE
    return None
