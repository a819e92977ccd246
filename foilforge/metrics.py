"""Evaluation metrics (VALSE §5.1 and App. B, Winoground §3.2, predicate-noun pairs, BD2BB).

Every function takes plain numbers, so any scorer (a text-only LM, CLIP, a
scores file from elsewhere) goes through the same code. Higher score = "this
text matches the image better"; a perplexity must be negated before it comes here.

Conventions, chosen so that a model that cannot tell caption from foil never
looks better than chance:

* **Ties fail.** acc_r counts a pair only when score(caption) > score(foil);
  Winoground conditions and multiple-choice picks are strict as well. A scorer
  that gives every text the same score gets acc_r = 0, not 50%.
* **AUROC** counts a tie between a caption and a foil as half a win (the
  probabilistic reading of App. B; scikit-learn does the same), so the
  all-equal scorer gets 0.5.
* **p_c / p_f** follow the numbers VALSE reports: p_c is the share of captions
  classified as matching, p_f the share of foils classified as not matching
  (VisualBERT's p_c 90+ with p_f near 0 in Table 2 is only possible with this
  reading; App. B's "precision" wording notwithstanding). A text is classified
  as matching when its score is strictly above the threshold.
* **Degenerate inputs** give None (JSON null), never a made-up number: a metric
  over an empty set, AUROC with one class empty, min(p_c, p_f) when either is
  None, threshold metrics when no threshold is given.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Hashable, Iterable, Sequence


def _mean(flags: Sequence[bool]) -> float | None:
    return sum(bool(f) for f in flags) / len(flags) if flags else None


def _check_paired(caption_scores: Sequence[float], foil_scores: Sequence[float]) -> None:
    if len(caption_scores) != len(foil_scores):
        raise ValueError(f"caption and foil score lists differ in length ({len(caption_scores)} vs {len(foil_scores)})")


def pairwise_accuracy(caption_scores: Sequence[float], foil_scores: Sequence[float]) -> float | None:
    """acc_r: share of pairs with score(caption) > score(foil); ties fail; None when empty."""
    _check_paired(caption_scores, foil_scores)
    return _mean([c > f for c, f in zip(caption_scores, foil_scores)])


def auroc(caption_scores: Sequence[float], foil_scores: Sequence[float]) -> float | None:
    """Area under the ROC curve, captions positive, foils negative; None when either class is empty."""
    if not caption_scores or not foil_scores:
        return None
    from sklearn.metrics import roc_auc_score

    labels = [1] * len(caption_scores) + [0] * len(foil_scores)
    return float(roc_auc_score(labels, list(caption_scores) + list(foil_scores)))


def threshold_metrics(caption_scores: Sequence[float], foil_scores: Sequence[float],
                      threshold: float | None) -> dict:
    """acc, p_c, p_f, min(p_c, p_f) for a classifier "matches iff score > threshold".

    Captions and foils need not be paired here (a binary head classifies each
    text alone). Without a threshold (a pure ranking scorer such as CLIP or an
    LM) all four are None.
    """
    if threshold is None:
        return {"acc": None, "p_c": None, "p_f": None, "min_p_c_p_f": None}
    captions_right = [s > threshold for s in caption_scores]
    foils_right = [not (s > threshold) for s in foil_scores]
    p_c, p_f = _mean(captions_right), _mean(foils_right)
    return {
        "acc": _mean(captions_right + foils_right),
        "p_c": p_c,
        "p_f": p_f,
        "min_p_c_p_f": None if p_c is None or p_f is None else min(p_c, p_f),
    }


def binary_metrics(caption_scores: Sequence[float], foil_scores: Sequence[float],
                   threshold: float | None = None) -> dict:
    """All five VALSE metrics for paired caption/foil scores, plus the count."""
    _check_paired(caption_scores, foil_scores)
    result = {"n": len(caption_scores)}
    result.update(threshold_metrics(caption_scores, foil_scores, threshold))
    result["acc_r"] = pairwise_accuracy(caption_scores, foil_scores)
    result["auroc"] = auroc(caption_scores, foil_scores)
    return result


def winoground_scores(examples: Iterable[tuple[float, float, float, float]]) -> dict:
    """Winoground text / image / group scores.

    Each example is (s(C0,I0), s(C1,I0), s(C0,I1), s(C1,I1)).
    text  = s(C0,I0) > s(C1,I0) and s(C1,I1) > s(C0,I1)
    image = s(C0,I0) > s(C0,I1) and s(C1,I1) > s(C1,I0)
    group = text and image. Chance is 25 / 25 / 16.67 %.
    """
    text, image, group = [], [], []
    for c0i0, c1i0, c0i1, c1i1 in examples:
        t = c0i0 > c1i0 and c1i1 > c0i1
        i = c0i0 > c0i1 and c1i1 > c1i0
        text.append(t)
        image.append(i)
        group.append(t and i)
    return {"n": len(text), "text": _mean(text), "image": _mean(image), "group": _mean(group)}


def group_pair_accuracy(examples: Iterable[tuple[float, float, float, float]]) -> dict:
    """Accuracy over the two pairs of each Winoground group (image_0: C0 vs C1; image_1: C1 vs C0), a tie counting
    one half (a coin flip's expected score). Same example layout as `winoground_scores`. A score that reads only
    the text gets exactly 0.5: whatever it prefers on one image it prefers on the other."""
    scores = []
    for c0i0, c1i0, c0i1, c1i1 in examples:
        scores.append(1.0 if c0i0 > c1i0 else 0.5 if c0i0 == c1i0 else 0.0)
        scores.append(1.0 if c1i1 > c0i1 else 0.5 if c1i1 == c0i1 else 0.0)
    return {"n_pairs": len(scores), "pair_accuracy": sum(scores) / len(scores) if scores else None}


def pair_accuracy(items: Iterable[tuple[Hashable, bool]], pair_size: int = 2) -> dict:
    """Counter-balanced pairs (predicate-noun): a pair counts only if every member is right.

    `items` are (pair id, member correct). A pair with a number of members
    other than `pair_size` is an error (a lost counter-example would make the
    score easier), reported with its id. Chance for two binary members is 25%.
    """
    groups: dict[Hashable, list[bool]] = defaultdict(list)
    for pair_id, correct in items:
        groups[pair_id].append(bool(correct))
    for pair_id, members in groups.items():
        if len(members) != pair_size:
            raise ValueError(f"pair {pair_id!r} has {len(members)} member(s), expected {pair_size}")
    return {"n_pairs": len(groups), "pair_accuracy": _mean([all(m) for m in groups.values()])}


def multiple_choice_accuracy(items: Iterable[tuple[Sequence[float], int]]) -> dict:
    """BD2BB-style: each item is (candidate scores, index of the target).

    Right when the target's score is strictly above every other candidate's
    (a tie for the top fails). A label outside the candidates is an error.
    """
    right = []
    for number, (scores, label) in enumerate(items):
        if not 0 <= label < len(scores):
            raise ValueError(f"item {number}: label {label} outside the {len(scores)} candidates")
        target = scores[label]
        right.append(all(target > s for k, s in enumerate(scores) if k != label))
    return {"n": len(right), "accuracy": _mean(right)}


def js_divergence(caption_counts: Counter, foil_counts: Counter, log_base: float = 2) -> float | None:
    """docs/reference.md §4's JS(f || c) of two frequency tables (scipy's jensenshannon); None when either is empty.

    The one implementation in foilforge: bias reports and foiler statistics use it alike, in log base 2
    (VALSE Table 5's scale, bounded by 1) unless a caller asks for another base.
    """
    from scipy.spatial.distance import jensenshannon

    n_c, n_f = sum(caption_counts.values()), sum(foil_counts.values())
    if n_c == 0 or n_f == 0:
        return None
    items = sorted(set(caption_counts) | set(foil_counts), key=str)
    c = [caption_counts.get(item, 0) / n_c for item in items]
    f = [foil_counts.get(item, 0) / n_f for item in items]
    value = float(jensenshannon(c, f, base=log_base))
    # scipy returns a tiny negative-under-sqrt as nan for identical tables on some inputs
    return 0.0 if value != value else value


def majority(counts: Counter) -> dict:
    """The most frequent item of a Counter and its share of the total (ties: the greater item); nulls when empty."""
    total = sum(counts.values())
    if not total:
        return {"item": None, "share": None}
    item, count = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return {"item": item, "share": count / total}


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial proportion (z = 1.96: 95%); None for n = 0.

    Used for acc_r of the text-only blind check: at the sizes a refined instrument has (tens to hundreds of
    pairs) a few pairs move acc_r by several points, and an interval that contains 50% shows no shortcut.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..n, got {successes} of {n}")
    z2 = z * z
    centre = (successes + z2 / 2) / (n + z2)
    half = z * (successes * (n - successes) / n + z2 / 4) ** 0.5 / (n + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


#: the blind check's reading of acc_r: within this many points of 50% is at chance
CHANCE_MARGIN = 0.05
#: fewer pairs than this are not judged (the blind check judges instruments with at least 20 exported pairs)
MIN_JUDGED_PAIRS = 20


def blind_verdict(acc_r: float | None, n: int) -> str:
    """How a text-only scorer's acc_r on n pairs reads, in both directions (a scorer that prefers the foil
    is as much a shortcut as one that prefers the caption: a blind model picks the less plausible one).

    'at chance' within CHANCE_MARGIN of 50%; else 'chance within the 95% CI' when the Wilson interval
    still contains 50%; else 'caption preferred' / 'foil preferred'; 'too few pairs' below MIN_JUDGED_PAIRS.
    """
    return chance_verdict(acc_r, n)


def chance_verdict(accuracy: float | None, n: int, chance: float = 0.5,
                   sides: tuple[str, str] = ("caption preferred", "foil preferred")) -> str:
    """The card's words for an accuracy on n items against `chance` (blind_verdict's rule, any chance): 'too few
    pairs', 'at chance', 'chance within the 95% CI', or `sides` (above chance, below it). One rule, so the gate's
    figures, the card and the gate's stopping rule (filters/certification.py `decisions`) read alike."""
    if accuracy is None or n < MIN_JUDGED_PAIRS:
        return "too few pairs"
    if abs(accuracy - chance) <= CHANCE_MARGIN + 1e-12:
        return "at chance"
    low, high = wilson_interval(round(accuracy * n), n)
    if low <= chance <= high:
        return "chance within the 95% CI"
    return sides[0] if accuracy > chance else sides[1]


def gate_passed(accuracy: float | None, n: int, max_accuracy: float) -> bool:
    """The release gate's point-estimate test: at or below `max_accuracy`, on at least MIN_JUDGED_PAIRS items
    (fewer are not certified)."""
    return accuracy is not None and n >= MIN_JUDGED_PAIRS and accuracy <= max_accuracy + 1e-12
