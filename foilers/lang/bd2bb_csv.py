"""BD2BB's released CSV layout (id,sent1,sent2,ending0..4,end0type..end4type,label) and the overlap of our
decoys with a released row's."""

from __future__ import annotations

from foilforge.errors import InputError

CSV_HEADER = ["id", "sent1", "sent2", *(f"ending{i}" for i in range(5)), *(f"end{i}type" for i in range(5)), "label"]


def bd2bb_row(record: dict) -> list:
    """One CSV row in the released layout; `id` is the source row id (dataset_idx)."""
    endings, types = record["endings"], record["end_types"]
    if len(endings) != 5 or len(types) != 5:
        raise InputError("<records>", f"needs 5 endings and 5 types, got {len(endings)}/{len(types)}", record=record.get("id"), field="endings")
    row_id = record.get("dataset_idx", record.get("id"))
    return [row_id, record.get("sent1", ""), record.get("sent2", ""), *endings, *types, record["label"]]


def write_bd2bb_csv(records: list[dict], path) -> int:
    """Write records as BD2BB's CSV: id,sent1,sent2,ending0..4,end0type..end4type,label."""
    import csv
    import io

    from foilforge.io import atomic_write

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for record in records:
        writer.writerow(bd2bb_row(record))
    with atomic_write(path, "w") as handle:
        handle.write(buffer.getvalue())
    return len(records)


def released_overlap(record: dict, sample: dict) -> dict:
    """How many of our decoys are among the sample's released decoys (same type / any type)."""
    released = {"lan": set(), "vis": set()}
    for ending, kind in zip(sample.get("endings") or [], sample.get("types") or []):
        if kind in released:
            released[kind].add(ending.strip().lower())
    ours = {kind: [e.strip().lower() for e, k in zip(record["endings"], record["end_types"]) if k == kind] for kind in ("lan", "vis")}
    any_released = released["lan"] | released["vis"]
    return {
        "lan_same_type": sum(e in released["lan"] for e in ours["lan"]),
        "vis_same_type": sum(e in released["vis"] for e in ours["vis"]),
        "any": sum(e in any_released for kind in ours for e in ours[kind]),
        "n": sum(len(v) for v in ours.values()),
    }
