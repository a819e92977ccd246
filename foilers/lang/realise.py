"""Caption realisation from a SWiG frame: verb + agent + main other role, active voice, present tense.

VALSE generated its action captions with SimpleNLG (App. A.5); this module
uses PyPI `simplenlg` (a Python port of it) for the clause, with the
inflection facts SimpleNLG cannot know supplied from libraries:

* number: a gloss that is already plural ("people", "children") is given to
  SimpleNLG as singular lemma + plural feature + its own plural form, so the
  verb agrees ("People disembark") and the noun is not re-pluralised
  ("peoples"). Plurality is read off lemminflect's noun lemma / inflection
  tables, confirmed by WordNet knowing the singular as a noun.
* verb forms: lemminflect's 3rd-person singular ("photographs"; SimpleNLG
  writes "photographes" for verbs missing from its lexicon).
* articles: inflect's a/an choice ("an hour"; SimpleNLG says "a hour");
  mass nouns (WordNet lexicographer file noun.substance, or seen without an
  article in a given caption) and plurals take none.

The material is imsitu_space.json: `abstract` templates ("the AGENT drinks a
LIQUID from a CONTAINER at a PLACE") give the subject role and the
preposition of every other role; `order` ranks the roles; noun glosses give
the words. Of SWiG's three frames per image the one agreeing most with the
per-role majority filler is used.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

from foilforge.foilers.lang.number import singular_of_plural

ARTICLES = {"a", "an", "the"}
# determiners dropped when reading a preposition off a released caption ("exercises his torso")
DETERMINERS = ARTICLES | {"his", "her", "their", "its", "my", "our", "your", "some", "two", "such"}
MASS_LEXNAMES = {"noun.substance"}


@dataclass(frozen=True)
class Noun:
    """A role filler as it will be written: `text` is the surface form ("people", "tennis player")."""

    text: str
    plural: bool = False
    mass: bool = False

    @property
    def head(self) -> str:
        return self.text.split()[-1]


@dataclass(frozen=True)
class Realisation:
    text: str
    verb: str  # lemma
    verb_form: str  # as written ("drinks")
    subject: Noun
    obj: Noun | None
    preposition: str | None
    # character spans of the subject and object noun phrases in `text`
    subject_span: tuple[int, int]
    object_span: tuple[int, int] | None


# ----------------------------------------------------------------------------- nouns

@functools.lru_cache(maxsize=8192)
def _first_sense_lexname(word: str) -> str | None:
    from foilforge.foilers.lang.wordnet_constraints import wordnet

    synsets = wordnet().synsets(word.replace(" ", "_"), pos="n")
    return synsets[0].lexname() if synsets else None


def make_noun(gloss: str, synset_id: str | None = None, mass: bool | None = None) -> Noun:
    """A Noun from a gloss; `synset_id` ("n14845743") decides mass-ness when given."""
    text = " ".join(gloss.replace("_", " ").split())
    head = text.split()[-1]
    plural = singular_of_plural(head) is not None
    if mass is None:
        lexname = None
        if synset_id:
            lexname = noun_synset(synset_id).lexname()
        else:
            lexname = _first_sense_lexname(text)
        mass = not plural and lexname in MASS_LEXNAMES
    return Noun(text=text, plural=plural, mass=mass)


def noun_synset(synset_id: str):
    """The WordNet synset of a SWiG/imSitu noun id ("n10787470")."""
    from foilforge.foilers.lang.wordnet_constraints import wordnet

    return wordnet().synset_from_pos_and_offset(synset_id[0], int(synset_id[1:]))


def indefinite_article(text: str) -> str:
    from foilforge.foilers.lang.inflection import import_inflect

    return import_inflect().engine().a(text).split()[0]


# ----------------------------------------------------------------------------- frames

@dataclass(frozen=True)
class Template:
    subject_role: str | None  # None when the abstract's subject is no role ("it rains ...")
    # role -> preposition ("" = direct object); roles the abstract does not mention are absent
    prepositions: dict


def parse_abstract(abstract: str, roles) -> Template:
    """Subject role and per-role preposition from an imSitu abstract.

    "the AGENT drinks a LIQUID from a CONTAINER at a PLACE" -> subject agent;
    liquid: "" (direct object), container: "from", place: "at". The words
    between a role and the previous role (or the verb), articles dropped, are
    its preposition (particles such as "up" come along, as they should).
    """
    roles = {r.lower() for r in roles}
    tokens = abstract.split()
    positions = []
    for i, tok in enumerate(tokens):
        name = re.sub(r"('s|[^A-Za-z])+$", "", tok)
        if name.isupper() and name.lower() in roles:
            positions.append((i, name.lower()))
    if not positions:
        raise ValueError(f"abstract names none of the roles {sorted(roles)}")
    subject_index, subject_role = positions[0]
    if any(tok.lower() not in ARTICLES for tok in tokens[:subject_index]):
        # "it rains on a PLACE": no role is the subject, so there is no actor to realise
        return Template(subject_role=None, prepositions={})
    # the verb is the first word after the subject that is not an article
    verb_index = next((i for i in range(subject_index + 1, len(tokens)) if tokens[i].lower() not in ARTICLES), None)
    prepositions = {}
    boundaries = {subject_index} | ({verb_index} if verb_index is not None else set())
    for i, role in positions[1:]:
        words = []
        j = i - 1
        while j >= 0 and j not in boundaries and j not in {p for p, _ in positions}:
            words.append(tokens[j].lower())
            j -= 1
        prepositions[role] = " ".join(w for w in reversed(words) if w not in ARTICLES)
        boundaries.add(i)
    return Template(subject_role=subject_role, prepositions=prepositions)


def choose_frame(frames: list[dict]) -> int:
    """Index of the frame agreeing most with the per-role most common filler (ties: earliest)."""
    roles = sorted({role for frame in frames for role in frame})
    majority = {}
    for role in roles:
        counts = Counter(frame.get(role, "") for frame in frames)
        # most_common keeps first-seen order among ties, so the earliest frame's filler wins a tie
        majority[role] = counts.most_common(1)[0][0]
    scores = [sum(frame.get(role, "") == majority[role] for role in roles) for frame in frames]
    return max(range(len(frames)), key=lambda i: (scores[i], -i))


@dataclass(frozen=True)
class FrameParts:
    """What a caption is built from: the verb and two role fillers (object may be absent)."""

    verb: str
    subject_role: str
    subject_id: str
    object_role: str | None
    object_id: str | None
    preposition: str | None
    frame_index: int


def frame_parts(verb_name: str, frames: list[dict], abstract: str | None, order: list[str]) -> FrameParts | None:
    """Pick subject and main other role of the chosen frame; None when the subject is unfilled."""
    from foilforge.foilers.lang.wordnet_constraints import verb_lemma

    index = choose_frame(frames)
    frame = frames[index]
    template = None
    if abstract:
        try:
            template = parse_abstract(abstract, order or frame.keys())
        except ValueError:
            template = None
    subject_role = template.subject_role if template else ("agent" if "agent" in frame else (order or sorted(frame))[0])
    if subject_role is None or not frame.get(subject_role):
        return None
    object_role = next((r for r in (order or sorted(frame)) if r != subject_role and frame.get(r)), None)
    preposition = None
    if object_role and template:
        preposition = template.prepositions.get(object_role) or None
    return FrameParts(
        verb=verb_lemma(verb_name), subject_role=subject_role, subject_id=frame[subject_role],
        object_role=object_role, object_id=frame.get(object_role) if object_role else None,
        preposition=preposition, frame_index=index,
    )


def gloss_of(nouns: dict, noun_id: str) -> str:
    return nouns[noun_id][0] if isinstance(nouns[noun_id], list) else nouns[noun_id]["gloss"][0]


# ----------------------------------------------------------------------------- realiser

class CaptionRealiser:
    """SimpleNLG clause realisation; the lexicon loads once per instance (about 0.2 s)."""

    def __init__(self):
        from simplenlg.lexicon import Lexicon

        self._lexicon = Lexicon.getDefaultLexicon()

    def _noun_phrase(self, factory, noun: Noun):
        from simplenlg.features import Feature, LexicalFeature, NumberAgreement
        from simplenlg.framework import LexicalCategory, WordElement

        if noun.plural:
            singular_head = singular_of_plural(noun.head) or noun.head
            base = " ".join(noun.text.split()[:-1] + [singular_head])
            word = WordElement(base, LexicalCategory.NOUN)
            # tell SimpleNLG the plural we already have, so it neither re-pluralises nor guesses
            word.setFeature(LexicalFeature.PLURAL, noun.text)
            phrase = factory.createNounPhrase(word)
            phrase.setFeature(Feature.NUMBER, NumberAgreement.PLURAL)
            return phrase
        phrase = factory.createNounPhrase(WordElement(noun.text, LexicalCategory.NOUN))
        if not noun.mass:
            phrase.setSpecifier(indefinite_article(noun.text))
        return phrase

    def _verb(self, lemma: str):
        """The verb with its 3rd-person singular from lemminflect: SimpleNLG's own rules write "photographes"."""
        from lemminflect import getInflection
        from simplenlg.features import LexicalFeature
        from simplenlg.framework import LexicalCategory, WordElement

        word = WordElement(lemma, LexicalCategory.VERB)
        forms = getInflection(lemma, tag="VBZ")
        if forms:
            word.setFeature(LexicalFeature.PRESENT3S, forms[0])
        return word

    def realise(self, verb: str, subject: Noun, obj: Noun | None = None, preposition: str | None = None) -> Realisation:
        """"A man shouts at a woman." from ("shout", man, woman, "at")."""
        from simplenlg.features import Feature, Tense
        from simplenlg.framework import NLGFactory
        from simplenlg.realiser.english import Realiser

        factory = NLGFactory(self._lexicon)
        clause = factory.createClause()
        clause.setSubject(self._noun_phrase(factory, subject))
        clause.setVerb(self._verb(verb))
        if obj is not None:
            object_phrase = self._noun_phrase(factory, obj)
            if preposition:
                clause.addComplement(factory.createPrepositionPhrase(preposition, object_phrase))
            else:
                clause.setObject(object_phrase)
        clause.setFeature(Feature.TENSE, Tense.PRESENT)
        text = Realiser(self._lexicon).realiseSentence(clause)
        return _describe(text, verb, subject, obj, preposition)


def _describe(text: str, verb: str, subject: Noun, obj: Noun | None, preposition: str | None) -> Realisation:
    """Locate the parts in the realised sentence (spans for provenance, verb form for checks)."""
    subject_match = re.match(rf"(?:(?:an?|the)\s+)?{re.escape(subject.text)}\b", text, flags=re.IGNORECASE)
    if subject_match is None:
        raise RuntimeError(f"realised sentence {text!r} does not start with the subject {subject.text!r}")
    rest = text[subject_match.end():].split()
    verb_form = rest[0].rstrip(".") if rest else ""
    object_span = None
    if obj is not None:
        found = None
        for found in re.finditer(rf"(?:\b(?:an?|the)\s+)?\b{re.escape(obj.text)}\b", text, flags=re.IGNORECASE):
            pass
        if found is None:
            raise RuntimeError(f"realised sentence {text!r} does not contain the object {obj.text!r}")
        object_span = (found.start(), found.end())
    return Realisation(text=text, verb=verb, verb_form=verb_form, subject=subject, obj=obj, preposition=preposition,
                       subject_span=(0, subject_match.end()), object_span=object_span)


@functools.lru_cache(maxsize=1)
def shared_realiser() -> CaptionRealiser:
    return CaptionRealiser()


# ----------------------------------------------------------------------------- released captions

# lexicographer files of nouns that stay countable even when a caption writes them bare
COUNTABLE_LEXNAMES = {"noun.artifact", "noun.person", "noun.animal"}


def _is_base_form(word: str) -> bool:
    """True for a present-tense verb without the 3rd-person -s ("arrest", not "arrests")."""
    from lemminflect import getInflection

    from foilforge.foilers.lang.wordnet_constraints import verb_lemma

    lemma = verb_lemma(word)
    return word == lemma and word not in getInflection(lemma, tag="VBZ")


def _bare_means_mass(text: str) -> bool:
    if singular_of_plural(text.split()[-1]):
        return False
    return _first_sense_lexname(text) not in COUNTABLE_LEXNAMES

@dataclass(frozen=True)
class CaptionParts:
    verb: str  # lemma
    preposition: str | None
    agent: Noun
    patient: Noun


def parse_caption(caption: str, agent: str, patient: str) -> CaptionParts | None:
    """Verb and preposition of a caption "<det> AGENT VERB [prep] [det] PATIENT ..." (VALSE actions).

    The agent is the first mention at the start, the verb the next word, the
    preposition the words up to the patient minus determiners. A noun written
    without a determiner while singular is taken as a mass noun ("carves
    wood"), unless WordNet files it with countable things (the release
    has "disembark from ship"). None when the caption does not have this shape.
    """
    from foilforge.foilers.lang.wordnet_constraints import verb_lemma

    words = caption.rstrip(" .!").split()
    lowered = [w.lower() for w in words]
    agent_words, patient_words = agent.lower().split(), patient.lower().split()
    start = 1 if lowered and lowered[0] in DETERMINERS else 0
    if lowered[start:start + len(agent_words)] != agent_words:
        return None
    verb_at = start + len(agent_words)
    for p in range(verb_at + 1, len(lowered) - len(patient_words) + 1):
        if lowered[p:p + len(patient_words)] == patient_words:
            between = lowered[verb_at + 1:p]
            preposition = " ".join(w for w in between if w not in DETERMINERS) or None
            patient_bare = not between or between[-1] not in DETERMINERS
            agent_noun = make_noun(agent, mass=None if start else _bare_means_mass(agent))
            # the caption's own agreement shows a collective plural ("The police arrest ...")
            if not agent_noun.plural and _is_base_form(lowered[verb_at]):
                agent_noun = Noun(text=agent_noun.text, plural=True, mass=False)
            patient_noun = make_noun(patient, mass=None if not patient_bare else _bare_means_mass(patient))
            return CaptionParts(verb=verb_lemma(lowered[verb_at]), preposition=preposition, agent=agent_noun, patient=patient_noun)
    return None


# ----------------------------------------------------------------------------- input records

@dataclass(frozen=True)
class Action:
    """Who does what to whom, whatever the input form; `caption` is set when the input gave one."""

    verb: str
    agent: Noun
    patient: Noun | None
    preposition: str | None
    caption: str | None = None
    agent_id: str | None = None
    patient_id: str | None = None


def check_action_sample(sample: dict, path: str, record) -> None:
    """Check the fields of whichever input form the sample uses."""
    from foilforge.errors import InputError
    from foilforge.io import require

    if "frames" in sample:
        frames = require(sample, "frames", list, path, record)
        if not frames or not all(isinstance(f, dict) for f in frames):
            raise InputError(path, "expected a non-empty list of role -> noun id objects", record=record, field="frames")
        require(sample, "verb", str, path, record)
        nouns = require(sample, "nouns", dict, path, record)
        for frame in frames:
            for role, noun_id in frame.items():
                if noun_id and noun_id not in nouns:
                    raise InputError(path, f"noun id {noun_id!r} (role {role!r}) has no gloss in 'nouns'", record=record, field="nouns")
    elif "caption" in sample:
        for field in ("caption", "agent", "patient"):
            require(sample, field, str, path, record)
    else:
        for field in ("verb", "agent", "patient"):
            require(sample, field, str, path, record)
        if sample.get("preposition") is not None:
            require(sample, "preposition", str, path, record)


def action_from_sample(sample: dict) -> Action | None:
    """The Action of an ingested SWiG sample, a (verb, agent, patient) record or a (caption, agent, patient) record.

    None when the sample has nothing to realise (no agent filled, or a
    caption that does not read "<agent> <verb> ... <patient>").
    """
    if "frames" in sample:
        nouns = sample["nouns"]
        parts = frame_parts(sample["verb"], sample["frames"], sample.get("verb_abstract"), sample.get("verb_order") or [])
        if parts is None:
            return None
        agent = make_noun(gloss_of(nouns, parts.subject_id), parts.subject_id)
        patient = make_noun(gloss_of(nouns, parts.object_id), parts.object_id) if parts.object_id else None
        return Action(verb=parts.verb, agent=agent, patient=patient, preposition=parts.preposition,
                      agent_id=parts.subject_id, patient_id=parts.object_id)
    if "caption" in sample:
        parsed = parse_caption(sample["caption"], sample["agent"], sample["patient"])
        if parsed is None:
            return None
        return Action(verb=parsed.verb, agent=parsed.agent, patient=parsed.patient, preposition=parsed.preposition,
                      caption=sample["caption"])
    from foilforge.foilers.lang.wordnet_constraints import verb_lemma

    return Action(verb=verb_lemma(sample["verb"]), agent=make_noun(sample["agent"]), patient=make_noun(sample["patient"]),
                  preposition=sample.get("preposition") or None)


def phrase_span(text: str, noun: Noun, start: int = 0) -> tuple[int, int] | None:
    """Span of the noun phrase ("a man", "people", "his torso") of `noun` in `text`, searching from `start`."""
    determiners = "|".join(sorted(DETERMINERS))
    match = re.compile(rf"(?:\b(?:{determiners})\s+)?\b{re.escape(noun.text)}\b", re.IGNORECASE).search(text, start)
    return (match.start(), match.end()) if match else None
