"""Preposition spans in captions: where a spatial relation can be foiled, and which spans are attested.

A *preposition span* is a run of one or more consecutive prepositions in a
spaCy parse ("on", "out of", "up onto"), as VALSE App. A.4 collected them, with
three exclusions that VALSE lacked:

* verb particles: a token tagged `RP` or attached as `prt` is never part of a
  span ("The white laptop is turned off", "A man picks up a box": turning
  "off" into "on" changes the verb, not a spatial relation);
* dangling prepositions: the span's last word must govern an object (`pobj`
  or `pcomp`), so predicative uses ("The lights are on.") are left alone;
* non-spatial prepositions: a span whose words are all in `non_spatial`
  ("of", "with", "for", ... see DEFAULT_NON_SPATIAL), or whose whole text is
  listed there ("up of" from "made up of"), is dropped; other spans with a
  non-spatial word ("out of") are kept.

Two more than VALSE: a run followed by a bare part noun and "of" ("on top of",
"in front of", "in back of": COMPLEX_PREPOSITION_NOUNS) is one span, the object
that of "of" (spaCy parses "top" as the object of "on", so the run alone was
"on", and replacing it wrote "to top of large waves"); and a run whose first
word hangs on the word before it in PHRASE_HEADS takes that word in ("next to",
"close to": the run alone was "to", and replacing it wrote "right next on top of
the sink").

The *attested list* is corpus-level: the lower-cased span texts with their
counts over all captions of the input (computed once per run, in the foiler's
`corpus_pass`), or read from a JSON file `{span: count}` made by `attested_spans`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

# Prepositions that head non-spatial relations in COCO captions (counted on the
# 2017 val captions: "of" 11.6k, "with" 7.8k, "for" 0.6k, "as" 0.2k, the
# rest rarer): part-whole / quantity ("a bunch of"), accompaniment and
# instrument ("a man with a hat"), purpose ("waiting for a bus"), comparison,
# time. Spatial/directional ones ("on", "in", "at", "to", "from", "by", "off",
# "up", "down", "out") are kept.
DEFAULT_NON_SPATIAL = (
    "of", "with", "without", "for", "as", "like", "than", "about", "during", "after", "before", "since",
    "until", "till", "because", "per", "via", "despite", "including", "except", "unlike", "while", "if",
    "that", "whether", "so",
    # multi-word spans that are not spatial: "made up of" (the particle "up" parsed as a preposition),
    # "along with" (accompaniment)
    "up of", "along with",
)

# dependency labels of a preposition's object: the relation has a relatum
OBJECT_DEPS = ("pobj", "pcomp")
#: nouns that make one preposition with the run before them and "of" after them, with no determiner between
#: ("on top of", "in front of", "in back of"); with one ("on the side of") the noun is a place of its own
COMPLEX_PREPOSITION_NOUNS = frozenset(("top", "front", "back"))
#: words that make one preposition with the run after them ("next to", "close to", "ahead of", "adjacent to")
PHRASE_HEADS = frozenset(("next", "close", "ahead", "adjacent"))


@dataclass(frozen=True)
class PrepositionSpan:
    """A preposition span of a caption: caption[start:end] == text (original casing)."""

    start: int
    end: int
    text: str
    #: the span's object noun with its compound modifiers, lower case ("kitchen table" in "at the kitchen table");
    #: None for a clause (pcomp)
    object: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """The attested-list form: lower case, single spaces."""
        return normalise_span(self.text)

    @property
    def words(self) -> int:
        return len(self.text.split())


def normalise_span(text: str) -> str:
    return " ".join(text.lower().split())


def _is_preposition(token) -> bool:
    return token.pos_ == "ADP" and token.tag_ != "RP" and token.dep_ != "prt"


def _runs(doc) -> Iterable[list]:
    run: list = []
    for token in doc:
        if _is_preposition(token):
            run.append(token)
            continue
        if run:
            yield run
        run = []
    if run:
        yield run


def _object_of(preposition):
    """The object a preposition governs ("pobj" or "pcomp"), or None."""
    return next((child for child in preposition.children if child.dep_ in OBJECT_DEPS), None)


def _complex_preposition_of(run: list, relatum):
    """(the "of", its object) that make `run` and its object one preposition ("on" + "top" + "of" in "on top of
    the bed"), or None: the object is a bare noun of COMPLEX_PREPOSITION_NOUNS right after the run, and "of" right
    after it governs an object of its own."""
    doc = relatum.doc
    if relatum.i != run[-1].i + 1 or relatum.lower_ not in COMPLEX_PREPOSITION_NOUNS or relatum.i + 1 >= len(doc):
        return None
    of = doc[relatum.i + 1]
    obj = _object_of(of) if of.lower_ == "of" and of.head.i == relatum.i else None
    return None if obj is None else (of, obj)


def preposition_spans(doc, non_spatial: Iterable[str] = DEFAULT_NON_SPATIAL) -> list[PrepositionSpan]:
    """The spatial preposition spans of one parsed caption, left to right."""
    excluded = {normalise_span(w) for w in non_spatial}
    spans = []
    for run in _runs(doc):
        if all(token.lower_ in excluded for token in run) or normalise_span(" ".join(t.text for t in run)) in excluded:
            continue
        relatum = _object_of(run[-1])
        if relatum is None:
            continue
        last, relatum = _complex_preposition_of(run, relatum) or (run[-1], relatum)
        first = run[0]
        if first.i > 0 and first.head.i == first.i - 1 and first.head.lower_ in PHRASE_HEADS:
            first = first.head
        start, end = first.idx, last.idx + len(last.text)
        # the object noun with its compound modifiers ("cutting board", "home plate"), lower case
        obj = " ".join([c.lower_ for c in relatum.lefts if c.dep_ == "compound"] + [relatum.lower_]) \
            if relatum.dep_ == "pobj" else None
        spans.append(PrepositionSpan(start, end, doc.text[start:end], obj))
    return spans


def parse(texts: list[str], nlp, progress: bool = False) -> list:
    """spaCy docs for `texts`, batched; the components spans do not need are switched off."""
    disable = [name for name in ("ner", "lemmatizer") if name in nlp.pipe_names]
    docs = nlp.pipe(texts, batch_size=256, disable=disable)
    if progress:
        from tqdm import tqdm

        docs = tqdm(docs, total=len(texts), desc="parse captions", unit="caption")
    return list(docs)


def attested_spans(docs, non_spatial: Iterable[str] = DEFAULT_NON_SPATIAL) -> Counter:
    """Corpus-level counts of every preposition span (lower-cased) over parsed captions."""
    counts: Counter = Counter()
    non_spatial = tuple(non_spatial)
    for doc in docs:
        counts.update(span.key for span in preposition_spans(doc, non_spatial))
    return counts


def read_attested(path) -> Counter:
    """A JSON file {span: count} (as written by `write_attested`)."""
    from foilforge.errors import InputError
    from foilforge.io import read_json

    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object {{span: count}}, got {type(data).__name__}")
    counts: Counter = Counter()
    for span, count in data.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(path, f"count must be a non-negative integer, got {count!r:.40}", record=span, field="count")
        counts[normalise_span(span)] += count
    return counts


def write_attested(path, counts: Counter) -> None:
    from foilforge.io import write_json

    write_json(path, dict(sorted(counts.items())))
