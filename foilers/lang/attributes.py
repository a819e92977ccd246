"""Attribute classes (colour, material, shape, pattern, weather, size, age, state): which adjective contradicts which.

The classes are data (foilers/lang/attribute_classes.yaml, each with where its words come from). In an
*exclusive* class any two words exclude each other on one object (red / blue, wooden / metal), except the
spelling variants and near-synonyms its `same` lists (gray / grey); in an *antonym* class only the listed pairs
do (big / small, old / young). replace_att replaces an adjective by a word that contradicts it; add_att adds an
adjective of a class the noun phrase has none of, at the class's place in the phrase (`order`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from foilforge.errors import ConfigError

CLASSES_PATH = Path(__file__).with_name("attribute_classes.yaml")
#: the attribute class that, said of a person, reads as skin colour (add_att adds none there, replace_att changes none)
SKIN_READ_CLASS = "colour"
#: the attribute class that, before a noun used without a determiner ("lots of traffic", "a plate of food"), reads
#: as an amount ("lots of little traffic"): add_att adds none there
AMOUNT_READ_CLASS = "size"
#: size words that, said of a person, read as age ("a little boy", "her big sister"): replace_att changes none there
AGE_READ_SIZES = frozenset(("little", "big", "small", "large"))


def without_determiner(noun) -> bool:
    """Whether a singular noun stands without a determiner, numeral or possessive ("lots of traffic", "on red table"):
    a mass noun, or a caption's telegraphic style. A size before one reads as an amount ("little traffic")."""
    return noun.tag_ == "NN" and not any(c.dep_ in ("det", "nummod", "poss") for c in noun.children)


#: words that say how light or deep a colour is: the pair is one colour ("light green"), so neither word alone is
#: an attribute to replace ("light white", "bright green" for "dark green")
SHADE_WORDS = frozenset(("light", "dark", "bright", "pale", "deep", "pastel", "neon", "hot", "navy", "royal", "sky"))


#: WordNet lexicographer files of nouns that name nothing an attribute can be seen on: an event ("a white race"),
#: an act ("a red game"), a state ("the blue darkness"), a time ("a wooden day"), a group as such ("red traffic")
UNSEEN_LEXNAMES = frozenset(("noun.act", "noun.attribute", "noun.cognition", "noun.event", "noun.feeling",
                             "noun.group", "noun.motive", "noun.possession", "noun.process", "noun.quantity",
                             "noun.relation", "noun.state", "noun.time"))


@functools.lru_cache(maxsize=16384)
def takes_attributes(lemma: str) -> bool:
    """Whether noun `lemma` can name something an attribute is seen on: one of its first three WordNet senses is in
    none of UNSEEN_LEXNAMES (a sign is a communication in its first senses, a kite a possession, yet both are seen:
    only nouns whose common senses are all unseen are refused). False for a word WordNet does not know."""
    from foilforge.foilers.lang.exact_edits import _synsets

    synsets = _synsets(lemma, "n")[:3]
    return any(synset.lexname() not in UNSEEN_LEXNAMES for synset in synsets)


#: WordNet lexicographer files of nouns that name a living thing
LIVING_LEXNAMES = frozenset(("noun.person", "noun.animal", "noun.plant"))
#: the age words WordNet keeps for one kind of noun (old.a.02 / young.a.01 of living things, old.a.01 / new.a.01
#: of the rest): "an old room" -> "a young room" or "an old man" -> "a new man" is nonsense the text alone gives away
AGE_WORDS_OF_LIVING_THINGS = frozenset(("young",))
AGE_WORDS_OF_OTHER_THINGS = frozenset(("new",))


#: nouns whose colour is a coat's (below), besides the mammals
COAT_NOUNS = frozenset(("hair", "fur", "mane", "beard", "mustache", "moustache"))


@functools.lru_cache(maxsize=16384)
def names_a_coat(word: str, lemma: str) -> bool:
    """Whether a noun's colour is that of a coat: hair, fur and the like, or a mammal by the noun's first WordNet
    sense (a bird's or a fish's colours are named as they are: a red bird is not a yellow one)."""
    if lemma in COAT_NOUNS or word in COAT_NOUNS:
        return True
    from foilforge.foilers.lang.exact_edits import first_noun_sense

    sense = first_noun_sense(word, lemma)
    if sense is None or sense.lexname() != "noun.animal":
        return False
    return any(ancestor.name() == "mammal.n.01" for path in sense.hypernym_paths() for ancestor in path)


def coat_colours_alike(word: str, nouns) -> frozenset:
    """The colours that, said of these nouns (spaCy tokens), name what `word` names when one of them is a coat
    (`same_on_coats` of the classes: "a brown dog" may be called a red one); empty otherwise."""
    attribute_class = class_of(word)
    groups = [g for g in (attribute_class.same_on_coats if attribute_class else ()) if word.lower() in g]
    if not groups or not any(names_a_coat(n.lower_, n.lemma_.lower()) for n in nouns):
        return frozenset()
    return frozenset().union(*groups) - {word.lower()}


#: an attribute is typical of a noun when the run's captions give the noun this word in at least this share of the
#: words of its class they give it ("blue" of 85% of the colours COCO val 2017 says of a sky, "white" of 79% of a
#: plate's, "wooden" of every material of a bench's): added to the noun it is likely true of the image
TYPICAL_SHARE = 0.5
#: ... counted only where they give the noun at least this many words of the class (a noun said twice proves nothing)
TYPICAL_EVIDENCE = 5


def typical_attributes(noun: str, modifiers: dict) -> frozenset:
    """The attribute words typical of noun lemma `noun` (TYPICAL_SHARE) by `modifiers`, the run's counts of the
    class adjectives said of each noun ({noun: {adjective: count}}, foilers/lang/sugar.py's corpus)."""
    said = modifiers.get(noun) or {}
    by_class: dict = {}
    for word, count in said.items():
        attribute_class = class_of(word)
        if attribute_class is not None:
            by_class.setdefault(attribute_class.name, {})[word] = count
    out = set()
    for counts in by_class.values():
        total = sum(counts.values())
        if total >= TYPICAL_EVIDENCE:
            out |= {word for word, count in counts.items() if count >= TYPICAL_SHARE * total}
    return frozenset(out)


def described_nouns(adjective) -> list:
    """The nouns an adjective is said of: its head for `amod` ("a red car"), the subject of its verb for `acomp`
    ("the car is red")."""
    if adjective.dep_ == "amod":
        return [adjective.head]
    return [c for c in adjective.head.children if c.dep_ in ("nsubj", "nsubjpass")]


@functools.lru_cache(maxsize=16384)
def names_a_living_thing(word: str, lemma: str) -> bool | None:
    """Whether a noun names a living thing (a person, an animal, a plant) by its first WordNet sense; None for a
    group ("people", "a team": young and new people alike) or a word WordNet does not know."""
    from foilforge.foilers.lang.exact_edits import first_noun_lexname

    lexname = first_noun_lexname(word, lemma)
    if lexname is None or lexname == "noun.group":
        return None
    return lexname in LIVING_LEXNAMES


def misfit_age_words(nouns) -> frozenset:
    """The age words whose sense does not fit the nouns (spaCy tokens) they would be said of: "young" of a thing,
    "new" of a living thing; nothing for a noun WordNet does not know."""
    out = set()
    for noun in nouns:
        living = names_a_living_thing(noun.lower_, noun.lemma_.lower())
        if living is not None:
            out |= AGE_WORDS_OF_OTHER_THINGS if living else AGE_WORDS_OF_LIVING_THINGS
    return frozenset(out)


def person_misread(word: str) -> str | None:
    """How an attribute word said of a person reads other than as an attribute to see: a colour as skin colour
    ("colour"), little, big, small or large as age ("size"); None when it reads as itself."""
    if word in load_classes()[SKIN_READ_CLASS].words:
        return "colour"
    return "size" if word in AGE_READ_SIZES else None


def reads_as_a_shade(word: str) -> bool:
    """Whether an adjective of no class right before a colour would read as that colour's shade: a shade word
    ("light", "pale") or an adjective in -y ("muddy blue", "dusty pink", "rusty red" each name one colour)."""
    word = word.lower()
    return word in SHADE_WORDS or (word.endswith("y") and len(word) > 3 and class_of(word) is None)


def in_a_shaded_colour(doc, i: int) -> bool:
    """Whether token `i` is half of a shade-and-colour pair: a colour after a shade word, or a shade word before a
    colour ("light green", "dark blue", "hot pink")."""
    colour = load_classes()[SKIN_READ_CLASS].words
    word = doc[i].lower_
    before = doc[i - 1].lower_ if i > 0 else None
    after = doc[i + 1].lower_ if i + 1 < len(doc) else None
    return (word in colour and before in SHADE_WORDS) or (word in SHADE_WORDS and after in colour)


@dataclass(frozen=True)
class AttributeClass:
    name: str
    exclusive: bool
    order: int
    source: str
    words: tuple[str, ...]
    #: exclusive classes: groups of words that say the same (never a foil for each other)
    same: tuple[frozenset, ...] = ()
    #: antonym classes: the pairs that contradict
    antonyms: tuple[tuple[str, str], ...] = ()
    #: exclusive classes: groups of words that say the same of a coat (`coat_colours_alike`)
    same_on_coats: tuple[frozenset, ...] = ()

    def contradicting(self, word: str) -> tuple[str, ...]:
        """The words of this class that contradict `word` on one object, in the file's order."""
        if self.exclusive:
            same = set().union(*(g for g in self.same if word in g)) | {word}
            return tuple(w for w in self.words if w not in same)
        out = [b if a == word else a for a, b in self.antonyms if word in (a, b)]
        return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=4)
def load_classes(path: str | None = None) -> dict[str, AttributeClass]:
    """The attribute classes of `path` (default: the repository's file), checked: every class has a source, an
    order, and words (exclusive) or antonym pairs; no word is in two classes."""
    import yaml

    path = Path(path or CLASSES_PATH)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: expected a mapping of attribute classes")
    classes, owner = {}, {}
    for name, entry in data.items():
        where = f"{path} class {name!r}"
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str) or not isinstance(entry.get("order"), int):
            raise ConfigError(f"{where}: needs `source` (where the words come from) and an integer `order`")
        exclusive = bool(entry.get("exclusive"))
        if exclusive:
            words = tuple(entry.get("words") or ())
            same = tuple(frozenset(group) for group in entry.get("same") or ())
            same_on_coats = tuple(frozenset(group) for group in entry.get("same_on_coats") or ())
            antonyms = ()
        else:
            antonyms = tuple(tuple(pair) for pair in entry.get("antonyms") or ())
            if any(len(pair) != 2 for pair in antonyms):
                raise ConfigError(f"{where}: every antonym entry must be a pair")
            words = tuple(dict.fromkeys(w for pair in antonyms for w in pair))
            same = same_on_coats = ()
        if not words:
            raise ConfigError(f"{where}: no words (`words` for an exclusive class, `antonyms` pairs otherwise)")
        for word in words:
            if word in owner and owner[word] != name:
                raise ConfigError(f"{where}: {word!r} is already in class {owner[word]!r}")
            owner[word] = name
        strays = {w for group in same + same_on_coats for w in group} - set(words)
        if strays:
            raise ConfigError(f"{where}: `same` or `same_on_coats` names words not in the class: {sorted(strays)}")
        classes[name] = AttributeClass(name, exclusive, entry["order"], entry["source"], words, same, antonyms,
                                       same_on_coats)
    return classes


@functools.lru_cache(maxsize=4096)
def class_of(word: str) -> AttributeClass | None:
    """The attribute class of an adjective (lower case), None when it is in none."""
    for attribute_class in load_classes().values():
        if word.lower() in attribute_class.words:
            return attribute_class
    return None


def contradicting(word: str) -> tuple[str, ...]:
    """The adjectives that contradict `word` on one object (empty when `word` is in no class)."""
    attribute_class = class_of(word)
    return attribute_class.contradicting(word.lower()) if attribute_class else ()


def same_attribute(a: str, b: str) -> bool:
    """True when two adjectives say the same by the classes (one word, or one `same` group: gray / grey)."""
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    attribute_class = class_of(a)
    return bool(attribute_class and attribute_class.exclusive and any(a in g and b in g for g in attribute_class.same))
