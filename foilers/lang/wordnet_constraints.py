"""WordNet constraint on action replacements (VALSE App. A.5).

A replacement verb is kept when it is a WordNet antonym of the original verb,
or else when it is neither a synonym, a hypernym nor a hyponym of it. Every
sense of both verbs counts: "jog" is rejected for "run" because one sense of
jog (jog.v.03) has run.v.01 as hypernym, even though other senses do not.
This keeps near-synonyms out of the foils (the release kept "preaches ->
speaks", where speak is a hypernym of preach).

WordNet comes from the project's own setup (scripts/setup_wordnet.py copies
Debian's wordnet-base into .venv/nltk_data); `nltk.download` is never called.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Iterable

from foilforge.errors import ConfigError

ANTONYM = "antonym"
SYNONYM = "synonym"
HYPERNYM = "hypernym"  # the replacement is more general than the original
HYPONYM = "hyponym"  # the replacement is more specific than the original
SAME = "same verb"
UNKNOWN = "not in WordNet"
UNRELATED = "unrelated"

#: relations that make a replacement too close to the original
REJECTING = (SAME, SYNONYM, HYPERNYM, HYPONYM)


@functools.lru_cache(maxsize=1)
def wordnet():
    """NLTK's WordNet reader, or a ConfigError telling how to install the data offline."""
    from nltk.corpus import wordnet as wn

    try:
        wn.ensure_loaded()
    except LookupError as err:
        raise ConfigError(
            "WordNet data for NLTK not found; run `make setup` (or `python scripts/setup_wordnet.py .venv/nltk_data`, "
            "which needs the Debian package wordnet-base). nltk.download is not used."
        ) from err
    return wn


def verb_lemma(word: str) -> str:
    """Base form of a verb given in any inflection ("preaches", "drinking" -> "preach", "drink")."""
    from lemminflect import getLemma

    word = word.strip().lower()
    lemmas = getLemma(word, upos="VERB")
    return lemmas[0] if lemmas else word


def _verb_synsets(lemma: str):
    return wordnet().synsets(lemma.replace(" ", "_"), pos="v")


def _hypernym_closure(synsets) -> set:
    closure = set()
    for synset in synsets:
        closure.update(synset.closure(lambda s: s.hypernyms()))
    return closure


def _antonyms(lemma: str, synsets) -> set[str]:
    names = set()
    for synset in synsets:
        for lem in synset.lemmas():
            if lem.name().lower() == lemma.replace(" ", "_"):
                names.update(a.name().lower() for a in lem.antonyms())
    return names


@functools.lru_cache(maxsize=65536)
def verb_relation(original: str, replacement: str) -> str:
    """How `replacement` relates to `original` in WordNet, over all verb senses.

    Both are verb base forms. Antonymy is checked first: an antonym is wanted
    even when another sense pair is also related (give/take share hypernyms).
    """
    original, replacement = original.lower(), replacement.lower()
    if original == replacement:
        return SAME
    orig_synsets, repl_synsets = _verb_synsets(original), _verb_synsets(replacement)
    if not orig_synsets or not repl_synsets:
        return UNKNOWN
    if replacement.replace(" ", "_") in _antonyms(original, orig_synsets):
        return ANTONYM
    if set(orig_synsets) & set(repl_synsets):
        return SYNONYM
    if set(repl_synsets) & _hypernym_closure(orig_synsets):
        return HYPERNYM
    if set(orig_synsets) & _hypernym_closure(repl_synsets):
        return HYPONYM
    return UNRELATED


def check_replacement(original: str, replacement: str) -> tuple[bool, str]:
    """(keep?, relation) for a proposed replacement; both words in any inflection.

    A verb WordNet does not know cannot be shown to be close, so it is kept
    (the relation says so and the audit counts it).
    """
    relation = verb_relation(verb_lemma(original), verb_lemma(replacement))
    return relation not in REJECTING, relation


def audit_pairs(pairs: Iterable[tuple[str, str]]) -> Counter:
    """Count the relation of each (original, replacement) pair; rejected ones are those in REJECTING."""
    return Counter(check_replacement(orig, repl)[1] for orig, repl in pairs)
