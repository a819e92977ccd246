"""Visual7W "how many" answers: the same counted phrase, answered with the foil's number on another image.

For a record built from the question "How many dogs are on the beach?" (answer 3):

* existence: a caption from answer 0 ("There are no dogs on the beach.") pairs with an image whose
  same question is answered > 0, and a caption from N > 0 with an image answered 0;
* counting: "There are exactly 3 dogs ..." with foil "exactly 2" pairs with an image answered 2.

"The same counted phrase" is the statement the templates build from the question (foilers/lang/templates.py:
frame, noun, modifiers, what follows it), with the phrases that name the whole picture ("shown", "in the
picture", "visible") taken as equal to none. The partner's answer differs from the caption's, so the caption is
false of it; a partner image with another answer to the same phrase that agrees with the caption is refused.

The evidence is the partner's answer: one claim (the counted phrase and the foil's number) stated by that QA
annotation, so a partner is fully supported by construction (`basis: annotation`).
"""

from __future__ import annotations

import re
from collections import defaultdict

from foilforge.foilers.lang.templates import parse_count, statement_from_question
from foilforge.groups import ANNOTATION, Claim
from foilforge.pairing import PAIRERS, Pairer, Partner, text_key

# tails that say only "in this picture": equal to no tail at all
_SCENE = re.compile(r"^(?:(?:shown|visible|pictured|present|seen|depicted|there|here|displayed)\s*)*"
                    r"(?:(?:in|on|within) (?:the|this) (?:picture|photo|photograph|image|pic|scene|shot|frame|photo shown)"
                    r"(?:\s+(?:shown|here))?)?$")


def scene_free(text: str) -> str:
    """`text` less a tail that only names the picture ("There are dogs shown" == "There are dogs")."""
    words = text_key(text)
    for phrase in ("shown", "visible", "pictured", "present", "seen", "depicted", "here", "displayed",
                   "in the picture", "in this picture", "in the photo", "in this photo", "in the image",
                   "in this image", "in the photograph", "in this photograph", "in the scene", "in the pic",
                   "in the shot", "in the frame"):
        if words.endswith(" " + phrase):
            return scene_free(words[: -len(phrase) - 1])
    return words


def counted_phrase(question: str) -> tuple | None:
    """What a "how many" question counts, as a comparable key (None when the templates cannot read it)."""
    statement = statement_from_question(question)
    return None if statement is None else statement_key(statement)


def statement_key(statement) -> tuple:
    """A statement's counted phrase as a comparable key: frame, noun, modifiers, what follows (a tail that only
    names the picture counts as none), verb, what precedes, tense."""
    tail = "" if _SCENE.match(text_key(statement.tail)) else scene_free(statement.tail)
    return (statement.frame, (statement.head or "").lower(), statement.modifiers.lower(), tail,
            statement.verb.lower(), statement.left.lower(), statement.past)


@PAIRERS.register("visual7w_answers.v1")
class Visual7wAnswers(Pairer):
    evidence = "another image's Visual7W answer to the same 'how many' question is the foil's number"

    def __init__(self, mode: str = "auto"):
        self.mode = mode

    def check(self) -> None:
        from foilforge.errors import ConfigError

        if self.mode not in ("auto", "existence", "counting"):
            raise ConfigError(f"mode must be auto, existence or counting, got {self.mode!r}")

    def index(self, samples, records) -> None:
        self._by_phrase: dict[tuple, list[tuple[int, dict]]] = defaultdict(list)
        for sample in samples:
            if "question" not in sample or "answer" not in sample:
                continue
            phrase, count = counted_phrase(sample["question"]), parse_count(sample["answer"])
            if phrase is not None and count is not None:
                self._by_phrase[phrase].append((count, sample))
        for entries in self._by_phrase.values():
            entries.sort(key=lambda e: str(e[1]["id"]))

    @staticmethod
    def text_key(text: str) -> str:
        return scene_free(text)

    def _mode(self, record: dict) -> str:
        if self.mode != "auto":
            return self.mode
        return "existence" if record.get("linguistic_phenomena") == "existence" else "counting"

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        if sample is None or "question" not in sample:
            return []
        phrase, count = counted_phrase(sample["question"]), parse_count(sample.get("answer"))
        if phrase is None or count is None:
            return []
        if self._mode(record) == "existence":
            makes_foil_true = (lambda n: n > 0) if count == 0 else (lambda n: n == 0)
            makes_caption_true = (lambda n: n == 0) if count == 0 else (lambda n: n > 0)
        else:
            foil_count = record.get("classes_foil")
            if not isinstance(foil_count, int) or isinstance(foil_count, bool):
                return []
            makes_foil_true = lambda n: n == foil_count  # noqa: E731
            makes_caption_true = lambda n: n == count  # noqa: E731
        entries = self._by_phrase.get(phrase, [])
        # an image whose answers to the phrase disagree (one says the caption's number) proves nothing
        stated_by_image: dict[str, list[int]] = defaultdict(list)
        for n, other in entries:
            stated_by_image[other["image_file"]].append(n)
        partners = []
        for n, other in entries:
            if not makes_foil_true(n) or any(makes_caption_true(m) for m in stated_by_image[other["image_file"]]):
                continue
            qa = f"visual7w qa {other.get('qa_id', other['id'])}"
            partners.append(Partner(
                sample_id=str(other["id"]), image_file=other["image_file"], dataset_idx=str(other.get("dataset_idx")),
                rule=f"visual7w how many: same phrase, answer {n}",
                annotations=(f"visual7w qa {sample.get('qa_id', sample['id'])}", qa),
                claims=(Claim("count", f"{other['question']} {n}", (qa,), edited=True, basis=ANNOTATION),),
                absent=(f"an answer to the same phrase that fits the caption ({count})",)))
        return partners
