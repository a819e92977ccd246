"""BinaryNgramVectorizer: CountVectorizer(binary=True)'s rows, each text split once a stage."""

import json
import random

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer

from foilforge import stage_state
from foilforge.attacker import text_pair
from foilforge.filters.attackers import NgramBayesAttacker, WordNgramAttacker
from foilforge.filters.attackers.ngrams import _TABLES, BinaryNgramVectorizer

WORD = r"(?u)\b\w+\b|n't"
SETTINGS = [dict(analyzer="word", ngram_range=(1, 3), token_pattern=WORD),
            dict(analyzer="word", ngram_range=(1, 1)),
            dict(analyzer="char_wb", ngram_range=(2, 5)),
            dict(analyzer="char_wb", ngram_range=(2, 4))]


def assert_same_rows(expected, found):
    assert type(found) is type(expected)
    assert found.shape == expected.shape and found.dtype == expected.dtype
    assert found.indices.dtype == expected.indices.dtype and found.indptr.dtype == expected.indptr.dtype
    assert np.array_equal(found.indptr, expected.indptr)
    assert np.array_equal(found.indices, expected.indices)
    assert np.array_equal(found.data, expected.data)


@pytest.fixture(autouse=True)
def fresh_stage():
    stage_state.reset()
    yield
    stage_state.reset()


def released_texts(shared) -> list[str]:
    texts = []
    for name in ("foil-it.json", "counting-small-quant.json", "coreference-standard.json"):
        for item in json.loads(shared("data", "valse-dev", name).read_text(encoding="utf-8")).values():
            texts += [item["caption"], item["foil"]]
    return texts


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"{s['analyzer']}{s['ngram_range']}")
def test_rows_equal_countvectorizer_on_released_texts(shared, setting):
    texts = released_texts(shared) + ["", "...", "Don't count 3 dogs", "ÉCOLE café"]
    rng = random.Random(0)
    for _ in range(4):  # several fits in one stage: the table grows between them
        fit, other = rng.sample(texts, 300), rng.sample(texts, 200)
        expected = CountVectorizer(binary=True, **setting).fit(fit)
        found = BinaryNgramVectorizer(**setting).fit(fit)
        assert list(found.get_feature_names_out()) == list(expected.get_feature_names_out())
        assert found.vocabulary_ == expected.vocabulary_
        assert_same_rows(expected.transform(other), found.transform(other))
        assert_same_rows(expected.transform(fit), found.transform(fit))


def test_unknown_ngrams_are_dropped_and_columns_are_sorted_strings():
    vectorizer = BinaryNgramVectorizer(analyzer="word", token_pattern=WORD).fit(["the dog runs", "a cat"])
    assert list(vectorizer.get_feature_names_out()) == ["a", "cat", "dog", "runs", "the"]
    rows = vectorizer.transform(["the cat sleeps", "zebra", "dog dog the"]).toarray()
    assert rows.tolist() == [[0, 1, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 1, 0, 1]]


def test_each_text_is_split_once_a_stage():
    calls = []
    vectorizer = BinaryNgramVectorizer(analyzer="word")
    table = vectorizer._table()
    analyze = table.analyze
    table.analyze = lambda text: calls.append(text) or analyze(text)
    for _ in range(3):
        BinaryNgramVectorizer(analyzer="word").fit(["red ball", "blue ball"]).transform(["red ball", "green"])
    assert sorted(calls) == ["blue ball", "green", "red ball"]
    stage_state.reset()  # the next stage of a long-lived worker starts with no table
    assert _TABLES == {}


def test_empty_vocabulary_raises_like_countvectorizer_unless_allowed():
    with pytest.raises(ValueError, match="empty vocabulary"):
        BinaryNgramVectorizer(analyzer="word").fit(["...", "!"])
    empty = BinaryNgramVectorizer(analyzer="word", allow_empty=True).fit(["...", "!"])
    assert empty.transform(["a dog"]).shape == (1, 0)


def test_word_ngram_without_any_token_has_no_preference():
    pairs = [text_pair("...", "!", "g1"), text_pair("?", "..", "g2")]
    attacker = WordNgramAttacker().fit(pairs)
    assert attacker.margins(pairs).tolist() == [0.0, 0.0]
    assert attacker.top_features() == []


def test_ngram_bayes_margins_equal_those_over_countvectorizer(shared):
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import make_pipeline, make_union

    items = list(json.loads(shared("data", "valse-dev", "foil-it.json").read_text(encoding="utf-8")).values())
    pairs = [text_pair(item["caption"], item["foil"], str(k)) for k, item in enumerate(items[:120])]
    train, held = pairs[:80], pairs[80:]
    attacker = NgramBayesAttacker().fit(train)
    reference = make_pipeline(make_union(
        CountVectorizer(analyzer="word", ngram_range=(1, 2), binary=True, token_pattern=WORD),
        CountVectorizer(analyzer="char_wb", ngram_range=(2, 4), binary=True)), MultinomialNB(alpha=1.0))
    reference.fit([p.caption for p in train] + [p.foil for p in train], [1] * len(train) + [0] * len(train))
    first = reference.predict_log_proba([p.caption for p in held])
    second = reference.predict_log_proba([p.foil for p in held])
    expected = (first[:, 1] - first[:, 0]) - (second[:, 1] - second[:, 0])
    assert np.array_equal(attacker.margins(held), expected)


def test_ngram_bayes_on_a_shared_vocabulary_gives_the_per_fold_margins_bit_for_bit(shared):
    """The out-of-fold run builds NgramBayes' vocabulary once on every text (shares_features); its margins are
    those of a vocabulary built on each fold's training texts alone, and a grid's alphas share that one map."""
    from foilforge.attacker import out_of_fold_margins, shared_differences
    from foilforge.filters.attackers.grid_search import build_attacker

    items = list(json.loads(shared("data", "valse-dev", "foil-it.json").read_text(encoding="utf-8")).values())
    pairs = [text_pair(item["caption"], item["foil"], str(k // 2)) for k, item in enumerate(items[:150])]
    extra = [text_pair(item["caption"], item["foil"] + " indeed", str(k)) for k, item in enumerate(items[150:170])]

    class PerFold(NgramBayesAttacker):
        shares_features = False  # the vocabulary of each fold's training texts, as `fit` builds it

    for alpha in (0.1, 1.0):
        rows = shared_differences(lambda: NgramBayesAttacker(alpha=alpha), pairs, extra)
        assert rows is not None and rows[0].shape[0] == len(pairs)
        found = out_of_fold_margins(lambda: NgramBayesAttacker(alpha=alpha), pairs, 5, 3, extra, shared=rows)
        expected = out_of_fold_margins(lambda: PerFold(alpha=alpha), pairs, 5, 3, extra)
        assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])
        assert np.abs(found[0]).max() > 0
    grid = build_attacker({"attacker": "ngram_bayes.v1", "grid": {"alpha": [0.1, 1.0]}}, "gate.grid.ngram_bayes")
    assert grid.features_key({"alpha": 0.1}) == grid.features_key({"alpha": 1.0})
