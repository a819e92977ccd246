"""Groups whose second text is evidenced as true of the second image, on COCO val 2017 (results/group_evidence.json).

For each COCO instrument (foil_it, plurals, relations, swap_obj, swap_att) the foiler runs through its registry on
the first `--coco-n` captions of val 2017 (relations: `--relations-n`, its span scoring is slow on a CPU; the swaps:
`--swap-n`, a record pair needs both captions in the run), keeping `candidates_per_sample` candidates a caption,
and the records are paired against every caption of val 2017 (25,014 captions, 5,000 images), twice:

* **before**: the rule as it stood at commit `BEFORE_COMMIT` (read with `git show`; foil_it, plurals and relations:
  the partner mentions the foil's changed part and never the caption's, plus the relation claims involving the new
  noun; the swaps: record pairs, two records of the run whose captions are each other's foils);
* **after**: the instrument's pairer from params.yaml (coco_captions, the swaps included), with
  `pairing.min_support` (every claim supported).

For each: captions foiled, groups with the pairing-aware choice off and on, after the one-image-once assignment;
the groups' support, two ways: the share of the foil's claims (foilers/lang/claims.py) that the partner's captions
state, and the share of the foil's content words (lemmas of its nouns, verbs and adjectives) among the lemmas of the
partner captions' nouns, verbs and adjectives; the refusals by reason; the rules. The keep filters do not run
here: "exported" means assigned.

`results/group_evidence_groups.json` and `.md`: 30 groups a instrument drawn with `--seed` from the after groups
(all when fewer), each with caption_0, caption_1, the partner image's captions and the claims with their support.

    python -m benchmarks.bench_group_evidence [--coco-n 2000] [--relations-n 300] [--swap-n 5000]
        [--only foil_it,plurals] [--cache DIR]

`--cache DIR` keeps the foiled records (per instrument and caption count), so a rerun pairs without foiling again.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "group_evidence.json"
GROUPS = ROOT / "benchmarks" / "results" / "group_evidence_groups"
#: the last commit with the rule that required only the foil's changed part
BEFORE_COMMIT = "7255a89"
INSTRUMENTS = ("foil_it", "plurals", "relations", "swap_obj", "swap_att")
BINS = (("1.0", 1.0, 1.01), ("0.75-1", 0.75, 1.0), ("0.5-0.75", 0.5, 0.75), ("under 0.5", 0.0, 0.5))


def coco_samples() -> list[dict]:
    from foilforge.pipeline.sources.base import Source, reader_for

    root = SHARED / "real" / "coco"
    source = Source(name="coco", format="coco", root=root, files={"captions": root / "captions_val2017.json"}, split="val")
    return sorted(reader_for("coco")(source), key=lambda s: str(s["id"]))


def one_word_pairs(samples: list[dict]) -> dict:
    """Caption pairs of two images that differ in exactly one word (compared as the minimal-pair route compares
    texts): what the minimal-pair route could find at most, whatever the foilers propose."""
    from foilforge.foilers.lang.claims import minimal_key

    by_masked: dict[tuple, set] = {}
    for sample in samples:
        words = minimal_key(sample["caption"]).split()
        for i in range(len(words)):
            by_masked.setdefault((*words[:i], "*", *words[i + 1:]), set()).add((sample["image_file"], str(sample["id"])))
    pairs, captions = set(), set()
    for members in by_masked.values():
        for a in members:
            for b in members:
                if a[0] < b[0]:
                    pairs.add((a[1], b[1]))
                    captions.update((a[1], b[1]))
    return {"pairs": len(pairs), "captions_in_one": len(captions),
            "share_of_captions": round(len(captions) / len(samples), 4) if samples else None}


def foil(params, instrument: str, samples: list[dict], n: int, cache: Path | None) -> tuple[list[dict], float]:
    from foilforge.foiler import RunContext
    from foilforge.pipeline.plugins import build_instrument

    path = cache / f"{instrument}.{n}.json" if cache else None
    if path is not None and path.exists():
        stored = json.loads(path.read_text())
        return stored["records"], stored["seconds"]
    started = time.perf_counter()
    block = params["instruments"][instrument]
    context = RunContext(instrument=instrument, seed=params.get("seed", 0), params_key=f"instruments.{instrument}",
                         candidates_per_sample=block.get("candidates_per_sample") or 1,
                         samples={s["id"]: s for s in samples[:n]})
    records = build_instrument(params, instrument).run(samples[:n], context=context)
    seconds = round(time.perf_counter() - started, 1)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"records": records, "seconds": seconds}))
    return records, seconds


def before_coco_pairer():
    """coco_captions.v1 as it was at BEFORE_COMMIT (its Partner carries no claims), or None without git history."""
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE_COMMIT}:foilers/pairers/coco_captions.py"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("coco_captions_before")
    sys.modules[module.__name__] = module   # dataclasses look their module up
    exec(compile(source.replace('@PAIRERS.register("coco_captions.v1")', ""), "coco_captions_before", "exec"),
         module.__dict__)
    return module.CocoCaptions


def old_candidates(pairer, records, samples) -> dict:
    """The candidates as find_candidates gave them before claims (every partner the rule offered)."""
    pairer.index(samples, records)
    by_id = {str(s["id"]): s for s in samples}
    found = {}
    for record in sorted(records, key=lambda r: str(r["id"])):
        if not pairer.holds_group(record):
            found[str(record["id"])] = None
            continue
        seen, kept = set(), []
        for partner in pairer.candidates(record, by_id.get(str(record.get("sample_id")))):
            if partner.image_file != record.get("image_file") and partner.image_file not in seen:
                seen.add(partner.image_file)
                kept.append(partner)
        found[str(record["id"])] = kept
    return found


def choices(records: list[dict], candidates: dict) -> tuple[list[dict], list[dict]]:
    """(the foiler's best candidate of each caption, a candidate with a partner when any has one)."""
    by_sample: dict[str, list[dict]] = {}
    for record in records:
        by_sample.setdefault(str(record["sample_id"]), []).append(record)
    best = [group[0] for group in by_sample.values()]
    chosen = [next((r for r in group if candidates.get(str(r["id"]))), group[0]) for group in by_sample.values()]
    return best, chosen


def distribution(values: list[float | None]) -> dict:
    known = [v for v in values if v is not None]
    bins = {name: sum(low <= v < high for v in known) for name, low, high in BINS}
    return {"groups": len(values), "not_read": len(values) - len(known), **bins,
            "mean": round(sum(known) / len(known), 3) if known else None}


class Judge:
    """The two support measures of a group, read from one indexed coco_captions pairer."""

    def __init__(self, coco):
        self.coco = coco

    def claims(self, record: dict, partner):
        return self.coco.claims_on(record, partner.image_file)

    def claim_support(self, record: dict, partner) -> float | None:
        from foilforge.groups import support_of

        claims = self.claims(record, partner)
        return None if claims is None else support_of(claims)

    def word_share(self, record: dict, partner) -> float | None:
        from foilforge.foilers.lang.claims import content_lemmas

        words = content_lemmas(self.coco._doc(record["foil"]))
        if not words:
            return None
        return round(sum(partner.image_file in self.coco.images_stating(("word", w)) for w in words) / len(words), 4)


def measure(records, candidates, refusals, judge: Judge) -> tuple[dict, object]:
    from foilforge.groups import assign

    best, chosen = choices(records, candidates)
    off, on = assign(best, candidates, refusals), assign(chosen, candidates, refusals)
    by_id = {str(r["id"]): r for r in records}
    claim_support = [judge.claim_support(by_id[rid], p) for rid, p in sorted(on.partners.items())]
    words = [judge.word_share(by_id[rid], p) for rid, p in sorted(on.partners.items())]
    report = on.report(len(chosen))
    return {"choice_off": {"groups": len(off.partners), "coverage": round(len(off.partners) / len(best), 4) if best else None},
            "choice_on": {"groups": len(on.partners), "coverage": report["coverage"]},
            "support_claims": distribution(claim_support), "support_content_words": distribution(words),
            "unpaired": report["unpaired"], "refused_partners": report["refused_partners"],
            "rules": report["rules"]}, on


def evidence_row(record: dict, partner, texts: dict, judge: Judge) -> dict:
    captions = [{"id": sid, "caption": texts[sid]} for sid in sorted(texts)
                if texts[sid] is not None and judge.coco._images.get(partner.image_file)
                and sid in judge.coco._images[partner.image_file].sample_ids]
    claims = partner.claims or judge.claims(record, partner) or ()
    return {"record_id": record["id"], "image_0": record["image_file"], "image_1": partner.image_file,
            "caption_0": record["caption"], "caption_1": record["foil"], "rule": partner.rule,
            "support": partner.support, "content_word_share": judge.word_share(record, partner),
            "partner_captions": captions, "claims": [c.row() for c in claims], "absent": list(partner.absent)}


def run_instrument(params, instrument, samples, n, cache, before_cls, seed) -> tuple[dict, list[dict]]:
    from foilforge.groups import Refusals, pairing_settings
    from foilforge.pairing import PAIRERS, find_candidates, instrument_pairer, search_partners

    records, foil_seconds = foil(params, instrument, samples, n, cache)
    settings = pairing_settings(params, instrument)
    started = time.perf_counter()
    after_pairer = instrument_pairer(params, instrument)
    after, refusals = search_partners(after_pairer, records, samples, settings["min_support"])
    judge = Judge(after_pairer)
    result = {"captions_in": n, "records": len(records), "captions_foiled": len({r["sample_id"] for r in records}),
              "pairer": settings["pairer"], "min_support": settings["min_support"],
              "ranked_by": getattr(after_pairer, "ranked_by", None), "foil_seconds": foil_seconds}
    if instrument.startswith("swap"):
        old = find_candidates(PAIRERS.build("record_pairs.v1", {}), records, samples)
        result["before"], _ = measure(records, old, Refusals(), judge)
        result["before"]["rule"] = f"record_pairs.v1 (the swaps' pairer at {BEFORE_COMMIT})"
    elif before_cls is not None:
        old = old_candidates(before_cls(**{k: v for k, v in (settings.get("args") or {}).items()
                                           if k in ("spacy_model", "mode", "max_partners")}), records, samples)
        result["before"], _ = measure(records, old, Refusals(), judge)
        result["before"]["rule"] = f"coco_captions.v1 at {BEFORE_COMMIT}"
    result["after"], on = measure(records, after, refusals, judge)
    result["pair_seconds"] = round(time.perf_counter() - started, 1)
    texts = {str(s["id"]): s.get("caption") for s in samples}
    by_id = {str(r["id"]): r for r in records}
    grouped = sorted(on.partners.items())
    drawn = sorted(random.Random(seed).sample(grouped, min(30, len(grouped))))
    return result, [evidence_row(by_id[rid], partner, texts, judge) for rid, partner in drawn]


def markdown(groups: dict[str, list[dict]]) -> str:
    lines = ["# Groups drawn from the after rule on COCO val 2017, with their evidence", "",
             "Written by `python -m benchmarks.bench_group_evidence`. A claim is what caption_1 says of image_1; "
             "`by` lists the partner captions that state it. `absent`: what the rule checked the partner never "
             "states.", ""]
    for instrument, rows in groups.items():
        lines += [f"## {instrument} ({len(rows)} groups)", ""]
        for k, row in enumerate(rows, 1):
            lines += [f"{k}. **caption_0** {row['caption_0']}  ", f"   **caption_1** {row['caption_1']}  ",
                      f"   image_0 {row['image_0']}, image_1 {row['image_1']}; {row['rule']}; support {row['support']}, "
                      f"content words {row['content_word_share']}  ",
                      "   partner's captions: " + " / ".join(f"[{c['id']}] {c['caption']}" for c in row["partner_captions"]) + "  ",
                      "   claims: " + "; ".join(f"{c['claim']} ({c['kind']}{', edited' if c['edited'] else ''}: "
                                                f"{', '.join(c['supported_by']) or 'UNSUPPORTED'})" for c in row["claims"]) + "  ",
                      f"   absent: {'; '.join(row['absent'])}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    from foilforge.io import atomic_write, write_json
    from foilforge.params import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coco-n", type=int, default=2000)
    parser.add_argument("--relations-n", type=int, default=300)
    parser.add_argument("--swap-n", type=int, default=5000)
    parser.add_argument("--only", default=None, help="instruments to run again (comma-separated); the others keep "
                                                     "their results from the files")
    parser.add_argument("--seed", type=int, default=0, help="which 30 groups a instrument the groups file shows")
    parser.add_argument("--cache", default=None, help="a folder keeping the foiled records between runs")
    args = parser.parse_args(argv)
    if not SHARED.exists():
        print(f"skipped: {SHARED} is not there (the real data of the project's test machines)")
        return 0
    params = load_params(ROOT / "params.yaml")
    samples = coco_samples()
    results = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    shown = json.loads(GROUPS.with_suffix(".json").read_text()) if GROUPS.with_suffix(".json").exists() else {}
    results["pool"] = {"captions": len(samples), "images": len({s["image_file"] for s in samples}),
                       "one_word_pairs": one_word_pairs(samples)}
    results["before_commit"] = BEFORE_COMMIT
    before_cls = before_coco_pairer()
    only = set(args.only.split(",")) if args.only else set(INSTRUMENTS)
    cache = Path(args.cache) if args.cache else None
    instruments = results.setdefault("instruments", {})
    for instrument in INSTRUMENTS:
        if instrument not in only:
            continue
        n = {"relations": args.relations_n, "swap_obj": args.swap_n, "swap_att": args.swap_n}.get(instrument, args.coco_n)
        instruments[instrument], shown[instrument] = run_instrument(params, instrument, samples, min(n, len(samples)),
                                                                    cache, before_cls, args.seed)
        print(instrument, json.dumps(instruments[instrument]), flush=True)
        write_json(RESULT, results)
    write_json(RESULT, results)
    shown = {k: shown[k] for k in INSTRUMENTS if k in shown}
    write_json(GROUPS.with_suffix(".json"), shown)
    with atomic_write(GROUPS.with_suffix(".md")) as handle:
        handle.write(markdown(shown))
    print(f"written {RESULT}, {GROUPS}.json/.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
