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
BELOW_SUPPORT = "no partner at the support threshold"
IMAGE_TAKEN = "every partner image went to another record"
HELD_BY_OTHER = "its pair's group is held by the other member"


#: what a claim's support was read from: the partner's captions (matched by the rule), or a structured annotation
#: whose reading *is* the claim (true by construction)
CAPTIONS = "captions"
ANNOTATION = "annotation"


@dataclass(frozen=True)
class Claim:
    """One thing caption_1 says of image_1, and which of the partner's captions or annotations state it."""

    kind: str                                  # noun, attribute, relation, action, ...; the report counts by it
    text: str                                  # readable: "dog on bed", "brown dog", "man ride"
    supported_by: tuple[str, ...] = ()         # ids of the partner's captions / annotations stating it; () unsupported
    edited: bool = False                       # a claim the edit made (the foil states it, the caption does not)
    basis: str = CAPTIONS

    @property
    def supported(self) -> bool:
        return bool(self.supported_by)

    def row(self) -> dict:
        return {"kind": self.kind, "claim": self.text, "edited": self.edited, "basis": self.basis,
                "supported_by": list(self.supported_by)}


def claim_from_row(row: dict, path="<partners>", record="?", field="claims") -> Claim:
    from foilforge.errors import InputError

    if not isinstance(row, dict) or not isinstance(row.get("kind"), str) or not isinstance(row.get("claim"), str):
        raise InputError(path, "a claim needs a string `kind` and `claim`", record=record, field=field)
    supported = row.get("supported_by") or []
    if not isinstance(supported, list) or not all(isinstance(s, str) and s for s in supported):
        raise InputError(path, "`supported_by` must be a list of annotation ids", record=record, field=field)
    return Claim(kind=row["kind"], text=row["claim"], supported_by=tuple(supported), edited=bool(row.get("edited")),
                 basis=str(row.get("basis") or CAPTIONS))


def support_of(claims: Sequence[Claim]) -> float | None:
    """The share of the claims that are supported (None: no claim stated, no evidence at all)."""
    return round(sum(c.supported for c in claims) / len(claims), 4) if claims else None


NO_CLAIMS = "no claims stated"


def unsupported_reason(claims: Sequence[Claim]) -> str:
    """Why a partner below the threshold is refused: its first unsupported claim's kind (a pairer lists the
    edited claims first), or that it states no claims."""
    missing = next((c for c in claims if not c.supported), None)
    if not claims or missing is None:
        return NO_CLAIMS
    return f"claim unsupported: {missing.kind}"


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
    #: the evidence that caption_1 (the foil) is true of image_1: what it claims, and where the partner states it
    claims: tuple[Claim, ...] = ()
    #: what the rule checked the partner never states (why caption_0 is false of image_1)
    absent: tuple[str, ...] = ()

    @property
    def support(self) -> float | None:
        return support_of(self.claims)

    def evidence(self) -> dict:
        return {"rule": self.rule, "annotations": list(self.annotations), "support": self.support,
                "claims": [c.row() for c in self.claims], "absent": list(self.absent)}


def whole_caption_claim(text: str, caption_id: str) -> Claim:
    """The evidence when the partner's own caption is the foil (compared as the rule compares texts): the whole
    text is one claim, stated by that caption."""
    return Claim(kind="caption", text=text, supported_by=(caption_id,), edited=True)


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
    refused: Counter = field(default_factory=Counter)             # reason -> partner images refused (records assigned)

    def report(self, records: int) -> dict:
        grouped = len(self.partners)
        supports = [p.support for p in self.partners.values()]
        return {"records": records, "pairable": sum(1 for n in self.candidates.values() if n),
                "groups": grouped, "coverage": round(grouped / records, 4) if records else None,
                "unpaired": dict(sorted(self.unpaired.items())),
                "refused_partners": dict(sorted(self.refused.items())),
                "groups_fully_supported": sum(s == 1.0 for s in supports),
                "rules": dict(sorted(Counter(p.rule for p in self.partners.values()).items()))}


@dataclass
class Refusals:
    """What a pairer refused for each record: partner images by reason; a reason no partner can be looked for (the
    edit is not read as a claim); and a reason the record is no foil at all (`foils`: its own image's captions state
    the foil's part, so the foil may be true of its image). select refuses the `foils` records: never kept,
    counted by reason."""

    partners: dict[str, Counter] = field(default_factory=dict)   # record id -> reason -> partner images
    records: dict[str, str] = field(default_factory=dict)        # record id -> reason
    foils: dict[str, str] = field(default_factory=dict)          # record id -> reason it is refused as a foil

    def refuse_partners(self, record_id: str, reason: str, n: int = 1) -> None:
        if n > 0:
            self.partners.setdefault(str(record_id), Counter())[reason] += n

    def refuse_record(self, record_id: str, reason: str) -> None:
        self.records[str(record_id)] = reason

    def refuse_foil(self, record_id: str, reason: str) -> None:
        self.foils[str(record_id)] = reason

    def why_unpaired(self, record_id: str) -> str:
        """Why a record without a candidate partner has none."""
        rid = str(record_id)
        if rid in self.foils:
            return self.foils[rid]
        if rid in self.records:
            return self.records[rid]
        return BELOW_SUPPORT if self.partners.get(rid) else NO_CANDIDATE


def assign(records: Sequence[dict], candidates: dict[str, list[Partner] | None],
           refusals: Refusals | None = None) -> Pairing:
    """At most one partner a record, each partner image at most once: a maximum matching, deterministic.

    Records are taken in id order and their candidates in the pairer's order; among the matchings of
    maximum size the one found by augmenting paths in that order is kept, so the same input always
    gives the same groups. A partner that is another record counts only when that record is among
    `records` (both members of a record pair kept). `refusals` (what the pairer refused, `search_partners`)
    says why a record without candidates has none, and its partner refusals are summed over `records`.
    """
    result = Pairing()
    refusals = refusals or Refusals()
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
        result.refused.update(refusals.partners.get(rid) or {})
        options = [p for p in options if p.partner_record is None or p.partner_record in present]
        result.candidates[rid] = len(options)
        if not options:
            result.unpaired[refusals.why_unpaired(rid)] += 1
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
        "support": group.get("support"),
        "claims": list(group.get("claims") or []),
        "absent": list(group.get("absent") or []),
    }


def partner_row(p: Partner) -> dict:
    return {"sample_id": p.sample_id, "image_file": p.image_file, "rule": p.rule, "annotations": list(p.annotations),
            "dataset_idx": p.dataset_idx, "partner_record": p.partner_record, "support": p.support,
            "claims": [c.row() for c in p.claims], "absent": list(p.absent)}


def candidate_file_rows(candidates: dict[str, list[Partner] | None], refusals: Refusals | None = None) -> list[dict]:
    """data/partners/<I>.jsonl: one line a record, its candidate partners in the pairer's order, each with its
    claims and support (`holds_group: false`: the other member of its record pair holds the group), and what the
    pairer refused for it (`refused`: partner images by reason; `record_refused`: why no partner can do;
    `foil_refused`: why the record is no foil, which select refuses)."""
    refusals = refusals or Refusals()
    rows = []
    for rid, partners in sorted(candidates.items()):
        rows.append({"id": rid, "holds_group": partners is not None,
                     "partners": [partner_row(p) for p in partners or []],
                     "refused": dict(sorted((refusals.partners.get(rid) or {}).items())),
                     "record_refused": refusals.records.get(rid), "foil_refused": refusals.foils.get(rid)})
    return rows


def candidates_from_rows(rows: Iterable[dict], path="<partners>") -> tuple[dict[str, list[Partner] | None], Refusals]:
    from foilforge.errors import InputError

    found: dict[str, list[Partner] | None] = {}
    refusals = Refusals()
    for line, row in enumerate(rows, start=1):
        if "id" not in row:
            raise InputError(path, "missing field", record=f"line {line}", field="id")
        partners = []
        for k, p in enumerate(row.get("partners") or []):
            for name in ("sample_id", "image_file", "rule"):
                if not isinstance(p.get(name), str):
                    raise InputError(path, "expected a string", record=row["id"], field=f"partners[{k}].{name}")
            claims = tuple(claim_from_row(c, path, row["id"], f"partners[{k}].claims[{j}]")
                           for j, c in enumerate(p.get("claims") or []))
            partners.append(Partner(sample_id=p["sample_id"], image_file=p["image_file"], rule=p["rule"],
                                    annotations=tuple(str(a) for a in p.get("annotations") or ()),
                                    dataset_idx=p.get("dataset_idx"), partner_record=p.get("partner_record"),
                                    claims=claims, absent=tuple(str(a) for a in p.get("absent") or ())))
        rid = str(row["id"])
        found[rid] = partners if row.get("holds_group", True) else None
        refused = row.get("refused") or {}
        if not isinstance(refused, dict) or not all(isinstance(n, int) for n in refused.values()):
            raise InputError(path, "expected {reason: partner images}", record=rid, field="refused")
        for reason, n in sorted(refused.items()):
            refusals.refuse_partners(rid, reason, n)
        if row.get("record_refused"):
            refusals.refuse_record(rid, str(row["record_refused"]))
        if row.get("foil_refused"):
            refusals.refuse_foil(rid, str(row["foil_refused"]))
    return found, refusals


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
                                    annotations=(str(record["id"]), str(other["id"])),
                                    claims=(whole_caption_claim(record["foil"], str(other["id"])),),
                                    absent=(record["caption"],)))
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


def attach_groups(kept: Sequence[dict], candidates: dict[str, list[Partner] | None],
                  refusals: Refusals | None = None) -> tuple[list[dict], Pairing]:
    """The kept records, each grouped one with its `group` (the partner image and the evidence)."""
    pairing = assign(kept, candidates, refusals)
    grouped = [{**r, "group": group_of(r, pairing.partners[str(r["id"])])} if str(r["id"]) in pairing.partners else r
               for r in kept]
    return grouped, pairing
