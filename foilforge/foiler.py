"""The foiler contract: two phases on `Foil` objects, records built once by the base class.

A foiler turns samples of one source into caption/foil pairs in two phases:

* `propose(samples, context) -> list[Foil]`: every candidate, each tagged with
  its `sample_id` (and, where it ranks candidates, `rank` / `score`). The
  default loops over `foils_for(sample, rng)` (the candidates of one sample,
  in order of preference; may be empty: a sample with nothing to foil is not an
  error) with a generator derived from the seed, the instrument and the sample
  id, and keeps up to the per-sample cap. A foiler whose candidates need
  something of the whole run (the spans attested in it, a verb vocabulary, the
  categories each image's captions mention, a cluster pool) splits `propose`
  into `corpus_pass(samples, context)`, run once, and `propose_batch(batch,
  context, corpus)`, run on each batch of samples (the foil stage runs the
  batches on pipeline/engine/: this process or a Ray actor pool; a model
  scores a batch's slots in shared calls). The counts a batch puts in
  `context.stats` are summed over the batches (`merge_stats`); anything else
  belongs to `corpus_pass`. A foiler whose candidates cannot be made batch by
  batch (pairs across images) overrides `propose` itself, which then runs once.
* `choose(foils, context) -> list[Foil]`: the instrument-level choice among all
  candidates (class balance, direction pairing, 50/50 splits); default: all.
  It may drop, reorder and replace foils (a new `Foil` with another `foil`
  text), never build records or ids.

Between the two, a foiler whose `edit_kind` says what words it replaces has the
candidates its caption entails or paraphrases refused (foilforge/entailment.py:
"beside" -> "next to", "dog" -> "animal"), counted by reason in `stats["refused"]`.
The base class (`run`) does the rest, once, after `choose`: drops identity and
duplicate foils, applies the per-sample cap (`max_foils_per_sample`, default 1,
overridden per instrument by params.yaml `instruments.<I>.candidates_per_sample`),
builds the VALSE-format records and their ids (`<instrument>:<sample id>`, then
`#1`, `#2` for further foils of the same sample, in `choose`'s order), sorts them.

Run state lives in the `RunContext` argument (instrument, seed, progress, the
params key for messages, `stats` for the foil metrics), never on the foiler:
`__init__` only stores its arguments (the params.yaml `args`), `check()`
checks their values at build time (`foilforge check-params`), and a foiler may
cache loaded tools (a spaCy pipeline, a model) but nothing of a run.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Iterable

from foilforge.errors import InputError
from foilforge.records import Foil, foil_record
from foilforge.registry import Registry

#: every module of this package is a foiler plug-in (found on the first lookup, no list to edit);
#: foilers of other packages register through the `foilforge.foilers` entry-point group
FOILERS = Registry("foiler", packages=("foilforge.foilers",), entry_points="foilforge.foilers")


def rng_for(seed: int, *keys) -> random.Random:
    """A generator that depends only on the seed and the given keys (e.g. a sample id)."""
    digest = hashlib.sha256("\x1f".join([str(seed), *map(str, keys)]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass
class RunContext:
    """Everything a foiler may know about the run it is part of; passed to `propose` and `choose`."""

    instrument: str
    seed: int = 0
    progress: bool = False
    #: params.yaml block of the instrument, for messages ("instruments.relations")
    params_key: str = ""
    #: instruments.<I>.candidates_per_sample: overrides the foiler's max_foils_per_sample (None: keep it)
    candidates_per_sample: int | None = None
    #: the run's samples by id (for `choose` rules that need a sample field, e.g. the image)
    samples: dict = field(default_factory=dict)
    #: what the foiler reports about the run (skip rules, resolver, pairing, JS): the foil stage's metrics
    stats: dict = field(default_factory=dict)
    #: where model-backed foilers journal their scores so a killed run resumes (`foil --cache-dir`); None: nowhere
    cache_dir: str | None = None

    def key(self, arg: str) -> str:
        """The params.yaml key of one of this instrument's args, for error messages."""
        return f"{self.params_key or 'instruments.' + self.instrument}.args.{arg}"

    def rng(self, *keys) -> random.Random:
        """A generator for one purpose of this run ("select", "pairs", a sample id)."""
        return rng_for(self.seed, self.instrument, *keys)


class Foiler:
    #: VALSE's `linguistic_phenomena` value
    phenomenon: str = ""
    #: name of the ingested table this foiler reads (see pipeline.stages.ingest)
    source: str = ""
    #: registry name, set by the registry decorator
    registry_name: str = ""
    #: (input sample, expected (caption, foil) or None) pairs the conformance suite checks
    golden: tuple = ()
    #: constructor args under which the golden examples hold, for foilers whose defaults name a model
    #: this machine may lack (the paper's spaCy pipeline): the offline choices. Empty = the defaults.
    golden_args: dict = {}
    #: more inputs of the golden run, for corpus-level foilers (a pool, pairs), not checked one by one
    golden_corpus: tuple = ()
    #: `check()` names arguments relative to the block; the registry prepends "params.yaml instruments.<I>.args"
    relative_messages: bool = True
    #: foils kept per sample after `choose`; instruments.<I>.candidates_per_sample overrides it
    max_foils_per_sample: int = 1
    #: what sort of words the foiler replaces ("relation", "noun", "verb", "adjective"; foilforge/edits.py): the
    #: entailment check (foilforge/entailment.py) refuses a candidate whose caption entails or paraphrases it.
    #: None: the foiler's edits are not replacements (a swap, a number, a negation) and are not checked
    edit_kind: str | None = None

    def golden_tools(self) -> "Foiler":
        """This foiler with deterministic stand-ins for its models, under which `golden` holds.

        foilforge.testing's checks run the golden examples through it. A model-backed foiler
        overrides it to plug in a fixed table (foilforge.testing.TableRanker / TableEncoder),
        so the checks test its own logic (slots, ranking, balancing), not a model. Others need none.
        """
        return self

    # ---------------------------------------------------------------- what a foiler fills
    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        raise NotImplementedError(f"{type(self).__name__} implements neither foils_for nor propose")

    def propose(self, samples: list[dict], context: RunContext) -> list[Foil]:
        """Candidates for every sample of the run: `propose_batch` over all of them, after `corpus_pass`."""
        return self.propose_batch(samples, context, self.corpus_pass(samples, context))

    def corpus_pass(self, samples: list[dict], context: RunContext):
        """What every batch's proposal needs from the whole run (a vocabulary, an index, a pool), computed once
        in the stage process and handed to each `propose_batch` (so it must pickle); default: nothing."""
        return None

    def propose_batch(self, samples: list[dict], context: RunContext, corpus) -> list[Foil]:
        """Candidates for one batch of the run's samples: `foils_for` per sample, up to the cap, identities dropped."""
        return propose_per_sample(self, samples, context, self.foils_for)

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """The instrument-level choice among all candidates (balance, pairing); default: keep all."""
        return foils

    def check(self) -> None:
        """Check argument values (ranges, choices) without loading anything; raise ConfigError naming the arg."""

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        """Raise foilforge.errors.InputError if the sample lacks fields this foiler needs."""

    @classmethod
    def write_native(cls, records: list[dict], output_dir, instrument: str) -> list[str]:
        """Write the kept records in the source's own release format too; returns the file names. Default: none."""
        return []

    # ---------------------------------------------------------------- the base class's part
    def cap(self, context: RunContext) -> int:
        return context.candidates_per_sample or self.max_foils_per_sample

    def params(self) -> dict:
        import inspect

        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self" and hasattr(self, k)}

    def run(self, samples: list[dict], *, seed: int = 0, instrument: str | None = None, progress: bool = False,
            context: RunContext | None = None, propose=None) -> list[dict]:
        """Records for `samples`: propose, choose, then identities, duplicates and the cap, ids, sort.

        `propose(samples, context)` replaces `self.propose` (the foil stage's: batches on the engine)."""
        if context is None:
            context = RunContext(instrument or self.registry_name, seed=seed, progress=progress)
        samples = sorted(samples, key=lambda s: str(s["id"]))
        context.samples = {s["id"]: s for s in samples}
        if not context.params_key:
            context.params_key = f"instruments.{context.instrument}"
        proposed = (propose or self.propose)(samples, context)
        # a candidate its caption entails or paraphrases is refused before `choose`, which then chooses among the rest
        proposed = refuse_entailed(self, proposed, context)
        # `choose` sees candidates in the order of the ids they would get as proposed (sample, then rank)
        proposed = sorted(proposed, key=_proposal_order(context.instrument))
        chosen = self.choose(proposed, context)
        records = build_records(self, chosen, context)
        context.stats["counts"] = {"samples": len(samples), "proposed": len(proposed), "chosen": len(chosen),
                                   "records": len(records), "cap_per_sample": self.cap(context)}
        return records


class CaptionFoiler(Foiler):
    """A foiler of caption samples that parses them with a spaCy pipeline (its `spacy_model` argument)."""

    spacy_model: str = "en_core_web_sm"

    def load_nlp(self, param_key: str | None = None):
        # the loaded pipeline is a tool cached across runs; nothing of a run is kept on the foiler
        if getattr(self, "_nlp", None) is None:
            from foilforge.nlp import load_spacy

            key = param_key or f"instruments.{self.registry_name.rsplit('.', 1)[0]}.args.spacy_model"
            self._nlp = load_spacy(self.spacy_model, param_key=key)
        return self._nlp

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        caption = sample.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(path, "expected a non-empty caption string", record=index, field="caption")


def check_model_block(block, arg: str, kinds: tuple[str, ...], default_kind: str | None = None,
                      span_ranker: bool = False) -> None:
    """Check a model-block argument (`{kind, name_or_path, gguf_file, device, dtype, batch_size}`) without loading.

    `span_ranker`: the block goes to foilforge.span_ranking.build_span_ranker, which also takes its pruning args.
    """
    from foilforge.models import model_block
    from foilforge.span_ranking import PRUNING_KEYS, check_pruning

    _, _, pruning = model_block(block, arg, kinds, default_kind, extra_keys=PRUNING_KEYS if span_ranker else ())
    if pruning:
        check_pruning(arg, **pruning)


def propose_per_sample(foiler: Foiler, samples: list[dict], context: RunContext, foils_for) -> list[Foil]:
    """The default `propose` with any per-sample function `foils_for(sample, rng)`: each sample's own
    generator, identity and duplicate foils dropped, at most the cap kept (a foiler whose per-sample
    step needs run data, e.g. batch-parsed captions, passes a closure over it)."""
    cap = foiler.cap(context)
    iterator = samples
    if context.progress:
        from tqdm import tqdm

        iterator = tqdm(samples, desc=f"foil {context.instrument}", unit="sample")
    proposed: list[Foil] = []
    for sample in iterator:
        kept = 0
        seen = set()
        # foils_for may be a generator doing work per candidate (a parse, a guard): stop at the cap
        for foil in foils_for(sample, rng_for(context.seed, context.instrument, sample["id"])):
            if foil.foil.strip() == foil.caption.strip() or foil.key() in seen:
                continue
            seen.add(foil.key())
            foil.sample_id = sample["id"]
            proposed.append(foil)
            kept += 1
            if kept >= cap:
                break
    return proposed


def proposes_in_batches(foiler: Foiler) -> bool:
    """Whether the foil stage may cut the run into batches: `propose` is the base class's (corpus_pass, then
    propose_batch); a foiler that overrides `propose` needs its whole run in one call."""
    return type(foiler).propose is Foiler.propose


def merge_stats(total: dict, part: dict, where: str = "stats") -> dict:
    """`part` (one batch's context.stats) added into `total`: counts summed, nested dicts merged; any other
    value (a resolver's name, a setting) must be the same in every batch."""
    for key, value in part.items():
        if key not in total:
            total[key] = {} if isinstance(value, dict) else value
            if isinstance(value, dict):
                merge_stats(total[key], value, f"{where}.{key}")
        elif isinstance(value, dict) and isinstance(total[key], dict):
            merge_stats(total[key], value, f"{where}.{key}")
        elif _is_count(value) and _is_count(total[key]):
            total[key] += value
        elif total[key] != value:
            raise ValueError(f"{where}.{key}: batches disagree ({total[key]!r} vs {value!r}); a value that is not a "
                             "count belongs in the foiler's `corpus_pass`")
    return total


def _is_count(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _proposal_order(instrument: str):
    counters: dict = {}

    def key(foil: Foil) -> str:
        index = counters.get(foil.sample_id, 0)
        counters[foil.sample_id] = index + 1
        return record_id(instrument, foil.sample_id, index)

    return key


def record_id(instrument: str, sample_id, index: int) -> str:
    return f"{instrument}:{sample_id}" + (f"#{index}" if index else "")


def foil_refusal(foiler: Foiler, foil: Foil) -> str | None:
    """Why the foil is entailed or paraphrased by its caption (foilforge/entailment.py), or None; None for a foiler
    that declares no `edit_kind`."""
    if foiler.edit_kind is None:
        return None
    from foilforge.edits import pair_refusal

    return pair_refusal(foil.caption, foil.foil, foiler.edit_kind, foil.caption_span, foil.foil_span,
                        object=foil.internal.get("object"))


def refuse_entailed(foiler: Foiler, foils: list[Foil], context: RunContext) -> list[Foil]:
    """The candidates the entailment check accepts, in order; the refused ones counted by reason in
    `context.stats["refused"]`, and `stats["edit_check"]` says what was checked."""
    if foiler.edit_kind is None:
        return foils
    kept, refused = [], dict(context.stats.get("refused") or {})
    for foil in foils:
        reason = foil_refusal(foiler, foil)
        if reason is None:
            kept.append(foil)
        else:
            refused[reason] = refused.get(reason, 0) + 1
    context.stats["refused"] = dict(sorted(refused.items()))
    context.stats["edit_check"] = {"check": "entailment", "kind": foiler.edit_kind, "candidates": len(foils),
                                   "refused": len(foils) - len(kept)}
    return kept


def build_records(foiler: Foiler, foils: list[Foil], context: RunContext) -> list[dict]:
    """VALSE records for the chosen foils: identities and duplicates dropped, the cap applied, ids assigned.

    A foil that cannot be one (empty, the caption again: foilforge/validity.py) or that its caption entails or
    paraphrases (the foiler's `edit_kind`, foilforge/entailment.py) is refused, counted by reason in
    `context.stats["refused"]` (added to what `refuse_entailed` counted among the candidates)."""
    from foilforge.validity import refusal

    cap = foiler.cap(context)
    per_sample: dict = {}
    seen: set = set()
    records = []
    refused: dict[str, int] = dict(context.stats.get("refused") or {})
    for foil in foils:
        if foil.sample_id not in context.samples:
            raise ValueError(f"{foiler.registry_name}: a chosen foil names sample {foil.sample_id!r}, not one of the run's")
        # an empty foil, or the caption itself up to case and whitespace, tests nothing: refused and counted;
        # so is one its caption entails (`choose` may have made foils the candidates' check did not see)
        reason = refusal({"caption": foil.caption, "foil": foil.foil}) or foil_refusal(foiler, foil)
        if reason is not None:
            refused[reason] = refused.get(reason, 0) + 1
            continue
        if (foil.sample_id, foil.key()) in seen:
            continue
        index = per_sample.get(foil.sample_id, 0)
        if index >= cap:
            continue
        seen.add((foil.sample_id, foil.key()))
        per_sample[foil.sample_id] = index + 1
        record = foil_record(context.samples[foil.sample_id], foil, instrument=context.instrument,
                             foiler=foiler.registry_name, phenomenon=foiler.phenomenon, index=index)
        records.append(record)
    context.stats["refused"] = dict(sorted(refused.items()))
    return sorted(records, key=lambda r: r["id"])
