"""Winoground groups from partners: the text rules, the assignment, the group rows (no plug-ins imported here).

foilforge/pairing.py holds the pairer contract and registry; this module holds what the stages need once the
candidates are found: `Partner`, `assign` (at most one partner a record, each image at most once), the pairing-aware
choice and the rows of the group files.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from foilforge.errors import ConfigError

#: why a record stayed unpaired (the report's `unpaired` counts)
NO_SAMPLE = "no source sample"
NO_CANDIDATE = "no partner in the source"
IMAGE_TAKEN = "every partner image went to another record"
HELD_BY_OTHER = "its pair's group is held by the other member"


def pairing_settings(params: dict, instrument: str) -> dict:
    """The instrument's pairing block over the defaults (the schema's, and `pairing.prefer_pairable`):
    {pairer, args, why, prefer_pairable}."""
    from foilforge.params import typed_params
    from foilforge.schema import InstrumentPairing

    block = ((params.get("instruments") or {}).get(instrument) or {}).get("pairing") or {}
    settings = {**InstrumentPairing().model_dump(), "prefer_pairable": typed_params(params).pairing.prefer_pairable}
    settings.update({k: v for k, v in block.items() if not (k == "prefer_pairable" and v is None)})
    return settings


@dataclass(frozen=True)
class Partner:
    """A second image that the record's foil describes, and why."""

    sample_id: str
    image_file: str
    rule: str
    #: the annotation ids the rule read (the record's and the partner's), as strings
    annotations: tuple[str, ...] = ()
    dataset_idx: str | None = None
    #: the partner's own kept record, when the evidence is another record of the instrument (a record pair)
    partner_record: str | None = None

    def evidence(self) -> dict:
        return {"rule": self.rule, "annotations": list(self.annotations)}



# ---------------------------------------------------------------- text keys shared by the pairers

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\s\"'.,;:!?]+|[\s\"'.,;:!?]+$")


def text_key(text: str) -> str:
    """A text as a rule compares it: lower case, one space, no punctuation at either end."""
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", str(text)).strip().lower())


# ---------------------------------------------------------------- assignment

@dataclass
class Pairing:
    """The result of pairing one instrument's records."""

    partners: dict[str, Partner] = field(default_factory=dict)   # record id -> its partner
    candidates: dict[str, int] = field(default_factory=dict)      # record id -> partners it could have had
    unpaired: Counter = field(default_factory=Counter)            # reason -> records

    def report(self, records: int) -> dict:
        grouped = len(self.partners)
        return {"records": records, "pairable": sum(1 for n in self.candidates.values() if n),
                "groups": grouped, "coverage": round(grouped / records, 4) if records else None,
                "unpaired": dict(sorted(self.unpaired.items())),
                "rules": dict(sorted(Counter(p.rule for p in self.partners.values()).items()))}


def assign(records: Sequence[dict], candidates: dict[str, list[Partner] | None]) -> Pairing:
    """At most one partner a record, each partner image at most once: a maximum matching, deterministic.

    Records are taken in id order and their candidates in the pairer's order; among the matchings of
    maximum size the one found by augmenting paths in that order is kept, so the same input always
    gives the same groups. A partner that is another record counts only when that record is among
    `records` (both members of a record pair kept).
    """
    result = Pairing()
    holders = []
    present = {str(r["id"]) for r in records}
    for record in sorted(records, key=lambda r: str(r["id"])):
        rid = str(record["id"])
        if rid not in candidates:
            result.unpaired[NO_SAMPLE] += 1
            continue
        options = candidates[rid]
        if options is None:
            result.unpaired[HELD_BY_OTHER] += 1
            continue
        options = [p for p in options if p.partner_record is None or p.partner_record in present]
        result.candidates[rid] = len(options)
        if not options:
            result.unpaired[NO_CANDIDATE] += 1
            continue
        holders.append((rid, options))
    owner: dict[str, int] = {}  # image -> index into holders

    def augment(i: int, visited: set) -> bool:
        for partner in holders[i][1]:
            image = partner.image_file
            if image in visited:
                continue
            visited.add(image)
            if image not in owner or augment(owner[image], visited):
                owner[image] = i
                return True
        return False

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(holders) + 1000))
    try:
        for i in range(len(holders)):
            augment(i, set())
    finally:
        sys.setrecursionlimit(limit)
    chosen = {i: image for image, i in owner.items()}
    for i, (rid, options) in enumerate(holders):
        image = chosen.get(i)
        if image is None:
            result.unpaired[IMAGE_TAKEN] += 1
            continue
        result.partners[rid] = next(p for p in options if p.image_file == image)
    return result


# ---------------------------------------------------------------- groups

def group_of(record: dict, partner: Partner) -> dict:
    """The `group` field select stores on a grouped record."""
    return {"id": f"{record['id']}|group", "image_1": partner.image_file, "partner_sample_id": partner.sample_id,
            "partner_dataset_idx": partner.dataset_idx, **partner.evidence()}


def group_row(record: dict, image_path=lambda name: name) -> dict:
    """One line of data/benchmark/winoground/<I>.jsonl (Winoground's layout) for a grouped record."""
    group = record.get("group")
    if not isinstance(group, dict):
        raise ConfigError(f"record {record.get('id')!r} has no group")
    return {
        "id": group["id"],
        "image_0": image_path(record["image_file"]),
        "image_1": image_path(group["image_1"]),
        "caption_0": record["caption"],
        "caption_1": record["foil"],
        "tag": record.get("linguistic_phenomena") or record.get("instrument"),
        "record_id": record["id"],
        "rule": group["rule"],
        "annotations": [str(a) for a in group.get("annotations") or []],
    }


def candidate_file_rows(candidates: dict[str, list[Partner] | None]) -> list[dict]:
    """data/partners/<I>.jsonl: one line a record, its candidate partners in the pairer's order
    (`holds_group: false`: the other member of its record pair holds the group)."""
    rows = []
    for rid, partners in sorted(candidates.items()):
        rows.append({"id": rid, "holds_group": partners is not None,
                     "partners": [{"sample_id": p.sample_id, "image_file": p.image_file, "rule": p.rule,
                                   "annotations": list(p.annotations), "dataset_idx": p.dataset_idx,
                                   "partner_record": p.partner_record} for p in partners or []]})
    return rows


def candidates_from_rows(rows: Iterable[dict], path="<partners>") -> dict[str, list[Partner] | None]:
    from foilforge.errors import InputError

    found: dict[str, list[Partner] | None] = {}
    for line, row in enumerate(rows, start=1):
        if "id" not in row:
            raise InputError(path, "missing field", record=f"line {line}", field="id")
        partners = []
        for k, p in enumerate(row.get("partners") or []):
            for name in ("sample_id", "image_file", "rule"):
                if not isinstance(p.get(name), str):
                    raise InputError(path, "expected a string", record=row["id"], field=f"partners[{k}].{name}")
            partners.append(Partner(sample_id=p["sample_id"], image_file=p["image_file"], rule=p["rule"],
                                    annotations=tuple(str(a) for a in p.get("annotations") or ()),
                                    dataset_idx=p.get("dataset_idx"), partner_record=p.get("partner_record")))
        found[str(row["id"])] = partners if row.get("holds_group", True) else None
    return found


# ---------------------------------------------------------------- groups mined inside a released file

def mine_released(records: Sequence[dict], key=text_key) -> tuple[dict[str, Partner], Pairing]:
    """Groups inside a released benchmark: a record whose foil is another image's caption (under `key`).

    Each record is (id, image_file, caption, foil). What a file states of an image is the captions of its
    records there (true) and their foils (false). A partner image must state the record's foil as a caption and
    must not state the record's caption; when it states the record's caption as a foil, the rule says so.
    """
    true_of: dict[str, set] = {}
    false_of: dict[str, set] = {}
    by_caption: dict[str, list[dict]] = {}
    for record in sorted(records, key=lambda r: str(r["id"])):
        true_of.setdefault(record["image_file"], set()).add(key(record["caption"]))
        false_of.setdefault(record["image_file"], set()).add(key(record["foil"]))
        by_caption.setdefault(key(record["caption"]), []).append(record)
    candidates: dict[str, list[Partner] | None] = {}
    for record in sorted(records, key=lambda r: str(r["id"])):
        caption, foil = key(record["caption"]), key(record["foil"])
        partners, seen = [], set()
        for other in by_caption.get(foil, []):
            image = other["image_file"]
            if image == record["image_file"] or image in seen or caption in true_of[image]:
                continue
            seen.add(image)
            rule = ("released: the partner's caption is the foil and its foil is the caption"
                    if caption in false_of[image] else "released: the partner's caption is the foil")
            partners.append(Partner(sample_id=str(other["id"]), image_file=image, rule=rule,
                                    annotations=(str(record["id"]), str(other["id"]))))
        candidates[str(record["id"])] = partners
    pairing = assign(records, candidates)
    return pairing.partners, pairing


# ---------------------------------------------------------------- select: the pairing-aware choice and the groups

def prefer_pairable(records: Sequence[dict], candidates: dict[str, list[Partner] | None], passes) -> tuple[list[dict], list[dict]]:
    """(records select chooses among, records set aside): among one sample's candidates that pass the keep rules
    (`passes(record)`), those without a partner are set aside when another has one. A sample with a single
    passing candidate, or none with a partner, keeps all its candidates."""
    def pairable(record) -> bool:
        found = candidates.get(str(record["id"]))
        return found is None or bool(found)  # None: a record pair's second member, paired through the first

    by_sample: dict[str, list[dict]] = {}
    for record in records:
        if passes(record):
            by_sample.setdefault(str(record.get("sample_id", record["id"])), []).append(record)
    aside = set()
    for group in by_sample.values():
        if len(group) > 1 and any(pairable(r) for r in group):
            aside.update(str(r["id"]) for r in group if not pairable(r))
    chosen = [r for r in records if str(r["id"]) not in aside]
    set_aside = [{**r, "pairing": {"set_aside": "another candidate of its sample has a partner image"}}
                 for r in records if str(r["id"]) in aside]
    return chosen, set_aside


def attach_groups(kept: Sequence[dict], candidates: dict[str, list[Partner] | None]) -> tuple[list[dict], Pairing]:
    """The kept records, each grouped one with its `group` (the partner image and the evidence)."""
    pairing = assign(kept, candidates)
    grouped = [{**r, "group": group_of(r, pairing.partners[str(r["id"])])} if str(r["id"]) in pairing.partners else r
               for r in kept]
    return grouped, pairing
