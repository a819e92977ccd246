"""The release gate's figures: attackers' out-of-fold (and transfer) accuracy with n, Wilson CI and verdict.

Accuracy counts a margin of 0 as half a pair: an attacker without a preference flips a coin. Multiple-choice
items are answered among their options (filters/attackers/choices.py); chance is then 1/k.
"""

from __future__ import annotations

from foilforge.attacker import correctness, pairs_from_records
from foilforge.filters.attackers.choices import choice_items, multiple_choice_pairs, out_of_fold_choice_runs
from foilforge.filters.attackers.grid_search import GridSearchAttacker
from foilforge.filters.attackers.runs import maker, out_of_fold_runs, run_here, transfer_margins
from foilforge.filters.certification import Settle


def attack_summary(margins, max_accuracy: float | None = None) -> dict:
    """accuracy (ties count half), n, ties, the 95% Wilson interval, the reading and, with `max_accuracy`, the gate."""
    scores = correctness(margins)
    return {**summary(scores, max_accuracy, 0.5), "ties": int((scores == 0.5).sum())}


def certify(records: list[dict], blocks: dict, folds: int = 5, seed: int = 1, repeats: int = 5,
            max_accuracy: float = 0.55, runner=run_here, settle: Settle | None = None) -> dict:
    """The release gate's figures: per attacker, out-of-fold accuracy on the records averaged over up to `repeats`
    fresh grouped partitions (seeds seed, seed+1, ...), with n, ties, Wilson CI, verdict, family, `passed`, the
    partitions it used (`repeats`) and each one's accuracy (`partitions`); an attacker with a grid also
    gets the setting its search chooses on all the records (`setting`).

    `settle` (filters/certification.py `Settle`): every attacker gets `settle.first` partitions, then one more at
    a time while its reading is not settled, i.e. while its decisions could still change with the partitions left;
    all attackers still running share a round of fold jobs. None: every attacker gets `repeats`. The rounds depend
    only on the readings, so the figures are as deterministic as the fits.

    Multiple-choice records (a `candidates` list and the caption among them, BD2BB) are answered among their
    options (`out_of_fold_choices`); chance is then 1/k, and `max_accuracy` is read as chance + (max_accuracy - 0.5).
    """
    import numpy as np

    out = {}
    items = choice_items(records)
    multiple = items is not None
    attackers = {name: maker(blocks, name)() for name in blocks}  # configuration errors before any fitting
    seeds = [seed + k for k in range(repeats)]
    if multiple:
        options, labels, groups = items
        pairs = multiple_choice_pairs(*items)   # what a grid's choice reads: the target against each decoy
        chance = float(np.mean([1 / len(o) for o in options]))
        bound = chance + (max_accuracy - 0.5)
    else:
        pairs = pairs_from_records(records)
        chance, bound = 0.5, max_accuracy

    def run(names: list[str], round_seeds: list[int]) -> dict:
        """{(attacker, seed): per item, its success share} of one round of fold jobs."""
        subset = {name: blocks[name] for name in names}
        if multiple:
            found = out_of_fold_choice_runs(subset, options, labels, groups, folds, round_seeds, runner)
            return {key: np.asarray(shares, dtype=float) for key, shares in found.items()}
        found = out_of_fold_runs(subset, pairs, folds, round_seeds, runner=runner)
        return {key: correctness(margins) for key, (margins, _) in found.items()}

    first = repeats if settle is None else min(repeats, settle.first)
    shares = run(list(blocks), seeds[:first])
    used = dict.fromkeys(blocks, first)

    def accuracies(name):
        return [float(shares[name, s].mean()) if len(shares[name, s]) else 0.0 for s in seeds[:used[name]]]

    running = list(blocks)
    for more in range(first, repeats):
        running = [name for name in running
                   if not settle.settled(accuracies(name), len(records), repeats, chance=chance, max_accuracy=bound)]
        if not running:
            break
        shares.update(run(running, [seeds[more]]))
        used.update(dict.fromkeys(running, more + 1))
    for name, attacker in attackers.items():
        scores = np.mean([shares[name, s] for s in seeds[:used[name]]], axis=0) if records else np.zeros(0)
        figures = summary(scores, bound, chance)
        out[name] = {"attacker": attacker.describe(), "family": attacker.family, "repeats": used[name],
                     "partitions": [round(a, 4) for a in accuracies(name)] if records else [], **figures}
        if isinstance(attacker, GridSearchAttacker):
            # the setting the nested choice makes on all the records (each fold chose on its training pairs)
            out[name]["setting"] = attacker.set_params(random_state=seed).choose(pairs)
    return out


def certify_transfer(records: list[dict], train_records: list[dict], blocks: dict, seed: int = 1,
                     max_accuracy: float = 0.55) -> dict:
    """The release gate's transfer figures: per attacker fitted on `train_records` (`transfer_margins`), its
    accuracy on `records` with n, Wilson CI, verdict, family and `trained_on` (the training pairs it kept)."""
    # one feature layout for both: the plausibility scorers every record of either set has
    both = pairs_from_records(list(records) + list(train_records))
    pairs = both[:len(records)]
    train = [p for p in both[len(records):] if p.group not in {q.group for q in pairs}]
    margins = transfer_margins(blocks, train, pairs, seed)
    out = {}
    for name, values in margins.items():
        attacker = maker(blocks, name)()
        out[name] = {"attacker": attacker.describe(), "family": attacker.family, "trained_on": len(train),
                     **summary(correctness(values), max_accuracy, 0.5)}
    return out


def summary(scores, max_accuracy: float | None, chance: float) -> dict:
    """Figures of per-item success shares (1, 0, a tie's 0.5, or averaged over repeats).

    `passed` (with `max_accuracy`): at or below it, on at least MIN_JUDGED_PAIRS items (fewer are not
    certified). Below chance passes: an over-balanced set (a span that is caption in one fold and foil in
    another) is reported, not failed.
    """
    from foilforge.metrics import chance_verdict, gate_passed, wilson_interval

    n = len(scores)
    accuracy = float(scores.mean()) if n else None
    interval = wilson_interval(round(float(scores.sum())), n) if n else None
    # multiple choice: the target picked more (or less) often than 1/k
    sides = ("caption preferred", "foil preferred") if chance == 0.5 else ("target preferred", "target avoided")
    return {"accuracy": None if accuracy is None else round(accuracy, 4), "n": n, "chance": round(chance, 4),
            "ci95": None if interval is None else [round(v, 4) for v in interval],
            "verdict": chance_verdict(accuracy, n, chance, sides),
            **({} if max_accuracy is None else {
                "max_accuracy": round(max_accuracy, 4), "passed": gate_passed(accuracy, n, max_accuracy)})}
