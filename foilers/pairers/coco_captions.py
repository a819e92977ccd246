"""COCO captions: another image whose captions state the foil's changed part and never the caption's.

Every caption of the source is parsed once (spaCy, `spacy_model`). From a parse come *relation claims*
(left noun, preposition span, right noun), read as the relations foiler reads spans (foilers/lang/prepositions.py:
spatial preposition runs with an object), the left noun being what the preposition attaches to (a noun, or the
subject of the verb or participle it attaches to), the right noun the head of its object; and *noun mentions*
(lemma and grammatical number). A partner's statements are the union over its five captions.

* relations ("A cat sitting on a table." -> "... under a table."): a partner states (cat, under, table) and
  never (cat, on, table);
* foil_it ("A man walking a dog." -> "A man walking a horse."): a partner mentions the foil's noun, never the
  caption's, and states what the foil says of the new noun: every relation claim that involves it and its
  *governor claim*, the word that governs it and how ((walk, obj, horse); (sit, on, bench) for a noun after a
  preposition);
* plurals ("a dog" -> "a number of dogs"): a partner mentions the noun in the foil's number and never in the
  caption's, and states what the foil says of it, as for foil_it.

Captions are people's descriptions, not exhaustive annotations: "never states the caption's part" is the rule,
not proof. Where the source carries COCO's object annotations (the optional `instances` file: `instance_counts`
on every sample), a partner must agree with them too: for foil_it the foil's category annotated on it and the
caption's not; for plurals as many instances of the noun's category as the foil says (2 or more for a plural, 1
for a singular). A noun that names no COCO category is judged by the captions alone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from foilforge.pairing import PAIRERS, Pairer, Partner


@dataclass(frozen=True)
class Claim:
    left: str
    span: str
    right: str

    def text(self) -> str:
        return f"{self.left} {self.span} {self.right}"


def _noun_lemma(token) -> str:
    return token.lemma_.lower() if token.lemma_ else token.lower_


def _left_noun(token):
    """The noun a preposition's relation is about: its head noun, or the subject of the verb it attaches to."""
    head = token.head
    for _ in range(4):
        if head.pos_ in ("NOUN", "PROPN"):
            return head
        if head.pos_ in ("VERB", "AUX"):
            if head.dep_ in ("acl", "relcl") and head.head.pos_ in ("NOUN", "PROPN"):
                return head.head
            subjects = [c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")]
            if subjects:
                return subjects[0] if subjects[0].pos_ in ("NOUN", "PROPN") else None
        if head.head is head:
            return None
        head = head.head
    return None


def relation_claims(doc, non_spatial=None) -> list[tuple[Claim, int, int]]:
    """(claim, span start, span end) for every spatial preposition span of a parsed caption."""
    from foilforge.foilers.lang.prepositions import DEFAULT_NON_SPATIAL, preposition_spans

    claims = []
    for span in preposition_spans(doc, non_spatial or DEFAULT_NON_SPATIAL):
        tokens = [t for t in doc if span.start <= t.idx < span.end]
        if not tokens:
            continue
        objects = [c for c in tokens[-1].children if c.dep_ in ("pobj", "pcomp") and c.pos_ in ("NOUN", "PROPN")]
        left = _left_noun(tokens[0])
        if not objects or left is None:
            continue
        claims.append((Claim(_noun_lemma(left), span.key, _noun_lemma(objects[0])), span.start, span.end))
    return claims


def governor_claim(token) -> Claim | None:
    """What a noun does or undergoes in its clause: (governor, relation, noun), e.g. (walk, obj, dog) in "a man
    walking a dog", (sit, on, dog)... None for a noun that governs its clause (a fragment's head)."""
    relation = {"nsubj": "subj", "nsubjpass": "subj", "dobj": "obj", "attr": "attr", "compound": "compound"}.get(token.dep_)
    if relation is not None and token.head is not token:
        return Claim(_noun_lemma(token.head), relation, _noun_lemma(token))
    if token.dep_ == "pobj" and token.head.head is not token.head:
        return Claim(_noun_lemma(token.head.head), token.head.lower_, _noun_lemma(token))
    return None


def noun_mentions(doc) -> set[tuple[str, str]]:
    """(lemma, "plural" | "singular") of every common noun."""
    return {(_noun_lemma(t), "plural" if t.tag_ in ("NNS", "NNPS") else "singular")
            for t in doc if t.pos_ == "NOUN"}


@dataclass
class _Image:
    image_file: str
    sample_ids: list
    claims: set
    mentions: set
    lemmas: set
    counts: dict | None = None   # COCO instances per category id, when the source has them


@PAIRERS.register("coco_captions.v1")
class CocoCaptions(Pairer):
    evidence = "another COCO image whose captions state the foil's changed part and never the caption's"

    def __init__(self, spacy_model: str = "en_core_web_sm", mode: str = "auto", max_partners: int = 50):
        self.spacy_model = spacy_model
        self.mode = mode
        self.max_partners = max_partners

    def validate(self) -> None:
        from foilforge.errors import ConfigError

        if self.mode not in ("auto", "relations", "foil_it", "plurals"):
            raise ConfigError(f"mode must be auto, relations, foil_it or plurals, got {self.mode!r}")
        if self.max_partners < 1:
            raise ConfigError(f"max_partners must be >= 1, got {self.max_partners}")

    def _parse(self, texts: list[str]):
        from foilforge.nlp import load_spacy

        nlp = load_spacy(self.spacy_model, param_key="instruments.<I>.pairing.args.spacy_model")
        return list(nlp.pipe(texts, batch_size=256, disable=[n for n in ("ner",) if n in nlp.pipe_names]))

    def index(self, samples, records) -> None:
        captions = [s for s in samples if isinstance(s.get("caption"), str) and s.get("image_file")]
        captions.sort(key=lambda s: str(s["id"]))
        docs = self._parse([s["caption"] for s in captions])
        images: dict[str, _Image] = {}
        for sample, doc in zip(captions, docs):
            image = images.setdefault(sample["image_file"], _Image(sample["image_file"], [], set(), set(), set()))
            image.sample_ids.append(str(sample["id"]))
            image.claims.update(c for c, _, _ in relation_claims(doc))
            image.claims.update(c for c in (governor_claim(t) for t in doc if t.pos_ == "NOUN") if c is not None)
            image.mentions.update(noun_mentions(doc))
            image.lemmas.update(lemma for lemma, _ in noun_mentions(doc))
            if isinstance(sample.get("instance_counts"), dict):
                image.counts = {int(k): int(v) for k, v in sample["instance_counts"].items()}
        self._images = images
        self._by_claim: dict[Claim, list[str]] = defaultdict(list)
        self._by_mention: dict[tuple, list[str]] = defaultdict(list)
        for name in sorted(images):
            for claim in images[name].claims:
                self._by_claim[claim].append(name)
            for mention in images[name].mentions:
                self._by_mention[mention].append(name)
        self._docs: dict[str, object] = {}

    def _doc(self, text: str):
        if text not in self._docs:
            self._docs[text] = self._parse([text])[0]
        return self._docs[text]

    def _mode(self, record: dict) -> str:
        if self.mode != "auto":
            return self.mode
        phenomenon = record.get("linguistic_phenomena")
        if phenomenon in ("relations", "plurals"):
            return phenomenon
        return "foil_it" if phenomenon == "noun phrases" else "none"

    def _partner(self, record, name, rule, evidence) -> Partner:
        image = self._images[name]
        return Partner(sample_id=image.sample_ids[0], image_file=name, rule=rule,
                       dataset_idx=image.sample_ids[0].split(":", 1)[-1],
                       annotations=(f"coco caption {record.get('sample_id')}",
                                    *(f"coco caption {sid}" for sid in image.sample_ids), *evidence))

    @staticmethod
    def _span(record: dict, side: str):
        spans = (record.get("provenance") or {}).get(f"{side}_span")
        return tuple(spans) if spans else None

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        mode = self._mode(record)
        caption_span, foil_span = self._span(record, "caption"), self._span(record, "foil")
        if mode == "none" or not caption_span or not foil_span:
            return []
        caption_doc, foil_doc = self._doc(record["caption"]), self._doc(record["foil"])
        if mode == "relations":
            return self._relations(record, caption_doc, foil_doc, caption_span, foil_span)
        return self._nouns(record, mode, caption_doc, foil_doc, caption_span, foil_span)

    def _relations(self, record, caption_doc, foil_doc, caption_span, foil_span) -> list[Partner]:
        caption_claim = next((c for c, s, e in relation_claims(caption_doc) if s < caption_span[1] and caption_span[0] < e), None)
        foil_claim = next((c for c, s, e in relation_claims(foil_doc) if s < foil_span[1] and foil_span[0] < e), None)
        if caption_claim is None or foil_claim is None or caption_claim == foil_claim:
            return []
        names = [n for n in self._by_claim.get(foil_claim, []) if caption_claim not in self._images[n].claims]
        return [self._partner(record, n, "coco captions: foil's relation stated, caption's never", (foil_claim.text(),))
                for n in names[: self.max_partners]]

    @staticmethod
    def _category(token) -> int | None:
        """The COCO category a noun names ("hot dog" read with the word before it), or None."""
        from foilforge.foilers.lang.coco_categories import mention_forms

        forms = mention_forms()
        if token.i > 0 and (token.doc[token.i - 1].lower_, token.lower_) in forms:
            return forms[token.doc[token.i - 1].lower_, token.lower_][0]
        found = forms.get((token.lower_,))
        return found[0] if found else None

    def _instances_agree(self, name: str, mode: str, old_category, new_category, new_number: str) -> bool:
        counts = self._images[name].counts
        if counts is None:
            return True   # no object annotations for this image: the captions decide
        if mode == "foil_it":
            if old_category is None or new_category is None:
                return True
            return counts.get(new_category, 0) > 0 and counts.get(old_category, 0) == 0
        if new_category is None:
            return True
        n = counts.get(new_category, 0)
        return n >= 2 if new_number == "plural" else n == 1

    def _changed_noun(self, doc, span):
        nouns = [t for t in doc if t.pos_ in ("NOUN", "PROPN") and span[0] <= t.idx < span[1]]
        return nouns[-1] if nouns else None

    def _nouns(self, record, mode, caption_doc, foil_doc, caption_span, foil_span) -> list[Partner]:
        old, new = self._changed_noun(caption_doc, caption_span), self._changed_noun(foil_doc, foil_span)
        if old is None or new is None:
            return []
        old_number = "plural" if old.tag_ in ("NNS", "NNPS") else "singular"
        new_number = "plural" if new.tag_ in ("NNS", "NNPS") else "singular"
        old_lemma, new_lemma = _noun_lemma(old), _noun_lemma(new)
        # what the foil says of the changed noun must be stated too: its relations and its role in the clause
        needed = [c for c, _, _ in relation_claims(foil_doc) if new_lemma in (c.left, c.right)]
        governed = governor_claim(new)
        if governed is not None and governed not in needed:
            needed.append(governed)
        if mode == "foil_it":
            if old_lemma == new_lemma:
                return []
            names = sorted({n for number in ("singular", "plural") for n in self._by_mention.get((new_lemma, number), [])})
            names = [n for n in names if old_lemma not in self._images[n].lemmas]
            rule = "coco captions: foil's noun mentioned, caption's never"
        else:
            if old_lemma != new_lemma or old_number == new_number:
                return []
            names = [n for n in self._by_mention.get((new_lemma, new_number), [])
                     if (old_lemma, old_number) not in self._images[n].mentions]
            rule = f"coco captions: the noun in the foil's number ({new_number}) mentioned, in the caption's never"
        names = [n for n in names if all(c in self._images[n].claims for c in needed)]
        old_category, new_category = self._category(old), self._category(new)
        names = [n for n in names if self._instances_agree(n, mode, old_category, new_category, new_number)]
        evidence = (f"{new_lemma} {new_number}", *(c.text() for c in needed))
        partners = []
        for name in names[: self.max_partners]:
            counts = self._images[name].counts
            if counts is not None and (new_category is not None or old_category is not None):
                shown = [f"coco instances of category {c}: {counts.get(c, 0)}" for c in (new_category, old_category)
                         if c is not None]
                partners.append(self._partner(record, name, rule + "; COCO instances agree", (*evidence, *shown)))
            else:
                partners.append(self._partner(record, name, rule, evidence))
        return partners
