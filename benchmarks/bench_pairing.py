"""Winoground groups on real data: how many foils get a second image (benchmarks/results/pairing.json).

Three parts, each on files of ../shared/data (skipped when absent):

* **COCO val 2017** (25,014 captions, 5,000 images): the COCO instruments' foilers run on the first `--coco-n`
  captions (relations: `--relations-n`; its span scoring is the slow part on a CPU) and their records are paired
  against every caption of val 2017. Coverage is over captions that got a foil: with the pairing-aware choice off
  (each caption keeps the foiler's best candidate) and on (a caption keeps a candidate with a partner when any of its
  candidates has one), after the assignment (a partner image at most once). The keep filters do not run here.
* **Released files through `foilforge pair FILE --like I`**: every VALSE dev piece and both SugarCrepe files.
* **Visual7W-sized input, an estimate**: Visual7W is not here. For existence and counting the released file's own
  records stand for the pool; a record's chance that one more pool question states its foil is estimated as
  q = (records of other images whose caption is the foil) / (records), and the coverage at a pool of N questions as
  the mean of 1 - (1 - q)^N. At the file's own size this model is compared with the measured mining coverage; at
  N = 47,300 (one 'how many' question per Visual7W image) it is a projection, labelled so.

    python -m benchmarks.bench_pairing [--coco-n 2000] [--relations-n 300] [--skip-coco]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "pairing.json"

VALSE_LIKE = {
    "existence.json": "existence", "counting-small-quant.json": "counting_small", "counting-hard.json": "counting_balanced",
    "counting-adversarial.json": "counting_adversarial", "relations.json": "relations", "plurals.json": "plurals",
    "foil-it.json": "foil_it", "actant-swap.json": "actant_swap", "action-replacement.json": "action_replacement",
}
SUGARCREPE_LIKE = {"replace_rel.json": "relations", "swap_obj.json": "swap_obj"}
VISUAL7W_IMAGES = 47_300


def _params():
    from foilforge.params import load_params

    return load_params(ROOT / "params.yaml")


def coco_part(params, coco_n: int, relations_n: int) -> dict:
    from foilforge.foiler import RunContext
    from foilforge.groups import assign
    from foilforge.pairing import find_candidates
    from pipeline.sources.base import Source, reader_for
    from pipeline.stages.foil import build_instrument
    from pipeline.stages.pair import build_for

    root = SHARED / "real" / "coco"
    source = Source(name="coco", format="coco", root=root, files={"captions": root / "captions_val2017.json"}, split="val")
    samples = sorted(reader_for("coco")(source), key=lambda s: str(s["id"]))
    images = len({s["image_file"] for s in samples})
    result = {"pool": {"captions": len(samples), "images": images}, "instruments": {}}
    for instrument, n in (("foil_it", coco_n), ("plurals", coco_n), ("relations", relations_n)):
        started = time.perf_counter()
        foiler = build_instrument(params, instrument)
        block = params["instruments"][instrument]
        context = RunContext(instrument=instrument, seed=params.get("seed", 0), params_key=f"instruments.{instrument}",
                             candidates_per_sample=block.get("candidates_per_sample") or 3,
                             samples={s["id"]: s for s in samples[:n]})
        records = foiler.run(samples[:n], context=context)
        pairer = build_for(params, instrument)
        candidates = find_candidates(pairer, records, samples)
        by_sample: dict[str, list[dict]] = {}
        for record in records:
            by_sample.setdefault(str(record["sample_id"]), []).append(record)
        best = [group[0] for group in by_sample.values()]
        choice = [next((r for r in group if candidates.get(str(r["id"]))), group[0]) for group in by_sample.values()]
        off, on = assign(best, candidates), assign(choice, candidates)
        result["instruments"][instrument] = {
            "captions_foiled": len(by_sample), "records": len(records), "captions_in": n,
            "choice_off": {"groups": len(off.partners), "coverage": round(len(off.partners) / len(best), 4)},
            "choice_on": {"groups": len(on.partners), "coverage": round(len(on.partners) / len(choice), 4)},
            "rules": on.report(len(choice))["rules"], "seconds": round(time.perf_counter() - started, 1)}
        print(instrument, json.dumps(result["instruments"][instrument]), flush=True)
    return result


def released_part(params, tmp: Path) -> dict:
    from pipeline.stages.pair import mine

    found = {}
    for folder, mapping in ((SHARED / "valse-dev", VALSE_LIKE), (SHARED / "real" / "sugarcrepe", SUGARCREPE_LIKE)):
        for name in sorted(p.name for p in folder.glob("*.json")):
            like = mapping.get(name)
            if like is None:
                found[f"{folder.name}/{name}"] = {"like": None, "why": "no pairer: the instrument's source says nothing "
                                                  "about another image (coreference)"}
                continue
            report = mine(params, folder / name, like, tmp / name)
            found[f"{folder.name}/{name}"] = {k: report[k] for k in ("like", "records", "groups", "coverage", "unpaired")}
            print(name, json.dumps(found[f"{folder.name}/{name}"]), flush=True)
    return found


def visual7w_estimate(params) -> dict:
    from foilforge.groups import text_key
    from foilforge.pairing import PAIRERS
    from pipeline.stages.pair import released_records

    estimates = {}
    for name, like in (("existence.json", "existence"), ("counting-small-quant.json", "counting_small"),
                       ("counting-hard.json", "counting_balanced")):
        path = SHARED / "valse-dev" / name
        if not path.exists():
            continue
        key = getattr(PAIRERS.get(PAIRERS.newest(params["instruments"][like]["pairing"]["pairer"])), "text_key", text_key)
        records = released_records(path)
        n = len(records)
        captions: dict[str, set] = {}
        for r in records:
            captions.setdefault(key(r["caption"]), set()).add(r["image_file"])
        q = [len(captions.get(key(r["foil"]), set()) - {r["image_file"]}) / n for r in records]

        def coverage(pool: int) -> float:
            return round(sum(1 - (1 - p) ** pool for p in q) / n, 4)

        estimates[name] = {"records": n, "model_at_file_size": coverage(n), "model_at_4x_file (the whole release)": coverage(4 * n),
                           f"projection_at_{VISUAL7W_IMAGES}_questions": coverage(VISUAL7W_IMAGES)}
    return estimates


def main(argv=None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coco-n", type=int, default=2000)
    parser.add_argument("--relations-n", type=int, default=300)
    parser.add_argument("--skip-coco", action="store_true")
    args = parser.parse_args(argv)
    if not SHARED.exists():
        print(f"skipped: {SHARED} is not there (the real data of the project's test machines)")
        return 0
    params = _params()
    results = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        results["released_files"] = released_part(params, Path(tmp))
    results["visual7w_estimate"] = visual7w_estimate(params)
    results["visual7w_estimate_how"] = ("q = share of the file's records (other images) whose caption is the foil; "
                                        "coverage(N) = mean over records of 1 - (1 - q)^N; a projection, not a measurement")
    if not args.skip_coco:
        results["coco_val2017"] = coco_part(params, args.coco_n, args.relations_n)
    from foilforge.io import write_json

    write_json(RESULT, results)
    print(f"written {RESULT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
