"""Caption realisation from SWiG frames (foilers/lang/realise.py)."""

import json
from pathlib import Path

import pytest

from foilforge.errors import InputError
from foilforge.foilers.lang.realise import (
    CaptionRealiser,
    action_from_sample,
    check_action_sample,
    choose_frame,
    make_noun,
    noun_synset,
    parse_abstract,
    parse_caption,
    singular_of_plural,
)
from tests.conftest import shared_path

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "swig"


def swig_samples(annotations: dict, space: dict, split: str = "test") -> list[dict]:
    """SWiG files -> the swig ingest schema (id, frames, nouns, verb_abstract, verb_order, bb, ...)."""
    samples = []
    for image, ann in sorted(annotations.items()):
        verb = space["verbs"][ann["verb"]]
        ids = sorted({noun for frame in ann["frames"] for noun in frame.values() if noun})
        samples.append({
            "id": f"swig:{image}", "source": "swig", "dataset": "SWiG", "original_split": split,
            "dataset_idx": image, "image_file": image, "verb": ann["verb"], "frames": ann["frames"],
            "nouns": {noun: space["nouns"][noun]["gloss"] for noun in ids},
            "verb_abstract": verb["abstract"], "verb_order": verb["order"], "bb": ann["bb"],
        })
    return samples


def sample_swig() -> list[dict]:
    annotations = json.loads((SAMPLE / "test.json").read_text())
    space = json.loads((SAMPLE / "imsitu_space.json").read_text())
    return swig_samples(annotations, space)


@pytest.fixture(scope="module")
def realiser():
    return CaptionRealiser()


@pytest.mark.parametrize("verb,subject,obj,prep,expected", [
    ("shout", "man", "woman", "at", "A man shouts at a woman."),
    ("feed", "woman", "baby", None, "A woman feeds a baby."),
    # SimpleNLG alone writes "A people disembarks" / "Some peoples disembark"
    ("disembark", "people", "boat", "from", "People disembark from a boat."),
    ("throw", "children", "ball", None, "Children throw a ball."),
    # SimpleNLG alone writes "a hour" and "photographes"
    ("wait", "woman", "hour", "for", "A woman waits for an hour."),
    ("photograph", "man", "people", None, "A man photographs people."),
    # water is a substance in WordNet: no article
    ("pour", "waiter", "water", None, "A waiter pours water."),
])
def test_realise_agreement_and_articles(realiser, verb, subject, obj, prep, expected):
    assert realiser.realise(verb, make_noun(subject), make_noun(obj), prep).text == expected


def test_plural_detection():
    assert singular_of_plural("people") == "person"
    assert singular_of_plural("children") == "child"
    assert singular_of_plural("bus") is None  # "bu" is not a noun
    assert singular_of_plural("woman") is None
    assert singular_of_plural("news") is None


def test_parse_abstract_gives_subject_and_prepositions():
    template = parse_abstract("the AGENT drinks a LIQUID from a CONTAINER at a PLACE", ["agent", "liquid", "container", "place"])
    assert template.subject_role == "agent"
    assert template.prepositions == {"liquid": "", "container": "from", "place": "at"}


def test_choose_frame_prefers_majority_fillers():
    frames = [{"agent": "a", "item": "x"}, {"agent": "b", "item": "y"}, {"agent": "b", "item": "x"}]
    assert choose_frame(frames) == 2
    assert choose_frame([{"agent": "a"}, {"agent": "b"}, {"agent": "c"}]) == 0  # tie: earliest


def test_sample_nouns_are_real_wordnet_ids():
    space = json.loads((SAMPLE / "imsitu_space.json").read_text())
    annotations = json.loads((SAMPLE / "test.json").read_text())
    verbs = set(shared_path("data", "real", "swig", "verb_indices.txt").read_text().split())
    assert len(annotations) >= 40
    for image, ann in annotations.items():
        assert ann["verb"] in verbs and ann["verb"] in space["verbs"]
        assert len(ann["frames"]) == 3 and set(ann["bb"]) == set(space["verbs"][ann["verb"]]["order"])
        for frame in ann["frames"]:
            for noun in frame.values():
                if noun:
                    assert space["nouns"][noun]["gloss"][0].replace(" ", "_") in noun_synset(noun).lemma_names()


def test_realise_every_sample_image(realiser):
    captions = {}  # keyed by image: the grown sample has up to ten images per verb
    for sample in sample_swig():
        action = action_from_sample(sample)
        captions[sample["dataset_idx"]] = None if action is None else realiser.realise(
            action.verb, action.agent, action.patient, action.preposition).text
    assert captions["shouting_35.jpg"] == "A man shouts at a woman."
    assert captions["feeding_268.jpg"] == "A woman feeds a baby."
    assert captions["disembarking_25.jpg"] == "People disembark from a boat."
    assert captions["pouring_195.jpg"] == "A waiter pours water."
    assert captions["hitchhiking_6.jpg"] == "A woman hitchhikes at a highway."
    assert captions["raining_68.jpg"] is None  # no subject role in "it rains on a PLACE"
    assert captions["walking_247.jpg"] is None  # the majority frame leaves the agent empty
    assert sorted(k for k, c in captions.items() if c is None) == ["raining_68.jpg", "walking_247.jpg"]
    assert len(captions) == 275


def test_readme_record_realises():
    readme = json.loads(shared_path("data", "real", "swig", "README_examples.json").read_text())
    space = {"nouns": dict(readme["imsitu_space_nouns_example"]), "verbs": dict(readme["imsitu_space_verbs_example"])}
    # glosses of the README record's nouns, from WordNet (the README quotes only the woman entry)
    record = readme["train_dev_test_record_example"]
    for frame in next(iter(record.values()))["frames"]:
        for noun in frame.values():
            space["nouns"].setdefault(noun, {"gloss": [noun_synset(noun).lemma_names()[0].replace("_", " ")]})
    space["verbs"]["hitchhiking"] = {"abstract": "the AGENT hitchhikes at a PLACE", "order": ["agent", "place"]}
    sample = swig_samples(record, space, split="train")[0]
    action = action_from_sample(sample)
    assert CaptionRealiser().realise(action.verb, action.agent, action.patient, action.preposition).text == \
        "A man hitchhikes at a highway."


def test_parse_released_caption():
    parts = parse_caption("A man exercises his torso.", "man", "torso")
    assert (parts.verb, parts.preposition, parts.patient.text) == ("exercise", None, "torso")
    parts = parse_caption("The people disembark from ship.", "people", "ship")
    assert (parts.verb, parts.preposition, parts.agent.plural, parts.patient.mass) == ("disembark", "from", True, False)
    assert parse_caption("A person carves wood.", "person", "wood").patient.mass is True
    assert parse_caption("A dog sleeps.", "cat", "sofa") is None


def test_bad_sample_names_file_record_field():
    with pytest.raises(InputError) as err:
        check_action_sample({"id": "x", "verb": "feeding", "frames": [{"agent": "n1"}], "nouns": {}}, "in.jsonl", "x")
    assert str(err.value) == "in.jsonl, record x, field 'nouns': noun id 'n1' (role 'agent') has no gloss in 'nouns'"
    with pytest.raises(InputError) as err:
        check_action_sample({"id": "y", "verb": "feed", "agent": "man"}, "in.jsonl", "y")
    assert str(err.value) == "in.jsonl, record y, field 'patient': missing field"
