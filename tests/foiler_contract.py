"""The foiler contract as plain check functions (after scikit-learn's check_estimator).

tests/test_foiler_conformance.py runs every check on every registered foiler;
tests/test_add_a_foiler.py runs them on the foiler the documentation builds, and
the broken-foiler tests show that each check can fail. A check raises
AssertionError (or the foiler's own error) when the contract is broken.

Model-backed foilers run their golden examples under a deterministic tool that
this module declares (`GOLDEN_TOOLS`: a fixed score table, a fixed vector table),
so the checks test the foiler's own logic (slot finding, ranking, balancing,
pairing), not a model. A foiler registered elsewhere adds its tool with
`GOLDEN_TOOLS[name] = plug_in`.
"""

from __future__ import annotations

import copy
import inspect
import json
import random

import numpy as np

from foilers.base import FOILERS, Foiler, RunContext, build_records
from pipeline.errors import ConfigError
from pipeline.io import iter_jsonl, write_jsonl


class TableScorer:
    """Span scorer double: a fill's score is its entry in a fixed table (lower-cased), -100 when absent."""

    def __init__(self, table: dict[str, float]):
        self.table = table

    def score(self, items):
        return [[float(self.table.get(fill.lower(), -100.0)) for fill in fills] for _, _, fills in items]


class TableEncoder:
    """Sentence-encoder double: each text's vector is its entry in a fixed table (rows normalised)."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table

    def encode(self, texts, progress=False):
        vectors = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


#: relations: under > in > on
PREPOSITION_TABLE = {"under": 3.0, "in": 2.0, "on": 1.0}
#: action_replacement: the agreeing forms of the golden verbs
VERB_TABLE = {"carves": 5, "carve": 5, "pushes": 4, "push": 4, "hugs": 3, "hug": 3, "feeds": 2, "feed": 2,
              "shouts": 1, "shout": 1}
#: bd2bb_decoys: a tennis cluster (x axis) and a kitchen cluster (y axis)
ACTION_TABLE = {
    "swing the racket to hit the ball": [1, 0, 0, 0], "serve the ball over the net": [1, 0, 0.2, 0],
    "buy new shoes for the match": [1, 0, 0.6, 0], "hit the ball hard": [1, 0, 1.5, 0],
    "cheer for the player": [1, 0, 0.9, 0],
    "cook pasta for dinner": [0.1, 1, 0, 0.5], "chop the onions": [0.3, 1, 0, 0],
    "wash the racket in the sink": [0.5, 1, 0, 0], "buy bread at the shop": [0.2, 1, 0, 0],
    "boil water for tea": [0, 1, 0, 0], "wash the ball, the net, the shoes and the racket of the player": [0.4, 1, 0, 0],
}


def _relations_tool(foiler):
    return foiler.use_scorer(TableScorer(PREPOSITION_TABLE))


def _action_tool(foiler):
    from foilers.action_replacement import ScorerProposer

    class TableProposer:
        """The ScorerProposer over a fixed table, with the run's own verb vocabulary."""

        def propose(self, slots, top_k):
            verbs = {slot.verb for slot in slots}
            return ScorerProposer(TableScorer(VERB_TABLE), verbs).propose(slots, top_k)

    return foiler.use_proposer(TableProposer())


def _bd2bb_tool(foiler):
    return foiler.use_encoder(TableEncoder(ACTION_TABLE))


#: registry name -> function plugging a deterministic tool into a built foiler (model-backed foilers)
GOLDEN_TOOLS = {
    "relations.v1": _relations_tool,
    "action_replacement.v1": _action_tool,
    "bd2bb_decoys.v1": _bd2bb_tool,
}


# ---------------------------------------------------------------- building

def build(name: str) -> Foiler:
    return FOILERS.build(name, {}, where=f"test ({name})")


def build_golden(name: str) -> Foiler:
    """The foiler under its `golden_args`, with the test's deterministic tool plugged in where it needs a model."""
    foiler = FOILERS.build(name, dict(FOILERS.get(name).golden_args), where=f"test ({name} golden_args)")
    tool = GOLDEN_TOOLS.get(name)
    return tool(foiler) if tool else foiler


def golden_inputs(name: str) -> list[dict]:
    cls = FOILERS.get(name)
    return [copy.deepcopy(sample) for sample, _ in cls.golden] + [copy.deepcopy(s) for s in cls.golden_corpus]


def run_as_text(foiler: Foiler, samples: list[dict], seed: int = 0, **context) -> str:
    records = foiler.run(copy.deepcopy(samples), context=RunContext("probe", seed=seed, **context))
    return "\n".join(json.dumps(r, sort_keys=True) for r in records)


# ---------------------------------------------------------------- the checks

def check_declares_what_it_is(name: str) -> None:
    foiler = build(name)
    assert isinstance(foiler, Foiler)
    assert foiler.registry_name == name
    assert foiler.source, f"{name} must name the ingested table it reads (`source`)"
    assert foiler.phenomenon, f"{name} must set VALSE's `linguistic_phenomena` value (`phenomenon`)"


def check_rejects_unknown_args(name: str) -> None:
    try:
        FOILERS.build(name, {"no_such_arg": 1}, where="params.yaml instruments.x.args")
    except ConfigError as err:
        assert "unknown argument(s) no_such_arg; allowed: " in str(err), str(err)
    else:
        raise AssertionError(f"{name} accepted an unknown argument")


def check_init_only_stores_its_arguments(name: str) -> None:
    """params() returns every constructor argument, and rebuilding from it gives the same params (clone)."""
    foiler = build(name)
    signature = inspect.signature(FOILERS.get(name).__init__)
    expected = {k for k, p in signature.parameters.items() if k != "self" and p.kind is not p.VAR_KEYWORD}
    params = foiler.params()
    assert set(params) == expected, f"{name}: params() {sorted(params)} != constructor args {sorted(expected)}"
    assert FOILERS.build(name, params).params() == params


def check_keeps_the_contract(name: str) -> None:
    """Records, ids and caps are the base class's: a foiler fills propose/choose, never run or the record step."""
    cls = FOILERS.get(name)
    assert cls.run is Foiler.run, f"{name} overrides run(): records, ids and caps belong to the base class"
    cap = inspect.getattr_static(cls, "max_foils_per_sample")
    assert isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1, \
        f"{name}: max_foils_per_sample must be a plain int class attribute, got {cap!r}"
    for legacy in ("select", "prepare"):
        assert not hasattr(cls, legacy), f"{name} still has `{legacy}`: use propose / choose on Foil objects"


def check_declares_golden_examples(name: str) -> None:
    golden = FOILERS.get(name).golden
    assert golden, f"{name} has no golden examples: add a few (sample, (caption, foil) | None)"
    assert any(expected is None for _, expected in golden), f"{name}: add a golden example with nothing to foil"
    assert any(expected is not None for _, expected in golden), f"{name}: add a golden example that gives a foil"


def check_golden_examples_pass(name: str) -> None:
    """Each golden sample's best proposal (the first `propose` gives for it) is the expected pair; None: none.

    The run is seed 0 of an instrument named like the foiler (random choices, e.g. a quantifier, follow it)."""
    samples = sorted(golden_inputs(name), key=lambda s: str(s["id"]))
    foiler = build_golden(name)
    proposals = foiler.propose(samples, RunContext(name, seed=0, samples={s["id"]: s for s in samples}))
    for sample, expected in FOILERS.get(name).golden:
        foils = [f for f in proposals if f.sample_id == sample["id"] and f.foil.strip() != f.caption.strip()]
        if expected is None:
            assert foils == [], f"{name}: {sample['id']} has no target but gave {foils[:1]}"
        else:
            assert foils, f"{name}: {sample['id']} gave no foil"
            assert (foils[0].caption, foils[0].foil) == tuple(expected), f"{name}: {sample['id']}"


def check_validate_sample_accepts_golden_inputs(name: str) -> None:
    foiler = build_golden(name)
    for index, sample in enumerate(golden_inputs(name)):
        foiler.validate_sample(sample, "golden.jsonl", index)


def check_records_and_ids(name: str) -> None:
    samples = golden_inputs(name)
    foiler = build_golden(name)
    records = foiler.run(samples, seed=0, instrument="probe")
    # otherwise the record-level checks below would pass vacuously
    assert records, f"{name}: its golden inputs give no records through run()"
    sample_ids = {s["id"] for s in samples}
    by_sample: dict = {}
    for record in records:
        assert record["sample_id"] in sample_ids
        assert record["instrument"] == "probe"
        assert record["linguistic_phenomena"] == foiler.phenomenon
        assert record["provenance"]["foiler"] == name
        for key in ("caption", "foil", "classes", "classes_foil"):
            assert key in record
        by_sample.setdefault(record["sample_id"], []).append(record["id"])
    for sample_id, ids in by_sample.items():
        expected = [f"probe:{sample_id}"] + [f"probe:{sample_id}#{i}" for i in range(1, len(ids))]
        assert sorted(ids) == sorted(expected), f"{name}: ids {ids} are not probe:<sample id>, then #1, #2, ..."
    assert [r["id"] for r in records] == sorted(r["id"] for r in records)


def check_no_identity_or_duplicate_foils(name: str) -> None:
    records = build_golden(name).run(golden_inputs(name), seed=0)
    assert all(r["caption"].strip() != r["foil"].strip() for r in records)
    pairs = [(r["sample_id"], r["caption"], r["foil"]) for r in records]
    assert len(pairs) == len(set(pairs))


def check_the_cap(name: str) -> None:
    """At most the cap per sample: the class's, or instruments.<I>.candidates_per_sample's."""
    samples = golden_inputs(name)
    for cap in (None, 1, 2):
        foiler = build_golden(name)
        context = RunContext("probe", seed=0, candidates_per_sample=cap)
        records = foiler.run(copy.deepcopy(samples), context=context)
        limit = cap or FOILERS.get(name).max_foils_per_sample
        per_sample: dict = {}
        for record in records:
            per_sample[record["sample_id"]] = per_sample.get(record["sample_id"], 0) + 1
        assert all(n <= limit for n in per_sample.values()), f"{name}: {per_sample} exceeds the cap {limit}"


def check_text_outside_the_span_is_unchanged(name: str) -> None:
    for record in build_golden(name).run(golden_inputs(name), seed=0):
        spans = record["provenance"]
        if not spans["caption_span"] or not spans["foil_span"]:
            continue
        (cs, ce), (fs, fe) = spans["caption_span"], spans["foil_span"]
        caption, foil = record["caption"], record["foil"]
        assert caption[:cs] == foil[:fs] and caption[ce:] == foil[fe:], record["id"]
        assert caption[cs:ce] != foil[fs:fe]


def check_deterministic(name: str) -> None:
    """Same seed, same output: in any input order, whatever the global random state, after another run."""
    samples = golden_inputs(name)
    random.seed(1)
    first = run_as_text(build_golden(name), samples)
    random.seed(2)
    np.random.seed(2)
    again = run_as_text(build_golden(name), samples)
    reordered = run_as_text(build_golden(name), list(reversed(samples)))
    assert first == again == reordered, f"{name}: output depends on input order or global random state"
    # nothing of a run stays on the foiler: a run on part of the input first changes nothing
    reused = build_golden(name)
    reused.run(copy.deepcopy(samples[:1]), seed=5, instrument="other")
    assert run_as_text(reused, samples) == first, f"{name}: a previous run changed the next one (state on self)"


def check_input_is_not_mutated(name: str) -> None:
    samples = golden_inputs(name)
    before = copy.deepcopy(samples)
    build_golden(name).run(samples, seed=0)
    assert samples == before


def check_jsonl_round_trip(name: str, tmp_path) -> None:
    records = build_golden(name).run(golden_inputs(name), seed=0)
    path = tmp_path / f"{name}.jsonl"
    write_jsonl(path, records)
    assert list(iter_jsonl(path)) == records


CHECKS = (
    check_declares_what_it_is, check_rejects_unknown_args, check_init_only_stores_its_arguments,
    check_keeps_the_contract, check_declares_golden_examples, check_golden_examples_pass,
    check_validate_sample_accepts_golden_inputs, check_records_and_ids, check_no_identity_or_duplicate_foils,
    check_the_cap, check_text_outside_the_span_is_unchanged, check_deterministic, check_input_is_not_mutated,
    check_jsonl_round_trip,
)


def check_foiler(name: str, tmp_path) -> None:
    """Every check, in order (for a foiler registered by a test)."""
    for check in CHECKS:
        if "tmp_path" in inspect.signature(check).parameters:
            check(name, tmp_path)
        else:
            check(name)


__all__ = ["CHECKS", "GOLDEN_TOOLS", "TableEncoder", "TableScorer", "build_golden", "build_records", "check_foiler"]
