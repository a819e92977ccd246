"""Inflection, articles and letter case: the one module the foilers and language helpers share.

* `match_case(template, word)`: `word` cased like `template` ("Cows" -> "People", "COWS" -> "PEOPLE");
* `indefinite_article(word)`: "a" or "an" by sound, through `inflect` ("an hourglass", "a unicycle",
  "an X-ray"), never by first letter;
* `NUMBER_WORDS` / `ZERO_WORDS`: cardinal words and their values (numerals in captions, Visual7W answers).
"""

from __future__ import annotations

import functools

#: cardinal number words (numerals in captions, counts in answers)
NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "hundred": 100, "dozen": 12,
}
#: answers that state a count of zero without a numeral ("None.", "No.")
ZERO_WORDS = {"none": 0, "no": 0}


def import_inflect():
    """The inflect module, imported with typeguard's `@typechecked` as a no-op.

    inflect checks the types of its methods' arguments at run time with typeguard, whose decorator re-reads and
    re-compiles inflect's source for each of its methods while inflect is imported: seconds of every stage
    process that imports it. The foilers pass it strings only, for which
    the checks never fail, so they are left out; every import of inflect in foilers/ goes through here.
    """
    import sys

    if "inflect" in sys.modules:
        return sys.modules["inflect"]
    import typeguard

    checked = typeguard.typechecked
    typeguard.typechecked = _unchecked
    try:
        import inflect
    finally:
        typeguard.typechecked = checked
    return inflect


def _unchecked(target=None, **_settings):
    """typeguard.typechecked's signature, doing nothing (`@typechecked` and `@typechecked(...)` alike)."""
    return _unchecked if target is None else target


@functools.lru_cache(maxsize=1)
def inflect_engine():
    return import_inflect().engine()


def match_case(template: str, word: str) -> str:
    """`word` with the capitalisation of `template` (Cows -> People, COWS -> PEOPLE, cows -> people)."""
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def indefinite_article(word: str) -> str:
    """"a" or "an" for `word` (or a phrase: its first word decides), by pronunciation."""
    return inflect_engine().a(word).split(" ", 1)[0]
