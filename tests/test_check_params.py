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


@pytest.mark.parametrize("edit, expected", [
    # a value check that used to run only when the foiler ran (prepare / _check_args), now at build time
    (lambda p: p["instruments"]["relations"]["args"].update(top_k=0),
     "params.yaml instruments.relations.args (foiler relations.v1): top_k must be >= 1, got 0"),
    (lambda p: p["instruments"]["bd2bb_decoys"]["args"].update(n_clusters="ten"),
     "params.yaml instruments.bd2bb_decoys.args (foiler bd2bb_decoys.v1): argument 'n_clusters' should be int | None, "
     "got str ('ten')"),
    (lambda p: p["instruments"]["counting_small"]["args"].update(foil_min=5),
     "params.yaml instruments.counting_small.args (foiler counting.v1): foil_max 3 < foil_min 5"),
    (lambda p: p["instruments"]["predicate_noun"]["args"].update(template="past"),
     "params.yaml instruments.predicate_noun.args (foiler predicate_noun.v1): template must be one of progressive, "
     "simple, got 'past'"),
    (lambda p: p["instruments"]["action_replacement"]["args"]["proposer"].update(kind="seq2seq"),
     "params.yaml instruments.action_replacement.args (foiler action_replacement.v1): proposer.kind must be one of "
     "masked_lm, causal_lm, got 'seq2seq'"),
    (lambda p: p["instruments"]["relations"].update(candidates_per_sample="3"),
     "params.yaml instruments.relations.candidates_per_sample must be an integer >= 1 or null, got '3'"),
    (lambda p: p["sources"]["coco"].update(format="cocoa"),
     "params.yaml sources.coco.format 'cocoa' is not a known format; formats: "),
    (lambda p: p["sources"]["swig"]["files"].pop("space"),
     "params.yaml sources.swig.files: missing role(s) space; format swig reads "),
    (lambda p: p["bias"].update(on_exceed="ignore"), "params.yaml bias.on_exceed must be fail or warn, got 'ignore'"),
    (lambda p: p["bias"]["defaults"].update(js_max="high"), "params.yaml bias (existence): js_max must be a number or null, got 'high'"),
    (lambda p: p["evaluate"].update(scorers=["text_lm", "clip"]),
     "params.yaml evaluate.scorers: unknown scorer(s) clip; known: image_text, text_lm"),
    (lambda p: p["evaluate"].update(image_rot="x"), "params.yaml evaluate: unknown key(s) image_rot; allowed: "),
    (lambda p: p["models"]["text_baseline"].update(batch_size="16"),
     "params.yaml models.text_baseline.batch_size must be an integer >= 1, got '16'"),
    (lambda p: p["models"]["cola"].update(dtype="fp16"),
     "params.yaml models.cola.dtype must be one of float32, float16, bfloat16, got 'fp16'"),
    (lambda p: p["models"]["image_text"].update(devise="cpu"), "params.yaml models.image_text: unknown key(s) devise;"),
])
def test_every_block_is_checked(params, edit, expected):
    broken = copy.deepcopy(params)
    edit(broken)
    problems = check(broken)
    assert any(p.startswith(expected) for p in problems), problems
