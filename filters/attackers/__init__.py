"""Trained text-only attackers: models fitted on some caption/foil pairs that try to tell caption from foil on others.

The contract (scikit-learn estimators over pairs, grouped out-of-fold runs) is foilforge/attacker.py's. One
family a module here, each registered as `<name>.v1` in ATTACKERS, `.v2` where a family's learner changed (other packages add theirs through the
`foilforge.attackers` entry-point group):

* `word_ngram`: logistic regression on the difference of the two texts' binary word n-gram vectors (no
  intercept, both orders in training: antisymmetric; the shared base is base.py);
* `char_ngram`: the same on character n-grams within word boundaries;
* `scorer_features`: the same on the text-only scorers' numbers stored on the records (each plausibility
  scorer's log-probability of each side) plus lengths in words and characters, standardised;
* `ngram_bayes`: naive Bayes over word and character n-grams of each text alone (generative, per text:
  another learner than the pair models);
* `edit_tokens`: logistic regression on the edit itself, the words each text has where they differ and which
  word replaced which;
* `boosted_features`: gradient-boosted trees on the difference of the dense features (scorer numbers,
  lengths, numeral/negation/-s counts): non-linear (v1 by scikit-learn, v2 by LightGBM);
* `length`: the same on the two texts' lengths alone (the shortcut an addition builds into its pairs);
* `transformer_pair`: a small transformer fine-tuned as a pair classifier;
* `hidden_probe`: logistic regression on a frozen model's hidden states of the two texts.

Beside them: `build_attacker` and the nested grid search (grid_search.py), out-of-fold runs of several
attackers as engine jobs and transfer fits (runs.py), multiple-choice items (choices.py), and the release
gate's figures (gate.py).
"""

from foilforge.attacker import (
                                       ATTACKERS,
                                       Attacker,
                                       Pair,
                                       captions_first,
                                       correctness,
                                       fold_margins,
                                       group_key,
                                       grouped_folds,
                                       out_of_fold_margins,
                                       pairs_from_records,
                                       shared_differences,
                                       text_pair,
)
from foilforge.filters.attackers.base import LinearPairAttacker, NgramPairAttacker
from foilforge.filters.attackers.boosted_features import BoostedFeaturesAttacker, surface_features
from foilforge.filters.attackers.char_ngram import CharNgramAttacker
from foilforge.filters.attackers.choices import (
                                       FoldChoices,
                                       choose,
                                       fold_choices,
                                       multiple_choice_pairs,
                                       out_of_fold_choice_runs,
                                       out_of_fold_choices,
)
from foilforge.filters.attackers.edit_tokens import EditTokensAttacker
from foilforge.filters.attackers.gate import attack_summary, certify, certify_transfer
from foilforge.filters.attackers.grid_search import GridSearchAttacker, build_attacker, grid_settings
from foilforge.filters.attackers.hidden_probe import HiddenStateProbeAttacker
from foilforge.filters.attackers.length import LengthAttacker
from foilforge.filters.attackers.ngram_bayes import NgramBayesAttacker
from foilforge.filters.attackers.runs import (
    FoldFits,
    ForkedRunner,
    fold_jobs,
    out_of_fold_runs,
    run_here,
    transfer_margins,
)
from foilforge.filters.attackers.scorer_features import ScorerFeaturesAttacker
from foilforge.filters.attackers.transformer_pair import TransformerPairAttacker
from foilforge.filters.attackers.word_ngram import WordNgramAttacker

__all__ = [
    "ATTACKERS", "Attacker", "BoostedFeaturesAttacker", "CharNgramAttacker", "EditTokensAttacker", "FoldChoices",
    "FoldFits", "ForkedRunner", "GridSearchAttacker", "HiddenStateProbeAttacker", "LengthAttacker",
    "LinearPairAttacker", "NgramBayesAttacker", "NgramPairAttacker", "Pair", "ScorerFeaturesAttacker",
    "TransformerPairAttacker", "WordNgramAttacker",
    "attack_summary", "build_attacker", "captions_first", "certify", "certify_transfer", "choose", "correctness",
    "fold_choices", "fold_jobs", "fold_margins", "grid_settings", "group_key", "grouped_folds",
    "multiple_choice_pairs", "out_of_fold_choice_runs", "out_of_fold_choices", "out_of_fold_margins",
    "out_of_fold_runs", "pairs_from_records", "run_here", "shared_differences", "surface_features", "text_pair",
    "transfer_margins",
]
