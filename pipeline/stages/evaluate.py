"""Score a benchmark and write metrics.json (VALSE §5.1 metrics; pairs, Winoground, multiple choice).

Scorers (params.yaml `evaluate.scorers`, plus every `--scores` file):

* `text_lm`: the text-only LM of `models.text_baseline`; score = -perplexity.
* `image_text`: an image-text model through transformers (`models.image_text`,
  CLIP `openai/clip-vit-base-patch32` by default); score = the model's
  `logits_per_image` (scaled cosine). Runs on the records whose image file
  exists under `evaluate.image_root`; with no image there it is skipped and
  says so in metrics.json.
* a scores file (`--scores FILE`, repeatable), for models run elsewhere:
  JSONL lines `{"id": ..., "caption_score": x, "foil_score": y}` or a CSV with
  the header `id,caption_score,foil_score`; multiple-choice items give
  `"candidate_scores": [...]` (JSONL) instead. Higher = better match. `id` is
  the record's key in the benchmark file. When the scores are probabilities of
  "matches" set `evaluate.scores_threshold` (e.g. 0.5) to get acc, p_c, p_f.

Record shapes: a caption/foil record gives the five VALSE metrics; records
that carry a `pair_id` also give pair accuracy (both members right) and, when
the two members swap caption and foil (I1: C1 vs C2; I2: C2 vs C1), the
Winoground text/image/group scores; records with `candidates` (list of texts)
and `label` (index) give multiple-choice accuracy.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path

from foilforge import metrics
from foilforge.errors import ConfigError, InputError
from foilforge.io import iter_csv, iter_jsonl, read_json, require, write_json
from foilforge.models import ModelSpec, load_transformers_model, resolve_path, torch_device
from foilforge.params import load_params
from foilforge.registry import Registry

log = logging.getLogger(__name__)

#: scorers `evaluate.scorers` may name ("text_lm" means the newest text_lm.vN); others: `foilforge.evaluate_scorers`
#: entry points. A factory takes (params, settings, skipped) and returns a scorer, or None after noting in `skipped` why not.
SCORERS = Registry("evaluate scorer", entry_points="foilforge.evaluate_scorers")
NON_INSTRUMENT_FILES = {"manifest.json"}


# ---------------------------------------------------------------- the benchmark

def instrument_files(directory: Path) -> list[Path]:
    """The instrument files of a benchmark: those the export manifest lists, else every *.json (a VALSE release).

    The manifest matters because an export also writes other JSON (predicate-noun's eval_set.json, elbow curves).
    """
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        return [p for p in sorted(directory.glob("*.json")) if p.name not in NON_INSTRUMENT_FILES]
    manifest = read_json(manifest_path)
    entries = manifest.get("instruments") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict):
        raise InputError(manifest_path, "expected an object with 'instruments'", field="instruments")
    files = []
    for name, entry in sorted(entries.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(manifest_path, "expected the instrument's benchmark file name", record=name, field="file")
        path = directory / entry["file"]
        if not path.is_file():
            raise InputError(manifest_path, f"lists {entry['file']}, which is not in {directory}", record=name, field="file")
        files.append(path)
    return files


def read_benchmark(directory) -> dict[str, tuple[Path, dict[str, dict]]]:
    """{instrument: (file, {id: record})} from the export's VALSE-format files."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "benchmark directory not found")
    benchmark = {}
    for path in instrument_files(directory):
        data = read_json(path)
        if not isinstance(data, dict):
            raise InputError(path, f"expected a JSON object {{id: record}}, got {type(data).__name__}")
        benchmark[path.stem] = (path, data)
    if not benchmark:
        raise InputError(directory, "no benchmark files (*.json) found")
    return benchmark


def record_texts(path, record_id, record: dict) -> list[str]:
    """The texts to score for one record: [caption, foil], or the candidates of a multiple-choice item."""
    if "candidates" in record:
        candidates = require(record, "candidates", list, path, record_id)
        if not candidates or not all(isinstance(c, str) for c in candidates):
            raise InputError(path, "expected a non-empty list of texts", record=record_id, field="candidates")
        require(record, "label", int, path, record_id)
        return candidates
    return [require(record, "caption", str, path, record_id), require(record, "foil", str, path, record_id)]


# ---------------------------------------------------------------- scorers

class TextLMScorer:
    name = "text_lm"

    def __init__(self, lm):
        self.lm = lm
        self.model_id = lm.spec.describe()

    def score(self, items) -> list[list[float] | None]:
        from pipeline.stages.baseline import perplexities

        texts = [t for _, _, item_texts in items for t in item_texts]
        ppl = perplexities(self.lm, texts, desc="text_lm")
        out, k = [], 0
        for _, _, item_texts in items:
            out.append([-p for p in ppl[k : k + len(item_texts)]])
            k += len(item_texts)
        return out


class ImageTextScorer:
    """CLIP-style scoring: one image, several texts, score = logits_per_image."""

    name = "image_text"
    PARAM_KEY = "models.image_text"

    def __init__(self, spec: ModelSpec, image_root):
        self.spec = spec
        self.model_id = spec.describe()
        self.image_root = Path(image_root)
        self.model = load_transformers_model(spec, "AutoModel",
                                             refuse_new_weights=("text_projection", "visual_projection", "logit_scale"))
        self.processor = _load_processor(spec)
        self.device = torch_device(spec)

    def image_path(self, record: dict) -> Path | None:
        name = record.get("image_file")
        if not isinstance(name, str) or not name:
            return None
        path = self.image_root / name
        return path if path.is_file() else None

    def score(self, items) -> list[list[float] | None]:
        import torch
        from PIL import Image
        from tqdm import tqdm

        out: list[list[float] | None] = [None] * len(items)
        present = [k for k, (_, record, _) in enumerate(items) if self.image_path(record) is not None]
        batch = max(1, self.spec.batch_size)
        with torch.inference_mode():
            for start in tqdm(range(0, len(present), batch), desc="image_text", disable=len(present) <= batch):
                chunk = present[start : start + batch]
                images = []
                for k in chunk:
                    with Image.open(self.image_path(items[k][1])) as image:
                        images.append(image.convert("RGB"))
                texts = [t for k in chunk for t in items[k][2]]
                inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True, truncation=True)
                inputs = {key: value.to(self.device) for key, value in inputs.items()}
                logits = self.model(**inputs).logits_per_image.float().cpu()  # [images, texts]
                offset = 0
                for row, k in enumerate(chunk):
                    n = len(items[k][2])
                    out[k] = logits[row, offset : offset + n].tolist()
                    offset += n
        return out


def _load_processor(spec: ModelSpec):
    from transformers import AutoProcessor

    path, _ = resolve_path(spec)
    try:
        return AutoProcessor.from_pretrained(path, **spec.hub_kwargs())
    except Exception as err:
        raise ConfigError(f"could not load the processor of {spec.describe()!r} for {spec.param_key}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0][:300]}. Set {spec.param_key}.name_or_path "
                          f"to a hub id or a local directory holding the model and its processor.") from err


class ScoresFileScorer:
    """Scores computed elsewhere, read from a documented CSV/JSONL file."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = f"scores_{self.path.stem}"
        self.model_id = str(self.path)
        self.scores = read_scores_file(self.path)

    def score(self, items) -> list[list[float] | None]:
        return [self.scores.get(record_id) for record_id, _, _ in items]


def _number(value, path, row, field) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(path, f"expected a number, got {value!r:.40}", record=row, field=field) from None
    if isinstance(value, bool) or math.isnan(number):
        raise InputError(path, f"expected a number, got {value!r:.40}", record=row, field=field)
    return number


def read_scores_file(path) -> dict[str, list[float]]:
    path = Path(path)
    scores: dict[str, list[float]] = {}

    def add(record_id, values, row):
        if record_id in scores:
            raise InputError(path, f"duplicate id {record_id!r}", record=row, field="id")
        scores[record_id] = values

    if path.suffix.lower() == ".csv":
        for rowno, row in iter_csv(path, expected_header=["id", "caption_score", "foil_score"]):
            where = f"row {rowno}"
            add(row["id"], [_number(row["caption_score"], path, where, "caption_score"),
                            _number(row["foil_score"], path, where, "foil_score")], where)
        return scores
    for line, row in enumerate(iter_jsonl(path), start=1):
        where = f"line {line}"
        if "id" not in row:
            raise InputError(path, "missing field", record=where, field="id")
        if "candidate_scores" in row:
            values = row["candidate_scores"]
            if not isinstance(values, list) or not values:
                raise InputError(path, "expected a non-empty list of numbers", record=where, field="candidate_scores")
            add(str(row["id"]), [_number(v, path, where, "candidate_scores") for v in values], where)
            continue
        for field in ("caption_score", "foil_score"):
            if field not in row:
                raise InputError(path, "missing field", record=where, field=field)
        add(str(row["id"]), [_number(row["caption_score"], path, where, "caption_score"),
                             _number(row["foil_score"], path, where, "foil_score")], where)
    return scores


# ---------------------------------------------------------------- metrics for one instrument

def instrument_metrics(items, scores, threshold: float | None) -> dict:
    """All metrics that apply to one instrument's scored records."""
    binary, choice = [], []
    for (record_id, record, texts), item_scores in zip(items, scores):
        if item_scores is None:
            continue
        if len(item_scores) != len(texts):
            raise ValueError(f"record {record_id}: {len(item_scores)} scores for {len(texts)} texts")
        (choice if "candidates" in record else binary).append((record_id, record, item_scores))
    result = {"n_records": len(items), "n_scored": len(binary) + len(choice)}
    if binary:
        result.update(metrics.binary_metrics([s[0] for _, _, s in binary], [s[1] for _, _, s in binary], threshold))
        paired = [(r["pair_id"], rid, r, s) for rid, r, s in binary if r.get("pair_id") is not None]
        if paired:
            result.update(pair_and_winoground(paired))
    if choice:
        result["multiple_choice"] = metrics.multiple_choice_accuracy((s, r["label"]) for _, r, s in choice)
    return result


def pair_and_winoground(paired) -> dict:
    """Pair accuracy over records sharing a pair_id; Winoground where the two members swap caption and foil."""
    groups = defaultdict(list)
    for pair_id, record_id, record, scores in paired:
        groups[pair_id].append((record, scores))
    complete = {pid: members for pid, members in groups.items() if len(members) == 2}
    result = metrics.pair_accuracy((pid, s[0] > s[1]) for pid, members in complete.items() for _, s in members)
    result["n_incomplete_pairs"] = len(groups) - len(complete)
    examples = []
    for (first, s1), (second, s2) in complete.values():
        if first["caption"] == second["foil"] and first["foil"] == second["caption"]:
            # C0 = first caption, I0 = first image; C1 = second caption, I1 = second image
            examples.append((s1[0], s1[1], s2[1], s2[0]))
    if examples:
        result["winoground"] = metrics.winoground_scores(examples)
    return result


# ---------------------------------------------------------------- the stage


def check_settings(params: dict) -> dict:
    """The `evaluate` block, its scorers checked against the registry (its shape is the schema's)."""
    settings = params.get("evaluate") or {}
    names = settings.get("scorers", ["text_lm"])
    unknown = [n for n in names if n not in SCORERS.unversioned() and n not in SCORERS.names()]
    if unknown:
        raise ConfigError(f"params.yaml evaluate.scorers: unknown scorer(s) {', '.join(unknown)}; "
                          f"known: {', '.join(SCORERS.unversioned())}")
    return settings


@SCORERS.register("text_lm.v1")
def text_lm_scorer(params: dict, settings: dict, skipped: dict):
    from pipeline.stages.baseline import load_text_lm

    return TextLMScorer(load_text_lm(params))


#: what counts as an image under evaluate.image_root (its README.md, which keeps the DVC dep present, does not)
IMAGE_SUFFIXES = frozenset((".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"))


def has_images(root) -> bool:
    return any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in Path(root).rglob("*"))


@SCORERS.register("image_text.v1")
def image_text_scorer(params: dict, settings: dict, skipped: dict):
    root = settings.get("image_root")
    if not root or not Path(root).is_dir() or not has_images(root):
        skipped["image_text"] = f"no image files under evaluate.image_root ({root!r})"
        log.info("image_text scorer skipped: %s", skipped["image_text"])
        return None
    block = (params.get("models") or {}).get("image_text")
    return ImageTextScorer(ModelSpec.from_params(block, ImageTextScorer.PARAM_KEY), root)


def build_scorers(params: dict, scores_files) -> tuple[list, dict]:
    settings = check_settings(params)
    scorers, skipped = [], {}
    for name in settings.get("scorers", ["text_lm"]):
        scorer = SCORERS.get(SCORERS.newest(name))(params, settings, skipped)
        if scorer is not None:
            scorers.append(scorer)
    scorers.extend(ScoresFileScorer(p) for p in scores_files or [])
    return scorers, skipped


def evaluate(benchmark: dict, scorers, threshold_for) -> dict:
    # texts are checked once, before any model runs, so a bad record fails fast
    items_by_instrument = {instrument: [(rid, r, record_texts(path, rid, r)) for rid, r in records.items()]
                           for instrument, (path, records) in benchmark.items()}
    out = {}
    for scorer in scorers:
        per_instrument = {}
        for instrument, (path, _) in benchmark.items():
            items = items_by_instrument[instrument]
            try:
                per_instrument[instrument] = instrument_metrics(items, scorer.score(items), threshold_for(scorer))
            except ValueError as err:
                raise InputError(path, f"{scorer.name}: {err}") from None
        out[scorer.name] = {"model": scorer.model_id, "instruments": per_instrument}
    return out


def run(params: dict, benchmark_dir, output, scores_files=(), scorers=None) -> dict:
    benchmark = read_benchmark(benchmark_dir)
    skipped = {}
    if scorers is None:
        scorers, skipped = build_scorers(params, scores_files)
    settings = params.get("evaluate") or {}
    scores_threshold = settings.get("scores_threshold")

    def threshold_for(scorer):
        # only probabilities from a scores file have a meaningful threshold; LM and CLIP scores only rank
        return scores_threshold if isinstance(scorer, ScoresFileScorer) else None

    result = evaluate(benchmark, scorers, threshold_for)
    for name, reason in skipped.items():
        result[name] = {"skipped": reason}
    write_json(output, result)
    return result


def add_arguments(parser) -> None:
    parser.add_argument("--benchmark-dir", required=True, help="directory of exported VALSE-format JSON files")
    parser.add_argument("--scores", action="append", default=[],
                        help="scores file (CSV or JSONL: id, caption_score, foil_score); repeatable")
    parser.add_argument("--output", required=True, help="metrics JSON (for `dvc metrics show`)")


def main(args) -> int:
    result = run(load_params(args.params), args.benchmark_dir, args.output, args.scores)
    for scorer, block in result.items():
        for instrument, values in (block.get("instruments") or {}).items():
            acc = values.get("acc_r")
            log.info("%s / %s: acc_r %s over %d", scorer, instrument, "n/a" if acc is None else f"{100 * acc:.1f}%",
                     values.get("n_scored", 0))
    return 0
