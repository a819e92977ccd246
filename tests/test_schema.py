"""The params.yaml schema (foilforge/schema.py): one model of the whole file, every problem with its path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from foilforge.errors import ConfigError
from foilforge.params import load_params
from foilforge.schema import DVC_TRACKED_KEYS, problems

ROOT = Path(__file__).resolve().parents[1]
INSTRUMENT = {"foiler": "existence.v1", "source": "visual7w"}


def test_the_shipped_params_and_a_minimal_file_pass():
    assert problems(yaml.safe_load((ROOT / "params.yaml").read_text()), dvc_keys=True) == []
    assert problems({}) == []
    assert problems({"instruments": {"e": INSTRUMENT}}) == []


def test_every_problem_is_reported_at_once_with_its_path():
    params = {"seed": -1, "instruments": {"e": {**INSTRUMENT, "max_samples": "5", "gate": "warn"}},
              "bias": {"plot_top_k": 0}, "models": {"nli": {"name_or_path": "x", "batch_size": True}}}
    assert problems(params) == [
        "params.yaml seed: expected a value >= 0, got -1",
        "params.yaml instruments.e.max_samples: expected an integer, got '5'",
        "params.yaml instruments.e.gate: expected 'fail' or 'report', got 'warn'",
        "params.yaml models.nli.batch_size: expected an integer, got True",
        "params.yaml bias.plot_top_k: expected a value >= 1, got 0",
    ]


def test_a_value_no_union_member_takes_is_reported_once_at_its_deepest_path():
    source = {"format": "visdial", "root": "r", "files": {"dialogs": "d.json"}}
    assert problems({"sources": {"v": {**source, "image_file_template": ["a_{image_id}.jpg", 7]}}}) == [
        "params.yaml sources.v.image_file_template.1: expected a string, got 7"]
    assert problems({"sources": {"v": {**source, "image_file_template": 7}}}) == [
        "params.yaml sources.v.image_file_template: expected a string, got 7"]


def test_references_between_blocks_are_checked_even_when_a_shape_is_wrong():
    params = {"sources": {"coco": {"format": "coco", "root": "r", "files": {"captions": "c.json"}}},
              "instruments": {"e": {**INSTRUMENT, "max_samples": 0}},
              "attackers": {"word": {"attacker": "word_ngram.v1"}},
              "gate": {"attackers": ["word", "bayes"]}}
    assert problems(params) == [
        "params.yaml instruments.e.max_samples: expected a value >= 1, got 0",
        "params.yaml instruments.e.source: 'visual7w' is not a key of `sources` (coco)",
        "params.yaml gate.attackers: 'bayes' is not defined under `attackers` (defined: word)",
    ]


def test_load_params_reads_merge_keys_and_refuses_a_bad_file_naming_every_problem(tmp_path):
    text = """
shared:
  instrument: &instrument {args: {}, candidates_per_sample: null, max_samples: null, samples_per_image: null, filters: {run: [], keep: {}}, bias: {},
                           adversarial: {}, gate: fail, validation: {gold: [], votes: null},
                           pairing: {pairer: visual7w_answers.v1}}
instruments:
  e:
    <<: *instrument
    foiler: existence.v1
    source: visual7w
    gate: report
"""
    path = tmp_path / "params.yaml"
    path.write_text(text)
    params = load_params(path)
    assert params["instruments"]["e"]["gate"] == "report" and params["instruments"]["e"]["bias"] == {}
    assert problems(params, dvc_keys=True) == []
    path.write_text(text.replace("gate: report", "gate: later").replace("bias: {},", "bias: {js_mx: 1},"))
    with pytest.raises(ConfigError) as err:
        load_params(path)
    assert str(err.value).splitlines() == [
        f"2 problem(s) in {path}:",
        f"{path} instruments.e.bias.js_mx: unknown key; allowed: items, js_max, js_valid_max, max_majority_share, "
        "min_lexical_items",
        f"{path} instruments.e.gate: expected 'fail' or 'report', got 'later'",
    ]


def test_dvc_tracks_only_keys_every_instrument_block_has():
    """DVC fails on a params key the file lacks: each per-instrument key dvc.yaml tracks is one the schema
    asks every block to spell out (check-params reports a block without them)."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    tracked = {m.group(1) for stage in stages.values() for key in (stage.get("do") or {}).get("params") or []
               if (m := re.match(r"instruments\.\$\{key\}\.(\w+)", str(key)))}
    assert tracked and tracked <= set(DVC_TRACKED_KEYS)
    assert problems({"instruments": {"e": INSTRUMENT}}, dvc_keys=True) == [
        "params.yaml instruments.e: missing key(s) " + ", ".join(k for k in DVC_TRACKED_KEYS if k not in INSTRUMENT)
        + ", which dvc.yaml's stages track (start the block with `<<: *instrument`)"]


def test_load_params_gives_the_file_as_written_with_its_blocks_typed(tmp_path):
    params = load_params(ROOT / "params.yaml")
    assert params == yaml.safe_load((ROOT / "params.yaml").read_text())  # the mapping itself, unchanged
    assert params.bias.on_exceed == "warn" and params.bias.defaults.js_max == 0.75 and params.engine.ray.workers == 2
    assert params.bias.log_base == 2 and type(params.bias.log_base) is int  # a number keeps its YAML type
    path = tmp_path / "params.yaml"
    path.write_text("seed: 3\n")
    small = load_params(path)
    # what the file leaves out reads as the schema's defaults
    assert (small.seed, small.bias.on_exceed, small.bias.plot_top_k, small.evaluate.scorers, small.adversarial) == (
        3, "fail", 30, ["text_lm"], None)
    assert yaml.safe_load(yaml.safe_dump(small)) == {"seed": 3}
    with pytest.raises(AttributeError, match="no block 'nope'"):
        small.nope


def test_a_typed_block_that_does_not_validate_names_its_path():
    from foilforge.params import typed_params

    with pytest.raises(ConfigError, match=re.escape("params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'x'")):
        typed_params({"bias": {"on_exceed": "x"}}).bias
    assert typed_params({"bias": {"log_base": 10}}).bias.log_base == 10


def test_the_models_layer_and_the_schema_import_each_other_one_way():
    """schema.py builds on models.py (ModelFields); models.py renders its errors with config_errors.py, not schema.py."""
    import ast

    root = Path(__file__).resolve().parents[1] / "foilforge"

    def imported(name):
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    assert "foilforge.models" in imported("schema") and "foilforge.schema" not in imported("models")
    assert not {"foilforge.schema", "foilforge.models"} & imported("config_errors")
