"""Batches by token budget (foilforge/batching.py token_budget_batches) in GRUEN and NLI: the same scores as
one sentence at a time, within float tolerance, in fewer or wider batches than rows alone give."""

from __future__ import annotations

import pytest

from foilforge.batching import token_budget_batches
from foilforge.errors import ConfigError
from foilforge.filter import build_filter

# lengths 5, 3, 9, 3, 7, 4 -> sorted (stable): index 1 (3), 3 (3), 5 (4), 0 (5), 4 (7), 2 (9)
LENGTHS = [5, 3, 9, 3, 7, 4]


def test_rows_alone_without_a_budget():
    assert list(token_budget_batches(LENGTHS, 4)) == [[1, 3, 5, 0], [4, 2]]


def test_budget_cuts_by_padded_tokens():
    # 12 tokens: [3, 3, 4] is 3 rows x 4 = 12; adding 5 would be 4 x 5 = 20; [5] then [7] (2 x 7 = 14 > 12); 9 alone
    assert list(token_budget_batches(LENGTHS, 100, 12)) == [[1, 3, 5], [0], [4], [2]]
    # both caps: 2 rows at most
    assert list(token_budget_batches(LENGTHS, 2, 100)) == [[1, 3], [5, 0], [4, 2]]
    # a row longer than the budget goes alone
    assert list(token_budget_batches([50, 2, 2], 8, 10)) == [[1, 2], [0]]


SENTENCES = ["a man is riding a bus .", "two dogs", "a woman holding a plate of pizza near the street with two cars .",
             "there is a cat on the table .", "one child", "three people are playing frisbee in the field ."] * 4


def gruen_filter(lm_dir, cola_dir, **extra):
    return build_filter({"models": {"grammar_lm": {"name_or_path": str(lm_dir), **extra},
                                    "cola": {"name_or_path": str(cola_dir), **extra}}}, "grammaticality")


def test_gruen_by_token_budget_equals_one_at_a_time(tiny_models):
    lm_dir, cola_dir = tiny_models.bert_mlm(), tiny_models.bert_classifier()
    records = [{"foil": s} for s in SENTENCES]
    budgeted = gruen_filter(lm_dir, cola_dir, batch_size=64, max_batch_tokens=40)
    single = gruen_filter(lm_dir, cola_dir, batch_size=1)
    budget_results, single_results = budgeted.score(records), single.score(records)
    for a, b in zip(budget_results, single_results):
        assert a["score"] == pytest.approx(b["score"], abs=1e-5)
        assert a["lm_perplexity"] == pytest.approx(b["lm_perplexity"], rel=1e-5)
        assert a["cola_logit"] == pytest.approx(b["cola_logit"], abs=1e-5)
    # the budget, not the 64 rows, cut the batches the model ran: more than one, none over 40 padded tokens
    gruen = budgeted.scorer()
    shapes = []
    model = gruen.lm

    def recording(**batch):
        shapes.append(tuple(batch["input_ids"].shape))
        return model(**batch)

    gruen.lm = recording
    gruen.perplexities(list(dict.fromkeys(SENTENCES)))
    assert len(shapes) > 1 and all(rows * width <= 40 for rows, width in shapes)
    assert sum(rows for rows, _ in shapes) == len(set(SENTENCES))


def test_nli_by_token_budget_equals_one_at_a_time(tiny_models):
    path = tiny_models.albert_nli()
    records = [{"caption": s, "foil": t} for s, t in zip(SENTENCES, reversed(SENTENCES))]
    block = {"name_or_path": str(path), "sanity_check": False}
    budgeted = build_filter({"models": {"nli": {**block, "batch_size": 64, "max_batch_tokens": 60}}}, "nli").score(records)
    single = build_filter({"models": {"nli": {**block, "batch_size": 1}}}, "nli").score(records)
    for a, b in zip(budgeted, single):
        assert a["label"] == b["label"]
        for label in ("entailment", "neutral", "contradiction"):
            assert a["probs"][label] == pytest.approx(b["probs"][label], abs=1e-5)


@pytest.mark.parametrize("value", [0, -3, True, "4096", 2.5])
def test_a_bad_budget_is_refused_naming_the_key(value, tiny_models):
    with pytest.raises(ConfigError, match=r"models\.nli\.max_batch_tokens must be an integer >= 1"):
        build_filter({"models": {"nli": {"name_or_path": "x", "max_batch_tokens": value}}}, "nli").check()
    with pytest.raises(ConfigError, match=r"models\.cola\.max_batch_tokens must be an integer >= 1"):
        build_filter({"models": {"grammar_lm": {"name_or_path": "x"},
                                 "cola": {"name_or_path": "y", "max_batch_tokens": value}},
                      "filters": {"grammaticality": {"variant": "gruen"}}}, "grammaticality").check()
