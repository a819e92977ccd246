"""One contract every registered filter passes (after scikit-learn's check_estimator).

The checks are foilforge.testing's (`check_filter` runs them all, for a filter in any
package); here each registered filter runs each check on tiny random models built by
tests/tiny_models.py and loaded through `from_pretrained(path)`. A new filter is under
contract as soon as it is registered: add its params and thresholds to CASES.
"""

from __future__ import annotations

import importlib.util

import pytest

from foilforge import testing
from foilforge.filter import FILTERS, Filter, build_filter, scored_filters

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


def _quantile_thresholds(scored):
    """grammaticality: a min_score at every score, from below the lowest to above the highest."""
    return [{"min_score": s} for s in [-1.0, *sorted(r["score"] for r in scored), 2.0]]


@pytest.fixture(params=sorted(CASES))
def case(request, tiny_models):
    registry, make_params, thresholds = CASES[request.param]
    if "linkgrammar" in request.param and importlib.util.find_spec("linkgrammar") is None:
        pytest.skip("Link Grammar bindings (Debian python3-link-grammar) not installed")
    params = make_params(tiny_models)
    name = registry.rsplit(".", 1)[0]
    f = build_filter(params, name)
    records = [dict(r) for r in testing.FILTER_RECORDS]
    return f, params, records, f.score(records), thresholds or _quantile_thresholds


@pytest.mark.parametrize("check", testing.FILTER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_contract(case, check):
    f, params, records, scored, thresholds = case
    testing.run_filter_check(check, f, params, records, scored, thresholds)


def test_scored_filters_and_keep_rules_name_the_filter(case):
    f = case[0]
    assert scored_filters({"instruments": {"x": {"filters": {"run": [f.name]}}}}, "x") == [f.name]


# ---------------------------------------------------------------- broken filters fail the checks

class _WordCount(Filter):
    """Keeps foils of at most `max_words` words: a well-behaved filter the broken ones below bend."""

    name = "word_count"
    fields = ("foil",)

    def __init__(self, variant: str = "words"):
        self.variant = variant

    def score(self, records, progress=False):
        return [{"filter": self.registry_name, "model": None, "variant": "words", "score": len(r["foil"].split())}
                for r in records]

    @staticmethod
    def keep(result, /, *, max_words: int = 100) -> bool:
        return result["score"] <= max_words


class _BatchMean(_WordCount):
    """Scores relative to the batch's mean: a record's score depends on its neighbours."""

    def score(self, records, progress=False):
        counts = [len(r["foil"].split()) for r in records]
        mean = sum(counts) / max(len(counts), 1)
        return [{"filter": self.registry_name, "model": None, "variant": "words", "score": float(c - mean)}
                for c in counts]


class _Inverted(_WordCount):
    """A stricter (lower) max_words keeps more: the threshold runs the wrong way."""

    @staticmethod
    def keep(result, /, *, max_words: int = 100) -> bool:
        return result["score"] >= max_words


@pytest.fixture
def register_broken():
    """Register a filter class for one test; the registry is as it was afterwards."""
    with FILTERS.temporarily():
        yield lambda cls, name: FILTERS.register(name)(cls)


def test_a_well_behaved_filter_passes_check_filter(register_broken):
    testing.check_filter(register_broken(_WordCount, "word_count.v1"), {}, [{"max_words": 20}, {"max_words": 6}])


@pytest.mark.parametrize("broken, message", [
    (_BatchMean, "in a batch"),
    (_Inverted, "keeps"),
])
def test_a_broken_filter_fails_check_filter(register_broken, broken, message):
    class Broken(broken):
        name = "word_count"

    register_broken(Broken, "word_count.v1")
    with pytest.raises(AssertionError, match=message):
        testing.check_filter(Broken, {}, [{"max_words": 20}, {"max_words": 6}])


class _CorpusShare(_WordCount):
    """A declared corpus statistic: each foil's share of the batch's words (its value depends on the batch)."""

    corpus_level = True

    def score(self, records, progress=False):
        counts = [len(r["foil"].split()) for r in records]
        total = max(sum(counts), 1)
        return [{"filter": self.registry_name, "model": None, "variant": "words", "score": c / total,
                 **({"alone": True} if len(records) == 1 else {})} for c in counts]


def test_a_corpus_statistic_may_score_otherwise_alone(register_broken):
    class Honest(_CorpusShare):
        name = "word_count"

        def score(self, records, progress=False):
            return [{k: v for k, v in row.items() if k != "alone"} for row in super().score(records, progress)]

    register_broken(Honest, "word_count.v1")
    testing.check_filter(Honest, {}, [{"max_words": 20}])


def test_a_corpus_statistic_may_not_change_its_fields_alone(register_broken):
    class Reshaped(_CorpusShare):
        name = "word_count"

    register_broken(Reshaped, "word_count.v1")
    with pytest.raises(AssertionError, match="alone gives other keys"):
        testing.check_filter(Reshaped, {}, [{"max_words": 20}])


def test_check_filter_rejects_a_filter_that_accepts_unknown_args(register_broken):
    class Lenient(_WordCount):
        name = "word_count"

        @classmethod
        def thresholds(cls, args, where):
            return dict(args)

    register_broken(Lenient, "word_count.v1")
    with pytest.raises(AssertionError, match="keep rule accepted an unknown threshold"):
        testing.check_filter(Lenient, {}, [{"max_words": 20}])
