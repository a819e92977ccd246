"""The pass store behind foilforge/lm.py's scores: texts scored before are answered with the same bits and no model
loaded, whatever call they come in; another model (its files changed) is scored anew; nothing kept without
FOILFORGE_SCORE_CACHE. tests/test_pass_store.py has the store's own tests."""

from __future__ import annotations

import json
import os

from foilforge import lm as lm_module
from foilforge.lm import CausalLM
from foilforge.models import ModelSpec
from foilforge.pass_store import STORE_FILE

TEXTS = ["a man is riding a bus .", "two dogs are playing in the field .", "there is a cat .", "a woman holding pizza ."]


def spec_of(path, batch_size=2):
    return ModelSpec.from_params({"name_or_path": str(path), "device": "cpu", "batch_size": batch_size},
                                 "models.text_baseline")


def no_load(*args, **kwargs):
    raise AssertionError("a model was loaded for a call the cache holds")


def test_texts_scored_before_are_answered_without_a_model(tiny_models, tmp_path, monkeypatch):
    path = tiny_models.gpt2_lm()
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    first = CausalLM(spec_of(path))
    computed = first.sentence_logprobs(TEXTS)
    assert (first.cache_hits, first.cache_misses) == (0, 4) and (tmp_path / "scores" / STORE_FILE).is_file()

    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    monkeypatch.setattr(lm_module, "load_tokenizer", no_load)
    again = CausalLM(spec_of(path))
    assert again.sentence_logprobs(TEXTS) == computed          # the very floats, not approximately
    assert again.perplexities(TEXTS) == first.perplexities(TEXTS)
    # another order, batch size or subset: the same texts, the same bits
    assert again.sentence_logprobs(TEXTS[::-1], batch_size=3) == computed[::-1]
    assert again.sentence_logprobs(TEXTS[1:3]) == computed[1:3]
    assert again.cache_hits == 4 + 4 + 4 + 2 and again._model is None and again._tokenizer is None


def test_another_model_is_scored_anew(tiny_models, tmp_path, monkeypatch):
    path = tiny_models.gpt2_lm()
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    lm = CausalLM(spec_of(path))
    lm.sentence_logprobs(TEXTS)
    lm.sentence_logprobs(TEXTS + ["a dog ."])
    assert (lm.cache_hits, lm.cache_misses) == (4, 5)
    # another model (its files changed) under the same path is another identity
    weights = next(p for p in path.iterdir() if p.suffix == ".safetensors")
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    other = CausalLM(spec_of(path))
    other.sentence_logprobs(TEXTS)
    assert (other.cache_hits, other.cache_misses) == (0, 4)


def test_no_cache_without_the_variable(tiny_models, tmp_path, monkeypatch):
    monkeypatch.delenv("FOILFORGE_SCORE_CACHE", raising=False)
    lm = CausalLM(spec_of(tiny_models.gpt2_lm()))
    lm.sentence_logprobs(TEXTS)
    assert (lm.cache_hits, lm.cache_misses) == (0, 0) and not list(tmp_path.rglob(STORE_FILE))
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    lm.sentence_logprobs(TEXTS)
    assert (lm.cache_hits, lm.cache_misses) == (0, 0)


def test_baseline_and_evaluate_rerun_byte_identical_from_the_cache(tiny_models, tmp_path, monkeypatch):
    from foilforge.pipeline import baseline
    from foilforge.pipeline.stages import evaluate

    path = tiny_models.gpt2_lm()
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    params = {"models": {"text_baseline": {"name_or_path": str(path), "device": "cpu", "batch_size": 2}},
              "evaluate": {"scorers": ["text_lm"]}, "blind_check": {}}
    records = tmp_path / "relations.jsonl"
    records.write_text("".join(json.dumps({"id": f"r{k}", "caption": c, "foil": f}) + "\n"
                               for k, (c, f) in enumerate(zip(TEXTS, TEXTS[1:] + TEXTS[:1]))))
    baseline.run(params, "relations", records, tmp_path / "first.json", tmp_path / "first.jsonl")
    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    baseline.run(params, "relations", records, tmp_path / "second.json", tmp_path / "second.jsonl")
    assert (tmp_path / "first.json").read_bytes() == (tmp_path / "second.json").read_bytes()
    assert (tmp_path / "first.jsonl").read_bytes() == (tmp_path / "second.jsonl").read_bytes()
    # evaluate's text_lm reports the dtype the model would load in without loading it
    [scorer], _ = evaluate.build_scorers(params, [])
    assert scorer.config()["dtype"] == "float32" and scorer.lm._model is None



def test_evaluate_after_baseline_loads_no_model(tiny_models, tmp_path, monkeypatch):
    """baseline scores the filtered records (sorted by id) in chunks; export writes the same records keyed by id
    (sorted); evaluate's text LM then makes the very same calls, all answered from the cache."""
    from foilforge.io import write_json, write_jsonl
    from foilforge.pipeline import baseline
    from foilforge.pipeline.release import to_valse_record
    from foilforge.pipeline.stages import evaluate

    path = tiny_models.gpt2_lm()
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    params = {"models": {"text_baseline": {"name_or_path": str(path), "device": "cpu", "batch_size": 2}},
              "evaluate": {"scorers": ["text_lm"]}, "blind_check": {}}
    ids = ["r10", "r2", "r1", "r33", "r4"]            # str order differs from this one
    records = [{"id": rid, "caption": c, "foil": f, "image_file": f"{k}.jpg"}
               for k, (rid, c, f) in enumerate(zip(ids, TEXTS + TEXTS[:1], TEXTS[1:] + TEXTS[:2]))]
    filtered = tmp_path / "filtered" / "relations.jsonl"
    write_jsonl(filtered, records)                       # as select writes it
    baseline.run(params, "relations", filtered, tmp_path / "baseline.json")
    write_json(tmp_path / "benchmark" / "relations.json", {r["id"]: to_valse_record(r) for r in records})  # as export
    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    monkeypatch.setattr(lm_module, "load_tokenizer", no_load)
    out = evaluate.run(params, tmp_path / "benchmark", tmp_path / "metrics.json")
    assert out["text_lm"]["instruments"]["relations"]["n_scored"] == 5
