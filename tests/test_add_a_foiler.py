"""docs/add_a_foiler.md works as written: its python block registers a foiler that the pipeline runs."""

import json
import re
from pathlib import Path

import pytest
import yaml

from foilers.base import FOILERS
from pipeline.errors import ConfigError

DOC = Path(__file__).resolve().parents[1] / "docs" / "add_a_foiler.md"
NAME = "colour_swap.v1"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.fixture
def registered():
    """Run the doc's python block(s) as a module would, then leave the registry as it was."""
    FOILERS.names()  # load the built-in foilers first
    before = dict(FOILERS._items)
    namespace = {"__name__": "foilers.colour_swap"}
    for block in code_blocks("python"):
        exec(compile(block, str(DOC), "exec"), namespace)
    yield namespace
    FOILERS._items.clear()
    FOILERS._items.update(before)


def test_doc_has_one_python_block_and_one_params_block():
    assert len(code_blocks("python")) == 1
    assert len(code_blocks("yaml")) == 1


def test_the_worked_example_registers_and_foils(registered, tmp_path):
    from pipeline.stages.foil import foil_file
    from pipeline.io import iter_jsonl

    assert NAME in FOILERS.names()
    params = yaml.safe_load(code_blocks("yaml")[0])
    params["seed"] = 0
    samples = tmp_path / "coco.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in [
        {"id": "coco2017:1", "image_file": "000000000001.jpg", "caption": "A white cat sleeps on a red sofa."},
        {"id": "coco2017:2", "image_file": "000000000002.jpg", "caption": "Two men play tennis."},
    ]), encoding="utf-8")
    assert foil_file(params, "colour", samples, tmp_path / "colour.jsonl") == 1
    [record] = list(iter_jsonl(tmp_path / "colour.jsonl"))
    # "white" is not among the configured colours; "red" is replaced by one that is
    assert record["classes"] == "red" and record["classes_foil"] in {"blue", "green", "yellow"}
    assert record["foil"] == f"A white cat sleeps on a {record['classes_foil']} sofa."
    assert record["linguistic_phenomena"] == "colour" and record["provenance"]["foiler"] == NAME


def test_the_worked_example_passes_its_golden_examples(registered):
    from foilers.base import rng_for

    foiler = FOILERS.build(NAME, {})
    for sample, expected in foiler.golden:
        foils = list(foiler.foils_for(dict(sample), rng_for(0, NAME, sample["id"])))
        assert [(f.caption, f.foil) for f in foils][:1] == ([tuple(expected)] if expected else [])


def test_the_typo_the_doc_mentions_is_caught(registered):
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) colour; allowed: colours"):
        FOILERS.build(NAME, {"colour": ["red"]}, where="params.yaml instruments.colour.args")
