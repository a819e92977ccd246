import pytest

from foilforge import metrics as m


def test_binary_metrics_hand_computed():
    # pairs: (0.9, 0.2) right, (0.4, 0.6) wrong, (0.7, 0.7) tie -> wrong, (0.8, 0.1) right
    captions = [0.9, 0.4, 0.7, 0.8]
    foils = [0.2, 0.6, 0.7, 0.1]
    got = m.binary_metrics(captions, foils, threshold=0.5)
    # captions > 0.5: 0.9, 0.7, 0.8 -> p_c = 3/4; foils <= 0.5: 0.2, 0.1 -> p_f = 2/4
    assert got["p_c"] == 0.75
    assert got["p_f"] == 0.5
    assert got["min_p_c_p_f"] == 0.5
    assert got["acc"] == 5 / 8
    assert got["acc_r"] == 0.5
    # AUROC: 16 caption/foil comparisons; wins = 0.9: 4, 0.4: 2 (beats .2, .1),
    # 0.7: 3 + a tie with the foil 0.7 (half), 0.8: 4 -> 13.5/16
    assert got["auroc"] == pytest.approx(13.5 / 16)
    assert got["n"] == 4


def test_all_captions_scored_equal_gives_no_credit_for_ties():
    got = m.binary_metrics([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], threshold=0.5)
    assert got["acc_r"] == 0.0  # ties fail
    assert got["auroc"] == 0.5  # a tie is half a win
    assert got["p_c"] == 1.0 and got["p_f"] == 0.0  # everything "matches"
    assert got["min_p_c_p_f"] == 0.0
    assert got["acc"] == 0.5


def test_score_at_threshold_is_not_a_match():
    got = m.threshold_metrics([0.5], [0.5], threshold=0.5)
    assert got["p_c"] == 0.0 and got["p_f"] == 1.0


def test_no_threshold_leaves_threshold_metrics_undefined():
    got = m.binary_metrics([2.0], [1.0], threshold=None)
    assert got["acc"] is None and got["p_c"] is None and got["p_f"] is None and got["min_p_c_p_f"] is None
    assert got["acc_r"] == 1.0


def test_one_class_empty():
    got = m.threshold_metrics([0.9, 0.1], [], threshold=0.5)
    assert got["p_c"] == 0.5
    assert got["p_f"] is None
    assert got["min_p_c_p_f"] is None
    assert got["acc"] == 0.5
    assert m.auroc([0.9, 0.1], []) is None
    assert m.auroc([], [0.3]) is None


def test_empty_input():
    got = m.binary_metrics([], [], threshold=0.5)
    assert got == {"n": 0, "acc": None, "p_c": None, "p_f": None, "min_p_c_p_f": None, "acc_r": None, "auroc": None}


def test_unpaired_lengths_rejected():
    with pytest.raises(ValueError, match=r"differ in length \(2 vs 1\)"):
        m.pairwise_accuracy([1, 2], [0])


def test_winoground_hand_computed():
    examples = [
        # (C0I0, C1I0, C0I1, C1I1)
        (0.9, 0.1, 0.2, 0.8),  # text yes, image yes -> group yes
        (0.9, 0.1, 0.95, 0.8),  # text: .9>.1 and .8>.95? no; image: .9>.95? no
        (0.6, 0.5, 0.1, 0.7),  # text: yes (.6>.5, .7>.1); image: .6>.1 yes, .7>.5 yes -> group
        (0.6, 0.7, 0.1, 0.2),  # text: .6>.7 no; image: .6>.1, .2>.7 no
    ]
    got = m.winoground_scores(examples)
    assert got == {"n": 4, "text": 0.5, "image": 0.5, "group": 0.5}
    text_only = m.winoground_scores([(0.9, 0.1, 0.95, 0.8 + 0.2)])  # text yes (.9>.1, 1.0>.95), image .9>.95 no
    assert (text_only["text"], text_only["image"], text_only["group"]) == (1.0, 0.0, 0.0)


def test_winoground_ties_and_empty():
    assert m.winoground_scores([(1, 1, 1, 1)]) == {"n": 1, "text": 0.0, "image": 0.0, "group": 0.0}
    assert m.winoground_scores([]) == {"n": 0, "text": None, "image": None, "group": None}


def test_pair_accuracy_needs_both_members_right():
    items = [("p1", True), ("p1", True), ("p2", True), ("p2", False), ("p3", False), ("p3", False)]
    assert m.pair_accuracy(items) == {"n_pairs": 3, "pair_accuracy": pytest.approx(1 / 3)}
    assert m.pair_accuracy([]) == {"n_pairs": 0, "pair_accuracy": None}


def test_pair_accuracy_rejects_incomplete_pair():
    with pytest.raises(ValueError, match=r"pair 'p2' has 1 member\(s\), expected 2"):
        m.pair_accuracy([("p1", True), ("p1", False), ("p2", True)])


def test_multiple_choice_accuracy():
    items = [
        ([0.1, 0.9, 0.3, 0.2, 0.0], 1),  # right
        ([0.5, 0.5, 0.1, 0.1, 0.1], 0),  # tie for the top -> wrong
        ([0.2, 0.1, 0.3, 0.4, 0.9], 2),  # wrong
        ([1.0, 0.0, 0.0, 0.0, 0.0], 0),  # right
    ]
    assert m.multiple_choice_accuracy(items) == {"n": 4, "accuracy": 0.5}
    assert m.multiple_choice_accuracy([([0.3] * 5, 4)]) == {"n": 1, "accuracy": 0.0}
    assert m.multiple_choice_accuracy([]) == {"n": 0, "accuracy": None}
    with pytest.raises(ValueError, match="item 0: label 5 outside the 5 candidates"):
        m.multiple_choice_accuracy([([0.1] * 5, 5)])


def test_wilson_interval_on_hand_computed_cases():
    from foilforge.metrics import wilson_interval

    # 15 of 26: centre (15 + 1.96^2/2) / (26 + 1.96^2) = 0.5670, half-width 1.96 sqrt(15*11/26 + 1.96^2/4) / 29.8416 = 0.1775
    low, high = wilson_interval(15, 26)
    assert low == pytest.approx(0.5670 - 0.1775, abs=1e-4) and high == pytest.approx(0.5670 + 0.1775, abs=1e-4)
    # none of 10: the upper end is z^2 / (n + z^2), the lower end 0
    assert wilson_interval(0, 10) == pytest.approx((0.0, 1.96 ** 2 / (10 + 1.96 ** 2)))
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="within 0..n"):
        wilson_interval(11, 10)


def test_blind_verdict_reads_acc_r_in_both_directions():
    from foilforge.metrics import blind_verdict

    assert blind_verdict(0.55, 40) == "at chance"                   # 5 points off: the margin itself
    assert blind_verdict(15 / 26, 26) == "chance within the 95% CI"  # 57.7%, CI 39-74% (hand-computed above)
    # 22 of 60: centre 23.92 / 63.8416 = 0.3747, half-width 1.96 sqrt(22*38/60 + 0.9604) / 63.8416 = 0.1185:
    # 25.6-49.3%, 50% outside: a blind model picking the less plausible sentence wins
    assert blind_verdict(22 / 60, 60) == "foil preferred"
    assert blind_verdict(0.7, 100) == "caption preferred"
    assert blind_verdict(0.9, 19) == "too few pairs"
    assert blind_verdict(None, 0) == "too few pairs"


def test_chance_verdict_reads_any_chance_with_its_own_words():
    from foilforge.metrics import chance_verdict

    sides = ("target preferred", "target avoided")  # one of three options (BD2BB): chance 1/3
    assert chance_verdict(0.36, 100, 1 / 3, sides) == "at chance"  # 2.7 points off
    assert chance_verdict(0.42, 50, 1 / 3, sides) == "chance within the 95% CI"  # 21/50: Wilson 29.4-55.8%
    assert chance_verdict(0.6, 100, 1 / 3, sides) == "target preferred"  # 60/100: Wilson 50.2-69.1%
    assert chance_verdict(0.2, 300, 1 / 3, sides) == "target avoided"  # 60/300: Wilson 15.9-24.9%
    assert chance_verdict(0.9, 19, 1 / 3, sides) == "too few pairs"
