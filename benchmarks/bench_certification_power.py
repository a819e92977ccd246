"""The certification rule's error rates, by simulation: how often a blind set is certified, how often a set one
attacker can read is, and how often a blind set is called solvable.

    python -m benchmarks.bench_certification_power [--readings 16] [--trials 20000] [--real-sets 400]

The gate tests every reading of a kept set (8 attackers of params.yaml, within the set and fitted on the removed
pairs: 16 readings; filters/certification.py): certified when each is shown within chance +- `gate.margin` by two
one-sided exact binomial tests at `gate.alpha`; "solvable" / "over-balanced" only when an exact test excludes
chance with Holm's correction over the readings. Beside it, the rule it replaced: certified when every reading's
Wilson 95% interval lies inside [0.40, 0.60], and any point estimate outside that band labelled solvable or
over-balanced.

Each reading is taken as Binomial(n, p) / n (the binomial model), with two bounds for how the readings of
attackers on the same pairs are related: independent, and fully correlated (one draw for every reading at the
same p). Per n, exactly (the sum over the counts, no sampling):
- P(certified | every reading at chance): the power;
- P(certified | one reading at chance + margin, the others at chance): the size the rule promises to keep at or
  below alpha at every n (the others independent of it, or all agreeing, or, the bound, always within);
- the smallest n at which the power reaches 90%;
and by `trials` seeded draws (independent readings; exact where fully correlated) P(called solvable, or either
label | blind).

The binomial model checked against real attackers (`--real-sets` sets per row): the out-of-fold reading of the
gate's word n-gram attacker (5 partitions averaged, as certify computes it) on random sentence pairs (no
signal), and on the same pairs with a cue word inserted into a random 24% of the captions (what it reads there:
the results' `real_readings`): its scatter against the binomial's, the share of readings the equivalence test passes and the share whose exact
test excludes chance at alpha / readings (Holm's first step), beside what the binomial model says. Also the
released pieces (benchmarks/results/certification.json): their stored readings judged by both rules.

Writes benchmarks/results/certification_power.json.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from benchmarks.common import committed_result, read_metrics, result_path, write_result

NAME = "certification_power"
SIZES = [50, 100, 150, 200, 250, 300, 350, 400, 500, 600, 800, 1000]
#: the band of the rule the tests replaced
OLD_LOWER, OLD_UPPER = 0.40, 0.60


def tables(n: int, chance: float, margin: float, alpha: float, readings: int) -> dict:
    """Per count k = 0..n of one reading: passes the equivalence test (`within`), excludes chance at Holm's first
    step (`off`, alpha / readings) and its exact p-value (`p_chance`), from filters/certification.py; and the old
    rule's pass (`wilson_inside`) and label (`old_label`: the point estimate outside [0.40, 0.60])."""
    import numpy as np

    from foilforge.filters.certification import chance_p, within_p
    from foilforge.metrics import wilson_interval

    within, p_chance, wilson_inside = (np.zeros(n + 1, dtype=bool), np.ones(n + 1), np.zeros(n + 1, dtype=bool))
    for k in range(n + 1):
        figures = {"accuracy": k / n, "n": n, "chance": chance}
        within[k] = within_p(figures, margin) <= alpha
        p_chance[k] = chance_p(figures)
        low, high = wilson_interval(k, n)
        wilson_inside[k] = OLD_LOWER <= low and high <= OLD_UPPER
    k = np.arange(n + 1)
    return {"within": within, "p_chance": p_chance, "off": p_chance <= alpha / readings,
            "wilson_inside": wilson_inside, "old_label": (k / n > OLD_UPPER + 1e-12) | (k / n < OLD_LOWER - 1e-12),
            "above": k / n > chance}


def pmf(n: int, p: float):
    from scipy.stats import binom

    return binom.pmf(range(n + 1), n, p)


def certified_rates(t: dict, n: int, chance: float, margin: float, readings: int, rule: str) -> dict:
    """The exact certification rates of one rule ('within' or 'wilson_inside') in the binomial model."""
    from foilforge.filters.certification import exact_rates

    return exact_rates(n, readings, margin, chance=chance, passes=t[rule])


def called_rates(t: dict, n: int, chance: float, alpha: float, readings: int, trials: int, seed: int) -> dict:
    """P(the set is called solvable / either label | every reading at chance): the tests (Holm over the readings,
    a reading within the margin is never called) by `trials` draws of independent readings and exactly for one
    draw shared by all; the old rule's labels (any point estimate outside [0.40, 0.60]) exactly."""
    import numpy as np

    draws = np.random.default_rng(seed).binomial(n, chance, size=(trials, readings))
    p = t["p_chance"][draws]
    order = np.sort(p, axis=1)
    steps = alpha / (readings - np.arange(readings))
    # Holm: a reading is rejected when every smaller p-value (its own included) is below its step's level
    passed_steps = np.cumprod(order <= steps, axis=1).sum(axis=1)
    threshold = np.where(passed_steps > 0, order[np.arange(trials), np.maximum(passed_steps - 1, 0)], -1.0)
    rejected = (p <= threshold[:, None]) & ~t["within"][draws]
    solvable = (rejected & t["above"][draws]).any(axis=1)
    probabilities = pmf(n, chance)
    called_one = t["off"] & ~t["within"]
    old_one = float(probabilities[t["old_label"]].sum())
    return {"solvable_independent": float(solvable.mean()), "either_independent": float(rejected.any(axis=1).mean()),
            "solvable_correlated": float(probabilities[called_one & t["above"]].sum()),
            "either_correlated": float(probabilities[called_one].sum()),
            "old_either_independent": 1 - (1 - old_one) ** readings, "old_either_correlated": old_one}


def smallest_n(target: float, chance: float, margin: float, alpha: float, readings: int, rule: str,
               correlated: bool) -> int:
    """The smallest n (a multiple of 10) at which a blind set is certified with probability >= target."""
    n = 10
    while True:
        t = tables(n, chance, margin, alpha, readings)
        rates = certified_rates(t, n, chance, margin, readings, rule)
        if rates["blind_correlated" if correlated else "blind_independent"] >= target:
            return n
        n += 10


def size_every_n(largest: int, chance: float, margin: float, alpha: float) -> tuple[float, int]:
    """(the largest P(one reading at chance + margin passes the equivalence test), the n where) over every n from 1
    to `largest`: the two one-sided exact tests on whole counts, as filters/certification.py `within_p` makes them."""
    import numpy as np
    from scipy.stats import binom

    worst = (0.0, 0)
    for n in range(1, largest + 1):
        k = np.arange(n + 1)
        within = (binom.cdf(k, n, chance + margin) <= alpha) & (binom.sf(k - 1, n, chance - margin) <= alpha)
        worst = max(worst, (float(binom.pmf(k, n, chance + margin)[within].sum()), n))
    return worst


# ---------------------------------------------------------------- the binomial model against real readings

def blind_records(n: int, seed: int) -> list[dict]:
    """n pairs of two random 6-word sentences over 300 made-up words: no text tells the caption from the foil."""
    rng = random.Random(seed)
    words = [f"w{k}" for k in range(300)]
    out = []
    for k in range(n):
        caption, foil = (" ".join(rng.choice(words) for _ in range(6)) + f" {k}." for _ in range(2))
        out.append({"id": f"{seed}:{k}", "sample_id": f"{seed}:{k}", "caption": caption, "foil": foil})
    return out


def cued_records(n: int, seed: int, share: float) -> list[dict]:
    """`blind_records` with a cue word inserted into the caption of each pair with probability `share`: an
    attacker that learns it reads about share + (1 - share) / 2."""
    rng = random.Random(1000 + seed)
    out = []
    for record in blind_records(n, seed):
        if rng.random() < share:
            words = record["caption"].split()
            record = {**record, "caption": " ".join(words[:3] + ["zqcue"] + words[3:])}
        out.append(record)
    return out


def word_ngram_reading(n: int, seed: int, share: float, repeats: int = 5) -> dict:
    """The gate's figures of its word n-gram attacker (1-2-grams, 5 folds, gate seed 101, `repeats` partitions) on
    `cued_records(n, seed, share)`."""
    from foilforge.filters.attackers import certify

    blocks = {"word_ngram": {"attacker": "word_ngram.v1", "args": {"ngram_range": [1, 2]}}}
    return certify(cued_records(n, seed, share), blocks, folds=5, seed=101, repeats=repeats)["word_ngram"]


def real_readings(n: int, sets: int, share: float, repeats: int = 5) -> list[float]:
    """The word n-gram attacker's gate reading (`repeats` partitions averaged) on `sets` sets of n pairs."""
    return [word_ngram_reading(n, seed, share, repeats)["accuracy"] for seed in range(sets)]


def real_check(n: int, sets: int, share: float, margin: float, alpha: float, readings: int,
               repeats: int = 5) -> dict:
    """Real readings (`repeats` partitions averaged) against the binomial model at their own mean: scatter,
    equivalence passes, chance excluded."""
    import numpy as np

    from foilforge.filters.certification import chance_p, within_p

    values = real_readings(n, sets, share, repeats=repeats)
    mean = float(np.mean(values))
    t = tables(n, 0.5, margin, alpha, readings)
    model = pmf(n, mean)
    figures = [{"accuracy": v, "n": n} for v in values]
    return {"n": n, "sets": sets, "cue_share": share, "mean": round(mean, 4),
            "std": round(float(np.std(values, ddof=1)), 4), "binomial_std": round((mean * (1 - mean) / n) ** 0.5, 4),
            "within": round(float(np.mean([within_p(f, margin) <= alpha for f in figures])), 4),
            "within_binomial": round(float(model[t["within"]].sum()), 4),
            "off_chance": round(float(np.mean([chance_p(f) <= alpha / readings for f in figures])), 4),
            "off_chance_binomial": round(float(model[t["off"]].sum()), 4)}


# ---------------------------------------------------------------- the released pieces

def pieces(path: Path, margin: float, alpha: float) -> dict:
    """Per piece of certification.json: its records and kept pairs, the status recorded there (the rule of its
    run) and both rules on its stored readings (within and transfer)."""
    from foilforge.filters.certification import certification
    from foilforge.metrics import wilson_interval

    out = {}
    for name, piece in read_metrics(path).items():
        if not isinstance(piece, dict) or "after" not in piece:
            continue
        after = piece["after"]
        readings = {**(after.get("attackers") or {}),
                    **{f"{a} from removed": f for a, f in (after.get("transfer") or {}).items()}}
        readings = {name: {k: f.get(k) for k in ("accuracy", "n", "ci95")} for name, f in readings.items()
                    if f.get("accuracy") is not None}
        verdict = certification(readings, margin=margin, alpha=alpha)
        old = all(OLD_LOWER <= low and high <= OLD_UPPER
                  for low, high in (wilson_interval(round(f["accuracy"] * f["n"]), f["n"]) for f in readings.values()))
        out[name] = {"records": piece["records"] - sum((piece.get("refused") or {}).values()), "kept": piece.get("kept"),
                     "status_recorded": after.get("status"), "old_rule_certified": old,
                     "status": verdict["status"], "needed": verdict["needed"],
                     "strongest": verdict["strongest"],
                     "strongest_accuracy": readings[verdict["strongest"]]["accuracy"] if verdict["strongest"] else None}
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=16, help="readings per set (default 16: 8 attackers x 2)")
    parser.add_argument("--trials", type=int, default=20000, help="draws per n for the Holm labels")
    parser.add_argument("--margin", type=float, default=0.12)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--real-sets", type=int, default=400, help="sets per real-reading row (0: skip)")
    parser.add_argument("--output", type=Path, default=result_path(NAME))
    args = parser.parse_args(argv)
    m, margin, alpha = args.readings, args.margin, args.alpha

    table = []
    for n in SIZES:
        t = tables(n, 0.5, margin, alpha, m)
        new = certified_rates(t, n, 0.5, margin, m, "within")
        old = certified_rates(t, n, 0.5, margin, m, "wilson_inside")
        called = called_rates(t, n, 0.5, alpha, m, args.trials, seed=n)
        table.append({"n": n, "tests": {k: round(v, 4) for k, v in new.items()},
                      "old_band": {k: round(v, 4) for k, v in old.items()},
                      "called": {k: round(v, 4) for k, v in called.items()}})
    needed = {rule: {"independent": smallest_n(0.9, 0.5, margin, alpha, m, rule, False),
                     "correlated": smallest_n(0.9, 0.5, margin, alpha, m, rule, True)}
              for rule in ("within", "wilson_inside")}
    worst_size, worst_n = size_every_n(2000, 0.5, margin, alpha)

    real = []
    if args.real_sets:
        real = [real_check(n, args.real_sets, share, margin, alpha, m) for share in (0.0, 0.24) for n in (150, 300)]

    result = {"what": "error rates of the certification rule (filters/certification.py) in the binomial model, exact "
                      "except the Holm labels of independent readings (`trials` seeded draws), beside the rule it "
                      "replaced (every Wilson 95% interval inside [0.40, 0.60]); and real readings against the model",
              "readings": m, "margin": margin, "alpha": alpha, "trials": args.trials,
              "keys": {"blind_*": "P(certified | every reading at chance), readings independent / one shared draw",
                       "one_read_*": "P(certified | one reading at chance + margin, the others at chance): the "
                                     "others independent, agreeing, or always within (the bound)",
                       "called.solvable_* / either_*": "P(a reading called above chance / either way | blind), by "
                                                       "the tests; old_either_*: by the old rule's labels"},
              "table": table, "n_for_90_percent": {"tests": needed["within"], "old_band": needed["wilson_inside"]},
              "largest_size_every_n": {"what": "max over n = 1..2000 of P(one reading at chance + margin passes)",
                                       "size": round(worst_size, 4), "at_n": worst_n},
              "real_readings": real,
              "pieces": pieces(committed_result("certification"), margin, alpha)}
    write_result(NAME, result, args, argv, path=args.output)
    print(f"{'n':>5} | certified blind: tests indep/corr, old indep/corr | one reading at "
          f"{100 * (0.5 + margin):.0f}%: tests bound, old bound | called | blind: tests indep/corr, old indep")
    for row in table:
        t, o, c = row["tests"], row["old_band"], row["called"]
        print(f"{row['n']:5d} | {t['blind_independent']:.3f} {t['blind_correlated']:.3f}  {o['blind_independent']:.3f} "
              f"{o['blind_correlated']:.3f} | {t['one_read_bound']:.3f} {o['one_read_bound']:.3f} | "
              f"{c['either_independent']:.3f} {c['either_correlated']:.3f} {c['old_either_independent']:.3f}")
    print("n for 90%:", result["n_for_90_percent"], "largest size:", result["largest_size_every_n"])
    for row in real:
        print(row)
    for name, piece in result["pieces"].items():
        print(name, piece)
    return result


if __name__ == "__main__":
    main()
