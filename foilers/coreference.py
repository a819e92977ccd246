"""Coreference (VALSE §3.6, App. A.6): "[caption]. [question]? [yes/no]." with the answer flipped.

A VisDial turn qualifies when its question holds a pronoun from `pronouns` and
its answer is a plain yes or no (`yes_answers` / `no_answers`, compared after
lower-casing and stripping punctuation). The text keeps the pronoun and its
antecedent intact; only the answer changes, so the foil is as fluent as the
caption. `choose` keeps at most `max_per_image` turns per image (VisDial has
ten per image; the release has one) and then as many "yes" as "no" records.
Standard = the train split, clean = the val split (params.yaml `source`).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict

from foilforge.errors import InputError
from foilforge.foiler import FOILERS, Foiler, RunContext
from foilforge.records import Foil
from foilforge.schema import PositiveInt

#: personal, demonstrative and possessive pronouns (VALSE Fig. 1 counts these in the questions)
DEFAULT_PRONOUNS = (
    "it", "its", "itself", "this", "that", "these", "those", "they", "them", "their", "theirs", "themselves",
    "he", "him", "his", "himself", "she", "her", "hers", "herself", "you", "your", "we", "our", "us", "i", "me", "my",
)
REQUIRED_FIELDS = ("id", "image_file", "caption", "question", "answer")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def yes_no(answer: str, yes_answers, no_answers) -> str | None:
    normalised = " ".join(_words(answer))
    if normalised in yes_answers:
        return "yes"
    if normalised in no_answers:
        return "no"
    return None


def dialogue_text(caption: str, question: str, answer: str) -> str:
    """VALSE's "[Caption]. [Question]? [yes/no]." (VisDial's lower case kept, as released)."""
    return f"{caption.strip().rstrip('.')}. {question.strip().rstrip('?').strip()}? {answer}."


@FOILERS.register("coreference.v1")
class CoreferenceFoiler(Foiler):
    phenomenon = "coreference"
    source = "visdial_train"
    golden = (
        ({"id": "g1", "image_file": "COCO_train2014_000000000001.jpg", "caption": "a man riding a horse on a beach",
          "question": "is he wearing a hat", "answer": "no"},
         ("a man riding a horse on a beach. is he wearing a hat? no.",
          "a man riding a horse on a beach. is he wearing a hat? yes.")),
        ({"id": "g2", "image_file": "COCO_train2014_000000000002.jpg", "caption": "a kitchen with a stove",
          "question": "is the stove white", "answer": "yes"}, None),
        ({"id": "g3", "image_file": "COCO_train2014_000000000003.jpg", "caption": "a cat on a bed",
          "question": "is it sleeping", "answer": "i think so"}, None),
        ({"id": "g4", "image_file": "COCO_train2014_000000000004.jpg", "caption": "two dogs playing in the snow.",
          "question": "are they on a leash?", "answer": "Yes"},
         ("two dogs playing in the snow. are they on a leash? yes.",
          "two dogs playing in the snow. are they on a leash? no.")),
    )

    def __init__(self, pronouns: tuple = DEFAULT_PRONOUNS, yes_answers: tuple = ("yes",), no_answers: tuple = ("no",),
                 balance: bool = True, max_per_image: PositiveInt | None = 1,
                 max_samples: PositiveInt | None = None):
        self.pronouns = pronouns
        self.yes_answers = yes_answers
        self.no_answers = no_answers
        self.balance = balance
        self.max_per_image = max_per_image
        self.max_samples = max_samples

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        for field in REQUIRED_FIELDS:
            if field not in sample:
                raise InputError(path, "missing field (coreference needs a VisDial caption, question and answer)",
                                 record=index, field=field)
            if field != "id" and not isinstance(sample[field], str):
                raise InputError(path, f"expected a string, got {type(sample[field]).__name__}", record=index,
                                 field=field)

    def has_pronoun(self, question: str) -> bool:
        pronouns = {p.lower() for p in self.pronouns}
        return any(word in pronouns for word in _words(question))

    def foils_for(self, sample: dict, rng: random.Random):
        answer = yes_no(sample["answer"], self.yes_answers, self.no_answers)
        if answer is None or not self.has_pronoun(sample["question"]):
            return []
        flipped = "no" if answer == "yes" else "yes"
        caption = dialogue_text(sample["caption"], sample["question"], answer)
        foil = dialogue_text(sample["caption"], sample["question"], flipped)
        # only the final answer word changes
        caption_span = (len(caption) - len(answer) - 1, len(caption) - 1)
        foil_span = (len(foil) - len(flipped) - 1, len(foil) - 1)
        extras = {"only_caption": sample["caption"].strip().rstrip(".")}
        return [Foil(caption=caption, foil=foil, classes=answer, classes_foil=flipped,
                     caption_span=caption_span, foil_span=foil_span, extras=extras)]

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        rng = context.rng("select")
        records = self._per_image(foils, context.samples, rng)
        if self.balance:
            yes = [f for f in records if f.classes == "yes"]
            no = [f for f in records if f.classes == "no"]
            per_side = min(len(yes), len(no))
            if self.max_samples is not None:
                per_side = min(per_side, self.max_samples // 2)
            return rng.sample(yes, per_side) + rng.sample(no, per_side)
        if self.max_samples is not None and len(records) > self.max_samples:
            return rng.sample(records, self.max_samples)
        return records

    def _per_image(self, foils: list[Foil], samples: dict, rng: random.Random) -> list[Foil]:
        if self.max_per_image is None:
            return foils
        by_image = defaultdict(list)
        for foil in foils:
            by_image[samples[foil.sample_id].get("image_file", foil.sample_id)].append(foil)
        kept = []
        for image in sorted(by_image):
            turns = by_image[image]
            kept.extend(turns if len(turns) <= self.max_per_image else rng.sample(turns, self.max_per_image))
        return kept
