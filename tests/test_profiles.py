"""profiles/paper.yaml: one switch to the paper's models, validated by check-params, applied by dvc exp run."""

import shutil
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError
from foilforge.params import load_params, load_profile, merge_profile, profile_overrides
from foilforge.pipeline.stages import check_params, cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def paper():
    return merge_profile(load_params("params.yaml"), load_profile("paper"))


def test_paper_profile_sets_the_papers_models():
    params = paper()
    instruments = params["instruments"]
    assert instruments["relations"]["args"]["scorer"] == {"kind": "masked_lm", "name_or_path": "bert-large-cased",
                                                          "device": "auto", "batch_size": 64}
    assert instruments["action_replacement"]["args"]["proposer"]["name_or_path"] == "bert-base-uncased"
    assert instruments["bd2bb_decoys"]["args"]["encoder"]["kind"] == "tf_hub"
    assert {instruments[i]["args"]["spacy_model"] for i in ("plurals", "relations", "bd2bb_decoys")} == {"en_core_web_sm"}
    assert params["models"]["text_baseline"]["name_or_path"] == "gpt2"
    assert params["filters"]["grammaticality"] == {"variant": "gruen", "relative_to_caption": False}
    assert instruments["plurals"]["filters"]["run"] == ["length", "grammaticality", "nli"]
    assert instruments["relations"]["filters"]["run"] == ["length", "grammaticality", "nli"]
    # untouched keys stay as params.yaml has them: the keep rules next to the run list, other instruments
    shipped = load_params("params.yaml")["instruments"]
    assert instruments["plurals"]["filters"]["keep"] == shipped["plurals"]["filters"]["keep"]
    assert instruments["existence"]["filters"] == shipped["existence"]["filters"]


def test_check_params_accepts_the_paper_profile(capsys):
    assert cli.main(["check-params", "--profile", "paper"]) == 0
    assert capsys.readouterr().out.strip().endswith("params.yaml + profile paper: ok")
    assert check_params.check(paper()) == []


def test_check_params_validates_the_merged_params(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"filters": {"grammaticality": {"variant": "gruen", "relative_to_caption": True}}}))
    assert cli.main(["check-params", "--profile", str(bad)]) == 2
    assert "relative_to_caption applies to the linkgrammar variant only" in capsys.readouterr().out


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"profile 'papr': profiles/papr.yaml not found \(profiles: paper\)"):
        load_profile("papr")


def test_dvc_set_params_give_the_same_params_as_the_overlay(tmp_path, capsys):
    """What `make repro PROFILE=paper` passes to `dvc exp run` yields exactly the merged params."""
    from dvc.utils import hydra
    assert cli.main(["profile", "paper"]) == 0
    words = capsys.readouterr().out.split()  # the shell's word splitting of $(foilforge profile paper)
    assert words[0::2] == ["-S"] * (len(words) // 2)
    copy = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", copy)
    hydra.apply_overrides(copy, words[1::2])
    assert yaml.safe_load(copy.read_text()) == paper()
    assert "# foilforge parameters." in copy.read_text()  # dvc keeps params.yaml's comments


def test_overrides_add_keys_params_lacks():
    assert profile_overrides({"models": {"x": {"revision": "abc123"}}}, {"models": {}}) == ['+models.x={"revision":"abc123"}']
    assert profile_overrides({"a": {"b": [1, 2]}}, {"a": {"b": None}}) == ["a.b=[1,2]"]
