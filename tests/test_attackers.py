"""Trained text-only attackers, the adversarial filter and the release gate."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from foilforge.errors import ConfigError, GateError, InputError
from foilforge.filters.adversarial import adversarial_filter, gate_apart, negation_count
from foilforge.filters.attackers import (
    ATTACKERS,
    Attacker,
    attack_summary,
    build_attacker,
    certify,
    grouped_folds,
    out_of_fold_margins,
    pairs_from_records,
)
from foilforge.settings import instrument_settings

NOUNS = ["dog", "cat", "man", "woman", "horse", "bus", "train", "bird", "child", "car", "boat", "girl", "boy",
         "table", "chair", "kite", "plate", "bench", "truck", "cow"]
PLACES = ["park", "street", "field", "beach", "kitchen", "garden", "road", "river", "yard", "room"]
VERBS = ["sits", "stands", "waits", "rests", "plays", "sleeps"]


def balanced_records(n: int, seed: int = 0) -> list[dict]:
    """Pairs whose caption and foil differ by one noun drawn from one pool, in random roles: nothing to learn."""
    rng = random.Random(seed)
    records = []
    for k in range(n):
        a, b = rng.sample(NOUNS, 2)
        place, verb = rng.choice(PLACES), rng.choice(VERBS)
        records.append({"id": f"t:{k}", "sample_id": f"t:{k}", "caption": f"A {a} {verb} in the {place} {k}.",
                        "foil": f"A {b} {verb} in the {place} {k}.", "classes": a, "classes_foil": b})
    return records


def planted(records: list[dict], word: str = "apparently") -> list[dict]:
    """The same pairs with a word that only foils carry."""
    return [{**r, "foil": r["foil"].replace(" in the ", f" {word} in the ")} for r in records]


def word_attacker():
    return build_attacker({"attacker": "word_ngram.v1"}, "test")


def test_registry_pins_the_attacker_families():
    assert ATTACKERS.names() == ["boosted_features.v1", "boosted_features.v2", "char_ngram.v1", "edit_tokens.v1", "hidden_probe.v1",
                                 "length.v1", "ngram_bayes.v1", "scorer_features.v1", "transformer_pair.v1",
                                 "word_ngram.v1"]


def test_grouped_folds_never_split_a_caption():
    groups = [f"caption {k % 37}" for k in range(300)]
    folds = grouped_folds(groups, 5, seed=3)
    fold_of = {}
    for group, fold in zip(groups, folds):
        assert fold_of.setdefault(group, fold) == fold
    assert sorted(set(folds)) == [0, 1, 2, 3, 4]
    assert grouped_folds(groups, 5, seed=3) == folds
    assert grouped_folds(groups, 5, seed=4) != folds


def test_out_of_fold_models_never_train_on_the_caption_they_score():
    records = balanced_records(60)
    pairs = pairs_from_records(records)
    seen = []

    class Spy(Attacker):
        def __init__(self, random_state=0):
            self.random_state = random_state

        def fit(self, train, y=None):
            self.train_ = {p.group for p in train}
            return self

        def margins(self, held):
            assert not self.train_ & {p.group for p in held}
            seen.extend(held)
            import numpy as np
            return np.ones(len(held))

    out_of_fold_margins(Spy, pairs, folds=5, seed=0)
    assert sorted(p.caption for p in seen) == sorted(p.caption for p in pairs)


def test_a_word_only_in_foils_is_solved_by_the_word_attacker():
    pairs = pairs_from_records(planted(balanced_records(80)))
    margins, _ = out_of_fold_margins(word_attacker, pairs, folds=5, seed=0)
    summary = attack_summary(margins, max_accuracy=0.55)
    assert summary["accuracy"] >= 0.9
    assert summary["passed"] is False and summary["verdict"] == "caption preferred"
    fitted = word_attacker().fit(pairs)
    assert fitted.top_features(1) == [("apparently", pytest.approx(fitted.top_features(1)[0][1]))]
    assert fitted.top_features(1)[0][1] < 0  # it marks foils


def test_shuffled_sides_sit_at_chance():
    rng = random.Random(1)
    records = []
    for r in planted(balanced_records(200, seed=2)):
        # the planted word on a random side: no side-specific cue is left
        records.append(r if rng.random() < 0.5 else {**r, "caption": r["foil"], "foil": r["caption"]})
    for name in ("word_ngram.v1", "char_ngram.v1", "ngram_bayes.v1", "edit_tokens.v1", "boosted_features.v1",
                 "boosted_features.v2"):
        margins, _ = out_of_fold_margins(lambda: build_attacker({"attacker": name}, "test"),
                                         pairs_from_records(records), folds=5, seed=0)
        assert abs(attack_summary(margins)["accuracy"] - 0.5) <= 0.1, name


def test_linear_attackers_are_antisymmetric():
    pairs = pairs_from_records(planted(balanced_records(40)))
    for name in ("word_ngram.v1", "char_ngram.v1", "ngram_bayes.v1", "edit_tokens.v1", "boosted_features.v1",
                 "boosted_features.v2"):
        model = build_attacker({"attacker": name}, "test").fit(pairs)
        forward = model.margins(pairs)
        backward = model.margins([p.swapped() for p in pairs])
        assert forward == pytest.approx(-backward), name


def test_a_tie_counts_half_and_few_pairs_are_not_certified():
    summary = attack_summary([1.0, 0.0, 0.0, -1.0], max_accuracy=0.55)
    assert summary["accuracy"] == 0.5 and summary["ties"] == 2
    assert summary["passed"] is False  # 4 pairs: below MIN_JUDGED_PAIRS, not certified
    assert summary["verdict"] == "too few pairs"


def test_scorer_features_read_the_plausibility_scores():
    records = balanced_records(60)
    for k, r in enumerate(records):  # an LM that always likes the caption more
        r["filters"] = {"plausibility": {"scores": {"lm": {"caption": -2.0 + k % 3, "foil": -3.0 + k % 3, "gap": 1.0}}}}
    margins, _ = out_of_fold_margins(lambda: build_attacker({"attacker": "scorer_features.v1"}, "t"),
                                     pairs_from_records(records), folds=5, seed=0)
    assert attack_summary(margins)["accuracy"] == 1.0


def test_bad_attacker_args_name_the_key():
    with pytest.raises(ConfigError, match=r"params.yaml attackers.w .*ngram_range"):
        build_attacker({"attacker": "word_ngram.v1", "args": {"ngram_range": [3, 1]}}, "params.yaml attackers.w")
    with pytest.raises(ConfigError, match="unknown attacker 'nope'"):
        build_attacker({"attacker": "nope"}, "x")


def test_negation_count():
    assert negation_count("There are no dogs.") == 1
    assert negation_count("The man isn't holding nothing") == 2
    assert negation_count("A notebook on a table") == 0


# ---------------------------------------------------------------------------------------- the adversarial filter

def scored(records: list[dict]) -> list[dict]:
    """Records as the select stage sees them: one plausibility scorer with alternating gap signs (balanced)."""
    out, number = [], {}
    for r in records:
        k = number.setdefault(r["sample_id"], len(number))  # a sample's candidates share their gap
        gap = (1.0 if k % 2 else -1.0) * (1 + k % 5)
        out.append({**r, "filters": {"plausibility": {"scores": {"lm": {"caption": gap, "foil": 0.0, "gap": gap}}}}})
    return out


def filter_settings(**over) -> dict:
    params = {"attackers": {"word": {"attacker": "word_ngram.v1"}},
              "adversarial": {"attackers": ["word"], "rounds": 3, "slice": 0.1, "max_js_rise": None, **over}}
    return instrument_settings(params, "x").adversarial


REFINE = dict(scorers=["lm"], bins=1, choose=True, max_js_rise=None, item_mode="direct")


def test_the_filter_removes_a_planted_shortcut():
    records = balanced_records(120, seed=5)
    shortcut = {r["id"] for r in records[:60]}  # half the foils carry the shortcut word
    mixed = scored(planted(records[:60]) + records[60:])
    before, _ = out_of_fold_margins(word_attacker, pairs_from_records(mixed), 5, 0)
    assert attack_summary(before)["accuracy"] > 0.7
    kept, report = adversarial_filter(mixed, filter_settings(), REFINE)
    assert report["target_met"] and report["stopped"] == "target met"
    assert len(kept) >= 0.25 * len(records)
    kept_records = [r for r in mixed if r["id"] in kept]
    after, _ = out_of_fold_margins(word_attacker, pairs_from_records(kept_records), 5, 7)
    assert attack_summary(after)["accuracy"] <= 0.6
    assert len(kept & shortcut) < 0.5 * len(kept)  # the planted pairs went first


def test_the_filter_is_deterministic_and_order_independent():
    mixed = scored(planted(balanced_records(40, seed=1)) + balanced_records(40, seed=2)[:0] +
                   [dict(r, id=r["id"] + "b", sample_id=r["id"] + "b") for r in balanced_records(40, seed=3)])
    first = adversarial_filter(mixed, filter_settings(), REFINE)
    second = adversarial_filter(list(reversed(mixed)), filter_settings(), REFINE)
    assert first[0] == second[0]
    assert json.dumps(first[1], sort_keys=True) == json.dumps(second[1], sort_keys=True)


def test_the_filter_reports_when_min_keep_cannot_be_met():
    mixed = scored(planted(balanced_records(60, seed=4)))  # every foil carries the shortcut
    kept, report = adversarial_filter(mixed, filter_settings(min_keep=0.9), REFINE)
    assert not report["target_met"]
    assert "below min_keep" in report["stopped"] or "nothing predicted" in report["stopped"]
    assert len(kept) >= 0.9 * 60


def test_negation_balance_holds_in_the_kept_set():
    records = []
    for k, r in enumerate(balanced_records(80, seed=6)):
        negated = r["caption"].replace("A ", "There is no ", 1)
        # half the negations on the caption side, half on the foil side: the instrument as foiled is 50/50
        records.append({**r, "caption": negated, "foil": r["caption"]} if k % 2 else {**r, "foil": negated})
    kept, report = adversarial_filter(scored(records), filter_settings(balance=["negation"]), REFINE)
    kept_records = [r for r in records if r["id"] in kept]
    captions = sum(negation_count(r["caption"]) > 0 for r in kept_records)
    foils = sum(negation_count(r["foil"]) > 0 for r in kept_records)
    assert abs(captions - foils) <= 1
    assert report["balance"]["negation"]["caption_minus_foil"] == captions - foils


def test_alternative_foils_are_chosen_before_a_caption_is_dropped():
    base = balanced_records(60, seed=8)
    rng = random.Random(9)
    records = []
    for r in base:  # proposal 1 carries the shortcut, proposal 2 (a '#1' alternative: another noun) does not
        records.append(planted([r])[0])
        other = rng.choice([n for n in NOUNS if n not in (r["classes"], r["classes_foil"])])
        records.append({**r, "id": r["id"] + "#1", "classes_foil": other,
                        "foil": r["caption"].replace(f"A {r['classes']} ", f"A {other} ", 1)})
    kept, report = adversarial_filter(scored(records), filter_settings(), REFINE)
    samples = {r["sample_id"] for r in records if r["id"] in kept}
    assert len(samples) == len(kept)
    assert len(kept) >= 0.6 * len(base)  # captions kept through their other foil, not dropped
    assert sum(rid.endswith("#1") for rid in kept) > len(kept) / 2


def test_gate_must_use_a_family_the_filter_did_not():
    params = {"instruments": {"x": {}},
              "attackers": {"word": {"attacker": "word_ngram.v1"}, "bayes": {"attacker": "ngram_bayes.v1"}},
              "adversarial": {"attackers": ["word"], "seed": 0},
              "gate": {"attackers": ["word"], "seed": 1}}
    with pytest.raises(ConfigError, match="every family .* the adversarial filter of x used"):
        gate_apart(instrument_settings(params, "x"))
    params["gate"] = {"attackers": ["word", "bayes"], "seed": 0}
    with pytest.raises(ConfigError, match="seed equals adversarial.seed"):
        gate_apart(instrument_settings(params, "x"))
    params["gate"]["seed"] = 5
    assert gate_apart(instrument_settings(params, "x")) == {"word": "word n-grams", "bayes": "naive Bayes on single texts"}


def test_certify_multiple_choice_at_chance_and_with_a_shortcut():
    rng = random.Random(3)
    records = []
    for k in range(60):
        options = [f"{v} the {n} {k}" for v, n in zip(rng.sample(["feed", "walk", "wash", "paint", "ride"], 5),
                                                    rng.sample(NOUNS, 5))]
        records.append({"id": f"m:{k}", "caption": options[rng.randrange(5)], "candidates": options})
    blocks = {"word": {"attacker": "word_ngram.v1"}}
    fair = certify(records, blocks, folds=5, seed=0, repeats=2)["word"]
    assert fair["chance"] == 0.2 and abs(fair["accuracy"] - 0.2) < 0.12 and fair["passed"]
    cued = [{**r, "caption": r["caption"] + " now", "candidates": [c + " now" if c == r["caption"] else c
                                                                    for c in r["candidates"]]} for r in records]
    solved = certify(cued, blocks, folds=5, seed=0, repeats=2)["word"]
    assert solved["accuracy"] > 0.9 and not solved["passed"] and solved["verdict"] == "target preferred"
    # a grid's setting is chosen on the target-versus-decoy pairs of every item, as each fold chose on its own
    grid = {"word": {"attacker": "word_ngram.v1", "grid": {"ngram_range": [[1, 1], [2, 2]]}}}
    assert certify(cued, grid, folds=5, seed=0, repeats=1)["word"]["setting"] == {"ngram_range": [1, 1]}


# ---------------------------------------------------------------------------------------- export refuses, refilter

def test_export_refuses_an_instrument_above_the_gate(tmp_path):
    from foilforge.pipeline.release import check_gates

    baseline = tmp_path / "baseline"
    baseline.mkdir()
    gate = {"passed": False, "mode": "fail", "max_accuracy": 0.55,
            "attackers": {"word": {"after": {"accuracy": 0.7, "n": 40, "passed": False, "attacker": "word_ngram.v1()"}}}}
    (baseline / "relations.json").write_text(json.dumps({"gate": gate}))
    files = [tmp_path / "relations.jsonl"]
    with pytest.raises(GateError, match=r"instrument relations is not blind-proof: attacker word .* 70.0% of 40 pairs"):
        check_gates({}, files, baseline)
    gate["attackers"]["word"]["after"]["n"] = 6
    (baseline / "relations.json").write_text(json.dumps({"gate": gate}))
    with pytest.raises(GateError, match=r"relations is not blind-proof: only 6 pairs are left, and fewer than 20 are "
                                        r"not certified \(attacker word: 70.0%\)"):
        check_gates({}, files, baseline)
    gate["mode"] = "report"
    (baseline / "relations.json").write_text(json.dumps({"gate": gate}))
    check_gates({}, files, baseline)  # reported, not refused


def test_datacard_says_not_blind_proof_under_its_verdict_table():
    from foilforge.pipeline.card import datacard_text
    from foilforge.pipeline.gate import certify_readings

    after = {"accuracy": 0.7, "n": 40, "passed": False, "family": "word n-grams", "ci95": [0.55, 0.82],
             "verdict": "caption preferred", "max_accuracy": 0.55}
    gate = {"passed": False, "mode": "report", "max_accuracy": 0.55, **certify_readings({"word": after}, {}, 0.12, 0.05),
            "attackers": {"word": {"before": {**after, "accuracy": 0.8}, "after": after}}}
    manifest = {"instruments": {"relations": {"gate": gate, "counts": {"exported": 40}, "provenance": {}, "filters": {}}},
                "sources": {}}
    text = datacard_text(manifest)
    lines = text.splitlines()
    # 28 of 40: 2 P(X >= 28 | 40, 1/2) = 0.017 excludes chance at 0.05 (one reading)
    assert lines[6] == ("| relations | 40 | n/a (no pairer) | solvable | word: 70.0% (55-82%) | a filter that removes "
                        "what the attacker reads (params.yaml adversarial) |")
    warning = next(k for k, line in enumerate(lines) if line.startswith("**Not blind-proof"))
    assert lines[warning].startswith("**Not blind-proof: relations (word 70.0%)") and \
        warning < lines.index("## Instruments")
    assert "| relations | word | word n-grams | 80.0% | 70.0% | 40 | 55-82% | solvable (above chance) | FAIL (<= 55%) |" \
        in text


def write_valse(path: Path, records: list[dict]) -> None:
    path.write_text(json.dumps({r["id"].split(":")[1]: {"dataset": "x", "caption": r["caption"], "foil": r["foil"],
                                                          "classes": r["classes"], "classes_foil": r["classes_foil"],
                                                          "mturk": {"caption": 3, "foil": 0, "other": 0}}
                                for r in records}))


def refilter_params(tmp_path) -> dict:
    return {"seed": 0, "instruments": {"x": {"foiler": "released.v1", "source": "s",
                                             "filters": {"run": ["length"], "keep": {"length": {"max_tokens": 80}}}}},
            "filters": {"length": {"special_tokens": False}},
            "models": {"length_tokenizer": {"name_or_path": str(tmp_path / "tok")}},
            "attackers": {"word": {"attacker": "word_ngram.v1"}, "bayes": {"attacker": "ngram_bayes.v1"}},
            "gate": {"attackers": ["word", "bayes"], "repeats": 2}}


def test_refilter_keeps_the_input_format_and_reports(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter

    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    source = tmp_path / "in" / "relations.json"
    source.parent.mkdir()
    write_valse(source, balanced_records(30))
    report = refilter(refilter_params(tmp_path), source, "x", tmp_path / "out", progress=False)
    out = json.loads((tmp_path / "out" / "relations.json").read_text())
    released = json.loads(source.read_text())
    assert out == {k: released[k] for k in out}  # as released, only the kept ones
    assert report["records_before"] == 30 and report["records_after"] == len(out)
    assert set(report["gate"]["attackers"]) == {"word", "bayes"}
    assert json.loads((tmp_path / "out" / "report.json").read_text())["format"] == "valse"


def planted_refilter_run(tmp_path, tiny_models):
    """(source, params) of a small refilter run whose filters remove pairs: 50 balanced VALSE records, half with
    a planted cue (something for the gate to find before), the word attacker's adversarial filter and a word
    trigram plausibility refinement."""
    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    source = tmp_path / "in" / "relations.json"
    source.parent.mkdir()
    records = balanced_records(50, seed=11)
    write_valse(source, planted(records[:25]) + records[25:])  # something for the gate to find before
    params = refilter_params(tmp_path)
    params["adversarial"] = {"attackers": ["word"], "rounds": 2, "max_js_rise": None}
    params["instruments"]["x"]["filters"]["run"] = ["length", "plausibility"]
    params["instruments"]["x"]["filters"]["keep"]["plausibility"] = {"bins": 1, "choose": True, "max_js_rise": None}
    params["filters"]["plausibility"] = {"scorers": {"tri": {"kind": "ngram", "unit": "word", "order": 3,
                                                            "smoothing": "kneser_ney"}}}
    return source, params


def test_refilter_twice_gives_byte_identical_files(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter

    source, params = planted_refilter_run(tmp_path, tiny_models)
    outputs = []
    for _ in range(2):
        report = refilter(params, source, "x", tmp_path / "out", progress=False)
        outputs.append([(tmp_path / "out" / name).read_bytes() for name in ("relations.json", "report.json")])
    assert outputs[0] == outputs[1]
    assert report["adversarial"]["rounds"] >= 1 and report["records_after"] < 50  # the filters ran and removed pairs


def test_refilter_reads_sugarcrepe_and_names_bad_records(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter
    from foilforge.released import read_released, to_records

    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    path = tmp_path / "swap.json"
    path.write_text(json.dumps({"0": {"filename": "1.jpg", "caption": "a dog chases a cat",
                                      "negative_caption": "a cat chases a dog"}}))
    fmt, rows = read_released(path)
    assert fmt == "sugarcrepe"
    record = to_records(fmt, rows, path, "x")[0]
    assert (record["caption"], record["foil"]) == ("a dog chases a cat", "a cat chases a dog")
    assert record["classes"] and record["classes_foil"]
    path.write_text(json.dumps({"0": {"filename": "1.jpg", "caption": "a dog", "negative_caption": None}}))
    with pytest.raises(InputError, match=r"swap.json, record 0, field 'negative_caption': missing"):
        refilter(refilter_params(tmp_path), path, "x", tmp_path / "out", progress=False)
    path.write_text(json.dumps({"0": {"filename": "1.jpg", "caption": "", "negative_caption": "a cat"}}))
    with pytest.raises(InputError, match=r"swap.json, record 0, field 'caption': missing or empty"):
        refilter(refilter_params(tmp_path), path, "x", tmp_path / "out", progress=False)
    path.write_text(json.dumps({"0": {"text": "a dog"}}))
    with pytest.raises(InputError, match="unknown benchmark format"):
        refilter(refilter_params(tmp_path), path, "x", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_transformer_attacker_fits_a_tiny_model_through_from_pretrained(tiny_models):
    block = {"attacker": "transformer_pair.v1",
             "args": {"model": {"name_or_path": str(tiny_models.bert_encoder_only()), "device": "cpu", "batch_size": 8},
                      "epochs": 1}}
    pairs = pairs_from_records(planted(balanced_records(16)))
    first = build_attacker(block, "test").set_params(random_state=3).fit(pairs)
    margins = first.margins(pairs)
    assert first.margins([p.swapped() for p in pairs]) == pytest.approx(-margins, abs=1e-5)
    again = build_attacker(block, "test").set_params(random_state=3).fit(pairs).margins(pairs)
    assert again == pytest.approx(margins, abs=1e-6)  # deterministic for a seed


def test_transformer_attacker_names_the_model_key_when_it_cannot_load(tmp_path):
    block = {"attacker": "transformer_pair.v1", "args": {"model": {"name_or_path": str(tmp_path / "missing")}}}
    with pytest.raises(ConfigError, match=r"Set params.yaml attackers.minilm.args.model.name_or_path"):
        build_attacker(block, "params.yaml attackers.minilm").fit(pairs_from_records(balanced_records(4)))


def test_a_missed_target_names_the_shortcut_left():
    mixed = scored(planted(balanced_records(60, seed=4)))  # every foil carries "apparently": no subset is blind
    kept, report = adversarial_filter(mixed, filter_settings(min_keep=0.9), REFINE)
    assert not report["target_met"]
    assert report["shortcuts"][0] == {"attacker": "word", "feature": "apparently", "marks": "foil",
                                      "weight": report["shortcuts"][0]["weight"]}
    assert report["shortcuts"][0]["weight"] < 0


def test_features_built_once_give_the_margins_of_features_built_per_fold():
    """The shared vocabulary (shared_differences) is a speed-up only: out-of-fold margins are those of per-fold maps."""
    import numpy as np

    records = planted(balanced_records(40, seed=12)[:20]) + balanced_records(40, seed=12)[20:]
    pairs = pairs_from_records(records)
    extra = pairs_from_records(balanced_records(10, seed=13))
    for name in ("word_ngram.v1", "char_ngram.v1", "edit_tokens.v1", "ngram_bayes.v1"):
        def make(n=name):
            return build_attacker({"attacker": n}, "test")

        class PerFold(Attacker):  # the same attacker without the shared map
            def __init__(self, random_state=0):
                self.random_state = random_state

            def fit(self, train, y=None):
                self.inner_ = make().set_params(random_state=self.random_state).fit(train, y)
                return self

            def margins(self, held):
                return self.inner_.margins(held)

        fast, fast_extra = out_of_fold_margins(make, pairs, 5, 3, extra)
        slow, slow_extra = out_of_fold_margins(PerFold, pairs, 5, 3, extra)
        assert np.allclose(fast, slow, atol=1e-6) and np.allclose(fast_extra, slow_extra, atol=1e-6), name


def test_the_edit_attacker_sees_which_word_replaced_which():
    """A cycle of replacements (dog -> cat -> horse -> dog): each noun is the caption as often as the foil, and a
    weight per word (w_dog > w_cat > w_horse > w_dog) can get at most two of the three edits right; which word
    replaced which gives all three away."""
    rng = random.Random(4)
    records = []
    for k in range(120):
        a, b = [("dog", "cat"), ("cat", "horse"), ("horse", "dog")][k % 3]
        place, verb = rng.choice(PLACES), rng.choice(VERBS)
        records.append({"id": f"e:{k}", "sample_id": f"e:{k}", "caption": f"A {a} {verb} in the {place} {k}.",
                        "foil": f"A {b} {verb} in the {place} {k}.", "classes": a, "classes_foil": b})
    pairs = pairs_from_records(records)
    accuracy = {}
    for name in ("word_ngram.v1", "edit_tokens.v1"):
        margins, _ = out_of_fold_margins(lambda n=name: build_attacker({"attacker": n}, "test"), pairs, 5, 0)
        accuracy[name] = attack_summary(margins)["accuracy"]
    assert accuracy["edit_tokens.v1"] >= 0.95
    assert accuracy["word_ngram.v1"] <= 0.7  # at most 2 of 3 edits for any linear weights


@pytest.mark.parametrize("version", ["boosted_features.v1", "boosted_features.v2"])
def test_the_boosted_attacker_finds_a_length_cue(version):
    """Half the foils add a word ("again"), half drop one ("the"): the caption is the shorter text in one half and
    the longer in the other, so the sign of the word-count difference says nothing; the character counts do."""
    rng = random.Random(5)
    records = []
    for k in range(160):
        noun, place = rng.choice(NOUNS), rng.choice(PLACES)
        long_caption = k % 2 == 0
        caption = f"A {noun} sits in the {place} near the old stone wall today" if long_caption \
            else f"A {noun} sits in the {place}"
        foil = caption + " again" if long_caption else f"A {noun} sits in {place}"
        records.append({"id": f"b:{k}", "sample_id": f"b:{k}", "caption": caption, "foil": foil,
                        "classes": noun, "classes_foil": noun})
    margins, _ = out_of_fold_margins(lambda: build_attacker({"attacker": version}, "test"),
                                     pairs_from_records(records), 5, 0)
    assert attack_summary(margins)["accuracy"] >= 0.9
    coin = random.Random(6)
    shuffled = [r if coin.random() < 0.5 else {**r, "caption": r["foil"], "foil": r["caption"]} for r in records]
    margins, _ = out_of_fold_margins(lambda: build_attacker({"attacker": version}, "test"),
                                     pairs_from_records(shuffled), 5, 0)
    assert abs(attack_summary(margins)["accuracy"] - 0.5) <= 0.1  # sides shuffled: nothing left to find


def test_the_boosted_margins_are_the_two_calls_values_by_their_bytes():
    """margins predicts d and -d in one call: each value is the one a call of its own gives, to the bit."""
    import numpy as np

    records = [{"id": f"t:{k}", "sample_id": f"t:{k}", "caption": f"A dog number {k} sits on the {'red ' * (k % 3)}mat",
                "foil": f"A cat number {k} sits {'quietly ' * (k % 2)}on the mat", "classes": "dog",
                "classes_foil": "cat"} for k in range(60)]
    pairs = pairs_from_records(records)
    attacker = build_attacker({"attacker": "boosted_features.v1"}, "test").fit(pairs[:40])
    d = attacker.difference(pairs[40:])
    alone = attacker.classifier_.decision_function(d) - attacker.classifier_.decision_function(-d)
    assert attacker.margins(pairs[40:]).tobytes() == alone.tobytes() and np.abs(alone).max() > 0


def test_the_boosted_attacker_fits_and_predicts_on_one_openmp_thread(monkeypatch):
    """Fits run side by side (a fold a job), so each holds one OpenMP thread: checked inside scikit-learn's own
    fit and predict, on the OpenMP runtime scikit-learn ships (torch may have loaded another one)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_info

    seen = []
    fit, decide = HistGradientBoostingClassifier.fit, HistGradientBoostingClassifier.decision_function

    def sklearn_openmp_threads():
        return [pool["num_threads"] for pool in threadpool_info()
                if pool["user_api"] == "openmp" and "scikit_learn" in pool["filepath"]]

    def fit_spy(self, *args, **kwargs):
        seen.append(("fit", sklearn_openmp_threads()))
        return fit(self, *args, **kwargs)

    def decide_spy(self, *args, **kwargs):
        seen.append(("predict", sklearn_openmp_threads()))
        return decide(self, *args, **kwargs)

    monkeypatch.setattr(HistGradientBoostingClassifier, "fit", fit_spy)
    monkeypatch.setattr(HistGradientBoostingClassifier, "decision_function", decide_spy)
    records = [{"id": f"t:{k}", "sample_id": f"t:{k}", "caption": f"A dog number {k} sits on the mat",
                "foil": f"A cat number {k} sits on the mat", "classes": "dog", "classes_foil": "cat"} for k in range(40)]
    out_of_fold_margins(lambda: build_attacker({"attacker": "boosted_features.v1"}, "test"),
                        pairs_from_records(records), 5, 0)
    assert {kind for kind, _ in seen} == {"fit", "predict"}
    assert all(threads == [1] for _, threads in seen), seen


def boosted_records(count: int) -> list[dict]:
    return [{"id": f"t:{k}", "sample_id": f"t:{k}", "caption": f"A dog number {k} sits on the {'red ' * (k % 3)}mat",
             "foil": f"A cat number {k} sits {'quietly ' * (k % 2)}on the mat", "classes": "dog",
             "classes_foil": "cat"} for k in range(count)]


def test_the_lightgbm_boosted_margins_are_the_two_calls_values_by_their_bytes():
    """v2 predicts d and -d in one call too: each value is the one a call of its own gives, to the bit."""
    import numpy as np

    pairs = pairs_from_records(boosted_records(60))
    attacker = build_attacker({"attacker": "boosted_features.v2"}, "test").fit(pairs[:40])
    d = attacker.difference(pairs[40:])

    def raw(rows):
        return attacker.classifier_.predict(rows, raw_score=True, num_threads=1)

    alone = raw(d) - raw(-d)
    assert attacker.margins(pairs[40:]).tobytes() == alone.tobytes() and np.abs(alone).max() > 0


def test_the_lightgbm_boosted_attacker_grows_scikit_learns_model_on_one_thread():
    """v2's trees have v1's shape (max_depth, max_iter rounds, HistGradientBoosting's 20 rows a leaf) and are grown
    and read on one thread; the same pairs give the same margins, fit after fit."""
    pairs = pairs_from_records(boosted_records(200))
    attacker = build_attacker({"attacker": "boosted_features.v2", "args": {"max_iter": 7, "max_depth": 2}},
                              "test").fit(pairs)
    booster = attacker.classifier_
    assert booster.num_trees() == 7
    assert booster.params["num_threads"] == 1 and booster.params["max_depth"] == 2
    leaves = [tree["num_leaves"] for tree in booster.dump_model()["tree_info"]]
    assert max(leaves) <= 4  # depth 2
    counts = [leaf["leaf_count"] for tree in booster.dump_model()["tree_info"] for leaf in _leaves(tree["tree_structure"])
              if tree["num_leaves"] > 1]
    assert counts and min(counts) >= 20
    again = build_attacker({"attacker": "boosted_features.v2", "args": {"max_iter": 7, "max_depth": 2}},
                           "test").fit(pairs)
    assert again.margins(pairs).tobytes() == attacker.margins(pairs).tobytes()


def _leaves(node: dict) -> list[dict]:
    if "leaf_index" in node:
        return [node]
    return _leaves(node["left_child"]) + _leaves(node["right_child"])


def _logistic_objective(model, x, y, C):
    import numpy as np

    w = model.coef_[0]
    signs = 2 * np.asarray(y) - 1
    return 0.5 * float(w @ w) + C * float(np.logaddexp(0, -signs * (x @ w)).sum())


def test_a_capped_dual_logistic_fit_is_done_again_to_the_optimum():
    import warnings

    import numpy as np
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    from foilforge.filters.attackers.base import DUAL_MAX_ITER, fit_logistic

    rng = np.random.default_rng(0)
    rows = sparse.random(120, 300, density=0.03, random_state=1, data_rvs=lambda n: np.ones(n)).tocsr()
    rows = rows - sparse.random(120, 300, density=0.03, random_state=2, data_rvs=lambda n: np.ones(n)).tocsr()
    x = sparse.vstack([rows, -rows]).tocsr()
    labels = rng.integers(0, 2, 120)
    y = np.concatenate([labels, 1 - labels])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        capped = LogisticRegression(C=10.0, fit_intercept=False, solver="liblinear", dual=True, max_iter=5,
                                    random_state=0).fit(x, y)
    assert capped.n_iter_.max() == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning reaches the stage's log
        refitted = fit_logistic(x, y, 10.0, 0, dual=True, max_iter=5)
    optimum = LogisticRegression(C=10.0, fit_intercept=False, solver="liblinear", dual=False, tol=1e-8,
                                 max_iter=2000, random_state=0).fit(x, y)
    assert np.array_equal(refitted.coef_, optimum.coef_)
    assert _logistic_objective(refitted, x, y, 10.0) < _logistic_objective(capped, x, y, 10.0) - 1e-3
    # a fit the dual solver finishes within its cap is its own, bit for bit
    finished = fit_logistic(x, y, 1.0, 0, dual=True)
    dual = LogisticRegression(C=1.0, fit_intercept=False, solver="liblinear", dual=True, max_iter=2000,
                              random_state=0).fit(x, y)
    assert dual.n_iter_.max() < DUAL_MAX_ITER and np.array_equal(finished.coef_, dual.coef_)


def test_a_liblinear_fit_is_logistic_regressions_fit_bit_for_bit():
    """liblinear_fit skips LogisticRegression's checks, not its arithmetic: the same coefficients, iterations and
    margins, compared by their bytes (a zero row's too), on sparse rows with the dual and the primal solver, dense
    rows, and a fit that stops at its cap."""
    import warnings

    import numpy as np
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    from foilforge.filters.attackers.base import liblinear_fit

    rng = np.random.default_rng(3)
    rows = sparse.random(90, 400, density=0.02, random_state=3, data_rvs=lambda n: rng.choice([-1.0, 1.0], n))
    dense = rng.normal(size=(70, 24))
    both = sparse.vstack([rows, -rows]).tocsr()
    cases = [(both, True, 100, 1e-4), (both, False, 2000, 1e-8),
             (np.vstack([dense, -dense]), False, 2000, 1e-4), (both, True, 3, 1e-4)]
    for x, dual, max_iter, tol in cases:
        y = np.r_[np.ones(x.shape[0] // 2), np.zeros(x.shape[0] // 2)]
        for C in (0.1, 10.0):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = LogisticRegression(C=C, fit_intercept=False, solver="liblinear", dual=dual, tol=tol,
                                              max_iter=max_iter, random_state=5).fit(x, y)
            fit = liblinear_fit(x, y, C, 5, dual, max_iter, tol=tol)
            assert fit.coef_.tobytes() == expected.coef_.tobytes() and np.array_equal(fit.n_iter_, expected.n_iter_)
            held = sparse.vstack([x[:7], x[:1] * 0.0]).tocsr() if sparse.issparse(x) else np.vstack([x[:7], x[:1] * 0])
            assert fit.decision_function(held).tobytes() == expected.decision_function(held).tobytes()


def test_a_scikit_learn_whose_liblinear_binding_differs_fits_through_logistic_regression(monkeypatch, caplog):
    """The binding liblinear_fit calls is scikit-learn's private one: where it takes other arguments, the fit goes
    through LogisticRegression, with the same numbers, says so once, and stays there."""
    import numpy as np
    from scipy import sparse

    from foilforge.filters.attackers import base

    rows = sparse.random(50, 80, density=0.05, random_state=7, data_rvs=lambda n: np.ones(n))
    x, y = sparse.vstack([rows, -rows]).tocsr(), np.r_[np.ones(50), np.zeros(50)]
    expected = base.liblinear_fit(x, y, 1.0, 3, True, 100)
    calls = []

    def other_binding(*args):
        calls.append(len(args))
        raise TypeError("train_wrap() takes 13 positional arguments but 12 were given")

    monkeypatch.setattr(base, "liblinear_binding", lambda: other_binding)
    monkeypatch.setattr(base, "_BINDING_WORKS", [True])
    with caplog.at_level("WARNING"):
        first, second = base.liblinear_fit(x, y, 1.0, 3, True, 100), base.liblinear_fit(x, y, 1.0, 3, True, 100)
    assert first.coef_.tobytes() == expected.coef_.tobytes() == second.coef_.tobytes()
    assert np.array_equal(first.n_iter_, expected.n_iter_) and calls == [12]
    assert sum("LogisticRegression instead" in r.getMessage() for r in caplog.records) == 1


def test_logistic_fits_run_on_one_blas_thread(monkeypatch):
    """liblinear's solvers call BLAS (scipy's) thousands of times a fit: inside the fit every BLAS pool has one
    thread, and the process's own counts come back after it."""
    import numpy as np
    from sklearn.svm import _liblinear
    from threadpoolctl import threadpool_info, threadpool_limits

    from foilforge.filters.attackers.base import fit_logistic

    def blas_threads():
        return sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})

    seen, liblinear = [], _liblinear.train_wrap

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return liblinear(*args, **kwargs)

    monkeypatch.setattr(_liblinear, "train_wrap", spy)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8))
    with threadpool_limits(limits=2, user_api="blas"):  # what a process on 2 cores has
        fit_logistic(np.vstack([x, -x]), np.r_[np.ones(60), np.zeros(60)], 1.0, 0, dual=False)
        assert seen == [[1]] and blas_threads() == [2]


@pytest.mark.parametrize("rows, features", [(150, 12), (40, 300)])
def test_a_dense_logistic_fit_is_the_optimum(rows, features):
    """Newton's fit of dense rows meets the optimum's condition w = 2C sum_i sigma(-d_i . w) d_i to 1e-8 and agrees
    with scikit-learn's lbfgs at a tight tolerance on both orders of the rows, with more rows than features and
    with fewer (the steps then taken in the rows' span); liblinear's primal fit at its tolerance is further off."""
    import numpy as np
    from scipy.special import expit
    from sklearn.linear_model import LogisticRegression

    from foilforge.filters.attackers.base import fit_dense_logistic, fit_logistic

    rng = np.random.default_rng(rows)
    d = rng.normal(size=(rows, features)) + 0.3 * rng.normal(size=features)
    x, y = np.vstack([d, -d]), np.r_[np.ones(rows), np.zeros(rows)]
    for C in (0.01, 1.0, 10.0):
        fit = fit_dense_logistic(d, C)
        w = fit.coef_[0]
        residual = w - 2 * C * (d.T @ expit(-(d @ w)))
        assert np.linalg.norm(residual) <= 1e-8 * max(1.0, np.linalg.norm(w)), C
        reference = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(x, y).coef_[0]
        assert np.abs(w - reference).max() <= 1e-5 * max(1.0, np.abs(reference).max()), C
        liblinear = fit_logistic(x, y, C, 0, dual=False).coef_[0]
        assert np.abs(w - reference).max() <= np.abs(liblinear - reference).max(), C
        assert fit.decision_function(d[:5]).shape == (5,)


def test_a_probe_fits_dense_rows_by_newton_on_one_blas_thread_to_the_same_bits():
    """A linear pair attacker on dense rows (the hidden-state probes, the scorers' numbers) fits by Newton's
    method: on one BLAS thread inside the fit whatever the process has, so 1 and 2 threads give the same bytes."""
    import numpy as np
    import scipy.linalg
    from threadpoolctl import threadpool_info, threadpool_limits

    from foilforge.filters.attackers.base import LinearPairAttacker

    def blas_threads():
        return sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})

    seen, factor = [], scipy.linalg.cho_factor

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return factor(*args, **kwargs)

    rng = np.random.default_rng(4)
    d = rng.normal(size=(80, 200)) + 0.2
    coefs = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(scipy.linalg, "cho_factor", spy)
                model = LinearPairAttacker(C=1.0).fit_difference(d)
            coefs.append(model.classifier_.coef_.tobytes())
    assert seen and all(count == [1] for count in seen)
    assert coefs[0] == coefs[1]
    assert 3 <= int(model.classifier_.n_iter_[0]) < 100


def test_fold_fits_on_forked_processes_give_the_figures_of_one_process():
    """The gate's out-of-fold runs (grids on sparse and on dense rows, a generative attacker and both boosted ones,
    several partitions) on two forked processes: every margin as here, to the bit."""
    from foilforge.filters.attackers import ForkedRunner, out_of_fold_runs, run_here

    pairs = pairs_from_records(planted(balanced_records(40, seed=4)))
    blocks = {"word": {"attacker": "word_ngram.v1", "grid": {"ngram_range": [[1, 1], [1, 2]], "C": [0.1, 1.0]}},
              "bayes": {"attacker": "ngram_bayes.v1"}, "boosted": {"attacker": "boosted_features.v1",
                                                                 "args": {"max_iter": 10}},
              "light": {"attacker": "boosted_features.v2", "args": {"max_iter": 10}},
              "probe": {"attacker": "scorer_features.v1", "grid": {"C": [0.1, 10.0]}}}
    here = out_of_fold_runs(blocks, pairs[:30], 5, [3, 4], pairs[30:], runner=run_here)
    forked = out_of_fold_runs(blocks, pairs[:30], 5, [3, 4], pairs[30:], runner=ForkedRunner(2))
    assert here.keys() == forked.keys()
    for key in here:
        assert [m.tolist() for m in here[key]] == [m.tolist() for m in forked[key]]


def test_refilter_on_two_workers_writes_the_bytes_of_one(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter

    source, params = planted_refilter_run(tmp_path, tiny_models)
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        report = refilter(params, source, "x", out, progress=False, workers=workers)
        outputs.append([(out / "relations.json").read_bytes(),
                        json.dumps({k: v for k, v in report.items() if k != "output"}, sort_keys=True)])
    assert outputs[0] == outputs[1]
    assert report["adversarial"]["rounds"] >= 1 and report["gate"]["attackers"]


@pytest.mark.parametrize(("filters_rise", "keep_rule_rise", "applied"), [
    (0.0, 0.05, 0.0),      # the stricter of the two
    (0.1, 0.05, 0.05),
    (0.1, None, 0.1),      # the keep rule sets none: the filter's
    (None, 0.05, None),    # the filter's null switches the JS bound off (existence: its negation balance instead)
])
def test_the_js_bound_in_the_loop_is_the_stricter_of_the_filter_s_and_the_keep_rule_s(filters_rise, keep_rule_rise,
                                                                                       applied):
    from foilforge.filters.adversarial import AdversarialSearch

    search = AdversarialSearch(scored(balanced_records(20, seed=1)), filter_settings(max_js_rise=filters_rise),
                               {**REFINE, "max_js_rise": keep_rule_rise})
    assert search.refine_args["max_js_rise"] == applied
    assert search.refine_args["js_floor_aware"] is True
