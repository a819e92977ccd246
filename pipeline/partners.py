"""Find each record's partners: second images that its foil describes (Winoground groups; foilforge/pairing.py).

Two uses:

    foilforge partners INSTRUMENT --input data/scored/I.jsonl --samples data/ingested/SOURCE.jsonl \
        --output data/partners/I.jsonl --metrics data/metrics/partners/I.json

runs the instrument's pairer (params.yaml `instruments.I.pairing`) on every scored record: one line a record with
its candidate partners, in the pairer's order. select then prefers, among a sample's candidates that pass the
keep rules, one that can be paired (`pairing.prefer_pairable`), and gives each kept record at most one partner
image, each image at most once; so a threshold change reruns select, never this stage. An instrument whose
source says nothing about another image (`pairer: null`) gets no partners and its `why` in the metrics.

    foilforge partners FILE --like INSTRUMENT --output DIR

mines groups inside a released benchmark file (VALSE JSON, SugarCrepe JSON, foilforge JSONL): records whose foil
is another image's caption, compared as INSTRUMENT's pairer compares texts, the partner image never stating the
record's caption. Writes DIR/groups.jsonl (Winoground's layout: id, image_0, image_1, caption_0, caption_1, tag)
and DIR/report.json (records, groups, coverage, why the rest stayed unpaired).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from foilforge.errors import ConfigError, InputError
from foilforge.io import read_jsonl, write_json, write_jsonl
from foilforge.pairing import instrument_pairer

log = logging.getLogger(__name__)


def find(params: dict, instrument: str, input_path, samples_path, output_path, metrics_path) -> dict:
    from foilforge.groups import Refusals, candidate_file_rows
    from foilforge.pairing import search_partners
    from foilforge.records import read_instrument
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, instrument).pairing
    records = read_instrument(Path(input_path))
    pairer = instrument_pairer(params, instrument)
    if pairer is None:
        if not settings.why:
            raise ConfigError(f"params.yaml instruments.{instrument}.pairing: pairer is null; say `why` (the card "
                              "prints it: what the source cannot tell about another image)")
        candidates, refusals = {str(r["id"]): [] for r in records}, Refusals()
    else:
        samples = read_jsonl(samples_path, allow_empty=True) if samples_path else []
        candidates, refusals = search_partners(pairer, records, samples, settings.min_support)
    rows = candidate_file_rows(candidates, refusals)
    write_jsonl(output_path, rows, sort_by_id=False)
    holders = [r for r in rows if r["holds_group"]]
    metrics = {"pairer": settings.pairer, "why": None if pairer else settings.why,
               "evidence": getattr(pairer, "evidence", None), "records": len(rows),
               "with_partners": sum(1 for r in holders if r["partners"]),
               "held_by_other_member": len(rows) - len(holders), "min_support": settings.min_support,
               "ranked_by": getattr(pairer, "ranked_by", None),
               "records_refused": dict(sorted(Counter(refusals.records.values()).items())),
               # refused as foils (select never keeps them): their own image's captions state the foil's part
               "foils_refused": dict(sorted(Counter(refusals.foils.values()).items())),
               "refused_partners": dict(sorted(sum((Counter(c) for c in refusals.partners.values()), Counter()).items()))}
    write_json(metrics_path, metrics)
    return metrics


def released_records(path) -> list[dict]:
    """(id, image_file, caption, foil, tag) of every pair in a released file (VALSE JSON {id: record}, SugarCrepe
    JSON {"0": {filename, caption, negative_caption}}, foilforge JSONL); a pair without an image is an error."""
    from foilforge.released import FOIL_FIELD, IMAGE_FIELD, read_released, released_foil

    fmt, rows = read_released(path)
    foil_field, image_field = FOIL_FIELD[fmt], IMAGE_FIELD[fmt]
    records = []
    for key, row in rows:
        if not isinstance(row, dict):
            raise InputError(path, "expected a JSON object", record=key)
        foil = released_foil(fmt, row)
        for name, value in (("caption", row.get("caption")), (foil_field, foil), (image_field, row.get(image_field))):
            if not isinstance(value, str):
                raise InputError(path, "missing: every pair needs a caption, a foil and an image", record=key, field=name)
        records.append({"id": str(key), "image_file": row[image_field], "caption": row["caption"], "foil": foil,
                        "tag": row.get("linguistic_phenomena")})
    return records


def mine(params: dict, path, like: str, output_dir) -> dict:
    from foilforge.groups import NO_CANDIDATE, mine_released, text_key
    from foilforge.pairing import PAIRERS
    from foilforge.settings import instrument_settings

    settings = instrument_settings(params, like).pairing
    if like not in (params.get("instruments") or {}):
        raise ConfigError(f"--like {like!r}: not an instrument of params.yaml; instruments: "
                          f"{', '.join(sorted(params.get('instruments') or {}))}")
    if not settings.pairer:
        raise ConfigError(f"--like {like}: instrument {like} has no pairer ({settings.why or 'pairer: null'})")
    key = getattr(PAIRERS.get(PAIRERS.newest(settings.pairer)), "text_key", text_key)
    records = released_records(path)
    refused = [r for r in records if not text_key(r["foil"]) or text_key(r["foil"]) == text_key(r["caption"])]
    usable = [r for r in records if r not in refused]
    partners, pairing = mine_released(usable, key)
    by_id = {r["id"]: r for r in usable}
    groups = []
    for rid in sorted(partners):
        record, partner = by_id[rid], partners[rid]
        groups.append({"id": f"{rid}|group", "image_0": record["image_file"], "image_1": partner.image_file,
                       "caption_0": record["caption"], "caption_1": record["foil"],
                       "tag": record["tag"] or like, "record_id": rid, "partner_record_id": partner.sample_id,
                       "rule": partner.rule})
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(output_dir / "groups.jsonl", groups, sort_by_id=False)
    report = pairing.report(len(records))
    report["unpaired"] = {**report["unpaired"], **({"foil empty or equal to its caption": len(refused)} if refused else {})}
    report.update({"file": str(path), "like": like, "pairer": settings.pairer,
                   "no_partner_meaning": f"{NO_CANDIDATE}: no other image's caption in the file is the foil "
                                         "(or that image also states the caption)"})
    write_json(output_dir / "report.json", report)
    return report
