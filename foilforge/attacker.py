"""The attacker contract: trained text-only models that try to tell a pair's caption from its foil.

A fixed scorer (an LM's perplexity, an n-gram prior) is one judge; a set refined against it can still be
solved by a model *trained* on the benchmark's own pairs. An attacker sees only the two texts of a pair
(`Pair`, never the image) and is only ever evaluated out of fold, with the folds grouped by caption: the pairs
of one caption are all in training or all held out (`grouped_folds`), so no attacker scores a pair whose
caption it saw (`out_of_fold_margins`).

An attacker is a scikit-learn classifier of pairs (`Attacker`): `__init__` stores its hyperparameters and
`random_state` unchanged, so `get_params`, `set_params` and `sklearn.base.clone` work; `fit(pairs, y=None)`
learns from pairs whose first text is the caption (`y`: 1 where it is, 0 where the pair is given swapped) and
returns self; `margins(pairs)` (`decision_function`) gives one number per pair, > 0 when the attacker takes
the first text for the caption, < 0 the second, 0 when it cannot tell. Attackers are pair-antisymmetric:
swapping a pair's two texts negates its margin, so p(first is the caption) = 1 - p(swapped)
(`predict_proba`) and the order in which the texts are shown carries no information. `family` names what
the attacker sees; the release gate needs a family the filter did not use.

Attackers are plug-ins of ATTACKERS: every module of filters/attackers/ (one family a module) and the
`foilforge.attackers` entry-point group of other packages. foilforge.testing.check_attacker checks the
contract on any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from foilforge.registry import Registry

ATTACKERS = Registry("attacker", packages=("foilforge.filters.attackers",), entry_points="foilforge.attackers")


@dataclass(frozen=True)
class Pair:
    """What an attacker may see of one record: its two texts, per-side numbers, and its fold group."""

    caption: str
    foil: str
    group: str
    caption_features: tuple = field(default=())
    foil_features: tuple = field(default=())

    def swapped(self) -> "Pair":
        return Pair(self.foil, self.caption, self.group, self.foil_features, self.caption_features)


def group_key(caption: str) -> str:
    """Pairs with the same caption (whitespace and case aside) share a fold group."""
    return " ".join(caption.lower().split())


def pairs_from_records(records: list[dict], scorers: list[str] | None = None) -> list[Pair]:
    """Pairs of records with `caption`/`foil`; per-side features from `filters.plausibility.scores` when scored.

    `scorers`: the plausibility scorers whose numbers become features (default: those every record has).
    """
    def scores(record):
        return ((record.get("filters") or {}).get("plausibility") or {}).get("scores") or {}

    if scorers is None:
        names = [set(scores(r)) for r in records]
        scorers = sorted(set.intersection(*names)) if names else []
    pairs = []
    for record in records:
        found = scores(record)
        caption_side = tuple(float(found[s]["caption"]) for s in scorers if s in found)
        foil_side = tuple(float(found[s]["foil"]) for s in scorers if s in found)
        pairs.append(Pair(record["caption"], record["foil"], group_key(record["caption"]),
                          caption_side + lengths(record["caption"]), foil_side + lengths(record["foil"])))
    return pairs


def lengths(text: str) -> tuple[float, float]:
    """A text's length in words and in characters (the per-side numbers every pair carries last)."""
    return float(len(text.split())), float(len(text))


def text_pair(first: str, second: str, group: str) -> Pair:
    """A pair of bare texts (multiple-choice options): their lengths are the only per-side numbers."""
    return Pair(first, second, group, lengths(first), lengths(second))


def captions_first(pairs, y=None) -> list[Pair]:
    """The pairs with the caption first: as given where `y` is 1 (every pair when `y` is None), swapped where 0."""
    pairs = list(pairs)
    if y is None:
        return pairs
    labels = [int(v) for v in y]
    if len(labels) != len(pairs) or any(v not in (0, 1) for v in labels):
        raise ValueError(f"y must give 1 (caption first) or 0 (caption second) for each of the {len(pairs)} pairs")
    return [p if v == 1 else p.swapped() for p, v in zip(pairs, labels)]


#: get_params() keys describe() leaves out: the run's seed and the params key of the block, not the setting
UNDESCRIBED = ("random_state", "param_key")


class Attacker(ClassifierMixin, BaseEstimator):
    """Base contract; subclasses set `family`, take `random_state` in `__init__`, and implement `fit` and `margins`.

    `check()` (optional) checks the arguments when the registry builds the attacker from params.yaml.
    """

    family = ""
    registry_name = ""
    #: check() names arguments relative to the block; the registry prepends where the block is
    relative_messages = True

    def fit(self, pairs: list[Pair], y=None) -> "Attacker":
        raise NotImplementedError

    def margins(self, pairs: list[Pair]):
        raise NotImplementedError

    def decision_function(self, pairs: list[Pair]):
        return np.asarray(self.margins(list(pairs)), dtype=float)

    def predict_proba(self, pairs: list[Pair]):
        """Columns p(the second text is the caption), p(the first is): the logistic of the margin (for the linear
        pair models their fitted probability, for the others a score), so p(swapped) = 1 - p."""
        from scipy.special import expit

        first = expit(self.decision_function(pairs))
        return np.column_stack([1.0 - first, first])

    def predict(self, pairs: list[Pair]):
        """1 where the attacker takes the first text for the caption; 0 where the second, or where it cannot tell."""
        return (self.decision_function(pairs) > 0).astype(int)

    def describe(self) -> str:
        """`name(argument=value, ...)` of the hyperparameters (`get_params`), sequences shown as tuples whether
        params.yaml gave a list or the default a tuple."""
        params = self.get_params(deep=False)
        args = ", ".join(f"{k}={tuple(v) if isinstance(v, list) else v}" for k, v in sorted(params.items())
                         if k not in UNDESCRIBED)
        return f"{self.registry_name}({args})"


def correctness(margins):
    """Per pair: 1 when the attacker picks the caption, 0 the foil, 0.5 when it has no preference."""
    margins = np.asarray(margins, dtype=float)
    return np.where(margins > 0, 1.0, np.where(margins < 0, 0.0, 0.5))


def grouped_folds(groups: list[str], folds: int, seed: int) -> list[int]:
    """A fold index per pair; the pairs of one group share a fold; groups spread over folds by a seeded shuffle.

    What scikit-learn's GroupKFold(shuffle=True) does not: the groups are dealt round-robin in the order of a
    permutation of the sorted group names by numpy's `default_rng(seed)` (GroupKFold cuts a legacy RandomState
    permutation into contiguous blocks, so the same seed gives other folds), and fewer groups than folds give
    one fold a group instead of an error. Every seed in the pipeline's outputs names these folds.
    """
    unique = sorted(set(groups))
    folds = max(1, min(folds, len(unique)))
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[j]: rank % folds for rank, j in enumerate(order)}
    return [fold_of[g] for g in groups]


def out_of_fold_margins(make, pairs: list[Pair], folds: int = 5, seed: int = 0, extra: list[Pair] = (),
                        shared=None):
    """Margins of every pair from an attacker (`make()` builds a fresh one, fitted with random_state `seed`)
    fitted on the other folds only.

    `extra`: pairs scored but never trained on (a caption's alternative foils); each is scored by the model of
    the fold its group falls in, or by the last fold's model when its group is not among `pairs`.
    `shared`: `shared_differences(make, pairs, extra)`, when the caller already has it (several partitions).
    Returns (margins of pairs, margins of extra).
    """
    if not pairs:
        return np.zeros(0), np.zeros(len(extra))
    if shared is None:
        shared = shared_differences(make, pairs, extra)
    fold = grouped_folds([p.group for p in pairs], folds, seed)
    fits = [fold_margins(make, pairs, extra, shared, fold, k, seed) for k in sorted(set(fold))]
    return assemble_margins(fits, len(pairs), len(extra))


def fold_margins(make, pairs: list[Pair], extra: list[Pair], shared, fold: list[int], k: int, seed: int):
    """One fold's work, the unit the engine maps: an attacker (random_state `seed`) fitted on every fold but `k`,
    its margins on fold k and on the extra pairs whose group falls in k (or in no fold: the last k scores those).

    Returns (held indices, their margins, extra indices, their margins); no indices when every pair is in fold k.
    """
    fold_of_group = dict(zip((p.group for p in pairs), fold))
    train = [i for i, f in enumerate(fold) if f != k]
    if not train:  # one group only: nothing to learn from, no preference
        return [], [], [], []
    held = [i for i, f in enumerate(fold) if f == k]
    extra_held = [i for i, p in enumerate(extra) if fold_of_group.get(p.group, k) == k]
    model = make().set_params(random_state=seed)
    if shared is not None:
        rows, extra_rows = shared
        model.fit_difference(rows[train])
        return (held, list(model.margins_difference(rows[held])), extra_held,
                list(model.margins_difference(extra_rows[extra_held])) if extra_held else [])
    model.fit([pairs[i] for i in train])
    return (held, list(model.margins([pairs[i] for i in held])), extra_held,
            list(model.margins([extra[i] for i in extra_held])) if extra_held else [])


def assemble_margins(fits, n_pairs: int, n_extra: int):
    """(margins, extra margins) from fold_margins results in fold order (a later fold overwrites, as documented)."""
    margins, extra_margins = np.zeros(n_pairs), np.zeros(n_extra)
    for held, held_margins, extra_held, extra_held_margins in fits:
        margins[held] = held_margins
        extra_margins[extra_held] = extra_held_margins
    return margins, extra_margins


def shared_differences(make, pairs: list[Pair], extra: list[Pair] = ()):
    """(difference rows of pairs, of extra) on a feature map built once on all their texts, for attackers whose
    margins do not change by it (`shares_features`); None for the others (they build features per fold).

    The map sees no label, only the texts (`fit_features`: which n-grams occur, hidden states); a caller that
    runs several partitions of the same pairs computes this once and passes it as `shared`.
    """
    probe = make()
    if not getattr(probe, "shares_features", False):
        return None
    probe.fit_features(list(pairs) + list(extra))
    return probe.vectorize(list(pairs)), probe.vectorize(list(extra)) if extra else None
