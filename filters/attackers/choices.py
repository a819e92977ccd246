"""Multiple-choice items (BD2BB: the target among 5 options) answered from an attacker's pairwise margins."""

from __future__ import annotations

from foilforge.attacker import Pair, correctness, group_key, grouped_folds, text_pair
from foilforge.filters.attackers.runs import fold_jobs, maker, run_here


def choose(attacker_margins, options: list[list[str]], group: list[str]) -> list[list[float]]:
    """Multiple choice from pairwise margins: per item, each option's share of the pick.

    `attacker_margins(pairs)` scores ordered pairs; an option's score is the number of comparisons it wins
    (margin > 0, half for 0); the pick is shared among the options with the top score.
    """
    import numpy as np

    ordered = [text_pair(a, b, g) for opts, g in zip(options, group)
               for i, a in enumerate(opts) for j, b in enumerate(opts) if i != j]
    wins = correctness(attacker_margins(ordered)) if ordered else np.zeros(0)
    shares, at = [], 0
    for opts in options:
        k = len(opts)
        score = np.zeros(k)
        for i in range(k):
            for j in range(k):
                if i != j:
                    score[i] += wins[at]
                    at += 1
        top = score == score.max()
        shares.append(list(top / top.sum()))
    return shares


def choice_items(records: list[dict]) -> tuple[list[list[str]], list[int], list[str]] | None:
    """(options, the target's index among them, group) of each multiple-choice record (a `candidates` list holding
    its caption: BD2BB), or None when the records are caption/foil pairs (any record without such a list)."""
    if not records or not all(isinstance(r.get("candidates"), list) and r.get("caption") in r["candidates"]
                              for r in records):
        return None
    options = [list(r["candidates"]) for r in records]
    return (options, [opts.index(r["caption"]) for opts, r in zip(options, records)],
            [group_key(r["caption"]) for r in records])


def multiple_choice_pairs(options: list[list[str]], labels: list[int], group: list[str]) -> list[Pair]:
    """Training pairs of multiple-choice items: the target against each decoy (caption = target)."""
    return [text_pair(opts[label], opt, g) for opts, label, g in zip(options, labels, group)
            for j, opt in enumerate(opts) if j != label]


def out_of_fold_choices(make, options: list[list[str]], labels: list[int], group: list[str],
                        folds: int = 5, seed: int = 0) -> list[float]:
    """Per item, the share of the pick the attacker gives the target, from a model fitted on the other folds."""
    fold = grouped_folds(group, folds, seed)
    fits = [fold_choices(make, options, labels, group, fold, k, seed) for k in sorted(set(fold))]
    return assemble_shares(fits, len(options))


def fold_choices(make, options: list[list[str]], labels: list[int], group: list[str], fold: list[int], k: int,
                 seed: int) -> tuple[list[int], list[float]]:
    """One fold's work for multiple choice: (held item indices, the target's share of each one's pick) from an
    attacker (random_state `seed`) fitted on the target-vs-decoy pairs of every other fold (the pick shared
    equally without any)."""
    train = [i for i, f in enumerate(fold) if f != k]
    held = [i for i, f in enumerate(fold) if f == k]
    if not train:
        return held, [1 / len(options[i]) for i in held]
    model = make().set_params(random_state=seed).fit(multiple_choice_pairs(
        [options[i] for i in train], [labels[i] for i in train], [group[i] for i in train]))
    shares = choose(model.margins, [options[i] for i in held], [group[i] for i in held])
    return held, [float(row[labels[i]]) for i, row in zip(held, shares)]


def assemble_shares(fits, n_items: int) -> list[float]:
    share = [0.0] * n_items
    for held, shares in fits:
        for i, value in zip(held, shares):
            share[i] = value
    return share


class FoldChoices:
    """The engine's worker for multiple-choice items: a job (attacker name, seed, fold k) is `fold_choices`."""

    def __init__(self, blocks: dict, options: list[list[str]], labels: list[int], group: list[str], folds: int = 5):
        self.blocks, self.options, self.labels, self.group, self.folds = blocks, options, labels, group, folds

    def __call__(self, jobs: list[tuple[str, int, int]]) -> list:
        return [fold_choices(maker(self.blocks, name), self.options, self.labels, self.group,
                             grouped_folds(self.group, self.folds, seed), k, seed) for name, seed, k in jobs]


def out_of_fold_choice_runs(blocks: dict, options: list[list[str]], labels: list[int], group: list[str],
                            folds: int, seeds, runner=run_here) -> dict:
    """{(attacker name, seed): per item, the target's share}: `out_of_fold_choices` of every attacker under each
    seed, all fold fits handed to `runner` as one list of jobs."""
    jobs = fold_jobs(list(blocks), group, folds, seeds)
    fits: dict = {}
    for (name, seed, _), fit in zip(jobs, runner(jobs, FoldChoices, (blocks, options, labels, group, folds))):
        fits.setdefault((name, seed), []).append(fit)
    return {key: assemble_shares(found, len(options)) for key, found in fits.items()}
