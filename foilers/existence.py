"""Existence (VALSE §3.1, App. A.1): "There are no X" vs "There are X", from Visual7W "how many".

The question and its numeric answer become a statement (`foilers.lang.templates`);
answer 0 gives the negated caption ("There are no animals shown") whose foil
drops the negation ("There are animals shown"); answer N > 0 gives the positive
caption ("There are animals shown", or "There is a person" for N = 1) whose foil
is its negation. `choose` keeps as many zero_to_something records as
something_to_zero ones (VALSE's 50/50), optionally capped in total.
"""

from __future__ import annotations

import random

from foilforge.foiler import FOILERS, Foiler, RunContext
from foilforge.foilers.lang.templates import (
    changed_spans,
    check_how_many_sample,
    parse_count,
    statement_from_question,
)
from foilforge.records import Foil
from foilforge.schema import NonNegativeInt

ZERO_TO_SOMETHING = "zero_to_something"
SOMETHING_TO_ZERO = "something_to_zero"


def existence_pair(question: str, answer) -> tuple[str, str, int] | None:
    """(caption, foil, N) for one Visual7W question and answer, or None when either does not fit."""
    count = parse_count(answer)
    statement = statement_from_question(question) if count is not None else None
    if statement is None:
        return None
    caption = statement.existence(negated=count == 0, singular=count == 1)
    foil = statement.existence(negated=count != 0, singular=count == 1)
    if caption is None or foil is None:
        return None
    return caption, foil, count


def other_choices(sample: dict) -> list[int]:
    """The numeric wrong answers offered with the question (VALSE stores them as `classes_foil`)."""
    counts = (parse_count(choice) for choice in sample.get("multiple_choices") or ())
    return [count for count in counts if count is not None]


@FOILERS.register("existence.v1")
class ExistenceFoiler(Foiler):
    phenomenon = "existence"
    source = "visual7w"
    golden = (
        ({"id": "g1", "image_file": "v7w_1.jpg", "question": "How many animals are shown?", "answer": "0."},
         ("There are no animals shown.", "There are animals shown.")),
        ({"id": "g2", "image_file": "v7w_2.jpg", "question": "How many people are in the picture?", "answer": "Four."},
         ("There are people in the picture.", "There are no people in the picture.")),
        ({"id": "g3", "image_file": "v7w_3.jpg", "question": "How many elephants are there?", "answer": "1."},
         ("There is an elephant.", "There is no elephant.")),
        ({"id": "g4", "image_file": "v7w_4.jpg", "question": "What color is the car?", "answer": "Red."}, None),
    )

    def __init__(self, balance: bool = True, max_samples: NonNegativeInt | None = None):
        self.balance = balance
        self.max_samples = max_samples

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        check_how_many_sample(sample, "existence", path, index)

    def foils_for(self, sample: dict, rng: random.Random):
        pair = existence_pair(sample["question"], sample["answer"])
        if pair is None:
            return []
        caption, foil, count = pair
        caption_span, foil_span = changed_spans(caption, foil)
        extras = {
            "answer": count,
            "declarative_statement": caption,
            "declarative_statement_foils": [foil],
            "provenance_of_foils": ZERO_TO_SOMETHING if count == 0 else SOMETHING_TO_ZERO,
        }
        if "original_split" in sample:
            extras["split"] = sample["original_split"]
        return [Foil(caption=caption, foil=foil, classes=count, classes_foil=other_choices(sample),
                     caption_span=caption_span, foil_span=foil_span, extras=extras)]

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        rng = context.rng("select")
        if not self.balance:
            return _cap(foils, self.max_samples, rng)
        zero = [f for f in foils if f.extras["provenance_of_foils"] == ZERO_TO_SOMETHING]
        nonzero = [f for f in foils if f.extras["provenance_of_foils"] == SOMETHING_TO_ZERO]
        per_side = min(len(zero), len(nonzero))
        if self.max_samples is not None:
            per_side = min(per_side, self.max_samples // 2)
        return rng.sample(zero, per_side) + rng.sample(nonzero, per_side)


def _cap(foils: list[Foil], limit: int | None, rng: random.Random) -> list[Foil]:
    if limit is None or len(foils) <= limit:
        return foils
    return rng.sample(foils, limit)
