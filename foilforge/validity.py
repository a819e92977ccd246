"""Which caption/foil pairs can be a foil at all, and what people said about the ones that can.

A record whose foil is empty, or equals its caption once whitespace and case are set aside ("A man confronts the
people." / "A man confronts the people."), tests nothing: no model can tell the two texts apart, so a filter that
keeps what attackers cannot predict would keep it first. Every path that takes records in (the foil stage, the
score stage, `foilforge refilter`, select) refuses such records and counts them by reason (`refuse_invalid`).

Human votes (VALSE's `mturk`, the validate stage's `valid`) say whether a pair that can be a foil is one: the
adversarial filter and the release gate use only the valid pairs where votes exist, and `validity_shares` gives
the valid share of what was kept and what was removed.
"""

from __future__ import annotations

EMPTY_FOIL = "empty foil"
FOIL_EQUALS_CAPTION = "foil equals caption"


def normalised(text: str) -> str:
    """The text with case and runs of whitespace set aside."""
    return " ".join(text.lower().split())


def refusal(record: dict) -> str | None:
    """Why the record cannot be a foil (EMPTY_FOIL, FOIL_EQUALS_CAPTION), or None when it can.

    A missing or non-text caption is not judged here: the stages' own field checks name it."""
    foil = record.get("foil")
    if not isinstance(foil, str) or not foil.strip():
        return EMPTY_FOIL
    caption = record.get("caption")
    if isinstance(caption, str) and normalised(caption) == normalised(foil):
        return FOIL_EQUALS_CAPTION
    return None


def refuse_invalid(records: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """(the records that can be foils, in order; {reason: records refused}, only reasons that occurred)."""
    kept, counts = [], {}
    for record in records:
        reason = refusal(record)
        if reason is None:
            kept.append(record)
        else:
            counts[reason] = counts.get(reason, 0) + 1
    return kept, dict(sorted(counts.items()))


def has_votes(records: list[dict]) -> bool:
    """True when at least one record carries a human verdict (`valid`, or VALSE's `mturk` counts)."""
    from foilforge.records import is_valid

    return any(is_valid(r) is not None for r in records)


def valid_only(records: list[dict]) -> list[dict]:
    """The records people judged valid; a record without votes is not among them."""
    from foilforge.records import is_valid

    return [r for r in records if is_valid(r) is True]


def valid_share(records: list[dict]) -> float | None:
    """The share of voted records that are valid; None when none of them has votes."""
    from foilforge.records import is_valid

    verdicts = [is_valid(r) for r in records]
    voted = [v for v in verdicts if v is not None]
    return round(sum(voted) / len(voted), 4) if voted else None


def validity_shares(all_records: list[dict], kept: list[dict]) -> dict:
    """Valid shares of every record, of the kept ones and of the removed ones (None without votes)."""
    from foilforge.records import is_valid

    kept_ids = {r["id"] for r in kept}
    removed = [r for r in all_records if r["id"] not in kept_ids]
    return {"voted": sum(is_valid(r) is not None for r in all_records), "all": valid_share(all_records),
            "kept": valid_share(kept), "removed": valid_share(removed)}
