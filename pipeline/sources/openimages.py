"""openimages: `files: {boxes, relationships, classes}` (boxes
`*-annotations-bbox.csv`, relationships `*-annotations-vrd.csv`, classes
`class-descriptions-boxable.csv`, no header). Boxes are
`[xmin, xmax, ymin, ymax]` (normalised, the CSV's column order). Names come
from the class file; an id not in it (attribute ids, objects of "is") keeps
the id as its name. The relationships CSV streams; the boxes CSV (2 GB for
train) streams too and only the boxes of images that have relationships are
kept (their numbers are checked; other rows only for their column count).
"""

from __future__ import annotations

from typing import Iterator

from foilforge.errors import InputError
from foilforge.io import iter_csv
from foilforge.pipeline.sources.base import Source, as_float, progress, reader, split_for

BOX_HEADER = ["ImageID", "Source", "LabelName", "Confidence", "XMin", "XMax", "YMin", "YMax",
              "IsOccluded", "IsTruncated", "IsGroupOf", "IsDepiction", "IsInside"]
VRD_HEADER = ["ImageID", "LabelName1", "LabelName2", "XMin1", "XMax1", "YMin1", "YMax1",
              "XMin2", "XMax2", "YMin2", "YMax2", "RelationshipLabel"]
BOX_FIELDS = ("XMin", "XMax", "YMin", "YMax")
VRD_BOX_FIELDS = ("XMin1", "XMax1", "YMin1", "YMax1", "XMin2", "XMax2", "YMin2", "YMax2")


def read_class_names(path) -> dict[str, str]:
    """`LabelName,DisplayName` rows (no header; a `LabelName,DisplayName` first row is skipped) -> {id: name}."""
    names: dict[str, str] = {}
    first = True
    for rowno, row in iter_csv(path, has_header=False):
        if len(row) != 2:
            raise InputError(path, f"expected 2 columns (LabelName,DisplayName), got {len(row)}", record=f"row {rowno}")
        label, name = row[0].strip().lstrip("\ufeff"), row[1].strip()
        if first and (label, name) == ("LabelName", "DisplayName"):
            first = False
            continue
        first = False
        if not label:
            raise InputError(path, "empty label id", record=f"row {rowno}", field="LabelName")
        names[label] = name
    if not names:
        raise InputError(path, "no class descriptions")
    return names


@reader("openimages", roles=("boxes", "relationships", "classes"))
def read_openimages(src: Source) -> Iterator[dict]:
    boxes_path, vrd_path = src.file("boxes"), src.file("relationships")
    names = read_class_names(src.file("classes"))
    # relationships first: they say which images (and so which box rows) are needed
    relationships: dict[str, list[tuple]] = {}
    for rowno, row in progress(iter_csv(vrd_path, VRD_HEADER), f"ingest {src.name}: relationships", unit="row"):
        where = f"row {rowno}"
        for key in ("ImageID", "LabelName1", "LabelName2", "RelationshipLabel"):
            if not row[key]:
                raise InputError(vrd_path, "empty value", record=where, field=key)
        coords = tuple(as_float(row[key], vrd_path, where, key) for key in VRD_BOX_FIELDS)
        relationships.setdefault(row["ImageID"], []).append(
            (row["LabelName1"], row["LabelName2"], row["RelationshipLabel"], coords))
    if not relationships:
        raise InputError(vrd_path, "no relationship rows")
    boxes: dict[str, list[tuple]] = {image: [] for image in relationships}
    # streamed: only rows of images with relationships are kept (and their numbers parsed)
    for rowno, row in progress(iter_csv(boxes_path, BOX_HEADER, required_prefix=True),
                                f"ingest {src.name}: boxes", unit="row"):
        kept = boxes.get(row["ImageID"])
        if kept is None:
            continue
        where = f"row {rowno}"
        if not row["LabelName"]:
            raise InputError(boxes_path, "empty value", record=where, field="LabelName")
        kept.append((row["LabelName"], tuple(as_float(row[key], boxes_path, where, key) for key in BOX_FIELDS)))
    split = split_for(src, "relationships")
    for image, rels in relationships.items():
        yield src.sample(
            image, dataset="OpenImages_v6", dataset_idx=image, image_file=f"{image}.jpg", original_split=split,
            relationships=[{"subject": s, "object": o, "predicate": p,
                            "subject_name": names.get(s, s), "object_name": names.get(o, o),
                            "subject_box": list(c[:4]), "object_box": list(c[4:])} for s, o, p, c in rels],
            boxes=[{"label": label, "name": names.get(label, label), "box": list(box)} for label, box in boxes[image]],
        )
