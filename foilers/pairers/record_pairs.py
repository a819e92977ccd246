"""Record pairs: two kept records that are each other's partner (`pair_id`, `pair_member`).

swap_obj / swap_att give two captions that swap each other's words one `pair_id` (member 0 and 1: the caption of
one is the foil of the other), and predicate_noun's counter-balanced triplets (I1, S1, S2) and (I2, S2, S1) do
the same. Each such pair is one group, held by member 0: image_0 and caption_0 are member 0's image and caption,
image_1 and caption_1 member 1's. A member whose other member was not kept stays unpaired.

The evidence is one claim, the whole foil: member 1's own caption (its annotation), so the group is fully
supported by construction (`basis: annotation`).
"""

from __future__ import annotations

from collections import defaultdict

from foilforge.groups import ANNOTATION, Claim
from foilforge.pairing import PAIRERS, Pairer, Partner, text_key


@PAIRERS.register("record_pairs.v1")
class RecordPairs(Pairer):
    evidence = "two records whose captions are each other's foils (pair_id): each image's own caption is the other's foil"

    def __init__(self):
        pass  # no arguments: params.yaml `args: {}`

    def index(self, samples, records) -> None:
        self._members: dict[str, dict[int, dict]] = defaultdict(dict)
        for record in records:
            if record.get("pair_id") is not None:
                self._members[str(record["pair_id"])][record.get("pair_member")] = record

    def holds_group(self, record: dict) -> bool:
        # member 1 leaves the group to member 0; a record in no pair holds its own (and finds no partner)
        return record.get("pair_member") != 1

    def candidates(self, record: dict, sample: dict | None) -> list[Partner]:
        if record.get("pair_id") is None:
            return []
        members = self._members.get(str(record["pair_id"]), {})
        other = members.get(1 - record.get("pair_member", 0)) if record.get("pair_member") in (0, 1) else None
        if other is None or text_key(other["caption"]) != text_key(record["foil"]) \
                or text_key(other["foil"]) != text_key(record["caption"]):
            return []
        return [Partner(sample_id=str(other.get("sample_id", other["id"])), image_file=other["image_file"],
                        dataset_idx=None if other.get("dataset_idx") is None else str(other["dataset_idx"]),
                        rule="record pair: each caption is the other's foil", partner_record=str(other["id"]),
                        annotations=(str(record["id"]), str(other["id"])),
                        claims=(Claim(kind="caption", text=other["caption"], supported_by=(str(other["id"]),),
                                      edited=True, basis=ANNOTATION),),
                        absent=(record["caption"],))]
