"""Human validation (VALSE §4.4, App. E): votes in, `mturk` counts, `valid` flags and Table 5 figures out.

Annotators saw the image and two numbered texts, the caption first in half of
the items (`caption_first`: seeded per item, never shown), and chose one of
five answers: `first` (the first, not the second), `second`, `both`, `neither`,
`cannot_tell`. Votes come as a batch-results CSV (Amazon Mechanical Turk's, or
`foilforge annotate dump` from the own server): the columns `Input.item_id`,
`WorkerId` and `Answer.choice` are read, the others ignored.

Each answer is turned into caption / foil / other with the item's order. An
annotator whose caption preference on the gold items (params.yaml
`instruments.<I>.validation.gold`) is below `gold_threshold` is excluded from every count.
A record gets VALSE's `mturk` = {"caption": n, "foil": n, "other": n} and
`valid` (caption chosen by at least `valid_min_caption` annotators); without a
votes file every record keeps `mturk: null` and the stage says so.

The metrics file holds VALSE Table 5 for the instrument: items, % valid,
% unanimous, Krippendorff's alpha (nominal, the 5 caption-relative categories)
over all voted items and over the valid subset, and who was excluded and why.

Winoground groups (a record with a `group`: its caption true of its image, its
foil true of the partner image `group.image_1`) are validated from a second
votes file (default: the record votes file's name with `.groups.csv`). The
annotator saw both images, A and B, and both texts, 1 and 2, each order a
seeded coin per group (`group_orders`), and said for each text which image it
describes: `A`, `B`, `both`, `neither`, `cannot_tell` (`Answer.text_1`,
`Answer.text_2`). A vote is `matched` when the caption went to the record's
image and the foil to the partner image, `swapped` when the other way round,
`other` otherwise; the group is valid when at least `valid_min_caption`
annotators matched (workers the gold check excluded are left out here too).

The annotate stage reads from here too: the seeded coins that order an item's texts and a group's images and
texts, so the page an annotator saw and the votes read back agree."""

from __future__ import annotations

import csv
import hashlib
import logging
import math
from pathlib import Path

from foilforge.errors import ConfigError, InputError
from foilforge.io import write_json, write_jsonl
from foilforge.records import valid_by_votes
from foilforge.settings import InstrumentValidationSettings, instrument_settings

log = logging.getLogger(__name__)

def caption_first(item_id: str, seed: int = 0) -> bool:
    """Whether text 1 is the caption: a seeded coin per item, stable when other items come and go."""
    return hashlib.sha256(f"{seed}\0{item_id}".encode("utf-8")).digest()[0] % 2 == 0


def group_orders(group_id: str, seed: int = 0) -> tuple[bool, bool]:
    """(image_0 shown as A, caption_0 shown as text 1): two seeded coins per group, on distinct keys."""
    return caption_first(f"{group_id}\0image order", seed), caption_first(f"{group_id}\0text order", seed)



CHOICES = ("first", "second", "both", "neither", "cannot_tell")
# caption-relative categories: what alpha is computed on (annotators of one item saw the same order)
CATEGORIES = ("caption", "foil", "both", "neither", "cannot_tell")
VOTE_COLUMNS = ("Input.item_id", "WorkerId", "Answer.choice")
#: a group vote: for each text, the image it describes (A and B as displayed)
GROUP_CHOICES = ("A", "B", "both", "neither", "cannot_tell")
GROUP_VOTE_COLUMNS = ("Input.item_id", "WorkerId", "Answer.text_1", "Answer.text_2")
#: what a group vote means once decoded with the group's orders: what alpha is computed on
GROUP_CATEGORIES = ("matched", "swapped", "other")
def votes_path(settings: InstrumentValidationSettings, instrument: str) -> Path:
    return Path(settings.votes or f"data/annotations/{instrument}.csv")


def group_votes_path(votes_file) -> Path:
    """The group votes file next to the record votes file: data/annotations/<I>.csv -> <I>.groups.csv."""
    votes_file = Path(votes_file)
    return votes_file.with_name(f"{votes_file.stem}.groups.csv")


def group_relative(text_1: str, text_2: str, image_0_first: bool, caption_0_first: bool) -> str:
    """A group vote decoded: `matched` (caption_0 -> image_0 and caption_1 -> image_1), `swapped` (each text to
    the other image), else `other` (both, neither, cannot tell, or both texts to one image)."""
    image_of = {"A": 0 if image_0_first else 1, "B": 1 if image_0_first else 0}
    caption_0, caption_1 = (text_1, text_2) if caption_0_first else (text_2, text_1)
    picked = (image_of.get(caption_0), image_of.get(caption_1))
    return {(0, 1): "matched", (1, 0): "swapped"}.get(picked, "other")


def relative_choice(choice: str, first_is_caption: bool) -> str:
    """first/second -> caption/foil for this item's order; both/neither/cannot_tell stay."""
    if choice == "first":
        return "caption" if first_is_caption else "foil"
    if choice == "second":
        return "foil" if first_is_caption else "caption"
    return choice


# ---------------------------------------------------------------- reading votes

def read_votes(path, known_ids) -> list[dict]:
    """Rows of a batch-results CSV as {line, item_id, worker, choice}; every problem names file, line and field.

    The whole file is checked before anything is returned, so a bad file never leads to a partial output.
    """
    return [{"line": line, "item_id": item_id, "worker": worker, "choice": answers["Answer.choice"]}
            for line, item_id, worker, answers in _read_answer_rows(path, known_ids, {"Answer.choice": CHOICES})]


def read_group_votes(path, known_ids) -> list[dict]:
    """Rows of a group batch-results CSV as {line, item_id, worker, text_1, text_2}; problems as `read_votes`."""
    answers = {"Answer.text_1": GROUP_CHOICES, "Answer.text_2": GROUP_CHOICES}
    return [{"line": line, "item_id": item_id, "worker": worker, "text_1": given["Answer.text_1"],
             "text_2": given["Answer.text_2"]}
            for line, item_id, worker, given in _read_answer_rows(path, known_ids, answers, "the instrument's groups")]


def _read_answer_rows(path, known_ids, answers: dict, known_what: str = "the instrument's records"):
    """(line, item id, worker, {answer column: value}) per row, the whole file checked before anything is returned:
    the columns present, ids known and non-empty, each answer one of its allowed values, one answer per worker
    and item."""
    path = Path(path)
    known_ids = set(known_ids)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(path, f"not valid UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start})") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    header = reader.fieldnames or []
    for column in ("Input.item_id", "WorkerId", *answers):
        if column not in header:
            raise InputError(path, f"missing column (header has: {', '.join(header) or 'nothing'})",
                             record="line 1", field=column)
    rows, seen = [], {}
    for row in reader:
        line = reader.line_num
        item_id = (row.get("Input.item_id") or "").strip()
        worker = (row.get("WorkerId") or "").strip()
        if not item_id:
            raise InputError(path, "empty item id", record=f"line {line}", field="Input.item_id")
        if item_id not in known_ids:
            raise InputError(path, f"unknown item id {item_id!r} (not in {known_what})",
                             record=f"line {line}", field="Input.item_id")
        if not worker:
            raise InputError(path, "empty worker id", record=f"line {line}", field="WorkerId")
        given = {}
        for column, allowed in answers.items():
            given[column] = (row.get(column) or "").strip()
            if given[column] not in allowed:
                what = "choice" if column == "Answer.choice" else "answer"
                raise InputError(path, f"unknown {what} {given[column]!r}; expected one of {', '.join(allowed)}",
                                 record=f"line {line}", field=column)
        if (worker, item_id) in seen:
            raise InputError(path, f"duplicate answer: worker {worker!r} already answered item {item_id!r} "
                                   f"on line {seen[worker, item_id]}", record=f"line {line}", field="WorkerId")
        seen[worker, item_id] = line
        rows.append((line, item_id, worker, given))
    return rows


# ---------------------------------------------------------------- agreement and counts

def gold_check(votes: list[dict], gold_ids: set, threshold: float) -> tuple[set, list[dict], list[str]]:
    """(excluded workers, [{worker, reason, ...}], workers with no gold answers) from the gold items."""
    per_worker: dict[str, list[str]] = {}
    for vote in votes:
        if vote["item_id"] in gold_ids:
            per_worker.setdefault(vote["worker"], []).append(vote["relative"])
    excluded, report = set(), []
    for worker, answers in sorted(per_worker.items()):
        share = sum(a == "caption" for a in answers) / len(answers)
        if share < threshold:
            excluded.add(worker)
            report.append({"worker": worker, "gold_answers": len(answers), "caption_share": share,
                           "reason": f"chose the caption on {sum(a == 'caption' for a in answers)}/{len(answers)} "
                                     f"gold items ({100 * share:.0f}%), below the threshold {100 * threshold:.0f}%"})
    unchecked = sorted({v["worker"] for v in votes} - set(per_worker)) if gold_ids else []
    return excluded, report, unchecked


def reliability_matrix(votes: list[dict], item_ids: list[str], categories=CATEGORIES):
    """Annotators x items, category codes (index in `categories` of each vote's `relative`), NaN where an
    annotator did not answer."""
    import numpy as np

    workers = sorted({v["worker"] for v in votes})
    column = {item: j for j, item in enumerate(item_ids)}
    row = {worker: i for i, worker in enumerate(workers)}
    matrix = np.full((len(workers), len(item_ids)), np.nan)
    for vote in votes:
        if vote["item_id"] in column:
            matrix[row[vote["worker"]], column[vote["item_id"]]] = categories.index(vote["relative"])
    return matrix


def nominal_alpha(votes: list[dict], item_ids: list[str], categories=CATEGORIES) -> float | None:
    """Krippendorff's alpha (nominal, over `categories`) via the `krippendorff` package; None when undefined."""
    import krippendorff

    if not item_ids:
        return None
    matrix = reliability_matrix(votes, item_ids, categories)
    import numpy as np

    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # one category only: 0/0, reported as None
            alpha = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal",
                                       value_domain=list(range(len(categories))))
    except ValueError:  # fewer than two pairable values: agreement is undefined, not zero
        return None
    alpha = float(alpha)
    return None if math.isnan(alpha) else alpha


def validate_records(records: list[dict], votes: list[dict] | None, settings: InstrumentValidationSettings,
                     instrument: str) -> dict:
    """Set `mturk`/`valid` on the records (in place); return the Table 5 metrics."""
    metrics = {"instrument": instrument, "items": len(records), "has_votes": votes is not None,
               "annotators_per_item": settings.annotators_per_item,
               "valid_min_caption": settings.valid_min_caption}
    if votes is None:
        for record in records:
            record["mturk"] = None
            record.pop("valid", None)
        return metrics
    ids = {str(r["id"]) for r in records}
    gold_ids = {str(g) for g in settings.gold}
    unknown_gold = sorted(gold_ids - ids)
    if unknown_gold:
        raise ConfigError(f"params.yaml instruments.{instrument}.validation.gold: item(s) not in the instrument: {', '.join(unknown_gold)}")
    for vote in votes:
        vote["relative"] = relative_choice(vote["choice"], caption_first(vote["item_id"], settings.seed))
    excluded, excluded_report, unchecked = gold_check(votes, gold_ids, settings.gold_threshold)
    kept = [v for v in votes if v["worker"] not in excluded]
    counts: dict[str, dict] = {}
    for vote in kept:
        entry = counts.setdefault(vote["item_id"], {"caption": 0, "foil": 0, "other": 0})
        entry[vote["relative"] if vote["relative"] in ("caption", "foil") else "other"] += 1
    valid_ids, unanimous = [], 0
    for record in records:
        entry = counts.get(str(record["id"]))
        record["mturk"] = entry
        if entry is None:
            record.pop("valid", None)
            continue
        record["valid"] = valid_by_votes(entry, settings.valid_min_caption)
        if record["valid"]:
            valid_ids.append(str(record["id"]))
        unanimous += entry["caption"] == sum(entry.values())
    voted_ids = sorted(counts)
    n_voted = len(voted_ids)
    per_item = [sum(e.values()) for e in counts.values()]
    metrics.update({
        "items_voted": n_voted,
        "items_without_votes": len(records) - n_voted,
        "items_incomplete": sum(n < settings.annotators_per_item for n in per_item),
        "items_over_quota": sum(n > settings.annotators_per_item for n in per_item),
        "valid": len(valid_ids),
        "valid_pct": 100 * len(valid_ids) / n_voted if n_voted else None,
        "unanimous": unanimous,
        "unanimous_pct": 100 * unanimous / n_voted if n_voted else None,
        "alpha_all": nominal_alpha(kept, voted_ids),
        "alpha_valid": nominal_alpha(kept, sorted(valid_ids)),
        "votes": len(votes),
        "votes_counted": len(kept),
        "annotators": len({v["worker"] for v in votes}),
        "annotators_excluded": excluded_report,
        "annotators_without_gold": unchecked,
        "gold_items": len(gold_ids),
        "gold_threshold": settings.gold_threshold,
    })
    return metrics


def grouped(records: list[dict]) -> list[dict]:
    """The records the select stage gave a second image (`group`, foilforge/groups.py)."""
    return [r for r in records if isinstance(r.get("group"), dict)]


def validate_groups(records: list[dict], votes: list[dict] | None, settings: InstrumentValidationSettings,
                    excluded=frozenset()) -> dict:
    """Set `group.valid` and `group.votes` = {matched, swapped, other} on the voted groups (in place); return the
    `groups` metrics block. Without votes the records are left as they are."""
    groups = grouped(records)
    block = {"items": len(groups), "has_votes": votes is not None}
    if votes is None:
        return block
    for vote in votes:
        vote["relative"] = group_relative(vote["text_1"], vote["text_2"], *group_orders(vote["item_id"], settings.seed))
    kept = [v for v in votes if v["worker"] not in excluded]
    counts: dict[str, dict] = {}
    for vote in kept:
        counts.setdefault(vote["item_id"], dict.fromkeys(GROUP_CATEGORIES, 0))[vote["relative"]] += 1
    valid = unanimous = 0
    for record in groups:
        group = record["group"]
        entry = counts.get(str(group["id"]))
        if entry is None:
            continue
        group["votes"] = entry
        group["valid"] = entry["matched"] >= settings.valid_min_caption
        valid += group["valid"]
        unanimous += entry["matched"] == sum(entry.values())
    voted = len(counts)
    block.update({
        "voted": voted,
        "valid": valid,
        "valid_pct": 100 * valid / voted if voted else None,
        "unanimous": unanimous,
        "unanimous_pct": 100 * unanimous / voted if voted else None,
        "alpha": nominal_alpha(kept, sorted(counts), GROUP_CATEGORIES),
        "votes": len(votes),
        "votes_counted": len(kept),
        "annotators": len({v["worker"] for v in votes}),
        "annotators_excluded": sorted({v["worker"] for v in votes} & set(excluded)),
    })
    return block


def validate(params: dict, instrument: str, input_path, output_path, metrics_path, votes=None, group_votes=None) -> dict:
    from foilforge.records import read_instrument

    settings = instrument_settings(params, instrument).validation
    records = read_instrument(Path(input_path))
    votes_file = Path(votes) if votes else votes_path(settings, instrument)
    group_votes_file = Path(group_votes) if group_votes else group_votes_path(votes_file)
    if votes_file.is_file():
        vote_rows = read_votes(votes_file, {str(r["id"]) for r in records})
    else:
        vote_rows = None
        log.warning("%s: no votes file at %s; records keep mturk: null (not validated by humans yet)",
                    instrument, votes_file)
    # the whole group file is checked before anything is written, like the record votes
    group_rows = (read_group_votes(group_votes_file, {str(r["group"]["id"]) for r in grouped(records)})
                  if group_votes_file.is_file() else None)
    metrics = validate_records(records, vote_rows, settings, instrument)
    metrics["votes_file"] = str(votes_file)
    excluded = {entry["worker"] for entry in metrics.get("annotators_excluded") or []}
    metrics["groups"] = {**validate_groups(records, group_rows, settings, excluded), "votes_file": str(group_votes_file)}
    if group_rows is not None:
        log.info("%s: %d/%d voted groups valid, alpha %s", instrument, metrics["groups"]["valid"],
                 metrics["groups"]["voted"], metrics["groups"]["alpha"])
    elif metrics["groups"]["items"]:
        log.warning("%s: no group votes file at %s; %d group(s) stay without a `valid` verdict",
                    instrument, group_votes_file, metrics["groups"]["items"])
    write_jsonl(output_path, records)
    write_json(metrics_path, metrics)
    if vote_rows is not None:
        log.info("%s: %d/%d voted items valid, alpha %s (valid subset %s); %d annotator(s) excluded",
                 instrument, metrics["valid"], metrics["items_voted"], metrics["alpha_all"], metrics["alpha_valid"],
                 len(metrics["annotators_excluded"]))
    return metrics
