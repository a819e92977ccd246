"""BD2BB's 4-code argument structure of an action, from a spaCy dependency parse.

BD2BB (Pezzelle et al. 2021, §3 and App. "Numeric 4-Code Annotation") annotates
each action with:

* code1: the main verb ("swing" in "I will swing the racket to hit the ball");
* code2: the nouns in object / complement position of the main verb ("racket");
* code3: the verb of the coordinated or subordinated clause, if any ("hit");
* code4: the nouns in complement position of that second verb ("ball").

The authors used the Stanford parser and fixed its output by hand; here the
parse is spaCy's (`spacy_model`, loaded through foilforge.nlp), with no manual
pass. Words are lemmas, lower-cased. code2/code4 are lists because an action
can name several objects ("give the child food" -> child, food); the decoy
rules compare sets (no shared noun: code2 ∪ code4; no shared verb: code1 ∪ code3).

Actions are usually bare verb phrases ("ride an elephant"); parsed alone, a
sentence-initial verb is often tagged as a noun, so a bare phrase is parsed as
"I will <action>" and only the action's own tokens are coded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# a subject already present: parse the action as it is
_SUBJECT_STARTS = ("i ", "i'", "we ", "my ", "let ")
_PREFIX = "I will "
_NOUN_POS = ("NOUN", "PROPN")


@dataclass(frozen=True)
class ActionCodes:
    code1: str | None
    code2: tuple[str, ...] = field(default_factory=tuple)
    code3: str | None = None
    code4: tuple[str, ...] = field(default_factory=tuple)

    @property
    def verbs(self) -> frozenset[str]:
        return frozenset(v for v in (self.code1, self.code3) if v)

    @property
    def nouns(self) -> frozenset[str]:
        return frozenset(self.code2) | frozenset(self.code4)

    def as_dict(self) -> dict:
        return {"code1": self.code1, "code2": list(self.code2), "code3": self.code3, "code4": list(self.code4)}


def parse_text(action: str) -> tuple[str, int]:
    """The text to parse and the character offset where the action starts in it."""
    stripped = action.strip()
    if stripped.lower().startswith(_SUBJECT_STARTS):
        return stripped, 0
    return _PREFIX + stripped, len(_PREFIX)


def _lemma(token) -> str:
    if token.pos_ in ("VERB", "AUX"):
        # spaCy's small-model lemmatizer gives "riding" -> "rid"; lemminflect's verb table does not
        from lemminflect import getLemma

        lemmas = getLemma(token.text.lower(), upos="VERB")
        if lemmas:
            return lemmas[0].lower()
    return (token.lemma_ or token.text).lower()


def _same(a, b) -> bool:
    """spaCy makes a new Token object on every access, so identity must be compared by position."""
    return a is not None and b is not None and a.i == b.i


def _nearest_verb_ancestor(token):
    for ancestor in token.ancestors:
        if ancestor.pos_ in ("VERB", "AUX") and ancestor.dep_ != "aux":
            return ancestor
    return None


def _main_verb(tokens):
    """The root when it is a verb, else the first verb of the action (fragments like 'zoo trip')."""
    for token in tokens:
        if token.dep_ == "ROOT" and token.pos_ in ("VERB", "AUX"):
            return token
    for token in tokens:
        if token.pos_ == "VERB":
            return token
    return None


def codes_from_doc(doc, start_char: int = 0) -> ActionCodes:
    """Codes of a parsed action; tokens before `start_char` (the added 'I will') are ignored."""
    tokens = [t for t in doc if t.idx >= start_char]
    main = _main_verb(tokens)
    second = None
    for token in tokens:
        # the first other verb whose clause hangs off the main verb (xcomp, advcl, conj, acl ...)
        if token.pos_ == "VERB" and not _same(token, main) and token.dep_ != "aux" and _same(_nearest_verb_ancestor(token), main):
            second = token
            break
    code2, code4 = [], []
    for token in tokens:
        if token.pos_ not in _NOUN_POS:
            continue
        governor = _nearest_verb_ancestor(token)
        target = code2 if governor is None or _same(governor, main) else code4
        lemma = _lemma(token)
        if lemma not in target:
            target.append(lemma)
    return ActionCodes(
        code1=_lemma(main) if main is not None else None,
        code2=tuple(code2),
        code3=_lemma(second) if second is not None else None,
        code4=tuple(code4),
    )


def action_codes(actions: list[str], nlp, *, batch_size: int = 256, progress: bool = False) -> list[ActionCodes]:
    """Codes for every action, parsed in batches with nlp.pipe."""
    prepared = [parse_text(a) for a in actions]
    docs = nlp.pipe((text for text, _ in prepared), batch_size=batch_size)
    if progress:
        from tqdm import tqdm

        docs = tqdm(docs, total=len(actions), desc="parse actions", unit="action")
    return [codes_from_doc(doc, offset) for doc, (_, offset) in zip(docs, prepared)]
