"""foilforge/settings.py: an instrument's settings resolved once, under one rule for every block (a key the
instrument writes wins, null included; a key it leaves out takes the top-level value)."""

import pytest

from foilforge.errors import ConfigError
from foilforge.params import load_params
from foilforge.settings import InstrumentSettings, instrument_settings

ATTACKERS = {"words": {"attacker": "word_ngram.v1"}, "chars": {"attacker": "char_ngram.v1"},
             "bayes": {"attacker": "ngram_bayes.v1"}}


def test_a_null_the_instrument_writes_switches_a_check_off_and_a_left_out_key_inherits():
    params = {"bias": {"defaults": {"js_max": 0.75, "max_majority_share": 0.6}},
              "instruments": {"off": {"bias": {"js_max": None}}, "quiet": {"bias": {}}}}
    assert instrument_settings(params, "off").bias.js_max is None
    assert instrument_settings(params, "off").bias.max_majority_share == 0.6
    assert instrument_settings(params, "quiet").bias.js_max == 0.75


def test_the_same_rule_holds_for_the_adversarial_filter_and_pairing():
    params = {"attackers": ATTACKERS, "adversarial": {"attackers": ["words"], "max_js_rise": 0.0, "target": 0.6},
              "pairing": {"min_support": 0.5},
              "instruments": {"x": {"adversarial": {"max_js_rise": None, "attackers": ["chars"]},
                                    "pairing": {"pairer": "coco_captions.v1"}}}}
    adversarial = instrument_settings(params, "x").adversarial
    assert (adversarial.max_js_rise, adversarial.target, adversarial.attackers) == (None, 0.6, ["chars"])
    assert adversarial.attacker_blocks == {"chars": {"attacker": "char_ngram.v1"}}
    pairing = instrument_settings(params, "x").pairing
    assert (pairing.pairer, pairing.min_support, pairing.prefer_pairable) == ("coco_captions.v1", 0.5, True)


def test_a_null_where_the_top_level_admits_none_names_the_key_and_says_to_leave_it_out():
    params = {"instruments": {"x": {"pairing": {"pairer": None, "min_support": None}}}}
    with pytest.raises(ConfigError) as err:
        instrument_settings(params, "x").pairing
    assert str(err.value) == ("params.yaml instruments.x.pairing.min_support: null is not a value here; leave the key "
                              "out to take the top-level value (1.0)")


def test_a_bad_value_is_named_by_its_path():
    with pytest.raises(ConfigError) as err:
        instrument_settings({"instruments": {"x": {"bias": {"js_max": "high"}}}}, "x").bias
    assert "params.yaml instruments.x.bias.js_max: expected a number" in str(err.value)


def test_an_instrument_params_yaml_does_not_name_gets_the_top_level_values():
    params = {"adversarial": {"attackers": ["words"]}, "attackers": ATTACKERS, "validation": {"seed": 3}}
    settings = instrument_settings(params, "released")
    assert settings.adversarial.attackers == ["words"] and settings.validation.seed == 3
    assert settings.validation.gold == [] and settings.gate is None and settings.bias.items == "direct"


def test_switched_off_or_no_block_means_no_adversarial_filter():
    assert instrument_settings({"instruments": {"x": {}}}, "x").adversarial is None
    params = {"attackers": ATTACKERS, "adversarial": {"attackers": ["words"]},
              "instruments": {"x": {"adversarial": {"enabled": False}}}}
    assert instrument_settings(params, "x").adversarial is None


def test_the_gate_takes_the_instruments_mode_and_its_attackers_blocks_with_their_grid():
    params = {"attackers": ATTACKERS, "gate": {"attackers": ["words", "bayes"], "seed": 8,
                                               "grid": {"words": {"C": [0.1, 1.0]}}},
              "instruments": {"x": {"gate": "fail"}}}
    gate = InstrumentSettings(params, "x").gate
    assert (gate.mode, gate.seed) == ("fail", 8)
    assert gate.attacker_blocks == {"words": {"attacker": "word_ngram.v1", "grid": {"C": [0.1, 1.0]}},
                                    "bayes": {"attacker": "ngram_bayes.v1"}}
    assert instrument_settings(params, "other").gate.mode == "report"
    params["gate"] = {"attackers": ["nope"]}
    with pytest.raises(ConfigError, match=r"params.yaml gate.attackers: nope not defined under `attackers`"):
        instrument_settings(params, "x").gate


def test_every_shipped_instrument_resolves():
    params = load_params("params.yaml")
    for name in params["instruments"]:
        settings = instrument_settings(params, name)
        assert settings.bias.items in ("direct", "swap")
        assert settings.pairing.min_support == params.pairing.min_support == 1.0
        settings.gate, settings.adversarial, settings.validation, settings.filters
