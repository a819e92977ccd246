"""Counting (VALSE §3.3, App. A.3): "There are exactly N X ..." with the numeral replaced.

The Visual7W question and its numeric answer become a statement
(`foilers.lang.templates`) rendered with "exactly N" and agreement for N ("There is
exactly 1 tomato", "There are exactly 0 tomatoes"); mass and plural-only nouns
are skipped (they cannot be counted with a numeral).

Which numbers captions and foils may take is the instrument (VALSE App. A.3):

* balanced:      captions and foils from the same classes, at most
                 `max_per_class` captions per class, foil classes a permutation
                 of the caption classes (so the two histograms are identical);
* adversarial:   captions N >= 4, foils in 0..3 (spread evenly);
* small numbers: captions and foils in 0..3, histograms identical.

All three are `counting.v1` with different `caption_*` / `foil_*` bounds. Foil
numbers are chosen at instrument level in `choose` (a per-sample choice cannot
balance histograms); `foils_for` proposes a provisional one.
`class_histograms(records)` gives the caption and foil histograms (the bias
stage reads the same `classes` / `classes_foil` fields).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, defaultdict

from foilforge.errors import ConfigError
from foilforge.foiler import FOILERS, Foiler, RunContext
from foilforge.foilers.lang.templates import (
    Statement,
    changed_spans,
    check_how_many_sample,
    parse_count,
    statement_from_question,
)
from foilforge.records import Foil
from foilforge.schema import NonNegativeInt, PositiveInt


def class_histograms(records: list[dict]) -> dict[str, dict[int, int]]:
    """{"caption": {class: count}, "foil": {class: count}} over counting records, classes sorted."""
    captions = Counter(r["classes"] for r in records)
    foils = Counter(r["classes_foil"] for r in records)
    return {"caption": dict(sorted(captions.items())), "foil": dict(sorted(foils.items()))}


def _in_range(value: int, low: int, high: int | None) -> bool:
    return value >= low and (high is None or value <= high)


def derange_classes(classes: list[int], rng: random.Random) -> list[int] | None:
    """A shuffle of `classes` with no position keeping its value (same histogram, every foil differs).

    Exists iff no value fills more than half the positions; None otherwise.
    """
    n = len(classes)
    if n == 0:
        return []
    if max(Counter(classes).values()) * 2 > n:
        return None
    foils = list(classes)
    rng.shuffle(foils)
    for i in range(n):
        if foils[i] != classes[i]:
            continue
        j = _swap_partner(i, classes, foils, rng)
        if j is None:
            return _rotation(classes, rng)
        foils[i], foils[j] = foils[j], foils[i]
    return foils


def _swap_partner(i: int, classes: list[int], foils: list[int], rng: random.Random) -> int | None:
    """A position j whose swap with i leaves neither i nor j a fixed point (random probes, then a scan)."""
    def fits(j: int) -> bool:
        return foils[j] != classes[i] and classes[j] != foils[i]

    for _ in range(32):  # cheap on large inputs, where most positions fit
        j = rng.randrange(len(classes))
        if fits(j):
            return j
    partners = [j for j in range(len(classes)) if fits(j)]
    return rng.choice(partners) if partners else None


def _rotation(classes: list[int], rng: random.Random) -> list[int]:
    """The textbook derangement of a multiset: sort by value, shift by the largest class size."""
    order = sorted(range(len(classes)), key=lambda i: (classes[i], rng.random()))
    shift = max(Counter(classes).values())
    foils = [0] * len(classes)
    for position, index in enumerate(order):
        foils[index] = classes[order[(position + shift) % len(order)]]
    return foils


@FOILERS.register("counting.v1")
class CountingFoiler(Foiler):
    phenomenon = "counting"
    source = "visual7w"
    golden = (
        ({"id": "g1", "image_file": "v7w_1.jpg", "question": "How many tomatoes are on the plate?", "answer": "1.",
          "multiple_choices": ["0.", "2.", "3."]},
         ("There is exactly 1 tomato on the plate.", "There are exactly 0 tomatoes on the plate.")),
        ({"id": "g2", "image_file": "v7w_2.jpg", "question": "How many signs are there?", "answer": "Three.",
          "multiple_choices": ["One.", "Two.", "Four."]},
         ("There are exactly 3 signs.", "There is exactly 1 sign.")),
        ({"id": "g3", "image_file": "v7w_3.jpg", "question": "How many people can be seen?", "answer": "2",
          "multiple_choices": ["3", "4", "5"]},
         ("Exactly 2 people can be seen.", "Exactly 3 people can be seen.")),
        ({"id": "g4", "image_file": "v7w_4.jpg", "question": "Why is the man smiling?", "answer": "He is happy."},
         None),
    )

    def __init__(self, caption_min: NonNegativeInt = 0, caption_max: int | None = None, foil_min: NonNegativeInt = 0,
                 foil_max: int | None = None, max_per_class: PositiveInt | None = None, max_number: int | None = 30):
        self.caption_min = caption_min
        self.caption_max = caption_max
        self.foil_min = foil_min
        self.foil_max = foil_max
        self.max_per_class = max_per_class
        self.max_number = max_number

    # ---- per sample
    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        check_how_many_sample(sample, "counting", path, index)

    def check(self) -> None:
        if self.foil_max is not None and self.foil_max < self.foil_min:
            raise ConfigError(f"foil_max {self.foil_max} < foil_min {self.foil_min}")
        if self.caption_max is not None and self.caption_max < self.caption_min:
            raise ConfigError(f"caption_max {self.caption_max} < caption_min {self.caption_min}")

    def _foil_range(self) -> list[int]:
        high = self.foil_max if self.foil_max is not None else self.max_number
        return list(range(self.foil_min, (high if high is not None else 30) + 1))

    def foils_for(self, sample: dict, rng: random.Random):
        count = parse_count(sample["answer"])
        if count is None or not _in_range(count, self.caption_min, self.caption_max):
            return []
        if self.max_number is not None and count > self.max_number:
            return []
        statement = statement_from_question(sample["question"])
        caption = statement.counting(count) if statement else None
        if caption is None:
            return []
        candidates = [n for n in self._foil_range() if n != count]
        if not candidates:
            return []
        # provisional (`choose` balances the foil classes): Visual7W's own wrong answers when they fit
        offered = [n for n in (parse_count(c) for c in sample.get("multiple_choices") or ()) if n in candidates]
        foil_count = offered[0] if offered else rng.choice(candidates)
        foil = self._foil(statement, count, foil_count, sample)
        foil.internal["statement"] = statement  # `choose` re-renders the foil with the balanced number
        return [foil]

    def _foil(self, statement: Statement, count: int, foil_count: int, sample: dict | None = None) -> Foil:
        caption = statement.counting(count)
        foil = statement.counting(foil_count)
        caption_span, foil_span = changed_spans(caption, foil)
        extras = {"answer": count}
        if sample is not None and "original_split" in sample:
            extras["split"] = sample["original_split"]
        return Foil(caption=caption, foil=foil, classes=count, classes_foil=foil_count,
                    caption_span=caption_span, foil_span=foil_span, extras=extras)

    # ---- instrument level
    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        rng = context.rng("select")
        foils = self._cap_per_class(foils, rng)
        same_classes = (self.caption_min, self.caption_max) == (self.foil_min, self.foil_max)
        if same_classes:
            foil_classes = derange_classes([f.classes for f in foils], rng)
            while foil_classes is None:  # one class holds more than half: drop its surplus
                foils = self._drop_surplus(foils, rng)
                foil_classes = derange_classes([f.classes for f in foils], rng)
        else:
            foil_classes = self._spread(foils, rng)
        return [self._with_foil_count(foil, foil_count) for foil, foil_count in zip(foils, foil_classes)
                if foil_count is not None]

    def _cap_per_class(self, foils: list[Foil], rng: random.Random) -> list[Foil]:
        if self.max_per_class is None:
            return foils
        position = {id(f): i for i, f in enumerate(foils)}
        by_class = defaultdict(list)
        for foil in foils:
            by_class[foil.classes].append(foil)
        kept = []
        for value in sorted(by_class):
            group = by_class[value]
            kept.extend(group if len(group) <= self.max_per_class else rng.sample(group, self.max_per_class))
        return sorted(kept, key=lambda f: position[id(f)])

    @staticmethod
    def _drop_surplus(foils: list[Foil], rng: random.Random) -> list[Foil]:
        counts = Counter(f.classes for f in foils)
        value, size = counts.most_common(1)[0]
        keep_size = len(foils) - size  # the dominant class may fill at most half
        group = [f for f in foils if f.classes == value]
        keep = {id(f) for f in rng.sample(group, keep_size)}
        return [f for f in foils if f.classes != value or id(f) in keep]

    def _spread(self, foils: list[Foil], rng: random.Random) -> list[int | None]:
        """Foil classes spread evenly over the foil range, never equal to the caption class."""
        values = self._foil_range()
        order = list(range(len(foils)))
        rng.shuffle(order)
        chosen: list[int | None] = [None] * len(foils)
        for position, index in enumerate(order):
            choices = values[position % len(values):] + values[: position % len(values)]
            chosen[index] = next((v for v in choices if v != foils[index].classes), None)
        return chosen

    def _with_foil_count(self, foil: Foil, foil_count: int) -> Foil:
        rendered = self._foil(foil.internal["statement"], foil.classes, foil_count)
        return dataclasses.replace(foil, foil=rendered.foil, classes_foil=foil_count,
                                   caption_span=rendered.caption_span, foil_span=rendered.foil_span)
