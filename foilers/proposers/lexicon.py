"""The lexicon proposer: deterministic, offline, no instruction-tuned model.

For each site the foiler chose (foilforge/proposers.py `EditSite`) it lists the words that can stand there and
ranks them in the caption's context with a span ranker (foilforge/span_ranking.py, as the relations foiler ranks
preposition spans; `ranker: null` ranks by the words' counts in the run's captions instead):

* replace_obj: the other COCO categories of the noun's supercategory (foilers/lang/coco_categories.py) when the
  noun names a COCO category, and its WordNet co-hyponyms (the nouns under its first two senses' hypernyms, up to
  `depth` levels up, the same number of levels down) that the run's captions use at least `min_count` times;
* replace_att: the words its attribute class says contradict it (foilers/lang/attribute_classes.yaml: another
  colour, another material; an antonym for size, age, state) and its WordNet antonyms the captions use;
* replace_rel: for a verb, its WordNet co-hyponyms and antonyms the captions use (in the verb's own form,
  lemminflect); for a preposition, the spatial preposition phrases the run's captions use (as relations attests
  them), but its own row of spatial synonyms;
* add_obj: the nouns the run's captions name on images that also show the phrase's noun (what appears beside a
  dog), else the COCO categories; the phrase becomes "<phrase> and a <noun>";
* add_att: the attribute-class adjectives the run's captions give the phrase's noun, else the colours; the
  adjective goes before the noun (or its compound), the article follows it ("a dog" -> "an old dog");
* swap_obj, swap_att: the foiler's own rule-based wording of the exchange (`EditSite.draft`).

Every candidate the image's captions state (`EditSite.avoid`), or that WordNet relates to the replaced word as
synonym, hypernym or hyponym, is left out before ranking. At most `max_fills` candidates a site are ranked (the
most frequent in the run's captions first) and the `top_k` best proposed.
"""

from __future__ import annotations

import functools

from foilforge.foilers.lang.number import PART_NOUNS, QUANTITY_NOUNS
from foilforge.proposers import PROPOSERS, EditSite, Proposal, Proposer, ProposerContext, Refusal
from foilforge.schema import PositiveInt

#: slots per span-ranker call (bounded memory; foilers/relations.py SCORE_CHUNK)
SCORE_CHUNK = 256
NO_CANDIDATE = "lexicon: no candidate word"


@PROPOSERS.register("lexicon.v1")
class LexiconProposer(Proposer):
    summary = "lexicon: WordNet co-hyponyms and antonyms, attribute classes, COCO categories, ranked in context"

    def __init__(self, ranker: dict | None = None, top_k: PositiveInt = 3, max_fills: PositiveInt = 20,
                 min_count: PositiveInt = 1, depth: PositiveInt = 2):
        self.ranker = ranker
        self.top_k = top_k
        self.max_fills = max_fills
        self.min_count = min_count
        self.depth = depth

    def check(self) -> None:
        if self.ranker is not None:
            from foilforge.models import model_block
            from foilforge.span_ranking import KINDS, PRUNING_KEYS, check_pruning

            _, _, pruning = model_block(self.ranker, "ranker", KINDS, extra_keys=PRUNING_KEYS)
            check_pruning("ranker", **pruning)

    def use_ranker(self, ranker) -> "LexiconProposer":
        """Plug in a built span ranker (anything with .score(items)) instead of the params block."""
        self._ranker = ranker
        return self

    def _get_ranker(self, param_key: str):
        # a loaded model is a tool cached across runs; nothing of a run is kept
        if getattr(self, "_ranker", None) is None and self.ranker is not None:
            from foilforge.span_ranking import build_span_ranker

            self._ranker = build_span_ranker(self.ranker, param_key)
        return getattr(self, "_ranker", None)

    def describe(self) -> dict:
        """The proposer and what ranks its words (a model block's model, a plugged-in ranker, or corpus counts)."""
        ranker = getattr(self, "_ranker", None)
        if self.ranker is not None and (ranker is None or hasattr(ranker, "spec")):
            ranked_by = str(self.ranker.get("name_or_path") if isinstance(self.ranker, dict) else self.ranker)
        else:
            ranked_by = type(ranker).__name__ if ranker is not None else "corpus counts"
        return {"proposer": self.registry_name, "ranked_by": ranked_by,
                "settings": f"top_k={self.top_k}, max_fills={self.max_fills}, min_count={self.min_count}, "
                            f"depth={self.depth}"}

    # ---- proposals

    def propose(self, sites: list[EditSite], context: ProposerContext,
                param_key: str = "proposer.args.ranker") -> list[list[Proposal | Refusal]]:
        out: list[list[Proposal | Refusal]] = [[] for _ in sites]
        slots = []  # (site index, fills)
        for index, site in enumerate(sites):
            if site.type in ("swap_obj", "swap_att"):
                if site.draft is None:
                    out[index] = [Refusal(site, NO_CANDIDATE)]
                else:
                    out[index] = [Proposal(site, site.old, site.second_old, site.draft)]
                continue
            words = self.candidates(site, context)
            fills = list(dict.fromkeys(f for f in (self.render(site, w) for w in words) if f and f != site.old))
            if not fills:
                out[index] = [Refusal(site, NO_CANDIDATE)]
                continue
            slots.append((index, fills))
        context.stats["slots"] = context.stats.get("slots", 0) + len(slots)
        context.stats["fills"] = context.stats.get("fills", 0) + sum(len(f) for _, f in slots)
        ranker = self._get_ranker(param_key)
        for begin in range(0, len(slots), SCORE_CHUNK):
            part = slots[begin:begin + SCORE_CHUNK]
            if ranker is None:  # corpus counts: the candidates' own order (most frequent first)
                scores = [[-float(rank) for rank in range(len(fills))] for _, fills in part]
            else:
                scores = ranker.score([(sites[i].left, sites[i].right, fills) for i, fills in part])
            for (index, fills), values in zip(part, scores):
                site = sites[index]
                ranked = sorted(((f, s) for f, s in zip(fills, values) if s != float("-inf")),
                                key=lambda pair: (-pair[1], pair[0]))[: self.top_k]
                out[index] = [Proposal(site, site.old, fill, site.left + fill + site.right, float(score))
                              for fill, score in ranked] or [Refusal(site, NO_CANDIDATE)]
        return out

    def candidates(self, site: EditSite, context: ProposerContext) -> list[str]:
        """The words that may stand at the site, most frequent in the run's captions first, at most `max_fills`."""
        words = {"replace_obj": self._nouns, "replace_att": self._adjectives, "replace_rel": self._relations,
                 "add_obj": self._added_nouns, "add_att": self._added_adjectives}[site.type](site, context)
        words = [w for w in dict.fromkeys(words) if w and w.lower() not in site.avoid and w.lower() != site.word]
        return words[: self.max_fills]

    def _count(self, context: ProposerContext, pos: str, word: str) -> int:
        return int((context.vocabulary.get(pos) or {}).get(word, 0))

    def _by_count(self, words, context: ProposerContext, pos: str, attested_only: bool) -> list[str]:
        counted = [(self._count(context, pos, w), w) for w in set(words)]
        if attested_only:
            counted = [(n, w) for n, w in counted if n >= self.min_count]
        return [w for _, w in sorted(counted, key=lambda pair: (-pair[0], pair[1]))]

    def _nouns(self, site: EditSite, context: ProposerContext) -> list[str]:
        from foilforge.foilers.lang.exact_edits import lexical_relation

        coco = coco_siblings(site.word)
        # WordNet's co-hyponyms follow every sense: "people" reaches "events", "fruit" (a consequence) "heads", a
        # "map" (a representation) "image". COCO's categories are objects by construction; WordNet's must be one
        wordnet = [w for w in cohyponyms(site.word, "n", self.depth) if concrete_noun(w) and w not in PART_NOUNS
                   and w not in QUANTITY_NOUNS]
        wordnet = self._by_count(wordnet, context, "noun", attested_only=True)
        words = [w for w in [*self._by_count(coco, context, "noun", False), *wordnet] if w != site.word]
        return [w for w in words if lexical_relation(site.word, w, "noun") is None]

    def _adjectives(self, site: EditSite, context: ProposerContext) -> list[str]:
        from foilforge.foilers.lang.attributes import contradicting

        listed = self._by_count(contradicting(site.word), context, "adjective", attested_only=False)
        antonyms = self._by_count(wordnet_antonyms(site.word, "a"), context, "adjective", attested_only=True)
        return [*listed, *antonyms]

    def _relations(self, site: EditSite, context: ProposerContext) -> list[str]:
        from foilforge.edits import pair_refusal
        from foilforge.foilers.lang.exact_edits import lexical_relation

        if site.pos == "preposition":
            spans = self._by_count(context.vocabulary.get("preposition") or {}, context, "preposition", True)
            # not a spatial paraphrase of the caption's relation (the entailment check, judged in the caption)
            return [s for s in spans if pair_refusal(site.caption, site.left + s + site.right, "relation") is None]
        verbs = [*wordnet_antonyms(site.word, "v"), *cohyponyms(site.word, "v", self.depth)]
        verbs = self._by_count(verbs, context, "verb", attested_only=True)
        return [v for v in verbs if lexical_relation(site.word, v, "verb") is None]

    def _added_nouns(self, site: EditSite, context: ProposerContext) -> list[str]:
        from foilforge.foilers.lang.exact_edits import lexical_relation

        beside = context.cooccurring.get(site.word) or {}
        words = [w for w, _ in sorted(beside.items(), key=lambda pair: (-pair[1], pair[0]))
                 if self._count(context, "noun", w) >= self.min_count and physical_noun(w)]
        words += self._by_count(coco_words(), context, "noun", attested_only=False)
        avoid = sorted(w for w in site.avoid if " " not in w)
        return [w for w in dict.fromkeys(words) if w != site.word and w not in site.avoid
                and not any(lexical_relation(a, w, "noun") for a in avoid if physical_noun(a))]

    def _added_adjectives(self, site: EditSite, context: ProposerContext) -> list[str]:
        from foilforge.foilers.lang.attributes import class_of, load_classes

        seen = context.modifiers.get(site.word) or {}
        words = [w for w, _ in sorted(seen.items(), key=lambda pair: (-pair[1], pair[0]))]
        words += list(load_classes()["colour"].words)
        return [w for w in words if class_of(w) is not None and class_of(w).name not in site.exclude_classes]

    # ---- wording

    def render(self, site: EditSite, word: str) -> str | None:
        """The text that replaces `site.old` for one candidate word (number, verb form and articles fitted)."""
        from foilforge.foilers.lang.inflection import indefinite_article, match_case

        if site.type == "replace_obj":
            article, rest = split_article(site.old)
            new = plural(word) if site.tag in ("NNS", "NNPS") else word
            new = match_case(rest, new) if rest else new
            if article:
                new = match_case(article, indefinite_article(new)) + " " + new
            return new
        if site.type == "replace_att":
            article, rest = split_article(site.old)
            new = match_case(rest or site.old, word)
            return match_case(article, indefinite_article(word)) + " " + new if article else new
        if site.type == "replace_rel":
            if site.pos == "verb":
                from lemminflect import getInflection

                forms = getInflection(word, tag=site.tag) if site.tag else ()
                return match_case(site.old, forms[0] if forms else word)
            return match_case(site.old, word)
        if site.type == "add_obj":
            return f"{site.old} and {indefinite_article(word)} {word}"
        if site.type == "add_att":
            offset = site.insert_at - site.span[0]
            before, after = site.old[:offset], site.old[offset:]
            if before.strip().lower() in ("a", "an"):  # the article right before the new word follows it
                return match_case(before.strip(), indefinite_article(word)) + " " + word + " " + after
            return before + word + " " + after
        return None


def split_article(text: str) -> tuple[str | None, str]:
    """("a" or "an" as written, the rest) when `text` starts with an indefinite article, else (None, text)."""
    head, _, rest = text.partition(" ")
    return (head, rest) if head.lower() in ("a", "an") and rest else (None, text)


@functools.lru_cache(maxsize=4096)
def plural(word: str) -> str:
    from foilforge.foilers.lang.coco_categories import plural_form

    return plural_form(word)


@functools.lru_cache(maxsize=1)
def coco_words() -> tuple[str, ...]:
    """The foil word of every COCO category (foilers/lang/coco_categories.py), in category order."""
    from foilforge.foilers.lang.coco_categories import COCO_CATEGORIES

    return tuple(row[3] for row in COCO_CATEGORIES if row[3] != "person")


@functools.lru_cache(maxsize=4096)
def coco_siblings(word: str) -> tuple[str, ...]:
    """The foil words of the other categories of the supercategory `word` names a category of (none: empty)."""
    from foilforge.foilers.lang.coco_categories import by_id, mention_forms

    entry = mention_forms().get(tuple(word.lower().split()))
    if entry is None:
        return ()
    categories = by_id()
    supercategory = categories[entry[0]][2]
    return tuple(row[3] for cid, row in categories.items() if row[2] == supercategory and cid != entry[0])


def _names(synset) -> list[str]:
    return [lemma.name().lower().replace("_", " ") for lemma in synset.lemmas()]


@functools.lru_cache(maxsize=16384)
def cohyponyms(word: str, pos: str, depth: int = 2, senses: int = 2) -> tuple[str, ...]:
    """WordNet co-hyponyms of `word`: the lemmas under each ancestor of its first `senses` senses, up to `depth`
    levels up and as many down (siblings, then cousins), single words only, sorted."""
    from foilforge.foilers.lang.exact_edits import _synsets

    out = set()
    for synset in _synsets(word, pos)[:senses]:
        level = [synset]
        for up in range(1, depth + 1):
            level = [h for s in level for h in s.hypernyms() + s.instance_hypernyms()]
            for ancestor in level:
                below = [ancestor]
                for _ in range(up):
                    below = [h for s in below for h in s.hyponyms() + s.instance_hyponyms()]
                    out.update(n for s in below for n in _names(s))
    return tuple(sorted(w for w in out if " " not in w and "-" not in w and w != word))


@functools.lru_cache(maxsize=16384)
def wordnet_antonyms(word: str, pos: str) -> tuple[str, ...]:
    """WordNet's direct antonyms of `word` (every sense), single words only."""
    from foilforge.foilers.lang.exact_edits import _synsets

    names = set()
    for synset in _synsets(word, pos):
        for lemma in synset.lemmas():
            if lemma.name().lower() == word.lower().replace(" ", "_"):
                names.update(a.name().lower() for a in lemma.antonyms())
    return tuple(sorted(n for n in names if "_" not in n))


#: WordNet lexicographer files of nouns that name things one can see in a picture
PHYSICAL_LEXNAMES = ("noun.animal", "noun.artifact", "noun.food", "noun.person", "noun.plant", "noun.object")


#: WordNet lexicographer files of nouns that name a concrete thing: a thing, a living being, a stuff, a place
CONCRETE_LEXNAMES = PHYSICAL_LEXNAMES + ("noun.body", "noun.location", "noun.substance")


@functools.lru_cache(maxsize=16384)
def concrete_noun(word: str) -> bool:
    """True when one of the first two WordNet senses of `word` is concrete (CONCRETE_LEXNAMES): a table (a tabular
    array first, furniture second) is, an event, a way or an image (a mental one first) is not."""
    from foilforge.foilers.lang.exact_edits import _synsets

    return any(synset.lexname() in CONCRETE_LEXNAMES for synset in _synsets(word, "n")[:2])


@functools.lru_cache(maxsize=16384)
def physical_noun(word: str) -> bool:
    """True when the first WordNet sense of `word` is a visible thing (an animal, artifact, food, person, plant)."""
    from foilforge.foilers.lang.exact_edits import _synsets

    synsets = _synsets(word, "n")
    return bool(synsets) and synsets[0].lexname() in PHYSICAL_LEXNAMES
