"""The proposer contract: the foiler chooses where and what kind of edit, a proposer words it.

SugarCrepe's seven edit types (Hsieh et al., NeurIPS 2023) are built as foilforge instruments under its
names (`replace_obj`, `replace_att`, `replace_rel`, `swap_obj`, `swap_att`, `add_obj`, `add_att`). For each
caption the foiler picks, from the caption's parse, *where* an edit goes and *what kind* it is: an
`EditSite` (which noun, adjective, relation word or phrase; which noun phrase an object or attribute can join;
which two phrases or adjectives exchange places). A **proposer** supplies the new words and the foil's wording,
as `Proposal`s `{old, new, foil}`, or refuses (`Refusal`, with its reason: an abstaining model, an answer that
is not the JSON asked for). Every proposal then goes through the same exact-edit checks
(foilers/lang/exact_edits.py) whichever proposer made it.

A proposer is a plug-in (registry `PROPOSERS`, one module per proposer under foilers/proposers/), configured in
an instrument's args as `proposer: {name: <proposer>, args: {...}}`:

* `lexicon`: deterministic and offline: WordNet co-hyponyms and antonyms, attribute classes, COCO categories,
  ranked in context by a span ranker (foilforge/span_ranking.py);
* `instruct_llm`: any instruction-tuned chat model by hub id or local path, prompted with the type's prompt file.

The edit a record carries (`provenance.edit`) is `{type, span, old, new}`: `span` the characters of the caption
the edit rewrites, `old` their text (`caption[span]`), `new` what stands there in the foil; a swap's span runs from
the first exchanged phrase to the second, an addition's is the phrase the added words join.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foilforge.errors import ConfigError
from foilforge.registry import Registry

#: SugarCrepe's seven types, in its paper's order
SUGAR_TYPES = ("replace_obj", "replace_att", "replace_rel", "swap_obj", "swap_att", "add_obj", "add_att")

#: every module of foilers/proposers/ is a proposer plug-in; other packages register through the entry-point group
PROPOSERS = Registry("proposer", packages=("foilforge.foilers.proposers",), entry_points="foilforge.proposers")

DEFAULT_PROPOSER = "lexicon"


@dataclass(frozen=True)
class EditSite:
    """Where one edit goes and what kind it is, as the foiler read it off the caption's parse.

    `caption[span[0]:span[1]] == old`. For a replacement `old` is the word or phrase replaced (a preceding
    indefinite article included, so "a dog" -> "an owl" stays grammatical), `word` its head lemma; for an
    addition `old` is the phrase the added words join and `word` its head noun; for a swap `old` and `second_old`
    are the two phrases (or adjectives), `second_span` the second one's characters, and `draft` the rule-based
    wording of the exchange (verb agreement and articles fixed: foilers/lang/swap.py).
    """

    type: str
    caption: str
    span: tuple[int, int]
    old: str
    #: the sample this edit is for, then the site's index ("coco:123/0"): seeds and messages
    key: str
    word: str = ""
    #: "noun", "adjective", "verb", "preposition"
    pos: str = ""
    #: Penn tag of `word` in the caption (NNS: plural; VBG: a participle), so the new word takes its form
    tag: str = ""
    #: replace_att / add_att: the attribute class of the adjective (colour, material, ...)
    attribute_class: str | None = None
    second_span: tuple[int, int] | None = None
    second_old: str = ""
    draft: str | None = None
    #: add_att: where in the caption the adjective goes (before the noun, or its compound); add_obj: None
    insert_at: int | None = None
    #: add_att: the attribute classes the noun phrase already has an adjective of (none of them is added)
    exclude_classes: frozenset = frozenset()
    #: lemmas the new words must not be: what the captions of the image state (a foil must be false of it)
    avoid: frozenset = frozenset()
    #: what the foiler keeps about the site for its records (a swap's two nouns), not read by proposers
    details: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.type not in SUGAR_TYPES:
            raise ValueError(f"edit type must be one of {', '.join(SUGAR_TYPES)}, got {self.type!r}")
        if self.caption[self.span[0]:self.span[1]] != self.old:
            raise ValueError(f"{self.key}: caption[{self.span[0]}:{self.span[1]}] is "
                             f"{self.caption[self.span[0]:self.span[1]]!r}, not {self.old!r}")

    @property
    def left(self) -> str:
        return self.caption[: self.span[0]]

    @property
    def right(self) -> str:
        return self.caption[self.span[1]:]


@dataclass(frozen=True)
class Proposal:
    """A proposer's answer for one site: `old` -> `new` at the site, and the whole foil."""

    site: EditSite
    old: str
    new: str
    foil: str
    #: the proposer's preference (a log-probability for the lexicon's span ranker), None when it has none
    score: float | None = None
    #: the model's text the proposal was parsed from (instruct_llm), for the record's provenance
    raw: str | None = None


@dataclass(frozen=True)
class Refusal:
    """No proposal for the site, and why (a short stable reason, counted in the foil metrics)."""

    site: EditSite
    reason: str
    raw: str | None = None


@dataclass
class ProposerContext:
    """What a proposer may know of the run: the seed (per-site seeds derive from it and the site's key), the
    corpus the foiler read (`vocabulary`: {pos: {lemma: count}}; `cooccurring`: {noun: {noun: images}};
    `modifiers`: {noun: {adjective: distinct captions}}), and `stats`, where it counts what it did."""

    seed: int = 0
    vocabulary: dict = field(default_factory=dict)
    cooccurring: dict = field(default_factory=dict)
    modifiers: dict = field(default_factory=dict)
    #: the foiler's spaCy pipeline (instruct_llm checks its prompts' examples with it)
    nlp: object = None
    progress: bool = False
    stats: dict = field(default_factory=dict)


class Proposer:
    """Base class of proposers: subclasses implement `propose`; `describe` says what ran (the manifest's entry)."""

    #: error messages of `check` name arguments relative to the params block
    relative_messages = True
    #: foil-metrics text: what this proposer is (the data card quotes it)
    summary: str = ""

    def check(self) -> None:
        """Check argument values without loading anything (`foilforge check-params`)."""

    def propose(self, sites: list[EditSite], context: ProposerContext) -> list[list[Proposal | Refusal]]:
        """For each site (in order) its proposals, best first, or refusals saying why there is none."""
        raise NotImplementedError

    def describe(self) -> dict:
        """The proposer's identity for the manifest and the foil metrics: its name, models, prompts, decoding."""
        return {"proposer": getattr(self, "registry_name", type(self).__name__)}


def proposer_block(block, param_key: str) -> tuple[str, dict]:
    """(registered name, args) of an instrument's `proposer` argument: `{name, args}`, a bare name, or None
    (the lexicon proposer with its defaults)."""
    if block is None:
        return PROPOSERS.newest(DEFAULT_PROPOSER), {}
    if isinstance(block, str):
        block = {"name": block}
    if not isinstance(block, dict) or "name" not in block:
        raise ConfigError(f"{param_key} must be a mapping {{name: <proposer>, args: {{...}}}}, got {block!r:.60}")
    unknown = sorted(set(block) - {"name", "args"})
    if unknown:
        raise ConfigError(f"{param_key}: unknown key(s) {', '.join(unknown)}; allowed: name, args")
    args = block.get("args") or {}
    if not isinstance(args, dict):
        raise ConfigError(f"{param_key}.args must be a mapping, got {args!r:.60}")
    return PROPOSERS.newest(block["name"]), dict(args)


def build_proposer(block, param_key: str) -> Proposer:
    """The proposer an instrument's `proposer` argument names, its args checked against its constructor."""
    name, args = proposer_block(block, param_key)
    return PROPOSERS.build(name, args, f"params.yaml {param_key}.args")
