"""Action replacement (foilers/action_replacement.py) and its WordNet constraint (foilers/lang/wordnet_constraints.py)."""

import json
import math

import pytest

from foilforge.errors import ConfigError
from foilforge.foiler import RunContext, rng_for
from foilforge.foilers.action_replacement import ActionReplacement, RankerProposer, pick_matching, verb_js
from foilforge.foilers.lang.wordnet_constraints import audit_pairs, check_replacement
from tests.conftest import shared_path
from tests.test_realise import sample_swig


@pytest.mark.parametrize("original,replacement,keep,relation", [
    ("run", "jog", False, "hyponym"),
    ("jog", "run", False, "hypernym"),
    ("give", "take", True, "antonym"),
    ("preaches", "speaks", False, "hypernym"),  # kept by the release
    ("unveils", "carves", True, "unrelated"),
    ("sits", "sitting", False, "same verb"),
])
def test_named_pairs(original, replacement, keep, relation):
    assert check_replacement(original, replacement) == (keep, relation)


def test_valse_dev_action_replacement_audit():
    release = json.loads(shared_path("data", "valse-dev", "action-replacement.json").read_text())
    pairs = [(r["classes"], r["classes_foil"]) for r in release.values()]
    counts = audit_pairs(pairs)
    rejected = [(a, b, check_replacement(a, b)[1]) for a, b in pairs if not check_replacement(a, b)[0]]
    print(f"\nvalse-dev action replacement: {len(pairs)} pairs, the WordNet constraint would reject {len(rejected)}: "
          + ", ".join(f"{a} -> {b} ({why})" for a, b, why in rejected) + f"; all relations: {dict(counts)}")
    assert dict(counts) == {"unrelated": 183, "not in WordNet": 3, "hypernym": 2, "hyponym": 1}
    assert ("preaches", "speaks", "hypernym") in rejected


def test_verb_js_is_the_bias_reports_base_2_scale():
    assert verb_js(["a", "b"], ["b", "a"]) == 0.0
    assert verb_js(["a", "a"], ["b", "b"]) == pytest.approx(1.0)
    # f = (1/2, 1/2), c = (1, 0): m = (3/4, 1/4)
    expected = math.sqrt((0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25) + math.log2(1 / 0.75)) / 2)
    assert verb_js(["a", "a"], ["a", "b"]) == pytest.approx(expected)
    assert verb_js([], ["a"]) == 0.0


def test_pick_matching_balances_foil_side():
    caption_verb = {"s1": "eat", "s2": "ride", "s3": "sit"}
    candidates = {"s1": ["sit", "ride"], "s2": ["eat"], "s3": ["eat", "ride"]}
    chosen = pick_matching(candidates, caption_verb, rng_for(0, "t"))
    foils = sorted(candidates[sid][i] for sid, i in chosen.items())
    assert foils == ["eat", "ride", "sit"]  # same multiset as the caption side: JS 0


SLOT_SAMPLES = [
    {"id": "a", "image_file": "sitting_1.jpg", "verb": "sitting", "agent": "man", "patient": "table", "preposition": "at"},
    {"id": "b", "image_file": "riding_2.jpg", "verb": "riding", "agent": "woman", "patient": "horse"},
    {"id": "c", "image_file": "eating_3.jpg", "verb": "eating", "agent": "people", "patient": "pizza"},
]


@pytest.fixture
def verb_list(tmp_path):
    path = tmp_path / "verbs.txt"
    path.write_text("sitting\nstanding\nriding\neating\n")  # SWiG's gerunds, as verb_indices.txt
    return str(path)


def test_tiny_masked_lm_proposals_through_from_pretrained(tiny_models, verb_list):
    path = tiny_models.bert_mlm()
    foiler = ActionReplacement(proposer={"kind": "masked_lm", "name_or_path": str(path), "device": "cpu"},
                               top_k=400, verb_list=verb_list)
    context = RunContext("action-replacement", seed=0)
    records = {r["sample_id"]: r for r in foiler.run(SLOT_SAMPLES, context=context)}
    # the tiny vocabulary holds "sitting standing riding eating" as whole words: every sample finds a SWiG verb
    assert set(records) == {"a", "b", "c"}
    assert records["a"]["caption"] == "A man sits at a table."
    assert records["a"]["foil"] in {"A man stands at a table.", "A man rides at a table.", "A man eats at a table."}
    assert records["c"]["foil"] in {"People sit a pizza.", "People stand a pizza.", "People ride a pizza."}  # agreement
    assert all(r["foil_verb"] != r["verb"] for r in records.values())
    assert records["a"]["id"] == "action-replacement:a" and records["a"]["foiling_method"] == "change_action"
    assert "js_divergence" in context.stats


def test_causal_lm_ranking_matches_sentence_logprobs(tiny_models, verb_list):
    from foilforge.lm import CausalLM
    from foilforge.models import ModelSpec

    block = {"kind": "causal_lm", "name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 4}
    foiler = ActionReplacement(proposer=block, top_k=10, verb_list=verb_list, match_distribution=False)
    records = {r["sample_id"]: r for r in foiler.run(SLOT_SAMPLES, seed=0, instrument="action-replacement")}
    lm = CausalLM(ModelSpec.from_params(block, "test"))
    for options, sid in [(["stands", "rides", "eats"], "a"), (["sit", "stand", "ride"], "c")]:
        caption = records[sid]["caption"]
        verb = records[sid]["classes"]
        texts = [caption.replace(f" {verb} ", f" {o} ", 1) for o in options]
        scores = [lp for lp, _ in lm.sentence_logprobs(texts)]
        assert records[sid]["foil"] == texts[max(range(len(options)), key=lambda i: (scores[i], -ord(options[i][0])))]


def test_scorer_contract_object_runs_on_sample(tiny_models):
    from foilforge.models import ModelSpec

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 64}, "test")
    samples = sample_swig()
    verbs = {"shout", "feed", "hug", "kiss", "push", "pull", "carry", "throw", "chase", "bite", "lick", "tickle"}
    from foilforge.span_ranking import CausalSpanRanker

    foiler = ActionReplacement(top_k=5).use_proposer(RankerProposer(CausalSpanRanker(spec), verbs))
    context = RunContext("action-replacement", seed=0)
    records = foiler.run(samples, context=context)
    assert len(records) >= 30 and len({r["sample_id"] for r in records}) == len(records)
    for record in records:
        assert record["foil_verb"] in verbs and check_replacement(record["verb"], record["foil_verb"])[0]
        start, end = record["provenance"]["caption_span"]
        assert record["caption"][start:end] == record["classes"]
        assert record["caption"][:start] == record["foil"][:start]
    assert foiler.run(list(reversed(samples)), seed=0, instrument="action-replacement") == records
    assert 0.0 <= context.stats["js_divergence"] <= 1.0


def test_unloadable_model_names_the_param(tmp_path, verb_list):
    foiler = ActionReplacement(proposer={"kind": "masked_lm", "name_or_path": str(tmp_path / "missing"), "device": "cpu"},
                               verb_list=verb_list)
    with pytest.raises(ConfigError) as err:
        foiler.run(SLOT_SAMPLES, seed=0, instrument="action-replacement")
    assert "Set instruments.action-replacement.args.proposer.name_or_path in params.yaml" in str(err.value)


def test_masked_lm_without_head_is_refused(tiny_models, verb_list):
    foiler = ActionReplacement(proposer={"kind": "masked_lm", "name_or_path": str(tiny_models.bert_encoder_only()), "device": "cpu"},
                               verb_list=verb_list)
    with pytest.raises(ConfigError, match="has no trained head"):
        foiler.run(SLOT_SAMPLES, seed=0, instrument="action-replacement")


def test_unknown_kind():
    with pytest.raises(ConfigError, match="instruments.x.args.proposer.kind must be one of masked_lm, causal_lm"):
        ActionReplacement(proposer={"kind": "seq2seq", "name_or_path": "t5"}).run(SLOT_SAMPLES, instrument="x")


def test_candidates_per_sample_keeps_n_foils_per_sample(tiny_models):
    from foilforge.models import ModelSpec
    from foilforge.span_ranking import CausalSpanRanker

    spec = ModelSpec.from_params({"name_or_path": str(tiny_models.gpt2_lm()), "device": "cpu", "batch_size": 64}, "test")
    verbs = {"shout", "feed", "hug", "kiss", "push", "pull", "carry", "throw", "chase", "bite", "lick", "tickle"}
    foiler = ActionReplacement(top_k=8).use_proposer(RankerProposer(CausalSpanRanker(spec), verbs))
    one = foiler.run(sample_swig(), seed=0, instrument="ar")
    several = foiler.run(sample_swig(), context=RunContext("ar", seed=0, candidates_per_sample=2))
    by_sample = {}
    for record in several:
        by_sample.setdefault(record["sample_id"], []).append(record)
    assert max(len(group) for group in by_sample.values()) == 2
    for sid, group in by_sample.items():
        assert [r["id"] for r in group] == [f"ar:{sid}", f"ar:{sid}#1"][: len(group)]
        assert len({r["foil_verb"] for r in group}) == len(group)
        if len(group) == 2:
            assert group[0]["proposal_rank"] != group[1]["proposal_rank"]
    assert {r["sample_id"] for r in one} == set(by_sample)


def test_a_replacement_verb_must_be_used_the_same_way_by_some_caption():
    """"gives a flower" in the captions does not make "gives a girl" or "gives for a girl" a foil; a verb the
    captions use with a person, and without a preposition, does replace one there."""
    from foilforge.fixed_tools import TableRanker
    from foilforge.foiler import RunContext
    from foilforge.foilers.action_replacement import ActionReplacement, RankerProposer

    samples = [{"id": "a", "verb": "give", "agent": "man", "patient": "flower"},
               {"id": "b", "verb": "coach", "agent": "woman", "patient": "girl"},
               {"id": "c", "verb": "cheer", "agent": "father", "patient": "girl", "preposition": "for"},
               {"id": "d", "verb": "hug", "agent": "boy", "patient": "baby"}]
    scores = {"gives": 9, "give": 9, "hugs": 5, "hug": 5, "coaches": 4, "coach": 4, "cheers": 1, "cheer": 1}
    foiler = ActionReplacement(match_distribution=False)
    foiler.use_proposer(RankerProposer(TableRanker(scores), {"give", "coach", "cheer", "hug"}))
    records = foiler.run(samples, context=RunContext("probe", seed=0))
    assert {r["sample_id"]: r["foil"] for r in records} == {
        "b": "A woman hugs a girl.", "d": "A boy coaches a baby."}
