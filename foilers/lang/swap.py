"""Shared pieces of the word-order foilers (swap_obj, swap_att; Winoground, SugarCrepe swap-obj / swap-att).

A swap keeps the words and changes who does what or what has which property.
These helpers make the edits and check them:

* `apply_edits(text, edits)`: replace character spans (non-overlapping) at once;
* `recase(text, ...)`: a moved word or phrase capitalised at the caption's start, lower-cased when it leaves it;
* `content_lemmas(doc)`: the multiset of noun, adjective and numeral lemmas, which a
  swap must leave equal on both sides (spaCy's lemmas; "men" -> "man");
* `grammatical_swap(parse, caption, foil)`: the foil's re-parse shows no more
  determiner-number / subject-verb agreement problems than the caption's, and
  its content lemmas are the caption's;
* `pair_swaps(records)`: Winoground pairs: two records whose captions are each
  other's foils (caption of image 1 = foil of image 2 and back) get one `pair_id`,
  so evaluate scores them with Winoground's text / image / group scores;
  `pair_swap_foils(foiler, foils, context)` does the same in a foiler's `choose`,
  on `Foil` objects, naming the ids the base class will give their records;
"""

from __future__ import annotations

import re
from collections import Counter

from foilforge.foiler import RunContext
from foilforge.foilers.lang.sugar import SiteContext, SugarFoiler
from foilforge.proposers import EditSite, Proposal
from foilforge.records import Foil

CONTENT_POS = ("NOUN", "PROPN", "ADJ", "NUM")


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied; spans must not overlap."""
    out, cursor = [], 0
    for start, end, new in sorted(edits):
        if start < cursor:
            raise ValueError(f"overlapping edits at {start}")
        out.append(text[cursor:start] + new)
        cursor = end
    return "".join(out) + text[cursor:]


def recase(text: str, at_start: bool, was_at_start: bool, root_is_proper: bool = False) -> str:
    """`text` as it reads where it lands: capitalised at the caption's start, lower-cased when it leaves the start
    (not a proper noun, not "I ...")."""
    if at_start:
        return text[:1].upper() + text[1:]
    if was_at_start and not root_is_proper and not text.startswith("I "):
        return text[:1].lower() + text[1:]
    return text


def content_lemmas(doc) -> Counter:
    """Multiset of lower-cased lemmas of nouns, adjectives and numerals."""
    return Counter(t.lemma_.lower() for t in doc if t.pos_ in CONTENT_POS)


def grammatical_swap(parse, caption_doc, foil: str, mass_nouns=None) -> tuple[bool, str]:
    """(ok, reason): the foil adds no agreement problem to the caption's and has its content lemmas
    (a re-parse that reads a moved word differently, "red" as a noun, rejects the swap: we cannot vouch for it).
    `parse(text)` gives the foil's spaCy parse: the run's cache, so the exact-edit checks later read the same one."""
    from foilforge.foilers.lang.number import MASS_NOUNS, agreement_problems

    mass = MASS_NOUNS if mass_nouns is None else mass_nouns
    foil_doc = parse(foil)
    if len(agreement_problems(foil_doc, mass)) > len(agreement_problems(caption_doc, mass)):
        return False, "agreement"
    if content_lemmas(foil_doc) != content_lemmas(caption_doc):
        return False, "content_words"
    return True, ""


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def _pair(items: list[dict]) -> dict:
    """{id: (pair_id, member)} for items (id, caption, foil, image_file) that swap each other's caption and foil."""
    by_caption: dict[str, list[dict]] = {}
    for item in items:
        by_caption.setdefault(_norm(item["caption"]), []).append(item)
    paired: dict = {}
    for item in sorted(items, key=lambda r: r["id"]):
        if item["id"] in paired:
            continue
        for other in by_caption.get(_norm(item["foil"]), []):
            if other is item or other["id"] in paired or _norm(other["foil"]) != _norm(item["caption"]):
                continue
            if other.get("image_file") == item.get("image_file"):
                continue
            pair_id = f"{item['id']}|{other['id']}"
            paired[item["id"]], paired[other["id"]] = (pair_id, 0), (pair_id, 1)
            break
    return paired


def pair_swaps(records: list[dict]) -> int:
    """Give records that swap each other's caption and foil one `pair_id` (Winoground pairs); returns the count."""
    todo = [r for r in records if r.get("pair_id") is None]
    paired = _pair(todo)
    for record in todo:
        if record["id"] in paired:
            record["pair_id"], record["pair_member"] = paired[record["id"]]
    return len(paired) // 2


def pair_swap_foils(foiler, foils: list, context) -> tuple[list, int]:
    """`pair_swaps` inside a foiler's `choose`: the foils the base class will keep (identities and duplicates
    dropped, the per-sample cap applied, in `choose`'s order), those that swap each other's caption and foil
    with `pair_id` / `pair_member` in their extras (the pair named by the ids their records will get).
    Returns (foils, number of pairs)."""
    import dataclasses

    from foilforge.foiler import record_id

    cap = foiler.cap(context)
    kept, ids, per_sample, seen = [], [], {}, set()
    for foil in foils:  # what build_records keeps, so the ids below are the records' ids
        key = (foil.sample_id, foil.key())
        if foil.foil.strip() == foil.caption.strip() or key in seen or per_sample.get(foil.sample_id, 0) >= cap:
            continue
        seen.add(key)
        ids.append(record_id(context.instrument, foil.sample_id, per_sample.get(foil.sample_id, 0)))
        per_sample[foil.sample_id] = per_sample.get(foil.sample_id, 0) + 1
        kept.append(foil)
    sample = context.samples
    items = [{"id": i, "caption": f.caption, "foil": f.foil, "image_file": (sample.get(f.sample_id) or {}).get("image_file")}
             for i, f in zip(ids, kept)]
    # the records' order when pair_swaps ran on them: by id
    items.sort(key=lambda item: item["id"])
    paired = _pair(items)
    out = []
    for foil, foil_id in zip(kept, ids):
        if foil_id in paired:
            pair_id, member = paired[foil_id]
            foil = dataclasses.replace(foil, extras={**foil.extras, "pair_id": pair_id, "pair_member": member})
        out.append(foil)
    return out, len(paired) // 2


class SwapFoiler(SugarFoiler):
    """A caption foiler whose candidates swap two parts of one caption (swap_obj, swap_att; SugarCrepe's swap types).

    `_foils(sample, rng, parses, stats)` gives one sample's rule-based swaps, best first, counting its skip rules in
    `stats` (the foil metrics' `rules`); each is a site (foilers/lang/sugar.py) whose two phrases the proposer
    exchanges: the lexicon proposer answers with the rule-based wording, an instruction-tuned model with its own.
    Either way the foil must pass the swap checks (foilers/lang/exact_edits.py), the exchanged stretches being the
    site's two phrases."""

    ordered_sites = True

    def drafts(self, doc, caption: str, stats: Counter) -> list[tuple]:
        """The rule-allowed swaps of one parsed caption, each tuple ending with its foil text (subclasses)."""
        raise NotImplementedError

    def foil_of_draft(self, caption: str, draft: tuple) -> Foil:
        """The candidate of one draft that passed the re-parse check (subclasses)."""
        raise NotImplementedError

    def candidates(self, caption: str, parses=None, stats: Counter | None = None) -> list[Foil]:
        """Every grammatical swap of the caption: the drafts whose re-parse `grammatical_swap` accepts (the others
        counted in `stats` by reason)."""
        from foilforge.foilers.lang.exact_edits import ExactEditChecker

        parses = parses or ExactEditChecker(self.load_nlp())
        stats = Counter() if stats is None else stats
        doc = parses.parse(caption)
        out = []
        for draft in self.drafts(doc, caption, stats):
            ok, reason = grammatical_swap(parses.parse, doc, draft[-1])
            if not ok:
                stats[f"rejected_{reason}"] += 1
                continue
            stats["candidates"] += 1
            out.append(self.foil_of_draft(caption, draft))
        return out

    def parse_before_sites(self, samples: list[dict], checker) -> None:
        """Every sample's drafts parsed in one batch: `grammatical_swap` then reads these parses, the ones it would
        make text by text (spaCy's annotations do not depend on the batch: tests/test_nlp_batching.py)."""
        checker.parse_all(draft[-1] for sample in samples
                          for draft in self.drafts(checker.parse(sample["caption"]), sample["caption"], Counter()))

    def sites(self, doc, sample: dict, where: SiteContext) -> list[EditSite]:
        caption = sample["caption"]
        out = []
        for index, foil in enumerate(self._foils(sample, where.rng, where.parses, where.rules)):
            (a0, a1), (b0, b1) = foil.internal["phrases"]
            out.append(EditSite(self.exact_edit, caption, (a0, a1), caption[a0:a1], f"{sample['id']}/{index}",
                                second_span=(b0, b1), second_old=caption[b0:b1], draft=foil.foil, avoid=where.avoid,
                                details={"classes": foil.classes, "classes_foil": foil.classes_foil,
                                         "extras": foil.extras}))
        return out

    def foil_of(self, site: EditSite, answer: Proposal, edit: dict, proposer: str) -> Foil:
        """The record keeps the rule-based candidate's changed items and method (the two nouns or adjectives)."""
        foil = super().foil_of(site, answer, edit, proposer)
        foil.classes, foil.classes_foil = site.details["classes"], site.details["classes_foil"]
        foil.extras = {**site.details["extras"], **{k: v for k, v in foil.extras.items() if k != "foil_method"}}
        return foil

    def choose(self, foils: list[Foil], context: RunContext) -> list[Foil]:
        """One (caption, foil) per image; records that swap each other's captions (two images) get one `pair_id`."""
        kept, pairs = pair_swap_foils(self, super().choose(foils, context), context)
        context.stats["winoground_pairs"] = pairs
        return kept
