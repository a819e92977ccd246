"""One contract every registered filter passes (after scikit-learn's check_estimator).

Each filter runs on tiny random models built by tests/tiny_models.py and
loaded through `from_pretrained(path)`. A new filter is under contract as soon
as it is registered: add its params and thresholds to CASES.
"""

from __future__ import annotations

import copy
import importlib.util

import pytest

from filters.base import FILTERS, build_filter, keep_rules, scored_filters
from pipeline.stages.select import select
from pipeline.errors import ConfigError

# foil records as foilers write them: VALSE's changed items too (the bias stage and the refinement's JS bound read them)
RECORDS = [
    {"id": f"r{i:02d}", "caption": caption, "foil": foil,
     "classes": sorted(set(caption.split()) - set(foil.split())), "classes_foil": sorted(set(foil.split()) - set(caption.split()))}
    for i, (caption, foil) in enumerate([
        ("a man is sitting on a table.", "a man is sitting under a table."),
        ("two dogs are playing in the field.", "one dog is playing in the field."),
        ("a woman holding a plate of pizza.", "a woman holding some plates of pizza."),
        ("there is a cat.", "there are no cats."),
        ("the children are riding a bus on the street near the car.", "the children are riding a bus in the street near the car."),
        ("a person standing next to a frisbee.", "a person standing behind a frisbee."),
        ("people eating.", "person eating."),
        ("a dog. it is on the table.", "a dog. it is under the table."),
        ("is this photo in color? yes.", "is this photo in color? no."),
        ("a man riding a bus with his dog and two cats in front of the table next to a field of pizza.",
         "a man riding a bus with his dog and two cats behind the table next to a field of pizza."),
        ("cat", "cats"),
        ("the plate is on the table.", "the plate is on the table. the table is on the plate."),
    ])
]

# filter case -> (registry name, params builder, thresholds from loose to strict)
CASES = {
    "length": ("length.v1", lambda tm: {"models": {"length_tokenizer": {"name_or_path": str(tm.bert_mlm())}}},
               [{"max_tokens": 1000}, {"max_tokens": 12}, {"max_tokens": 9}, {"max_tokens": 6}, {"max_tokens": 0}]),
    "grammaticality-gruen": (
        "grammaticality.v1",
        lambda tm: {"models": {"grammar_lm": {"name_or_path": str(tm.bert_mlm()), "batch_size": 3},
                               "cola": {"name_or_path": str(tm.bert_classifier()), "batch_size": 3}},
                    "filters": {"grammaticality": {"variant": "gruen"}}},
        None,  # quantiles of the scores, see _grammaticality_thresholds
    ),
    "grammaticality-linkgrammar": ("grammaticality.v1", lambda tm: {"filters": {"grammaticality": {"variant": "linkgrammar"}}}, None),
    "grammaticality-linkgrammar-relative": (
        "grammaticality.v1", lambda tm: {"filters": {"grammaticality": {"variant": "linkgrammar", "relative_to_caption": True}}}, None),
    "nli": ("nli.v1",
            lambda tm: {"models": {"nli": {"name_or_path": str(tm.albert_nli()), "batch_size": 4, "sanity_check": False}}},
            [{"keep": ["entailment", "neutral", "contradiction"]}, {"keep": ["neutral", "contradiction"]},
             {"keep": ["contradiction"]}]),
    "plausibility": ("plausibility.v1",
                     lambda tm: {"filters": {"plausibility": {"scorers": {
                         "lm": {"kind": "causal_lm", "name_or_path": str(tm.gpt2_lm()), "batch_size": 3},
                         "ngram": {"kind": "ngram", "order": 2, "folds": 2}}}}},
                     # no refinement keeps everything; balancing on both scorers keeps a subset of it
                     [{"scorers": []}, {"scorers": ["lm", "ngram"], "bins": 1}]),
}


def test_registered_filters_are_pinned():
    """A filter cannot silently disappear from (or appear in) the registry."""
    assert FILTERS.names() == ["grammaticality.v1", "length.v1", "nli.v1", "plausibility.v1"]
    assert {case[0] for case in CASES.values()} == set(FILTERS.names())


@pytest.fixture(params=sorted(CASES))
def case(request, tiny_models):
    registry, make_params, thresholds = CASES[request.param]
    if "linkgrammar" in request.param and importlib.util.find_spec("linkgrammar") is None:
        pytest.skip("Link Grammar bindings (Debian python3-link-grammar) not installed")
    params = make_params(tiny_models)
    name = registry.rsplit(".", 1)[0]
    return name, params, build_filter(params, name), thresholds


@pytest.fixture
def scored(case):
    name, params, f, _ = case
    return f.score(RECORDS)


def _numbers(result, prefix=""):
    """Flatten a result to {path: value} so results compare key by key with a tolerance."""
    out = {}
    for key, value in result.items():
        if isinstance(value, dict):
            out.update(_numbers(value, f"{prefix}{key}."))
        elif isinstance(value, list):
            out.update(_numbers(dict(enumerate(value)), f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _thresholds(case, scored):
    name, _, _, thresholds = case
    if thresholds is not None:
        return thresholds
    scores = sorted(r["score"] for r in scored)
    return [{"min_score": s} for s in [-1.0, *scores, 2.0]]


def test_one_result_per_record_with_provenance(case, scored):
    name, _, f, _ = case
    assert len(scored) == len(RECORDS)
    for result in scored:
        assert result["filter"] == f.registry_name
        assert {"model", "variant", "score"} <= set(result)
        assert isinstance(result["score"], (int, float))


def test_batched_equals_single_item(case, scored):
    _, _, f, _ = case
    if f.corpus_level:
        pytest.skip(f"{f.registry_name} scores are corpus statistics (an n-gram estimated on the captions scored "
                    f"together); order independence is checked by test_score_is_pure_and_order_preserving")
    for record, batched in zip(RECORDS, scored):
        single = f.score([record])[0]
        a, b = _numbers(batched), _numbers(single)
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-5), (record["id"], key)
            else:
                assert a[key] == b[key], (record["id"], key)


def test_score_is_pure_and_order_preserving(case, scored):
    _, _, f, _ = case
    records = copy.deepcopy(RECORDS)
    again = f.score(records[::-1])
    assert records == RECORDS  # inputs untouched
    assert [r["score"] for r in again[::-1]] == pytest.approx([r["score"] for r in scored], rel=1e-5, abs=1e-5)
    assert f.score([]) == []


def test_select_keeps_a_subset_in_input_order(case, scored):
    name, _, _, _ = case
    records = [{**r, "filters": {name: s}} for r, s in zip(RECORDS, scored)]
    for thresholds in _thresholds(case, scored):
        kept, rejected, metrics = select(records, {name: thresholds})
        ids = [r["id"] for r in kept]
        input_ids = [r["id"] for r in RECORDS]
        assert ids == [i for i in input_ids if i in set(ids)]
        assert len(kept) + len(rejected) == len(RECORDS) == metrics["input"]
        assert all(r["filters"][name]["passed"] for r in kept)
        assert not any(r["filters"][name]["passed"] for r in rejected)


def test_stricter_threshold_never_keeps_more(case, scored):
    name, _, _, _ = case
    records = [{**r, "filters": {name: s}} for r, s in zip(RECORDS, scored)]
    previous = None
    for thresholds in _thresholds(case, scored):
        kept = {r["id"] for r in select(records, {name: thresholds})[0]}
        if previous is not None:
            assert kept <= previous, thresholds
        previous = kept


def test_builds_from_params_and_rejects_unknown_args(case):
    name, params, f, _ = case
    with pytest.raises(ConfigError, match="unknown argument.*bogus"):
        FILTERS.build(f.registry_name, {"bogus": 1})
    with pytest.raises(ConfigError, match=r"params.yaml filters.%s.*unknown argument\(s\) bogus" % name):
        build_filter({**params, "filters": {**params.get("filters", {}), name: {"bogus": 1}}}, name)
    rules = {"filters": {"run": {"x": [name]}, "keep": {"x": {name: {"bogus_threshold": 1}}}}}
    with pytest.raises(ConfigError, match=r"filters.keep.x.%s: unknown argument\(s\) bogus_threshold" % name):
        keep_rules(rules, "x")
    assert scored_filters({"filters": {"run": {"x": [name]}}}, "x") == [name]
    assert list(keep_rules({"filters": {"run": {"x": [name]}, "keep": {"x": {name: {}}}}}, "x")) == [name]
