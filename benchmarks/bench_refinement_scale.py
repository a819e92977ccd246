"""How the refinement's 0/1 program scales with the candidate pool (select stage, no model runs).

    .venv/bin/python -m benchmarks.bench_refinement_scale [--sizes 2000 8000 22000]

The refinement (filters/refinement.py `refine`) solves a 0/1 program with one
variable per candidate. A full-corpus instrument (25,014 COCO captions,
several proposals each) gives tens of thousands of candidates (relations_full_build.json: a full relations build), so this
measures the solve on seeded synthetic pools of that shape: samples with 3
proposals each, two scorers whose gaps lean to the caption (as text-only
scorers do before refinement), and preposition-like edits whose foil side
leans to rarer items (so the JS bound has work to do). Per size: seconds with
the JS bound and without, records kept, JS before -> after, records dropped
for JS and the item weight it took. Writes benchmarks/results/refinement_scale.json.
"""

from __future__ import annotations

import argparse
import random
import time

from benchmarks.common import result_path, write_result

NAME = "refinement_scale"
ITEMS = ("on", "in", "at", "with", "near", "under", "above", "behind", "beside", "inside", "outside", "across",
         "along", "through", "over", "below", "against", "around", "between", "beneath", "toward", "into")
PROPOSALS = 3


def synthetic_pool(candidates: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(ITEMS))]  # Zipf-like caption prepositions
    records = []
    for sample in range(candidates // PROPOSALS):
        caption_item = rng.choices(ITEMS, weights)[0]
        for k in range(PROPOSALS):
            foil_item = rng.choice([item for item in ITEMS if item != caption_item])
            lean = rng.gauss(0.4, 1.0)
            records.append({
                "id": f"I:{sample}" + (f"#{k}" if k else ""), "sample_id": str(sample),
                "classes": caption_item, "classes_foil": foil_item,
                "filters": {"plausibility": {"scores": {"lm": {"gap": round(lean + rng.gauss(0, 0.5), 3)},
                                                        "ngram": {"gap": round(lean + rng.gauss(0, 1.0), 3)}}}}})
    return records


def measure(candidates: int) -> dict:
    from foilforge.filters.refinement import refine

    pool = synthetic_pool(candidates)
    started = time.perf_counter()
    unbounded = refine(pool, ["lm", "ngram"], bins=2)
    unbounded_seconds = time.perf_counter() - started
    report: dict = {}
    started = time.perf_counter()
    kept = refine(pool, ["lm", "ngram"], bins=2, max_js_rise=0.05, report=report)
    seconds = time.perf_counter() - started
    return {"candidates": len(pool), "samples": len(pool) // PROPOSALS,
            "seconds_without_js_bound": round(unbounded_seconds, 2), "kept_without_js_bound": len(unbounded),
            "seconds": round(seconds, 2), "kept": len(kept),
            **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in report.items()}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 22000, 60000])
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)
    runs = []
    for size in args.sizes:
        runs.append(measure(size))
        print(runs[-1], flush=True)
    result = {"what": "refine() on seeded synthetic pools: 3 proposals a sample, 2 scorers, bins 2, max_js_rise 0.05",
              "runs": runs}
    write_result(NAME, result, args, argv, path=args.output)
    return result


if __name__ == "__main__":
    main()
