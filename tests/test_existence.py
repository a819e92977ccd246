"""Existence: Visual7W question+answer -> declarative -> foil; 50/50; released records reproduced."""

import json

import pytest

from foilforge.errors import InputError
from foilforge.foilers.existence import ExistenceFoiler, existence_pair
from foilforge.foilers.lang.templates import parse_count, statement_from_existence_caption
from tests.conftest import shared_path


def v7w(qa_id, question, answer, choices=("1.", "2.", "3.")):
    """A sample as ingest writes Visual7W (schema fixed by the ingest stage)."""
    return {"id": f"visual7w:{qa_id}", "source": "visual7w", "dataset": "visual7w", "original_split": "test",
            "dataset_idx": "2393805", "image_file": "v7w_2393805.jpg", "qa_id": qa_id, "question": question,
            "answer": answer, "multiple_choices": list(choices)}


@pytest.mark.parametrize("question, answer, caption, foil", [
    ("How many animals are shown?", "0.", "There are no animals shown.", "There are animals shown."),
    ("How many animals are shown?", "None.", "There are no animals shown.", "There are animals shown."),
    ("How many people are in the picture?", "Four.", "There are people in the picture.",
     "There are no people in the picture."),
    ("How many people are there?", "12", "There are people.", "There are no people."),
    ("How many elephants are there in the picture?", "1.", "There is an elephant in the picture.",
     "There is no elephant in the picture."),
    ("How many people are snowboarding?", "One.", "There is a person snowboarding.", "There is no person snowboarding."),
    ("How many tomatoes?", "2.", "There are tomatoes.", "There are no tomatoes."),
    ("How many pieces of fruit are on the plate?", "1.", "There is a piece of fruit on the plate.",
     "There is no piece of fruit on the plate."),
    ("How many people can be seen on the bus?", "4.", "People can be seen on the bus.",
     "No people can be seen on the bus."),
    ("How many people can be seen on the bus?", "1.", "A person can be seen on the bus.",
     "No person can be seen on the bus."),
    ("How many tusks do the elephants have?", "2.", "The elephants have tusks.", "The elephants have no tusks."),
    ("How many heads do you see?", "0", "You see no heads.", "You see heads."),
    ("How many apples can you see in this photo?", "3.", "You can see apples in this photo.",
     "You can see no apples in this photo."),
    ("How many buses were parked?", "0.", "There were no buses parked.", "There were buses parked."),
    # mass noun: singular verb, no article, both polarities
    ("How many water?", "0.", "There is no water.", "There is water."),
    # plural-only noun: never "a pant"
    ("How many pants are there?", "1.", "There are pants.", "There are no pants."),
])
def test_question_to_caption_and_foil(question, answer, caption, foil):
    assert existence_pair(question, answer)[:2] == (caption, foil)


@pytest.mark.parametrize("question, answer", [
    ("What color is the car?", "Red."),                     # not a "how many" question
    ("How many people are shown?", "A few."),                # not a numeral
    ("How many players wear red shorts?", "2."),             # verb we have no template for
    ("How many of his feet are touching the ground?", "0."), # partitive: "There are no of his feet" (release) is not English
    ("How many is it?", "3."),
])
def test_shapes_without_template_give_no_foil(question, answer):
    assert existence_pair(question, answer) is None
    assert ExistenceFoiler().run([v7w(1, question, answer)]) == []


def test_answers_as_digits_or_words():
    assert [parse_count(a) for a in ("3.", "Three.", "None.", "Zero.", "12", 4, "3 people.", "A few.", "Red.")] == [
        3, 3, 0, 0, 12, 4, 3, None, None]


def test_record_fields_as_released():
    [record] = ExistenceFoiler(balance=False).run([v7w(7, "How many birds are in the photo?", "0.", ("2.", "10.", "6."))])
    assert {k: record[k] for k in ("caption", "foil", "classes", "classes_foil", "answer", "declarative_statement",
                                   "declarative_statement_foils", "provenance_of_foils", "split", "dataset",
                                   "dataset_idx", "image_file", "original_split", "linguistic_phenomena")} == {
        "caption": "There are no birds in the photo.", "foil": "There are birds in the photo.", "classes": 0,
        "classes_foil": [2, 10, 6], "answer": 0, "declarative_statement": "There are no birds in the photo.",
        "declarative_statement_foils": ["There are birds in the photo."], "provenance_of_foils": "zero_to_something",
        "split": "test", "dataset": "visual7w", "dataset_idx": "2393805", "image_file": "v7w_2393805.jpg",
        "original_split": "test", "linguistic_phenomena": "existence"}
    # the changed words: "no birds" -> "birds"
    assert record["provenance"] == {"foiler": "existence.v1", "caption_span": [10, 18], "foil_span": [10, 15]}


def samples_with_answers(answers):
    return [v7w(i, "How many dogs are in the park?", a) for i, a in enumerate(answers)]


def test_fifty_fifty_balance():
    samples = samples_with_answers(["0."] * 7 + ["1.", "2.", "5."])
    records = ExistenceFoiler().run(samples, seed=3)
    kinds = [r["provenance_of_foils"] for r in records]
    assert kinds.count("zero_to_something") == kinds.count("something_to_zero") == 3
    assert len(ExistenceFoiler(max_samples=4).run(samples, seed=3)) == 4
    assert len(ExistenceFoiler(balance=False).run(samples, seed=3)) == 10


def test_same_seed_same_selection_other_seed_may_differ():
    samples = samples_with_answers(["0."] * 20 + ["3."] * 4)
    pick = lambda seed: [r["id"] for r in ExistenceFoiler().run(samples, seed=seed)]
    assert pick(1) == pick(1)
    assert len({tuple(pick(seed)) for seed in range(5)}) > 1


def test_missing_question_is_a_clear_input_error():
    sample = v7w(3, "How many dogs?", "2.")
    del sample["question"]
    with pytest.raises(InputError, match=r"in.jsonl, record visual7w:3, field 'question': missing field"):
        ExistenceFoiler().check_sample(sample, "in.jsonl", sample["id"])


# ---- the released records: declarative statement + answer -> foil

#: released records we do not reproduce, with the reason (the release's text is wrong; ours is not)
EXISTENCE_EXCEPTIONS = {
    "existence_visual7w_2386605": "release starts the sentence lower-case ('people can be seen ...')",
    "existence_visual7w_2364948": "release writes 'a elephant'; we write 'an elephant' (foil identical)",
}


def test_reproduces_released_existence_records():
    released = json.loads(shared_path("data", "valse-dev", "existence.json").read_text())
    mismatches = {}
    for key, record in released.items():
        answer = record["answer"]
        statement = statement_from_existence_caption(record["declarative_statement"], answer)
        got = None
        if statement is not None:
            got = (statement.existence(negated=answer == 0, singular=answer == 1),
                   statement.existence(negated=answer != 0, singular=answer == 1))
        if got != (record["caption"], record["foil"]):
            mismatches[key] = got
    assert set(mismatches) == set(EXISTENCE_EXCEPTIONS), mismatches
    # where only the caption's surface is wrong, the foil still matches
    assert mismatches["existence_visual7w_2364948"][1] == released["existence_visual7w_2364948"]["foil"]
    assert mismatches["existence_visual7w_2386605"][1] == released["existence_visual7w_2386605"]["foil"]
    assert len(released) - len(mismatches) == 130
