"""WordNet constraint on action replacements (VALSE App. A.5), through the shared entailment check.

A replacement verb is kept when it is a WordNet antonym of the original verb,
or else when it is neither a synonym, a hypernym nor a hyponym of it. Every
sense of both verbs counts: "jog" is rejected for "run" because one sense of
jog (jog.v.03) has run.v.01 as hypernym, even though other senses do not.
This keeps near-synonyms out of the foils (the release kept "preaches ->
speaks", where speak is a hypernym of preach).

The rule is foilforge/entailment.py's for verbs (`lexical_relation(..., "v")`), the same one that refuses an
action_replacement foil after proposal: this module names its relations for the foiler's records
(`wordnet_relation`) and audits. WordNet comes from the project's own setup (scripts/setup_wordnet.py copies
Debian's wordnet-base into .venv/nltk_data); `nltk.download` is never called.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from foilforge.entailment import (
    ANTONYM,
    HYPERNYM_RELATION,
    HYPONYM_RELATION,
    SYNONYM_RELATION,
    UNKNOWN,
    UNRELATED,
    lexical_relation,
    verb_lemma,
    wordnet,
)
from foilforge.entailment import SAME as SAME_WORD_RELATION

SYNONYM = SYNONYM_RELATION
HYPERNYM = HYPERNYM_RELATION  # the replacement is more general than the original
HYPONYM = HYPONYM_RELATION  # the replacement is more specific than the original
SAME = "same verb"

#: relations that make a replacement too close to the original
REJECTING = (SAME, SYNONYM, HYPERNYM, HYPONYM)

__all__ = ["ANTONYM", "HYPERNYM", "HYPONYM", "REJECTING", "SAME", "SYNONYM", "UNKNOWN", "UNRELATED", "audit_pairs",
           "check_replacement", "verb_lemma", "verb_relation", "wordnet"]


def verb_relation(original: str, replacement: str) -> str:
    """How `replacement` relates to `original` in WordNet, over all verb senses (both base forms).

    Antonymy is checked first: an antonym is wanted even when another sense pair is also related (give/take share
    hypernyms)."""
    relation = lexical_relation(original.lower(), replacement.lower(), "v")
    return SAME if relation == SAME_WORD_RELATION else relation


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
