"""Counting: "There are exactly N X" with agreement; balanced / adversarial / small-numbers instruments."""

import json
import random
from collections import Counter

import pytest

from foilforge.errors import ConfigError
from foilforge.foilers.counting import CountingFoiler, class_histograms, derange_classes
from foilforge.foilers.lang.templates import statement_from_counting_caption, statement_from_question
from tests.conftest import shared_path

VALSE_COUNTING = ("counting-adversarial.json", "counting-hard.json", "counting-small-quant.json")


def v7w(qa_id, question, answer, choices=()):
    return {"id": f"visual7w:{qa_id:05d}", "source": "visual7w", "dataset": "visual7w", "original_split": "test",
            "dataset_idx": str(2360000 + qa_id), "image_file": f"v7w_{2360000 + qa_id}.jpg", "qa_id": qa_id,
            "question": question, "answer": answer, "multiple_choices": list(choices)}


@pytest.mark.parametrize("question, counts", [
    ("How many tomatoes are on the plate?", {0: "There are exactly 0 tomatoes on the plate.",
                                             1: "There is exactly 1 tomato on the plate.",
                                             4: "There are exactly 4 tomatoes on the plate."}),
    ("How many signs are there?", {1: "There is exactly 1 sign.", 2: "There are exactly 2 signs."}),
    ("How many people are skiing?", {1: "There is exactly 1 person skiing.", 3: "There are exactly 3 people skiing."}),
    ("How many men are there?", {1: "There is exactly 1 man.", 2: "There are exactly 2 men."}),
    ("How many sheep?", {1: "There is exactly 1 sheep.", 5: "There are exactly 5 sheep."}),
    ("How many pieces of luggage can be seen?", {1: "Exactly 1 piece of luggage can be seen.",
                                                 3: "Exactly 3 pieces of luggage can be seen."}),
    ("How many people have umbrellas?", {1: "Exactly 1 person has umbrellas.", 6: "Exactly 6 people have umbrellas."}),
    ("How many toes does the polar bear have on his foot?", {1: "The polar bear has exactly 1 toe on his foot.",
                                                             5: "The polar bear has exactly 5 toes on his foot."}),
    ("How many of the birds wings are extended?", {1: "There is exactly 1 of the birds wings extended.",
                                                   4: "There are exactly 4 of the birds wings extended."}),
    ("How many glasses of wine were poured?", {1: "There was exactly 1 glass of wine poured.",
                                               2: "There were exactly 2 glasses of wine poured."}),
])
def test_statement_agrees_with_the_number(question, counts):
    statement = statement_from_question(question)
    assert {n: statement.counting(n) for n in counts} == counts


@pytest.mark.parametrize("question", ["How many water?", "How many pants are there?", "What is on the plate?"])
def test_uncountable_or_unknown_shapes_give_no_foil(question):
    assert CountingFoiler().run([v7w(1, question, "2.")]) == []


def instrument_samples(answers):
    questions = ["How many dogs are in the park?", "How many cars are parked?", "How many birds?"]
    return [v7w(i, questions[i % 3], f"{a}.") for i, a in enumerate(answers)]


ANSWERS = [0] * 6 + [1] * 14 + [2] * 12 + [3] * 9 + [4] * 7 + [5] * 5 + [6] * 3 + [8] * 2 + [12] * 2


def test_balanced_caption_and_foil_histograms_are_identical():
    records = CountingFoiler(max_per_class=10).run(instrument_samples(ANSWERS), seed=0)
    hist = class_histograms(records)
    assert hist["caption"] == {0: 6, 1: 10, 2: 10, 3: 9, 4: 7, 5: 5, 6: 3, 8: 2, 12: 2}
    assert hist["foil"] == hist["caption"]
    assert all(r["classes"] != r["classes_foil"] for r in records)


def test_adversarial_captions_four_or_more_foils_below_four():
    records = CountingFoiler(caption_min=4, foil_min=0, foil_max=3).run(instrument_samples(ANSWERS), seed=0)
    hist = class_histograms(records)
    assert hist["caption"] == {4: 7, 5: 5, 6: 3, 8: 2, 12: 2}
    assert set(hist["foil"]) == {0, 1, 2, 3} and max(hist["foil"].values()) - min(hist["foil"].values()) <= 1


def test_small_numbers_both_sides_in_zero_to_three_and_balanced():
    records = CountingFoiler(caption_max=3, foil_max=3).run(instrument_samples(ANSWERS), seed=0)
    hist = class_histograms(records)
    assert set(hist["caption"]) <= {0, 1, 2, 3} and hist["foil"] == hist["caption"]
    assert sum(hist["caption"].values()) == 41


def test_a_dominant_class_is_trimmed_to_half():
    records = CountingFoiler().run(instrument_samples([1] * 10 + [2, 3]), seed=0)
    assert class_histograms(records) == {"caption": {1: 2, 2: 1, 3: 1}, "foil": {1: 2, 2: 1, 3: 1}}


def test_foil_text_matches_its_class_after_rebalancing():
    for record in CountingFoiler(max_per_class=10).run(instrument_samples(ANSWERS), seed=1):
        n = record["classes_foil"]
        verb, noun = ("is", "exactly 1 ") if n == 1 else ("are", f"exactly {n} ")
        assert noun in record["foil"] and f"exactly {record['classes']} " in record["caption"]
        if record["foil"].startswith("There"):
            assert record["foil"].startswith(f"There {verb} ")
        (cs, ce), (fs, fe) = record["provenance"]["caption_span"], record["provenance"]["foil_span"]
        assert record["caption"][:cs] == record["foil"][:fs] and record["caption"][ce:] == record["foil"][fe:]


def test_byte_identical_for_same_seed_and_input_order():
    samples = instrument_samples(ANSWERS)
    run = lambda seed, items: json.dumps(CountingFoiler(max_per_class=10).run(items, seed=seed))
    assert run(0, samples) == run(0, list(reversed(samples)))
    assert run(0, samples) != run(1, samples)


def test_class_histograms_hand_computed():
    records = [{"classes": 2, "classes_foil": 0}, {"classes": 0, "classes_foil": 2}, {"classes": 2, "classes_foil": 5}]
    assert class_histograms(records) == {"caption": {0: 1, 2: 2}, "foil": {0: 1, 2: 1, 5: 1}}


def test_derangement_keeps_the_histogram_and_moves_every_value():
    classes = [0, 0, 1, 1, 1, 2, 3, 3, 4, 7]
    foils = derange_classes(classes, random.Random(0))
    assert Counter(foils) == Counter(classes) and all(a != b for a, b in zip(classes, foils))
    assert derange_classes([1, 1, 1, 2], random.Random(0)) is None


def test_inverted_bounds_are_a_config_error():
    from foilforge.foiler import FOILERS

    # caught when the instrument is built (check-params), before any sample is read
    with pytest.raises(ConfigError, match=r"^params.yaml instruments.c.args \(foiler counting.v1\): foil_max 2 < foil_min 4$"):
        FOILERS.build("counting.v1", {"foil_min": 4, "foil_max": 2}, where="params.yaml instruments.c.args")


# ---- the released records: caption + foil class -> foil

#: released records we do not reproduce, with the reason
COUNTING_EXCEPTIONS = {
    "counting-adversarial.json": {
        "counting_visual7w_2360508": "release agreement error 'exactly 1 of the birds wing'",
        "counting_visual7w_2335287": "release agreement error 'exactly 6 building' (we write 'buildings')",
    },
    "counting-hard.json": {
        "counting_visual7w_2379339": "release misspelling 'exactly 1 storie'",
        "counting_visual7w_2362744": "release agreement error 'exactly 2 giraffe'",
        "counting_visual7w_2370171": "release agreement error 'exactly 8 elephant'",
        "counting_visual7w_2364670": "release agreement error 'exactly 2 lamp post' (we write 'lamp posts')",
        "counting_visual7w_2374894": "release agreement error 'exactly 2 zebra' (we write 'zebras')",
        "counting_visual7w_2370710": "release also singularises the complement ('1 type of paver'); "
                                     "we keep 'of pavers' (both grammatical)",
    },
    "counting-small-quant.json": {
        "counting_visual7w_2412584": "release agreement error 'There are exactly 1 lamps'",
        "counting_visual7w_2383154": "release agreement error 'exactly 1 of the cows leg'",
        "counting_visual7w_2374489": "release agreement error 'exactly 2 zebra'",
        "counting_visual7w_2361120": "release misspelling 'exactly 1 dishe'",
        "counting_visual7w_1592096": "release caption has no noun ('exactly 2 playing tennis')",
        "counting_visual7w_2395678": "release agreement error 'There are exactly 1 propellers'",
        "counting_visual7w_2390283": "release caption misspells 'tenni player'",
        "counting_visual7w_2401999": "release agreement error 'exactly 2 pair of shoes' (we write 'pairs')",
        "counting_visual7w_713863": "release caption has no noun to count ('exactly 1 feel' for 'feet')",
    },
}


@pytest.fixture(scope="module")
def nlp():
    from foilforge.nlp import load_spacy

    return load_spacy()


@pytest.mark.parametrize("filename", VALSE_COUNTING)
def test_reproduces_released_counting_records(filename, nlp):
    released = json.loads(shared_path("data", "valse-dev", filename).read_text())
    mismatches = {}
    for key, record in released.items():
        statement, count = statement_from_counting_caption(record["caption"], nlp)
        got = (statement.counting(count), statement.counting(record["classes_foil"]))
        if got != (record["caption"], record["foil"]) or count != record["classes"]:
            mismatches[key] = got
    assert set(mismatches) == set(COUNTING_EXCEPTIONS[filename]), mismatches


def _head_word(text: str, statement, n: int) -> str:
    words = text.rstrip(".").split()
    at = words.index(str(n)) + 1 + len(statement.modifiers.split())
    return words[at]


def _agreement_errors(statement) -> list[str]:
    """Checked with `inflect` (another lexicon than the lemminflect the foiler uses): the noun for 1 and
    the noun for 7 are a singular/plural pair, and the verb agrees."""
    import inflect

    engine = inflect.engine()
    texts = {n: statement.counting(n) for n in (0, 1, 2, 7)}
    errors = []
    if statement.head is not None:
        singular, plural = _head_word(texts[1], statement, 1), _head_word(texts[7], statement, 7)
        if not (engine.plural_noun(singular) == plural or engine.singular_noun(plural) == singular):
            errors.append(f"{singular}/{plural}")
        if {_head_word(texts[n], statement, n) for n in (0, 2, 7)} != {plural}:
            errors.append(f"plural differs across numbers: {texts}")
    for n, text in texts.items():
        if text.startswith("There") and text.split()[1] != ("is" if n == 1 else "are"):
            errors.append(text)
        if statement.frame == "subject" and statement.verb.split()[0] in ("have", "has"):
            if (" has " in text) != (n == 1):
                errors.append(text)
    return errors


def test_no_agreement_errors_on_valse_inputs(nlp):
    """Every released counting statement, re-rendered for 0, 1, 2 and 7: noun and verb agree."""
    errors = {}
    checked = 0
    for filename in VALSE_COUNTING:
        released = json.loads(shared_path("data", "valse-dev", filename).read_text())
        for key, record in released.items():
            if "caption" in COUNTING_EXCEPTIONS[filename].get(key, ""):
                continue  # the released caption itself has no countable noun
            statement = statement_from_counting_caption(record["caption"], nlp)[0]
            checked += 1
            found = _agreement_errors(statement)
            if found:
                errors[key] = found
    assert errors == {}
    assert checked == 691


def test_no_agreement_errors_on_the_question_templates():
    questions = ["How many tomatoes are on the plate?", "How many buses are there?", "How many glasses are on the table?",
                 "How many people have umbrellas?", "How many knives are there?", "How many mice?",
                 "How many children are playing?", "How many boxes are stacked?", "How many leaves are green?"]
    errors = {q: _agreement_errors(statement_from_question(q)) for q in questions}
    assert {q: e for q, e in errors.items() if e} == {}
