"""Span scoring at scale: the exhaustive reference against the default (shared prefix + pruning), side by side.

    .venv/bin/python -m benchmarks.bench_relations_scaling [--captions FILE] [--limit 300] [--skip-masked] [--skip-actions]

Three comparisons, each on the same slots and candidates, one timed run per mode:

* relations, causal LM (params.yaml `instruments.relations.args.ranker`, the
  offline SmolLM2): the first --limit captions of a COCO captions file in
  annotation-id order (default: the real COCO val 2017 file under ../shared),
  the attested list and slots built as `relations.v1` builds them with the
  instrument's args;
* relations, masked LM: the same slots and candidates with a tiny random BERT
  (tests/tiny_models.py): agreement of the code paths, not ranking quality;
* action replacement: the SWiG sample (params.yaml `sources.swig`) through
  `RankerProposer` with the instrument's proposer block.

For each: seconds of the reference (`exhaustive: true`) and of the default,
their ratio, top-1 agreement (share of slots whose best fill is the same) and
mean top-k overlap (|top-k reference & top-k default| / k); for relations also
the variants without lookahead (the first-token pass alone) and
with certified pruning. By default the relations candidates are the spans
attested in every caption of the file (min count 2): what a full build
proposes for each slot, and where pruning matters (more spans than the first
--limit captions attest: the results' `candidates`). Writes
benchmarks/results/relations_scaling.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.common import REAL_COCO, read_captions, result_path, write_result

NAME = "relations_scaling"


def agreement(reference: list[list[tuple[str, float]]], candidate: list[list[tuple[str, float]]], k: int) -> dict:
    """Top-1 agreement and mean top-k overlap of two rankings of the same slots."""
    pairs = [(a, b) for a, b in zip(reference, candidate) if a]
    top1 = sum(a[0][0] == (b[0][0] if b else None) for a, b in pairs) / len(pairs)
    overlap = sum(len({f for f, _ in a[:k]} & {f for f, _ in b[:k]}) / min(k, len(a)) for a, b in pairs) / len(pairs)
    return {"slots_compared": len(pairs), "top1_agreement": round(top1, 4), f"mean_top{k}_overlap": round(overlap, 4)}


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def compare(name: str, block: dict, run, k: int, param_key: str, variants: dict | None = None) -> dict:
    """Time `run(scorer)` with the reference and with the default scorer built from `block`; compare rankings.

    `variants`: other settings of the same block ({label: args}), each timed and compared to the reference too.
    """
    from foilforge.span_ranking import DEFAULT_LOOKAHEAD_WORDS, DEFAULT_PRUNE_TO, build_span_ranker

    reference = build_span_ranker({**block, "exhaustive": True}, param_key)
    run(reference, warm_up=True)
    ranked_ref, seconds_ref = timed(lambda: run(reference))
    result = {
        "model": {key: block.get(key) for key in ("kind", "name_or_path", "device", "dtype", "batch_size")},
        "default_prune_to": block.get("prune_to", DEFAULT_PRUNE_TO),
        "default_lookahead_words": block.get("lookahead_words", DEFAULT_LOOKAHEAD_WORDS),
        "exhaustive_s": round(seconds_ref, 2),
    }
    for label, args in {"default": {}, **(variants or {})}.items():
        scorer = build_span_ranker({**block, **args}, param_key)
        run(scorer, warm_up=True)
        ranked, seconds = timed(lambda: run(scorer))
        entry = {"args": args, "seconds": round(seconds, 2),
                 "speed_ratio": round(seconds_ref / seconds, 2) if seconds else None, **agreement(ranked_ref, ranked, k)}
        if label == "default":  # the keys earlier results used
            result.update(default_s=entry["seconds"], speed_ratio=entry["speed_ratio"],
                          **{key: value for key, value in entry.items() if key not in ("args", "seconds", "speed_ratio")})
        else:
            result.setdefault("variants", {})[label] = entry
        print(name, label, entry, flush=True)
    return result


def relations_setup(args):
    from foilforge.foilers.lang.prepositions import attested_spans, parse, preposition_spans
    from foilforge.foilers.relations import Slot, candidate_spans
    from foilforge.nlp import load_spacy
    from foilforge.params import load_params

    instrument = load_params(args.params)["instruments"]["relations"]["args"]
    nlp = load_spacy(instrument.get("spacy_model", "en_core_web_sm"))
    captions = read_captions(args.captions, args.limit)
    docs = parse(captions, nlp)
    max_words = instrument.get("max_span_words", 3)
    if args.attested_from == "file":  # what a build over the whole file proposes: spans attested in all its captions
        attested = attested_spans(parse(read_captions(args.captions, 10 ** 9), nlp))
        candidates = candidate_spans(attested, max_words, args.min_count)
    else:
        candidates = candidate_spans(attested_spans(docs), max_words, instrument.get("min_count", 2))
    slots = [Slot(str(i), doc.text, span) for i, doc in enumerate(docs)
             for span in preposition_spans(doc) if span.words <= max_words]
    return instrument, candidates, slots


def action_setup(args):
    from foilforge.foilers.action_replacement import verb_slot
    from foilforge.io import read_jsonl
    from foilforge.params import load_params
    from foilforge.pipeline.stages import cli

    params = load_params(args.params)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "swig.jsonl"
        cli.main(["ingest", "swig", "--params", args.params, "--output", str(out)])
        samples = list(read_jsonl(out))
    slots = [slot for slot in (verb_slot(s) for s in samples) if slot is not None]
    return params["instruments"]["action_replacement"]["args"], slots


def main(argv=None) -> dict:
    from foilforge.foilers.action_replacement import RankerProposer
    from foilforge.foilers.relations import rank_fills

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", default=str(REAL_COCO))
    parser.add_argument("--limit", type=int, default=300, help="captions to use (default 300)")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--top-k", type=int, default=10, help="k of the top-k overlap (default 10, relations' top_k)")
    parser.add_argument("--attested-from", choices=("file", "limit"), default="file",
                        help="candidate spans attested in every caption of the file (a full build's list; default) "
                             "or only in the --limit captions")
    parser.add_argument("--min-count", type=int, default=2, help="with --attested-from file: spans seen this often")
    parser.add_argument("--skip-masked", action="store_true")
    parser.add_argument("--skip-actions", action="store_true")
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)
    if not Path(args.captions).exists():
        raise SystemExit(f"{args.captions} not found: give --captions (a COCO captions json)")

    import torch

    instrument, candidates, slots = relations_setup(args)
    result = {"captions_file": str(args.captions), "captions": args.limit, "slots": len(slots),
              "candidates": len(candidates), "top_k": args.top_k,
              "candidates_attested_in": "every caption of the file" if args.attested_from == "file"
              else f"the {args.limit} captions", "min_count": args.min_count if args.attested_from == "file" else None}

    def relations_run(scorer, warm_up=False):
        return rank_fills(scorer, slots[:2] if warm_up else slots, candidates, args.top_k)

    result["relations_causal_lm"] = compare("relations causal_lm", instrument["ranker"], relations_run, args.top_k,
                                            "instruments.relations.args.ranker",
                                            variants={"first_token_only": {"lookahead_words": 0},
                                                      "first_token_only_prune_to_20": {"lookahead_words": 0, "prune_to": 20},
                                                      "certified": {"certified": True}})
    if not args.skip_masked:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.tiny_models import TinyModels

        with tempfile.TemporaryDirectory() as tmp:
            bert = TinyModels(Path(tmp)).bert_mlm()
            block = {"kind": "masked_lm", "name_or_path": str(bert), "device": "cpu", "batch_size": 64}
            result["relations_masked_lm_tiny_random_bert"] = compare("relations masked_lm (tiny random BERT)", block,
                                                                     relations_run, args.top_k, "benchmark.masked_lm")
    if not args.skip_actions:
        action_args, verb_slots = action_setup(args)
        verbs = {slot.verb for slot in verb_slots}
        top_k = action_args.get("top_k", 30)

        def action_run(scorer, warm_up=False):
            return RankerProposer(scorer, verbs).propose(verb_slots[:2] if warm_up else verb_slots, top_k)

        entry = compare("action_replacement (SWiG sample)", action_args["proposer"], action_run, top_k,
                        "instruments.action_replacement.args.proposer")
        entry.update(slots=len(verb_slots), verbs=len(verbs))
        result["action_replacement_swig_sample"] = entry
    result.update(torch_threads=torch.get_num_threads())
    write_result(NAME, result, args, argv, path=args.output)
    print(result)
    return result


if __name__ == "__main__":
    main()
