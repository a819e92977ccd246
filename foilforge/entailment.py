"""The entailment check for minimal edits, offline: a foil whose changed words the caption's entail or paraphrase.

A foil must be false of the image its caption is true of. When the caption's words entail the foil's ("a dog" ->
"an animal"), or the two say the same ("beside" -> "next to", "on the beach" -> "at the beach"), the foil is true
as well, and a benchmark that counts it as false scores a model that sees the image as wrong. VALSE ran an NLI
model for this (its §4.3); this check needs none: WordNet 3.0 (through NLTK, installed by `make setup`) and the
spatial-relation table foilforge/data/spatial_relations.yaml. Where an NLI model is configured
(profiles/paper.yaml) it runs as well, as a filter (filters/nli.py).

`check(edits, kind)` (registered as "entailment" in foilforge.edits.EDIT_CHECKS) judges the replacements of one
pair; the pair is refused when every replacement is refused (one that contradicts is enough to make the foil
false), with the first one's reason. Insertions and deletions are judged only where they complete a relation
phrase ("on" -> "on top of" inserts "top of"); otherwise they are not judged here (an added word may be the very
contradiction, "a man not wearing a hat"), so a pair that has one is accepted by this check; punctuation-only
ones are ignored. `kind` says what the replaced words are:

* noun, verb, adjective: WordNet over the senses of both words (every sense, VALSE's rule for its action verbs,
  App. A.5; for a noun, the senses SemCor attests when it attests any, so that "bus" -> "car" is not refused
  for bus.n.04, a jalopy):
  an antonym ("big" -> "small", "give" -> "take") is a contradiction and kept, whatever else relates them; the
  same synset ("couch" -> "sofa", "big" -> "large") is "paraphrase: synonym"; the foil's word a hypernym of the
  caption's ("dog" -> "animal": what is a dog is an animal) is "entailed: hypernym"; the foil's word a hyponym
  of the caption's ("animal" -> "dog") is "not contradicted: hyponym": the caption does not entail it, but nor
  does it exclude it, and the picture of "an animal" may well show a dog, so the foil may be true of it: refused
  too, as VALSE refused hyponyms of verbs. Adjectives have no hypernyms; a satellite of the other's head
  adjective ("huge" -> "large") is "paraphrase: similar adjective". A multi-word phrase is looked up whole
  ("park bench", "cell phone"), else by its head (a noun's last word, a verb's first). Leading articles,
  possessives and numerals are not part of the word ("a bus" -> "an airplane" compares bus and airplane).
* relation: the spatial table first (its `synonyms` rows, `entails` pairs and `alternations` judged by the
  relation's object, which the foiler passes from its parse or is read from the words after the relation). A
  relation phrase may reach beyond the changed words ("in front of" -> "in back of" changes one word), so up to
  three words on either side are taken too, and the longest phrases the table knows on both sides are judged.
  Relation phrases the table does not know are judged by WordNet when each names its relation by one word that is
  not a preposition (SugarCrepe's replace_rel changes verbs: "is holding" -> "is throwing"), in each word's first
  sense (see `relation_word_refusal`); two prepositions the table does not know, or phrases of several words, are
  accepted.

Reasons are short stable strings, counted by the foil stage (data/metrics/foil/<I>.json `refused`) and by
`foilforge refilter` (report.json `refused`).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from foilforge.edits import TOKEN, Edit, edit_check
from foilforge.errors import ConfigError, InputError

TABLE_PATH = Path(__file__).with_name("data") / "spatial_relations.yaml"

# ---- reasons (stable: counted in metrics and reports)
SAME_WORD = "paraphrase: same word"
SYNONYM = "paraphrase: synonym"
SIMILAR = "paraphrase: similar adjective"
HYPERNYM = "entailed: hypernym"
HYPONYM = "not contradicted: hyponym"
PEOPLE = "not contradicted: one person may be both"
SPATIAL_SYNONYM = "paraphrase: spatial synonym"
SPATIAL_ENTAILED = "entailed: spatial"
SPATIAL_COMPATIBLE = "not contradicted: spatial"


def alternation_reason(verdict: str, name: str, object_class: str | None) -> str:
    """"paraphrase: on/in/at (place)"; "unjudged: on/in/at" (no class of the object gives a verdict)."""
    return f"paraphrase: {name} ({object_class})" if verdict == "paraphrase" else f"unjudged: {name}"


# ---- WordNet relations between two words (also the action_replacement constraint's)
ANTONYM = "antonym"
SYNONYM_RELATION = "synonym"
HYPERNYM_RELATION = "hypernym"  # the new word is more general than the old
HYPONYM_RELATION = "hyponym"  # the new word is more specific than the old
SIMILAR_RELATION = "similar"
COMPATIBLE_PEOPLE = "compatible people"  # two descriptions one person may fit at once
SAME = "same word"
UNKNOWN = "not in WordNet"
UNRELATED = "unrelated"
#: relation -> refusal reason (the others, antonym, unrelated and not in WordNet, leave a contradiction possible)
RELATION_REASONS = {SAME: SAME_WORD, SYNONYM_RELATION: SYNONYM, HYPERNYM_RELATION: HYPERNYM,
                    HYPONYM_RELATION: HYPONYM, SIMILAR_RELATION: SIMILAR, COMPATIBLE_PEOPLE: PEOPLE}
WORDNET_POS = {"noun": "n", "verb": "v", "adjective": "a"}

#: words that are not part of the word a replacement names ("a bus", "his phone", "two dogs")
DETERMINERS = frozenset("""a an the this that these those his her its their our my your some any each every another
other no one two three four five six seven eight nine ten several many few both all""".split())
#: preposition and particle words: a relation phrase made only of them is the table's to judge, never WordNet's
#: (WordNet reads "in" as inch or indium, "at" as astatine)
PREPOSITION_WORDS = frozenset("""aboard about above across after against ahead along alongside amid amidst among
amongst around at atop away back before behind below beneath beside besides between beyond by close down from front
in inside into near nearby next of off on onto opposite out outside over past round side through throughout thru to
top toward towards under underneath up upon via with within without""".split())
#: words that end a noun phrase when reading a relation's object off the words after it (the nouns of relation
#: phrases, "the side of the road", do not)
PHRASE_ENDS = (PREPOSITION_WORDS - frozenset("back close front next round side top".split())) | frozenset(
    "and or but while as that which who where whose am is are was were be been being has have had do does did".split())


@functools.lru_cache(maxsize=1)
def wordnet():
    """NLTK's reader of English WordNet, or a ConfigError telling how to install the data offline.

    Built here rather than through `nltk.corpus.wordnet`: NLTK's reader, when constructed, maps the Open
    Multilingual WordNet's offsets onto the loaded version (its `map30`, about half of its load time in every
    process), and only its multilingual lemmas read that map. foilforge reads English alone, so the reader here
    skips it and answers every lookup as NLTK's own does (tests/test_entailment.py)."""
    import nltk
    from nltk.corpus.reader import CorpusReader
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError as err:
        raise ConfigError(
            "WordNet data for NLTK not found; run `make setup` (or `python scripts/setup_wordnet.py .venv/nltk_data`, "
            "which needs the Debian package wordnet-base). nltk.download is not used."
        ) from err
    # the multilingual reader as NLTK gives it, loaded only if a multilingual function is called
    multilingual = LazyCorpusLoader("omw-1.4", CorpusReader, r".*/wn-data-.*\.tab", encoding="utf8")
    return EnglishWordNet(root, multilingual)


def wordnet_version() -> str:
    return str(wordnet().get_version())


def verb_lemma(word: str) -> str:
    """Base form of a verb given in any inflection ("preaches", "drinking" -> "preach", "drink")."""
    from lemminflect import getLemma

    word = word.strip().lower()
    lemmas = getLemma(word, upos="VERB")
    return lemmas[0] if lemmas else word


def _hypernym_closure(synsets) -> set:
    closure = set()
    for synset in synsets:
        closure.update(synset.closure(lambda s: s.hypernyms() + s.instance_hypernyms()))
    return closure


def _antonyms(lemma: str, synsets) -> set[str]:
    names = set()
    for synset in synsets:
        for lem in synset.lemmas():
            if lem.name().lower() == lemma:
                names.update(a.name().lower() for a in lem.antonyms())
    return names


@functools.lru_cache(maxsize=65536)
def _synsets(word: str, pos: str) -> tuple[str, tuple]:
    """(the lemma WordNet knows, its synsets) for a word or phrase in any inflection, `pos` "n", "v" or "a".

    Kept per word: a lemma's SemCor count is a binary search of a file at each call, and the foilers ask of the
    same few hundred words thousands of times."""
    wn = wordnet()
    key = word.strip().lower().replace(" ", "_")
    if pos == "v":
        key = "_".join([verb_lemma(key.split("_")[0]), *key.split("_")[1:]])
    synsets = wn.synsets(key, pos=pos)
    if pos == "a":
        synsets = synsets or wn.synsets(key, pos="s")
    base = wn.morphy(key, pos) or key
    if pos == "n":
        # the senses a caption's noun is used in: those SemCor attests, when it attests any ("bus" is not read as
        # bus.n.04, a jalopy, a kind of car; "dog" not as frank.n.02); else every sense ("hot dog": none counted)
        attested = [s for s in synsets if any(lem.name().lower() == base and lem.count() for lem in s.lemmas())]
        synsets = attested or synsets
    return base, tuple(synsets)


@functools.lru_cache(maxsize=65536)
def lexical_relation(old: str, new: str, pos: str, first_sense: bool = False) -> str:
    """How `new` relates to `old` in WordNet over the senses of `pos` ("n", "v", "a") `_synsets` gives, or over
    each word's first sense only (`first_sense`); both in any inflection.

    Antonymy first: an antonym is a contradiction even when another sense pair is also related (give / take
    share hypernyms)."""
    old_base, old_synsets = _synsets(old, pos)
    new_base, new_synsets = _synsets(new, pos)
    if first_sense:
        old_synsets, new_synsets = old_synsets[:1], new_synsets[:1]
    if old_base == new_base or old.strip().lower() == new.strip().lower():
        return SAME
    if not old_synsets or not new_synsets:
        return UNKNOWN
    if new_base in _antonyms(old_base, old_synsets):
        return ANTONYM
    old_set, new_set = set(old_synsets), set(new_synsets)
    if old_set & new_set:
        return SYNONYM_RELATION
    if pos == "a":
        if any(set(s.similar_tos()) & new_set for s in old_set) or any(set(s.similar_tos()) & old_set for s in new_set):
            return SIMILAR_RELATION
        return UNRELATED
    if new_set & _hypernym_closure(old_set):
        return HYPERNYM_RELATION
    if old_set & _hypernym_closure(new_set):
        return HYPONYM_RELATION
    return UNRELATED


def content_words(phrase: str) -> list[str]:
    """The phrase's words, lower case, without punctuation and without leading determiners or numerals."""
    words = [w for w in (m.group().lower() for m in TOKEN.finditer(phrase)) if any(ch.isalnum() for ch in w)]
    while words and (words[0] in DETERMINERS or words[0].isdigit() or words[0].endswith(("'s", "’s"))):
        words = words[1:]
    return words


def _lookup_form(words: list[str], pos: str) -> tuple[str, bool]:
    """(the form to look up, whether it is only the phrase's head): the phrase whole when WordNet knows it ("park
    bench"), or written as one word ("skate board" -> skateboard), else its head (a verb's first word, else the
    last)."""
    whole = " ".join(words)
    if len(words) == 1 or _synsets(whole, pos)[1]:
        return whole, False
    if _synsets("".join(words), pos)[1]:
        return "".join(words), False
    return (words[0] if pos == "v" else words[-1]), True


@functools.lru_cache(maxsize=65536)
def word_relation(old: str, new: str, pos: str) -> str:
    """`lexical_relation` of two phrases, each looked up whole or by its head (`_lookup_form`).

    A head stands for more than its phrase: the foil's word a kind of the caption's head ("skate board", read as
    board -> surfboard) is not a hyponym of the caption's phrase, nor is the caption's word a kind of the foil's
    phrase when only the foil's head was read; such a reading, and a synonym of a head, counts as unrelated."""
    old_words, new_words = content_words(old), content_words(new)
    if not old_words or not new_words:
        return UNKNOWN
    (old_form, old_head), (new_form, new_head) = _lookup_form(old_words, pos), _lookup_form(new_words, pos)
    relation = lexical_relation(old_form, new_form, pos)
    unreliable = {HYPONYM_RELATION} if old_head else set()
    if new_head:
        unreliable.add(HYPERNYM_RELATION)
    if old_head or new_head:
        unreliable |= {SYNONYM_RELATION, SAME}
    return UNRELATED if relation in unreliable else relation


def word_refusal(old: str, new: str, pos: str) -> str | None:
    relation = word_relation(old, new, pos)
    if pos == "n" and relation in (UNRELATED, UNKNOWN) and people_compatible(old, new):
        relation = COMPATIBLE_PEOPLE
    return RELATION_REASONS.get(relation)


#: nouns that name a person or people and say nothing of who (every other person noun is a kind of them)
GENERIC_PEOPLE = frozenset("people person persons someone somebody individual individuals human humans folks".split())
#: the two axes on which WordNet's person nouns can contradict each other: sex and age
PERSON_AXES = {"sex": ("male.n.02", "female.n.02"), "age": ("adult.n.01", "juvenile.n.01")}


@functools.lru_cache(maxsize=65536)
def person_description(noun: str) -> dict[str, frozenset] | None:
    """What a noun says of a person, or None when no sense of it (any inflection) is a person: per axis of
    PERSON_AXES the values its person senses take ("man": sex male, age adult; "child": age juvenile; "surfer":
    none, a role), `generic` for people, person and the like."""
    words = content_words(noun)
    if not words:
        return None
    key = "_".join(words)
    if key in GENERIC_PEOPLE:
        return {"generic": frozenset({True})}
    wn = wordnet()
    person = wn.synset("person.n.01")
    senses = []
    for form in {key, *wn._morphy(key, "n")}:
        senses += [s for s in _synsets(form, "n")[1] if s == person or person in _hypernym_closure([s])]
    if not senses:
        return None
    closure = _hypernym_closure(senses) | set(senses)
    return {axis: frozenset(name for name in names if wn.synset(name) in closure)
            for axis, names in PERSON_AXES.items()}


def people_compatible(old: str, new: str) -> bool:
    """Whether one person may fit both nouns, so that replacing one by the other contradicts nothing: either says
    nothing of who (people, person), one names a role the other does not ("tennis player" / "boy", "surfer" /
    "man"), or they agree on every axis where each takes one value ("man" / "gentleman": male, adult). Two roles ("skier" /
    "snowboarder") or an axis with one value each that differ ("child" / "man", "boy" / "woman") contradict."""
    a, b = person_description(old), person_description(new)
    if a is None or b is None:
        return False
    if "generic" in a or "generic" in b:
        return True
    a_role, b_role = not any(a.values()), not any(b.values())
    if a_role and b_role:
        return False
    if a_role or b_role:
        return True
    return not any(len(a[axis]) == 1 and len(b[axis]) == 1 and a[axis] != b[axis] for axis in PERSON_AXES)


#: words a relation phrase may hold beside the one that names the relation ("is sitting on", "are placed on")
AUXILIARIES = frozenset("am is are was were be been being has have had do does did 's".split())


def relation_word(phrase: str) -> tuple[str | None, tuple[str, ...]]:
    """(the one word of a relation phrase that names it, its prepositions and particles): "is sitting on" ->
    ("sitting", ("on",)); the word is None when the phrase has none or several (WordNet cannot judge it then)."""
    words = [w for w in content_words(phrase) if w not in AUXILIARIES and w not in DETERMINERS]
    named = [w for w in words if w not in PREPOSITION_WORDS]
    return (named[0] if len(named) == 1 else None), tuple(w for w in words if w in PREPOSITION_WORDS)


def relation_word_refusal(old: str, new: str) -> str | None:
    """Two relation words the table does not know ("holding" -> "throwing"), by WordNet: each word's first sense
    (a caption's relation is a concrete one: over every sense hold and throw share a synset, "hold a party"), in
    every part of speech both have, verbs first; an antonym in one accepts the pair. Judged only where the two
    phrases have the same prepositions ("traveling towards" -> "coming out of" turns on them) and the word changed
    (a change of number, "meter with" -> "meters without", leaves the relation to its other words)."""
    (old_word, old_rest), (new_word, new_rest) = relation_word(old), relation_word(new)
    if old_word is None or new_word is None or old_rest != new_rest:
        return None
    reasons = []
    for pos in ("v", "n", "a"):
        relation = lexical_relation(old_word, new_word, pos, first_sense=True)
        if relation in (ANTONYM, SAME):
            return None
        if relation in RELATION_REASONS:
            reasons.append(RELATION_REASONS[relation])
    return reasons[0] if reasons else None


# ---------------------------------------------------------------- the spatial-relation table

@dataclass(frozen=True)
class Alternation:
    name: str
    between: tuple[frozenset, ...]  # each member phrase with its synonyms
    objects: tuple[tuple[str, str], ...]  # (object class, verdict) in order
    otherwise: str


@dataclass(frozen=True, eq=False)
class SpatialTable:
    version: int
    sha256: str
    path: str
    synonyms: tuple[frozenset, ...]
    entails: tuple[tuple[frozenset, frozenset], ...]
    alternations: tuple[Alternation, ...]
    #: class -> (words, synset names)
    object_classes: dict

    @functools.cached_property
    def phrases(self) -> frozenset:
        known = set().union(*self.synonyms)
        for specific, general in self.entails:
            known |= specific | general
        for alternation in self.alternations:
            known = known.union(*alternation.between)
        return frozenset(known)

    def family(self, phrase: str) -> frozenset:
        """The phrase and every phrase sharing a synonyms row with it."""
        return frozenset({phrase}.union(*(row for row in self.synonyms if phrase in row)))

    def judge(self, old: str, new: str, object_of) -> str | None:
        """The refusal reason for relation `old` -> `new` (both known to the table), or None (a contradiction).

        `object_of()` gives the relation's object noun (called only for an alternation)."""
        if old == new:
            return SAME_WORD
        if any(old in row and new in row for row in self.synonyms):
            return SPATIAL_SYNONYM
        for specific, general in self.entails:
            if old in specific and new in general:
                return SPATIAL_ENTAILED
            if old in general and new in specific:
                return SPATIAL_COMPATIBLE
        for alternation in self.alternations:
            sides = [i for i, members in enumerate(alternation.between) if old in members]
            others = [i for i, members in enumerate(alternation.between) if new in members]
            if sides and others and set(sides) != set(others):
                object_class = self.object_class(object_of(), tuple(name for name, _ in alternation.objects))
                verdict = dict(alternation.objects).get(object_class, alternation.otherwise)
                return None if verdict == "contrast" else alternation_reason(verdict, alternation.name, object_class)
        return None

    def object_class(self, noun: str | None, classes: tuple[str, ...]) -> str | None:
        return _object_class(self, noun, classes) if noun else None


@functools.lru_cache(maxsize=16384)
def _object_class(table: SpatialTable, noun: str, classes: tuple[str, ...]) -> str | None:
    """The first of `classes` that lists the noun, else that holds its first WordNet sense (the most frequent: a
    later one would class "hand" as a place by hand.n.05, a side), else None. A compound ("cutting board", "home
    plate") is looked up whole, and by its head when that gives no class ("blue sky": blue_sky.n.01 is a color)."""
    wn = wordnet()
    noun = " ".join(noun.lower().split())
    base = (wn.morphy(noun.replace(" ", "_"), "n") or noun).replace("_", " ")
    for name in classes:
        words, _ = table.object_classes[name]
        if noun in words or base in words:
            return name
    senses = wn.synsets(noun.replace(" ", "_"), pos="n")
    found = None
    if senses:
        wanted = {name: {wn.synset(s) for s in table.object_classes[name][1]} for name in classes}
        lineage = {senses[0]} | _hypernym_closure(senses[:1])
        found = next((name for name in classes if lineage & wanted[name]), None)
    if found is None and " " in noun:
        return _object_class(table, noun.rsplit(" ", 1)[1], classes)
    return found


VERDICTS = ("paraphrase", "contrast", "unjudged")


def _phrases(path, entry: str, value) -> frozenset:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p.strip() for p in value):
        raise InputError(path, "expected a non-empty list of phrases", record=entry)
    return frozenset(" ".join(p.lower().split()) for p in value)


def load_table(path=TABLE_PATH) -> SpatialTable:
    """The spatial-relation table of `path`, checked: every entry names its source, every class and synset exists."""
    import yaml

    path = Path(path)
    raw = path.read_bytes()
    data = yaml.safe_load(raw)
    if not isinstance(data, dict) or not isinstance(data.get("version"), int):
        raise InputError(path, "expected a mapping with an integer `version`")
    classes = {}
    for name, spec in (data.get("object_classes") or {}).items():
        if not isinstance(spec, dict):
            raise InputError(path, "expected {words, synsets}", record=f"object_classes.{name}")
        words = frozenset(" ".join(str(w).lower().split()) for w in spec.get("words") or ())
        synsets = tuple(spec.get("synsets") or ())
        wn = wordnet()
        for synset in synsets:
            try:
                wn.synset(synset)
            except Exception as err:  # nltk raises WordNetError (a ValueError) or others for a malformed name
                raise InputError(path, f"no WordNet {wordnet_version()} synset {synset!r}",
                                 record=f"object_classes.{name}", field="synsets") from err
        classes[name] = (words, synsets)

    def sourced(section: str, index: int, entry) -> dict:
        if not isinstance(entry, dict):
            raise InputError(path, "expected a mapping", record=f"{section}[{index}]")
        if not isinstance(entry.get("source"), str) or not entry["source"].strip():
            raise InputError(path, "every entry says where it comes from", record=f"{section}[{index}]", field="source")
        return entry

    synonyms = tuple(_phrases(path, f"synonyms[{i}].phrases", sourced("synonyms", i, e).get("phrases"))
                     for i, e in enumerate(data.get("synonyms") or ()))
    entails = tuple((_phrases(path, f"entails[{i}].specific", sourced("entails", i, e).get("specific")),
                     _phrases(path, f"entails[{i}].general", e.get("general")))
                    for i, e in enumerate(data.get("entails") or ()))
    table = SpatialTable(version=data["version"], sha256=hashlib.sha256(raw).hexdigest(), path=str(path),
                         synonyms=synonyms, entails=entails, alternations=(), object_classes=classes)
    alternations = []
    for i, entry in enumerate(data.get("alternations") or ()):
        entry = sourced("alternations", i, entry)
        where = f"alternations[{i}]"
        objects = tuple((entry.get("objects") or {}).items())
        for name, verdict in objects:
            if name not in classes:
                raise InputError(path, f"unknown object class {name!r} (object_classes: {', '.join(classes)})",
                                 record=where, field="objects")
            if verdict not in VERDICTS[:2]:
                raise InputError(path, f"verdict must be paraphrase or contrast, got {verdict!r}", record=where,
                                 field=f"objects.{name}")
        if entry.get("otherwise") not in VERDICTS:
            raise InputError(path, f"must be one of {', '.join(VERDICTS)}", record=where, field="otherwise")
        _phrases(path, where + ".between", entry.get("between"))
        between = tuple(table.family(" ".join(p.lower().split())) for p in entry["between"])
        alternations.append(Alternation(str(entry.get("name") or where), between, objects, entry["otherwise"]))
    return SpatialTable(version=table.version, sha256=table.sha256, path=table.path, synonyms=synonyms,
                        entails=entails, alternations=tuple(alternations), object_classes=classes)


@functools.lru_cache(maxsize=1)
def spatial_table() -> SpatialTable:
    return load_table(TABLE_PATH)


def object_after(text: str) -> str | None:
    """The head noun of the noun phrase that opens `text`, with the noun before it ("the sandy beach while ..." ->
    "beach", "a cutting board." -> "cutting board"), read with WordNet alone: determiners skipped, the phrase ends
    at a preposition, conjunction, punctuation mark or a verb form in -ing after a noun; its head is its last word
    WordNet knows as a noun. None when there is none."""
    wn = wordnet()
    run: list[str] = []  # the words WordNet knows as nouns, in a row, ending at the head so far
    for match in TOKEN.finditer(text):
        word = match.group().lower()
        if not any(ch.isalnum() for ch in word) or word in PHRASE_ENDS:
            break
        if word in DETERMINERS or word.isdigit():
            if not run:
                continue
            break
        if run and word.endswith("ing") and wn.synsets(word, pos="v"):
            break
        if wn.synsets(word, pos="n"):
            run.append(word)
        elif run:
            break
    return " ".join(run[-2:]) or None


def _words(text: str) -> list[str]:
    return [m.group().lower() for m in TOKEN.finditer(text)]


#: (words taken from before, from after) the changed words, in the order tried: the most first, so that the
#: longest phrase the table knows on both sides is judged ("at the side of" -> "by the side of", not "at" -> "by")
EXPANSIONS = tuple(sorted(((left, right) for left in range(4) for right in range(4)), key=lambda lr: -sum(lr)))


def _placements(old: list[str], new: list[str], before: list[str], after: list[str]):
    """(old, new, before, after) of the edit, and for an insertion or deletion every equivalent place of it: inserting
    "side of the" after "by the" is inserting "the side of" after "by" (word alignment picks one of them)."""
    yield old, new, before, after
    if old and new:
        return
    moved = old or new
    b, m, a = before, moved, after
    while b and m[-1] == b[-1]:  # slide left
        b, m, a = b[:-1], [b[-1]] + m[:-1], [m[-1]] + a
        yield (m, [], b, a) if old else ([], m, b, a)
    b, m, a = before, moved, after
    while a and m[0] == a[0]:  # slide right
        b, m, a = b + [m[0]], m[1:] + [a[0]], a[1:]
        yield (m, [], b, a) if old else ([], m, b, a)


def _rest_after(text: str, words: list[str], count: int) -> str:
    """`text` after its first `count` words (of `words`, its word list)."""
    rest = text
    for word in words[:count]:
        rest = rest[rest.lower().index(word) + len(word):]
    return rest


def relation_refusal(edit: Edit) -> str | None:
    """The refusal reason of a relation edit, or None (see the module docstring)."""
    table = spatial_table()
    old, new = _words(edit.old), _words(edit.new)
    before, after = _words(edit.before), _words(edit.after)
    best = _longest_known(table, old, new, before, after)
    if best is None:
        # an article that came or went with the relation belongs to its object ("at night" -> "in the night")
        best = _longest_known(table, _without_final_articles(old), _without_final_articles(new), before, after)
    if best is not None:
        _, old_phrase, new_phrase, consumed, own_span = best
        rest = _rest_after(edit.after, after, consumed)
        # the foiler's object is that of its own span: read it off the text when the phrase reached further
        known = edit.object if own_span else None
        return table.judge(old_phrase, new_phrase, lambda: known or object_after(rest))
    if set(old + new) <= PREPOSITION_WORDS:
        return None
    return relation_word_refusal(edit.old, edit.new)


def _without_final_articles(words: list[str]) -> list[str]:
    while words and words[-1] in DETERMINERS:
        words = words[:-1]
    return words


def _longest_known(table: SpatialTable, old: list[str], new: list[str], before: list[str], after: list[str]):
    """(words of context taken, old phrase, new phrase, words of `after` in the phrase, whether the phrase is the
    edit's own words) of the longest phrases around the edit the table knows on both sides, or None."""
    best = None
    if not old and not new:
        return None
    for old_words, new_words, left_words, right_words in _placements(old, new, before, after):
        for left, right in EXPANSIONS:
            if left > len(left_words) or right > len(right_words) or (best and left + right <= best[0]):
                continue
            context_left, context_right = left_words[len(left_words) - left:], right_words[:right]
            if any(not w.isalnum() for w in context_left + context_right):
                continue  # a relation phrase does not reach across punctuation
            old_phrase = " ".join(context_left + old_words + context_right)
            new_phrase = " ".join(context_left + new_words + context_right)
            if old_phrase in table.phrases and new_phrase in table.phrases:
                shift = len(right_words) - len(after)  # words of `after` the placement moved into the phrase
                best = (left + right, old_phrase, new_phrase, right + shift, right == 0 and shift == 0)
    return best


def replace_refusal(edit: Edit, kind: str) -> str | None:
    """Why one replacement's foil is entailed or paraphrased by its caption, or None."""
    if kind == "relation":
        return relation_refusal(edit)
    if kind in WORDNET_POS:
        return word_refusal(edit.old, edit.new, WORDNET_POS[kind])
    raise ValueError(f"unknown edit kind {kind!r} (one of relation, {', '.join(WORDNET_POS)})")


@edit_check("entailment")
def check(edits: list[Edit], kind: str | None) -> str | None:
    """The pair's refusal: every edit refused (the first one's reason), or None.

    Insertions and deletions of words are judged only as parts of a relation phrase ("on" -> "on top of" inserts
    "top of"); any other one leaves the pair to other checks (None)."""
    if kind is None:
        return None
    edits = [e for e in edits if not e.punctuation_only]
    if not edits or (kind != "relation" and any(e.type != "replace" for e in edits)):
        return None
    reasons = [replace_refusal(e, kind) for e in edits]
    return reasons[0] if all(reasons) else None


def describe() -> dict:
    """What the manifest says about this check: the table's version, file and sha256, WordNet's version."""
    table = spatial_table()
    return {"check": "foilforge.entailment", "table": Path(table.path).name, "table_version": table.version,
            "table_sha256": table.sha256, "wordnet": wordnet_version()}
