"""The foiler, filter and attacker contracts as plain check functions (after scikit-learn's check_estimator).

`check_foiler(cls)`, `check_filter(cls, params)` and `check_attacker(attacker)` run every check on one
plug-in, from any package's tests. foilforge's own tests run them on every registered foiler, filter and
attacker (tests/test_foiler_conformance.py, tests/test_filters_conformance.py,
tests/test_attacker_conformance.py) and on broken ones, to show that each check can fail. A check raises
AssertionError (or the class's own error) naming the broken rule.

Model-backed foilers run their golden examples under deterministic tools they declare
themselves (`Foiler.golden_tools`: a `TableRanker`, a `TableEncoder` of foilforge/fixed_tools.py), so the
checks test the foiler's own logic (slot finding, ranking, balancing, pairing), not a model.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import random
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from foilforge.errors import ConfigError
from foilforge.filter import FILTERS, Filter, build_filter, keep_rules
from foilforge.fixed_tools import TableEncoder, TableRanker  # noqa: F401  (re-exported for tests)
from foilforge.foiler import FOILERS, Foiler, RunContext, proposes_in_batches
from foilforge.io import iter_jsonl, write_jsonl

# ---------------------------------------------------------------- building

def build(name: str) -> Foiler:
    return FOILERS.build(name, {}, where=f"test ({name})")


def build_golden(name: str) -> Foiler:
    """The foiler under its `golden_args`, with its deterministic tools plugged in where it needs a model."""
    foiler = FOILERS.build(name, dict(FOILERS.get(name).golden_args), where=f"test ({name} golden_args)")
    return foiler.golden_tools()


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


def check_batches_give_the_runs_proposals(name: str) -> None:
    """Proposing batch by batch (one sample a batch, after one `corpus_pass` over all) gives what `propose` gives
    over the whole run: the foil stage may cut a run into batches anywhere (engine.batch_size, Ray actors)."""
    foiler = build_golden(name)
    if not proposes_in_batches(foiler):
        return
    samples = sorted(golden_inputs(name), key=lambda s: str(s["id"]))

    def context():
        return RunContext(name, seed=0, samples={s["id"]: s for s in samples})

    whole = foiler.propose(samples, context())
    corpus = foiler.corpus_pass(samples, context())
    batched = [foil for sample in samples for foil in foiler.propose_batch([sample], context(), corpus)]
    pairs = [(f.sample_id, f.caption, f.foil, f.rank) for f in whole]
    assert [(f.sample_id, f.caption, f.foil, f.rank) for f in batched] == pairs, \
        f"{name}: proposals batch by batch differ from the whole run's: keep run-wide work in corpus_pass"


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


def check_check_sample_accepts_golden_inputs(name: str) -> None:
    foiler = build_golden(name)
    for index, sample in enumerate(golden_inputs(name)):
        foiler.check_sample(sample, "golden.jsonl", index)


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
    check_batches_give_the_runs_proposals, check_check_sample_accepts_golden_inputs, check_records_and_ids,
    check_no_identity_or_duplicate_foils, check_the_cap, check_text_outside_the_span_is_unchanged,
    check_deterministic, check_input_is_not_mutated, check_jsonl_round_trip,
)


def registered_name(foiler: type | str) -> str:
    """The registry name of a foiler class (or the name itself); a class must be registered to be checked."""
    if isinstance(foiler, str):
        FOILERS.get(foiler)
        return foiler
    name = getattr(foiler, "registry_name", None)
    if not name or name not in FOILERS.names() or FOILERS.get(name) is not foiler:
        raise AssertionError(f"{foiler.__qualname__} is not registered: decorate it with @FOILERS.register('<name>.v1')")
    return name


def check_foiler(foiler: type | str, tmp_path: Path | None = None) -> None:
    """Every foiler check, in order, on a registered foiler class (or its registry name).

    Raises AssertionError naming the broken rule. Call it from a plug-in package's tests:
    `check_foiler(ColourSwap)`; `tmp_path` is where the JSONL round trip writes (default: a temp dir).
    """
    name = registered_name(foiler)
    with tempfile.TemporaryDirectory() as scratch:
        for check in CHECKS:
            if "tmp_path" in inspect.signature(check).parameters:
                check(name, Path(tmp_path or scratch))
            else:
                check(name)


# ---------------------------------------------------------------- the filter contract

#: foil records as foilers write them, VALSE's changed items included (the refinement's JS bound reads them)
FILTER_RECORDS = [
    {"id": f"r{i:02d}", "caption": caption, "foil": foil,
     "classes": sorted(set(caption.split()) - set(foil.split())), "classes_foil": sorted(set(foil.split()) - set(caption.split()))}
    for i, (caption, foil) in enumerate([
        ("a man is sitting on a table.", "a man is sitting under a table."),
        ("two dogs are playing in the field.", "one dog is playing in the field."),
        ("a woman holding a plate of pizza.", "a woman holding some plates of pizza."),
        ("there is a cat.", "there are no cats."),
        ("the children are riding a bus on the street near the car.", "the children are riding a bus in the street near the car."),
        ("a person standing next to a frisbee.", "a person standing behind a frisbee."),
        ("people eating.", "person eating."),
        ("a dog. it is on the table.", "a dog. it is under the table."),
        ("is this photo in color? yes.", "is this photo in color? no."),
        ("a man riding a bus with his dog and two cats in front of the table next to a field of pizza.",
         "a man riding a bus with his dog and two cats behind the table next to a field of pizza."),
        ("cat", "cats"),
        ("the plate is on the table.", "the plate is on the table. the table is on the plate."),
    ])
]


def _close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5)


def _numbers(result: dict, prefix: str = "") -> dict:
    """A result flattened to {path: value}, so results compare key by key with a tolerance."""
    out = {}
    for key, value in result.items():
        if isinstance(value, dict):
            out.update(_numbers(value, f"{prefix}{key}."))
        elif isinstance(value, list):
            out.update(_numbers(dict(enumerate(value)), f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def apply_keep_rule(cls: type[Filter], records: list[dict], scored: list[dict], thresholds: dict) -> list[str]:
    """Ids of the records a filter's keep rule keeps at `thresholds`, one by one or as a set (`set_rule`)."""
    if cls.set_rule:
        marked = [{**r, "filters": {cls.name: s}} for r, s in zip(records, scored)]
        kept, _ = cls.keep_subset(marked, "<check_filter>", item_mode="direct", **thresholds)
        return [r["id"] for r in records if r["id"] in kept]
    return [r["id"] for r, s in zip(records, scored) if cls.keep(s, **thresholds)]


def check_one_result_per_record(f: Filter, records: list[dict], scored: list[dict]) -> None:
    assert len(scored) == len(records), f"{f.registry_name}: {len(scored)} results for {len(records)} records"
    for result in scored:
        assert result["filter"] == f.registry_name, f"{f.registry_name}: result names filter {result.get('filter')!r}"
        missing = {"model", "variant", "score"} - set(result)
        assert not missing, f"{f.registry_name}: a result lacks {sorted(missing)} (provenance: which model, which variant)"
        assert isinstance(result["score"], (int, float)), f"{f.registry_name}: score {result['score']!r} is not a number"


def check_batched_equals_single_item(f: Filter, records: list[dict], scored: list[dict]) -> None:
    for record, batched in zip(records, scored):
        single, joint = _numbers(f.score([record])[0]), _numbers(batched)
        assert single.keys() == joint.keys(), f"{f.registry_name}: {record['id']} alone gives other keys"
        if f.corpus_level:
            continue  # corpus statistics depend on the batch by definition; order independence is checked below
        for key, value in joint.items():
            same = _close(value, single[key]) if isinstance(value, float) else value == single[key]
            assert same, f"{f.registry_name}: {record['id']} {key} is {value!r} in a batch, {single[key]!r} alone"


def check_score_is_pure_and_order_preserving(f: Filter, records: list[dict], scored: list[dict]) -> None:
    copies = copy.deepcopy(records)
    again = f.score(copies[::-1])
    assert copies == records, f"{f.registry_name}: score() changed its input records"
    assert all(_close(a["score"], b["score"]) for a, b in zip(again[::-1], scored)), \
        f"{f.registry_name}: scores depend on the input order"
    assert f.score([]) == [], f"{f.registry_name}: score([]) must be []"


def check_keeps_a_subset_in_input_order(f: Filter, records: list[dict], scored: list[dict],
                                        thresholds: list[dict]) -> None:
    input_ids = [r["id"] for r in records]
    for rule in thresholds:
        kept = apply_keep_rule(type(f), records, scored, rule)
        assert kept == [i for i in input_ids if i in set(kept)], f"{f.registry_name} at {rule}: kept ids out of order"


def check_stricter_threshold_never_keeps_more(f: Filter, records: list[dict], scored: list[dict],
                                              thresholds: list[dict]) -> None:
    previous = None
    for rule in thresholds:
        kept = set(apply_keep_rule(type(f), records, scored, rule))
        assert previous is None or kept <= previous, f"{f.registry_name}: {rule} keeps {sorted(kept - previous)} more"
        previous = kept


def check_builds_from_params_and_rejects_unknown_args(f: Filter, params: dict) -> None:
    name = type(f).name
    for build in (lambda: FILTERS.build(f.registry_name, {"bogus": 1}),
                  lambda: build_filter({**params, "filters": {**params.get("filters", {}), name: {"bogus": 1}}}, name)):
        try:
            build()
        except ConfigError as err:
            assert "unknown argument(s) bogus" in str(err), str(err)
        else:
            raise AssertionError(f"{f.registry_name} accepted an unknown argument")
    try:
        keep_rules({"instruments": {"x": {"filters": {"run": [name], "keep": {name: {"bogus_threshold": 1}}}}}}, "x")
    except ConfigError as err:
        assert f"instruments.x.filters.keep.{name}: unknown argument(s) bogus_threshold" in str(err), str(err)
    else:
        raise AssertionError(f"{f.registry_name}'s keep rule accepted an unknown threshold")
    assert list(keep_rules({"instruments": {"x": {"filters": {"run": [name], "keep": {name: {}}}}}}, "x")) == [name]


FILTER_CHECKS = (
    check_one_result_per_record, check_batched_equals_single_item, check_score_is_pure_and_order_preserving,
    check_keeps_a_subset_in_input_order, check_stricter_threshold_never_keeps_more,
    check_builds_from_params_and_rejects_unknown_args,
)


def run_filter_check(check, f: Filter, params: dict, records: list[dict], scored: list[dict],
                     thresholds: list[dict] | Callable[[list[dict]], list[dict]]) -> None:
    """One check with the arguments it takes; `thresholds` from loose to strict (or a function of the scores)."""
    wanted = inspect.signature(check).parameters
    given = {"f": f, "params": params, "records": records, "scored": scored,
             "thresholds": thresholds(scored) if callable(thresholds) else thresholds}
    check(**{k: v for k, v in given.items() if k in wanted})


def check_filter(filter_cls: type[Filter] | str, params: dict,
                 thresholds: list[dict] | Callable[[list[dict]], list[dict]] | None = None,
                 records: list[dict] | None = None) -> None:
    """Every filter check on a registered filter class (or its name), built from `params` as the score stage does.

    `params`: the params.yaml parts it needs (its `models.*` blocks, `filters.<name>`); `thresholds`: keep-rule
    arguments from loose to strict (default: its defaults only); `records`: foil records (default FILTER_RECORDS).
    """
    name = filter_cls if isinstance(filter_cls, str) else filter_cls.name
    f = build_filter(params, name)
    records = copy.deepcopy(records or FILTER_RECORDS)
    scored = f.score(copy.deepcopy(records))
    for check in FILTER_CHECKS:
        run_filter_check(check, f, params, records, scored, thresholds or [{}])


# ---------------------------------------------------------------- pairers: the contract every pairer keeps

def check_pairer(pairer: str, samples: list[dict], records: list[dict], args: dict | None = None) -> None:
    """A pairer's contract on a given source and records (raises AssertionError naming the broken rule):

    builds from its registered name and args; deterministic (two fresh instances, records in either order, give
    the same candidates and refusals); never the record's own image, one candidate per image; every partner names
    its sample, image and rule and states its claims (each a kind, a text, and the annotation ids that support it),
    fully supported at the default threshold; the assignment gives a record at most one partner and an image at
    most once, each from the record's own candidates; the input is not mutated."""
    import copy

    from foilforge.groups import ANNOTATION, CAPTIONS, assign
    from foilforge.pairing import PAIRERS, Pairer, search_partners

    built = PAIRERS.build(PAIRERS.newest(pairer), args or {}, "check_pairer")
    assert isinstance(built, Pairer), f"{pairer}: not a foilforge.pairing.Pairer"
    assert built.evidence, f"{pairer}: says no `evidence` (the data card prints it)"
    before = copy.deepcopy((samples, records))
    first, refused = search_partners(built, records, samples)
    again, refused_again = search_partners(PAIRERS.build(PAIRERS.newest(pairer), args or {}, "check_pairer"),
                                           list(reversed(records)), list(reversed(samples)))
    assert first == again, f"{pairer}: candidates depend on the input order or on the instance"
    assert refused == refused_again, f"{pairer}: refusals depend on the input order or on the instance"
    assert (samples, records) == before, f"{pairer}: mutated its input"
    images = {str(r["id"]): r.get("image_file") for r in records}
    for rid, partners in first.items():
        seen = set()
        for partner in partners or []:
            assert partner.image_file != images[rid], f"{pairer}: {rid} paired with its own image"
            assert partner.image_file not in seen, f"{pairer}: {rid} has image {partner.image_file} twice"
            seen.add(partner.image_file)
            assert partner.sample_id and partner.rule, f"{pairer}: a partner of {rid} has no sample id or rule"
            assert partner.claims, f"{pairer}: a partner of {rid} states no claims (its evidence for the foil)"
            for claim in partner.claims:
                assert claim.kind and claim.text, f"{pairer}: a claim of {rid}'s partner has no kind or text"
                assert claim.basis in (CAPTIONS, ANNOTATION), f"{pairer}: claim basis {claim.basis!r}"
                assert all(isinstance(a, str) and a for a in claim.supported_by), \
                    f"{pairer}: a claim of {rid}'s partner names an empty annotation id"
            assert partner.support == 1.0, f"{pairer}: a partner of {rid} below the default threshold was offered"
    pairing = assign(records, first)
    used = [p.image_file for p in pairing.partners.values()]
    assert len(used) == len(set(used)), f"{pairer}: a partner image went to two records"
    for rid, partner in pairing.partners.items():
        assert partner in (first[rid] or []), f"{pairer}: {rid} got a partner it was not offered"


# ---------------------------------------------------------------- attackers: the estimator contract

#: words of the attacker checks' pairs: captions and foils draw from the same pools, so only a planted cue (or
#: memorising a pair) tells them apart
CHECK_NOUNS = ["dog", "cat", "man", "woman", "horse", "bus", "train", "bird", "child", "car", "boat", "girl", "boy",
               "table", "chair", "kite", "plate", "bench", "truck", "cow"]
CHECK_PLACES = ["park", "street", "field", "beach", "kitchen", "garden", "road", "river", "yard", "room"]
CHECK_VERBS = ["sits", "stands", "waits", "rests", "plays", "sleeps"]


def cued_pairs(n: int, seed: int = 0, shuffled: bool = False) -> list:
    """Pairs that differ by a noun from one pool, every foil (or, `shuffled`, a random side) with the cue word
    "apparently": learnable from the foils' side, and nothing to learn about sides once shuffled."""
    from foilforge.attacker import group_key, text_pair

    rng = random.Random(seed)
    pairs = []
    for k in range(n):
        a, b = rng.sample(CHECK_NOUNS, 2)
        place, verb = rng.choice(CHECK_PLACES), rng.choice(CHECK_VERBS)
        caption, foil = f"A {a} {verb} in the {place} {k}.", f"A {b} {verb} apparently in the {place} {k}."
        if shuffled and rng.random() < 0.5:
            caption, foil = f"A {a} {verb} apparently in the {place} {k}.", f"A {b} {verb} in the {place} {k}."
        pairs.append(text_pair(caption, foil, group_key(caption)))
    return pairs


def memorisable_pairs(n: int, seed: int = 0) -> list:
    """Pairs "a photo of X" / "a photo of Y" with a made-up word X and Y of random length each, used by no other
    pair: a model that saw a pair can tell its caption (X marks it), one that did not can only guess."""
    from foilforge.attacker import group_key, text_pair

    rng = random.Random(seed)
    used: set = set()

    def word():
        while True:
            made = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(3, 9)))
            if made not in used:
                used.add(made)
                return made

    pairs = []
    for _ in range(n):
        caption, foil = f"a photo of {word()}", f"a photo of {word()}"
        pairs.append(text_pair(caption, foil, group_key(caption)))
    return pairs


def fresh(attacker, random_state: int = 0):
    """An unfitted copy of `attacker` (sklearn's clone) with `random_state`."""
    from sklearn.base import clone

    return clone(attacker).set_params(random_state=random_state)


def out_of_fold_accuracy(attacker, pairs: list, seed: int = 0) -> float:
    """Accuracy (ties half) of `attacker` out of fold on `pairs`, as the pipeline runs it (5 grouped folds)."""
    from foilforge.attacker import correctness, out_of_fold_margins

    margins, _ = out_of_fold_margins(lambda: fresh(attacker), pairs, folds=5, seed=seed)
    return float(correctness(margins).mean())


def check_params_round_trip(attacker, name: str, **_) -> None:
    """scikit-learn's convention: `__init__` stores each argument (random_state among them) unchanged and nothing
    else, so get_params, set_params and clone rebuild the same attacker."""
    from sklearn.base import clone

    signature = inspect.signature(type(attacker).__init__)
    expected = {k for k, p in signature.parameters.items() if k != "self"}
    params = attacker.get_params(deep=False)
    assert set(params) == expected, f"{name}: get_params() {sorted(params)} != constructor args {sorted(expected)}"
    assert "random_state" in params, f"{name}: take random_state in __init__ (the seed is no argument of fit)"
    rebuilt = type(attacker)(**params)
    extra = sorted(set(vars(rebuilt)) - set(params))
    assert not extra, f"{name}: __init__ sets {extra} beyond its arguments (set fitted state in fit)"
    # sequences given as lists (as params.yaml gives them): each argument must come back as the very object given
    given = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    stored = type(attacker)(**given).get_params(deep=False)
    changed = sorted(k for k in given if stored[k] is not given[k])
    assert not changed, f"{name}: __init__ changes argument(s) {', '.join(changed)}: store them unchanged (clone and " \
                        f"set_params rely on it; convert in fit)"
    assert clone(attacker).get_params(deep=False) == params, f"{name}: clone() changes the parameters"
    copied = clone(attacker)
    assert copied.set_params(random_state=12345) is copied and copied.get_params()["random_state"] == 12345, \
        f"{name}: set_params(random_state=...) must set it and return the attacker"
    assert "random_state" not in attacker.describe(), f"{name}: describe() shows the run's seed"


def check_fit_returns_self(attacker, name: str, train: list, **_) -> None:
    """fit returns the attacker itself (sklearn's convention: `attacker.fit(pairs).margins(...)`)."""
    estimator = fresh(attacker)
    assert estimator.fit(train) is estimator, f"{name}: fit() must return self"


def check_fit_reads_y(attacker, name: str, train: list, **_) -> None:
    """`y` says which text is the caption: swapped pairs with y = 0 teach what the pairs themselves teach."""
    import numpy as np

    margins = fresh(attacker).fit(train).margins(train)
    swapped = fresh(attacker).fit([p.swapped() for p in train], np.zeros(len(train), dtype=int))
    assert np.allclose(swapped.margins(train), margins, rtol=1e-6, atol=1e-6), \
        f"{name}: fit(swapped pairs, y=0) learns something else than fit(pairs): honour y (captions_first)"


def check_antisymmetric(attacker, name: str, train: list, held: list, **_) -> None:
    """Swapping a pair's texts negates its margin: p(caption first) = 1 - p(swapped), on seen and unseen pairs."""
    import numpy as np

    fitted = fresh(attacker).fit(train)
    for pairs in (train, held):
        swapped = [p.swapped() for p in pairs]
        forward, backward = fitted.predict_proba(pairs)[:, 1], fitted.predict_proba(swapped)[:, 1]
        worst = float(np.max(np.abs(forward - (1.0 - backward))))
        assert worst <= 1e-6, f"{name}: not antisymmetric: p(caption first) + p(swapped) differs from 1 by {worst:.3g}"
        assert np.allclose(fitted.margins(swapped), -fitted.margins(pairs), rtol=1e-6, atol=1e-6), \
            f"{name}: not antisymmetric: swapping a pair's texts does not negate its margin"


def check_deterministic_attacker(attacker, name: str, train: list, held: list, **_) -> None:
    """The same random_state gives the same margins: whatever the global random state, for a clone, and after
    another fit (nothing of a fit stays for the next one)."""
    import numpy as np

    random.seed(1)
    np.random.seed(1)
    first = fresh(attacker, 7).fit(train).margins(held)
    random.seed(2)
    np.random.seed(2)
    again = fresh(attacker, 7).fit(train).margins(held)
    assert np.array_equal(first, again), f"{name}: not deterministic: the same random_state gave other margins"
    refit = fresh(attacker, 7).fit(held).fit(train).margins(held)
    assert np.array_equal(first, refit), f"{name}: not deterministic: an earlier fit changed the next one"


def check_out_of_fold_only(attacker, name: str, tolerance: float, **_) -> None:
    """The margins of a pair come from models that never saw it: on pairs only memorising tells apart (a made-up
    word each), out-of-fold accuracy stays within `tolerance` of chance. An attacker that learns from the held
    fold (a feature map that reads which side a text is on, state kept across fits) gets them right."""
    accuracy = out_of_fold_accuracy(attacker, memorisable_pairs(120, seed=3))
    assert abs(accuracy - 0.5) <= tolerance, \
        (f"{name}: predictions are not out of fold: {accuracy:.1%} of pairs that only memorising tells apart "
         f"(chance 50% +- {tolerance:.0%})")


def check_shuffled_sides_at_chance(attacker, name: str, tolerance: float, **_) -> None:
    """With a cue on a random side, nothing marks the caption: out-of-fold accuracy within `tolerance` of chance."""
    accuracy = out_of_fold_accuracy(attacker, cued_pairs(160, seed=5, shuffled=True))
    assert abs(accuracy - 0.5) <= tolerance, \
        f"{name}: shuffled sides not at chance: {accuracy:.1%} out of fold (chance 50% +- {tolerance:.0%})"


ATTACKER_CHECKS = (
    check_params_round_trip, check_fit_returns_self, check_antisymmetric, check_deterministic_attacker,
    check_fit_reads_y, check_out_of_fold_only, check_shuffled_sides_at_chance,
)


def check_attacker(attacker, tolerance: float = 0.15) -> None:
    """Every attacker check, in order, on an attacker (an instance, a class built with its defaults, or a
    registered name built from no args): the estimator contract of foilforge/attacker.py.

    Raises AssertionError naming the broken property: get_params/clone round trip, fit returns self,
    antisymmetric, deterministic, fit reads y, out of fold only, shuffled sides at chance (`tolerance`: the
    largest distance from 50% accepted on the check's seeded pairs). Model-backed attackers: pass an instance
    with their model.
    """
    from foilforge.attacker import ATTACKERS

    if isinstance(attacker, str):
        attacker = ATTACKERS.build(ATTACKERS.newest(attacker), {}, where=f"check_attacker ({attacker})")
    elif inspect.isclass(attacker):
        attacker = attacker()
    # a subclass inherits its parent's registry_name: name it by its own class unless it is the registered one
    name = attacker.registry_name if "registry_name" in vars(type(attacker)) else type(attacker).__qualname__
    pairs = cued_pairs(48, seed=1)
    given = {"attacker": attacker, "name": name, "train": pairs[:32], "held": pairs[32:], "tolerance": tolerance}
    for check in ATTACKER_CHECKS:
        check(**given)
