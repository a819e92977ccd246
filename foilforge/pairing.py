"""Winoground groups: pair a kept record with a second image that its foil describes.

A record says `caption` is true of its image and `foil` false. A *partner* is a
sample of the same source, with another image, whose annotations make the
foil true and the caption false. The record and its partner form a group in
Winoground's layout (Thrush et al., CVPR 2022):

    image_0 = the record's image   caption_0 = the caption (true of image_0, false of image_1)
    image_1 = the partner's image  caption_1 = the foil    (true of image_1, false of image_0)

Any score that reads only the text gives both images the same order of the two
texts, so on a group its Winoground text, image and group scores are 0 and its
accuracy over the group's two pairs is exactly 50%, whatever it learned: the
language prior cancels by construction (docs/pairing.md).

A **pairer** is a plug-in (registry `PAIRERS`, one module per kind of evidence
under foilers/pairers/) with two methods:

* `index(samples, records)`: read every sample of the source once (and the
  instrument's records, for pairers whose evidence is another record);
* `candidates(record, sample) -> list[Partner]`: the partners whose evidence
  makes the record's foil true and its caption false, best first, each with the
  rule and the annotation ids behind it. Deterministic; no model.

`pair_records` then gives each record at most one partner and each partner image
to at most one record (a maximum bipartite matching, so as many records as
possible are grouped: foilforge/groups.py `assign`), and `group_row` there writes the group. A pairer never sees the
keep rules: select calls it on the records it keeps, so a threshold change reruns
no model.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from foilforge.groups import Pairing, Partner, assign, pairing_settings, text_key
from foilforge.registry import Registry

#: every module of foilers/pairers/ is a pairer plug-in; other packages register through the entry-point group
PAIRERS = Registry("pairer", packages=("foilforge.foilers.pairers",), entry_points="foilforge.pairers")


class Pairer:
    """Base class of pairers: subclasses set `evidence` and implement `candidates` (and usually `index`)."""

    #: one line for the data card: what annotation makes the foil true of the partner
    evidence: str = ""
    #: error messages of `validate` name arguments relative to the params block
    relative_messages = True

    def validate(self) -> None:
        """Check argument values (called at build time, `foilforge check-params`)."""

    def index(self, samples: Sequence[dict], records: Sequence[dict]) -> None:
        """Read the source's samples (and the instrument's records) once, before `candidates`."""

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        raise NotImplementedError

    def holds_group(self, record: dict) -> bool:
        """False for a record whose group another record already holds (the second member of a record pair)."""
        return True

    @staticmethod
    def text_key(text: str) -> str:
        """How this pairer's rule compares two texts when the only evidence is text (released files)."""
        return text_key(text)


def build_pairer(name: str, args: dict | None = None, where: str = "params") -> Pairer:
    return PAIRERS.build(PAIRERS.newest(name), args, where)


def instrument_pairer(params: dict, instrument: str) -> Pairer | None:
    """The instrument's pairer, built and validated from params (None when it has none)."""
    settings = pairing_settings(params, instrument)
    if not settings["pairer"]:
        return None
    return build_pairer(settings["pairer"], settings.get("args") or {}, f"params.yaml instruments.{instrument}.pairing.args")


def _sample_index(samples: Iterable[dict]) -> dict[str, dict]:
    return {str(sample["id"]): sample for sample in samples if "id" in sample}


def find_candidates(pairer: Pairer, records: Sequence[dict], samples: Sequence[dict]) -> dict[str, list[Partner] | None]:
    """Every record's candidate partners (own image excluded, one per partner image, best first), by record id.

    None for a record whose group another record holds (the second member of a record pair).
    """
    pairer.index(samples, records)
    by_id = _sample_index(samples)
    found: dict[str, list[Partner] | None] = {}
    for record in sorted(records, key=lambda r: str(r["id"])):
        if not pairer.holds_group(record):
            found[str(record["id"])] = None
            continue
        sample = by_id.get(str(record.get("sample_id")))
        own = record.get("image_file")
        seen, kept = set(), []
        for partner in pairer.candidates(record, sample):
            if partner.image_file == own or partner.image_file in seen:
                continue
            seen.add(partner.image_file)
            kept.append(partner)
        found[str(record["id"])] = kept
    return found


def pair_records(pairer: Pairer, records: Sequence[dict], samples: Sequence[dict]) -> Pairing:
    return assign(records, find_candidates(pairer, records, samples))
