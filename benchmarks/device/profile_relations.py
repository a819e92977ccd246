"""Where relations' time goes on a GPU, batch by batch: parsing, the span ranker's wall and GPU time, and
the operators and Python functions of one warm batch (benchmarks/device/run.sh, `RELPROF_N`).

    python3 -m benchmarks.device.profile_relations --captions FILE --lm DIR --out DIR [--n 1500] [--batch 375]
                                                    [--variant NAME=JSON ...]

The instrument is params.yaml's relations, on a GPU with the CUDA settings of benchmarks/bench_coco_build.py
(`--cuda-tuned`; on a CPU with params.yaml's), on the first --n COCO captions. The foiler is built once and `corpus_pass` runs on all of
them, as the foil stage does; then each batch of --batch captions is parsed and scored with the stage's own
code (foilers/relations.py `propose_batch`), timed in phases with the GPU synchronised at each phase's end:
`parse_s` (spaCy), `score_s` (the span ranker's calls, wall) and `gpu_busy_s` (CUDA events around them:
the time the GPU stream spent from the first launch to the last result, idle gaps included, so
`score_s - gpu_busy_s` is host work before the first launch). The second batch also runs under
torch.profiler (the operators with most self GPU time and most self CPU time, and the sum of all kernels'
time: how busy the GPU really was) and cProfile (the functions with most own time, and who calls the
attention). Each `--variant NAME=JSON` reruns the timed batches with those scorer args merged in (e.g.
`cudnn={"sdpa_backends":null}`), on the same slots: their time beside the default's (rerun warm) and the
share of slots whose best fill and whose top-k ranking are the default's.
Writes DIR/relations_profile.json after every part.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import tempfile
import time
from pathlib import Path


def main(argv=None) -> dict:
    import torch

    from benchmarks.bench_coco_build import coco_params, top_operators
    from foilforge.foiler import RunContext
    from foilforge.foilers.lang.prepositions import parse, preposition_spans
    from foilforge.foilers.relations import Slot, rank_fills
    from foilforge.io import iter_jsonl, write_json
    from foilforge.pipeline.plugins import build_instrument
    from foilforge.pipeline.stages.ingest import ingest

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", type=Path, required=True)
    parser.add_argument("--lm", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=375)
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON: scorer args to compare")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    result = {"benchmark": "relations_profile", "device": torch.cuda.get_device_name() if gpu else "cpu",
              "torch": torch.__version__, "captions": args.n, "batch": args.batch, "argv": argv or [], "batches": [],
              # the fast tokenizer's threads: one per core unless these say otherwise
              "tokenizer_env": {k: os.environ.get(k) for k in ("TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS")},
              "cpus": os.cpu_count()}
    out = args.out / "relations_profile.json"

    def save():
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(out, result)

    def synced():
        if gpu:
            torch.cuda.synchronize()
        return time.perf_counter()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "coco").mkdir()
        (tmp / "coco" / "captions_val2017.json").symlink_to(args.captions.resolve())
        params = coco_params(args.n, args.batch, device, {}, tmp / "coco", os.cpu_count() or 1, 1, args.lm,
                             ("grammaticality",), cuda_tuned=gpu)
        ingest(params, "coco", tmp / "coco.jsonl")
        samples = [s for _, s in zip(range(args.n), iter_jsonl(tmp / "coco.jsonl"))]
        t0 = time.perf_counter()
        foiler = build_instrument(params, "relations")
        context = RunContext("relations", seed=0, params_key="instruments.relations")
        candidates = foiler.corpus_pass(samples, context)
        scorer = foiler._get_ranker(context.key("scorer"))
        result["setup_s"] = round(synced() - t0, 2)
        result["scorer_args"] = {k: getattr(scorer, k, None) for k in ("prune_to", "lookahead_words", "max_batch_tokens")}
        result["score_chunk"] = foiler.score_chunk
        result["candidates"] = len(candidates)
        nlp = foiler._nlp(context)
        batches = [samples[i : i + args.batch] for i in range(0, len(samples), args.batch)]
        slots_of = []
        for index, batch in enumerate(batches):
            entry = {"batch": index, "captions": len(batch)}
            start = synced()
            docs = parse([s["caption"] for s in batch], nlp)
            slots = [Slot(s["id"], s["caption"], span) for s, doc in zip(batch, docs)
                     for span in preposition_spans(doc, foiler.non_spatial) if span.words <= foiler.max_span_words]
            slots_of.append(slots)
            entry.update(parse_s=round(synced() - start, 3), slots=len(slots))
            profiled = index == 1
            if profiled:
                from torch.profiler import ProfilerActivity, profile

                activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
                torch_prof = profile(activities=activities)
                torch_prof.__enter__()
                py_prof = cProfile.Profile()
                py_prof.enable()
            begin, end = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if gpu else (None, None)
            start = synced()
            if gpu:
                begin.record()
            ranked = rank_fills(scorer, slots, candidates, foiler.top_k, chunk=foiler.score_chunk)
            if gpu:
                end.record()
            entry["score_s"] = round(synced() - start, 3)
            if gpu:
                entry["gpu_busy_s"] = round(begin.elapsed_time(end) / 1000, 3)
            entry["ranked"] = len(ranked)
            if profiled:
                py_prof.disable()
                torch_prof.__exit__(None, None, None)
                kernels = [e for e in torch_prof.key_averages() if getattr(e, "device_type", None) is not None
                           and str(e.device_type).endswith("CUDA")]
                result["profiled_batch"] = {
                    "kernel_time_s": round(sum(getattr(e, "self_device_time_total", 0.0) for e in kernels) / 1e6, 3),
                    "top_gpu": top_operators(torch_prof, by_gpu=True) if gpu else [],
                    "top_cpu": top_operators(torch_prof, by_gpu=False),
                }
                stats = pstats.Stats(py_prof)
                top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:40]
                result["profiled_batch"]["top_own_s"] = [
                    {"function": f"{Path(file).name}:{line} {func}", "own_s": round(own, 3), "cumulative_s": round(cum, 3),
                     "calls": calls} for (file, line, func), (_, calls, own, cum, _) in top]
                text = io.StringIO()
                pstats.Stats(py_prof, stream=text).sort_stats("tottime").print_callers(r"scaled_dot_product_attention|\.item|tolist|synchronize|_local_scalar")
                (args.out / "callers.txt").parent.mkdir(parents=True, exist_ok=True)
                (args.out / "callers.txt").write_text(text.getvalue()[-60000:])
                text = io.StringIO()
                pstats.Stats(py_prof, stream=text).sort_stats("cumulative").print_stats(80)
                (args.out / "cumulative.txt").write_text(text.getvalue())
            result["batches"].append(entry)
            save()
        reference, reference_s = [], []
        for slots in slots_of:  # the default scorer again, warm, as the variants run
            start = synced()
            reference.append(rank_fills(scorer, slots, candidates, foiler.top_k, chunk=foiler.score_chunk))
            reference_s.append(round(synced() - start, 3))
        result["default_rerun_score_s"] = reference_s
        save()
        for spec in args.variant:
            name, _, overrides = spec.partition("=")
            block = {**params["instruments"]["relations"]["args"]["ranker"], **json.loads(overrides)}
            from foilforge.span_ranking import build_span_ranker

            variant = build_span_ranker(block, "instruments.relations.args.ranker")
            runs, slots_seen, same_top1, same_ranking = [], 0, 0, 0
            for slots, expected in zip(slots_of, reference):
                start = synced()
                ranked = rank_fills(variant, slots, candidates, foiler.top_k, chunk=foiler.score_chunk)
                runs.append(round(synced() - start, 3))
                for got, want in zip(ranked, expected):
                    slots_seen += 1
                    same_top1 += [f for f, _ in got[:1]] == [f for f, _ in want[:1]]
                    same_ranking += [f for f, _ in got] == [f for f, _ in want]
            result.setdefault("variants", {})[name] = {
                "args": json.loads(overrides), "score_s": runs, "slots": slots_seen,
                "same_top1_as_default": round(same_top1 / max(slots_seen, 1), 4),
                "same_top_k_ranking_as_default": round(same_ranking / max(slots_seen, 1), 4)}
            save()
    save()
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2)[:4000])
