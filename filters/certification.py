"""Whether a set is certified blind, as statistical tests with stated error rates.

Every reading (an attacker's out-of-fold accuracy within the kept set, or its accuracy there after fitting on the
removed pairs: `filters.attackers.certify` / `certify_transfer`) is a count of successes among n pairs (ties count
half, so the count is rounded against whatever the test would conclude). Chance is 1/2, or 1/k for multiple
choice among k options.

**Certified** when every reading is shown *within* chance +- `margin` by an equivalence test: two one-sided exact
binomial tests at level `alpha` reject both "accuracy >= chance + margin" and "accuracy <= chance - margin". The
set is certified only when every reading passes (an intersection-union test), so whatever the number of
readings, a set on which one attacker truly reads chance + margin (62% for the defaults) is certified with
probability at most `alpha`: no multiplicity correction is needed, and the exact tail keeps the bound at small n.

**Solvable** (a reading above chance: an attacker finds the caption) or **over-balanced** (below chance: the set
leads to the foil) only when the reading excludes chance, by an exact two-sided (equal-tailed) binomial test with
Holm's step-down correction over all the set's readings (a set no attacker can read gets either label with
probability at most `alpha`), and is not shown within the margin (a reading within it counts as within, a few
points off chance or not). A reading that is neither is **inconclusive**, with about the pairs at which a reading
like it would be decided (`pairs_needed`).

Simulated rates of both (binomial readings, independent and fully correlated, beside real attackers' readings):
docs/blind-proof.md.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

#: a reading's standing
WITHIN = "within"              # shown within chance +- margin: counts toward certification
ABOVE = "above chance"         # chance excluded, above: the set is solvable
BELOW = "below chance"         # chance excluded, below: the set is over-balanced
INCONCLUSIVE = "inconclusive"  # neither shown: more pairs decide

#: a set's status, worst first
SOLVABLE, OVER_BALANCED, UNDECIDED, CERTIFIED = "solvable", "over-balanced", "inconclusive", "certified"

#: the largest set `pairs_needed` looks at
MOST_PAIRS = 10_000_000


def transfer_name(attacker: str) -> str:
    """The reading of an attacker fitted on the removed pairs (`certify_transfer`), as the gate and the card name it."""
    return f"{attacker} from removed"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def counts(figures: dict) -> tuple[float, float, int, float]:
    """(fewest, most, n, chance): the success counts a reading's accuracy stands for, rounded down and up (a tie or
    an average over repeats leaves a fraction; the figures carry accuracy to 4 places, so a count within
    0.5e-4 * n of a whole number is that number)."""
    n = int(figures.get("n") or 0)
    chance = float(figures.get("chance", 0.5))
    successes = float(figures["accuracy"]) * n
    nearest = round(successes)
    if abs(successes - nearest) <= 0.5e-4 * n + 1e-9:
        return nearest, nearest, n, chance
    return math.floor(successes), math.ceil(successes), n, chance


def _at_most(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p), elementwise; p outside (0, 1) is the degenerate law."""
    from scipy.stats import binom

    if p <= 0:
        return 1.0 + 0 * k
    if p >= 1:
        return (k >= n) * 1.0
    return binom.cdf(k, n, p)


def _at_least(k, n, p):
    """P(X >= k) for X ~ Binomial(n, p), elementwise."""
    from scipy.stats import binom

    if p <= 0:
        return (k <= 0) * 1.0
    if p >= 1:
        return 1.0 + 0 * k
    return binom.sf(k - 1, n, p)


def within_p(figures: dict, margin: float) -> float:
    """The equivalence test's p-value: the larger of the two one-sided exact tests' (H0 accuracy >= chance +
    margin, rejected by few successes; H0 accuracy <= chance - margin, rejected by many); each count rounded
    against rejection."""
    return _within_p(*counts(figures), margin)


@functools.lru_cache(maxsize=65536)
def _within_p(fewest: int, most: int, n: int, chance: float, margin: float) -> float:
    return float(max(_at_most(most, n, chance + margin), _at_least(fewest, n, chance - margin)))


def chance_p(figures: dict) -> float:
    """The exact two-sided (equal-tailed) binomial test of accuracy == chance, the count rounded toward chance."""
    return _chance_p(*counts(figures))


@functools.lru_cache(maxsize=65536)
def _chance_p(fewest: int, most: int, n: int, chance: float) -> float:
    return float(min(1.0, 2 * min(_at_most(most, n, chance), _at_least(fewest, n, chance))))


def holm(pvalues: dict[str, float], alpha: float) -> set[str]:
    """The names Holm's step-down procedure rejects at familywise level alpha."""
    rejected = set()
    ordered = sorted(pvalues.items(), key=lambda item: (item[1], item[0]))
    for rank, (name, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - rank):
            break
        rejected.add(name)
    return rejected


@functools.lru_cache(maxsize=4096)
def pairs_needed(accuracy: float, chance: float, margin: float, alpha: float, readings: int,
                 start: int = 1) -> tuple[int | None, int | None]:
    """(to exclude chance, to show within the margin): the fewest pairs, from `start` on, at which a reading of
    `accuracy` would do either (chance excluded at the first Holm step, alpha / readings, the strictest; the
    count accuracy * n, rounded against the test). None where no set up to MOST_PAIRS would. Sizes step by 1%:
    "about"."""
    import numpy as np

    sizes = np.unique(np.ceil(np.geomspace(max(start, 1), MOST_PAIRS, 1700)).astype(np.int64))
    successes = accuracy * sizes
    fewest, most = np.floor(successes + 1e-9), np.ceil(successes - 1e-9)
    off = 2 * np.minimum(_at_most(most, sizes, chance), _at_least(fewest, sizes, chance)) <= alpha / max(readings, 1)
    within = np.maximum(_at_most(most, sizes, chance + margin),
                        _at_least(fewest, sizes, chance - margin)) <= alpha

    def first(flags):
        hits = np.flatnonzero(flags)
        return int(sizes[hits[0]]) if hits.size else None

    return (None if accuracy == chance else first(off)), first(within)


def about(pairs: int | None) -> str:
    """A pair count as a reader wants it: two significant figures (or tens), "more than 10,000,000" for None."""
    if pairs is None:
        return f"more than {MOST_PAIRS:,}"
    step = max(10, 10 ** (len(str(pairs)) - 2))
    return f"{step * math.ceil(pairs / step):,}"


def reading_standing(figures: dict, margin: float, alpha: float, off_chance: bool, readings: int) -> dict:
    """{standing, why, needed} of one reading; `off_chance`: Holm over the set's readings excluded chance."""
    accuracy, n = figures.get("accuracy"), int(figures.get("n") or 0)
    if accuracy is None or n == 0:
        return {"standing": INCONCLUSIVE, "why": "no pairs were judged", "needed": None, "reading": "no pairs"}
    chance = float(figures.get("chance", 0.5))
    interval = figures.get("ci95")
    shown = f"{_pct(accuracy)} of {n} pairs" + (f", 95% CI {_pct(interval[0])}-{_pct(interval[1])}" if interval else "")
    if within_p(figures, margin) <= alpha:  # decided: a reading within the margin may still be a few points off chance
        return {"standing": WITHIN, "why": None, "needed": None, "reading": shown}
    if off_chance and accuracy > chance:
        return {"standing": ABOVE, "needed": None, "reading": shown,
                "why": f"reads {shown}: above chance ({_pct(chance)}) at the familywise {alpha:g} level: solvable, "
                       f"it finds the caption"}
    if off_chance:
        return {"standing": BELOW, "needed": None, "reading": shown,
                "why": f"reads {shown}: below chance ({_pct(chance)}) at the familywise {alpha:g} level: "
                       f"over-balanced, it leads to the foil"}
    exclude, within = pairs_needed(accuracy, chance, margin, alpha, readings, start=n + 1)
    needed = min((m for m in (exclude, within) if m is not None), default=None)
    return {"standing": INCONCLUSIVE, "needed": needed, "exclude_at": exclude, "within_at": within, "reading": shown,
            "why": f"reads {shown}: inconclusive: {n} pairs, about {about(needed)} needed"}


def certification(attackers: dict[str, dict], *, margin: float = 0.12, alpha: float = 0.05) -> dict:
    """{certified, status, why, needed, strongest, margin, alpha, attackers: {name: {standing, why, needed, ...}}}
    for a set's readings (figures per reading name: accuracy, n, ci95, chance).

    status: "certified" (every reading within chance +- margin), "solvable" (a reading above chance,
    familywise), "over-balanced" (one below, none above) or "inconclusive" (`needed`: about how many pairs would
    decide, the readings' point estimates held). `why` names every reading that is not within, worst first; None
    when certified. `strongest`: the reading farthest from chance."""
    readings = len(attackers)
    p_chance = {name: chance_p(f) if f.get("accuracy") is not None and f.get("n") else 1.0
                for name, f in attackers.items()}
    off = holm(p_chance, alpha)
    standing = {name: reading_standing(f, margin, alpha, name in off, readings) for name, f in attackers.items()}
    for name, f in attackers.items():
        standing[name]["p_chance"] = float(f"{p_chance[name]:.3g}")
        if f.get("accuracy") is not None and f.get("n"):
            standing[name]["p_within"] = float(f"{within_p(f, margin):.3g}")
    by = {s: [(name, r["why"]) for name, r in standing.items() if r["standing"] == s]
          for s in (ABOVE, BELOW, INCONCLUSIVE)}
    needed = None
    if not attackers:
        status, why = UNDECIDED, "no attacker was run"
    elif by[ABOVE]:
        status, why = SOLVABLE, "; ".join(f"{name} {text}" for name, text in by[ABOVE] + by[BELOW])
    elif by[BELOW]:
        status, why = OVER_BALANCED, "; ".join(f"{name} {text}" for name, text in by[BELOW])
    elif by[INCONCLUSIVE]:
        status, why = UNDECIDED, None  # worded below, with the farthest reading
        needed = set_needed([standing[name] for name, _ in by[INCONCLUSIVE]])
    else:
        status, why = CERTIFIED, None
    judged = {name: f for name, f in attackers.items() if f.get("accuracy") is not None}
    strongest = max(judged, key=lambda name: (abs(judged[name]["accuracy"] - judged[name].get("chance", 0.5)), name),
                    default=None)
    if status == UNDECIDED and attackers:
        n = max(int(f.get("n") or 0) for f in attackers.values())
        undecided = [name for name, _ in by[INCONCLUSIVE]]
        farthest = max(undecided, key=lambda name: (abs((attackers[name].get("accuracy") or 0.5)
                                                        - attackers[name].get("chance", 0.5)), name))
        why = (f"inconclusive: {n} pairs, about {about(needed)} needed ({len(undecided)} of {readings} readings "
               f"neither within chance +- {100 * margin:g} points nor off chance; the farthest from chance: {farthest} "
               f"reads {standing[farthest]['reading']})")
    return {"certified": status == CERTIFIED, "status": status, "why": why, "needed": needed, "strongest": strongest,
            "margin": margin, "alpha": alpha, "attackers": standing}


def set_needed(inconclusive: list[dict]) -> int | None:
    """About how many pairs decide a set whose readings are these (the inconclusive ones; the others are decided
    already): the first size at which one of them excludes chance, or every one of them is within the margin."""
    exclude = min((r["exclude_at"] for r in inconclusive if r.get("exclude_at")), default=None)
    within_all = None if any(r.get("within_at") is None for r in inconclusive) else \
        max(r["within_at"] for r in inconclusive)
    return min((m for m in (exclude, within_all) if m is not None), default=None)


#: how far, in standard deviations of what the remaining partitions could move it, a reading's mean must be from
#: every decision for its partitions to stop early (`settled`)
SETTLE_Z = 3.0


def decisions(count, n: int, chance: float, margin: float, alpha: float, readings: int, max_accuracy: float):
    """Per success count (whole counts out of n): what the gate, the export and the card decide from a reading of
    that accuracy, as one tuple: within chance +- margin (the equivalence test); whether chance is excluded at
    Holm's first level (alpha / readings: "first"), not even at its last (alpha: "none") or in between
    ("between"); the side of chance where that decides a label (solvable or over-balanced), else None; the gate's
    `passed` (foilforge/metrics.py `gate_passed`); and the card's verdict words (`chance_verdict`)."""
    from foilforge.metrics import chance_verdict, gate_passed

    rows = []
    for k in count:
        k = int(k)
        accuracy = k / n
        figures = {"accuracy": accuracy, "n": n, "chance": chance}
        within = within_p(figures, margin) <= alpha
        p_chance = chance_p(figures)
        excluded = "first" if p_chance <= alpha / max(readings, 1) else "none" if p_chance > alpha else "between"
        side = accuracy > chance if not within and excluded == "first" else None
        rows.append((within, excluded, side, gate_passed(accuracy, n, max_accuracy),
                     chance_verdict(accuracy, n, chance)))
    return rows


@dataclass(frozen=True)
class Settle:
    """How the release gate spends its partitions (filters/attackers/gate.py `certify`): every reading gets
    `first`, then one more at a time while it is not `settled` under the gate's margin, alpha and the number of
    readings Holm's correction runs over."""

    first: int = 2
    margin: float = 0.12
    alpha: float = 0.05
    readings: int = 1

    def settled(self, partitions: list[float], n: int, planned: int, *, chance: float, max_accuracy: float) -> bool:
        return settled(partitions, n, planned, chance=chance, margin=self.margin, alpha=self.alpha,
                       readings=self.readings, max_accuracy=max_accuracy)


def settled(partitions: list[float], n: int, planned: int, *, chance: float = 0.5, margin: float = 0.12,
            alpha: float = 0.05, readings: int = 1, max_accuracy: float = 0.55, z: float = SETTLE_Z) -> bool:
    """Whether a reading averaged over `partitions` (out-of-fold accuracies of one attacker on n pairs, one per
    grouped partition) needs no more of its `planned` partitions: every decision (`decisions`) is the same for
    each accuracy its mean could reach with them.

    The remaining partitions' mean moves the average by about sd * sqrt((planned - r) / (planned * r)) after r
    partitions, where sd is their scatter: the larger of the scatter seen so far and the binomial standard
    deviation at chance, sqrt(chance (1 - chance) / n) (two partitions estimate a scatter poorly; the gate's
    readings scatter from 0.65 times that (the median) to 1.7 times: docs/blind-proof.md). The reach is `z` of
    those, rounded out to whole counts. A reading near a decision keeps every planned partition; one far from all
    of them stops, with the same decisions its planned mean would have taken unless the partitions left moved it
    more than z deviations. A reading whose chance test sits between Holm's first and last levels (alpha /
    readings and alpha) is never settled: whether Holm excludes chance there depends on the other readings as
    well."""
    import numpy as np

    r = len(partitions)
    if r >= planned or not n:
        return True
    if r < 2:
        return False
    mean = float(np.mean(partitions))
    scatter = max(float(np.std(partitions, ddof=1)), math.sqrt(chance * (1 - chance) / n))
    reach = z * scatter * math.sqrt((planned - r) / (planned * r))
    low, high = max(0, math.floor((mean - reach) * n)), min(n, math.ceil((mean + reach) * n))
    rows = decisions(range(low, high + 1), n, chance, margin, alpha, readings, max_accuracy)
    # between Holm's first and last levels whether chance is excluded depends on the other readings too
    return all(row == rows[0] for row in rows) and rows[0][1] != "between"


def exact_rates(n: int, readings: int, margin: float = 0.12, alpha: float = 0.05, chance: float = 0.5,
                passes=None) -> dict:
    """The certification rule's error rates at n pairs, exactly, when each reading is Binomial(n, p) / n.

    `blind_independent` / `blind_correlated`: P(certified | every reading at chance), the readings independent or
    one shared draw (the two bounds for attackers reading the same pairs); `one_read_independent` /
    `one_read_others_agree`: P(certified | one reading at chance + margin, the others at chance); `one_read_bound`:
    P(that reading alone passes), which the intersection-union test keeps at or below alpha whatever the others do.
    `passes` (a boolean per count 0..n) replaces this module's equivalence test, to judge another rule the same way.
    """
    import numpy as np
    from scipy.stats import binom

    if passes is None:
        passes = np.array([within_p({"accuracy": k / n, "n": n, "chance": chance}, margin) <= alpha
                           for k in range(n + 1)])
    counts_ = np.arange(n + 1)
    blind = float(binom.pmf(counts_, n, chance)[passes].sum())
    read = float(binom.pmf(counts_, n, chance + margin)[passes].sum())
    return {"blind_independent": blind ** readings, "blind_correlated": blind,
            "one_read_independent": read * blind ** (readings - 1), "one_read_others_agree": read * blind,
            "one_read_bound": read}
