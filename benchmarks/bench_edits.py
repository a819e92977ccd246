"""The entailment check and whole-compound replacement on real data (benchmarks/results/edits.json).

Three parts, on files of ../shared/data (skipped when absent):

* **compounds**: foil_it on the first `--coco-n` captions of COCO val 2017 (the whole val set is the image index,
  as the foil stage's corpus pass builds it from its input: here the first n captions), and how many of its records
  replace one word of a compound noun: the replaced words modify a noun that stays ("train locomotive engine" ->
  "airplane locomotive engine"), or a noun that modifies them stays ("a laptop computer" -> "a laptop phone").
  Measured at the edges of the record's replaced span on the caption's spaCy parse, by this script's own rule, so the same script measures a checkout that
  predates the whole-compound rule: run it there with `--label before` (PYTHONPATH at that checkout).
* **sugarcrepe**: the entailment check, as `foilforge refilter --like relations` runs it (edit kind "relation":
  the edit found by word alignment), over SugarCrepe's released replace_rel and its unrefined candidates: the share
  refused by reason, with examples.
* **objects**: on the same COCO captions, how often the object a relation's on / in / at alternation is judged by
  gets the same class when read from the parse (what the relations foiler passes) and from the words alone (what
  refilter does, `entailment.object_after`).

    python -m benchmarks.bench_edits [--coco-n 2000] [--parts compounds,sugarcrepe,objects] [--label after]
    # the same figures of an older checkout, merged into this one's results:
    cd OLD && python /path/to/bench_edits.py --parts compounds --label before --result THIS/benchmarks/results/edits.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "edits.json"
NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")
EXAMPLES = 5


def coco_samples(n: int) -> list[dict]:
    from foilforge.pipeline.sources.base import Source, reader_for

    root = SHARED / "real" / "coco"
    source = Source(name="coco", format="coco", root=root, files={"captions": root / "captions_val2017.json"},
                    split="val")
    return sorted(reader_for("coco")(source), key=lambda s: str(s["id"]))[:n]


def _modifies_a_noun(token) -> bool:
    return token.dep_ == "compound" or (token.head.i > token.i and token.head.tag_ in NOUN_TAGS and token.dep_ != "poss")


def compound_kind(doc, start: int, end: int) -> str | None:
    """How the caption words [start, end) (characters) replaced by a foil break a compound noun, or None.

    "modifier replaced": the last replaced word modifies a noun after it; "head replaced": a noun just before
    the replaced words modifies one of them and is not replaced."""
    tokens = [t for t in doc if t.idx >= start and t.idx + len(t) <= end and t.tag_ in NOUN_TAGS]
    if not tokens:
        return None
    last = tokens[-1]
    if _modifies_a_noun(last) and last.head.i > last.i and last.head.idx >= end:
        return "modifier replaced"
    first = min(t.i for t in doc if t.idx >= start)
    if first > 0:
        before = doc[first - 1]
        if before.tag_ in NOUN_TAGS and _modifies_a_noun(before) and start <= before.head.idx < end:
            return "head replaced"
    return None


def replaced_segments(caption: str, foil: str) -> list[tuple[int, int, str]]:
    """(start, end) in the caption and the new text of every changed run of words (difflib over words)."""
    import difflib
    import re

    words = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", caption)]
    foil_words = foil.split()
    out = []
    matcher = difflib.SequenceMatcher(a=[w[0].lower() for w in words], b=[w.lower() for w in foil_words],
                                      autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal" and i1 < i2:
            out.append((words[i1][1], words[i2 - 1][2], " ".join(foil_words[j1:j2])))
    return out


def compounds_part(params, n: int) -> dict:
    from foilforge.foiler import RunContext
    from foilforge.nlp import load_spacy
    from foilforge.pipeline.plugins import build_instrument

    samples = coco_samples(n)
    started = time.perf_counter()
    foiler = build_instrument(params, "foil_it")
    block = params["instruments"]["foil_it"]
    context = RunContext(instrument="foil_it", seed=params.get("seed", 0), params_key="instruments.foil_it",
                         candidates_per_sample=block.get("candidates_per_sample") or 1)
    records = foiler.run(samples, context=context)
    nlp = load_spacy(block["args"]["spacy_model"])
    docs = dict(zip(sorted({r["caption"] for r in records}), nlp.pipe(sorted({r["caption"] for r in records}))))
    kinds, examples, first = Counter(), [], Counter()
    seen_samples = set()
    for record in records:
        doc = docs[record["caption"]]
        # the replaced words as foil_it records them (its span: the first mention to the last), else by alignment
        span = (record.get("provenance") or {}).get("caption_span")
        segments = [tuple(span)] if span else [(s, e) for s, e, _ in replaced_segments(record["caption"], record["foil"])]
        found = [k for k in (compound_kind(doc, s, e) for s, e in segments) if k]
        is_first = record["sample_id"] not in seen_samples
        seen_samples.add(record["sample_id"])
        if found:
            kinds[found[0]] += 1
            first[found[0]] += is_first
            if len(examples) < 2 * EXAMPLES:
                examples.append({"caption": record["caption"], "foil": record["foil"], "kind": found[0]})
    return {"captions_in": n, "records": len(records), "captions_foiled": len(seen_samples),
            "compound_replacements": sum(kinds.values()), "by_kind": dict(sorted(kinds.items())),
            "compound_replacements_first_record": sum(first.values()),
            "refused": context.stats.get("refused"), "edit_check": context.stats.get("edit_check"),
            "examples": examples, "seconds": round(time.perf_counter() - started, 1)}


def sugarcrepe_part() -> dict:
    from foilforge.edits import record_refusal
    from foilforge.released import read_released, to_records

    out = {}
    folder = SHARED / "real" / "sugarcrepe"
    for name, path in (("replace_rel released", folder / "replace_rel.json"),
                       ("replace_rel unrefined", folder / "unrefined" / "replace_rel.json")):
        if not path.is_file():
            continue
        fmt, rows = read_released(path)
        records = to_records(fmt, rows, path, "relations")
        reasons, examples = Counter(), {}
        for record in records:
            reason = record_refusal(record, "relation")
            if reason is None:
                continue
            reasons[reason] += 1
            shown = examples.setdefault(reason, [])
            if len(shown) < EXAMPLES:
                shown.append({"caption": record["caption"], "foil": record["foil"]})
        refused = sum(reasons.values())
        out[name] = {"file": str(path.relative_to(SHARED.parent.parent)), "pairs": len(records), "refused": refused,
                     "share_refused": round(refused / len(records), 4),
                     "by_reason": {k: {"pairs": v, "share": round(v / len(records), 4)} for k, v in reasons.most_common()},
                     "examples": dict(sorted(examples.items()))}
    return out


def objects_part(params, n: int) -> dict:
    from foilforge.entailment import object_after, spatial_table
    from foilforge.foilers.lang.prepositions import parse, preposition_spans
    from foilforge.nlp import load_spacy

    table = spatial_table()
    (alternation,) = [a for a in table.alternations if a.name == "on/in/at"]
    classes = tuple(name for name, _ in alternation.objects)
    on_in_at = set().union(*alternation.between)
    docs = parse([s["caption"] for s in coco_samples(n)], load_spacy(params["instruments"]["relations"]["args"]
                                                                      ["spacy_model"]))
    agree, total, disagreements = 0, 0, []
    verdicts = Counter()
    for doc in docs:
        for span in preposition_spans(doc):
            if span.key not in on_in_at or not span.object:
                continue
            parsed = table.object_class(span.object, classes)
            read = table.object_class(object_after(doc.text[span.end:]), classes)
            verdicts[parsed or "none (unjudged)"] += 1
            total += 1
            agree += parsed == read
            if parsed != read and len(disagreements) < 2 * EXAMPLES:
                disagreements.append({"caption": doc.text, "relation": span.text, "parse": [span.object, parsed],
                                      "words": [object_after(doc.text[span.end:]), read]})
    return {"captions_in": n, "on_in_at_slots": total, "same_class": agree,
            "share_same": round(agree / total, 4) if total else None,
            "object_class_from_parse": dict(verdicts.most_common()), "disagreements": disagreements}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coco-n", type=int, default=2000)
    parser.add_argument("--parts", default="compounds,sugarcrepe,objects")
    parser.add_argument("--label", default="after", help="key of the compounds figures (run `before` at an older "
                                                         "checkout)")
    parser.add_argument("--result", default=str(RESULT), help="the JSON file the figures are merged into")
    args = parser.parse_args(argv)
    if not (SHARED / "real").is_dir():
        print(f"skipped: {SHARED / 'real'} is absent", file=sys.stderr)
        return 0
    from foilforge.params import load_params

    params = load_params(ROOT / "params.yaml")
    parts = set(args.parts.split(","))
    path = Path(args.result)
    result = json.loads(path.read_text()) if path.is_file() else {}
    if "compounds" in parts:
        result.setdefault("compounds", {})[args.label] = compounds_part(params, args.coco_n)
        print(json.dumps({k: v for k, v in result["compounds"][args.label].items() if k != "examples"}), flush=True)
    if "sugarcrepe" in parts:
        result["sugarcrepe"] = sugarcrepe_part()
        print(json.dumps({k: (v["pairs"], v["refused"]) for k, v in result["sugarcrepe"].items()}), flush=True)
    if "objects" in parts:
        result["objects"] = objects_part(params, args.coco_n)
        print(json.dumps({k: v for k, v in result["objects"].items() if k != "disagreements"}), flush=True)
    if "sugarcrepe" in parts or "objects" in parts:
        from foilforge.entailment import describe

        result["entailment_check"] = describe()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
