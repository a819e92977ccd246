"""Groups whose second text is evidenced as true of the second image, on COCO val 2017 (results/group_evidence.json).

For each COCO instrument (foil_it, plurals, relations, swap_obj, swap_att, and SugarCrepe's replace_obj,
replace_att, replace_rel, add_obj, add_att: `--sugar-n` captions each, measured after only) the foiler runs through its registry on
the first captions of val 2017 (`--foil-it-n`, `--plurals-n`, both `--coco-n` unless given; relations:
`--relations-n`, its span scoring is slow on a CPU; the swaps: `--swap-n`, a record pair needs both captions in the
run), keeping `candidates_per_sample` candidates a caption, and the records are paired against every caption of val
2017 (25,014 captions, 5,000 images), twice:

* **before**: the rule as it stood at commit `BEFORE_COMMIT` (read with `git show`; foil_it, plurals and relations:
  the partner mentions the foil's changed part and never the caption's, plus the relation claims involving the new
  noun; the swaps: record pairs, two records of the run whose captions are each other's foils);
* **after**: the instrument's pairer from params.yaml (coco_captions, the swaps included), with
  `pairing.min_support` (every claim supported). The records it refuses as foils (their own image's other captions
  state the foil's part; a swap whose both readings one image's captions state) are refused as select refuses them:
  never chosen, so a caption's other candidate is; `foils_refused` counts them. `without_one_caption_rule` gives the
  groups the same rule forms when a noun's claims may come from several captions (what that rule costs).

For each: captions foiled, groups with the pairing-aware choice off and on, after the one-image-once assignment;
the groups' support, two ways: the share of the foil's claims (foilers/lang/claims.py) that the partner's captions
state, and the share of the foil's content words (lemmas of its nouns, verbs and adjectives) among the lemmas of the
partner captions' nouns, verbs and adjectives; the refusals by reason; the rules. The keep filters do not run
here: "exported" means assigned.

`results/group_evidence_groups.json` and `.md`: 30 groups a instrument drawn with `--seed` from the after groups
(all when fewer), each with caption_0, caption_1, the partner image's captions and the claims with their support.

    python -m benchmarks.bench_group_evidence [--coco-n 2000] [--foil-it-n N] [--plurals-n N] [--relations-n 300]
        [--swap-n 5000] [--sugar-n 500] [--only foil_it,plurals] [--cache DIR]

`--cache DIR` keeps the foiled records (per instrument and caption count), so a rerun pairs without foiling again.
The pool's captions are parsed once for all the pairers the run builds (the parse of a text does not depend on the
others parsed with it).
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

from benchmarks.common import ROOT, SHARED, read_metrics, result_path, write_result

NAME = "group_evidence"
#: the last commit with the rule that required only the foil's changed part
BEFORE_COMMIT = "7255a89"
INSTRUMENTS = ("foil_it", "plurals", "relations", "swap_obj", "swap_att",
               "replace_obj", "replace_att", "replace_rel", "add_obj", "add_att")
#: SugarCrepe's types that have no rule before (nothing formed their groups): measured after only
SUGAR_TYPES = ("replace_obj", "replace_att", "replace_rel", "add_obj", "add_att")
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


class ParseCache:
    """One spaCy parse a text for every pairer the run builds: each pairer class's `_parse` goes through it."""

    def __init__(self):
        self.docs: dict[tuple, object] = {}

    def install(self, cls) -> None:
        original = cls._parse
        cache = self.docs

        def parse(pairer, texts):
            missing = [t for t in dict.fromkeys(texts) if (pairer.spacy_model, t) not in cache]
            if missing:
                cache.update(((pairer.spacy_model, t), d) for t, d in zip(missing, original(pairer, missing)))
            return [cache[pairer.spacy_model, t] for t in texts]

        cls._parse = parse


def choices(records: list[dict], candidates: dict, refused: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(the foiler's best candidate of each caption, a candidate with a partner when any has one), among the
    candidates not refused as foils (`refused`: record id -> reason; a caption all of whose candidates are refused
    has no foil)."""
    by_sample: dict[str, list[dict]] = {}
    for record in records:
        if str(record["id"]) not in (refused or {}):
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


def measure(records, candidates, refusals, judge: Judge, refuse_foils: bool = False) -> tuple[dict, object]:
    from collections import Counter

    from foilforge.groups import assign

    refused = refusals.foils if refuse_foils else {}
    best, chosen = choices(records, candidates, refused)
    off, on = assign(best, candidates, refusals), assign(chosen, candidates, refusals)
    by_id = {str(r["id"]): r for r in records}
    claim_support = [judge.claim_support(by_id[rid], p) for rid, p in sorted(on.partners.items())]
    words = [judge.word_share(by_id[rid], p) for rid, p in sorted(on.partners.items())]
    report = on.report(len(chosen))
    foils = {}
    if refuse_foils:
        captions = {str(r["sample_id"]) for r in records}
        foils = {"records": len(refused), "of_records": len(records),
                 "by_reason": dict(sorted(Counter(refused.values()).items())),
                 "captions_left_without_a_foil": len(captions) - len(chosen), "of_captions": len(captions),
                 "examples": {reason: [{"caption": by_id[rid]["caption"], "foil": by_id[rid]["foil"]}
                                       for rid in sorted(r for r in refused if refused[r] == reason)[:5]]
                              for reason in sorted(set(refused.values()))}}
    return {**({"foils_refused": foils} if refuse_foils else {}),
            "choice_off": {"groups": len(off.partners), "coverage": round(len(off.partners) / len(best), 4) if best else None},
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


def run_instrument(params, instrument, samples, n, cache, before_cls, seed, parses) -> tuple[dict, list[dict]]:
    from foilforge.groups import Refusals
    from foilforge.pairing import PAIRERS, find_candidates, instrument_pairer, search_partners
    from foilforge.settings import instrument_settings

    records, foil_seconds = foil(params, instrument, samples, n, cache)
    settings = instrument_settings(params, instrument).pairing
    started = time.perf_counter()
    after_pairer = instrument_pairer(params, instrument)
    parses.install(type(after_pairer))
    after, refusals = search_partners(after_pairer, records, samples, settings.min_support)
    judge = Judge(after_pairer)
    result = {"captions_in": n, "records": len(records), "captions_foiled": len({r["sample_id"] for r in records}),
              "pairer": settings.pairer, "min_support": settings.min_support,
              "ranked_by": getattr(after_pairer, "ranked_by", None), "foil_seconds": foil_seconds}
    if instrument.startswith("swap"):
        old = find_candidates(PAIRERS.build("record_pairs.v1", {}), records, samples)
        result["before"], _ = measure(records, old, Refusals(), judge)
        result["before"]["rule"] = f"record_pairs.v1 (the swaps' pairer at {BEFORE_COMMIT})"
    elif before_cls is not None and instrument not in SUGAR_TYPES:
        parses.install(before_cls)
        old = old_candidates(before_cls(**{k: v for k, v in (settings.get("args") or {}).items()
                                           if k in ("spacy_model", "mode", "max_partners")}), records, samples)
        result["before"], _ = measure(records, old, Refusals(), judge)
        result["before"]["rule"] = f"coco_captions.v1 at {BEFORE_COMMIT}"
    result["after"], on = measure(records, after, refusals, judge, refuse_foils=True)
    # what the one-caption-a-noun rule costs: the same search with a noun's claims allowed from several captions
    lenient = instrument_pairer(params, instrument)
    if hasattr(lenient, "_splits_a_noun"):
        lenient._splits_a_noun = lambda name, edit: False
        lenient._vector = after_pairer._vector   # the same encoder: its vectors once
        spread, spread_refusals = search_partners(lenient, records, samples, settings.min_support)
        without, _ = measure(records, spread, spread_refusals, Judge(lenient), refuse_foils=True)
        result["without_one_caption_rule"] = {"groups": without["choice_on"]["groups"],
                                              "coverage": without["choice_on"]["coverage"]}
    result["pair_seconds"] = round(time.perf_counter() - started, 1)
    texts = {str(s["id"]): s.get("caption") for s in samples}
    by_id = {str(r["id"]): r for r in records}
    grouped = sorted(on.partners.items())
    drawn = sorted(random.Random(seed).sample(grouped, min(30, len(grouped))))
    return result, [evidence_row(by_id[rid], partner, texts, judge) for rid, partner in drawn]


def markdown(groups: dict[str, list[dict]], results: dict | None = None) -> str:
    lines = ["# Groups drawn from the after rule on COCO val 2017, with their evidence", "",
             "Written by `python -m benchmarks.bench_group_evidence`. A claim is what caption_1 says of image_1; "
             "the captions listed after it state it (a noun's claims: the captions that state all of them). "
             "`absent`: what the rule checked the partner never states.", ""]
    for instrument, rows in groups.items():
        after = ((results or {}).get(instrument) or {}).get("after") or {}
        lines += [f"## {instrument} ({len(rows)} groups of {after.get('choice_on', {}).get('groups', '?')})", ""]
        refused = after.get("foils_refused")
        if refused:
            lines += [f"Foils refused: {refused['records']} of {refused['of_records']} records "
                      f"({', '.join(f'{r}: {n}' for r, n in refused['by_reason'].items()) or 'none'}); "
                      f"{refused['captions_left_without_a_foil']} of {refused['of_captions']} captions left without one.",
                      ""]
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
    from foilforge.io import atomic_write
    from foilforge.params import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coco-n", type=int, default=2000)
    parser.add_argument("--foil-it-n", type=int, default=None, help="captions foil_it foils (default: --coco-n)")
    parser.add_argument("--plurals-n", type=int, default=None, help="captions plurals foils (default: --coco-n)")
    parser.add_argument("--relations-n", type=int, default=300)
    parser.add_argument("--swap-n", type=int, default=5000)
    parser.add_argument("--sugar-n", type=int, default=500, help="captions each of SugarCrepe's replace and add "
                                                                 "types foils (the lexicon proposer)")
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
    result, groups = result_path(NAME), result_path(f"{NAME}_groups")
    results, shown = read_metrics(result), read_metrics(groups)
    results["pool"] = {"captions": len(samples), "images": len({s["image_file"] for s in samples}),
                       "one_word_pairs": one_word_pairs(samples)}
    results["before_commit"] = BEFORE_COMMIT
    before_cls = before_coco_pairer()
    parses = ParseCache()
    only = set(args.only.split(",")) if args.only else set(INSTRUMENTS)
    cache = Path(args.cache) if args.cache else None
    instruments = results.setdefault("instruments", {})
    for instrument in INSTRUMENTS:
        if instrument not in only:
            continue
        n = {"relations": args.relations_n, "swap_obj": args.swap_n, "swap_att": args.swap_n,
             "foil_it": args.foil_it_n or args.coco_n, "plurals": args.plurals_n or args.coco_n,
             **{name: args.sugar_n for name in SUGAR_TYPES}}[instrument]
        instruments[instrument], shown[instrument] = run_instrument(params, instrument, samples, min(n, len(samples)),
                                                                    cache, before_cls, args.seed, parses)
        print(instrument, json.dumps(instruments[instrument]), flush=True)
        write_result(NAME, results, args, argv, path=result)
    write_result(NAME, results, args, argv, path=result)
    shown = {k: shown[k] for k in INSTRUMENTS if k in shown}
    write_result(NAME, shown, args, argv, path=groups)
    with atomic_write(groups.with_suffix(".md")) as handle:
        handle.write(markdown(shown, instruments))
    print(f"written {result}, {groups} and {groups.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
