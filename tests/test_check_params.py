"""`foilforge check-params`: the repository's params.yaml is valid, and typos are caught before anything runs."""

import copy
from pathlib import Path

import pytest
import yaml

from pipeline.stages.check_params import check

PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


@pytest.fixture(scope="module")
def params():
    return yaml.safe_load(PARAMS.read_text(encoding="utf-8"))


def test_repository_params_are_valid(params):
    assert check(params) == []


def test_every_instrument_has_a_filters_entry_for_dvc(params):
    broken = copy.deepcopy(params)
    del broken["filters"]["run"]["relations"]
    broken["filters"]["keep"]["relatoins"] = {}
    assert check(broken) == [
        "params.yaml filters.run has no entry for instrument(s) relations (dvc.yaml's score stage reads "
        "filters.run.<instrument>; use [] or {} for none)",
        f"params.yaml filters.keep: relatoins is not an instrument ({', '.join(sorted(params['instruments']))})",
    ]


def test_a_misspelt_argument_is_named(params):
    broken = copy.deepcopy(params)
    broken["instruments"]["counting_small"]["args"]["max_per_clas"] = 3
    broken["filters"]["keep"]["plurals"]["grammaticality"] = {"min_scor": 0.8}
    problems = check(broken)
    assert len(problems) == 2
    assert problems[0].startswith("params.yaml instruments.counting_small.args (foiler counting.v1): unknown argument(s) max_per_clas;")
    assert problems[1].startswith("params.yaml filters.keep.plurals.grammaticality: unknown argument(s) min_scor;")


def test_the_cli_fails_with_the_count(tmp_path, capsys):
    from pipeline.stages import cli

    broken = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    broken["instruments"]["existence"]["source"] = "visual8w"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    assert cli.main(["check-params", "--params", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "params.yaml instruments.existence.source 'visual8w' is not a key of `sources`" in out
    assert err.strip() == f"foilforge check-params: error: 1 problem(s) in {path}"
