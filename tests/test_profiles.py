"""profiles/: paper.yaml (one switch to the paper's models) and coco-val.yaml (COCO val at real size), validated by
check-params, applied by dvc exp run or by `foilforge repro --profile`."""

import shutil
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError
from foilforge.params import load_params, load_profile, merge_profile, profile_overrides
from foilforge.pipeline import params_check as check_params
from foilforge.pipeline.stages import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def paper():
    return merge_profile(load_params("params.yaml"), load_profile("paper"))


def test_paper_profile_sets_the_papers_models():
    params = paper()
    instruments = params["instruments"]
    assert instruments["relations"]["args"]["ranker"] == {"kind": "masked_lm", "name_or_path": "bert-large-cased",
                                                          "device": "auto", "dtype": "float32", "batch_size": 64}
    # the paper's models in the paper's precision, whatever dtype params.yaml's offline SmolLM2 block runs in
    assert instruments["action_replacement"]["args"]["proposer"]["dtype"] == "float32"
    assert params["models"]["text_baseline"]["dtype"] == "float32"
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
    with pytest.raises(ConfigError, match=r"profile 'papr': profiles/papr.yaml not found \(profiles: coco-val, paper\)"):
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


COCO_INSTRUMENTS = ("plurals", "relations", "foil_it", "swap_obj", "swap_att", "replace_obj", "replace_att",
                    "replace_rel", "add_obj", "add_att")


def test_coco_val_profile_foils_the_first_caption_of_each_image_for_every_coco_instrument():
    shipped = load_params("params.yaml")
    params = merge_profile(shipped, load_profile("coco-val"))
    coco = sorted(name for name, block in shipped["instruments"].items() if block["source"] == "coco")
    assert coco == sorted(COCO_INSTRUMENTS)  # a new COCO instrument belongs in the profile too
    for name in coco:
        assert params["instruments"][name]["samples_per_image"] == 1 and params["instruments"][name]["max_samples"] is None
    assert params["sources"]["coco"]["files"] == {"captions": "captions_val2017.json"}
    assert params["instruments"]["existence"] == shipped["instruments"]["existence"]


def test_repro_profile_writes_the_checked_params_as_dvc_exp_run_would(tmp_path):
    from foilforge.pipeline.stages.repro import apply_profile

    copy = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", copy)
    sample = str(ROOT / "data" / "sample" / "coco")
    assert apply_profile(str(copy), "coco-val", [f"sources.coco.root={sample}"]) == []
    expected = merge_profile(load_params("params.yaml"), load_profile("coco-val"))
    expected["sources"]["coco"]["root"] = sample
    assert yaml.safe_load(copy.read_text()) == expected
    assert "# foilforge parameters." in copy.read_text()  # DVC's writer keeps the comments
    # a key params.yaml leaves out (it takes the schema's default) is added with `+`, as in `dvc exp run -S`
    assert apply_profile(str(copy), "coco-val", [f"sources.coco.root={sample}", "+gate.margin=0.1"]) == []
    assert yaml.safe_load(copy.read_text())["gate"]["margin"] == 0.1


@pytest.mark.parametrize(("sets", "problem"), [
    ([], "params.yaml + profile coco-val sources.coco.root: 'data/coco-val' is not a folder (point it at your "
         "download: -S sources.coco.root=DIR; make coco-val takes COCO=DIR)"),
    (["sources.coco.root=data/sample/coco", "instruments.plurals.samples_per_image=0"],
     "params.yaml + profile coco-val instruments.plurals.samples_per_image: expected a value >= 1, got 0"),
    (["sources.coco.root=data/sample/coco", "gate.margin=0.1"],
     "params.yaml: gate.margin is not written in the file (left out, it takes the schema's default; docs/params.md); "
     "add it with -S +gate.margin=0.1"),
])
def test_repro_profile_with_a_problem_names_it_and_leaves_params_yaml_as_it_was(tmp_path, monkeypatch, capsys, sets,
                                                                                problem):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "profiles", project / "profiles")
    shutil.copytree(ROOT / "data" / "sample", project / "data" / "sample")
    shutil.copy(ROOT / "params.yaml", project / "params.yaml")
    monkeypatch.chdir(project)
    argv = ["repro", "--profile", "coco-val"] + [word for value in sets for word in ("-S", value)]
    assert cli.main(argv) == 1
    assert problem in capsys.readouterr().err.splitlines()
    assert (project / "params.yaml").read_bytes() == (ROOT / "params.yaml").read_bytes()
