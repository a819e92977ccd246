"""`foilforge check-params`: the repository's params.yaml is valid, and typos are caught before anything runs."""

import copy
from pathlib import Path

import pytest
import yaml

from foilforge.pipeline.params_check import check

PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


@pytest.fixture(scope="module")
def params():
    return yaml.safe_load(PARAMS.read_text(encoding="utf-8"))


def test_repository_params_are_valid(params):
    assert check(params) == []


def test_every_instrument_spells_out_the_keys_dvc_tracks(params):
    broken = copy.deepcopy(params)
    del broken["instruments"]["relations"]["bias"]
    del broken["instruments"]["relations"]["gate"]
    assert check(broken) == [
        "params.yaml instruments.relations: missing key(s) bias, gate, which dvc.yaml's stages track "
        "(start the block with `<<: *instrument`)"]


def test_an_instrument_name_appears_only_under_instruments():
    text = PARAMS.read_text(encoding="utf-8")
    names = yaml.safe_load(text)["instruments"]
    top = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert "instruments" in top
    body = text.split("\ninstruments:\n", 1)[1]
    outside = text.split("\ninstruments:\n", 1)[0] + "\n".join(
        line for line in body.splitlines() if not line.startswith(" ") and not line.startswith("#"))
    for name in names:
        assert not any(f"{name}:" in line.split("#")[0] for line in outside.splitlines()), name


def test_a_misspelt_argument_is_named(params):
    broken = copy.deepcopy(params)
    broken["instruments"]["counting_small"]["args"]["max_per_clas"] = 3
    broken["instruments"]["plurals"]["filters"]["keep"]["grammaticality"] = {"min_scor": 0.8}
    problems = check(broken)
    assert len(problems) == 2, problems
    assert problems[0].startswith("params.yaml instruments.counting_small.args (foiler counting.v1): unknown argument(s) max_per_clas;")
    assert problems[1].startswith("params.yaml instruments.plurals.filters.keep.grammaticality: unknown argument(s) min_scor;")


def test_every_problem_is_listed_with_its_path(params):
    broken = copy.deepcopy(params)
    broken["instruments"]["relations"]["candidates_per_sample"] = "3"
    broken["bias"]["on_exceed"] = "ignore"
    broken["instruments"]["counting_small"]["args"]["max_per_clas"] = 3
    problems = check(broken)
    assert problems == [
        "params.yaml instruments.relations.candidates_per_sample: expected an integer, got '3'",
        "params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'ignore'",
        "params.yaml instruments.counting_small.args (foiler counting.v1): unknown argument(s) max_per_clas; "
        "allowed: caption_max, caption_min, foil_max, foil_min, max_number, max_per_class",
    ]


def test_the_cli_fails_with_the_count(tmp_path, capsys):
    from foilforge.pipeline.stages import cli

    broken = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    broken["instruments"]["existence"]["source"] = "visual8w"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(broken), encoding="utf-8")
    assert cli.main(["check-params", "--params", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "params.yaml instruments.existence.source: 'visual8w' is not a key of `sources`" in out
    assert err.strip() == f"foilforge check-params: error: 1 problem(s) in {path}"


@pytest.mark.parametrize("edit, expected", [
    # a value check that used to run only when the foiler ran (prepare / _check_args), now at build time
    (lambda p: p["instruments"]["relations"]["args"].update(top_k=0),
     "params.yaml instruments.relations.args.top_k: expected a value >= 1, got 0 (foiler relations.v1)"),
    (lambda p: p["instruments"]["bd2bb_decoys"]["args"].update(n_clusters="ten"),
     "params.yaml instruments.bd2bb_decoys.args.n_clusters: expected int | None, got 'ten' (foiler bd2bb_decoys.v1)"),
    # plug-in arguments, validated by a pydantic model of the constructor's signature (foilforge/registry.py)
    (lambda p: p["instruments"]["relations"]["args"].update(top_k="10"),
     "params.yaml instruments.relations.args.top_k: expected int, got '10' (foiler relations.v1)"),
    (lambda p: p["instruments"]["relations"]["args"].update(topk=10),
     "params.yaml instruments.relations.args (foiler relations.v1): unknown argument(s) topk; allowed: attested_path, "
     "balance, keep_unpaired, max_span_words, min_count, non_spatial, ranker, score_chunk, spacy_model, top_k"),
    (lambda p: p["filters"]["grammaticality"].update(relative_to_caption="yes"),
     "params.yaml filters.grammaticality.relative_to_caption: expected bool, got 'yes' (filter grammaticality.v1)"),
    (lambda p: p["instruments"]["plurals"]["filters"]["keep"]["grammaticality"].update(min_score="high"),
     "params.yaml instruments.plurals.filters.keep.grammaticality.min_score: expected float, got 'high'"),
    (lambda p: p["instruments"]["plurals"]["pairing"].update(args={**p["instruments"]["plurals"]["pairing"]["args"],
                                                                   "bogus": 1}),
     "params.yaml instruments.plurals.pairing.args (pairer coco_captions.v1): unknown argument(s) bogus; allowed: "
     "encoder, max_partners, mode, spacy_model"),
    (lambda p: p["instruments"]["counting_small"]["args"].update(foil_min=5),
     "params.yaml instruments.counting_small.args (foiler counting.v1): foil_max 3 < foil_min 5"),
    (lambda p: p["instruments"]["predicate_noun"]["args"].update(template="past"),
     "params.yaml instruments.predicate_noun.args (foiler predicate_noun.v1): template must be one of progressive, "
     "simple, got 'past'"),
    (lambda p: p["instruments"]["action_replacement"]["args"]["proposer"].update(kind="seq2seq"),
     "params.yaml instruments.action_replacement.args (foiler action_replacement.v1): proposer.kind must be one of "
     "masked_lm, causal_lm, got 'seq2seq'"),
    (lambda p: p["instruments"]["relations"].update(candidates_per_sample="3"),
     "params.yaml instruments.relations.candidates_per_sample: expected an integer, got '3'"),
    (lambda p: p["instruments"]["relations"].update(max_samples=0),
     "params.yaml instruments.relations.max_samples: expected a value >= 1, got 0"),
    (lambda p: p["instruments"]["existence"].update(gate="warn"),
     "params.yaml instruments.existence.gate: expected 'fail' or 'report', got 'warn'"),
    (lambda p: p["instruments"]["swap_att"]["bias"].update(items="both"),
     "params.yaml instruments.swap_att.bias.items: expected 'direct' or 'swap', got 'both'"),
    (lambda p: p["instruments"]["existence"]["adversarial"].update(target=2),
     "params.yaml instruments.existence.adversarial.target: expected a value <= 1, got 2"),
    (lambda p: p["instruments"]["existence"].update(sorce="x"),
     "params.yaml instruments.existence.sorce: unknown key; allowed: adversarial, args, bias, candidates_per_sample, "
     "filters, foiler, gate, max_samples, pairing, samples_per_image, source, validation"),
    (lambda p: p["gate"].update(attackers=["word_ngram", "nb"]),
     "params.yaml gate.attackers: 'nb' is not defined under `attackers`"),
    (lambda p: p["validation"].update(valid_min_caption=5),
     "params.yaml validation: valid_min_caption (5) cannot exceed annotators_per_item (3)"),
    (lambda p: p["sources"]["coco"].update(format="cocoa"),
     "params.yaml sources.coco.format 'cocoa' is not a known format; formats: "),
    (lambda p: p["sources"]["swig"]["files"].pop("space"),
     "params.yaml sources.swig.files: missing role(s) space; format swig reads "),
    (lambda p: p["bias"].update(on_exceed="ignore"), "params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'ignore'"),
    (lambda p: p["bias"]["defaults"].update(js_max="high"), "params.yaml bias.defaults.js_max: expected a number, got 'high'"),
    (lambda p: p["evaluate"].update(scorers=["text_lm", "clip"]),
     "params.yaml evaluate.scorers: unknown scorer(s) clip; known: image_text, open_clip, text_lm"),
    (lambda p: p["evaluate"].update(image_rot="x"),
     "params.yaml evaluate.image_rot: unknown key; allowed: image_root, scorers, scores_threshold"),
    (lambda p: p["models"]["text_baseline"].update(batch_size="16"),
     "params.yaml models.text_baseline.batch_size: expected an integer, got '16'"),
    (lambda p: p["models"]["cola"].update(dtype="fp16"),
     "params.yaml models.cola.dtype: expected 'float32', 'float16', 'bfloat16' or 'auto', got 'fp16'"),
    (lambda p: p["models"]["image_text"].update(devise="cpu"), "params.yaml models.image_text.devise: unknown key; allowed: "),
    (lambda p: p["models"]["image_text"].update(device="gpu"),
     "params.yaml models.image_text.device: expected cpu, cuda, cuda:N, mps or auto, got 'gpu'"),
])
def test_every_block_is_checked(params, edit, expected):
    broken = copy.deepcopy(params)
    edit(broken)
    problems = check(broken)
    assert any(p.startswith(expected) for p in problems), problems


def test_load_params_reads_the_mapping_pyyamls_safe_loader_reads_and_names_a_broken_file(tmp_path):
    """params.yaml is parsed by libyaml where PyYAML has it: the same mapping, key order and types as the pure-Python
    safe loader (anchors and merge keys included); a broken file is named with what is wrong."""
    import pickle

    from foilforge.errors import InputError
    from foilforge.params import load_params

    text = Path("params.yaml").read_text(encoding="utf-8")
    assert pickle.dumps(dict(load_params("params.yaml"))) == pickle.dumps(yaml.safe_load(text))
    broken = tmp_path / "params.yaml"
    broken.write_text("seed: 0\nmodels: {a: [1, 2}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"params\.yaml.*invalid YAML"):
        load_params(broken)
