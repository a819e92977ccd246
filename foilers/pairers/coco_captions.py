"""COCO captions: another image whose captions state everything the foil says, and never the caption's part.

Every caption of the source is parsed once (spaCy, `spacy_model`) into *statements* (foilers/lang/claims.py: nouns,
their number, attributes, compounds and numerals, relations between nouns, verbs with their subject and object).
The foil is read the same way: its statements are the group's **claims**, what caption_1 says of image_1, and a
claim is *supported* by a partner caption that makes the same statement. A partner image must:

* state the edit: relations ("A cat sitting on a table." -> "... under a table."): (cat, under, table);
  foil_it and SugarCrepe's replace_obj ("A man walking a dog." -> "A man walking a horse."): the noun horse;
  plurals ("a dog" -> "some dogs"): the noun in the foil's number; swap (swap_obj, swap_att) and replace
  (replace_att, replace_rel: "a red car" -> "a blue car", "riding a horse" -> "feeding a horse"): every statement
  of the foil that the caption lacks; add (add_obj, add_att: "A sheep in a field" -> "A sheep and a cow in a
  field"): every statement of the foil, the added ones among them;
* never state the caption's part: (cat, on, table); the noun dog, anywhere; the noun in the caption's number; for a
  swap or a replacement, any statement of the caption that the foil lacks (an addition's caption has no part of its
  own: what it says, the foil says too). The record's own image, the other way round, must never state the foil's
  part (another caption of it says "two dogs" where the foil says "some dogs", or names the object an addition
  added): then the foil may be true of its own image, and the record is refused as a foil
  (`refusals.refuse_foil`; select never keeps it). So is a swap whose both readings one image's captions state
  ("riding a surfboard on a wave" and "riding a wave on a surfboard" of one surfer): the exchange of roles
  contradicts nothing;
* agree with COCO's object annotations where the source has them (`instances`: for foil_it the foil's category
  annotated and the caption's not, for plurals as many instances as the foil's number says);
* support at least `min_support` of the claims (params.yaml `pairing.min_support`, default every claim).

Claims may be supported by different captions of the partner: each caption is a person's true description of the
same image, so each statement it makes is true of the image. What describes one noun (its number, attributes,
compounds, numerals, where it is: the relations it is the first noun of, the actions it takes part in) must come
from one caption, though: two captions may speak of two instances of it ("two men sit" in one, "a man standing" in
another do not say that two men stand; "a man standing with his hands on a table" and "two men sitting near a
table" do not say that a man sits on a table), and a partner whose captions state a noun's claims only across
captions is refused ("one noun's claims split over captions"). A relation's second noun is only named by it; a word
may come from any caption.

Three routes find partners, and the claims decide:

1. **minimal pairs**: a partner caption *is* the foil, up to case, punctuation and articles: both texts are then
   written by people, each of its own image (checked both ways, as above). Such partners come first;
2. **claim matching**: every claim stated somewhere in the partner's captions;
3. **retrieval** (`encoder`, a sentence encoder; null: none): among the partners the claims accept, those whose
   captions read most like the foil (cosine, the best caption) come first, so the assignment prefers them. The
   encoder only orders; it never accepts a partner, and it encodes only the foil and the accepted partners'
   captions, one text at a time.

Captions are people's descriptions, not exhaustive annotations: "never states the caption's part" is the rule, not
proof, which is why groups go to people too (docs/human-validation.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from foilforge.foilers.lang.claims import (
    KINDS,
    Statement,
    caption_statements,
    lemma,
    minimal_key,
    noun_number,
    noun_of,
    statement_text,
)
from foilforge.groups import Claim
from foilforge.pairing import PAIRERS, Pairer, Partner

#: the last list of captions `CocoCaptions.index` parsed, and its docs (read only)
_SOURCE_DOCS: dict = {}

MINIMAL_PAIR = "coco captions: a caption of the partner is the foil (minimal pair)"
CLAIMS_MATCHED = "coco captions: the foil's claims stated by the partner's captions"
INSTANCES_AGREE = "; COCO instances agree"
STATES_CAPTION = "states the caption's part"
INSTANCES_DISAGREE = "COCO instances disagree"
OWN_IMAGE_STATES_FOIL = "its own image's captions state the foil's part"
NO_EDIT_CLAIM = "the parse reads no claim at the edit"
MIRRORED = "the mirror of another record's group"
NOUN_SPLIT = "one noun's claims split over captions"
SWAP_BOTH_STATED = "a swap whose both readings one image's captions state"
MODES = ("auto", "relations", "foil_it", "plurals", "swap", "replace", "add")
#: the mode `auto` reads off a record's phenomenon (VALSE's and SugarCrepe's types)
PHENOMENON_MODES = {"relations": "relations", "plurals": "plurals", "noun phrases": "foil_it", "swap-obj": "swap",
                    "swap-att": "swap", "replace-obj": "foil_it", "replace-att": "replace", "replace-rel": "replace",
                    "add-obj": "add", "add-att": "add"}


@dataclass
class _Image:
    image_file: str
    sample_ids: list
    nouns: set                   # lemmas of every noun token (compound modifiers too): "never mentions" reads these
    counts: dict | None = None   # COCO instances per category id, when the source has them


@dataclass(frozen=True)
class _Edit:
    """What the foil changed: the statements a partner must make (`states`), must never make (`never`: refs, or
    noun lemmas for foil_it), the foil's claims (edited first), and the text of the caption's part."""

    states: tuple
    never: tuple
    never_nouns: tuple
    claims: tuple[Statement, ...]
    edited: frozenset
    absent: tuple[str, ...]
    old_noun: object = None
    new_noun: object = None
    new_number: str = ""
    #: the refs of the claims describing one noun of the foil, per noun with two or more (one caption must state them)
    nouns: tuple[tuple, ...] = ()


@PAIRERS.register("coco_captions.v1")
class CocoCaptions(Pairer):
    evidence = ("another COCO image whose captions state every claim of the foil (its nouns, their attributes, "
                "relations and actions) and never the caption's part")
    own_image_check = ("another caption of the image states the foil's part, or (a swap) one image's captions state "
                       "both the caption's and the foil's")

    def __init__(self, spacy_model: str = "en_core_web_sm", mode: str = "auto", max_partners: int = 50,
                 encoder: dict | str | None = None):
        self.spacy_model = spacy_model
        self.mode = mode
        self.max_partners = max_partners
        self.encoder = encoder

    def check(self) -> None:
        from foilforge.errors import ConfigError

        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.max_partners < 1:
            raise ConfigError(f"max_partners must be >= 1, got {self.max_partners}")

    def holds_group(self, record: dict) -> bool:
        """A swap whose caption and foil another record swaps back (`pair_member` 1 of a record pair) leaves the
        group to member 0: its partner is member 1's image either way, and one group is enough."""
        return not (self._mode(record) == "swap" and record.get("pair_member") == 1)

    @property
    def ranked_by(self) -> str:
        if not self.encoder:
            return "minimal pairs first, then support, then image file"
        name = self.encoder if isinstance(self.encoder, str) else self.encoder.get("name_or_path")
        return f"minimal pairs first, then support, then the sentence encoder {name} (best caption's cosine)"

    # ---------------------------------------------------------------- index

    def _parse(self, texts: list[str]):
        from foilforge.nlp import load_spacy

        nlp = load_spacy(self.spacy_model, param_key="instruments.<I>.pairing.args.spacy_model")
        return list(nlp.pipe(texts, batch_size=256, disable=[n for n in ("ner",) if n in nlp.pipe_names]))

    def _parse_source(self, texts: list[str]):
        """The docs of a source's captions: every COCO instrument's partners stage indexes the same captions in the
        same order, so a worker that runs several of them parses the list once (the same call, the same docs)."""
        key = (self.spacy_model, tuple(texts))
        if _SOURCE_DOCS.get("key") != key:
            _SOURCE_DOCS.clear()
            _SOURCE_DOCS.update(key=key, docs=self._parse(texts))
        return _SOURCE_DOCS["docs"]

    def index(self, samples, records) -> None:
        captions = [s for s in samples if isinstance(s.get("caption"), str) and s.get("image_file")]
        captions.sort(key=lambda s: str(s["id"]))
        docs = self._parse_source([s["caption"] for s in captions])
        images: dict[str, _Image] = {}
        #: statement ref -> image -> ids of its captions making the statement
        self._stated: dict[tuple, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self._minimal: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for sample, doc in zip(captions, docs):
            name, sid = sample["image_file"], str(sample["id"])
            image = images.setdefault(name, _Image(name, [], set()))
            image.sample_ids.append(sid)
            image.nouns.update(lemma(t) for t in doc if t.pos_ == "NOUN")
            refs = {s.ref for s in caption_statements(doc)}
            refs.update(("word", lemma(t)) for t in doc if t.pos_ in ("NOUN", "PROPN", "VERB", "ADJ"))
            for ref in refs:
                self._stated[ref][name].append(sid)
            self._minimal[minimal_key(sample["caption"])].append((name, sid))
            if isinstance(sample.get("instance_counts"), dict):
                image.counts = {int(k): int(v) for k, v in sample["instance_counts"].items()}
        self._images = images
        # a record on image B whose caption is this record's foil and whose foil is its caption would give the same
        # group, mirrored: the record with the smaller id keeps it
        self._mirrors: dict[tuple, list[str]] = defaultdict(list)
        for record in records:
            if isinstance(record.get("caption"), str) and isinstance(record.get("foil"), str):
                key = (record.get("image_file"), minimal_key(record["caption"]), minimal_key(record["foil"]))
                self._mirrors[key].append(str(record["id"]))
        self._docs: dict[str, object] = {}
        self._texts = {str(s["id"]): s["caption"] for s in captions}
        self._vectors: dict[str, object] = {}
        self._encoder = self._build_encoder() if self.encoder else None

    def _build_encoder(self):
        from foilforge.encoders import build_sentence_encoder

        return build_sentence_encoder(self.encoder, "instruments.<I>.pairing.args.encoder")

    def _doc(self, text: str):
        if text not in self._docs:
            self._docs[text] = self._parse([text])[0]
        return self._docs[text]

    def _vector(self, text: str):
        # one text at a time: a text's vector never depends on which others were asked for (batch invariance), and
        # only the captions of partners the claims accept are ever encoded
        if text not in self._vectors:
            self._vectors[text] = self._encoder.encode([text])[0]
        return self._vectors[text]

    def _similarity(self, foil: str, name: str) -> float:
        """The foil's cosine with the partner's closest caption, rounded so that last-bit differences never
        reorder partners."""
        query = self._vector(foil)
        return round(max(float(self._vector(self._texts[sid]) @ query) for sid in self._images[name].sample_ids), 4)

    def images_stating(self, ref: tuple) -> dict[str, list[str]]:
        """{image: ids of its captions making the statement `ref`} (kind, *key)."""
        return self._stated.get(ref, {})

    # ---------------------------------------------------------------- the edit

    def _mode(self, record: dict) -> str:
        if self.mode != "auto":
            return self.mode
        return PHENOMENON_MODES.get(record.get("linguistic_phenomena"), "none")

    @staticmethod
    def _span(record: dict, side: str):
        spans = (record.get("provenance") or {}).get(f"{side}_span")
        return tuple(spans) if spans else None

    @staticmethod
    def _in_span(doc, statement: Statement, span) -> bool:
        return any(span[0] <= doc[i].idx < span[1] for i in statement.tokens)

    @staticmethod
    def _changed_noun(doc, span):
        nouns = [t for t in doc if t.pos_ in ("NOUN", "PROPN") and span[0] <= t.idx < span[1]]
        return nouns[-1] if nouns else None

    def edit(self, record: dict) -> _Edit | None:
        """What the record's foil changed, read from the two parses (None: the edit is not read as a claim)."""
        mode = self._mode(record)
        caption_span, foil_span = self._span(record, "caption"), self._span(record, "foil")
        if mode == "none" or not caption_span or not foil_span:
            return None
        caption_doc, foil_doc = self._doc(record["caption"]), self._doc(record["foil"])
        caption_claims, foil_claims = caption_statements(caption_doc), caption_statements(foil_doc)
        caption_refs = {s.ref for s in caption_claims}
        # a plural is a claim ("a group of cars"); a singular is not ("a man" is said of an image with two)
        claims = [s for s in foil_claims if s.kind != "number" or s.key[1] == "plural"]
        never_nouns, new_number, old, new = (), "", None, None
        if mode == "relations":
            new = next((s for s in foil_claims if s.kind == "relation" and self._in_span(foil_doc, s, foil_span)), None)
            old = next((s for s in caption_claims if s.kind == "relation" and self._in_span(caption_doc, s, caption_span)),
                       None)
            if new is None or old is None or new.ref == old.ref:
                return None
            states, never, absent = (new.ref,), (old.ref,), (old.text(),)
            old, new = None, None
        elif mode in ("foil_it", "plurals"):
            old, new = self._changed_noun(caption_doc, caption_span), self._changed_noun(foil_doc, foil_span)
            if old is None or new is None:
                return None
            old_lemma, new_lemma = lemma(old), lemma(new)
            old_number, new_number = noun_number(old), noun_number(new)
            if mode == "foil_it":
                if old_lemma == new_lemma:
                    return None
                states, never, never_nouns, absent = (("noun", new_lemma),), (), (old_lemma,), (f"the noun {old_lemma}",)
            else:
                if old_lemma != new_lemma or old_number == new_number:
                    return None
                number = Statement("number", (new_lemma, new_number), (new.i,))
                # the number is the edit: the quantifier that says it ("some", "exactly one") is not a claim of its own
                claims = [number, *(s for s in claims if not (s.kind in ("numeral", "number") and new.i in s.tokens))]
                states = (number.ref,)
                never = (("number", old_lemma, old_number),)
                absent = (statement_text("number", (old_lemma, old_number)),)
        elif mode in ("swap", "replace"):
            foil_refs = {s.ref for s in foil_claims}
            states = tuple(s.ref for s in claims if s.ref not in caption_refs)
            gone = [s for s in caption_claims if s.kind != "number" and s.ref not in foil_refs]
            if not states or not gone:
                return None
            never, absent = tuple(s.ref for s in gone), tuple(s.text() for s in gone)
        elif mode == "add":
            # the foil says all the caption says and more: a partner states it all, the added part included; the
            # caption has no part of its own to be absent
            states = tuple(s.ref for s in claims if s.ref not in caption_refs)
            if not states:
                return None
            never, absent = (), ()
        else:
            return None
        if not set(states) <= {s.ref for s in claims}:
            return None   # the foil's parse does not read the edit as a statement of its own ("a laptop phone")
        edited = frozenset(states) | {s.ref for s in claims if s.ref not in caption_refs}
        ordered = sorted(claims, key=lambda s: (s.ref not in edited, max(s.tokens), KINDS.index(s.kind)))
        described: dict[int, list] = defaultdict(list)
        for statement in ordered:
            if noun_of(statement) is not None:
                described[noun_of(statement)].append(statement.ref)
        return _Edit(states=states, never=never, never_nouns=never_nouns, claims=tuple(ordered), edited=edited,
                     absent=absent, old_noun=old, new_noun=new, new_number=new_number,
                     nouns=tuple(tuple(refs) for _, refs in sorted(described.items()) if len(refs) > 1))

    # ---------------------------------------------------------------- COCO instances

    @staticmethod
    def _category(token) -> int | None:
        """The COCO category a noun names ("hot dog" read with the word before it), or None."""
        from foilforge.foilers.lang.coco_categories import mention_forms

        if token is None:
            return None
        forms = mention_forms()
        if token.i > 0 and (token.doc[token.i - 1].lower_, token.lower_) in forms:
            return forms[token.doc[token.i - 1].lower_, token.lower_][0]
        found = forms.get((token.lower_,))
        return found[0] if found else None

    def _instances_agree(self, name: str, mode: str, old_category, new_category, new_number: str) -> bool:
        counts = self._images[name].counts
        if counts is None or mode not in ("foil_it", "plurals"):
            return True   # no object annotations for this image (or nothing they can say): the captions decide
        if mode == "foil_it":
            if old_category is None or new_category is None:
                return True
            return counts.get(new_category, 0) > 0 and counts.get(old_category, 0) == 0
        if new_category is None:
            return True
        n = counts.get(new_category, 0)
        return n >= 2 if new_number == "plural" else n == 1

    # ---------------------------------------------------------------- candidates

    def _one_caption(self, refs: tuple, name: str) -> set | None:
        """The image's captions that state every one of `refs` the image states at all (None: it states at most one
        of them, so nothing is to be read together)."""
        stated = [set(self.images_stating(ref).get(name, ())) for ref in refs]
        stated = [ids for ids in stated if ids]
        return set.intersection(*stated) if len(stated) > 1 else None

    def _splits_a_noun(self, name: str, edit: _Edit) -> bool:
        """Whether the image's captions state some noun's claims only across captions (possibly two instances)."""
        return any(self._one_caption(refs, name) == set() for refs in edit.nouns)

    def _both_readings_stated(self, edit: _Edit) -> bool:
        """Whether one image's captions state every statement the swap made and every one it undid ("a man riding a
        wave on a surfboard" and "a man riding a surfboard on a wave" of one surfer): the two texts have the same
        words, and people said both of one picture, so the exchange of roles contradicts nothing."""
        stating = [set(self.images_stating(ref)) for ref in (*edit.states, *edit.never)]
        return bool(stating) and bool(set.intersection(*stating))

    def _states_any(self, name: str, edit: _Edit) -> bool:
        """Whether the image's captions state any of the caption's part."""
        image = self._images[name]
        return any(name in self.images_stating(ref) for ref in edit.never) or any(
            noun in image.nouns for noun in edit.never_nouns)

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        edit = self.edit(record)
        if edit is None:
            if self._mode(record) != "none":
                self.refusals.refuse_record(record["id"], NO_EDIT_CLAIM)
            return []
        own = record.get("image_file")
        # a singular is no claim of number ("a giraffe eating leaves" is said of an image with two giraffes): another
        # caption's singular never makes "exactly one giraffe" true of the record's image, a plural does "some"
        claimed = [ref for ref in edit.states if ref[0] != "number" or ref[-1] == "plural"]
        if own in self._images and any(own in self.images_stating(ref) for ref in claimed):
            self.refusals.refuse_foil(record["id"], OWN_IMAGE_STATES_FOIL)
            return []
        mode = self._mode(record)
        if mode == "swap" and self._both_readings_stated(edit):
            self.refusals.refuse_foil(record["id"], SWAP_BOTH_STATED)
            return []
        stating = [set(self.images_stating(ref)) for ref in edit.states]
        base = set.intersection(*stating) - {own} if stating else set()
        if not base:
            return []
        caption_side = {n for n in base if self._states_any(n, edit)}
        self.refusals.refuse_partners(record["id"], STATES_CAPTION, len(caption_side))
        base -= caption_side
        old_category, new_category = self._category(edit.old_noun), self._category(edit.new_noun)
        disagree = {n for n in base if not self._instances_agree(n, mode, old_category, new_category, edit.new_number)}
        self.refusals.refuse_partners(record["id"], INSTANCES_DISAGREE, len(disagree))
        base -= disagree
        caption_key, foil_key = minimal_key(record["caption"]), minimal_key(record["foil"])
        mirrored = {n for n in base if any(m < str(record["id"]) for m in self._mirrors.get((n, foil_key, caption_key), ()))}
        self.refusals.refuse_partners(record["id"], MIRRORED, len(mirrored))
        base -= mirrored
        minimal = {}
        for name, sid in self._minimal.get(foil_key, []):
            if name in base:
                minimal.setdefault(name, sid)
        claims = edit.claims
        supported = {name: 0 for name in base}
        for statement in claims:
            for name in base.intersection(self.images_stating(statement.ref)):
                supported[name] += 1
        accepted, refused = [], {}
        for name in sorted(base):
            support = 1.0 if name in minimal else supported[name] / len(claims)
            if support >= self.min_support and name not in minimal and self._splits_a_noun(name, edit):
                refused[NOUN_SPLIT] = refused.get(NOUN_SPLIT, 0) + 1
            elif support >= self.min_support:
                accepted.append((name, support))
            else:
                first = next(s for s in claims if name not in self.images_stating(s.ref))
                refused[f"claim unsupported: {first.kind}"] = refused.get(f"claim unsupported: {first.kind}", 0) + 1
        for reason, n in sorted(refused.items()):
            self.refusals.refuse_partners(record["id"], reason, n)
        if self._encoder is not None:
            accepted.sort(key=lambda e: (e[0] not in minimal, -e[1], -self._similarity(record["foil"], e[0]), e[0]))
        else:
            accepted.sort(key=lambda e: (e[0] not in minimal, -e[1], e[0]))
        instances = mode in ("foil_it", "plurals") and (new_category is not None or old_category is not None)
        return [self._partner(record, name, edit, minimal.get(name), instances)
                for name, _ in accepted[: self.max_partners]]

    def claims_on(self, record: dict, image_file: str, minimal_caption: str | None = None) -> tuple[Claim, ...] | None:
        """The foil's claims checked against one image's captions, whatever the rule decides about that image
        (None: the edit is not read as a claim, or the image is not in the index). For measuring other rules."""
        edit = self.edit(record)
        if edit is None or image_file not in self._images:
            return None
        return self._claims(edit, image_file, minimal_caption)

    def _claims(self, edit: _Edit, name: str, minimal_caption: str | None) -> tuple[Claim, ...]:
        # a claim describing a noun is supported by the captions that state all the image states of that noun
        together = {ref: self._one_caption(refs, name) for refs in edit.nouns for ref in refs}
        claims = []
        for statement in edit.claims:
            stated = list(self.images_stating(statement.ref).get(name, []))
            if stated and together.get(statement.ref):
                stated = sorted(together[statement.ref])
            if minimal_caption is not None and minimal_caption not in stated:
                stated.append(minimal_caption)
            claims.append(Claim(kind=statement.kind, text=statement.text(), supported_by=tuple(sorted(stated)),
                                edited=statement.ref in edit.edited))
        return tuple(claims)

    def _partner(self, record: dict, name: str, edit: _Edit, minimal_caption: str | None, instances: bool) -> Partner:
        image = self._images[name]
        claims = self._claims(edit, name, minimal_caption)
        rule = MINIMAL_PAIR if minimal_caption is not None else CLAIMS_MATCHED
        annotations = (f"coco caption {record.get('sample_id')}", *(f"coco caption {sid}" for sid in image.sample_ids))
        if instances and image.counts is not None:
            rule += INSTANCES_AGREE
            annotations += tuple(f"coco instances of category {c}: {image.counts.get(c, 0)}"
                                 for c in (self._category(edit.new_noun), self._category(edit.old_noun)) if c is not None)
        return Partner(sample_id=image.sample_ids[0], image_file=name, rule=rule,
                       dataset_idx=image.sample_ids[0].split(":", 1)[-1], annotations=annotations,
                       claims=claims, absent=edit.absent)
