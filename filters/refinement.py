"""The refinement: the subset of candidates on which text-only scorers are at chance (select stage).

The gaps come from the plausibility filter's scores (filters/plausibility.py); its
`keep_subset` calls `refine`. For every scorer in `scorers` (default: all that scored), the gap d = caption score - foil score
of each candidate is binned by |d| (`bins` quantile bins per scorer over
the candidates) and sign. A candidate's cell is its tuple of |d| bins; its
pattern the tuple of signs. Within a cell, as many candidates are kept in
each pattern as in the mirrored pattern (every sign flipped), so in every
|d| bin of every scorer there are as many pairs with the caption ahead as
with the foil ahead: acc_r under each refinement scorer is at most 50% by
construction (exact ties, d = 0, count as the foil's win, as in acc_r).
Where several candidates share a `sample_id` (`candidates_per_sample`,
relations proposals, ...), at most one per sample is kept and the
refinement chooses which (`choose: true`); `choose: false` only drops
captions (each sample's first candidate, the one without a `#n` suffix, or
else its lowest id). The two members of a Winoground pair (`pair_id`: two
records that swap each other's caption and foil) are kept together or not at all.

The subset is the optimum of a 0/1 program (`RefinementProgram`, HiGHS
through scipy.optimize.milp): as many records as those constraints allow
(within HiGHS's proven gap, `MIP_REL_GAP`, or its bound after `MIP_NODE_LIMIT` nodes: exact on small pools, a few
records short on a full corpus, at most 8 of 20,000 on a 60,000-candidate
synthetic pool; the report says how many at most), then, as tie-breaks, the foiler's earlier proposals and the
smallest imbalance of the changed items (below). A greedy matching kept far fewer
(1,000 real COCO captions, relations: 504 against 588; sample relations 28
against 60). Deterministic: the same candidates, in any order, give the same subset.

The JS bound (`max_js_rise`, default 0.05; null turns
it off): balancing the scores can shift the caption-side and foil-side item
distributions apart (the kept pairs may favour a few foil prepositions). JS
"before" is that of the records the instrument would export without the
refinement (each sample's first candidate). The program's L1 imbalance is the
sum over the changed items of |foil-side count - caption-side count|; 0 means
equal histograms, JS 0. While the kept set's JS exceeds "before" by more than
`max_js_rise`, the imbalance gets a weight in the objective (`JS_WEIGHTS`:
below 0.5 a one-item edit is never dropped for its items, only the choice of
proposal and partner moves), and if that is not enough, records go: the
smallest higher weight whose kept set meets the bound (doubling, then bisection
on a log scale; a weight above the pool's size keeps an L1 of 0, which always
meets it). The adversarial filter's rounds refine pools that differ by a few
candidates, and each round's search starts at the weight the last one found
(`_weight_search`).
Each step is one unconstrained solve: a hard cap on L1 instead (a budget
constraint) makes every solve a hard knapsack-like program that HiGHS takes
minutes to close on a pool of a thousand candidates, and a raised weight finds
the same trade-off between records kept and imbalance wherever that trade-off
is convex.
Every kept set obeys the balance constraints, so acc_r stays at chance; the
cost is records, and the report says how many (`dropped_for_js`) and whether
the bound was met. With it, `js_noise_floor`: the JS that two samples of the
kept size from one and the same item distribution show. The plug-in JS of a
few hundred records is large even without any shift (1,000 real COCO
captions, relations: 0.16 at 588 records), so a kept set below its floor
shows no measurable shift; above it, the excess is real. Items are counted as
the bias stage counts them (`foilforge.records.changed_items`, with the
instrument's `bias...items` mode).
"""

from __future__ import annotations

import logging
import math

from foilforge.errors import InputError
from foilforge.metrics import js_divergence
from foilforge.records import changed_items, frequencies

log = logging.getLogger(__name__)

#: the most the refinement may raise JS(caption items, foil items) over the unrefined export
DEFAULT_MAX_JS_RISE = 0.05
#: draws of the JS noise floor (js_noise_floor): its standard error is well below the third decimal shown
JS_FLOOR_DRAWS = 200


def candidate_order(record_id) -> tuple:
    """`I:s` before `I:s#1` before `I:s#2` ... before `I:s#10`: the foiler's proposal order."""
    base, _, suffix = str(record_id).partition("#")
    return (base, int(suffix) if suffix.isdigit() else 0, str(record_id))


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def quantile_edges(values: list[float], bins: int) -> list[float]:
    """Upper edges of `bins` equal-count bins: edge k is the largest value of the k-th lowest n/bins values.

    A value goes to the first bin whose edge it does not exceed (the last bin is open).
    """
    ordered = sorted(values)
    return [ordered[max(0, (len(ordered) * k) // bins - 1)] for k in range(1, bins)] if ordered else []


def _bin(value: float, edges: list[float]) -> int:
    return sum(value > edge for edge in edges)


class RefinementProgram:
    """The refinement as a 0/1 program over the pool (one variable per candidate), solved by HiGHS.

    maximise  #kept - weight * L1(item imbalance)  (tie-breaks: the foiler's earlier proposals)
    subject to  at most one kept candidate per sample;
                per |gap| cell and sign pattern, as many kept as in the mirrored pattern;
                both members of a Winoground pair (`pair_id`) kept, or neither;
                per side balance (counts, rate, slack): |sum over kept of counts[record]| <= slack + rate * #kept.

    The L1 imbalance is sum over changed items of |foil-side count - caption-side count| among the
    kept records: 0 means the two item histograms are equal, so their JS is 0.
    """

    def __init__(self, pool: list[str], keys: dict, sample_of: dict, rank: dict, changed: dict | None,
                 pair_of: dict, balance: list[tuple[dict, float, float]] = ()):
        import numpy as np
        from scipy.sparse import coo_matrix

        self.pool = pool
        index = {rid: k for k, rid in enumerate(pool)}
        vocabulary = sorted({item for rid in pool for side in (changed or {}).get(rid, ()) for item in side})
        column = {item: k for k, item in enumerate(vocabulary)}
        n, m = len(pool), len(vocabulary)
        self.n, self.m = n, m
        rows, cols, vals, lower, upper = [], [], [], [], []

        def constraint(entries: dict, low: float, high: float):
            for col, val in entries.items():
                rows.append(len(lower))
                cols.append(col)
                vals.append(val)
            lower.append(low)
            upper.append(high)

        members: dict[str, list[int]] = {}
        for rid in pool:
            members.setdefault(sample_of[rid], []).append(index[rid])
        for indices in members.values():
            if len(indices) > 1:
                constraint({k: 1 for k in indices}, 0, 1)
        classes: dict[tuple, list[int]] = {}
        for rid in pool:
            classes.setdefault(keys[rid], []).append(index[rid])
        canonical = set()
        for cell, pattern in classes:
            if any(pattern):  # a tie under every scorer needs no partner
                first = next(s for s in pattern if s)
                canonical.add((cell, pattern if first > 0 else tuple(-s for s in pattern)))
        for cell, pattern in sorted(canonical):
            entries = {k: 1 for k in classes.get((cell, pattern), [])}
            entries.update({k: -1 for k in classes.get((cell, tuple(-s for s in pattern)), [])})
            constraint(entries, 0, 0)
        pairs: dict[str, list[int]] = {}
        for rid in pool:
            if pair_of.get(rid) is not None:
                pairs.setdefault(pair_of[rid], []).append(index[rid])
        for indices in pairs.values():
            if len(indices) == 2:
                constraint({indices[0]: 1, indices[1]: -1}, 0, 0)
        # side balances (the adversarial filter's): |sum of the kept records' caption-minus-foil counts| <= slack +
        # rate * (records kept), as two linear rows: sum (d - rate) x <= slack and sum (d + rate) x >= -slack
        for counts, rate, slack in balance:
            constraint({index[rid]: counts.get(rid, 0) - rate for rid in pool if counts.get(rid, 0) - rate},
                       -np.inf, slack)
            constraint({index[rid]: counts.get(rid, 0) + rate for rid in pool if counts.get(rid, 0) + rate},
                       -slack, np.inf)
        # per item, the candidates that move it: foil-side minus caption-side count (sparse: a corpus has
        # thousands of items and tens of thousands of candidates, each candidate moves one or two)
        moves: list[dict[int, float]] = [{} for _ in range(m)]
        for rid in pool:
            caption_items, foil_items = (changed or {}).get(rid, ((), ()))
            for items, step in ((foil_items, 1.0), (caption_items, -1.0)):
                for item in items:
                    row = moves[column[item]]
                    row[index[rid]] = row.get(index[rid], 0.0) + step
        self.moves = [{k: d for k, d in row.items() if d} for row in moves]  # an item on both sides moves nothing
        for v, entries in enumerate(self.moves):  # t_v >= |moves_v . x|
            constraint({**{k: -d for k, d in entries.items()}, n + v: 1}, 0, np.inf)
            constraint({**entries, n + v: 1}, 0, np.inf)
        self.matrix = coo_matrix((vals, (rows, cols)), shape=(len(lower), n + m)).tocsr()
        self.lower, self.upper = np.array(lower, dtype=float), np.array(upper, dtype=float)
        self.max_l1 = float(sum(abs(d) for entries in self.moves for d in entries.values()))
        # tie-breaks, together worth less than one record: earlier proposals, then a smaller imbalance
        self.rank_cost = np.array([rank[rid] for rid in pool], dtype=float) / (4 * (sum(rank.values()) + 1))

    def imbalance(self, kept: list[str]) -> int:
        """The L1 item imbalance of a kept set."""
        kept = set(kept)
        chosen = {k for k, rid in enumerate(self.pool) if rid in kept}
        return int(sum(abs(sum(d for k, d in entries.items() if k in chosen)) for entries in self.moves))

    def solve(self, weight: float) -> tuple[list[str], float]:
        """(kept ids, records short of the optimum at most) at L1 weight `weight`.

        The second figure is HiGHS's proven bound: the optimum's objective is at most this far below the
        returned one, and one record is worth about 1 in it.
        """
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp

        if not self.n:
            return [], 0.0
        cost = np.concatenate([-1 + self.rank_cost, np.full(self.m, max(weight, 1 / (4 * (self.max_l1 + 1))))])
        result = milp(cost, constraints=LinearConstraint(self.matrix, self.lower, self.upper),
                      integrality=np.concatenate([np.ones(self.n), np.zeros(self.m)]),
                      bounds=Bounds(np.zeros(self.n + self.m), np.concatenate([np.ones(self.n), np.full(self.m, np.inf)])),
                      options={"mip_rel_gap": MIP_REL_GAP, "node_limit": MIP_NODE_LIMIT})
        if result.x is None:  # keeping nothing is always feasible, and HiGHS's heuristics find a solution at its root
            raise RuntimeError(f"the refinement program found no solution within {MIP_NODE_LIMIT} branch-and-bound "
                               f"nodes: {result.message}")
        kept = [rid for rid, value in zip(self.pool, result.x[:self.n]) if value > 0.5]
        return kept, round(float(result.mip_gap or 0.0) * abs(float(result.fun)), 2)


#: HiGHS stops once its solution is proven within this share of the optimum. Proving the exact optimum can take
#: branch and bound for ever on a large pool (a 22,000-candidate synthetic pool ran over 10 min without ending;
#: at 1e-3 it takes 2 s and keeps 7,332 of 7,333 samples); the report gives the bound it reached
#: (`records_from_optimum_at_most`). A small pool is solved exactly (1e-3 of a few hundred records is below one).
MIP_REL_GAP = 1e-3
#: ... or once it has searched this many branch-and-bound nodes, with the best solution found and the bound it proved
#: (a count, not a clock: the same pool gives the same subset on any machine). The programs that reach it are the
#: adversarial filter's near weight 1, where a record and a unit of item imbalance are worth about the same: HiGHS
#: finds a kept set as large at or near its root and spends most nodes on the proof, so a lower limit mostly
#: costs proof, not records: the select metrics' `records_from_optimum_at_most` says how much (docs/performance.md,
#: "The refinement's 0/1 program", compares 100 with 1,000). A random pool of 40 samples never ends
#: (tests/test_plausibility.py).
MIP_NODE_LIMIT = 100

#: L1 weights tried in turn while the kept set's JS exceeds the bound. Below 0.5 no one-item edit is dropped
#: for its items (keeping it adds at most 2 to L1): only the choice among proposals and mirror partners moves
JS_WEIGHTS = (0.25, 0.45)
#: bisection steps on log(weight) once records must go, after doubling found a weight that meets the bound: the
#: weight found is within a factor of 2 ** (1 / 2 ** 4) (4.4%) of the smallest that meets it. The smallest sits
#: where a unit of imbalance costs about one record (weight 1 plus the tie-breaks), and the programs near it are
#: the hardest HiGHS meets here (3-16 s each against under 1 s elsewhere on the sample's foil_it pool); further
#: steps there moved no kept set of the sample (docs/performance.md)
WEIGHT_BISECTION_STEPS = 4
#: rungs of the weight ladder per doubling of the weight (`_weight_search`)
WEIGHT_STEPS_PER_DOUBLING = 2 ** WEIGHT_BISECTION_STEPS


def _weight_search(program: RefinementProgram, meets, start_weight: float | None = None) -> tuple[tuple, float]:
    """((kept ids, records short of the optimum), weight) at the smallest weight of the ladder
    JS_WEIGHTS[-1] * 2 ** (k / WEIGHT_STEPS_PER_DOUBLING), k = 1, 2, ..., whose kept set `meets` the bound while the
    one a step below does not (k = 0, the last weight of JS_WEIGHTS, did not).

    Without `start_weight` the search doubles the weight until a kept set meets the bound, then bisects the last
    doubling. With it (the adversarial filter's next round: a few candidates fewer, the same bound) it starts at
    that rung and walks down or up in steps that double, then bisects: where the answer has not moved, two solves
    (that rung and the one below) instead of six. Both answer to the same precision, a factor of
    2 ** (1 / WEIGHT_STEPS_PER_DOUBLING); they can settle on other rungs only where meeting the bound is not
    monotone in the weight. Above the pool's size a unit of L1 costs more than every record together: L1 0, equal
    item histograms, JS 0, so the ladder ends there (`top`), a rung that always meets the bound.
    """
    base, cap = JS_WEIGHTS[-1], program.n + 1.0
    steps = WEIGHT_STEPS_PER_DOUBLING
    top = max(1, math.ceil(steps * math.log2(cap / base)))

    def weight(k: int) -> float:
        return min(base * 2 ** (k / steps), cap)

    probes: dict[int, tuple[bool, tuple]] = {}

    def probe(k: int) -> bool:
        if k not in probes:
            trial = program.solve(weight(k))
            probes[k] = (k >= top or meets(trial[0]), trial)
        return probes[k][0]

    low = 0  # JS_WEIGHTS[-1]: its kept set did not meet the bound
    if start_weight is not None and start_weight > base:
        high, step = min(max(round(steps * math.log2(start_weight / base)), 1), top), 1
        if probe(high):
            while high - low > 1:  # walk down to a rung that does not meet it
                below = max(high - step, low + 1)
                if not probe(below):
                    low = below
                    break
                high, step = below, step * 2
        else:
            while not probe(high):
                low, high, step = high, min(high + step, top), step * 2
    else:
        high = min(steps, top)  # doubling first: near-exact balance (high weights) is the slow end of the program
        while not probe(high):
            low, high = high, min(high + steps, top)
    while high - low > 1:
        middle = (low + high) // 2
        if probe(middle):
            high = middle
        else:
            low = middle
    return probes[high][1], round(weight(high), 4)


def refine(candidates: list[dict], scorers: list[str], bins: int = 2, choose: bool = True,
           path="<records>", max_js_rise: float | None = None, item_mode: str = "direct",
           report: dict | None = None, exclude=frozenset(), prefer: dict | None = None,
           balance: list[tuple[dict, float, float]] = (), js_floor_aware: bool = False,
           start_weight: float | None = None) -> set[str]:
    """Ids of the kept candidates: per sample at most one, balanced per scorer in every |gap| bin (see module doc).

    `candidates`: records with `id`, `sample_id` and `filters.plausibility.scores.<scorer>.gap` (and, with
    `max_js_rise`, `classes`/`classes_foil`). `report`, if given, receives the JS figures of the bound.
    The adversarial filter (filters/adversarial.py) adds: `exclude`, ids never kept (the |gap| bins and JS
    "before" still come from every candidate); `prefer`, id -> a number, lower first among a sample's
    candidates (instead of the foiler's proposal order); `balance`, side balances (RefinementProgram);
    `js_floor_aware`, a kept set also meets the JS bound when its JS is within the noise floor of its own size
    (the plug-in JS of a small set is large without any shift, so "no higher than the unrefined set" would
    otherwise drop records for sampling noise alone as the set shrinks); `start_weight`, the imbalance weight an
    earlier search on a similar pool settled on (its report's `imbalance_weight`), where this one starts
    (`_weight_search`).
    """
    gaps: dict[str, tuple[float, ...]] = {}
    for record in candidates:
        scores = ((record.get("filters") or {}).get("plausibility") or {}).get("scores") or {}
        row = []
        for name in scorers:
            if not isinstance(scores.get(name), dict) or not isinstance(scores[name].get("gap"), (int, float)):
                raise InputError(path, f"no plausibility score of scorer {name!r}: add it to params.yaml "
                                       f"filters.plausibility.scorers and rerun `foilforge score`",
                                 record=record.get("id"), field=f"filters.plausibility.scores.{name}")
            row.append(float(scores[name]["gap"]))
        gaps[record["id"]] = tuple(row)
    by_sample: dict[str, list[str]] = {}
    for record in sorted(candidates, key=lambda r: candidate_order(r["id"])):
        by_sample.setdefault(str(record.get("sample_id", record["id"])), []).append(record["id"])
    if not choose:
        by_sample = {sid: ids[:1] for sid, ids in by_sample.items()}
    pool = [rid for ids in by_sample.values() for rid in ids]
    edges = [quantile_edges([abs(gaps[rid][k]) for rid in pool], bins) for k in range(len(scorers))]
    unrefined = [ids[0] for ids in by_sample.values()]  # what the instrument would export without the refinement
    if exclude or prefer is not None:
        by_sample = {sid: sorted((rid for rid in ids if rid not in exclude),
                                 key=lambda rid: (prefer or {}).get(rid, 0.0))  # stable: proposal order on ties
                     for sid, ids in by_sample.items()}
        by_sample = {sid: ids for sid, ids in by_sample.items() if ids}
        pool = [rid for ids in by_sample.values() for rid in ids]
    keys = {rid: (tuple(_bin(abs(d), e) for d, e in zip(gaps[rid], edges)), tuple(_sign(d) for d in gaps[rid]))
            for rid in pool}
    by_id = {r["id"]: r for r in candidates}
    changed = None if max_js_rise is None else {rid: changed_items(by_id[rid], item_mode, path, rid)
                                                 for rid in set(pool) | set(unrefined)}
    program = RefinementProgram(
        pool, keys, sample_of={rid: sid for sid, ids in by_sample.items() for rid in ids},
        rank={rid: k for ids in by_sample.values() for k, rid in enumerate(ids)}, changed=changed,
        pair_of={rid: by_id[rid].get("pair_id") for rid in pool}, balance=balance)
    kept, short = program.solve(0.0)
    matched_size = len(kept)
    if report is not None:
        report["records_from_optimum_at_most"] = short
    if max_js_rise is None:
        return set(kept)

    def js_of(ids):  # as the bias stage counts them
        return js_divergence(*frequencies([(rid, by_id[rid]) for rid in ids], item_mode, path))

    before = js_of(unrefined)
    matched = after = js_of(kept)
    bound = None if before is None else before + max_js_rise
    floors: dict[int, float | None] = {}

    def floor_of(size):
        if size not in floors:
            floors[size] = js_noise_floor([changed[rid] for rid in unrefined], size)
        return floors[size]

    def meets(value, size=None):
        if bound is None or value is None:
            return True
        # above the bound, a JS that sampling alone shows at this size is no measurable shift (js_floor_aware)
        return value <= bound + 1e-12 or (js_floor_aware and size is not None and value <= (floor_of(size) or 0) + 1e-12)

    weight_used = 0.0
    for weight in JS_WEIGHTS:
        if meets(after, len(kept)):
            break
        trial, trial_short = program.solve(weight)
        if js_floor_aware and len(trial) < matched_size:
            # records whose edits move several items (existence's numeral lists) can go at these weights; the
            # floor of a smaller set is higher, so such a set would "meet" the bound by shrinking: leave that to
            # the weight bisection below, which holds sets to the bound itself
            continue
        (kept, short), weight_used, after = (trial, trial_short), weight, js_of(trial)
    if not meets(after, len(kept)):
        # records must go: the smallest weight of the ladder above the last one tried whose kept set meets the bound
        # itself (a set shrunk below its floor would "meet" it vacuously)
        (kept, short), weight_used = _weight_search(program, lambda ids: meets(js_of(ids)), start_weight)
        after = js_of(kept)
    if report is not None:
        report.update(js_before=before, js_matched=matched, js_after=after, max_js_rise=max_js_rise,
                      dropped_for_js=matched_size - len(kept),
                      imbalance_weight=weight_used, imbalance_l1=program.imbalance(kept),
                      js_bound_met=None if bound is None or after is None else after <= bound + 1e-12,
                      js_noise_floor=js_noise_floor([changed[rid] for rid in unrefined], len(kept)),
                      records_from_optimum_at_most=short)
    return set(kept)


def js_noise_floor(records: list[tuple[tuple, tuple]], size: int, draws: int = JS_FLOOR_DRAWS) -> float | None:
    """The JS that sampling alone gives `size` records: caption and foil sides drawn from one pool.

    `records`: the (caption items, foil items) of the unrefined records; the pool is all their sides. Each
    draw takes `size` sides for the caption histogram and `size` for the foil histogram, with replacement,
    so both come from the same distribution and their true JS is 0; the mean over `draws` draws (seeded:
    the same records give the same figure) is what the plug-in JS of that many records shows anyway.
    A kept set whose JS is below it cannot be told apart from no shift at all at this size.
    """
    import numpy as np
    from scipy import sparse

    sides = [side for pair in records for side in pair if side]
    if not size or not sides:
        return None
    vocabulary = sorted({item for side in sides for item in side})
    column = {item: k for k, item in enumerate(vocabulary)}
    entries = [(row, column[item]) for row, side in enumerate(sides) for item in side]
    rows, columns = zip(*entries)
    # sides x items (an item twice in a side counts 2); sparse: a draw's histogram is its sides' multiplicities
    # times this, never a draws x size x items array (whole integers: the sums are exact in any order)
    counts = sparse.csr_matrix((np.ones(len(entries)), (rows, columns)), shape=(len(sides), len(vocabulary)))
    rng = np.random.default_rng(0)

    def histograms(drawn):
        multiplicity = np.stack([np.bincount(row, minlength=len(sides)) for row in drawn]).astype(float)
        return np.ascontiguousarray((counts.T @ multiplicity.T).T)

    caption = histograms(rng.integers(0, len(sides), (draws, size)))
    foil = histograms(rng.integers(0, len(sides), (draws, size)))
    return float(_js_rows(caption, foil).mean())


def _js_rows(caption, foil):
    """`foilforge.metrics.js_divergence` of each row pair of two count matrices (a row with an empty side: +inf)."""
    import numpy as np
    from scipy.spatial.distance import jensenshannon

    empty = (caption.sum(axis=1) == 0) | (foil.sum(axis=1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = jensenshannon(caption, foil, base=2, axis=1)
    # as js_divergence: scipy's nan for identical rows is 0
    return np.where(empty, np.inf, np.nan_to_num(value, nan=0.0))
