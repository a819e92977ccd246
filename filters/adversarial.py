"""Adversarial filtering with trained attackers in the loop (select stage), after AFLite.

AFLite (Le Bras et al., ICML 2020, "Adversarial Filters of Dataset Biases",
the filter behind WinoGrande): train many simple models on random partitions,
measure how reliably each instance is predicted out of sample, remove the most
predictable, repeat. Here an instance is a caption/foil pair, the models are
the trained text-only attackers of filters/attackers/, and each round

1. solves the plausibility refinement (filters/refinement.py `refine`: one
   candidate per sample, the fixed scorers balanced, Winoground pairs whole,
   the JS bound) without the candidates excluded so far, preferring among a
   sample's candidates the least predictable one: a caption's own alternative
   foils are tried before the caption is dropped;
2. fits every filter attacker `rounds` times on grouped `folds`-fold
   partitions of the kept set (a caption's pairs never straddle folds; a fresh
   partition per round) and scores every held-out kept pair and every
   alternative candidate of a held-out caption: a candidate's predictability
   is the share of those predictions that pick its caption (a tie counts half);
   an attacker's accuracy is the mean predictability of the kept pairs;
3. stops when every filter attacker is within `target` of chance on either
   side (at most `target`, at least 1 - `target`: a set that leads attackers
   to the foil is over-balanced, not blind); otherwise (`method: aflite`)
   excludes the `slice` most predictable kept pairs (only those predicted
   above chance), or, when the worst attacker is below chance, the `slice`
   pairs predicted most wrongly (the slice halves each time the worst
   attacker crosses chance, so the set is not cut back and forth), or (`method: balance_features`) adds, for the
   `features_per_round` heaviest n-gram features of a word attacker fitted on
   the kept set, the constraint that they occur as often in kept captions as
   in kept foils (|difference| <= 1), and goes back to 1.

It stops without reaching the target after `patience` rounds that bring no attacker set closer to chance than
the best round so far, or when the kept set would fall below
`min_keep` of the pairs it was given (what the refinement keeps without
attackers), or when nothing predictable is left to
remove; it then returns the kept set of the round closest to chance
(`returned_round`); the report says why it stopped, and lists under `shortcuts` the n-gram features
that still give captions or foils away (an n-gram filter attacker fitted on the
kept set: counting_adversarial's caption numerals, say). Balance is never traded away: the JS of the
changed items may not rise above the unrefined set's (`max_js_rise`, default
0), and `balance` names side features whose caption and foil counts must
match (`negation`: existence's "no"/"not", 50/50 between captions and foils,
within the unrefined set's own imbalance or 1). Deterministic for a seed: the
same candidates give the same kept set.

The release gate (pipeline/gate.py, run by the baseline stage) certifies with other attackers:
fresh folds and seeds, and a family this filter did not use.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

from foilforge.errors import ConfigError
from foilforge.settings import InstrumentAdversarial, InstrumentSettings

log = logging.getLogger(__name__)

NEGATION = re.compile(r"\b(no|not|none|nobody|nothing|never|neither|nor|without|zero)\b|n't\b", re.IGNORECASE)


def negation_count(text: str) -> int:
    return len(NEGATION.findall(text))


#: side features that `balance` may name: text -> count
SIDE_FEATURES = {"negation": negation_count}


def check_side_features(settings: InstrumentAdversarial, instrument: str) -> None:
    unknown = [name for name in settings.balance if name not in SIDE_FEATURES]
    if unknown:
        raise ConfigError(f"params.yaml adversarial (instrument {instrument}): balance names unknown side feature(s) "
                          f"{', '.join(unknown)}; known: {', '.join(SIDE_FEATURES)}")


def adversarial_settings(settings: InstrumentSettings) -> InstrumentAdversarial | None:
    """The instrument's adversarial filter settings (None: it has none), once its side features are known."""
    if settings.adversarial is not None:
        check_side_features(settings.adversarial, settings.name)
    return settings.adversarial


def gate_apart(settings: InstrumentSettings) -> dict[str, str] | None:
    """The families of the instrument's gate attackers ({name: family}; None without a gate), once checked to keep
    apart from its adversarial filter: another seed, and at least one family the filter did not use."""
    from foilforge.filters.attackers import build_attacker

    gate, filtering = settings.gate, settings.adversarial
    if gate is None:
        return None
    families = {name: build_attacker(b, f"params.yaml attackers.{name}").family for name, b in gate.attacker_blocks.items()}
    if filtering is not None:
        used = {build_attacker(b, f"params.yaml attackers.{n}").family for n, b in filtering.attacker_blocks.items()}
        if not set(families.values()) - used:
            raise ConfigError(f"params.yaml gate.attackers: every family ({', '.join(sorted(set(families.values())))}) "
                              f"is one the adversarial filter of {settings.name} used; add an attacker of another "
                              f"family (e.g. ngram_bayes.v1 or transformer_pair.v1) so the gate certifies with one it "
                              f"never met")
        if gate.seed == filtering.seed:
            raise ConfigError(f"params.yaml gate.seed equals adversarial.seed ({gate.seed}): the gate's folds must be "
                              f"fresh")
    return families

def pool_records(paths: list[str], where: str) -> list[dict]:
    """The pairs of the released files a `pool` names (VALSE JSON, SugarCrepe JSON, foilforge JSONL; read as
    `foilforge refilter` reads them), without those that cannot be foils and, where they carry votes, without
    the ones people judged invalid. Training material for transfer attackers only: never kept, never scored."""
    from pathlib import Path

    from foilforge.released import read_released, to_records
    from foilforge.validity import has_votes, refuse_invalid, valid_only

    records = []
    for number, path in enumerate(paths or []):
        if not Path(path).is_file():
            raise ConfigError(f"{where}.pool[{number}]: {path} is not a file (a released VALSE or SugarCrepe JSON "
                              f"file, or foilforge JSONL, of the same phenomenon)")
        fmt, rows = read_released(path)
        records += to_records(fmt, rows, path, f"pool{number}")
    records, _ = refuse_invalid(records)
    return valid_only(records) if has_votes(records) else records


def transfer_training(kept: list[dict], removed: list[dict], pool: list[dict]) -> list[dict]:
    """What a transfer attacker learns from: the removed pairs and the pool, without pairs that cannot be foils,
    without those people judged invalid where there are votes, and without any pair whose caption a kept pair
    has (a caption's other foils would hand it the caption)."""
    from foilforge.filters.attackers import group_key
    from foilforge.validity import has_votes, refuse_invalid, valid_only

    kept_groups = {group_key(r["caption"]) for r in kept}
    train, _ = refuse_invalid([r for r in list(removed) + list(pool) if group_key(r["caption"]) not in kept_groups])
    return valid_only(train) if has_votes(train) else train


def side_balances(records: list[dict], names: list[str], unrefined: list[str]) -> list[tuple[dict, float, float]]:
    """Per side feature: (record id -> caption count minus foil count, rate, slack 1) for the refinement program.

    The kept set's |sum| may be at most 1 + rate * (records kept), rate = the unrefined set's |sum| per record:
    never more imbalanced than the instrument as foiled, up to one record (an odd count cannot split 50/50).
    """
    rows = []
    for name in names:
        count = SIDE_FEATURES[name]
        counts = {r["id"]: count(r["caption"]) - count(r["foil"]) for r in records}
        rate = abs(sum(counts[rid] for rid in unrefined)) / max(1, len(unrefined))
        rows.append((counts, rate, 1.0))
    return rows


def predictability(kept: list[dict], alternatives: list[dict], blocks: dict, folds: int, rounds: int,
                   seed: int, runner=None, transfer: list[dict] = (), with_transfer: bool = False) -> tuple:
    """(id -> share of out-of-sample predictions that pick the caption, attacker -> mean over kept).

    Every attacker of `blocks` is fitted on `rounds` fresh grouped `folds`-fold partitions of the kept set; an
    alternative is scored by the models whose training did not include its caption. The fold fits go to
    `runner` (filters/attackers/runs.py `run_here` unless the stage passes the engine's).

    `transfer`: records outside the kept set (`transfer_training`: the pairs removed so far, a pool); every
    attacker is also fitted once on them and its predictions count as one more round, so a pair predictable
    from the rest of the data is as predictable as one the kept set gives away. With `with_transfer`, a third
    value: attacker -> its transfer accuracy on the kept pairs (reported; the stopping rule reads the within
    accuracies, which the kept set's own size does not make noisier than the gate's).
    """
    import numpy as np

    from foilforge.filters.attackers import (
        correctness,
        out_of_fold_runs,
        pairs_from_records,
        run_here,
        transfer_margins,
    )

    kept_pairs, extra_pairs = pairs_from_records(kept), pairs_from_records(alternatives) if alternatives else []
    seeds = [seed * 1000 + r for r in range(rounds)]
    runs = out_of_fold_runs(blocks, kept_pairs, folds, seeds, extra_pairs, runner or run_here)
    transferred = {}
    if transfer:
        # one feature layout for the training and the scored pairs (the scorers all of them have)
        both = pairs_from_records(list(transfer) + kept + alternatives)
        train, scored = both[:len(transfer)], both[len(transfer):]
        transferred = transfer_margins(blocks, train, scored, seed)
    total = {r["id"]: 0.0 for r in kept + alternatives}
    accuracy, transfer_accuracy = {}, {}
    for name in blocks:
        kept_sum, extra_sum = np.zeros(len(kept)), np.zeros(len(alternatives))
        for s in seeds:
            margins, extra = runs[name, s]
            kept_sum += correctness(margins)
            extra_sum += correctness(extra)
        accuracy[name] = float(kept_sum.mean() / rounds) if len(kept) else None
        counted = rounds
        if name in transferred:
            right = correctness(transferred[name])
            kept_sum += right[:len(kept)]
            extra_sum += right[len(kept):]
            counted += 1
            transfer_accuracy[name] = float(right[:len(kept)].mean()) if len(kept) else None
        for record, value in zip(kept, kept_sum):
            total[record["id"]] += value / counted
        for record, value in zip(alternatives, extra_sum):
            total[record["id"]] += value / counted
    if with_transfer:
        return {rid: value / len(blocks) for rid, value in total.items()}, accuracy, transfer_accuracy
    return {rid: value / len(blocks) for rid, value in total.items()}, accuracy


def heaviest_features(kept: list[dict], block: dict, k: int, seed: int) -> list[str]:
    """The k n-gram features with the largest weights of an attacker fitted on the whole kept set."""
    from foilforge.filters.attackers import build_attacker, pairs_from_records

    attacker = build_attacker(block, "params.yaml attackers").set_params(random_state=seed)
    return [name for name, _ in attacker.fit(pairs_from_records(kept)).top_features(k)]


def remaining_shortcuts(kept: list[dict], blocks: dict, seed: int, k: int = 10) -> list[dict]:
    """The k heaviest features of the first n-gram filter attacker fitted on all kept pairs: what still gives
    captions (weight > 0) or foils (< 0) away when the filter stops short of its target."""
    from foilforge.filters.attackers import NgramPairAttacker, build_attacker, pairs_from_records

    for name, block in blocks.items():
        attacker = build_attacker(block, f"params.yaml attackers.{name}")
        if isinstance(attacker, NgramPairAttacker) and len(kept) >= 2:
            attacker.set_params(random_state=seed).fit(pairs_from_records(kept))
            return [{"attacker": name, "feature": feature, "weight": weight, "marks": "caption" if weight > 0 else "foil"}
                    for feature, weight in attacker.top_features(k)]
    return []


def feature_balance(records: list[dict], block: dict, names: list[str]) -> list[tuple[dict, float, float]]:
    """Side balances for n-gram features: per feature, caption-minus-foil presence per record, tolerance 1."""
    from foilforge.filters.attackers import build_attacker, pairs_from_records

    pairs = pairs_from_records(records)
    attacker = build_attacker(block, "params.yaml attackers").fit_features(pairs)
    column_of = {feature: j for j, feature in enumerate(attacker.feature_names_out())}
    columns = [column_of[n] for n in names if n in column_of]
    if not columns:
        return []
    difference = attacker.vectorize(pairs)[:, columns].toarray()
    return [({r["id"]: int(difference[i, j]) for i, r in enumerate(records)}, 0.0, 1.0) for j in range(len(columns))]


@dataclass(frozen=True)
class Round:
    """A round of the search as the report and the choice of the returned set need it: its index in the history,
    its worst attacker's distance from chance, and the set it had kept (with that set's JS report and its pairs'
    predictability)."""

    index: int
    distance: float
    kept: frozenset
    js: dict
    scores: dict


class AdversarialSearch:
    """The refinement with AFLite (or feature balancing) in the loop, round by round (the module doc says how);
    `run` gives (kept ids, report). Deterministic for a seed.

    `runner`: where each round's fold fits run (`predictability`); the stage passes the engine's."""

    def __init__(self, candidates: list[dict], settings: InstrumentAdversarial, refine_args: dict, path="<records>", runner=None):
        from foilforge.filters.attackers import build_attacker
        from foilforge.filters.refinement import candidate_order

        self.settings, self.path, self.runner = settings, path, runner
        self.blocks = settings.attacker_blocks
        for name, block in self.blocks.items():
            build_attacker(block, f"params.yaml attackers.{name}")  # configuration errors before any fitting
        self.pool = pool_records(settings.pool, "params.yaml adversarial") if settings.transfer else []
        self.candidates = candidates
        self.by_id = {r["id"]: r for r in candidates}
        self.samples: dict[str, list[str]] = {}
        for record in sorted(candidates, key=lambda r: candidate_order(r["id"])):
            self.samples.setdefault(str(record.get("sample_id", record["id"])), []).append(record["id"])
        unrefined = [ids[0] for ids in self.samples.values()]
        self.sample_of = {rid: sid for sid, ids in self.samples.items() for rid in ids}
        self.base_balance = side_balances(candidates, list(settings.balance), unrefined)
        # the JS bound: the stricter of the refinement's and this filter's; null here: no JS bound (an instrument
        # whose class balance is a side feature instead, existence)
        rise = settings.max_js_rise
        self.refine_args = {**refine_args, "js_floor_aware": True,
                            "max_js_rise": None if rise is None else rise if refine_args.get("max_js_rise") is None
                            else min(rise, refine_args["max_js_rise"])}
        self.excluded: set[str] = set()
        self.prefer: dict | None = None
        self.share, self.previous_sign = settings.slice, None
        self.balanced_features: list[str] = []
        self.history: list[dict] = []
        self.closest: Round | None = None  # the round whose worst attacker came closest to chance
        self.since_closest = 0

    def run(self, progress: bool = False) -> tuple[set[str], dict]:
        from foilforge.filters.refinement import refine

        js: dict = {}
        kept_ids = refine(self.candidates, balance=self.base_balance, report=js, path=self.path, **self.refine_args)
        # min_keep counts the pairs the filter is given: those the refinement keeps without attackers (what the
        # instrument would export); a share of the raw candidates would stop it before its first round wherever the
        # fixed-scorer refinement alone already keeps fewer (sample swap_obj: 68 of some 300 captions)
        self.refined = len(kept_ids)
        self.floor = math.ceil(self.settings.min_keep * self.refined)
        scores: dict = {}
        steps = range(self.settings.max_iterations)
        if progress:
            from tqdm import tqdm

            steps = tqdm(steps, desc="adversarial filter", unit="round")
        for iteration in steps:
            scores, worst, alternatives = self.attack(kept_ids, js, iteration)
            if worst is None or abs(worst - 0.5) <= self.settings.target - 0.5 + 1e-12:
                stop = "target met"
                break
            if self.since_closest >= self.settings.patience:
                stop = (f"no progress: {self.settings.patience} rounds came no closer to chance than round "
                        f"{self.closest.index}, whose kept set is returned")
                break
            stop = (self.aflite_cut(kept_ids, alternatives, scores, worst) if self.settings.method == "aflite"
                    else self.balance_features(kept_ids, scores, iteration))
            if stop:
                break
            trial_js: dict = {}
            # the JS bound's weight search starts where the last round's ended: the pool lost a few candidates
            trial = refine(self.candidates, exclude=self.excluded, prefer=self.prefer, balance=self.balance(),
                           report=trial_js, path=self.path, start_weight=js.get("imbalance_weight"),
                           **self.refine_args)
            if len(trial) < self.floor:
                stop = (f"the next round would keep {len(trial)}, below min_keep ({self.floor} of the {self.refined} "
                        f"pairs the refinement keeps without attackers)")
                break
            kept_ids, js = trial, trial_js
        else:
            stop = f"max_iterations ({self.settings.max_iterations}) reached"
        returned = len(self.history) - 1
        if stop != "target met" and self.closest is not None and self.closest.kept != set(kept_ids):
            # short of the target: the kept set of the round closest to chance, not whatever the last cut left
            kept_ids, js, scores, returned = set(self.closest.kept), self.closest.js, self.closest.scores, \
                self.closest.index
        return set(kept_ids), self.report(kept_ids, js, scores, stop, returned)

    def attack(self, kept_ids, js: dict, iteration: int) -> tuple[dict, float | None, list[dict]]:
        """(each kept pair's and alternative's predictability, the accuracy furthest from chance, the alternatives)
        of this round's attackers on the kept set; the round goes into the history, and becomes the closest when it
        is."""
        kept = [self.by_id[rid] for rid in sorted(kept_ids)]
        # every candidate not kept and not excluded: another foil of a kept caption, or one that may bring a
        # dropped caption back
        alternatives = [self.by_id[rid] for rid in sorted(self.by_id) if rid not in kept_ids and rid not in self.excluded]
        transfer = (transfer_training(kept, [self.by_id[rid] for rid in sorted(self.excluded)], self.pool)
                    if self.settings.transfer else [])
        scores, accuracy, transferred = predictability(kept, alternatives, self.blocks, self.settings.folds,
                                                       self.settings.rounds, self.settings.seed + iteration,
                                                       self.runner, transfer, with_transfer=True)
        # the filter aims at chance from both sides: an attacker far below it (a set that leads to the foil) is as
        # much a failure as one far above it
        worst = max((a for a in accuracy.values() if a is not None), key=lambda a: abs(a - 0.5), default=None)
        self.history.append({"kept": len(kept), "excluded": len(self.excluded),
                             "accuracy": {n: None if a is None else round(a, 4) for n, a in accuracy.items()},
                             **({"transfer": {n: None if a is None else round(a, 4) for n, a in transferred.items()},
                                 "transfer_pairs": len(transfer)} if transferred else {})})
        distance = None if worst is None else abs(worst - 0.5)
        if distance is not None and (self.closest is None or distance < self.closest.distance - 1e-12):
            self.closest = Round(len(self.history) - 1, distance, frozenset(kept_ids), js, scores)
            self.since_closest = 0
        else:
            self.since_closest += 1
        return scores, worst, alternatives

    def aflite_cut(self, kept_ids, alternatives: list[dict], scores: dict, worst: float) -> str | None:
        """AFLite's step: above chance, exclude the most predictable kept pairs; below it, the ones the attackers
        get most wrong. Why the search stops, when nothing is left to exclude."""
        sign = 1.0 if worst > 0.5 else -1.0
        # each time the worst attacker crosses chance the slice halves: removing the most predictable pairs leaves
        # the least predictable ones, and full slices back and forth would only shrink the set
        if self.previous_sign is not None and sign != self.previous_sign:
            self.share /= 2
        self.previous_sign = sign
        ranked = sorted((rid for rid in kept_ids if sign * (scores[rid] - 0.5) > 0),
                        key=lambda rid: (-sign * scores[rid], rid))
        remove = ranked[:max(1, math.ceil(self.share * len(kept_ids)))]
        if not remove:
            return f"nothing predicted {'above' if sign > 0 else 'below'} chance is left to remove"
        # a removed pair's own alternative foils that are as predictable go too, so the next solve cannot swap one
        # in for it (other candidates stay: the refinement may need them as mirror partners)
        cut = min(sign * scores[rid] for rid in remove)
        removed_samples = {self.sample_of[rid] for rid in remove}
        self.excluded |= set(remove) | {a["id"] for a in alternatives
                                        if self.sample_of[a["id"]] in removed_samples and sign * scores[a["id"]] >= cut}
        self.prefer = {rid: 0.5 + sign * (value - 0.5) for rid, value in scores.items()}
        return None

    def balance_features(self, kept_ids, scores: dict, iteration: int) -> str | None:
        """The balance_features step: the heaviest n-gram features of the first attacker become constraints.
        Why the search stops, when no feature is left."""
        kept = [self.by_id[rid] for rid in sorted(kept_ids)]
        first = self.blocks[self.settings.attackers[0]]
        fresh = [f for f in heaviest_features(kept, first, self.settings.features_per_round
                                              + len(self.balanced_features), self.settings.seed + iteration)
                 if f not in self.balanced_features]
        if not fresh:
            return "no predictive feature left to balance"
        self.balanced_features += fresh[:self.settings.features_per_round]
        self.prefer = scores
        return None

    def balance(self) -> list:
        """The side features the next refinement balances: the settings' own, then the balanced n-gram features."""
        if not self.balanced_features:
            return list(self.base_balance)
        return self.base_balance + feature_balance(self.candidates, self.blocks[self.settings.attackers[0]],
                                                   self.balanced_features)

    def report(self, kept_ids, js: dict, scores: dict, stop: str, returned: int) -> dict:
        settings, blocks = self.settings, self.blocks
        final = self.history[returned]["accuracy"] if self.history else {}
        # pairs the attackers get confidently wrong (they pick the foil in most predictions): without votes, the
        # likeliest to be foils people would accept as true (hard examples are disproportionately mislabelled);
        # the select stage marks them and the annotation batch shows them first
        suspects = sorted((rid for rid in kept_ids if scores.get(rid, 0.5) <= settings.suspect_below + 1e-12),
                          key=lambda rid: (scores[rid], rid))
        # why the target was missed: the features a word/char attacker fitted on the kept set leans on most
        shortcuts = [] if stop == "target met" else remaining_shortcuts(
            [self.by_id[rid] for rid in sorted(kept_ids)], blocks, settings.seed)
        return {
            "method": settings.method, "attackers": {n: blocks[n] for n in blocks}, "target": settings.target,
            "min_keep": settings.min_keep, "samples": len(self.samples), "refined": self.refined,
            "floor": self.floor, "kept": len(kept_ids),
            "target_met": stop == "target met", "stopped": stop, "rounds": len(self.history),
            "returned_round": returned,
            "accuracy_before": self.history[0]["accuracy"] if self.history else {}, "accuracy_after": final,
            "excluded": len(self.excluded), "balanced_features": self.balanced_features, "shortcuts": shortcuts,
            "suspect_below": settings.suspect_below, "suspects": suspects,
            # per side feature: kept captions' count minus kept foils' count, and the most the program allowed
            "balance": {name: {"caption_minus_foil": sum(counts.get(rid, 0) for rid in kept_ids),
                               "allowed": round(slack + rate * len(kept_ids), 2)}
                        for name, (counts, rate, slack) in zip(settings.balance, self.base_balance)},
            "history": self.history, "refinement": js,
        }


def adversarial_filter(candidates: list[dict], settings: InstrumentAdversarial, refine_args: dict, path="<records>",
                       progress: bool = False, runner=None) -> tuple[set[str], dict]:
    """(kept ids, report): the refinement with AFLite (or feature balancing) in the loop; see the module doc and
    `AdversarialSearch`."""
    return AdversarialSearch(candidates, settings, refine_args, path, runner).run(progress)
