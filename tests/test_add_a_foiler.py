"""docs/add_a_foiler.md works as written: its module is discovered, its params pass check-params, and the
model-backed foiler it builds passes the test the doc writes (check_foiler, under the foiler's golden_tools)."""

import re
import sys
from pathlib import Path

import pytest
import yaml

from foilforge import foilers
from foilforge import testing as contract
from foilforge.errors import ConfigError
from foilforge.foiler import FOILERS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "add_a_foiler.md"
NAME = "colour_swap.v1"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.fixture
def registered(tmp_path):
    """Step 1 as the doc says: the python block saved as foilers/colour_swap.py, found by the registry's discovery.

    The module goes to a temporary folder added to the foilers package's path (not into the repository);
    afterwards the registry, the path, sys.modules and the test tools are as they were."""
    FOILERS.names()  # the built-in foilers first
    before = dict(FOILERS._items)
    (tmp_path / "colour_swap.py").write_text(code_blocks("python")[0], encoding="utf-8")
    foilers.__path__.append(str(tmp_path))
    FOILERS._loaded = False  # a fresh lookup, as a new process would do
    try:
        yield
    finally:
        foilers.__path__.remove(str(tmp_path))
        sys.modules.pop("foilforge.foilers.colour_swap", None)
        FOILERS._items.clear()
        FOILERS._items.update(before)
        FOILERS._loaded = True


def test_doc_blocks():
    assert len(code_blocks("python")) == 2  # the module, its test
    assert len(code_blocks("yaml")) == 1


def test_the_contract_part_fits_in_a_page():
    text = DOC.read_text(encoding="utf-8")
    contract_part = text[: text.index("## Worked example")]
    assert len(contract_part.splitlines()) <= 40


def test_the_module_is_discovered_without_editing_a_list(registered):
    assert NAME in FOILERS.names()
    assert "colour_swap" not in (ROOT / "foilforge" / "foiler.py").read_text(encoding="utf-8")


def test_the_params_blocks_pass_check_params(registered):
    from foilforge.pipeline.params_check import check

    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    block = code_blocks("yaml")[0]
    assert "\ninstruments:\n" in text
    params = yaml.safe_load(text.replace("\ninstruments:\n", "\ninstruments:\n" + block, 1))  # pasted as the doc says
    assert params["instruments"]["colour"]["foiler"] == NAME and check(params) == []
    # without the defaults the doc's block starts with, the keys dvc.yaml tracks are missing
    broken = yaml.safe_load(text.replace("\ninstruments:\n", "\ninstruments:\n" + block.replace("    <<: *instrument\n", ""), 1))
    assert ("params.yaml instruments.colour: missing key(s) candidates_per_sample, max_samples, samples_per_image, bias, adversarial, gate, "
            "validation, which dvc.yaml's stages track (start the block with `<<: *instrument`)") in check(broken)


def test_the_foiler_passes_the_whole_conformance_suite(registered, tmp_path):
    namespace = {}
    exec(compile(code_blocks("python")[1], str(DOC), "exec"), namespace)  # step 4: the doc's test module
    namespace["test_colour_swap_keeps_the_foiler_contract"](tmp_path)
    contract.check_foiler(NAME, tmp_path)
    records = contract.build_golden(NAME).run(contract.golden_inputs(NAME), seed=0, instrument="colour")
    assert [(r["id"], r["foil"]) for r in records] == [
        ("colour:g1", "A blue car parked on a street."), ("colour:g2", "A green kite in the sky.")]


def test_the_typos_the_doc_mentions_are_caught(registered):
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) colour; allowed: colours, ranker, top_k"):
        FOILERS.build(NAME, {"colour": ["red"]}, where="params.yaml instruments.colour.args")
    with pytest.raises(ConfigError, match=r"^params.yaml instruments.colour.args.top_k: expected a value >= 1, got 0 \(foiler colour_swap.v1\)$"):
        FOILERS.build(NAME, {"top_k": 0}, where="params.yaml instruments.colour.args")
