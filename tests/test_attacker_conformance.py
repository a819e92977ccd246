"""One contract every registered attacker passes (after scikit-learn's check_estimator).

`foilforge.testing.check_attacker` runs the checks on any attacker; here on every registered family, the
model-backed ones on tiny random models built by tests/tiny_models.py and loaded through `from_pretrained(path)`,
and on three broken attackers, to show each property can fail. A new family is under contract as soon as it is
registered: a model-backed one adds its arguments to MODEL_ARGS.
"""

from __future__ import annotations

import numpy as np
import pytest

from foilforge import testing
from foilforge.filters.attackers import ATTACKERS, WordNgramAttacker, build_attacker

#: registry name -> the arguments of a model-backed attacker, given the tiny_models fixture
MODEL_ARGS = {
    "transformer_pair.v1": lambda tm: {"model": {"name_or_path": str(tm.bert_encoder_only()), "device": "cpu",
                                                 "batch_size": 16}, "epochs": 1},
    "hidden_probe.v1": lambda tm: {"model": {"name_or_path": str(tm.bert_encoder_only()), "device": "cpu",
                                             "batch_size": 32}},
}


def test_registered_attackers_are_pinned():
    assert ATTACKERS.names() == ["boosted_features.v1", "boosted_features.v2", "char_ngram.v1", "edit_tokens.v1", "hidden_probe.v1",
                                 "length.v1", "ngram_bayes.v1", "scorer_features.v1", "transformer_pair.v1",
                                 "word_ngram.v1"]


@pytest.mark.parametrize("name", ATTACKERS.names())
def test_every_registered_attacker_keeps_the_contract(name, request):
    if name in MODEL_ARGS:
        args = MODEL_ARGS[name](request.getfixturevalue("tiny_models"))
        testing.check_attacker(ATTACKERS.build(name, args, where=f"test ({name})"))
    else:
        testing.check_attacker(name)


def test_a_grid_searched_attacker_keeps_the_contract():
    """The release gate's nested grid search (`gate.grid`) is an attacker too: its choice is refitted per fold."""
    testing.check_attacker(build_attacker({"attacker": "word_ngram.v1", "grid": {"C": [0.1, 1.0]}},
                                          "params.yaml attackers.word"))


class PrefersTheFirstText(WordNgramAttacker):
    """Broken: a bias towards the text shown first (as a logistic regression with an intercept has)."""

    def margins(self, pairs):
        return super().margins(pairs) + 0.5


class IgnoresItsSeed(WordNgramAttacker):
    """Broken: weights jittered by an unseeded generator, so two fits with the same random_state differ."""

    def fit_difference(self, difference):
        super().fit_difference(difference)
        self.classifier_.coef_ = self.classifier_.coef_ + np.random.default_rng().normal(0, 0.01,
                                                                                          self.classifier_.coef_.shape)
        return self


class ReadsTheHeldOutSides(WordNgramAttacker):
    """Broken: its shared feature map (built on every text of an out-of-fold run, held-out ones too) marks the
    texts that are captions there, so the held-out fold's labels reach the models that score it."""

    shares_features = True

    def fit_features(self, pairs):
        super().fit_features(pairs)
        self.captions_ = {p.caption for p in pairs}
        return self

    def features(self, texts, sides):
        from scipy import sparse

        marks = sparse.csr_matrix(np.array([[float(t in self.captions_)] for t in texts]))
        return sparse.hstack([super().features(texts, sides), marks]).tocsr()

    def feature_names_out(self):
        return super().feature_names_out() + ["was a caption"]


@pytest.mark.parametrize("broken, message", [
    (PrefersTheFirstText, "not antisymmetric"),
    (IgnoresItsSeed, "not deterministic"),
    (ReadsTheHeldOutSides, "predictions are not out of fold"),
])
def test_check_attacker_names_the_broken_property(broken, message):
    with pytest.raises(AssertionError, match=message):
        testing.check_attacker(broken)


def test_check_attacker_catches_arguments_changed_in_init():
    class StoresATuple(WordNgramAttacker):
        def __init__(self, ngram_range=[1, 2], C=1.0, min_df=1, random_state=0):
            super().__init__(tuple(ngram_range), C, min_df, random_state)

    with pytest.raises(AssertionError, match="clone"):
        testing.check_attacker(StoresATuple)
