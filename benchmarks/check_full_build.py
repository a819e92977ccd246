"""Check a full relations build made elsewhere (e.g. on a lent GPU in bfloat16) against this machine's float32 scores.

    .venv/bin/python -m benchmarks.check_full_build FOILS[.xz] METRICS RUN_JSON [--captions FILE] [--limit 300]

FOILS and METRICS are the `foilforge foil relations` outputs of the full build;
RUN_JSON holds what the run measured (wall time, peak memory, device: the
`run` entries are copied as they are). For the captions among the first
--limit of the COCO file (annotation-id order) that have exactly one
preposition slot, the slot is scored here with the instrument's scorer as
params.yaml configures it (float32, this machine's device) over the build's
candidate list (the keys of its foil histogram), and compared with the
build's proposals: top-1 agreement (the build's rank-0 fill is this
machine's best), agreement of the first three ranks, and the mean and
largest difference of the rank-0 proposal's log-probability where both put
the same fill first.
Writes benchmarks/results/relations_full_build.json.
"""

from __future__ import annotations

import argparse
import json
import lzma
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "relations_full_build.json"


def read_records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main(argv=None) -> dict:
    from benchmarks.bench_relations_scaling import REAL_CAPTIONS
    from foilforge.foilers.lang.prepositions import parse, preposition_spans
    from foilforge.foilers.relations import Slot, rank_fills
    from foilforge.io import read_json, write_json
    from foilforge.nlp import load_spacy
    from foilforge.params import load_params
    from foilforge.scorers import build_span_scorer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("foils", type=Path)
    parser.add_argument("metrics", type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--captions", default=str(REAL_CAPTIONS))
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)

    metrics = read_json(args.metrics)
    candidates = list(metrics["foil_histogram"])
    records = read_records(args.foils)
    proposals: dict[str, list[tuple[int, str, float]]] = {}
    for record in records:
        proposals.setdefault(record["sample_id"], []).append(
            (record["proposal_rank"], record["classes_foil"], record["proposal_score"]))
    annotations = sorted(read_json(args.captions)["annotations"], key=lambda a: a["id"])[: args.limit]
    instrument = load_params(args.params)["instruments"]["relations"]["args"]
    max_words = instrument.get("max_span_words", 3)
    docs = parse([a["caption"] for a in annotations], load_spacy(instrument.get("spacy_model", "en_core_web_sm")))
    slots = []
    for annotation, doc in zip(annotations, docs):
        spans = [span for span in preposition_spans(doc) if span.words <= max_words]
        sample_id = f"coco:{annotation['id']}"
        if len(spans) == 1 and sample_id in proposals:
            slots.append(Slot(sample_id, doc.text, spans[0]))
    scorer = build_span_scorer(instrument["scorer"], "instruments.relations.args.scorer")
    started = time.perf_counter()
    ranked = rank_fills(scorer, slots, candidates, instrument.get("top_k", 10))
    seconds = time.perf_counter() - started
    top1 = first3 = 0
    gaps = []
    for slot, here in zip(slots, ranked):
        theirs = sorted(proposals[slot.sample_id])
        mine = [fill for fill, _ in here]
        best_rank, best_fill, best_score = theirs[0]
        if best_rank == 0 and mine and mine[0] == best_fill.lower():
            top1 += 1
            gaps.append(abs(here[0][1] - best_score))
        first3 += all(rank < len(mine) and mine[rank] == fill.lower() for rank, fill, _ in theirs if rank < 3)
    result = {
        "run": read_json(args.run),
        "instrument_metrics": {key: metrics[key] for key in ("captions", "slots", "attested_candidates", "foils",
                                                             "paired", "unpaired", "js_divergence") if key in metrics},
        "check_against_this_machine": {
            "captions_file": str(args.captions), "first_captions": args.limit, "single_slot_captions": len(slots),
            "scorer_here": {"kind": scorer.kind, "name_or_path": scorer.spec.name_or_path, "device": str(scorer.lm.device),
                            "dtype": scorer.spec.dtype},
            "seconds_here": round(seconds, 1),
            "top1_agreement": round(top1 / len(slots), 4) if slots else None,
            "first3_ranks_agree": round(first3 / len(slots), 4) if slots else None,
            # where both put the same fill first: |its log-probability there - here|
            "mean_abs_logprob_difference_at_rank0": round(sum(gaps) / len(gaps), 4) if gaps else None,
            "max_abs_logprob_difference_at_rank0": round(max(gaps), 4) if gaps else None,
        },
    }
    write_json(args.output, result)
    print(json.dumps(result["check_against_this_machine"]), flush=True)
    return result


if __name__ == "__main__":
    main()
