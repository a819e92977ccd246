"""What a foil changes in its caption, as edit records that checks judge.

An edit is `{type, span, old, new}`: `type` "replace" (old words -> new words), "insert" (no old words) or
"delete" (no new words); `span` the characters of `old` in the caption (`foil_span`: those of `new` in the foil).
A foiler knows where it edited (a record's provenance `caption_span` / `foil_span`); a released pair (VALSE,
SugarCrepe) does not, and `edits_of` then aligns the two texts word by word (difflib over lower-cased words and
punctuation marks). Inside a known span the alignment still splits the change into its parts: foil_it's "broccoli
with broccolis" -> "carrot with carrots" is two replacements, "broccoli" -> "carrot" and "broccolis" -> "carrots".

A check takes a pair's edits and the edit kind of the instrument ("relation", "noun", "verb", "adjective": what
sort of words the foiler replaces) and returns why the foil is refused, a short stable string counted by reason,
or None. `EDIT_CHECKS` holds them by name; `refusal` runs them in order. The entailment check
(foilforge/entailment.py: the caption's words entail or paraphrase the foil's) is the one every replace-type
foiler and `foilforge refilter` run; a check that the foil is exactly the edit asked for registers beside it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

#: words (with inner apostrophes: "man's") and single punctuation marks
TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")

#: the edit kinds a foiler may declare (its `edit_kind`): the sort of words its edits replace
EDIT_KINDS = ("relation", "noun", "verb", "adjective")


@dataclass(frozen=True)
class Edit:
    """One change of a caption into its foil: `caption[span] == old` becomes `foil[foil_span] == new`."""

    type: str
    span: tuple[int, int]
    old: str
    new: str
    foil_span: tuple[int, int]
    #: the caption's text before and after the span (a relation phrase may reach into them: "in front of")
    before: str = ""
    after: str = ""
    #: the head noun of the changed relation's object when the foiler parsed it ("table" in "sits at a table");
    #: None: foilforge.entailment reads it from `after`
    object: str | None = None

    def as_dict(self) -> dict:
        return {"type": self.type, "span": list(self.span), "old": self.old, "new": self.new}

    @property
    def punctuation_only(self) -> bool:
        return not any(ch.isalnum() for ch in self.old + self.new)


def changed_span(caption: str, foil: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The smallest character spans of caption and foil outside which the two are equal."""
    start = 0
    while start < min(len(caption), len(foil)) and caption[start] == foil[start]:
        start += 1
    end = 0
    while end < min(len(caption), len(foil)) - start and caption[-1 - end] == foil[-1 - end]:
        end += 1
    return (start, len(caption) - end), (start, len(foil) - end)


def _tokens(text: str, offset: int = 0) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), offset + m.start(), offset + m.end()) for m in TOKEN.finditer(text)]


def edits_of(caption: str, foil: str, caption_span=None, foil_span=None, object: str | None = None) -> list[Edit]:
    """The edits that turn `caption` into `foil`, left to right; within the spans when both are given.

    Words are compared lower-cased, so a change of case alone is no edit. `object` goes on every edit (a foiler
    that knows the changed relation's object passes it; see Edit.object)."""
    if caption_span is not None and foil_span is not None:
        (c0, c1), (f0, f1) = caption_span, foil_span
    else:
        c0, c1, f0, f1 = 0, len(caption), 0, len(foil)
    a, b = _tokens(caption[c0:c1], c0), _tokens(foil[f0:f1], f0)
    edits = []
    matcher = difflib.SequenceMatcher(a=[t[0] for t in a], b=[t[0] for t in b], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        start = a[i1][1] if i1 < i2 else (a[i1 - 1][2] if i1 else c0)
        end = a[i2 - 1][2] if i1 < i2 else start
        fstart = b[j1][1] if j1 < j2 else (b[j1 - 1][2] if j1 else f0)
        fend = b[j2 - 1][2] if j1 < j2 else fstart
        kind = "replace" if i1 < i2 and j1 < j2 else ("delete" if i1 < i2 else "insert")
        edits.append(Edit(kind, (start, end), caption[start:end], foil[fstart:fend], (fstart, fend),
                          before=caption[:start], after=caption[end:], object=object))
    return edits


# ---------------------------------------------------------------- checks

#: name -> check(edits, kind) -> refusal reason or None
EDIT_CHECKS: dict[str, Callable[[list[Edit], str | None], str | None]] = {}


def edit_check(name: str):
    """Register a check under `name` (a decorator)."""
    def register(function):
        EDIT_CHECKS[name] = function
        return function
    return register


def _load_checks() -> None:
    # the modules that register checks
    import foilforge.entailment  # noqa: F401


def check_names() -> tuple[str, ...]:
    _load_checks()
    return tuple(EDIT_CHECKS)


def refusal(edits: list[Edit], kind: str | None, checks: tuple[str, ...] = ("entailment",)) -> str | None:
    """The first reason one of `checks` refuses the edits for; None when every check accepts them."""
    _load_checks()
    for name in checks:
        reason = EDIT_CHECKS[name](edits, kind)
        if reason is not None:
            return reason
    return None


def pair_refusal(caption: str, foil: str, kind: str | None, caption_span=None, foil_span=None,
                 object: str | None = None, checks: tuple[str, ...] = ("entailment",)) -> str | None:
    """`refusal` of the edits that turn `caption` into `foil` (within the spans when given)."""
    return refusal(edits_of(caption, foil, caption_span, foil_span, object), kind, checks)


def record_refusal(record: dict, kind: str | None, checks: tuple[str, ...] = ("entailment",)) -> str | None:
    """`pair_refusal` of a foil record (its provenance spans when it has them)."""
    provenance = record.get("provenance") or {}
    spans = provenance.get("caption_span"), provenance.get("foil_span")
    if spans[0] is None or spans[1] is None:
        spans = (None, None)
    return pair_refusal(record["caption"], record["foil"], kind, *spans, checks=checks)

