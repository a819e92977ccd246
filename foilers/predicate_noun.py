"""Predicate-noun triplets ("predicate_noun.v1") from Open Images boxes and relationships.

After Nikolaus et al. 2022 (seed predicate-noun-emnlp2022, §3.1 and App. A.1).
A triplet is (image I1, target sentence S1, distractor sentence S2): S1 and S2
differ in the noun ("a man is sitting" / "a woman is sitting", `pos: subject`)
or in the predicate ("a man is wearing glasses" / "a man is holding a bottle",
`pos: object`). The image holds a *visual distractor*: what S2 names is there,
but not in that relation (a man, and someone else holding a bottle), and S2 is
false of the image. Every triplet is paired with its counter-example
(I2, S2, S1), so a text-only model cannot beat 25% pair accuracy.

Corpus-level, in `propose` (all images at once):

1. label floor: relationships whose subject or object label occurs fewer than
   `min_label_count` times among all relationships are dropped (paper: 100);
2. synonym groups (`synonym_groups`, paper App. Table 3): labels of a group are
   one concept, named by the group's first label;
3. subjects are persons (`subject_labels`, the release's Man/Woman/Boy/Girl);
   a relationship becomes a predicate phrase through `predicate_phrases`
   ("wears Glasses" -> wearing glasses / wears glasses), else through
   `verb_forms` + article + lower-cased object ("holds Camera" -> holding a
   camera); relationships with neither are not used;
4. box rules on the subject boxes of target and distractor: each at least
   `min_box_fraction` of the image width and height, areas within a factor
   `max_size_ratio` (paper: 20%, 2);
5. every (S1, S2) triplet is matched with a (S2, S1) triplet on another image;
   within one concept pair an image is used once (seeded shuffle, then greedy),
   and in all at most the per-sample cap times (`max_foils_per_sample`, or
   `instruments.<I>.candidates_per_sample`): the cap is applied while pairing,
   so it never leaves half a pair.

The paper then selected images by hand; nothing here replaces that step.

Record (one per triplet): VALSE fields (`caption` = S1, `foil` = S2,
`classes`/`classes_foil` = word_target/word_distractor) plus the fields of the
released eval_set.json: img_filename, sentence_target, sentence_distractor,
relationship_target / relationship_distractor ({id, Label1, label, Label2,
bounding_box = subject box [x, y, width, height]}), subject, predicate, object,
word_target, word_distractor, pos, open_images_split, sentence_target_alt,
sentence_distractor_alt; and `pair_id`, `pair_member` (0/1). `eval_set(records)`
turns records into the released list format with ids 2k, 2k+1 for each pair
(the export stage writes it, `write_native`); the evaluate stage scores a pair
as right only when both triplets are (foilforge.metrics.pair_accuracy).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS, Foiler, RunContext
from foilforge.foilers.lang.inflection import indefinite_article
from foilforge.records import Foil
from foilforge.schema import Float, PositiveInt, Share

log = logging.getLogger(__name__)

# App. Table 3 (Nikolaus et al. 2022): each line one group of label synonyms
PAPER_SYNONYM_GROUPS = (
    ("Table", "Desk", "Coffee table"),
    ("Mug", "Coffee cup"),
    ("Glasses", "Sunglasses", "Goggles"),
    ("Sun hat", "Fedora", "Cowboy hat", "Sombrero"),
    ("Bicycle helmet", "Football helmet"),
    ("High heels", "Sandal", "Boot"),
    ("Racket", "Tennis racket", "Table tennis racket"),
    ("Crown", "Tiara"),
    ("Handbag", "Briefcase"),
    ("Cart", "Golf cart"),
    ("Tree", "Palm tree"),
    ("Football", "Volleyball (Ball)", "Rugby ball", "Cricket ball", "Tennis ball"),
)

SUBJECT_LABELS = ("Man", "Woman", "Boy", "Girl")

# phrases as the released eval set words them: "<predicate> <Object>" -> [progressive, simple present].
# The paper chose, where several predicates fit, the wording most frequent in Conceptual Captions.
RELEASE_PHRASES = {
    "is Sit": ["sitting", "sits"], "is Stand": ["standing", "stands"], "is Lay": ["laying", "lays"],
    "is Walk": ["walking", "walks"], "is Run": ["running", "runs"], "is Jump": ["jumping", "jumps"],
    "is Smile": ["smiling", "smiles"], "is Cry": ["crying", "cries"], "is Sing": ["singing", "sings"],
    "is Talk": ["talking", "talks"],
    "wears Glasses": ["wearing glasses", "wears glasses"], "wears Sun hat": ["wearing a hat", "wears a hat"],
    "wears Bicycle helmet": ["wearing a helmet", "wears a helmet"],
    "wears Backpack": ["carrying a backpack", "carries a backpack"],
    "holds Bicycle": ["riding a bike", "rides a bike"], "on Bicycle": ["riding a bike", "rides a bike"],
    "holds Guitar": ["playing guitar", "plays guitar"], "plays Guitar": ["playing guitar", "plays guitar"],
    "holds Cello": ["playing cello", "plays cello"], "plays Cello": ["playing cello", "plays cello"],
    "holds Drum": ["playing a drum", "plays a drum"], "interacts_with Dog": ["holding a dog", "holds a dog"],
    "on Horse": ["riding a horse", "rides a horse"], "ride Horse": ["riding a horse", "rides a horse"],
}

VERB_FORMS = {
    "holds": ["holding", "holds"], "wears": ["wearing", "wears"], "plays": ["playing", "plays"],
    "ride": ["riding", "rides"], "read": ["reading", "reads"], "eat": ["eating", "eats"],
    "drink": ["drinking", "drinks"], "kick": ["kicking", "kicks"], "throw": ["throwing", "throws"],
    "catch": ["catching", "catches"], "hits": ["hitting", "hits"], "cut": ["cutting", "cuts"],
}

# OI v6 attribute ids used as objects of "is" relationships; class-descriptions-boxable.csv does not name them
ATTRIBUTE_NAMES = {
    "/m/02wzbmj": "Stand", "/m/083mg": "Walk", "/m/06h7j": "Run", "/m/0by3w": "Jump", "/m/015c4z": "Sit",
    "/m/019nj4": "Smile", "/m/0463cq4": "Cry", "/m/015lz1": "Sing", "/m/051_dmw": "Lay", "/m/01lhf": "Talk",
}

TEMPLATES = ("progressive", "simple")
# an image can hold several person relationships, so it can serve several concept pairs
MAX_TRIPLETS_PER_IMAGE = 10
EVAL_SET_FIELDS = ("id", "img_filename", "sentence_target", "sentence_distractor", "relationship_target",
                   "relationship_distractor", "subject", "predicate", "object", "word_target", "word_distractor",
                   "pos", "open_images_split", "sentence_target_alt", "sentence_distractor_alt")


@dataclass(frozen=True)
class Fact:
    """One usable relationship of one image: a person (subject concept) and a predicate phrase."""

    rel_id: str
    subject: str
    predicate: str
    object: str
    phrase: tuple[str, str]  # (progressive, simple present)
    box: tuple[float, float, float, float]  # subject box: xmin, xmax, ymin, ymax (normalised)

    @property
    def width(self) -> float:
        return self.box[1] - self.box[0]

    @property
    def height(self) -> float:
        return self.box[3] - self.box[2]

    def relationship(self) -> dict:
        xmin, _, ymin, _ = self.box
        return {"id": self.rel_id, "Label1": self.subject, "label": self.predicate, "Label2": self.object,
                "bounding_box": [round(v, 6) for v in (xmin, ymin, self.width, self.height)]}


def article(word: str) -> str:
    """"a" or "an" by sound, not by letter ("an hourglass", "a unicycle"), through inflect."""
    return indefinite_article(word)


@FOILERS.register("predicate_noun.v1")
class PredicateNoun(Foiler):
    phenomenon = "predicate-noun"
    source = "openimages"
    # two images with swapped facts: each triplet (S1, S2) of one finds its counter-example (S2, S1) on the other
    golden_args = {"min_label_count": 1}
    golden = (
        ({"id": "openimages:g1", "image_file": "g1.jpg", "dataset_idx": "g1", "relationships": [
            {"subject": "/m/man", "subject_name": "Man", "object": "/m/g", "object_name": "Sunglasses", "predicate": "wears",
             "subject_box": [0.05, 0.45, 0.10, 0.95]},
            {"subject": "/m/woman", "subject_name": "Woman", "object": "/m/b", "object_name": "Hourglass",
             "predicate": "holds", "subject_box": [0.52, 0.95, 0.08, 0.92]}]},
         ("a man is wearing glasses", "a man is holding an hourglass")),
        ({"id": "openimages:g2", "image_file": "g2.jpg", "dataset_idx": "g2", "relationships": [
            {"subject": "/m/man", "subject_name": "Man", "object": "/m/b", "object_name": "Hourglass", "predicate": "holds",
             "subject_box": [0.05, 0.45, 0.10, 0.95]},
            {"subject": "/m/woman", "subject_name": "Woman", "object": "/m/g", "object_name": "Glasses",
             "predicate": "wears", "subject_box": [0.52, 0.95, 0.08, 0.92]}]},
         ("a man is holding an hourglass", "a man is wearing glasses")),
        # one person, one fact: nothing to contrast
        ({"id": "openimages:g3", "image_file": "g3.jpg", "dataset_idx": "g3", "relationships": [
            {"subject": "/m/girl", "subject_name": "Girl", "object": "/m/h", "object_name": "Horse", "predicate": "on",
             "subject_box": [0.1, 0.9, 0.1, 0.9]}]}, None),
    )

    def __init__(self, min_label_count: PositiveInt = 100, synonym_groups: list | None = None, subject_labels: list | None = None,
                 predicate_phrases: dict | None = None, verb_forms: dict | None = None,
                 no_article_nouns: list | None = None, attribute_names: dict | None = None,
                 min_box_fraction: Share = 0.2, max_size_ratio: Annotated[Float, Field(ge=1)] = 2.0,
                 template: str = "progressive", final_period: bool = False):
        self.min_label_count = min_label_count
        self.synonym_groups = synonym_groups
        self.subject_labels = subject_labels
        self.predicate_phrases = predicate_phrases
        self.verb_forms = verb_forms
        self.no_article_nouns = no_article_nouns
        self.attribute_names = attribute_names
        self.min_box_fraction = min_box_fraction
        self.max_size_ratio = max_size_ratio
        self.template = template
        self.final_period = final_period

    #: an image serves at most this many triplets (over all concept pairs); applied while pairing
    max_foils_per_sample = MAX_TRIPLETS_PER_IMAGE

    # ------------------------------------------------------------ configuration
    def check(self) -> None:
        if self.template not in TEMPLATES:
            raise ConfigError(f"template must be one of {', '.join(TEMPLATES)}, got {self.template!r}")
        for name in ("predicate_phrases", "verb_forms"):
            for key, forms in (getattr(self, name) or {}).items():
                if not (isinstance(forms, (list, tuple)) and len(forms) == 2 and all(isinstance(f, str) for f in forms)):
                    raise ConfigError(f"{name}.{key} must be [progressive, simple present], got {forms!r}")

    def _canonical_map(self) -> dict[str, str]:
        groups = PAPER_SYNONYM_GROUPS if self.synonym_groups is None else self.synonym_groups
        return {label: group[0] for group in groups for label in group}

    def canonical(self, name: str) -> str:
        if getattr(self, "_canonical", None) is None:  # derived from the args only, so cached
            self._canonical = self._canonical_map()
        return self._canonical.get(name, name)

    def phrase(self, predicate: str, obj: str) -> tuple[str, str] | None:
        """(progressive, simple present) predicate phrase for a canonical object, or None when not wordable."""
        phrases = RELEASE_PHRASES if self.predicate_phrases is None else self.predicate_phrases
        if f"{predicate} {obj}" in phrases:
            return tuple(phrases[f"{predicate} {obj}"])
        forms = (VERB_FORMS if self.verb_forms is None else self.verb_forms).get(predicate)
        if predicate == "is" or forms is None:
            return None
        noun = obj.lower()
        if obj not in set(self.no_article_nouns or ("Glasses", "Jeans", "Shorts", "Trousers")):
            noun = f"{article(noun)} {noun}"
        return f"{forms[0]} {noun}", f"{forms[1]} {noun}"

    def sentences(self, subject: str, phrase: tuple[str, str]) -> tuple[str, str]:
        """(sentence in the chosen template, sentence in the other one)."""
        noun = subject.lower()
        end = "." if self.final_period else ""
        progressive = f"{article(noun)} {noun} is {phrase[0]}{end}"
        simple = f"the {noun} {phrase[1]}{end}"
        return (progressive, simple) if self.template == "progressive" else (simple, progressive)

    # ------------------------------------------------------------ input
    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        relationships = sample.get("relationships")
        if not isinstance(relationships, list):
            raise InputError(path, "needs a list of relationships", record=index, field="relationships")
        for i, rel in enumerate(relationships):
            if not isinstance(rel, dict):
                raise InputError(path, f"relationship {i} is not an object", record=index, field="relationships")
            for key in ("subject", "object", "predicate"):
                if not isinstance(rel.get(key), str) or not rel[key]:
                    raise InputError(path, f"relationship {i} needs a non-empty string", record=index, field=f"relationships[{i}].{key}")
            box = rel.get("subject_box")
            if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)):
                raise InputError(path, f"relationship {i} needs [xmin, xmax, ymin, ymax], got {box!r:.60}", record=index,
                                 field=f"relationships[{i}].subject_box")

    def _name(self, rel: dict, side: str) -> str:
        """Display name of a relationship end; attribute ids (objects of 'is') come from `attribute_names`."""
        name = rel.get(f"{side}_name")
        label = rel[side]
        if not name or name == label:
            name = (ATTRIBUTE_NAMES if self.attribute_names is None else self.attribute_names).get(label, label)
        return name

    def label_counts(self, samples: list[dict]) -> Counter:
        """How often each label (by display name) occurs as subject or object among all relationships."""
        counts = Counter()
        for sample in samples:
            for rel in sample["relationships"]:
                counts[self._name(rel, "subject")] += 1
                counts[self._name(rel, "object")] += 1
        return counts

    def facts(self, sample: dict, counts: Counter) -> tuple[list[Fact], set[tuple[str, str]]]:
        """(usable facts of the image, every (subject, phrase) true of it)."""
        subjects = set(SUBJECT_LABELS if self.subject_labels is None else self.subject_labels)
        image = str(sample.get("dataset_idx") or sample["id"])
        usable, true = [], set()
        for i, rel in enumerate(sample["relationships"]):
            subject_raw, object_raw = self._name(rel, "subject"), self._name(rel, "object")
            subject, obj = self.canonical(subject_raw), self.canonical(object_raw)
            phrase = self.phrase(rel["predicate"], obj)
            if subject not in subjects or phrase is None:
                continue
            # truth uses every relationship, so a rare or small one still rules a distractor out
            true.add((subject, phrase[0]))
            if min(counts[subject_raw], counts[object_raw]) < self.min_label_count:
                continue
            fact = Fact(f"{image}:{i}", subject, rel["predicate"], obj, phrase, tuple(float(v) for v in rel["subject_box"]))
            if fact.width >= self.min_box_fraction and fact.height >= self.min_box_fraction:
                usable.append(fact)
        return usable, true

    def comparable(self, a: Fact, b: Fact) -> bool:
        area_a, area_b = a.width * a.height, b.width * b.height
        return min(area_a, area_b) > 0 and max(area_a, area_b) / min(area_a, area_b) <= self.max_size_ratio

    def triplets(self, sample: dict, counts: Counter) -> dict[tuple, dict]:
        """{(pos, S1, S2): triplet fields} for one image; the first qualifying fact pair per key wins."""
        facts, true = self.facts(sample, counts)
        found: dict[tuple, dict] = {}
        for t in facts:
            for d in facts:
                if t.subject == d.subject or t.phrase == d.phrase or not self.comparable(t, d):
                    continue
                # predicate differs: "<t.subject> <d.phrase>" must be false of the image
                if (t.subject, d.phrase[0]) not in true:
                    self._add(found, "object", t, d, t.subject, d.phrase, t.object, d.object, sample)
                # noun differs: "<d.subject> <t.phrase>" must be false of the image
                if (d.subject, t.phrase[0]) not in true:
                    self._add(found, "subject", t, d, d.subject, t.phrase, t.subject, d.subject, sample)
        return found

    def _add(self, found, pos, t: Fact, d: Fact, distractor_subject, distractor_phrase, word_target, word_distractor, sample):
        target, target_alt = self.sentences(t.subject, t.phrase)
        distractor, distractor_alt = self.sentences(distractor_subject, distractor_phrase)
        key = (pos, target, distractor)
        if key in found:
            return
        found[key] = {
            "img_filename": sample.get("image_file") or f"{sample.get('dataset_idx')}.jpg",
            "sentence_target": target, "sentence_distractor": distractor,
            "relationship_target": t.relationship(), "relationship_distractor": d.relationship(),
            "subject": t.subject, "predicate": t.predicate, "object": t.object,
            "word_target": word_target, "word_distractor": word_distractor, "pos": pos,
            "open_images_split": sample.get("original_split"),
            "sentence_target_alt": target_alt, "sentence_distractor_alt": distractor_alt,
        }

    @classmethod
    def write_native(cls, records, output_dir, instrument):
        """The released eval_set.json layout (ids 2k, 2k+1 = a triplet and its counter-example)."""
        from pathlib import Path

        name = f"{instrument}.eval_set.json"
        write_eval_set(records, Path(output_dir) / name)
        return [name]

    # ------------------------------------------------------------ corpus-level pairing
    def propose(self, samples: list[dict], context: RunContext) -> list[Foil]:
        """Every triplet of the run, already matched with its counter-example on another image (so the whole run
        in one call: no batch holds its own pairs)."""
        counts = self.label_counts(samples)
        by_key: dict[tuple, list[tuple[str, dict]]] = {}
        for sample in samples:
            for key, fields in sorted(self.triplets(sample, counts).items()):
                by_key.setdefault(key, []).append((sample["id"], fields))
        rng = context.rng("pairs")
        used: Counter = Counter()  # triplets per image, over all concept pairs (the per-sample cap)
        foils: list[Foil] = []
        pairs = 0
        for key in sorted(by_key):
            pos, s1, s2 = key
            if s1 > s2 or (pos, s2, s1) not in by_key:
                continue  # each concept pair once, from its alphabetically first direction
            pairs += self._pair(by_key[key], by_key[(pos, s2, s1)], rng, pos, used, self.cap(context), foils)
        context.stats.update(images=len(samples), triplet_keys=len(by_key), pairs=pairs)
        log.info("predicate_noun: %d images, %d triplet keys, %d counter-balanced pairs", len(samples), len(by_key), pairs)
        return foils

    def _pair(self, forward: list, backward: list, rng: random.Random, pos: str, used: Counter, cap: int,
              out: list[Foil]) -> int:
        forward, backward = list(forward), list(backward)
        rng.shuffle(forward)
        rng.shuffle(backward)
        here: set[str] = set()  # no image twice within one concept pair
        made = 0
        for image1, fields1 in forward:
            if image1 in here or used[image1] >= cap:
                continue
            partner = next((b for b in backward if b[0] not in here and b[0] != image1 and used[b[0]] < cap), None)
            if partner is None:
                break
            image2, fields2 = partner
            here.update((image1, image2))
            pair_id = f"{pos}|{fields1['sentence_target']}|{fields1['sentence_distractor']}|{made}"
            for member, (image, fields) in enumerate(((image1, fields1), (image2, fields2))):
                used[image] += 1
                out.append(Foil(
                    caption=fields["sentence_target"], foil=fields["sentence_distractor"],
                    classes=fields["word_target"], classes_foil=fields["word_distractor"],
                    extras={**fields, "pair_id": pair_id, "pair_member": member}, sample_id=image,
                ))
            made += 1
        return made

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """Keep only complete pairs (a member lost upstream takes its partner with it)."""
        members = Counter(f.extras["pair_id"] for f in foils)
        return [f for f in foils if members[f.extras["pair_id"]] == 2]


# ---------------------------------------------------------------- export and scoring
def eval_set(records: list[dict]) -> list[dict]:
    """Records in the released eval_set.json format: ids 2k and 2k+1 are a triplet and its counter-example."""
    ordered = sorted(records, key=lambda r: (r["pair_id"], r["pair_member"]))
    out = []
    for index, record in enumerate(ordered):
        if record["pair_member"] != index % 2:
            raise InputError("<records>", f"pair {record['pair_id']!r} is incomplete", record=record.get("id"), field="pair_member")
        entry = {"id": index}
        entry.update({k: record[k] for k in EVAL_SET_FIELDS if k != "id"})
        out.append(entry)
    return out


def write_eval_set(records: list[dict], path) -> int:
    from foilforge.io import write_json

    entries = eval_set(records)
    write_json(path, entries, indent=None)
    return len(entries)
