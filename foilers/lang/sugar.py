"""What the SugarCrepe-type foilers share: the corpus they read, the proposer they ask, the checks they apply.

A SugarCrepe-type foiler (foilers/replace_obj.py, replace_att, replace_rel, add_obj, add_att; swap_obj and
swap_att through foilers/lang/swap.py) works in three steps:

1. **sites**: from each caption's spaCy parse it chooses where an edit goes and what kind it is
   (`sites(doc, sample, corpus)`, one `EditSite` each: foilforge/proposers.py), at most `max_sites` a caption (a
   random choice from the sample's own generator when it has more);
2. **words**: its proposer (`proposer` arg: `{name: lexicon | instruct_llm, args: {...}}`) proposes the new words
   and the foil for every site of the batch in one call;
3. **checks**: each proposal goes through the exact-edit checks of its type (foilers/lang/exact_edits.py: the
   foil is the caption with old -> new at the site and nothing else, of the type's kind, not a paraphrase, the new
   word stated by no caption of the image), and, with COCO's instance annotations configured (`use_instances`), an
   added object must not be annotated on the image. Refusals are counted by reason in the foil metrics
   (`edit_checks`), beside what the proposer refused.

The run's corpus (`corpus_pass`, once): every image's words (what its captions state: no new word may be one of
them), the run's vocabulary by part of speech (the lexicon's candidates must be words the captions use), which
nouns share an image (what can be added beside a noun) and which attribute adjectives each noun takes.

Each kept proposal is a `Foil` whose record carries `provenance.edit = {type, span, old, new}` and
`provenance.proposer`; its candidates are ranked by the proposer's score, best first.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass

from foilforge.errors import InputError
from foilforge.foiler import CaptionFoiler, RunContext, propose_per_sample
from foilforge.foilers.lang.attributes import takes_attributes
from foilforge.foilers.lang.number import names_a_person
from foilforge.proposers import EditSite, Proposal, ProposerContext, Refusal, build_proposer
from foilforge.records import Foil
from foilforge.schema import PositiveInt

NOUN_TAGS = ("NN", "NNS")
FINITE_TAGS = ("VBZ", "VBP", "VBD", "MD")
ADD_ANNOTATED = "add: the added object is annotated on the image"


@dataclass
class SiteContext:
    """What `sites` may use beside the parse: the words the image's captions state (`avoid`), the sample's own
    generator, a counter of the foiler's skip rules (the foil metrics' `rules`), the run's parses (`parse`,
    `nlp`) and the foiler's corpus pass (`corpus`: `SugarFoiler.corpus_pass`)."""

    avoid: frozenset
    rng: random.Random
    rules: Counter
    parses: object
    corpus: dict | None = None


def image_key(sample: dict):
    return sample.get("image_id", sample.get("image_file", sample["id"]))


def content_lemmas(doc) -> set[str]:
    """The lemmas and words of a caption's content tokens (what an image's captions state)."""
    return {w for t in doc if t.pos_ not in ("PUNCT", "DET", "SPACE") for w in (t.lemma_.lower(), t.lower_)}


class SugarFoiler(CaptionFoiler):
    """Base class of the SugarCrepe-type foilers: subclasses set `edit_type` (and `phenomenon`) and `sites`."""

    source = "coco"
    #: the SugarCrepe type whose exact-edit checks the foils pass (also what `select` and `refilter` check)
    exact_edit: str = ""
    #: the corpus counts `corpus_pass` gathers: "cooccurring" (add_obj), "modifiers" (add_att), "prepositions"
    corpus_needs: tuple = ()
    #: True: `sites` gives the sites best first and the first `max_sites` are kept (else a random choice of them)
    ordered_sites: bool = False

    def __init__(self, proposer: dict | None = None, spacy_model: str = "en_core_web_sm", max_sites: PositiveInt = 3,
                 use_other_captions: bool = True, use_instances: bool = True):
        self.proposer = proposer
        self.spacy_model = spacy_model
        self.max_sites = max_sites
        self.use_other_captions = use_other_captions
        self.use_instances = use_instances

    def check(self) -> None:
        build_proposer(self.proposer, "proposer")  # its args checked against its constructor, nothing loaded

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        super().check_sample(sample, path, index)
        ids = sample.get("instance_category_ids")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
            raise InputError(path, "expected a list of COCO category ids", record=index, field="instance_category_ids")

    # ---- tools (cached across runs; nothing of a run is kept)

    def use_proposer(self, proposer) -> "SugarFoiler":
        """Plug in a built proposer (anything with .propose(sites, context)) instead of the params block."""
        self._proposer = proposer
        return self

    def get_proposer(self, context: RunContext | None = None):
        if getattr(self, "_proposer", None) is None:
            self._proposer = build_proposer(self.proposer, context.key("proposer") if context else "proposer")
        return self._proposer

    def golden_tools(self) -> "SugarFoiler":
        """The lexicon proposer under a fixed-table span ranker (foilforge/fixed_tools.py): the golden examples test
        the sites, candidates and checks, not a model."""
        from foilforge.fixed_tools import TableRanker
        from foilforge.foilers.proposers.lexicon import LexiconProposer

        return self.use_proposer(LexiconProposer().use_ranker(TableRanker(self.golden_scores)))

    golden_scores: dict = {}

    # ---- the corpus

    def corpus_pass(self, samples: list[dict], context: RunContext) -> dict:
        """Every image's words, the run's vocabulary and the co-occurrence counts the sites' proposals need."""
        # what worded the foils, for the foil metrics and the card (the models, prompts and decoding settings)
        context.stats["proposer_settings"] = self.get_proposer(context).describe()
        nlp = self.load_nlp(context.key("spacy_model"))
        texts = sorted({s["caption"] for s in samples})
        docs = dict(zip(texts, nlp.pipe(texts, batch_size=256)))
        image_words: dict = defaultdict(set)
        image_nouns: dict = defaultdict(set)
        vocabulary = {"noun": Counter(), "adjective": Counter(), "verb": Counter(), "preposition": Counter()}
        for sample in samples:
            doc = docs[sample["caption"]]
            key = image_key(sample)
            image_words[key].update(content_lemmas(doc))
            image_nouns[key].update(t.lemma_.lower() for t in doc if t.tag_ in NOUN_TAGS)
            for token in doc:
                pos = {"NOUN": "noun", "ADJ": "adjective", "VERB": "verb"}.get(token.pos_)
                if pos:
                    vocabulary[pos][token.lemma_.lower()] += 1
        if "prepositions" in self.corpus_needs:
            from foilforge.foilers.lang.prepositions import attested_spans

            vocabulary["preposition"] = attested_spans(docs[s["caption"]] for s in samples)
        cooccurring: dict = defaultdict(Counter)
        if "cooccurring" in self.corpus_needs:
            for nouns in image_nouns.values():
                for noun in nouns:
                    cooccurring[noun].update(n for n in nouns if n != noun)
        modifiers: dict = defaultdict(Counter)
        if "modifiers" in self.corpus_needs:
            from foilforge.foilers.lang.attributes import class_of

            for doc in docs.values():
                for token in doc:
                    if token.dep_ == "amod" and token.head.tag_ in NOUN_TAGS and class_of(token.lower_):
                        modifiers[token.head.lemma_.lower()][token.lower_] += 1
        return {"image_words": {k: sorted(v) for k, v in image_words.items()},
                "image_nouns": {k: sorted(v) for k, v in image_nouns.items()},
                "vocabulary": {pos: dict(sorted(c.items())) for pos, c in vocabulary.items()},
                "cooccurring": {k: dict(sorted(c.items())) for k, c in sorted(cooccurring.items())},
                "modifiers": {k: dict(sorted(c.items())) for k, c in sorted(modifiers.items())}}

    def foils_for(self, sample: dict, rng: random.Random):
        """The candidates of one sample on its own (its corpus: this caption only)."""
        context = RunContext(self.registry_name, samples={sample["id"]: sample})
        return self.propose_batch([sample], context, self.corpus_pass([sample], context))

    # ---- sites, proposals, checks

    def sites(self, doc, sample: dict, where: "SiteContext") -> list[EditSite]:
        """Where this type's edits can go in one parsed caption, in the foiler's order of preference (subclasses)."""
        raise NotImplementedError

    def parse_before_sites(self, samples: list[dict], checker) -> None:
        """Parse in one batch (`checker.parse_all`) the texts `sites` will parse (subclasses; none here)."""

    def propose_batch(self, samples: list[dict], context: RunContext, corpus: dict) -> list[Foil]:
        from foilforge.foilers.lang.exact_edits import ExactEditChecker, edit_of

        nlp = self.load_nlp(context.key("spacy_model"))
        checker = ExactEditChecker(nlp)
        checker.parse_all(s["caption"] for s in samples)
        self.parse_before_sites(samples, checker)
        image_words = corpus["image_words"]
        sites_of: dict = {}
        stats: Counter = Counter()
        rules: Counter = Counter()
        for sample in samples:
            key = image_key(sample)
            avoid = frozenset(image_words.get(key, ())) if self.use_other_captions else \
                frozenset(content_lemmas(checker.parse(sample["caption"])))
            where = SiteContext(avoid, context.rng(sample["id"]), rules, checker, corpus)
            found = self.sites(checker.parse(sample["caption"]), sample, where)
            stats["sites"] += len(found)
            if len(found) > self.max_sites and not self.ordered_sites:
                found = sorted(context.rng(sample["id"], "sites").sample(found, self.max_sites), key=lambda s: s.span)
            found = found[: self.max_sites]
            if not found:
                stats["captions_without_a_site"] += 1
            sites_of[sample["id"]] = found
        all_sites = [site for sample in samples for site in sites_of[sample["id"]]]
        proposer = self.get_proposer(context)
        pcontext = ProposerContext(seed=context.seed, vocabulary=corpus["vocabulary"],
                                   cooccurring=corpus["cooccurring"], modifiers=corpus["modifiers"], nlp=nlp,
                                   progress=context.progress)
        answers = proposer.propose(all_sites, pcontext) if all_sites else []
        by_site = dict(zip((id(s) for s in all_sites), answers))
        refused: Counter = Counter()
        described = getattr(proposer, "registry_name", type(proposer).__name__)
        # the checks below parse every proposed foil: in one batch here (spaCy's annotations are those of one text
        # at a time: tests/test_nlp_batching.py), not one call each
        checker.parse_all(answer.foil for site_answers in answers for answer in site_answers
                          if not isinstance(answer, Refusal))

        def foils_of(sample: dict, _rng) -> list[Foil]:
            out = []
            for site in sites_of[sample["id"]]:
                for answer in by_site.get(id(site), ()):
                    stats["answers"] += 1
                    if isinstance(answer, Refusal):
                        refused[answer.reason] += 1
                        continue
                    reason = self.refusal(checker, answer, sample, corpus)
                    if reason:
                        refused[reason] += 1
                        continue
                    stats["passed"] += 1
                    edit = edit_of(site.type, site.caption, answer.foil, site.span)
                    out.append(self.foil_of(site, answer, edit, described))
            # best first: the proposer's score (a proposal without one keeps its place)
            order = sorted(range(len(out)), key=lambda i: (-(out[i].score if out[i].score is not None else 0.0), i))
            ranked = []
            for rank, index in enumerate(order):
                foil = out[index]
                foil.rank = rank
                ranked.append(foil)
            return ranked

        foils = propose_per_sample(self, samples, context, foils_of)
        context.stats["edit_checks"] = {"type": self.exact_edit, "proposer": described, **dict(sorted(stats.items())),
                                        "refused": dict(sorted(refused.items()))}
        context.stats["proposer"] = {k: v for k, v in sorted(pcontext.stats.items())}
        if rules:
            context.stats["rules"] = dict(sorted(rules.items()))
        return foils

    def refusal(self, checker, answer: Proposal, sample: dict, corpus: dict) -> str | None:
        """Why a proposal is not exactly the site's edit (foilers/lang/exact_edits.py `proposal_refusal`), its new
        words are stated on the image, or its added object is annotated there; None when it passes."""
        from foilforge.foilers.lang.exact_edits import proposal_refusal

        site = answer.site
        reason = proposal_refusal(checker, answer)
        if reason:
            return reason
        if self.use_other_captions:
            key = image_key(sample)
            reason = self.image_refusal(checker, answer, corpus["image_words"].get(key, ()),
                                        corpus["image_nouns"].get(key, ()))
            if reason:
                return reason
        if self.use_instances and site.type == "add_obj" and sample.get("instance_category_ids"):
            from foilforge.foilers.lang.coco_categories import mention_forms

            shown = set(sample["instance_category_ids"])
            for token in added_tokens(checker, site.caption, answer.foil):
                entry = mention_forms().get((token.lower_,)) or mention_forms().get((token.lemma_.lower(),))
                if entry and entry[0] in shown:
                    return ADD_ANNOTATED
        return None

    def image_refusal(self, checker, answer: Proposal, image_words, image_nouns) -> str | None:
        """The new or added word stated by a caption of the image (its words from the corpus pass), or an added
        object a synonym, hypernym or hyponym of a noun they state."""
        from foilforge.foilers.lang.exact_edits import ADD_IMPLIED, ADD_ON_IMAGE, REPLACE_NEW_ON_IMAGE, lexical_relation

        site = answer.site
        if site.type.startswith("swap"):
            return None
        new = {t.lemma_.lower() for t in added_tokens(checker, site.caption, answer.foil)
               if t.pos_ in ("NOUN", "PROPN", "ADJ", "VERB")}
        words = set(image_words)
        if new & words:
            return ADD_ON_IMAGE if site.type.startswith("add") else REPLACE_NEW_ON_IMAGE
        if site.type == "add_obj":
            for noun in sorted(new):
                if any(lexical_relation(w, noun, "noun") for w in sorted(image_nouns) if " " not in w):
                    return ADD_IMPLIED
        return None

    def foil_of(self, site: EditSite, answer: Proposal, edit: dict, proposer: str) -> Foil:
        s, e = edit["span"]
        tail = len(site.caption) - e
        classes, classes_foil = self.changed_items(site, answer)
        extras = {"foil_method": f"{proposer} {site.type}: {site.old} -> {answer.new}"}
        if answer.score is not None:
            extras["proposal_score"] = answer.score
        provenance = {"edit": edit, "proposer": proposer}
        if answer.raw is not None:
            provenance["answer"] = answer.raw
        return Foil(caption=site.caption, foil=answer.foil, classes=classes, classes_foil=classes_foil,
                    caption_span=(s, e), foil_span=(s, len(answer.foil) - tail), extras=extras,
                    score=answer.score, provenance=provenance)

    @staticmethod
    def changed_items(site: EditSite, answer: Proposal) -> tuple[str, str]:
        """VALSE's `classes` / `classes_foil`: the words the edit takes out and puts in (a/an and joining words
        aside); for an addition, the noun the added words join and the added words."""
        from foilforge.foilers.lang.exact_edits import changes, tokens

        ct, ft = tokens(site.caption), tokens(answer.foil)
        skip = {"a", "the", "and", ",", "some"}
        removed = [w for c in changes(ct, ft) for w, _, _ in ct[c.i1:c.i2] if w not in skip]
        added = [w for c in changes(ct, ft) for w, _, _ in ft[c.j1:c.j2] if w not in skip]
        if site.type.startswith("add"):
            return site.word, " ".join(added)
        return " ".join(removed) or site.word, " ".join(added)

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """The candidates in proposal order, one (caption, foil) per image: two captions of one image that read the
        same give their foil once."""
        seen, kept = set(), []
        for foil in foils:
            key = (image_key(context.samples.get(foil.sample_id) or {"id": foil.sample_id}), foil.caption.lower(),
                   foil.foil.lower())
            if key in seen:
                continue
            seen.add(key)
            kept.append(foil)
        return kept


def added_tokens(checker, caption: str, foil: str) -> list:
    """The foil's parsed tokens that the caption does not have (the words an edit put in)."""
    from foilforge.foilers.lang.exact_edits import changes, tokens

    ct, ft = tokens(caption), tokens(foil)
    fdoc = checker.parse(foil)
    spans = [(ft[c.j1][1], ft[c.j2 - 1][2]) for c in changes(ct, ft) if c.j2 > c.j1]
    return [t for t in fdoc if any(start <= t.idx < end for start, end in spans)]


def compound_start(token) -> int:
    """The index of the first token of a noun's compound ("park bench": park), or the noun's own."""
    start = token.i
    doc = token.doc
    while start > 0 and doc[start - 1].dep_ == "compound" and doc[start - 1].head.i in range(start, token.i + 1):
        start -= 1
    return start


def names_something_seen(token) -> bool:
    """Whether a noun token names something one sees in a picture (a site of add_att, add_obj, replace_obj):
    `takes_attributes`, or a word for people (WordNet files "people" as a group)."""
    lemma = token.lemma_.lower()
    return takes_attributes(lemma) or names_a_person(token.lower_, lemma)
