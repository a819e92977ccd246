"""Shared pieces of the word-order foilers (swap_obj, swap_att; Winoground, SugarCrepe swap-obj / swap-att).

A swap keeps the words and changes who does what or what has which property.
These helpers make the edits and check them:

* `apply_edits(text, edits)`: replace character spans (non-overlapping) at once;
* `content_lemmas(doc)`: the multiset of noun, adjective and numeral lemmas, which a
  swap must leave equal on both sides (spaCy's lemmas; "men" -> "man");
* `grammatical_swap(nlp, caption, foil)`: the foil's re-parse shows no more
  determiner-number / subject-verb agreement problems than the caption's, and
  its content lemmas are the caption's;
* `pair_swaps(records)`: Winoground pairs: two records whose captions are each
  other's foils (caption of image 1 = foil of image 2 and back) get one `pair_id`,
  so evaluate scores them with Winoground's text / image / group scores.
"""

from __future__ import annotations

import re
from collections import Counter

CONTENT_POS = ("NOUN", "PROPN", "ADJ", "NUM")


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied; spans must not overlap."""
    out, cursor = [], 0
    for start, end, new in sorted(edits):
        if start < cursor:
            raise ValueError(f"overlapping edits at {start}")
        out.append(text[cursor:start] + new)
        cursor = end
    return "".join(out) + text[cursor:]


def changed_span(caption: str, foil: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The smallest spans outside which caption and foil are equal."""
    start = 0
    while start < min(len(caption), len(foil)) and caption[start] == foil[start]:
        start += 1
    end = 0
    while end < min(len(caption), len(foil)) - start and caption[-1 - end] == foil[-1 - end]:
        end += 1
    return (start, len(caption) - end), (start, len(foil) - end)


def content_lemmas(doc) -> Counter:
    """Multiset of lower-cased lemmas of nouns, adjectives and numerals."""
    return Counter(t.lemma_.lower() for t in doc if t.pos_ in CONTENT_POS)


def grammatical_swap(nlp, caption_doc, foil: str, mass_nouns=None) -> tuple[bool, str]:
    """(ok, reason): the foil adds no agreement problem to the caption's and has its content lemmas
    (a re-parse that reads a moved word differently, "red" as a noun, rejects the swap: we cannot vouch for it)."""
    from foilers.lang.number import MASS_NOUNS, agreement_problems

    mass = MASS_NOUNS if mass_nouns is None else mass_nouns
    foil_doc = nlp(foil)
    if len(agreement_problems(foil_doc, mass)) > len(agreement_problems(caption_doc, mass)):
        return False, "agreement"
    if content_lemmas(foil_doc) != content_lemmas(caption_doc):
        return False, "content_words"
    return True, ""


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def pair_swaps(records: list[dict]) -> int:
    """Give records that swap each other's caption and foil one `pair_id` (Winoground pairs); returns the count."""
    by_caption: dict[str, list[dict]] = {}
    for record in records:
        by_caption.setdefault(_norm(record["caption"]), []).append(record)
    pairs = 0
    for record in sorted(records, key=lambda r: r["id"]):
        if record.get("pair_id") is not None:
            continue
        for other in by_caption.get(_norm(record["foil"]), []):
            if other is record or other.get("pair_id") is not None or _norm(other["foil"]) != _norm(record["caption"]):
                continue
            if other.get("image_file") == record.get("image_file"):
                continue
            pair_id = f"{record['id']}|{other['id']}"
            record["pair_id"], record["pair_member"] = pair_id, 0
            other["pair_id"], other["pair_member"] = pair_id, 1
            pairs += 1
            break
    return pairs
