"""Normalise one source (params.yaml `sources.NAME`) into a JSONL table of samples.

    foilforge ingest SOURCE --output data/ingested/SOURCE.jsonl [--params params.yaml]

A source block names a `format` (one reader function each, registered in the
`READERS` registry as "coco.v1", ...; params.yaml writes `format: coco`, which
means the newest version, or pins one with `format: coco.v1`; readers of other
packages register through the `foilforge.readers` entry points), a
`root` directory (relative paths are relative to the working directory, the
project root under DVC), the `files` it reads by role, and optionally `split`,
`dataset` (overrides the default dataset name below) and, for VisDial,
`image_file_template`. Unknown keys, roles or formats are a ConfigError listing
what is allowed.

Every sample (one JSON object a line, sorted by `id`, written atomically) has

| field | value |
|---|---|
| `id` | `<source key>:<native id>` (native ids below), unique in the table |
| `source` | the params.yaml key |
| `dataset`, `original_split`, `dataset_idx`, `image_file` | as VALSE released them (see below) |

`original_split` is `split` from params.yaml when set, else read from the data
(Visual7W image `split`, VisDial `split` with its year dropped: "val2018" ->
"val"), else from the file name (`captions_val2017.json` -> "val",
`oidv6-train-annotations-vrd.csv` -> "train"), else null.

Per format (free text fields are whitespace-normalised: runs of whitespace,
newlines included, become one space, ends are stripped; VALSE records are kept
verbatim):

| format | one sample per | native id | dataset | dataset_idx | image_file | more fields |
|---|---|---|---|---|---|---|
| coco | caption annotation | annotation id | `coco2017` | annotation id (int) | image `file_name` | `caption`, `image_id`; `instance_category_ids` when `instances` is configured |
| visual7w | "how many" QA (`type` "how", question starting "how many", any case) | `qa_id` | `visual7w` | image id as a string | image `filename` | `question`, `answer`, `multiple_choices`, `qa_id`, `image_id`, `type` |
| swig | image | image name | `SWiG` | image name | image name | `verb`, `frames`, `nouns` ({noun id: [glosses]} for the ids in the frames), `verb_abstract`, `verb_order`, `bb`, `height`, `width` |
| visdial | dialog turn | `<image_id>:<turn>` | `VisDial_v1.0` | `image_id` (int) | `image_file_template.format(image_id=...)` | `caption`, `question`, `answer` (resolved from the index lists), `turn` (0-based), `image_id` |
| openimages | image with relationships | `ImageID` | `OpenImages_v6` | `ImageID` | `<ImageID>.jpg` | `relationships`: [{`subject`, `object`, `predicate`, `subject_name`, `object_name`, `subject_box`, `object_box`}], `boxes`: [{`label`, `name`, `box`}] |
| bd2bb | CSV row | row `id` | `BD2BB` | row `id` (int) | null (the CSV names no image) | `intention` (sent1), `sent2`, `endings` [5], `types` [5], `label` (int), `target` (= endings[label]) |
| valse | released record | `<file stem>:<key>` | as released | as released | as released | every released field, plus `valse_instrument` (file stem) and `valse_key` |

Details:

* coco: `files: {captions: captions_<split><year>.json}`, optionally
  `instances: instances_<split><year>.json` (COCO's object annotations: each
  sample then carries the sorted category ids annotated on its image, [] for
  none; foil_it uses them). VALSE's plurals file
  says `coco2017`, its relations file `coco_2017`; set `dataset` to match the
  other one.
* visual7w: `files: {telling: dataset_v7w_telling.json}`; the telling file
  holds every split, so here `split` *selects* the images of that split
  (VALSE used test) instead of labelling them.
* swig: `files: {annotations: test.json, space: imsitu_space.json}`; a verb or
  noun id missing from the space file is an error naming the annotation.
  `verb_abstract`/`verb_order` are the verb's `abstract`/`order` there.
* visdial: `files: {dialogs: visdial_1.0_<split>.json}`; `image_file_template`
  is required. val: `VisualDialog_val2018_{image_id:012d}.jpg`. train draws on
  COCO train2014 *and* val2014 images and the dialog file does not say which,
  so give both templates as a list and the image folder as `files.images`
  (a directory under `root`, read for its file names only; a symlink works):
  each image id gets the template whose file exists there, and an id with no
  file or two is an error naming it. A single template names every image
  without looking. VALSE's coreference records have no `dataset_idx`; samples
  carry the VisDial image id there.
* openimages: `files: {boxes, relationships, classes}` (boxes
  `*-annotations-bbox.csv`, relationships `*-annotations-vrd.csv`, classes
  `class-descriptions-boxable.csv`, no header). Boxes are
  `[xmin, xmax, ymin, ymax]` (normalised, the CSV's column order). Names come
  from the class file; an id not in it (attribute ids, objects of "is") keeps
  the id as its name. The relationships CSV streams; the boxes CSV (2 GB for
  train) streams too and only the boxes of images that have relationships are
  kept (their numbers are checked; other rows only for their column count).
* bd2bb: `files: {actions: test.csv}`, header
  `id,sent1,sent2,ending0..ending4,end0type..end4type,label`; `label` must
  point at the `targ` ending.
* valse: `files: {instrument: existence.json}`, a released `{key: record}`
  file; each record needs a `caption` string and a `foil` string or `foils`
  list. Missing `dataset`/`original_split`/`dataset_idx`/`image_file` become
  null (VALSE's coreference files have no `dataset_idx`); `dataset` and
  `split` in params.yaml, when set, replace the released values; a released
  field named `id` or `source` is kept as `released_id` / `released_source`.
  This lets a released benchmark be re-filtered and re-scored.

Bad input stops the stage with one foilforge.errors.InputError naming the file,
the record (index path such as `annotations[12]`, CSV `row N`, image name or
key) and the field, and no output file is written. A source that gives no
samples at all is an error too.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from foilforge.errors import ConfigError, InputError
from foilforge.io import iter_csv, read_json, require, write_jsonl
from foilforge.params import block, load_params
from foilforge.registry import Registry

log = logging.getLogger(__name__)

SOURCE_KEYS = ("format", "root", "files", "split", "dataset", "image_file_template")
COMMON_FIELDS = ("dataset", "original_split", "dataset_idx", "image_file")


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Source:
    """One resolved params.yaml source block."""

    name: str
    format: str
    root: Path
    files: dict = field(default_factory=dict)  # role -> Path
    split: str | None = None
    dataset: str | None = None
    image_file_template: str | tuple[str, ...] | None = None

    def file(self, role: str) -> Path:
        return self.files[role]

    def sample(self, native_id, *, dataset: str, dataset_idx, image_file, original_split, **fields) -> dict:
        record = {
            "id": f"{self.name}:{native_id}",
            "source": self.name,
            "dataset": self.dataset or dataset,
            "original_split": original_split,
            "dataset_idx": dataset_idx,
            "image_file": image_file,
        }
        record.update(fields)
        return record


Reader = Callable[[Source], Iterator[dict]]

#: "format.vN" -> reader (a generator of samples); `reader.roles` are the files it needs
READERS = Registry("reader", entry_points="foilforge.readers")


def reader(fmt: str, roles: tuple[str, ...], uses_template: bool = False, optional_roles: tuple[str, ...] = (),
           version: int = 1):
    """Register a reader for `fmt` (as "fmt.v<version>") that reads the files of `roles` (and of `optional_roles` when given)."""

    def decorator(fn):
        fn.format_name = fmt
        fn.roles = roles
        fn.optional_roles = optional_roles
        fn.uses_template = uses_template
        return READERS.register(f"{fmt}.v{version}")(fn)

    return decorator


def reader_for(fmt: str) -> Reader:
    """The reader a params.yaml `format` names ("coco": the newest coco reader; "coco.v1": that one)."""
    return READERS.get(READERS.newest(fmt))


# ---------------------------------------------------------------- helpers

def _progress(iterable: Iterable, desc: str, total: int | None = None, unit: str = "rec"):
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not sys.stderr.isatty(), mininterval=1.0)


def _text(value: str) -> str:
    return " ".join(value.split())


_SPLIT_RE = re.compile(r"(?<![a-z])(train|validation|val|dev|test)(?=\d{4}|[^a-z]|$)")


def split_from_name(path: Path) -> str | None:
    """The split named in a file name (captions_val2017.json -> val), or None."""
    found = _SPLIT_RE.findall(Path(path).stem.lower())
    return found[-1] if found else None


def _split(src: Source, role: str, from_data: str | None = None) -> str | None:
    if src.split is not None:
        return src.split
    if from_data:
        return from_data
    return split_from_name(src.file(role))


def _int(value: str, path, record, field_name) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InputError(path, f"expected an integer, got {value!r:.40}", record=record, field=field_name) from None


def _float(value: str, path, record, field_name) -> float:
    try:
        return float(value)
    except ValueError:
        raise InputError(path, f"expected a number, got {value!r:.40}", record=record, field=field_name) from None


def _list_of(record: dict, field_name: str, kind, path, record_id) -> list:
    values = require(record, field_name, list, path, record_id)
    for i, value in enumerate(values):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(path, f"expected a list of {kind.__name__}, item {i} is {type(value).__name__} ({value!r:.40})",
                             record=record_id, field=field_name)
    return values


def _nonempty(text: str, path, record, field_name) -> str:
    if not text:
        raise InputError(path, "empty text", record=record, field=field_name)
    return text


# ---------------------------------------------------------------- coco

def read_coco_instances(path) -> dict[int, list[int]]:
    """{image id: sorted category ids annotated on it} from a COCO `instances_*.json`."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'annotations', got {type(data).__name__}")
    shown: dict[int, set] = {}
    for i, ann in enumerate(require(data, "annotations", list, path, None)):
        where = f"annotations[{i}]"
        shown.setdefault(require(ann, "image_id", int, path, where), set()).add(
            require(ann, "category_id", int, path, where))
    return {image: sorted(ids) for image, ids in shown.items()}


@reader("coco", roles=("captions",), optional_roles=("instances",))
def read_coco(src: Source) -> Iterator[dict]:
    path = src.file("captions")
    # optional: per-image category ids, so foil_it never foils with an object that is annotated on the image
    instances = read_coco_instances(src.file("instances")) if "instances" in src.files else None
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'images' and 'annotations', got {type(data).__name__}")
    images = require(data, "images", list, path, None)
    annotations = require(data, "annotations", list, path, None)
    split = _split(src, "captions")
    files: dict[int, str] = {}
    for i, image in enumerate(images):
        where = f"images[{i}]"
        image_id = require(image, "id", int, path, where)
        file_name = require(image, "file_name", str, path, where)
        if image_id in files:
            raise InputError(path, f"duplicate image id {image_id}", record=where, field="id")
        files[image_id] = file_name
    seen: set[int] = set()
    for i, ann in enumerate(_progress(annotations, f"ingest {src.name}", unit="caption")):
        where = f"annotations[{i}]"
        ann_id = require(ann, "id", int, path, where)
        image_id = require(ann, "image_id", int, path, where)
        caption = _nonempty(_text(require(ann, "caption", str, path, where)), path, where, "caption")
        if image_id not in files:
            raise InputError(path, f"image_id {image_id} is not in 'images'", record=where, field="image_id")
        if ann_id in seen:
            raise InputError(path, f"duplicate annotation id {ann_id}", record=where, field="id")
        seen.add(ann_id)
        extra = {} if instances is None else {"instance_category_ids": instances.get(image_id, [])}
        yield src.sample(ann_id, dataset="coco2017", dataset_idx=ann_id, image_file=files[image_id],
                         original_split=split, caption=caption, image_id=image_id, **extra)


# ---------------------------------------------------------------- visual7w

def is_how_many(qa_type: str, question: str) -> bool:
    return qa_type == "how" and question.strip().lower().startswith("how many")


@reader("visual7w", roles=("telling",))
def read_visual7w(src: Source) -> Iterator[dict]:
    path = src.file("telling")
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'images', got {type(data).__name__}")
    images = require(data, "images", list, path, None)
    seen: set[int] = set()
    for i, image in enumerate(_progress(images, f"ingest {src.name}", unit="image")):
        where = f"images[{i}]"
        image_id = require(image, "image_id", int, path, where)
        filename = require(image, "filename", str, path, where)
        split = require(image, "split", str, path, where)
        qa_pairs = require(image, "qa_pairs", list, path, where)
        if src.split is not None and split != src.split:
            continue
        for j, qa in enumerate(qa_pairs):
            qwhere = f"images[{i}].qa_pairs[{j}]"
            qa_type = require(qa, "type", str, path, qwhere)
            question = require(qa, "question", str, path, qwhere)
            if not is_how_many(qa_type, question):
                continue
            qa_id = require(qa, "qa_id", int, path, qwhere)
            answer = require(qa, "answer", str, path, qwhere)
            choices = _list_of(qa, "multiple_choices", str, path, qwhere)
            if qa_id in seen:
                raise InputError(path, f"duplicate qa_id {qa_id}", record=qwhere, field="qa_id")
            seen.add(qa_id)
            yield src.sample(qa_id, dataset="visual7w", dataset_idx=str(image_id), image_file=filename,
                             original_split=split, question=_text(question), answer=_text(answer),
                             multiple_choices=[_text(c) for c in choices], qa_id=qa_id, image_id=image_id,
                             type=qa_type)


# ---------------------------------------------------------------- swig

def _imsitu_space(path: Path) -> tuple[dict, dict]:
    space = read_json(path)
    if not isinstance(space, dict):
        raise InputError(path, f"expected a JSON object with 'nouns' and 'verbs', got {type(space).__name__}")
    return require(space, "nouns", dict, path, None), require(space, "verbs", dict, path, None)


@reader("swig", roles=("annotations", "space"))
def read_swig(src: Source) -> Iterator[dict]:
    path, space_path = src.file("annotations"), src.file("space")
    nouns, verbs = _imsitu_space(space_path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object {{image_name: record}}, got {type(data).__name__}")
    split = _split(src, "annotations")
    glosses: dict[str, list] = {}

    def gloss(noun_id: str, image: str, where: str) -> list:
        if noun_id not in glosses:
            if noun_id not in nouns:
                raise InputError(path, f"noun id {noun_id!r} is not in {space_path.name} 'nouns'", record=image, field=where)
            entry = nouns[noun_id]
            glosses[noun_id] = _list_of(entry, "gloss", str, space_path, f"nouns.{noun_id}")
            if not glosses[noun_id]:
                raise InputError(space_path, "expected at least one gloss", record=f"nouns.{noun_id}", field="gloss")
        return glosses[noun_id]

    for image, ann in _progress(data.items(), f"ingest {src.name}", total=len(data), unit="image"):
        verb = require(ann, "verb", str, path, image)
        if verb not in verbs:
            raise InputError(path, f"verb {verb!r} is not in {space_path.name} 'verbs'", record=image, field="verb")
        entry = verbs[verb]
        abstract = require(entry, "abstract", str, space_path, f"verbs.{verb}")
        order = _list_of(entry, "order", str, space_path, f"verbs.{verb}")
        frames = require(ann, "frames", list, path, image)
        if not frames:
            raise InputError(path, "expected at least one frame", record=image, field="frames")
        used: dict[str, list] = {}
        for k, frame in enumerate(frames):
            if not isinstance(frame, dict):
                raise InputError(path, f"expected an object {{role: noun id}}, got {type(frame).__name__}",
                                 record=image, field=f"frames[{k}]")
            for role, noun_id in frame.items():
                if not isinstance(noun_id, str):
                    raise InputError(path, f"expected a noun id string, got {type(noun_id).__name__} ({noun_id!r:.40})",
                                     record=image, field=f"frames[{k}].{role}")
                if noun_id:
                    used[noun_id] = gloss(noun_id, image, f"frames[{k}].{role}")
        extra = {}
        if "bb" in ann:
            extra["bb"] = require(ann, "bb", dict, path, image)
        for key in ("height", "width"):
            if key in ann:
                extra[key] = require(ann, key, int, path, image)
        yield src.sample(image, dataset="SWiG", dataset_idx=image, image_file=image, original_split=split,
                         verb=verb, frames=frames, nouns=dict(sorted(used.items())), verb_abstract=abstract,
                         verb_order=order, **extra)


# ---------------------------------------------------------------- visdial

def _fill(src: Source, template: str, image_id: int) -> str:
    try:
        return template.format(image_id=image_id)
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        raise ConfigError(f"params.yaml sources.{src.name}.image_file_template {template!r} "
                          f"cannot be filled ({type(err).__name__}: {err}); the one field is {{image_id}}") from None


def _image_file(src: Source, image_id: int, existing: set[str] | None = None, path=None, where=None) -> str:
    """The image's file name: the template filled in, or, with several templates, the one whose file exists.

    VisDial v1.0 train draws on COCO train2014 *and* val2014 images and its dialog file does not say which,
    so a list of templates is tried against the names under `files.images`.
    """
    if isinstance(src.image_file_template, str):
        return _fill(src, src.image_file_template, image_id)
    names = [_fill(src, template, image_id) for template in src.image_file_template]
    found = [name for name in names if name in existing]
    if len(found) != 1:
        problem = "no image file" if not found else f"{len(found)} image files"
        raise InputError(path, f"{problem} for image_id {image_id} under {src.file('images')} "
                               f"(tried {', '.join(names)})", record=where, field="image_id")
    return found[0]


@reader("visdial", roles=("dialogs",), uses_template=True, optional_roles=("images",))
def read_visdial(src: Source) -> Iterator[dict]:
    path = src.file("dialogs")
    if not src.image_file_template:
        raise ConfigError(f"params.yaml sources.{src.name} needs image_file_template "
                          "(e.g. [\"COCO_train2014_{image_id:012d}.jpg\", \"COCO_val2014_{image_id:012d}.jpg\"] "
                          "with files.images for train, \"VisualDialog_val2018_{image_id:012d}.jpg\" for val)")
    for template in (src.image_file_template,) if isinstance(src.image_file_template, str) else src.image_file_template:
        _fill(src, template, 0)
    existing = None
    if isinstance(src.image_file_template, tuple):
        images = src.file("images")
        if not images.is_dir():
            raise InputError(images, "not a directory (params.yaml files.images: the folder holding the images)")
        existing = {entry.name for entry in images.iterdir()}  # one listing, not a stat per image
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with 'data', got {type(data).__name__}")
    file_split = data.get("split")
    if file_split is not None and not isinstance(file_split, str):
        raise InputError(path, f"expected str, got {type(file_split).__name__}", field="split")
    split = _split(src, "dialogs", re.sub(r"\d+$", "", file_split) if file_split else None)
    body = require(data, "data", dict, path, None)
    questions = _list_of(body, "questions", str, path, "data")
    answers = _list_of(body, "answers", str, path, "data")
    dialogs = require(body, "dialogs", list, path, "data")
    seen: set[int] = set()

    def resolve(turn: dict, key: str, table: list, table_name: str, where: str) -> str:
        index = require(turn, key, int, path, where)
        if not 0 <= index < len(table):
            raise InputError(path, f"index {index} out of range (data.{table_name} has {len(table)} entries)",
                             record=where, field=key)
        return table[index]

    for i, dialog in enumerate(_progress(dialogs, f"ingest {src.name}", unit="dialog")):
        where = f"data.dialogs[{i}]"
        image_id = require(dialog, "image_id", int, path, where)
        caption = _text(require(dialog, "caption", str, path, where))
        turns = require(dialog, "dialog", list, path, where)
        if image_id in seen:
            raise InputError(path, f"duplicate image_id {image_id}", record=where, field="image_id")
        seen.add(image_id)
        image_file = _image_file(src, image_id, existing, path, where)
        for j, turn in enumerate(turns):
            twhere = f"{where}.dialog[{j}]"
            question = resolve(turn, "question", questions, "questions", twhere)
            answer = resolve(turn, "answer", answers, "answers", twhere)
            yield src.sample(f"{image_id}:{j}", dataset="VisDial_v1.0", dataset_idx=image_id, image_file=image_file,
                             original_split=split, caption=caption, question=_text(question), answer=_text(answer),
                             turn=j, image_id=image_id)


# ---------------------------------------------------------------- openimages

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
    for rowno, row in _progress(iter_csv(vrd_path, VRD_HEADER), f"ingest {src.name}: relationships", unit="row"):
        where = f"row {rowno}"
        for key in ("ImageID", "LabelName1", "LabelName2", "RelationshipLabel"):
            if not row[key]:
                raise InputError(vrd_path, "empty value", record=where, field=key)
        coords = tuple(_float(row[key], vrd_path, where, key) for key in VRD_BOX_FIELDS)
        relationships.setdefault(row["ImageID"], []).append(
            (row["LabelName1"], row["LabelName2"], row["RelationshipLabel"], coords))
    if not relationships:
        raise InputError(vrd_path, "no relationship rows")
    boxes: dict[str, list[tuple]] = {image: [] for image in relationships}
    # streamed: only rows of images with relationships are kept (and their numbers parsed)
    for rowno, row in _progress(iter_csv(boxes_path, BOX_HEADER, required_prefix=True),
                                f"ingest {src.name}: boxes", unit="row"):
        kept = boxes.get(row["ImageID"])
        if kept is None:
            continue
        where = f"row {rowno}"
        if not row["LabelName"]:
            raise InputError(boxes_path, "empty value", record=where, field="LabelName")
        kept.append((row["LabelName"], tuple(_float(row[key], boxes_path, where, key) for key in BOX_FIELDS)))
    split = _split(src, "relationships")
    for image, rels in relationships.items():
        yield src.sample(
            image, dataset="OpenImages_v6", dataset_idx=image, image_file=f"{image}.jpg", original_split=split,
            relationships=[{"subject": s, "object": o, "predicate": p,
                            "subject_name": names.get(s, s), "object_name": names.get(o, o),
                            "subject_box": list(c[:4]), "object_box": list(c[4:])} for s, o, p, c in rels],
            boxes=[{"label": label, "name": names.get(label, label), "box": list(box)} for label, box in boxes[image]],
        )


# ---------------------------------------------------------------- bd2bb

BD2BB_HEADER = ["id", "sent1", "sent2", *(f"ending{i}" for i in range(5)), *(f"end{i}type" for i in range(5)), "label"]


@reader("bd2bb", roles=("actions",))
def read_bd2bb(src: Source) -> Iterator[dict]:
    path = src.file("actions")
    split = _split(src, "actions")
    seen: set[int] = set()
    for rowno, row in _progress(iter_csv(path, BD2BB_HEADER), f"ingest {src.name}", unit="row"):
        where = f"row {rowno}"
        row_id = _int(row["id"], path, where, "id")
        label = _int(row["label"], path, where, "label")
        endings = [_text(row[f"ending{i}"]) for i in range(5)]
        types = [row[f"end{i}type"].strip() for i in range(5)]
        if not 0 <= label < 5:
            raise InputError(path, f"expected 0..4, got {label}", record=where, field="label")
        if types[label] != "targ":
            raise InputError(path, f"label {label} points at a {types[label]!r} ending, expected 'targ'",
                             record=where, field="label")
        _nonempty(endings[label], path, where, f"ending{label}")
        if row_id in seen:
            raise InputError(path, f"duplicate id {row_id}", record=where, field="id")
        seen.add(row_id)
        yield src.sample(row_id, dataset="BD2BB", dataset_idx=row_id, image_file=None, original_split=split,
                         intention=_text(row["sent1"]), sent2=_text(row["sent2"]), endings=endings, types=types,
                         label=label, target=endings[label])


# ---------------------------------------------------------------- valse

@reader("valse", roles=("instrument",))
def read_valse(src: Source) -> Iterator[dict]:
    path = src.file("instrument")
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object {{id: record}}, got {type(data).__name__}")
    if not data:
        raise InputError(path, "no records")
    stem = path.stem
    for key, record in _progress(data.items(), f"ingest {src.name}", total=len(data), unit="record"):
        require(record, "caption", str, path, key)
        if "foil" in record or "foils" not in record:
            require(record, "foil", str, path, key)
        else:
            _list_of(record, "foils", str, path, key)
        fields = {(f"released_{k}" if k in ("id", "source") else k): v for k, v in record.items()}
        for name in COMMON_FIELDS:
            fields.setdefault(name, None)
        fields.update(id=f"{src.name}:{stem}:{key}", source=src.name, valse_instrument=stem, valse_key=key)
        if src.dataset:
            fields["dataset"] = src.dataset
        if src.split is not None:
            fields["original_split"] = src.split
        yield fields


# ---------------------------------------------------------------- the stage

def resolve_source(params: dict, name: str) -> Source:
    """The Source of params.yaml `sources.NAME`, every key checked."""
    sources = block(params, "sources")
    if not isinstance(sources, dict) or name not in sources:
        known = ", ".join(sorted(sources)) if isinstance(sources, dict) else "(none)"
        raise ConfigError(f"params.yaml has no source {name!r}; sources: {known}")
    spec = sources[name]
    key = f"params.yaml sources.{name}"
    if not isinstance(spec, dict):
        raise ConfigError(f"{key} must be a mapping with format, root and files")
    unknown = sorted(set(spec) - set(SOURCE_KEYS))
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(SOURCE_KEYS)}")
    fmt = spec.get("format")
    try:
        read = reader_for(fmt)
    except ConfigError:
        raise ConfigError(f"{key}.format {fmt!r} is not a known format; formats: {', '.join(READERS.unversioned())}") from None
    root = spec.get("root")
    if not isinstance(root, str) or not root:
        raise ConfigError(f"{key}.root must be a directory path")
    files = spec.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) and v for v in files.values()):
        raise ConfigError(f"{key}.files must map each role to a file name; format {fmt} reads {', '.join(read.roles)}")
    missing = [role for role in read.roles if role not in files]
    extra = sorted(set(files) - set(read.roles) - set(read.optional_roles))
    if missing or extra:
        problem = f"missing role(s) {', '.join(missing)}" if missing else f"unknown role(s) {', '.join(extra)}"
        optional = f" (optional: {', '.join(read.optional_roles)})" if read.optional_roles else ""
        raise ConfigError(f"{key}.files: {problem}; format {fmt} reads {', '.join(read.roles)}{optional}")
    for opt in ("split", "dataset"):
        if spec.get(opt) is not None and not isinstance(spec[opt], str):
            raise ConfigError(f"{key}.{opt} must be a string, got {spec[opt]!r}")
    template = spec.get("image_file_template")
    if isinstance(template, list):
        if not template or not all(isinstance(t, str) and t for t in template):
            raise ConfigError(f"{key}.image_file_template must be a string or a list of strings, got {template!r}")
        template = tuple(template) if len(template) > 1 else template[0]
    elif template is not None and not isinstance(template, str):
        raise ConfigError(f"{key}.image_file_template must be a string or a list of strings, got {template!r}")
    if isinstance(template, tuple) and "images" not in files:
        raise ConfigError(f"{key}.image_file_template lists {len(template)} templates: set {key}.files.images to the "
                          f"directory holding the images, so each image id is named by the template whose file exists")
    if spec.get("image_file_template") is not None and not read.uses_template:
        raise ConfigError(f"{key}.image_file_template is not used by format {fmt} "
                          f"(formats that use it: {', '.join(sorted({READERS.get(n).format_name for n in READERS.names() if READERS.get(n).uses_template}))})")
    root_path = Path(root)
    roles = [*read.roles, *(r for r in read.optional_roles if r in files)]
    return Source(name=name, format=fmt, root=root_path, files={role: root_path / files[role] for role in roles},
                  split=spec.get("split"), dataset=spec.get("dataset"), image_file_template=template)


def read_source(params: dict, name: str) -> list[dict]:
    """All samples of source `name`, in reading order; raises on bad input or config."""
    src = resolve_source(params, name)
    samples, seen = [], set()
    for sample in reader_for(src.format)(src):
        if sample["id"] in seen:  # readers check their own ids; this is the last guard
            raise InputError(src.root, f"two samples with id {sample['id']!r}", record=sample["id"], field="id")
        seen.add(sample["id"])
        samples.append(sample)
    return samples


def ingest(params: dict, name: str, output) -> int:
    samples = read_source(params, name)
    if not samples:
        src = resolve_source(params, name)
        raise InputError(next(iter(src.files.values())), f"no samples for source {name!r} (format {src.format})")
    return write_jsonl(output, samples)


def add_arguments(parser) -> None:
    parser.add_argument("source", help="source name, a key of params.yaml `sources`")
    parser.add_argument("--output", required=True, help="samples, one JSON object a line (sorted by id)")


def main(args) -> int:
    params = load_params(args.params)
    count = ingest(params, args.source, args.output)
    log.info("%s: %d samples -> %s", args.source, count, args.output)
    return 0
