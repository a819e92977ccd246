"""Where a plural foil edits a caption: the noun phrase plan (head, quantifier span, coreferring mentions,
verbs to agree) and the edits themselves (after VALSE §3.2, App. A.2).

`NounPhraseEdits` is the half of plurals.v1 (foilers/plurals.py) that reads one spaCy parse: which noun
phrase can change number, what must change with it, and the caption/foil pair it gives. The foiler keeps
the run: candidates per caption, the skip rules' counts, the length and agreement guards, the choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foilforge.foilers.lang.coref import SUBJECT_DEPS
from foilforge.foilers.lang.inflection import NUMBER_WORDS
from foilforge.foilers.lang.number import (
    is_agreeing_verb,
    is_plurale_tantum,
    noun_gender,
    pluralize_noun,
    pluralize_pronoun,
    pronoun_number,
    singularize_noun,
    singularize_pronoun,
    verb_for_number,
)
from foilforge.foilers.lang.templates import changed_spans
from foilforge.records import Foil

SINGULAR_LEADERS = frozenset(("a", "an", "one", "single", "exactly", "this", "that"))
PLURAL_LEADERS = frozenset(("some", "several", "many", "numerous", "multiple", "various", "few", "these", "those"))
NEUTRAL_LEADERS = frozenset(("the",))
#: determiners whose meaning a number quantifier would destroy: skip the NP
UNSUPPORTED_LEADERS = frozenset(("no", "every", "each", "all", "both", "another", "either", "neither", "any", "half",
                                 "what", "which", "whose", "such", "enough", "more", "most", "less", "fewer",
                                 "lots", "plenty", "own"))
#: modifiers that pick out one referent or contrast referents: "the other hand", "the only tree"
CONTRASTIVE_MODIFIERS = frozenset(("other", "same", "different", "only", "first", "second", "third", "last", "next",
                                   "remaining", "opposite", "latter", "former", "single", "lone", "sole",
                                   "identical", "matching", "multiple", "several", "many", "numerous", "various",
                                   "own", "final"))
#: "a" that belongs to a plural quantifier ("a few", "a couple of", "a number of")
PLURAL_A_FOLLOWERS = frozenset(("few", "couple", "number", "lot", "dozen", "handful"))
#: pl2sg would contradict these words, not the image
PLURAL_CONTEXT = ("both", "each other", "one another", "together", "respectively", "each", "all")


@dataclass
class NounPhrasePlan:
    """One candidate NP and every edit its foil needs (token index -> new text; None deletes)."""

    method: str  # "sg2pl" or "pl2sg"
    head: int
    quantifier_start: int
    quantifier_end: int  # == start: insert the quantifier before token `start`
    foil_edits: dict = field(default_factory=dict)
    classes: str = ""
    classes_foil: str = ""


def numeral_value(token) -> int | None:
    word = token.lower_.replace(",", "")
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


class NounPhraseEdits:
    """Plan and render the number change of one noun phrase (mixed into PluralsFoiler)."""

    def fixed_expression_tokens(self, doc) -> set[int]:
        words = [t.lower_ for t in doc]
        covered = set()
        for expression in self.fixed_expressions:
            parts = expression.split()
            for i in range(len(words) - len(parts) + 1):
                if words[i:i + len(parts)] == parts:
                    covered.update(range(i, i + len(parts)))
        return covered

    def plan_for(self, doc, chunk, links, fixed):
        """(plan, None) for a foilable NP, or (None, skip rule)."""
        head = chunk.root
        if head.pos_ == "PRON" or head.tag_ in ("PRP", "PRP$", "WP", "WDT", "EX", "DT"):
            return None, "pronoun"
        if head.pos_ == "PROPN" or head.tag_ in ("NNP", "NNPS"):
            return None, "proper_noun"
        if head.tag_ not in ("NN", "NNS"):
            return None, "not_a_noun"
        if any(t.i in fixed for t in chunk):
            return None, "fixed_expression"
        lemma = head.lemma_.lower()
        word = head.lower_
        followed_by_of = head.i + 1 < len(doc) and doc[head.i + 1].lower_ == "of"
        if (lemma in self.part_nouns or word in self.part_nouns) and not any(c.dep_ == "compound" for c in head.children):
            return None, "part_noun"
        if (lemma in self.quantity_nouns or word in self.quantity_nouns) and followed_by_of:
            return None, "quantity_noun"
        if lemma in self.mass_nouns or word in self.mass_nouns:
            return None, "mass_noun"
        if any(is_plurale_tantum(t, self.pluralia_tantum) for t in chunk):
            return None, "pluralia_tantum"  # also "shorts bends", a plurale tantum the tagger glued to a verb
        if head.i + 1 < len(doc) and doc[head.i + 1].tag_ in ("NN", "NNS") and doc[head.i + 1].i >= chunk.end:
            return None, "split_compound"  # "a toilet lid" parsed as "toilet" + "lid": the real head is elsewhere
        quantifier, reason = self.quantifier_span(doc, chunk, fixed)
        if reason:
            return None, reason
        start, end, number = quantifier
        # in "a couple of people are", the quantity noun holds the subject relation for "people"
        syntactic = doc[chunk.start - 2] if start < chunk.start else head
        if self.shares_determiner(head):
            return None, "shared_determiner"
        if len(self.conjuncts(head)) > 1 and self.conjuncts(head)[0].dep_ in SUBJECT_DEPS:
            return None, "coordinated_subject"  # "a dog and exactly one cat are": number split over a coordination
        method = "sg2pl" if number == "sg" else "pl2sg"
        if method == "pl2sg" and self.has_plural_context(doc):
            return None, "plural_context"
        new_head = pluralize_noun(head.text) if method == "sg2pl" else singularize_noun(head.text, head.lemma_)
        if not new_head:
            return None, "no_inflection"
        new_number = "pl" if method == "sg2pl" else "sg"
        plan = NounPhrasePlan(method=method, head=head.i, quantifier_start=start, quantifier_end=end,
                              classes=head.lower_, classes_foil=new_head.lower())
        plan.foil_edits[head.i] = new_head
        self.agree_verbs(syntactic, new_number, plan.foil_edits)
        self.change_mentions(doc, head, links.get(head.i, ()), new_number, plan.foil_edits)
        return plan, None

    def quantifier_span(self, doc, chunk, fixed=frozenset()):
        """((start, end, number), None): the determiner/quantifier tokens to replace and the NP's
        number; or (None, skip rule)."""
        head = chunk.root
        pre = [t for t in chunk if t.i < head.i]
        if any(t.dep_ == "poss" or t.tag_ == "PRP$" for t in pre):
            return None, "possessive_determiner"
        if any(t.lower_ in UNSUPPORTED_LEADERS for t in pre):
            return None, "unsupported_determiner"
        # modifiers the chunker left out ("brown cloth covered seats") stay after the quantifier
        start = end = min(chunk.start, head.left_edge.i)
        evidence = set()
        for token in pre:
            word = token.lower_
            value = numeral_value(token) if self.is_numeral(token) else None
            if word in ("a", "an") and self.starts_plural_quantifier(doc, token.i):
                evidence.add("pl")
            elif word in SINGULAR_LEADERS:
                evidence.add("sg")
            elif word in PLURAL_LEADERS:
                evidence.add("pl")
            elif word in NEUTRAL_LEADERS:
                pass
            elif value is not None and token.dep_ == "nummod":
                evidence.add("sg" if value == 1 else "pl")
            else:
                break
            end = token.i + 1
        rest = [t for t in pre if t.i >= end]
        if any(t.lower_ in CONTRASTIVE_MODIFIERS or t.tag_ in ("JJS", "RBS") or self.is_numeral(t) for t in rest):
            return None, "contrastive_modifier"
        # "a couple of people", "lots of kites": the quantity expression is the quantifier
        if start == end and chunk.start >= 2 and doc[chunk.start - 1].lower_ == "of":
            quantity = doc[chunk.start - 2]
            if quantity.lower_ in self.quantity_nouns or quantity.lemma_.lower() in self.quantity_nouns:
                start = quantity.i - 1 if quantity.i >= 1 and doc[quantity.i - 1].lower_ in ("a", "an") else quantity.i
                evidence.add("pl")
        if any(t.lower_ == "one" for t in pre) and any(t.lower_ == "other" for t in doc[head.i:]):
            return None, "contrastive_modifier"  # "one hand ... the other hand"
        number = "pl" if head.tag_ == "NNS" else "sg"
        if evidence and evidence != {number}:
            return None, "number_mismatch"
        if start == end:
            if number == "sg" and not self.takes_shared_determiner(head):
                return None, "bare_singular"
            of = head.head
            if head.dep_ == "pobj" and of.lower_ == "of" and of.head.pos_ == "NOUN" and of.i not in fixed:
                return None, "bare_of_complement"  # "a bowl of oranges": contents, not objects to count
        return (start, end, number), None

    @staticmethod
    def starts_plural_quantifier(doc, index: int) -> bool:
        """"a few", "a couple of", "a number of" (but "a couple" alone is two people: singular)."""
        nxt = doc[index + 1].lower_ if index + 1 < len(doc) else ""
        after = doc[index + 2].lower_ if index + 2 < len(doc) else ""
        return nxt == "few" or (nxt in PLURAL_A_FOLLOWERS and after == "of")

    @staticmethod
    def is_numeral(token) -> bool:
        """A cardinal that counts the noun ("two dogs"), not part of a hyphenated modifier ("ten-speed")."""
        if token.tag_ != "CD" and token.lower_ not in NUMBER_WORDS:
            return False
        nxt = token.nbor(1) if token.i + 1 < len(token.doc) else None
        return not (nxt is not None and nxt.text == "-") and numeral_value(token) is not None

    def takes_shared_determiner(self, head) -> bool:
        """"a white curtain and pink tile wall": the bare second conjunct shares "a", so it is a count
        noun and may take its own quantifier."""
        conjuncts = self.conjuncts(head)
        first = conjuncts[0]
        return head.dep_ == "conj" and first is not head and any(c.dep_ in ("det", "nummod") for c in first.children)

    @staticmethod
    def conjuncts(head) -> list:
        """All nouns of the coordination `head` belongs to (itself included)."""
        root = head
        while root.dep_ == "conj" and root.head.tag_ in ("NN", "NNS", "NNP", "NNPS"):
            root = root.head
        found = [root]
        stack = [root]
        while stack:
            node = stack.pop()
            for child in node.children:
                if child.dep_ == "conj" and child.tag_ in ("NN", "NNS", "NNP", "NNPS"):
                    found.append(child)
                    stack.append(child)
        return found

    def shares_determiner(self, head) -> bool:
        """"a man and woman", "eggs, corn and toast": a quantifier on the first conjunct would also
        scope over the bare singular ones after it ("some men and woman")."""
        conjuncts = self.conjuncts(head)
        if len(conjuncts) == 1 or conjuncts[0] is not head:
            return False
        return any(noun.tag_ in ("NN", "NNS") and not any(c.dep_ in ("det", "nummod", "poss") for c in noun.children)
                   for noun in conjuncts[1:])

    @staticmethod
    def has_plural_context(doc) -> bool:
        words = " " + " ".join(t.lower_ for t in doc) + " "
        return any(f" {w} " in words for w in PLURAL_CONTEXT)

    # ---- agreement and coreference ----

    def agree_verbs(self, subject, number: str, edits: dict) -> None:
        """Make the finite verb(s) whose subject is `subject` agree with `number`."""
        if len(self.conjuncts(subject)) > 1 and subject.dep_ != "poss":
            return  # "a man and some dogs are": the coordination, not the NP, decides
        verb = subject.head
        if subject.dep_ in SUBJECT_DEPS:
            verbs = [verb] + [c for c in verb.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")
                              and not any(g.dep_ in SUBJECT_DEPS for g in c.children)]
            for v in verbs:
                self._agree_one(v, number, edits)
        elif subject.dep_ == "attr" and verb.lemma_ == "be" and any(c.dep_ == "expl" for c in verb.children):
            self._agree_one(verb, number, edits)  # "there is a dog" -> "there are some dogs"

    @staticmethod
    def _agree_one(verb, number: str, edits: dict) -> None:
        auxiliaries = [c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i]
        finite = [a for a in auxiliaries if is_agreeing_verb(a) or a.tag_ == "MD"]
        target = finite[0] if finite else (verb if is_agreeing_verb(verb) else None)
        if target is not None and target.tag_ != "MD":
            new = verb_for_number(target, number)
            if new != target.text:
                edits[target.i] = new

    def change_mentions(self, doc, head, mentions, number: str, edits: dict) -> None:
        """Coreferring pronouns take the new number; possessed nouns and verbs follow."""
        gender = None
        for index in mentions:
            mention = doc[index]
            if pronoun_number(mention.lower_) is None:  # relative pronoun: only its clause's verb changes
                if mention.dep_ in SUBJECT_DEPS:
                    self._agree_one(mention.head, number, edits)
                continue
            if number == "sg" and gender is None:
                gender = noun_gender(head.text, head.lemma_)  # only now: WordNet takes seconds to load
            new = pluralize_pronoun(mention) if number == "pl" else singularize_pronoun(mention, gender)
            if new == mention.text:
                continue  # singular "they" for a person of unknown gender: nothing else changes
            edits[mention.i] = new
            if mention.dep_ in SUBJECT_DEPS:
                self._agree_one(mention.head, number, edits)
            if mention.tag_ == "PRP$" and mention.dep_ == "poss":
                self.change_possessed(mention.head, number, edits)

    def change_possessed(self, noun, number: str, edits: dict) -> None:
        """"a man holding his umbrella" -> "some men holding their umbrellas" (one each);
        plural possessions of one owner stay plural when they come in pairs ("his hands")."""
        if noun.tag_ not in ("NN", "NNS") or len(self.conjuncts(noun)) > 1:
            return
        lemma = noun.lemma_.lower()
        if lemma in self.mass_nouns or lemma in self.part_nouns or is_plurale_tantum(noun, self.pluralia_tantum):
            return
        if number == "pl" and noun.tag_ == "NN":
            edits[noun.i] = pluralize_noun(noun.text)
        elif number == "sg" and noun.tag_ == "NNS" and noun.lower_ not in self.paired_nouns:
            singular = singularize_noun(noun.text, noun.lemma_)
            if not singular:
                return
            edits[noun.i] = singular
        else:
            return
        if noun.dep_ in SUBJECT_DEPS:
            self.agree_verbs(noun, number, edits)

    # ---- rendering ----

    def render(self, doc, plan: NounPhrasePlan, q_sg: str, q_pl: str, orig_caption: str) -> Foil:
        q_caption, q_foil = (q_sg, q_pl) if plan.method == "sg2pl" else (q_pl, q_sg)
        caption, _ = self._render(doc, plan, q_caption, {})
        foil, _ = self._render(doc, plan, q_foil, plan.foil_edits)
        # the span covers every change, the NP and the mentions and verbs that agree with it ("his" -> "their")
        caption_span, foil_span = changed_spans(caption, foil)
        return Foil(caption=caption, foil=foil, classes=plan.classes, classes_foil=plan.classes_foil,
                    caption_span=caption_span, foil_span=foil_span,
                    extras={"orig_caption": orig_caption, "foil_method": plan.method,
                            "quantifiers": {"caption": q_caption, "foil": q_foil}})

    @staticmethod
    def _render(doc, plan: NounPhrasePlan, quantifier: str, edits: dict):
        pieces = []
        span_start = span_end = None
        length = 0
        for token in doc:
            i = token.i
            text = edits.get(i, token.text)
            if i == plan.quantifier_start:
                span_start = length
                if plan.quantifier_end == plan.quantifier_start:
                    pieces.append(quantifier + " ")
                    length += len(quantifier) + 1
                    if i == 0 and token.tag_ not in ("NNP", "NNPS") and text != "I":
                        text = text[:1].lower() + text[1:]  # "Cows graze" -> "Some cows graze"
                else:
                    text = quantifier
            elif plan.quantifier_start < i < plan.quantifier_end:
                continue  # the rest of the old determiner/quantifier goes
            piece = text + token.whitespace_
            pieces.append(piece)
            length += len(piece)
            if i == plan.head:
                span_end = length - len(token.whitespace_)
        out = "".join(pieces).strip()
        out = out[:1].upper() + out[1:]
        return out, (span_start, span_end)

