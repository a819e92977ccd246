"""Actant swap (foilers/actant_swap.py): swapped roles, same verb, agreement from the new subject."""

import json
import re

import pytest
from lemminflect import getInflection, getLemma

from foilforge.foiler import FOILERS
from foilforge.foilers.actant_swap import ActantSwap
from tests.conftest import shared_path
from tests.test_realise import sample_swig


def test_registered():
    # FOILERS.get would import every foiler module of the project; the decorator's stamp is enough here
    assert ActantSwap.registry_name == "actant_swap.v1"
    assert FOILERS._items["actant_swap.v1"] is ActantSwap


def test_golden_examples():
    foiler = ActantSwap()
    for sample, expected in foiler.golden:
        records = foiler.run([sample], seed=0, instrument="actant-swap")
        got = (records[0]["caption"], records[0]["foil"]) if records else None
        assert got == expected


def test_sample_swig_swaps_and_skips_same_filler():
    # keyed by image: the grown sample has up to ten images per verb
    samples = sample_swig()
    records = {r["dataset_idx"]: r for r in ActantSwap().run(samples, seed=0, instrument="actant-swap")}
    assert (records["shouting_35.jpg"]["caption"], records["shouting_35.jpg"]["foil"]) == ("A man shouts at a woman.", "A woman shouts at a man.")
    assert (records["cheering_237.jpg"]["caption"], records["cheering_237.jpg"]["foil"]) == ("People cheer for a team.", "A team cheers for people.")
    assert (records["coaching_160.jpg"]["caption"], records["coaching_160.jpg"]["foil"]) == ("A coach coaches people.", "People coach a coach.")
    assert records["feeding_268.jpg"]["classes"] == "woman" and records["feeding_268.jpg"]["classes_foil"] == "baby"
    assert records["shouting_35.jpg"]["id"] == "actant-swap:swig:shouting_35.jpg"
    assert records["shouting_35.jpg"]["provenance"]["caption_span"] == [0, 23]
    # boxer punches boxer: the swap would give the caption back; raining and walking realise no caption
    assert sorted({s["dataset_idx"] for s in samples} - set(records)) == ["punching_201.jpg", "raining_68.jpg",
                                                                           "walking_247.jpg"]


def test_deterministic_and_order_independent():
    samples = sample_swig()
    first = ActantSwap().run(samples, seed=3)
    assert ActantSwap().run(list(reversed(samples)), seed=3) == first


def _verb_after(text: str, noun: str) -> str:
    match = re.match(rf"^(?:(?:a|an|the|his|her|its|their|some|two|such)\s+)?{re.escape(noun)}\s+(\S+)", text, re.IGNORECASE)
    assert match, f"{text!r} does not start with {noun!r}"
    return match.group(1).lower()


def test_valse_dev_actant_swap_roles_verb_and_agreement():
    release = json.loads(shared_path("data", "valse-dev", "actant-swap.json").read_text())
    samples = [{"id": key, "image_file": r["image_file"], "caption": r["caption"], "agent": r["classes"], "patient": r["classes_foil"]}
               for key, r in release.items()]
    records = ActantSwap().run(samples, seed=0, instrument="actant-swap")
    skipped = sorted(set(release) - {r["sample_id"] for r in records})
    print(f"\nvalse-dev actant swap: {len(records)} foils from {len(release)} records; skipped {len(skipped)} "
          f"(agent not at the start of the caption, or agent == patient): "
          + "; ".join(release[k]["caption"] for k in skipped))
    assert len(records) >= 255
    # nouns of the release that are plural as subjects (hand-checked list, independent of the code's detection)
    plural_patients = {"people", "stairs"}
    for record in records:
        agent, patient = record["classes"], record["classes_foil"]
        foil = record["foil"]
        caption_lemma = getLemma(_verb_after(record["caption"], agent), upos="VERB")[0]
        foil_verb = _verb_after(foil, patient)  # the patient is the subject
        assert re.search(rf"\b{re.escape(agent)}\.$", foil, re.IGNORECASE), foil  # the agent is the object
        assert getLemma(foil_verb, upos="VERB")[0] == caption_lemma, foil
        expected = caption_lemma if patient in plural_patients else getInflection(caption_lemma, tag="VBZ")[0]
        assert foil_verb == expected, foil


def test_plural_agent_read_from_caption_agreement():
    [record] = ActantSwap().run([{"id": "p", "caption": "The police arrest such a person.", "agent": "police", "patient": "person"}])
    assert record["foil"] == "A person arrests police."


@pytest.mark.parametrize("bad,message", [
    ({"id": "a", "verb": "feed", "agent": "man", "patient": 3}, "in.jsonl, record a, field 'patient': expected str, got int (3)"),
    ({"id": "b", "caption": "A man feeds a dog.", "agent": "man"}, "in.jsonl, record b, field 'patient': missing field"),
])
def test_bad_input(bad, message):
    from foilforge.errors import InputError

    with pytest.raises(InputError) as err:
        ActantSwap().check_sample(bad, "in.jsonl", bad["id"])
    assert str(err.value) == message
