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
  rule, the annotation ids behind it and its *claims*: what the foil says of
  image_1, each with the partner's captions or annotations that state it
  (foilforge/groups.py `Claim`). A partner's *support* is the share of its claims
  supported; one below the instrument's `pairing.min_support` (default 1.0, every
  claim) is never offered and is counted by reason. A pairer may refuse such
  partners itself (`self.refusals.refuse_partners`) instead of building them,
  refuse a record's pairing (`refuse_record`: the edit is not read as a claim), or
  refuse the record as a foil (`refuse_foil`: its own image's annotations state
  the foil's part; select never keeps it).
  Deterministic; a model may only rank candidates, never accept one.

`pair_records` then gives each record at most one partner and each partner image
to at most one record (a maximum bipartite matching, so as many records as
possible are grouped: foilforge/groups.py `assign`), and `group_row` there writes the group. A pairer never sees the
keep rules: select calls it on the records it keeps, so a threshold change reruns
no model.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from foilforge.groups import Pairing, Partner, Refusals, assign, text_key, unsupported_reason
from foilforge.registry import Registry

#: every module of foilers/pairers/ is a pairer plug-in; other packages register through the entry-point group
PAIRERS = Registry("pairer", packages=("foilforge.foilers.pairers",), entry_points="foilforge.pairers")


class Pairer:
    """Base class of pairers: subclasses set `evidence` and implement `candidates` (and usually `index`)."""

    #: one line for the data card: what annotation makes the foil true of the partner
    evidence: str = ""
    #: error messages of `check` name arguments relative to the params block
    relative_messages = True
    #: the share of a partner's claims that must be supported (`search_partners` sets it from params.yaml)
    min_support: float = 1.0
    #: what the pairer checks of the record's own image, refusing as a foil a record whose foil it finds stated
    #: there (`refuse_foil`); "": no such check (the manifest and the card say which ran)
    own_image_check: str = ""

    @property
    def refusals(self) -> Refusals:
        """What the pairer refused while finding candidates (`search_partners` starts a fresh one)."""
        if "_refusals" not in self.__dict__:
            self._refusals = Refusals()
        return self._refusals

    def check(self) -> None:
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


def own_image_check(name: str | None) -> str:
    """The registered pairer's `own_image_check` ("" for none, or no pairer)."""
    return PAIRERS.get(PAIRERS.newest(name)).own_image_check if name else ""


def instrument_pairer(params: dict, instrument: str) -> Pairer | None:
    """The instrument's pairer, built and validated from params (None when it has none)."""
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, instrument).pairing
    if not settings.pairer:
        return None
    return build_pairer(settings.pairer, settings.args, f"params.yaml instruments.{instrument}.pairing.args")


def _sample_index(samples: Iterable[dict]) -> dict[str, dict]:
    return {str(sample["id"]): sample for sample in samples if "id" in sample}


def search_partners(pairer: Pairer, records: Sequence[dict], samples: Sequence[dict],
                    min_support: float = 1.0) -> tuple[dict[str, list[Partner] | None], Refusals]:
    """Every record's candidate partners (own image excluded, one per partner image, best first, support at least
    `min_support`), by record id, and what was refused and why.

    None for a record whose group another record holds (the second member of a record pair).
    """
    pairer.min_support = min_support
    pairer._refusals = Refusals()
    pairer.index(samples, records)
    by_id = _sample_index(samples)
    found: dict[str, list[Partner] | None] = {}
    for record in sorted(records, key=lambda r: str(r["id"])):
        rid = str(record["id"])
        if not pairer.holds_group(record):
            found[rid] = None
            continue
        sample = by_id.get(str(record.get("sample_id")))
        own = record.get("image_file")
        seen, kept = set(), []
        for partner in pairer.candidates(record, sample):
            if partner.image_file == own or partner.image_file in seen:
                continue
            seen.add(partner.image_file)
            support = partner.support
            if support is None or support < min_support:
                pairer.refusals.refuse_partners(rid, unsupported_reason(partner.claims))
                continue
            kept.append(partner)
        found[rid] = kept
    return found, pairer.refusals


def find_candidates(pairer: Pairer, records: Sequence[dict], samples: Sequence[dict],
                    min_support: float = 1.0) -> dict[str, list[Partner] | None]:
    """`search_partners` without the refusals."""
    return search_partners(pairer, records, samples, min_support)[0]


def pair_records(pairer: Pairer, records: Sequence[dict], samples: Sequence[dict], min_support: float = 1.0) -> Pairing:
    found, refusals = search_partners(pairer, records, samples, min_support)
    return assign(records, found, refusals)
