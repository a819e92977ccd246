"""Honest certification: pairs that cannot be foils are refused, votes decide what the filter may keep, suspects
go first to annotators."""

from __future__ import annotations

import json
import random

import pytest

from foilforge.errors import ConfigError
from foilforge.filters.adversarial import adversarial_filter
from foilforge.validity import EMPTY_FOIL, FOIL_EQUALS_CAPTION, refusal, refuse_invalid, validity_shares
from tests.test_attackers import (
    NOUNS,
    REFINE,
    balanced_records,
    filter_settings,
    planted,
    refilter_params,
    scored,
    write_valse,
)

# ---------------------------------------------------------------------------------------- validity first

def test_a_foil_equal_to_its_caption_or_empty_is_refused():
    assert refusal({"caption": "A man confronts the people.", "foil": "A man confronts the people."}) == \
        FOIL_EQUALS_CAPTION
    assert refusal({"caption": "A man  confronts the people.", "foil": " a MAN confronts the people. "}) == \
        FOIL_EQUALS_CAPTION
    assert refusal({"caption": "A man.", "foil": "  "}) == EMPTY_FOIL
    assert refusal({"caption": "A man.", "foil": None}) == EMPTY_FOIL
    assert refusal({"caption": "A man confronts the people.", "foil": "A man confronts the person."}) is None
    kept, counts = refuse_invalid([{"caption": "a", "foil": "A"}, {"caption": "a", "foil": ""},
                                   {"caption": "a", "foil": "b"}, {"caption": "c", "foil": "C "}])
    assert kept == [{"caption": "a", "foil": "b"}] and counts == {EMPTY_FOIL: 1, FOIL_EQUALS_CAPTION: 2}


def test_select_refuses_them_and_counts(tmp_path):
    from foilforge.pipeline.selection import select

    records = [{"id": "a", "caption": "A dog.", "foil": "A cat.", "filters": {"length": {"score": 3, "caption_tokens": 3, "foil_tokens": 3}}},
               {"id": "b", "caption": "A dog.", "foil": "a dog.", "filters": {}},  # unscored: refused first
               {"id": "c", "caption": "A dog.", "foil": "", "filters": {"length": {"score": 2, "caption_tokens": 3, "foil_tokens": 0}}}]
    kept, rejected, metrics = select(records, {"length": {"max_tokens": 80}})
    assert [r["id"] for r in kept] == ["a"]
    assert [(r["id"], r["refused"]) for r in rejected] == [("b", FOIL_EQUALS_CAPTION), ("c", EMPTY_FOIL)]
    assert metrics["refused"] == {EMPTY_FOIL: 1, FOIL_EQUALS_CAPTION: 1} and metrics["kept"] == 1


def test_the_foil_stage_refuses_them_and_counts():
    from foilforge.foiler import FOILERS, RunContext, build_records
    from foilforge.records import Foil

    foiler = FOILERS.build("released.v1", {"phenomenon": "relations"})
    samples = {f"s{k}": {"id": f"s{k}", "source": "valse", "caption": "A cat sits on a mat."} for k in range(3)}
    context = RunContext("x", seed=0)
    context.samples = samples
    chosen = [Foil(caption="A cat sits on a mat.", foil=text, classes="on", classes_foil="under", sample_id=sid)
              for sid, text in zip(samples, ["A cat sits under a mat.", "a cat sits ON a mat. ", ""])]
    records = build_records(foiler, chosen, context)
    assert [r["foil"] for r in records] == ["A cat sits under a mat."]
    assert context.stats["refused"] == {EMPTY_FOIL: 1, FOIL_EQUALS_CAPTION: 1}


def test_refilter_refuses_them_with_a_count_in_the_report(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter

    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    source = tmp_path / "in" / "actant.json"
    source.parent.mkdir()
    records = balanced_records(30)
    records[3] = {**records[3], "foil": records[3]["caption"]}
    records[7] = {**records[7], "foil": records[7]["caption"].upper()}
    records[9] = {**records[9], "foil": ""}
    write_valse(source, records)
    report = refilter(refilter_params(tmp_path), source, "x", tmp_path / "out", progress=False)
    assert report["refused"] == {EMPTY_FOIL: 1, FOIL_EQUALS_CAPTION: 2}
    out = json.loads((tmp_path / "out" / "actant.json").read_text())
    assert not {"3", "7", "9"} & set(out) and report["records_after"] == len(out) == 27


def voted(records: list[dict], invalid: set[str]) -> list[dict]:
    """VALSE's votes on each record: 3 of 3 for the caption, or (invalid) 0 of 3."""
    return [{**r, "mturk": {"caption": 0, "foil": 3, "other": 0} if r["id"] in invalid else
             {"caption": 3, "foil": 0, "other": 0}} for r in records]


def planted_invalid(n: int, seed: int) -> tuple[list[dict], set[str]]:
    """Pairs with a shortcut word on the foil side (the filter has work to do) and a fifth of them whose foil is
    true by construction: a paraphrase of the caption ("sits" -> "is sitting"), which no attacker can predict."""
    records = planted(balanced_records(n, seed=seed))
    rng = random.Random(seed)
    invalid = set(rng.sample([r["id"] for r in records], n // 5))
    out = []
    for r in records:
        if r["id"] in invalid:
            caption = r["caption"]
            r = {**r, "foil": caption.replace(" in the ", " apparently in the "), "classes_foil": r["classes"]}
        out.append(r)
    return out, invalid


def test_planted_invalid_pairs_are_not_favoured_where_votes_exist():
    from foilforge.pipeline.selection import select

    records, invalid = planted_invalid(100, seed=3)
    input_share = len(invalid) / len(records)
    rows = voted(scored(records), invalid)
    for row in rows:
        row["filters"]["plausibility"].update(score=0.0)
    enabled = {"plausibility": {"bins": 1, "choose": True, "max_js_rise": None}}
    kept, rejected, metrics = select(rows, enabled, item_mode="direct", adversarial=filter_settings())
    kept_invalid = {r["id"] for r in kept} & invalid
    assert len(kept_invalid) / len(kept) <= input_share and not kept_invalid
    assert metrics["validity"] == validity_shares(rows, kept)
    assert metrics["validity"]["kept"] == 1.0 and metrics["validity"]["all"] == 0.8
    assert metrics["validity"]["removed"] < 0.8 and metrics["suspects"] == 0


def test_without_votes_the_confidently_wrong_pairs_are_suspects_and_annotated_first(tmp_path):
    from foilforge.pipeline.annotation import read_candidates
    from foilforge.pipeline.selection import select

    records = balanced_records(100, seed=4)
    # the shortcut word on the foil side of most pairs, on the caption side of a few: the attackers learn it and
    # then get those few confidently wrong (as they would a foil that is true of the image)
    reversed_ids = {r["id"] for r in records[:12]}
    rows = []
    for r in scored(records):
        if r["id"] in reversed_ids:
            r = {**r, "caption": r["caption"].replace(" in the ", " apparently in the ")}
        else:
            r = {**r, "foil": r["foil"].replace(" in the ", " apparently in the ")}
        r["filters"]["plausibility"].update(score=0.0)
        rows.append(r)
    enabled = {"plausibility": {"bins": 1, "choose": True, "max_js_rise": None}}
    kept, _, metrics = select(rows, enabled, item_mode="direct", adversarial=filter_settings(min_keep=0.9))
    suspects = [r["id"] for r in kept if r["filters"]["plausibility"].get("suspect")]
    # the reversed pairs, up to one pair a noun's chance association makes look reversed too
    assert len(set(suspects) & reversed_ids) >= 10 and len(set(suspects) - reversed_ids) <= 1
    assert metrics["suspects"] == len(suspects)
    report = metrics["refinement"]["plausibility"]["adversarial"]
    assert sorted(report["suspects"]) == sorted(suspects) and "validity" not in metrics
    path = tmp_path / "filtered.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    order = [r["id"] for r in read_candidates(path)]
    assert order[:len(suspects)] == sorted(suspects)


def test_the_gate_certifies_the_valid_pairs_only():
    from foilforge.pipeline.gate import release_gate

    records, invalid = planted_invalid(60, seed=5)
    params = {"instruments": {"x": {}}, "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word"], "repeats": 1}}
    gate = release_gate(params, "x", voted(records, invalid), [])
    assert gate["attackers"]["word"]["after"]["n"] == 60 - len(invalid)


# ---------------------------------------------------------------------------------------- the two-sided gate

def figures(accuracy: float, n: int) -> dict:
    from foilforge.metrics import wilson_interval

    return {"accuracy": accuracy, "n": n, "ci95": list(wilson_interval(round(accuracy * n), n))}


def test_a_40_pair_set_at_50_percent_is_inconclusive_and_400_pairs_are_certified():
    from foilforge.filters.certification import certification

    # 20 of 40: P(X >= 20 | 40, 0.38) = P(X <= 20 | 40, 0.62) = 0.082 > 0.05, not shown within 38-62%
    verdict = certification({"word": figures(0.5, 40)})
    assert verdict["status"] == "inconclusive" and not verdict["certified"]
    assert verdict["attackers"]["word"]["why"] == ("reads 50.0% of 40 pairs, 95% CI 35.2%-64.8%: inconclusive: 40 "
                                                   "pairs, about 60 needed")
    assert certification({"word": figures(0.5, 400)})["certified"]


def test_a_reading_off_chance_is_not_certified_whatever_the_others_say():
    from foilforge.filters.certification import certification

    verdict = certification({"word": figures(0.5, 400), "char": figures(0.67, 400), "bayes": figures(0.5, 40)})
    assert verdict["status"] == "solvable"
    assert verdict["why"].startswith("char reads 67.0% of 400 pairs, 95% CI 62.2%-71.4%: above chance (50.0%)")
    assert {n: a["standing"] for n, a in verdict["attackers"].items()} == {
        "word": "within", "char": "above chance", "bayes": "inconclusive"}


def over_balanced(n_reversed: int, n_random: int, seed: int = 0) -> list[dict]:
    """Pairs whose changed word appears as caption in one pair and as foil in another (the two pairs have different
    captions, so they fall in different folds): an attacker trained on one is led to the foil of the other; plus
    pairs with nothing to learn."""
    records = []
    for k in range(n_reversed // 2):
        a, b = f"zq{k}a", f"zq{k}b"
        records.append({"id": f"r:{k}", "sample_id": f"r:{k}", "caption": f"A {a} sits by the door {k}.",
                        "foil": f"A {b} sits by the door {k}.", "classes": a, "classes_foil": b})
        records.append({"id": f"s:{k}", "sample_id": f"s:{k}", "caption": f"The {b} waits near a tree {k}.",
                        "foil": f"The {a} waits near a tree {k}.", "classes": b, "classes_foil": a})
    return records + balanced_records(n_random, seed=seed)


def test_an_over_balanced_set_is_not_certified(tmp_path):
    from foilforge.pipeline.gate import release_gate

    params = {"instruments": {"x": {}}, "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word"], "repeats": 3}}
    gate = release_gate(params, "x", over_balanced(200, 200), [])
    after = gate["attackers"]["word"]["after"]
    assert 0.2 <= after["accuracy"] <= 0.36 and after["ci95"][1] < 0.40  # about 30%: half near 10% (a fifth of the reversed couples share a fold), half at chance
    assert after["passed"]  # the one-sided max_accuracy lets it through ...
    assert not gate["certified"] and gate["status"] == "over-balanced"  # ... the two-sided tests do not
    assert "below chance (50.0%) at the familywise 0.05 level: over-balanced" in gate["why"]


def test_the_filter_aims_at_chance_from_below_too():
    rows = scored(over_balanced(80, 120, seed=2))
    kept, report = adversarial_filter(rows, filter_settings(min_keep=0.3), REFINE)
    before = report["accuracy_before"]["word"]
    assert before < 0.45
    assert report["target_met"] and report["accuracy_after"]["word"] >= 0.45
    removed = {r["id"] for r in rows} - kept
    assert sum(rid.startswith(("r:", "s:")) for rid in removed) > len(removed) / 2  # the reversed pairs went first


def test_refilter_reports_certified_and_why(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter

    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    source = tmp_path / "in" / "relations.json"
    source.parent.mkdir()
    write_valse(source, balanced_records(40))
    report = refilter(refilter_params(tmp_path), source, "x", tmp_path / "out", progress=False)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    # 40 pairs cannot be certified whatever the attackers read: 20 of 40 is not shown within 38-62%
    assert written["certified"] is False and written["status"] == report["gate"]["status"] != "certified"
    assert written["why"] == report["gate"]["why"] and " reads " in written["why"]


# ---------------------------------------------------------------------------------------- attackers not starved

def starved(seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(kept, removed): each kept pair carries its own cue couple, one word on the caption side and its partner in
    the same place on the foil side, that no other kept pair has (out of fold within the kept set it is unseen:
    chance), while the removed pairs carry every couple four times, the same way round."""
    def cued(r, k, tag):
        return {**r, "caption": r["caption"].replace(" in the ", f" cue{k}c in the "),
                "foil": r["foil"].replace(" in the ", f" cue{k}f in the "), **tag}

    kept = [cued(r, k, {}) for k, r in enumerate(balanced_records(120, seed=seed))]
    removed = [cued(r, k % 120, {"id": f"gone:{k}", "sample_id": f"gone:{k}",
                                  "caption": r["caption"].replace(".", " today.")})
               for k, r in enumerate(balanced_records(480, seed=seed + 1))]
    return kept, removed


def test_an_attacker_fitted_on_the_removed_pairs_finds_what_the_kept_set_hides():
    from foilforge.filters.adversarial import predictability

    kept, removed = starved()
    blocks = {"word": {"attacker": "word_ngram.v1"}}
    _, within = predictability(kept, [], blocks, 5, 2, seed=0)
    scores, both, transfer = predictability(kept, [], blocks, 5, 2, seed=0, transfer=removed, with_transfer=True)
    assert 0.4 <= within["word"] <= 0.6 and both == within
    assert transfer["word"] >= 0.65
    # AFLite's predictability counts the transfer predictions as one more round: (2 rounds within + 1) / 3
    assert sum(scores.values()) / len(scores) == pytest.approx((2 * within["word"] + transfer["word"]) / 3)


def test_the_gate_certifies_transfer_attackers_too():
    from foilforge.pipeline.gate import release_gate

    kept, removed = starved(seed=2)
    params = {"instruments": {"x": {}}, "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word"], "repeats": 2}}
    gate = release_gate(params, "x", kept, removed)
    assert 0.4 <= gate["attackers"]["word"]["after"]["accuracy"] <= 0.6
    transfer = gate["transfer"]["word"]
    assert transfer["accuracy"] >= 0.65 and transfer["trained_on"] == 480 and transfer["n"] == 120
    assert not gate["certified"] and gate["why"].startswith("word from removed reads")
    params["gate"]["transfer"] = False
    assert release_gate(params, "x", kept, removed)["transfer"] == {}


def test_transfer_training_never_holds_a_kept_caption_or_an_invalid_pair():
    from foilforge.filters.adversarial import transfer_training

    kept = balanced_records(4)
    removed = [{**kept[0], "id": "other foil of a kept caption", "foil": "A bird sits."},
               {**kept[1], "id": "x", "caption": "A new caption.", "foil": "A new caption."},
               {**kept[2], "id": "y", "caption": "Another caption.", "foil": "Another foil."}]
    assert [r["id"] for r in transfer_training(kept, removed, [])] == ["y"]
    voted = [{**removed[2], "mturk": {"caption": 1, "foil": 2, "other": 0}},
             {**removed[2], "id": "z", "caption": "Third caption.", "mturk": {"caption": 3, "foil": 0, "other": 0}}]
    assert [r["id"] for r in transfer_training(kept, voted, [])] == ["z"]


def test_a_pool_is_read_like_a_released_file_and_a_missing_one_names_the_key(tmp_path):
    from foilforge.errors import ConfigError
    from foilforge.filters.adversarial import pool_records

    path = tmp_path / "pool.json"
    write_valse(path, balanced_records(5) + [{**balanced_records(1)[0], "id": "t:9", "foil": "A dog."}])
    records = pool_records([str(path)], "params.yaml adversarial")
    assert len(records) == 6 and records[0]["id"] == "pool0:0"
    with pytest.raises(ConfigError, match=r"params.yaml adversarial.pool\[0\]: .*missing.json is not a file"):
        pool_records([str(tmp_path / "missing.json")], "params.yaml adversarial")


# ---------------------------------------------------------------------------------------- not one setting

def word_order(n: int) -> list[dict]:
    """Pairs whose two texts hold the same words: the caption says "sits near", the foil "near sits". No bag of
    single words tells them apart; a bigram does."""
    rng = random.Random(1)
    out = []
    for k in range(n):
        a, b = rng.sample(NOUNS, 2)
        out.append({"id": f"o:{k}", "sample_id": f"o:{k}", "caption": f"The {a} sits near the {b} {k}.",
                    "foil": f"The {a} near sits the {b} {k}.", "classes": "sits near", "classes_foil": "near sits"})
    return out


def test_each_family_is_certified_at_the_strongest_setting_of_its_grid():
    from foilforge.filters.attackers import certify

    records = word_order(100)
    plain = {"word": {"attacker": "word_ngram.v1", "args": {"ngram_range": [1, 1]}}}
    assert certify(records, plain, repeats=1)["word"]["accuracy"] == 0.5  # every margin 0: a coin
    grid = {"word": {**plain["word"], "grid": {"ngram_range": [[1, 1], [1, 2]], "C": [0.1, 1.0]}}}
    result = certify(records, grid, repeats=1)["word"]
    assert result["accuracy"] == 1.0 and result["setting"] == {"ngram_range": [1, 2], "C": 0.1}
    assert "at the strongest of [ngram_range=[1, 1], C=0.1; ngram_range=[1, 1], C=1.0;" in result["attacker"]


def test_a_grid_builds_one_feature_map_per_feature_setting_and_chooses_as_if_it_built_one_per_setting(monkeypatch):
    """Settings that differ only in C share the rows of one feature map; the distances and the choice are those
    of building every setting's rows afresh."""
    import numpy as np

    from foilforge.filters.attackers import GridSearchAttacker, build_attacker, out_of_fold_margins, pairs_from_records
    from foilforge.filters.attackers.base import NgramPairAttacker

    pairs = pairs_from_records(word_order(40) + balanced_records(40))
    grid = {"attacker": "word_ngram.v1", "args": {}, "grid": {"ngram_range": [[1, 1], [1, 2], [1, 3]],
                                                              "C": [0.01, 1.0, 100.0]}}
    built = []
    original = NgramPairAttacker.fit_features

    def counting(self, fit_pairs):
        built.append(tuple(self.ngram_range))
        return original(self, fit_pairs)

    monkeypatch.setattr(NgramPairAttacker, "fit_features", counting)
    search = build_attacker(grid, "params.yaml attackers.word").set_params(random_state=3)
    chosen = search.choose(pairs)
    assert sorted(built) == [(1, 1), (1, 2), (1, 3)]  # one map per n-gram range, not one per (range, C)

    def accuracy(setting):  # each setting's rows built afresh, as without sharing
        margins, _ = out_of_fold_margins(lambda: search.make(setting), pairs, 3, 3)
        return abs(float(np.mean(np.where(margins > 0, 1.0, np.where(margins < 0, 0.0, 0.5)))) - 0.5)

    distances = [accuracy(setting) for setting in search.settings]
    assert chosen == search.settings[max(range(9), key=lambda k: (distances[k], -k))]
    assert isinstance(search, GridSearchAttacker) and search.features_key({"ngram_range": [1, 2], "C": 0.01}) == \
        search.features_key({"ngram_range": [1, 2], "C": 100.0}) != search.features_key({"ngram_range": [1, 3], "C": 0.01})


def test_nested_cross_validation_never_sees_the_scored_fold():
    from foilforge.filters.attackers import Attacker, GridSearchAttacker, out_of_fold_margins, pairs_from_records

    pairs = pairs_from_records(balanced_records(60))
    fitted: list[set] = []

    class Spy(Attacker):
        family, registry_name = "spy", "spy"

        def __init__(self, setting, random_state=0):
            self.setting = setting
            self.random_state = random_state

        def describe(self):
            return "spy"

        def fit(self, train, y=None):
            self.train_ = {p.group for p in train}
            fitted.append(self.train_)
            return self

        def margins(self, held):
            import numpy as np

            assert not self.train_ & {p.group for p in held}
            return np.full(len(held), 1.0 if self.setting["sign"] > 0 else -1.0)

    scored: list[set] = []

    def make():
        grid = GridSearchAttacker(Spy, [{"sign": 1}, {"sign": -1}])
        original = grid.fit

        def fit(train, y=None):
            fitted.clear()
            result = original(train, y)
            scored.append(({p.group for p in train}, [set(f) for f in fitted]))
            return result

        grid.fit = fit
        return grid

    out_of_fold_margins(make, pairs, folds=5, seed=0)
    all_groups = {p.group for p in pairs}
    assert len(scored) == 5
    for train_groups, fits in scored:
        held = all_groups - train_groups
        assert held and len(fits) == 2 * 3 + 1  # 2 settings x 3 inner folds, then the chosen one on all of train
        assert all(not fit & held for fit in fits)


def test_a_grid_names_its_key_when_it_is_wrong():
    from foilforge.errors import ConfigError
    from foilforge.filters.adversarial import gate_apart
    from foilforge.settings import instrument_settings

    params = {"instruments": {"x": {}}, "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word"], "grid": {"word": {"ngram_range": [[2, 1]]}}}}
    with pytest.raises(ConfigError, match=r"attackers.word.*ngram_range must be \[low, high\]"):
        gate_apart(instrument_settings(params, "x"))
    params["gate"]["grid"] = {"char": {"C": [1.0]}}
    with pytest.raises(ConfigError, match=r"params.yaml gate.grid: char not among gate.attackers \(word\)"):
        gate_apart(instrument_settings(params, "x"))


# ---------------------------------------------------------------------------------------- representation probes

def synonym_model(directory, cue_a: list[str], cue_b: list[str], seed: int = 0):
    """A tiny random BERT whose word embeddings give every word of `cue_a` one meaning and every word of `cue_b`
    another (the rows of each list share a vector, plus a little noise): two disjoint lists of synonyms that no
    n-gram relates, saved with save_pretrained and loaded back through from_pretrained like a user's model."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from tests.tiny_models import write_vocab

    torch.manual_seed(seed)
    vocab = write_vocab(directory, extra_words=cue_a + cue_b)
    tokenizer = BertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    tokenizer.save_pretrained(directory)
    model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=37, max_position_embeddings=64))
    with torch.no_grad():
        embeddings = model.embeddings.word_embeddings.weight
        meaning = torch.randn(2, embeddings.shape[1])
        for side, words in enumerate((cue_a, cue_b)):
            for word in words:
                row = tokenizer.convert_tokens_to_ids(word)
                embeddings[row] = meaning[side] + 0.05 * torch.randn(embeddings.shape[1])
    model.save_pretrained(directory)
    return directory


def synonym_pairs(cue_a: list[str], cue_b: list[str], shuffled: bool = False) -> list[dict]:
    """Pair k: the caption holds cue_a[k], the foil cue_b[k] in the same place; every cue word occurs once. With
    `shuffled`, a seeded coin swaps the two texts, so the cue says nothing about which is the caption."""
    rng = random.Random(7)
    out = []
    for k, (a, b) in enumerate(zip(cue_a, cue_b)):
        noun, place = rng.choice(NOUNS), rng.choice(["park", "street", "field", "room"])
        caption, foil = f"the {noun} is {a} in the {place} .", f"the {noun} is {b} in the {place} ."
        if shuffled and rng.random() < 0.5:
            caption, foil = foil, caption
        out.append({"id": f"p:{k}", "sample_id": f"p:{k}", "caption": caption, "foil": foil,
                    "classes": a, "classes_foil": b})
    return out


def cue_words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6)) for _ in range(n)]


def test_the_probe_solves_a_meaning_cue_no_ngram_sees_and_sits_at_chance_on_shuffled_sides(tmp_path):
    from foilforge.filters.attackers import certify

    cue_a, cue_b = cue_words(80, seed=1), cue_words(80, seed=2)
    assert not set(cue_a) & set(cue_b)
    model = synonym_model(tmp_path / "synonyms", cue_a, cue_b)
    probe = {"attacker": "hidden_probe.v1",
             "args": {"model": {"name_or_path": str(model), "device": "cpu", "batch_size": 16}, "C": 1.0}}
    blocks = {"probe": probe, "word": {"attacker": "word_ngram.v1"}}
    solved = certify(synonym_pairs(cue_a, cue_b), blocks, repeats=1)
    assert solved["word"]["accuracy"] == 0.5  # each cue word once: out of fold it is never seen
    assert solved["probe"]["accuracy"] >= 0.9 and solved["probe"]["family"] == "linear probe on frozen hidden states"
    shuffled = certify(synonym_pairs(cue_a, cue_b, shuffled=True), {"probe": probe}, repeats=3)
    assert 0.35 <= shuffled["probe"]["accuracy"] <= 0.65 and shuffled["probe"]["ci95"][0] < 0.5 < \
        shuffled["probe"]["ci95"][1]


def test_the_probe_encodes_each_text_once_and_names_its_key(tmp_path, monkeypatch):
    from foilforge.filters.attackers import build_attacker, hidden_probe, out_of_fold_margins, pairs_from_records

    cue_a, cue_b = cue_words(20, seed=3), cue_words(20, seed=4)
    model = synonym_model(tmp_path / "m", cue_a, cue_b)
    block = {"attacker": "hidden_probe.v1", "args": {"model": {"name_or_path": str(model), "device": "cpu"}}}
    encoded = []
    original = hidden_probe.HiddenStateProbeAttacker.vectors

    def counting(self, texts):
        cache = hidden_probe._CACHE.get(self._key(), {})
        encoded.extend(t for t in set(texts) if t not in cache)
        return original(self, texts)

    monkeypatch.setattr(hidden_probe.HiddenStateProbeAttacker, "vectors", counting)
    pairs = pairs_from_records(synonym_pairs(cue_a, cue_b))
    for seed in range(3):
        out_of_fold_margins(lambda: build_attacker(block, "params.yaml attackers.probe"), pairs, 5, seed)
    assert sorted(encoded) == sorted({t for p in pairs for t in (p.caption, p.foil)})  # once each, 3 runs
    with pytest.raises(ConfigError, match=r"params.yaml attackers.probe \(attacker hidden_probe.v1\): argument pooling must be one of mean, last"):
        build_attacker({**block, "args": {**block["args"], "pooling": "max"}}, "params.yaml attackers.probe")
    with pytest.raises(ConfigError, match=r"attackers.probe.args.model"):
        build_attacker({"attacker": "hidden_probe.v1", "args": {"model": {"name_or_path": str(tmp_path / "none")}}},
                       "params.yaml attackers.probe").fit(pairs)


def test_a_filter_that_makes_no_progress_returns_its_closest_round():
    # a target no set of these pairs meets (exactly 50%): the filter stops after two rounds without progress
    rows = scored(over_balanced(120, 80))
    kept, report = adversarial_filter(rows, filter_settings(target=0.5, min_keep=0.1, patience=2), REFINE)
    assert not report["target_met"] and report["stopped"].startswith("no progress: 2 rounds came no closer")
    closest = min(range(report["rounds"]), key=lambda k: (max(abs(a - 0.5) for a in
                                                            report["history"][k]["accuracy"].values()), k))
    assert report["returned_round"] == closest and len(kept) == report["history"][closest]["kept"]
    assert report["accuracy_after"] == report["history"][closest]["accuracy"]


def test_the_score_stage_refuses_them_and_writes_the_rest(tmp_path, caplog):
    from foilforge.pipeline.scoring import run

    source = tmp_path / "foils.jsonl"
    rows = [{"id": "a", "caption": "A dog.", "foil": "A cat."}, {"id": "b", "caption": "A dog.", "foil": " a DOG."},
            {"id": "c", "caption": "A dog.", "foil": ""}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    params = {"instruments": {"x": {"filters": {"run": []}}}}
    with caplog.at_level("WARNING"):
        assert run(params, "x", source, tmp_path / "scored.jsonl") == 1
    written = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert [r["id"] for r in written] == ["a"]
    assert "refused 1 records with empty foil, 1 records with foil equals caption" in caplog.text


def test_the_readings_before_the_refinement_average_their_own_partitions_and_leave_the_verdict_alone():
    from foilforge.filters.attackers import certify
    from foilforge.pipeline.gate import release_gate, unrefined

    kept = over_balanced(60, 60, seed=3)
    rejected = [{**r, "id": f"x{r['id']}", "sample_id": f"x{r['sample_id']}",
                 "filters": {"plausibility": {"passed": False}}} for r in balanced_records(40, seed=4)]
    blocks = {"word": {"attacker": "word_ngram.v1"}}
    params = {"instruments": {"x": {}}, "attackers": blocks,
              "gate": {"attackers": ["word"], "repeats": 3, "min_repeats": None}}
    gate = release_gate(params, "x", kept, rejected)
    before = unrefined(kept, rejected)
    assert len(before) == 160 and gate["repeats"] == 3 and gate["before_repeats"] == 1
    word = gate["attackers"]["word"]
    assert word["before"] == certify(before, blocks, folds=5, seed=101, repeats=1)["word"]
    assert word["after"]["repeats"] == 3
    every = release_gate({**params, "gate": {**params["gate"], "before_repeats": None}}, "x", kept, rejected)
    assert every["before_repeats"] == 3
    assert every["attackers"]["word"]["before"] == certify(before, blocks, folds=5, seed=101, repeats=3)["word"]
    assert every["attackers"]["word"]["after"] == word["after"]  # the certification reads the kept pairs alone
    assert {k: every[k] for k in ("certified", "status", "why")} == {k: gate[k] for k in ("certified", "status", "why")}


def test_the_readings_before_the_refinement_take_the_setting_the_search_chose_on_the_kept_pairs():
    """A gate attacker with a grid reads the unrefined records at the setting its nested search chose on the kept
    ones (one fit a fold); before_setting: searched runs the search inside each training fold there too."""
    from foilforge.filters.attackers import certify
    from foilforge.pipeline.gate import release_gate, unrefined

    kept = word_order(60)
    rejected = [{**r, "id": f"x{r['id']}", "sample_id": f"x{r['sample_id']}",
                 "filters": {"plausibility": {"passed": False}}} for r in balanced_records(40, seed=4)]
    grid = {"ngram_range": [[1, 1], [1, 2]], "C": [0.1, 1.0]}
    params = {"instruments": {"x": {}}, "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word"], "repeats": 2, "min_repeats": None, "transfer": False,
                       "grid": {"word": grid}}}
    gate = release_gate(params, "x", kept, rejected)
    after = gate["attackers"]["word"]["after"]
    assert after["setting"] == {"ngram_range": [1, 2], "C": 0.1}  # a bag of single words cannot read word order
    chosen = {"word": {"attacker": "word_ngram.v1", "args": {"ngram_range": [1, 2], "C": 0.1}}}
    before = unrefined(kept, rejected)
    assert gate["attackers"]["word"]["before"] == certify(before, chosen, folds=5, seed=101, repeats=1)["word"]
    assert "strongest" not in gate["attackers"]["word"]["before"]["attacker"]
    searched = release_gate({**params, "gate": {**params["gate"], "before_setting": "searched"}}, "x", kept, rejected)
    assert searched["attackers"]["word"]["before"] == certify(
        before, {"word": {"attacker": "word_ngram.v1", "grid": grid}}, folds=5, seed=101, repeats=1)["word"]
    assert searched["attackers"]["word"]["after"] == after  # the certification reads the kept pairs alone


def test_a_reading_settles_only_where_the_partitions_left_cannot_change_a_decision():
    from foilforge.filters.certification import settled

    # 181 pairs read at 100% twice: the partitions left would have to move the mean below 94% to change anything
    assert settled([1.0, 1.0], 181, 5)
    assert not settled([1.0], 181, 5)  # one partition shows no scatter
    # 58% of 400 pairs sits at the equivalence test's edge (within 38-62% at 0.05 takes at most about 58%)
    assert not settled([0.58, 0.58], 400, 5)
    assert not settled([0.45, 0.75], 181, 5)  # two partitions far apart: the mean could go anywhere
    # a reading between Holm's first and last levels: whether chance is excluded depends on the other readings
    # (52.8% of 2,000 pairs: p about 0.012, between 0.05 / 18 and 0.05; 49 of 50 partitions run, so it cannot move)
    assert not settled([0.528] * 49, 2000, 50, readings=18)
    assert settled([0.528] * 49, 2000, 50, readings=1)  # one reading: Holm's one level, chance excluded
    assert settled([0.58, 0.58, 0.6, 0.57, 0.59], 400, 5)  # every planned partition run
    # under 20 pairs the card says "too few pairs" and the gate does not pass at any accuracy, and 18 pairs
    # exclude neither chance nor the margin's edges within the reach (5-13 of 18): nothing left to decide
    assert settled([0.5, 0.5], 18, 5, readings=2)
    assert not settled([0.5, 0.5], 20, 5, readings=2)  # at 20 the card's words change within the reach


def test_the_gate_runs_another_partition_only_while_a_reading_could_still_change():
    from foilforge.filters.attackers import certify
    from foilforge.filters.certification import Settle

    blocks = {"word": {"attacker": "word_ngram.v1"}}
    settle = Settle(first=2, margin=0.12, alpha=0.05, readings=2)
    solved = planted(balanced_records(200, seed=5))  # every foil carries the cue: read at 100% in every partition
    early = certify(solved, blocks, folds=5, seed=101, repeats=5, settle=settle)["word"]
    every = certify(solved, blocks, folds=5, seed=101, repeats=5)["word"]
    assert (early["repeats"], every["repeats"]) == (2, 5)
    assert early["partitions"] == every["partitions"][:2] and early["accuracy"] == 1.0
    near_chance = balanced_records(60, seed=6)  # 60 blind pairs: a reading near 50% is near several decisions
    blind = certify(near_chance, blocks, folds=5, seed=101, repeats=5, settle=settle)["word"]
    assert blind["repeats"] == 5 and len(blind["partitions"]) == 5
    assert blind["accuracy"] == round(sum(blind["partitions"]) / 5, 4) or abs(
        blind["accuracy"] - sum(blind["partitions"]) / 5) < 1e-4
