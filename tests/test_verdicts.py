"""Verdicts as statistical tests: certified only when every reading is shown within chance +- margin, solvable or
over-balanced only when chance is excluded familywise, inconclusive otherwise, with the error rates simulated; and
the data card's first screen, the verdict table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foilforge.filters.certification import (
    ABOVE,
    BELOW,
    INCONCLUSIVE,
    WITHIN,
    certification,
    chance_p,
    pairs_needed,
)


def reading(successes: float, n: int, chance: float | None = None) -> dict:
    from foilforge.metrics import wilson_interval

    figures = {"accuracy": round(successes / n, 4), "n": n,
               "ci95": [round(v, 4) for v in wilson_interval(round(successes), n)]}
    return figures if chance is None else {**figures, "chance": chance}


def blind(n: int, readings: int = 15) -> dict:
    return {f"a{k}": reading(n // 2, n) for k in range(readings)}


def tail_at_least(k: int, n: int, p: float) -> float:
    """P(X >= k), X ~ Binomial(n, p), summed term by term: an implementation apart from the module's scipy."""
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k, n + 1))


# ---------------------------------------------------------------------------------------- the rule, exactly

def test_one_reading_of_100_pairs_is_certified_from_47_to_53_successes():
    # P(X >= 47 | 100, 0.38) = 0.0411 <= 0.05 < P(X >= 46 | 100, 0.38) = 0.0623, and by symmetry
    # P(X <= 53 | 100, 0.62) = 0.0411 <= 0.05 < P(X <= 54 | 100, 0.62) = 0.0623
    assert round(tail_at_least(47, 100, 0.38), 4) == 0.0411 and round(tail_at_least(46, 100, 0.38), 4) == 0.0623
    certified = [k for k in range(101) if certification({"word": reading(k, 100)})["certified"]]
    assert certified == list(range(47, 54))
    # a margin of 0.10 asks more: P(X >= 50 | 100, 0.40) = 0.0271, P(X >= 49 | 100, 0.40) = 0.0423,
    # P(X >= 48 | 100, 0.40) = 0.0638
    assert [k for k in range(101) if certification({"word": reading(k, 100)}, margin=0.10)["certified"]] == \
        list(range(49, 52))


def test_every_reading_must_be_within_and_a_tie_is_rounded_against_certification():
    readings = {**blind(100), "edge": reading(53, 100)}
    assert certification(readings)["certified"]
    readings["edge"] = reading(53.5, 100)  # half a pair more (a tie): counted as 54 for the upper test
    verdict = certification(readings)
    assert not verdict["certified"] and verdict["attackers"]["edge"]["standing"] == INCONCLUSIVE
    assert [name for name, r in verdict["attackers"].items() if r["standing"] != WITHIN] == ["edge"]


def test_chance_is_excluded_at_the_familywise_level_holm_over_the_readings():
    # 16 readings: Holm's first step is 0.05 / 16 = 0.003125; 2 P(X >= 66 | 100, 1/2) = 0.00179 is below it,
    # 2 P(X >= 65 | 100, 1/2) = 0.00352 is not
    assert round(2 * tail_at_least(66, 100, 0.5), 5) == 0.00179 and round(2 * tail_at_least(65, 100, 0.5), 5) == 0.00352
    solvable = certification({**blind(100), "char": reading(66, 100)})
    assert solvable["status"] == "solvable" and solvable["attackers"]["char"]["standing"] == ABOVE
    assert solvable["why"] == ("char reads 66.0% of 100 pairs, 95% CI 56.3%-74.5%: above chance (50.0%) at the "
                               "familywise 0.05 level: solvable, it finds the caption")
    assert certification({**blind(100), "char": reading(65, 100)})["status"] == "inconclusive"
    over = certification({**blind(100), "char": reading(34, 100)})
    assert over["status"] == "over-balanced" and over["attackers"]["char"]["standing"] == BELOW
    assert "over-balanced, it leads to the foil" in over["why"]
    # step-down: of two readings, 2 P(X >= 63) = 0.0120 <= 0.05 / 2 rejects, then 2 P(X >= 61) = 0.0352 <= 0.05 / 1
    # rejects too (Bonferroni at 0.025 would not)
    two = certification({"a": reading(63, 100), "b": reading(61, 100)})
    assert {name: r["standing"] for name, r in two["attackers"].items()} == {"a": ABOVE, "b": ABOVE}


def test_a_reading_shown_within_the_margin_is_within_even_a_few_points_off_chance():
    verdict = certification({"word": reading(560, 1000)})
    assert chance_p(reading(560, 1000)) < 0.001 and verdict["certified"]
    assert verdict["attackers"]["word"]["standing"] == WITHIN


def test_counting_small_like_figures_are_inconclusive_with_the_pairs_needed():
    # the sample build's counting_small: 30 pairs, one reading 38.7% (95% CI 24.6-57.7%), the others near chance
    figures = {**blind(30), "ngram_bayes": {"accuracy": 0.387, "n": 30, "ci95": [0.246, 0.577]}}
    verdict = certification(figures)
    assert verdict["status"] == "inconclusive" and not verdict["certified"]
    assert verdict["attackers"]["ngram_bayes"]["why"] == ("reads 38.7% of 30 pairs, 95% CI 24.6%-57.7%: inconclusive: "
                                                          "30 pairs, about 190 needed")
    assert verdict["why"].startswith("inconclusive: 30 pairs, about 190 needed (16 of 16 readings")
    assert "the farthest from chance: ngram_bayes reads 38.7% of 30 pairs" in verdict["why"]
    # 190: at 186 pairs a reading of 38.7% (72 of 186, rounded toward chance) excludes chance at 0.05 / 16, at
    # 176 it does not
    exclude, within = pairs_needed(0.387, 0.5, 0.12, 0.05, 16, start=31)
    assert exclude == verdict["needed"] == 186 and within > 10_000
    assert chance_p({"accuracy": 0.387, "n": 186}) <= 0.05 / 16 < chance_p({"accuracy": 0.387, "n": 176})


def test_a_set_is_decided_when_one_reading_excludes_chance_or_every_one_is_within():
    from foilforge.filters.certification import set_needed

    near, far = {"exclude_at": None, "within_at": 300}, {"exclude_at": 900, "within_at": 5000}
    assert set_needed([near, far]) == 900  # the 900th pair shows one reading off chance: decided
    assert set_needed([near, {"exclude_at": None, "within_at": 700}]) == 700
    assert set_needed([{"exclude_at": None, "within_at": None}]) is None


def test_multiple_choice_readings_are_tested_around_one_in_k():
    at_chance = certification({"word": reading(180, 900, chance=0.2)})
    assert at_chance["certified"]
    above = certification({"word": reading(315, 900, chance=0.2)})
    assert above["status"] == "solvable" and "above chance (20.0%)" in above["why"]
    # within 20% +- 12 points: 26% of 900 is shown below 32% (and above 8%); 30% is not
    assert certification({"word": reading(234, 900, chance=0.2)})["certified"]
    assert certification({"word": reading(270, 900, chance=0.2)})["status"] == "solvable"


def test_no_reading_is_inconclusive_not_certified():
    assert certification({}) == {"certified": False, "status": "inconclusive", "why": "no attacker was run",
                                 "needed": None, "strongest": None, "margin": 0.12, "alpha": 0.05, "attackers": {}}


# ---------------------------------------------------------------------------------------- the error rates, simulated

def simulated(n: int, accuracies: list[float], trials: int, seed: int) -> dict:
    """Shares of `trials` seeded sets (independent Binomial(n, p) readings, one per accuracy) certified and called
    solvable / over-balanced, by filters/certification.py itself."""
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n, accuracies, size=(trials, len(accuracies)))
    statuses = [certification({f"r{k}": {"accuracy": c / n, "n": n} for k, c in enumerate(row)})["status"]
                for row in draws]
    return {status: statuses.count(status) / trials for status in ("certified", "solvable", "over-balanced")}


def test_simulated_error_rates_at_400_pairs_and_16_readings():
    from foilforge.filters.certification import exact_rates

    trials = 1500
    blind_set = simulated(400, [0.5] * 16, trials, seed=1)
    one_read = simulated(400, [0.62] + [0.5] * 15, trials, seed=2)
    exact = exact_rates(400, 16)
    # a blind set: certified at least 90% of the time (exactly 97.5%), called solvable or over-balanced at most 5%
    assert blind_set["certified"] >= 0.9 and abs(blind_set["certified"] - exact["blind_independent"]) < 0.015
    assert blind_set["solvable"] + blind_set["over-balanced"] <= 0.05
    # one attacker reading 62%: certified at most 5% of the time (exactly 4.4%), the simulation within 3 SE of it
    assert exact["one_read_independent"] <= exact["one_read_bound"] <= 0.05
    assert abs(one_read["certified"] - exact["one_read_independent"]) < 3 * math.sqrt(0.05 * 0.95 / trials)


@pytest.mark.parametrize("n", [20, 57, 100, 143, 300])
def test_the_size_holds_at_every_n_not_only_on_a_grid(n):
    """P(one reading at 62% passes) <= 5% exactly, summed over the counts the module's own test passes."""
    from scipy.stats import binom

    from foilforge.filters.certification import within_p

    passes = [k for k in range(n + 1) if within_p({"accuracy": k / n, "n": n}, 0.12) <= 0.05]
    assert sum(binom.pmf(passes, n, 0.62)) <= 0.05


# ---------------------------------------------------------------------------------------- the card's first screen

def gate_of(after: dict, transfer: dict | None = None) -> dict:
    from foilforge.pipeline.gate import certify_readings

    after = {name: {**f, "family": "word n-grams", "passed": f["accuracy"] <= 0.55, "max_accuracy": 0.55,
                    "verdict": "x"} for name, f in after.items()}
    transfer = {name: {**f, "trained_on": 500} for name, f in (transfer or {}).items()}
    gate = {"passed": all(f["passed"] for f in after.values()), "mode": "report", "max_accuracy": 0.55,
            **certify_readings(after, transfer, 0.12, 0.05), "transfer": transfer,
            "attackers": {name: {"before": {**f, "accuracy": 0.7}, "after": f} for name, f in after.items()}}
    return gate


def test_the_card_opens_with_the_verdict_table():
    from foilforge.pipeline.card import datacard_text
    from foilforge.pipeline.release import certification_entry

    gates = {"existence": gate_of({"word": reading(200, 400)}, {"word": reading(205, 400)}),
             "counting_small": gate_of({"word": reading(15, 30), "bayes": {"accuracy": 0.387, "n": 30,
                                                                           "ci95": [0.246, 0.577]}}),
             "relations": gate_of({"word": reading(200, 400)}, {"word": reading(300, 400)}),
             "counting_balanced": gate_of({"word": reading(120, 400)})}
    exported = {"existence": 400, "counting_small": 30, "relations": 400, "counting_balanced": 400}
    groups = {"existence": None, "counting_small": ("counting.v1", 12), "relations": ("coco.v1", 0),
              "counting_balanced": ("counting.v1", 40)}
    manifest = {"instruments": {name: {"gate": gate, **certification_entry(gate), "counts": {"exported": exported[name]},
                                       "groups": groups[name] and {"pairer": groups[name][0], "groups": groups[name][1],
                                                                   "kept_pairs": exported[name], "valid_groups": None},
                                       "provenance": {}, "filters": {}}
                                for name, gate in gates.items()}, "sources": {}}
    manifest["instruments"]["swap"] = {"gate": None, **certification_entry(None), "counts": {"exported": 9},
                                       "provenance": {}, "filters": {}}
    lines = datacard_text(manifest).splitlines()
    assert lines[2:11] == [
        "## Verdicts",
        "",
        "| instrument | kept pairs | groups | verdict | strongest reading (95% CI) | what would change it |",
        "|---|---|---|---|---|---|",
        "| existence | 400 | n/a (no pairer) | certified | word from removed: 51.2% (46-56%) | nothing: certified |",
        "| counting_small | 30 | 12 | inconclusive: 30 pairs, about 120 needed | bayes: 38.7% (25-58%) | about 120 "
        "pairs: more source data; or a group-only release: 12 groups |",
        "| relations | 400 | 0 | solvable | word from removed: 75.0% (71-79%) | a filter that removes what the "
        "attacker reads (params.yaml adversarial) |",
        "| counting_balanced | 400 | 40 | over-balanced | word: 30.0% (26-35%) | a filter that stops at chance, not "
        "past it (params.yaml adversarial); or a group-only release: 40 groups |",
        "| swap | 9 | n/a (no pairer) | not tested (no release gate) | n/a | run the release gate (params.yaml gate) |"]
    assert lines[12].startswith("Certified: every trained text-only attacker's reading")
    text = "\n".join(lines)
    # every reading below, the transfer ones included, with its test
    # two readings, not 16: chance is excluded at 0.05 / 2, with fewer pairs
    assert ("| counting_small | bayes | word n-grams | 70.0% | 38.7% | 30 | 25-58% | inconclusive: about 120 pairs "
            "needed | pass (<= 55%) |") in text
    assert "| relations | word from removed |  | fitted on 500 removed | 75.0% | 400 | 71-79% | solvable (above " \
           "chance) | n/a |" in text
    assert "| existence | word | word n-grams | 70.0% | 50.0% | 400 | 45-55% | within chance ± 12 points | pass" in text
    assert text.index("## Verdicts") < text.index("## Instruments") < text.index("## Readings of trained")


def test_the_band_keys_of_the_gate_get_a_message_naming_margin_and_alpha():
    from foilforge.errors import ConfigError
    from foilforge.schema import check
    from foilforge.settings import gate_settings

    with pytest.raises(ConfigError, match=r"params.yaml gate: lower and upper are not gate keys: certification tests "
                                          r"every reading within chance \+- margin at level alpha; write margin"):
        check({"gate": {"lower": 0.4, "upper": 0.6}})
    with pytest.raises(ConfigError, match=r"params.yaml gate: lower and upper are not gate keys"):
        gate_settings({"gate": {"upper": 0.6}, "attackers": {}})
    with pytest.raises(ConfigError, match=r"params.yaml gate.margin: expected a value < 0.5"):
        check({"gate": {"margin": 0.5}})
