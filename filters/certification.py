"""Whether a set is certified blind: two-sided, and only with the pairs to show it.

A set is certified when every attacker's 95% Wilson interval lies inside [`gate.lower`, `gate.upper`] (defaults
0.40, 0.60): no attacker finds the caption (above) and none is led to the foil (below: an over-balanced set, one
that reverses the language prior, penalises a model that uses language instead of neutralising the prior). An
interval says what the pairs can show: at n = 40 and 50% it spans 35-65%, so a set whose point estimates all
pass but whose intervals do not is "too few pairs to certify", never certified.

`certification` reads the figures `filters.attackers.certify` gives (accuracy, n, ci95 per attacker, from any
source: within the kept set, transferred from the removed pairs, a grid's strongest setting, a probe) and says
certified, why not, and per attacker where it stands.
"""

from __future__ import annotations

#: the verdicts, worst first: a set is what its worst attacker says
OUTSIDE = "outside"            # the point estimate is outside [lower, upper]
TOO_FEW = "too few pairs"      # the point estimate is inside, the interval reaches outside
INSIDE = "inside"              # the interval is inside


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def attacker_standing(figures: dict, lower: float, upper: float, min_pairs: int) -> tuple[str, str | None]:
    """(OUTSIDE / TOO_FEW / INSIDE, why in words or None when inside) for one attacker's figures."""
    accuracy, n, interval = figures.get("accuracy"), figures.get("n") or 0, figures.get("ci95")
    # multiple choice (the target among k options): the same band around chance 1/k
    chance = figures.get("chance", 0.5)
    lower, upper = chance - (0.5 - lower), chance + (upper - 0.5)
    if accuracy is None or n < min_pairs or interval is None:
        return TOO_FEW, f"{n} pairs (at least {min_pairs} are judged)"
    shown = f"{_pct(accuracy)} of {n} pairs, 95% CI {_pct(interval[0])}-{_pct(interval[1])}"
    if accuracy > upper + 1e-12:
        return OUTSIDE, f"reads {shown}: above {_pct(upper)}, it finds the caption"
    if accuracy < lower - 1e-12:
        return OUTSIDE, f"reads {shown}: below {_pct(lower)}, the set is over-balanced (it leads to the foil)"
    if interval[0] < lower - 1e-12 or interval[1] > upper + 1e-12:
        return TOO_FEW, f"reads {shown}: the interval reaches outside [{_pct(lower)}, {_pct(upper)}]"
    return INSIDE, None


def certification(attackers: dict[str, dict], lower: float, upper: float, min_pairs: int | None = None) -> dict:
    """{certified, status, why, attackers: {name: {standing, why}}} for figures per attacker name.

    status: "certified", "not certified" (an attacker's point estimate is outside [lower, upper]) or "too few
    pairs to certify" (every point estimate inside, some interval not). `why` names every attacker that is not
    inside, the worst first; None when certified."""
    from foilforge.metrics import MIN_JUDGED_PAIRS

    min_pairs = MIN_JUDGED_PAIRS if min_pairs is None else min_pairs
    standing = {name: attacker_standing(figures, lower, upper, min_pairs) for name, figures in attackers.items()}
    outside = [(name, why) for name, (s, why) in standing.items() if s == OUTSIDE]
    too_few = [(name, why) for name, (s, why) in standing.items() if s == TOO_FEW]
    if not attackers:
        status, why = "not certified", "no attacker was run"
    elif outside:
        status = "not certified"
        why = "; ".join(f"{name} {text}" for name, text in outside)
    elif too_few:
        status = "too few pairs to certify"
        why = "too few pairs to certify: " + "; ".join(f"{name} {text}" for name, text in too_few)
    else:
        status, why = "certified", None
    return {"certified": status == "certified", "status": status, "why": why, "lower": lower, "upper": upper,
            "attackers": {name: {"standing": s, "why": w} for name, (s, w) in standing.items()}}
