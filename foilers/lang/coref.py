"""In-caption coreference for the plurality foiler: which pronouns change number with an NP.

Two resolvers share one interface, `links(doc) -> {antecedent head index: [mention indices]}`:

* `CorefereeResolver` wraps coreferee (the documented choice). Its English
  model is installed with `python -m coreferee install en`, which needs GitHub,
  and it accepts only pipelines whose meta name is core_web_sm/md/lg/trf.
* `RuleBasedResolver` works everywhere: a third-person pronoun links to the
  preceding noun that agrees with it in number and gender/animacy, preferring
  subjects and the noun the pronoun's clause hangs from ("a man holding his
  umbrella"), and never the noun whose own prepositional phrase holds the
  pronoun ("a cake on it" is not the cake).

Relative pronouns ("a man who is ...") are linked by syntax (spaCy's `relcl`)
for both resolvers; they keep their form, but the verb of the relative clause
must agree with the antecedent.

`make_resolver(choice, spacy_model)`: choice "auto" uses coreferee when it
loads and falls back to the rules otherwise (the reason is kept in
`fallback_reason` for the manifest); "coreferee" requires it; "rules" never tries.
"""

from __future__ import annotations

from foilforge.errors import ConfigError
from foilforge.foilers.lang.number import PLURALIA_TANTUM, noun_gender, pronoun_gender, pronoun_number

RESOLVER_CHOICES = ("auto", "coreferee", "rules")
RELATIVE_PRONOUNS = frozenset(("who", "that", "which", "whom"))
SUBJECT_DEPS = ("nsubj", "nsubjpass")


def noun_number(token) -> str:
    if token.lower_ in PLURALIA_TANTUM or token.tag_ in ("NNS", "NNPS"):
        return "pl"
    return "sg"


def is_noun(token) -> bool:
    return token.tag_ in ("NN", "NNS", "NNP", "NNPS") and token.dep_ != "compound"


def relative_pronoun_links(doc) -> dict[int, list[int]]:
    """Relative pronouns and their antecedents: "a man [who] is holding" -> {man: [who]}."""
    links: dict[int, list[int]] = {}
    for token in doc:
        if token.lower_ not in RELATIVE_PRONOUNS or token.tag_ not in ("WDT", "WP"):
            continue
        verb = token.head
        if verb.dep_ == "relcl" and is_noun(verb.head) and token.i > verb.head.i:
            links.setdefault(verb.head.i, []).append(token.i)
    return links


class RuleBasedResolver:
    name = "rules.v1"
    fallback_reason = None

    def pipeline(self, nlp):
        return nlp

    def links(self, doc) -> dict[int, list[int]]:
        links = relative_pronoun_links(doc)
        for token in doc:
            if token.tag_ not in ("PRP", "PRP$") or pronoun_number(token.lower_) is None:
                continue
            antecedent = self.antecedent(token)
            if antecedent is not None:
                links.setdefault(antecedent.i, []).append(token.i)
        return {head: sorted(mentions) for head, mentions in links.items()}

    def antecedent(self, pronoun):
        """The noun token the pronoun refers to, or None (no agreeing noun, or a coordination)."""
        candidates = [n for n in pronoun.doc[:pronoun.i] if is_noun(n) and self.agrees(n, pronoun)
                      and not self.excluded(n, pronoun)]
        if not candidates:
            return None
        ancestors = set(t.i for t in pronoun.ancestors)

        from foilforge.foilers.lang.number import pronoun_case

        object_pronoun = pronoun_case(pronoun) == "obj"

        def preference(noun):
            subjectish = noun.dep_ in SUBJECT_DEPS or (noun.dep_ == "ROOT")
            if object_pronoun:  # "a cat on a table with a cake on it": the nearest place, not the subject
                return (noun.i in ancestors, noun.i)
            return (subjectish, noun.i in ancestors, noun.i)

        best = max(candidates, key=preference)
        return best

    @staticmethod
    def agrees(noun, pronoun) -> bool:
        number = pronoun_number(pronoun.lower_)
        coordinated = any(c.dep_ == "conj" for c in noun.children) or noun.dep_ == "conj"
        if number == "pl":
            # a plural pronoun after "a man and a woman" refers to both: not to one NP we could change
            return noun_number(noun) == "pl" and not coordinated
        if noun_number(noun) != "sg" or coordinated and noun.dep_ == "conj":
            return False
        gender = noun_gender(noun.text, noun.lemma_)
        wanted = pronoun_gender(pronoun.lower_)
        if wanted == "thing":
            return gender == "thing"
        return gender in (wanted, "person")

    @staticmethod
    def excluded(noun, pronoun) -> bool:
        """A non-possessive pronoun inside a PP that modifies the noun cannot be that noun
        ("a table with a cake on it": it = table, not cake)."""
        if pronoun.tag_ == "PRP$" or pronoun.lower_.endswith("self"):
            return False
        prep = pronoun.head
        return prep.dep_ == "prep" and prep.head.i == noun.i


class CorefereeResolver:
    name = "coreferee"
    fallback_reason = None

    def __init__(self, spacy_model: str):
        import coreferee  # noqa: F401  (registers the "coreferee" factory)
        import spacy

        from foilforge.nlp import with_verb_lemma_exceptions

        self._nlp = with_verb_lemma_exceptions(spacy.load(spacy_model))
        self._nlp.add_pipe("coreferee")

    def pipeline(self, nlp):
        return self._nlp

    def links(self, doc) -> dict[int, list[int]]:
        links = relative_pronoun_links(doc)
        for chain in doc._.coref_chains:
            mentions = [list(m.token_indexes) for m in chain]
            nouns = [m[0] for m in mentions if len(m) == 1 and is_noun(doc[m[0]])]
            pronouns = [m[0] for m in mentions if len(m) == 1 and doc[m[0]].tag_ in ("PRP", "PRP$")
                        and pronoun_number(doc[m[0]].lower_)]
            if nouns and pronouns:
                head = nouns[0]
                links.setdefault(head, []).extend(i for i in pronouns if i > head)
        return {head: sorted(set(mentions)) for head, mentions in links.items() if mentions}


def make_resolver(choice: str = "auto", spacy_model: str = "en_core_web_sm", param_key: str = "coref"):
    if choice not in RESOLVER_CHOICES:
        raise ConfigError(f"{param_key} must be one of {', '.join(RESOLVER_CHOICES)}, got {choice!r}")
    if choice == "rules":
        return RuleBasedResolver()
    try:
        return CorefereeResolver(spacy_model)
    except Exception as err:  # ImportError, missing English model, pipeline name refused: all mean "not here"
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        if choice == "coreferee":
            raise ConfigError(
                f"{param_key} is 'coreferee' but it cannot run with spaCy pipeline {spacy_model!r} ({reason}); "
                f"install coreferee and its English model (`python -m coreferee install en`, needs a core_web_sm/md/lg/trf "
                f"pipeline), or set {param_key} to 'auto' or 'rules'"
            ) from err
        resolver = RuleBasedResolver()
        resolver.fallback_reason = reason
        return resolver
