"""Grammatical number for every foiler: one module for noun number and its word lists.

The plurals foiler, the question templates (existence, counting) and the
realiser (actant swap, action replacement) all take their mass nouns,
pluralia tantum and noun inflection from here.

Nouns: singular <-> plural with `inflect` (irregulars: man/men, person/people,
knife/knives, mouse/mice; zero plurals: sheep, fish), plus the word lists that
say when number is *not* something to change: mass nouns ("furniture", "snow"),
pluralia tantum ("scissors", "jeans": no "exactly one scissor"), part and
relational nouns ("the bottom of", "the side of"), quantity nouns that are
really quantifiers ("a couple of", "a lot of").

Verbs: present-tense agreement ("is" <-> "are", "sits" <-> "sit") with
`lemminflect`, which knows irregular forms ("has" <-> "have", "does" <-> "do").

Pronouns: the number (and, for singulars, gender) forms of third-person
pronouns, used when a coreferring pronoun changes number with its antecedent.

`agreement_problems(doc)` is an independent grammar check on a spaCy parse
(determiner-number and subject-verb agreement), used by the tests to verify
foils; it is deliberately simple so that it can be trusted to be strict.
"""

from __future__ import annotations

import functools

from foilforge.foilers.lang.inflection import inflect_engine as _inflect_engine  # one shared engine
from foilforge.foilers.lang.inflection import match_case

# ---- word lists (defaults of the plurals.v1 params; lower-case lemmas) ----

#: nouns used without a countable reading in captions: number is not visual
MASS_NOUNS = (
    "water", "grass", "snow", "sand", "dirt", "mud", "ice", "air", "sky", "smoke", "fog", "rain", "sunlight",
    "food", "furniture", "luggage", "baggage", "equipment", "gear", "clothing", "jewelry", "traffic", "graffiti",
    "hair", "fur", "rice", "bread", "toast", "meat", "beef", "pork", "bacon", "ham", "cheese", "butter", "sauce",
    "milk", "coffee", "tea", "juice", "soup", "broccoli", "lettuce", "spinach", "cabbage", "celery", "corn",
    "pasta", "spaghetti", "cereal", "yogurt", "cream", "frosting", "icing", "chocolate", "sugar", "salt", "pepperoni",
    "garlic", "asparagus", "produce", "fruit", "stuff", "trash", "garbage", "debris", "wood", "metal",
    "plastic", "concrete", "hay", "foliage", "scenery", "weather", "daylight", "darkness",
    "tennis", "baseball", "soccer", "football", "golf", "frisbee", "volleyball", "basketball", "softball",
    "hockey", "polo", "skiing", "surfing", "lacrosse", "cricket", "information", "advice", "news", "money",
    "ketchup", "mustard", "mayonnaise", "salsa", "whipped", "gravy", "oatmeal", "seaweed",
    "steam", "pollution", "lighting", "daytime", "nighttime", "night", "day", "sunset", "sunrise", "dusk", "dawn", "sunshine",
)

#: nouns that exist only in the plural (or whose singular means something else)
PLURALIA_TANTUM = (
    "scissors", "pants", "jeans", "shorts", "trousers", "slacks", "leggings", "tights", "pajamas", "pyjamas",
    "overalls", "trunks", "briefs", "panties", "sunglasses", "eyeglasses", "goggles", "binoculars", "tongs",
    "pliers", "tweezers", "clippers", "shears", "clothes", "cattle", "police", "belongings", "surroundings",
    "outskirts", "premises", "remains", "goods", "stairs", "suspenders", "headquarters", "species", "series",
    "glasses",  # "wearing glasses"; "glasses of wine" is kept, see is_plurale_tantum
)

#: pluralia tantum above with a countable sense too ("tree trunks", "8 stairs", "glasses on the table") or
#: one form for both numbers ("1 species"): the plurals foiler cannot tell the sense and skips them, but a
#: Visual7W "how many" question asks about the countable one (VALSE counts "exactly 8 stairs")
COUNTABLE_SENSES = frozenset(("trunks", "briefs", "clippers", "suspenders", "stairs", "glasses", "species", "series",
                              "headquarters"))

#: heads whose number is not a visual property of an object: parts, sides, relations
PART_NOUNS = (
    "bottom", "top", "side", "front", "back", "middle", "center", "centre", "edge", "end", "corner", "rest",
    "half", "part", "inside", "outside", "surface", "interior", "exterior", "base", "tip", "left", "right",
    "background", "foreground", "distance", "midst", "rear", "face", "view", "shape", "form", "kind", "type",
    "sort", "style", "color", "colour", "picture", "photo", "photograph", "image", "shot", "close", "closeup",
    "way", "process", "middle", "time", "moment", "area", "level", "portion", "section", "bit",
)

#: "a N of X" where N works as a quantifier over X ("a couple of people"): not an object
#: singular nouns that name a collection of things ("a herd of elephants"): a plural pronoun may refer to one, and
#: an adjective before one says something of the collection, not of its members ("a purple bunch of fruit")
COLLECTIVE_NOUNS = frozenset((
    "group", "herd", "flock", "crowd", "team", "family", "couple", "pair", "bunch", "pack", "line", "row", "fleet",
    "band", "troop", "gaggle", "school", "swarm", "set", "stack", "pile", "lot", "collection", "variety", "number",
))

def collection_with_members(token) -> bool:
    """Whether a noun names a collection and has its members after it ("a bunch of fruit", "a crowd of people"): an
    edit of the noun is said of the collection, not of what one sees ("a purple bunch", "a room of people")."""
    return token.lemma_.lower() in COLLECTIVE_NOUNS and any(c.dep_ == "prep" and c.lower_ == "of"
                                                            for c in token.children)


QUANTITY_NOUNS = (
    "couple", "lot", "lots", "number", "plenty", "variety", "assortment", "handful", "dozen", "dozens", "ton",
    "tons", "few", "array", "selection", "mix", "mixture", "amount", "abundance", "multitude", "several",
    "hundreds", "thousands", "plethora", "range", "series", "host",
)

#: plural nouns that stay plural when their owner becomes one ("exactly one man ... his hands")
PAIRED_NOUNS = (
    "hands", "eyes", "ears", "legs", "feet", "arms", "shoes", "boots", "skis", "gloves", "wings", "paws",
    "horns", "socks", "sneakers", "knees", "lips", "teeth", "cheeks", "shoulders", "heels", "hooves", "antlers",
    "tusks", "skates", "sandals", "mittens", "poles", "toes", "fingers",
)

# ---- gender and animacy of antecedents (for singular pronouns in pl2sg) ----

MALE_NOUNS = frozenset(
    "man men boy boys guy guys gentleman gentlemen father fathers dad dads son sons brother brothers husband "
    "husbands king kings grandfather grandpa uncle boyfriend groom policeman policemen fireman firemen "
    "businessman businessmen fisherman fishermen cowboy cowboys sportsman male males".split())
FEMALE_NOUNS = frozenset(
    "woman women girl girls lady ladies mother mothers mom moms daughter daughters sister sisters wife wives "
    "queen queens grandmother grandma aunt girlfriend bride brides policewoman businesswoman female females "
    "mum mums".split())
PERSON_NOUNS = frozenset(
    "person people child children kid kids baby babies toddler toddlers player players skier skiers snowboarder "
    "snowboarders surfer surfers skateboarder skateboarders rider riders adult adults teenager teenagers teen "
    "teens student students chef chefs cook cooks worker workers officer officers soldier soldiers batter batters "
    "catcher catchers pitcher pitchers umpire umpires tourist tourists pedestrian pedestrians customer customers "
    "vendor vendors spectator spectators fan fans athlete athletes individual individuals friend friends owner "
    "owners driver drivers passenger passengers traveler travelers biker bikers cyclist cyclists bicyclist "
    "motorcyclist motorcyclists kite-flyer flyer flyers family families couple couples team teams crowd "
    "someone somebody anyone skater skaters parent parents infant infants youngster youngsters human humans "
    "hitter hitters fielder fielders jockey jockeys shopper shoppers diner diners commuter commuters "
    "boarder boarders kiter kiters performer performers".split())

# ---- pronouns ----

SINGULAR_PRONOUNS = {
    # form: (case, gender)
    "he": ("subj", "male"), "him": ("obj", "male"), "his": ("poss", "male"), "himself": ("refl", "male"),
    "she": ("subj", "female"), "her": ("obj", "female"), "hers": ("posspro", "female"), "herself": ("refl", "female"),
    "it": ("subj", "thing"), "its": ("poss", "thing"), "itself": ("refl", "thing"),
}
PLURAL_PRONOUNS = {
    "they": ("subj", None), "them": ("obj", None), "their": ("poss", None), "theirs": ("posspro", None),
    "themselves": ("refl", None),
}
_PLURAL_BY_CASE = {"subj": "they", "obj": "them", "poss": "their", "posspro": "theirs", "refl": "themselves"}
_SINGULAR_BY_CASE = {
    "male": {"subj": "he", "obj": "him", "poss": "his", "posspro": "his", "refl": "himself"},
    "female": {"subj": "she", "obj": "her", "poss": "her", "posspro": "hers", "refl": "herself"},
    "thing": {"subj": "it", "obj": "it", "poss": "its", "posspro": "its", "refl": "itself"},
}


def pronoun_case(token) -> str | None:
    """The case of a third-person pronoun token ("her" is possessive when tagged PRP$)."""
    word = token.lower_
    if word == "her":
        return "poss" if token.tag_ == "PRP$" else "obj"
    if word == "his" and token.tag_ != "PRP$":
        return "posspro"
    if word == "it":
        return "obj" if token.dep_ in ("dobj", "pobj", "iobj") else "subj"
    entry = SINGULAR_PRONOUNS.get(word) or PLURAL_PRONOUNS.get(word)
    return entry[0] if entry else None


def pronoun_gender(word: str) -> str | None:
    entry = SINGULAR_PRONOUNS.get(word.lower())
    return entry[1] if entry else None


def pronoun_number(word: str) -> str | None:
    word = word.lower()
    if word in SINGULAR_PRONOUNS:
        return "sg"
    if word in PLURAL_PRONOUNS:
        return "pl"
    return None


def pluralize_pronoun(token) -> str:
    return match_case(token.text, _PLURAL_BY_CASE[pronoun_case(token)])


def singularize_pronoun(token, gender: str) -> str:
    """Singular form for an antecedent of `gender` ("male", "female", "thing"); "person"
    (a human of unknown gender) keeps singular "they", which is grammatical and avoids guessing."""
    if gender not in _SINGULAR_BY_CASE:
        return token.text
    return match_case(token.text, _SINGULAR_BY_CASE[gender][pronoun_case(token)])


@functools.lru_cache(maxsize=None)
def _wordnet_lexname(lemma: str) -> str | None:
    """Lexicographer file of the first noun sense ("noun.person", "noun.animal"), or None
    when WordNet is unavailable (the word lists then decide alone)."""
    try:
        from foilforge.entailment import wordnet

        synsets = wordnet().synsets(lemma, pos="n")
    except Exception:  # WordNet data missing: fall back to the lists, never fail the run
        return None
    return synsets[0].lexname() if synsets else None


def names_a_person(word: str, lemma: str | None = None) -> bool:
    """Whether the noun names people ("man", "skiers", "crowd"): a colour word on it reads as skin colour."""
    return noun_gender(word, lemma) != "thing"


def noun_gender(word: str, lemma: str | None = None) -> str:
    """"male", "female", "person" (human, gender unknown) or "thing" (objects and animals: "it")."""
    word = word.lower()
    lemma = (lemma or word).lower()
    if word in MALE_NOUNS or lemma in MALE_NOUNS:
        return "male"
    if word in FEMALE_NOUNS or lemma in FEMALE_NOUNS:
        return "female"
    if word in PERSON_NOUNS or lemma in PERSON_NOUNS or _wordnet_lexname(lemma) == "noun.person":
        return "person"
    return "thing"


# ---- nouns ----




def pluralize_noun(word: str) -> str:
    """Plural of a singular count noun ("man" -> "men", "knife" -> "knives", "sheep" -> "sheep")."""
    return match_case(word, _inflect_engine().plural_noun(word.lower()))


def singularize_noun(word: str, lemma: str | None = None) -> str | None:
    """Singular of a plural noun, or None when `inflect` does not see a plural.

    `lemma` (spaCy's) is the fallback for Latin plurals inflect misses ("cacti")."""
    singular = _inflect_engine().singular_noun(word.lower())
    if not singular:
        if lemma and lemma.lower() != word.lower():
            singular = lemma.lower()
        else:
            return None
    return match_case(word, singular)


# lemminflect lemmatises these to themselves; the singular a count needs is different
SINGULAR_OVERRIDES = {"people": "person", "persons": "person", "veggies": "veggie", "children": "child"}
PLURAL_OVERRIDES = {"person": "people", "veggie": "veggies"}


def singular_of(noun: str) -> str:
    """The singular of a plural noun, or the noun itself (lemminflect; used by the question templates)."""
    lower = noun.lower()
    if lower in SINGULAR_OVERRIDES:
        return match_case(noun, SINGULAR_OVERRIDES[lower])
    from lemminflect import getLemma

    return match_case(noun, getLemma(lower, upos="NOUN")[0])


def plural_of(noun: str) -> str:
    """The plural of a noun (lemminflect; used by the question templates)."""
    lower = noun.lower()
    if lower in PLURAL_OVERRIDES:
        return match_case(noun, PLURAL_OVERRIDES[lower])
    from lemminflect import getInflection

    forms = getInflection(lower, tag="NNS")
    return match_case(noun, forms[0] if forms else lower + "s")


def is_mass(noun: str, mass_nouns=MASS_NOUNS) -> bool:
    return noun.lower() in mass_nouns


def _wordnet_noun_known(word: str) -> bool:
    from foilforge.foilers.lang.wordnet_constraints import wordnet

    return bool(wordnet().synsets(word.replace(" ", "_"), pos="n"))


@functools.lru_cache(maxsize=8192)
def singular_of_plural(word: str) -> str | None:
    """The singular if `word` is a plural noun form ("children" -> "child"), else None."""
    from lemminflect import getInflection, getLemma

    from foilforge.foilers.lang.inflection import import_inflect

    engine = import_inflect().engine()
    word = word.lower()
    candidates = list(getLemma(word, upos="NOUN"))
    singular = engine.singular_noun(word)
    if singular:
        candidates.append(singular)
    for cand in dict.fromkeys(candidates):
        if cand == word:
            continue
        # lemminflect lists "persons" for person, inflect knows "people": either table may vouch
        is_its_plural = word in getInflection(cand, tag="NNS") or engine.plural_noun(cand) == word
        # and the singular must be a real noun ("bus" -> "bu" fails)
        if is_its_plural and _wordnet_noun_known(cand):
            return cand
    return None



def is_plurale_tantum(token, pluralia_tantum=PLURALIA_TANTUM) -> bool:
    word = token.lower_
    if word not in pluralia_tantum:
        return False
    if word == "glasses":
        # "glasses of wine" are countable containers; worn glasses are not
        nxt = token.nbor(1) if token.i + 1 < len(token.doc) else None
        return not (nxt is not None and nxt.lower_ == "of")
    return True


def uncountable_when_counted(noun: str) -> bool:
    """A noun a "how many" question cannot be about ("pants", "scissors"): no "exactly 1 X", no "There is a X"."""
    lower = noun.lower()
    return lower in PLURALIA_TANTUM and lower not in COUNTABLE_SENSES


_BE_HAVE_DO = {
    # singular <-> plural for the irregular present / past forms
    "is": "are", "was": "were", "has": "have", "does": "do", "'s": "'re",
}
_BE_HAVE_DO_SG = {plural: singular for singular, plural in _BE_HAVE_DO.items()}


def is_agreeing_verb(token) -> bool:
    """A verb form that shows subject number: present 3sg/non-3sg, or past of "be"."""
    return token.tag_ in ("VBZ", "VBP") or token.lower_ in ("was", "were")


def verb_for_number(token, number: str) -> str:
    """The form of finite verb `token` that agrees with a subject of `number` ("sg"/"pl");
    the token itself when it shows no agreement (past tense, modal, infinitive)."""
    word = token.lower_
    if number == "pl":
        if word in _BE_HAVE_DO:
            return match_case(token.text, _BE_HAVE_DO[word])
        if token.tag_ == "VBZ":
            return match_case(token.text, _lemma_form(token, "VBP"))
        return token.text
    if word in _BE_HAVE_DO_SG:
        return match_case(token.text, _BE_HAVE_DO_SG[word])
    if word == "am":
        return token.text
    if token.tag_ == "VBP":
        return match_case(token.text, _lemma_form(token, "VBZ"))
    return token.text


def _lemma_form(token, tag: str) -> str:
    from lemminflect import getInflection, getLemma

    # lemminflect's lemma, not spaCy's: spaCy lemmatises "rides" to "rid"
    lemmas = getLemma(token.lower_, upos="AUX" if token.pos_ == "AUX" else "VERB")
    lemma = lemmas[0] if lemmas else token.lemma_.lower()
    if tag == "VBP":
        return lemma  # the non-3sg present is the base form for every verb but "be"
    forms = getInflection(lemma, tag=tag)
    return forms[0] if forms else token.text


# ---- an independent agreement check (tests and reports) ----

SINGULAR_DETERMINERS = frozenset("a an this that every each another one single".split())
PLURAL_DETERMINERS = frozenset("these those several many numerous multiple various few both".split()) | frozenset(
    "two three four five six seven eight nine ten eleven twelve".split())


def agreement_problems(doc, mass_nouns=MASS_NOUNS, pluralia_tantum=PLURALIA_TANTUM) -> list[str]:
    """Determiner-number and subject-verb agreement errors visible in a spaCy parse.

    Checks noun-chunk heads tagged NN/NNS against their determiners and numerals
    ("exactly 1 signs", "a number of man", "one tables") and finite verbs against
    the number of their nominal subject ("a dog are", "some dogs is"), coordinated
    subjects counting as plural. Collective heads with a plural "of" complement
    ("a group of people are") accept either verb number (notional agreement).
    """
    problems = []
    for chunk in doc.noun_chunks:
        head = chunk.root
        if head.tag_ not in ("NN", "NNS"):
            continue
        plural = head.tag_ == "NNS"
        words = [t.lower_ for t in chunk if t.i < head.i]
        text = " ".join(words)
        for i, word in enumerate(words):
            if plural and word in SINGULAR_DETERMINERS and not (word == "a" and "a number of" in f"{text} of"):
                problems.append(f"singular determiner {word!r} with plural noun {head.text!r}")
            if not plural and (word in PLURAL_DETERMINERS or (word.isdigit() and word != "1")):
                if head.lower_ not in mass_nouns:
                    problems.append(f"plural determiner {word!r} with singular noun {head.text!r}")
            if plural and word == "1":
                problems.append(f"numeral 1 with plural noun {head.text!r}")
        # "a number of X" is a plural quantifier: X must be plural
        before = doc[max(0, chunk.start - 3):chunk.start]
        if [t.lower_ for t in before] == ["a", "number", "of"] and not plural and head.lower_ not in mass_nouns:
            problems.append(f"'a number of' with singular noun {head.text!r}")
    for token in doc:
        if token.dep_ not in ("nsubj", "nsubjpass") or token.tag_ not in ("NN", "NNS"):
            continue
        subject_plural = token.tag_ == "NNS" or any(c.dep_ == "conj" for c in token.children)
        if token.lower_ in pluralia_tantum:
            subject_plural = True
        complements = [g for c in token.children if c.dep_ == "prep" and c.lower_ == "of" for g in c.children
                       if g.dep_ == "pobj"]
        if token.lower_ in QUANTITY_NOUNS and complements:
            # "a number of dogs are": the complement carries the number (a singular one is reported above)
            if complements[0].tag_ != "NNS":
                continue
            subject_plural = True
        collective_of_plural = any(c.dep_ == "prep" and c.lower_ == "of" and any(g.tag_ == "NNS" for g in c.children)
                                   for c in token.children)
        verb = token.head
        finite = [c for c in verb.children if c.dep_ in ("aux", "auxpass") and is_agreeing_verb(c)]
        if is_agreeing_verb(verb):
            finite.append(verb)
        for form in finite[:1]:  # the first finite form carries agreement
            verb_plural = form.tag_ == "VBP" or form.lower_ == "were"
            verb_singular = form.tag_ == "VBZ" or form.lower_ == "was"
            if subject_plural and verb_singular:
                problems.append(f"plural subject {token.text!r} with singular verb {form.text!r}")
            elif not subject_plural and verb_plural and not collective_of_plural and form.lower_ != "am":
                problems.append(f"singular subject {token.text!r} with plural verb {form.text!r}")
    return problems
