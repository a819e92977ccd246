"""Coreference: "[caption]. [question]? [yes/no]." with the answer flipped; 50/50; released records rebuilt."""

import json
import re

import pytest

from foilforge.errors import ConfigError, InputError
from foilforge.foilers.coreference import CoreferenceFoiler
from foilforge.registry import check_args
from tests.conftest import shared_path


def visdial(image_id, turn, caption, question, answer, split="train"):
    """A sample as ingest writes VisDial v1.0 (schema fixed by the ingest stage)."""
    image_file = (f"COCO_train2014_{image_id:012d}.jpg" if split == "train"
                  else f"VisualDialog_val2018_{image_id:012d}.jpg")
    return {"id": f"visdial:{split}:{image_id}:{turn}", "source": f"visdial_{split}", "dataset": "VisDial_v1.0",
            "original_split": split, "dataset_idx": str(image_id), "image_file": image_file, "caption": caption,
            "question": question, "answer": answer, "turn": turn}


def test_caption_and_foil_text():
    [record] = CoreferenceFoiler(balance=False).run([visdial(1, 0, "a woman driving a motorcycle",
                                                             "is she wearing a helmet", "yes")])
    assert record["caption"] == "a woman driving a motorcycle. is she wearing a helmet? yes."
    assert record["foil"] == "a woman driving a motorcycle. is she wearing a helmet? no."
    assert (record["classes"], record["classes_foil"]) == ("yes", "no")
    assert record["only_caption"] == "a woman driving a motorcycle"
    assert record["image_file"] == "COCO_train2014_000000000001.jpg"
    assert record["dataset"] == "VisDial_v1.0" and record["original_split"] == "train"
    assert record["provenance"]["caption_span"] == [55, 58] and record["caption"][55:58] == "yes"
    assert record["provenance"]["foil_span"] == [55, 57] and record["foil"][55:57] == "no"


@pytest.mark.parametrize("question, answer, expected", [
    ("is it sunny", "no", True),
    ("are they playing", "Yes.", True),
    ("does the man wear a hat", "yes", False),         # no pronoun
    ("is this a zoo", "yes, it is", False),            # not a plain yes/no
    ("is it raining", "not sure", False),
    ("is the dog on his leash", "no", True),           # possessive pronoun
])
def test_which_turns_qualify(question, answer, expected):
    records = CoreferenceFoiler(balance=False).run([visdial(5, 2, "a dog in a park", question, answer)])
    assert bool(records) is expected


def test_pronoun_list_and_answers_are_params():
    sample = visdial(6, 1, "two men on a bench", "are both men", "yes")
    assert CoreferenceFoiler(balance=False).run([sample]) == []
    assert len(CoreferenceFoiler(balance=False, pronouns=("both",)).run([sample])) == 1
    loose = CoreferenceFoiler(balance=False, yes_answers=("yes", "yes it is"))
    assert loose.run([visdial(7, 1, "a cat", "is it black", "Yes it is")])[0]["caption"].endswith("? yes.")
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) pronoun_list"):
        check_args(CoreferenceFoiler, {"pronoun_list": ["it"]}, "params.yaml instruments.coreference-standard.args")


def test_fifty_fifty_and_one_turn_per_image():
    samples = [visdial(image, turn, f"image {image}", "is it outside", "yes" if image % 4 else "no")
               for image in range(1, 13) for turn in range(3)]
    records = CoreferenceFoiler().run(samples, seed=0)
    assert [r["classes"] for r in records].count("yes") == [r["classes"] for r in records].count("no") == 3
    assert len({r["image_file"] for r in records}) == len(records)
    everything = CoreferenceFoiler(balance=False, max_per_image=None).run(samples, seed=0)
    assert len(everything) == 36
    assert len(CoreferenceFoiler(max_samples=4).run(samples, seed=0)) == 4


def test_same_seed_same_output():
    samples = [visdial(image, turn, f"image {image}", "is it outside", "yes" if turn else "no")
               for image in range(1, 9) for turn in range(3)]
    run = lambda seed, items: json.dumps(CoreferenceFoiler().run(items, seed=seed))
    assert run(2, samples) == run(2, list(reversed(samples)))


def test_missing_caption_is_a_clear_input_error():
    sample = visdial(3, 0, "x", "is it red", "no")
    del sample["caption"]
    with pytest.raises(InputError, match=r"in.jsonl, record visdial:train:3:0, field 'caption': missing field"):
        CoreferenceFoiler().check_sample(sample, "in.jsonl", sample["id"])


#: released records whose question has no pronoun from the default list ("both" is a quantifier there)
CORE_EXCEPTIONS = {
    "coreference-standard.json": {"is the person sitting on both benches", "are the people both female",
                                  "are both men"},
    "coreference-hard.json": set(),
}


@pytest.mark.parametrize("filename, split", [("coreference-standard.json", "train"),
                                             ("coreference-hard.json", "val")])
def test_rebuilds_released_records_from_caption_question_answer(filename, split):
    released = json.loads(shared_path("data", "valse-dev", filename).read_text())
    foiler = CoreferenceFoiler(balance=False)
    unmatched = set()
    for key, record in released.items():
        question, answer = re.fullmatch(r"(.*)\? (yes|no)\.", record["caption"][len(record["only_caption"]) + 2:]).groups()
        sample = visdial(1, 0, record["only_caption"], question, answer, split)
        foils = foiler.run([sample])
        got = [(r["caption"], r["foil"], r["classes"], r["classes_foil"], r["only_caption"]) for r in foils]
        expected = [(record["caption"], record["foil"], record["classes"], record["classes_foil"], record["only_caption"])]
        if got != expected:
            unmatched.add(question)
    assert unmatched == CORE_EXCEPTIONS[filename]
