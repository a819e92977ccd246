"""What the evaluate stage runs (pipeline/stages/evaluate.py says what it computes): the scorers (a registry,
`foilforge.evaluate_scorers` entry points for others), the metrics per instrument, pair and Winoground group, and
the per-item rows."""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path

from foilforge import metrics
from foilforge.errors import ConfigError, InputError
from foilforge.io import file_sha256, iter_csv, iter_jsonl, require, write_jsonl
from foilforge.models import ModelSpec, load_transformers_model, resolve_path, torch_device, torch_dtype
from foilforge.params import typed_params
from foilforge.registry import Registry

log = logging.getLogger(__name__)

#: scorers `evaluate.scorers` may name ("text_lm" means the newest text_lm.vN); others: `foilforge.evaluate_scorers`
#: entry points. A factory takes (params, settings, skipped) and returns a scorer, or None after noting in `skipped` why not.
SCORERS = Registry("evaluate scorer", entry_points="foilforge.evaluate_scorers")


# ---------------------------------------------------------------- the benchmark

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

def _plain(value):
    """`value` as JSON data: tuples to lists, a dataclass (transformers' SizeDict) to a dict without its unset
    (None) fields, anything else to its str."""
    import dataclasses

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def model_config(spec: ModelSpec, dtype, library: str, versions: dict, **more) -> dict:
    """What pins a model scorer's results (the `config` of its block in metrics.json): the model as configured,
    the dtype it ran in, its preprocessing (`more`) and the versions of the libraries that ran it."""
    import torch

    return {"library": library, "name_or_path": spec.name_or_path, "revision": spec.revision,
            **({"gguf_file": spec.gguf_file} if spec.gguf_file else {}), "dtype": _dtype_name(dtype),
            **{key: _plain(value) for key, value in more.items()},
            "versions": {**versions, "torch": torch.__version__}}


def _transformers_versions() -> dict:
    import transformers

    return {"transformers": transformers.__version__}


class TextLMScorer:
    name = "text_lm"

    def __init__(self, lm):
        self.lm = lm
        self.model_id = lm.spec.describe()

    def config(self) -> dict:
        # the dtype the model loads in (foilforge/models.py torch_dtype), read without loading it: a run whose
        # scores all came from the score cache (foilforge/lm.py) loads no model
        return model_config(self.lm.spec, torch_dtype(self.lm.spec, self.lm.device), "transformers",
                            _transformers_versions(), score="-perplexity")

    def score(self, items) -> list[list[float] | None]:
        from foilforge.pipeline.text_lm import perplexities

        texts = [t for _, _, item_texts in items for t in item_texts]
        ppl = perplexities(self.lm, texts, desc="text_lm")
        out, k = [], 0
        for _, _, item_texts in items:
            out.append([-p for p in ppl[k : k + len(item_texts)]])
            k += len(item_texts)
        return out


class ImageScorer:
    """What the scorers that look at a record's image share: where the image is, and batches of the records that
    have one (`spec.batch_size` records a batch; a record without an image file gets None).

    A subclass sets `name` and gives `similarities(paths, texts)`: the [images, texts] score matrix of one batch
    (the batch's images, and every text of its records in order)."""

    name = "image"

    def __init__(self, spec: ModelSpec, image_root):
        self.spec = spec
        self.model_id = spec.describe()
        self.image_root = Path(image_root)
        self.device = torch_device(spec)

    def image_path(self, record: dict) -> Path | None:
        name = record.get("image_file")
        if not isinstance(name, str) or not name:
            return None
        path = self.image_root / name
        return path if path.is_file() else None

    def similarities(self, paths: list[Path], texts: list[str]):
        raise NotImplementedError

    def score(self, items) -> list[list[float] | None]:
        import torch
        from tqdm import tqdm

        out: list[list[float] | None] = [None] * len(items)
        present = [k for k, (_, record, _) in enumerate(items) if self.image_path(record) is not None]
        batch = max(1, self.spec.batch_size)
        with torch.inference_mode():
            for start in tqdm(range(0, len(present), batch), desc=self.name, disable=len(present) <= batch):
                chunk = present[start : start + batch]
                scores = self.similarities([self.image_path(items[k][1]) for k in chunk],
                                           [t for k in chunk for t in items[k][2]]).float().cpu()
                offset = 0
                for row, k in enumerate(chunk):  # each image against its own record's texts
                    n = len(items[k][2])
                    out[k] = scores[row, offset : offset + n].tolist()
                    offset += n
        return out


class ImageTextScorer(ImageScorer):
    """CLIP-style scoring through transformers: one image, several texts, score = logits_per_image."""

    name = "image_text"
    PARAM_KEY = "models.image_text"

    def __init__(self, spec: ModelSpec, image_root):
        super().__init__(spec, image_root)
        self.model = load_transformers_model(spec, "AutoModel",
                                             refuse_new_weights=("text_projection", "visual_projection", "logit_scale"))
        self.processor = _load_processor(spec)

    def config(self) -> dict:
        images = getattr(self.processor, "image_processor", self.processor)
        preprocessing = {"processor": type(self.processor).__name__, "image_processor": type(images).__name__}
        for key in ("size", "crop_size", "image_mean", "image_std"):
            preprocessing[key] = getattr(images, key, None)
        return model_config(self.spec, self.model.dtype, "transformers", _transformers_versions(),
                            preprocessing=preprocessing, score="logits_per_image")

    def similarities(self, paths, texts):
        from PIL import Image

        images = []
        for path in paths:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True, truncation=True)
        inputs = {key: value.to(self.device) for key, value in inputs.items()}
        return self.model(**inputs).logits_per_image  # [images, texts]


def _load_processor(spec: ModelSpec):
    from transformers import AutoProcessor

    path, _ = resolve_path(spec)
    try:
        return AutoProcessor.from_pretrained(path, **spec.hub_kwargs())
    except Exception as err:
        raise ConfigError(f"could not load the processor of {spec.describe()!r} for {spec.param_key}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0][:300]}. Set {spec.param_key}.name_or_path "
                          f"to a hub id or a local directory holding the model and its processor.") from err


#: open_clip's `precision` for each params.yaml dtype (fp16/bf16: open_clip's own mixed precision, as OpenAI's CLIP)
OPEN_CLIP_PRECISION = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
OPEN_CLIP_SCHEMAS = ("hf-hub:", "local-dir:")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth")


class OpenClipScorer(ImageScorer):
    """An open_clip model scored as CLIP_benchmark's image_caption_selection (SugarCrepe, Winoground) does: the
    cosine of the L2-normalised `encode_image` and `encode_text` embeddings, the image through open_clip's eval
    transform (`preprocess_val`, which converts it to RGB itself)."""

    name = "open_clip"
    PARAM_KEY = "models.open_clip"

    def __init__(self, spec: ModelSpec, image_root):
        try:
            import open_clip
        except ImportError as err:
            raise ConfigError(f"evaluate.scorers names open_clip but open_clip cannot be imported ({err}): install "
                              f"open-clip-torch (`pip install -e .[harness]`), or take open_clip out of "
                              f"evaluate.scorers") from err

        super().__init__(spec, image_root)
        self.pretrained = _open_clip_pretrained(spec)
        if self.pretrained:
            self.model_id = f"{spec.name_or_path} ({self.pretrained})"
        self.dtype = torch_dtype(spec, self.device)
        self.precision = OPEN_CLIP_PRECISION[_dtype_name(self.dtype)]
        try:
            if spec.name_or_path.startswith("hf-hub:"):
                # open_clip builds an hf-hub model with random weights when they fail to download: fetch them first
                from open_clip.pretrained import download_pretrained_from_hf

                download_pretrained_from_hf(spec.name_or_path.split(":", 1)[1])
            self.model, _, self.preprocess = open_clip.create_model_and_transforms(
                spec.name_or_path, pretrained=self.pretrained or None, precision=self.precision, device=self.device)
            self.tokenizer = open_clip.get_tokenizer(spec.name_or_path)
        except Exception as err:
            raise _open_clip_error(spec, self.pretrained, err) from err
        self.model.eval()
        self.input_dtype = open_clip.get_input_dtype(self.precision)

    def config(self) -> dict:
        import open_clip

        return model_config(self.spec, self.dtype, "open_clip", {"open_clip": open_clip.__version__},
                            pretrained=self.pretrained, preprocessing=self.model.visual.preprocess_cfg, score="cosine")

    def similarities(self, paths, texts):
        import torch
        import torch.nn.functional as F
        from PIL import Image

        pixels = []
        for path in paths:
            with Image.open(path) as image:  # as CLIP_benchmark's SugarCrepe dataset: no convert before the transform
                pixels.append(self.preprocess(image))
        images = torch.stack(pixels).to(self.device, dtype=self.input_dtype)
        image_emb = F.normalize(self.model.encode_image(images).float(), dim=-1)
        text_emb = F.normalize(self.model.encode_text(self.tokenizer(texts).to(self.device)).float(), dim=-1)
        return image_emb @ text_emb.t()


def _open_clip_pretrained(spec: ModelSpec) -> str | None:
    """The spec's `pretrained` once checked: a load that would give random weights or ignore a setting is refused."""
    key = spec.param_key
    unknown = sorted(set(spec.extra) - {"pretrained"})
    if unknown:
        raise ConfigError(f"{key}: unknown key(s) {', '.join(unknown)}; allowed: name_or_path, pretrained, device, "
                          f"dtype, batch_size")
    if spec.revision or spec.gguf_file:
        raise ConfigError(f"{key}: open_clip takes no revision or gguf_file; pin a hub model by downloading it and "
                          f"setting {key}.name_or_path to local-dir:/path")
    pretrained = spec.extra.get("pretrained")
    if pretrained is not None and not isinstance(pretrained, str):
        raise ConfigError(f"{key}.pretrained: expected a pretrained tag or a checkpoint file, got {pretrained!r:.60}")
    name = spec.name_or_path
    if name.startswith("local-dir:"):
        directory = Path(name.split(":", 1)[1])
        if directory.is_dir() and not any(p.suffix in WEIGHT_SUFFIXES for p in directory.iterdir()):
            raise ConfigError(f"{key}.name_or_path is {name!r} but that directory holds no weights (*.safetensors, "
                              f"*.bin, *.pth): open_clip would build the model with random weights. Put the "
                              f"checkpoint (open_clip_model.safetensors) beside open_clip_config.json there")
    if name.startswith(OPEN_CLIP_SCHEMAS):
        if pretrained:
            log.warning("%s.pretrained (%s) is ignored: open_clip takes the weights of %s from there",
                        key, pretrained, name)
        return None
    if not pretrained:
        tags = _open_clip_tags(name, " (", ")")
        raise ConfigError(f"{key}.pretrained is not set: open_clip would build {name} with random weights. Set "
                          f"{key}.pretrained to a tag of open_clip.list_pretrained() for {name}{tags}, or to a "
                          f"checkpoint file")
    return pretrained


def _open_clip_tags(name: str, before: str, after: str = "") -> str:
    """The first pretrained tags open_clip ships for model `name` (openai first, as open_clip lists them) between
    `before` and `after`; '' for a name without tags."""
    import open_clip

    try:
        tags = list(open_clip.list_pretrained_tags_by_model(name))
    except Exception:  # a name open_clip does not know
        return ""
    return f"{before}{', '.join(tags[:8])}{', ...' if len(tags) > 8 else ''}{after}" if tags else ""


def _open_clip_error(spec: ModelSpec, pretrained: str | None, err: Exception) -> ConfigError:
    key = spec.param_key
    line = (str(err).splitlines() or [""])[0][:300]
    what = repr(spec.name_or_path) + (f" with pretrained {pretrained!r}" if pretrained else "")
    return ConfigError(
        f"could not load open_clip model {what} for {key}: {type(err).__name__}: {line}. Set {key}.name_or_path "
        f"and {key}.pretrained to a model name and pretrained tag from open_clip.list_pretrained() "
        f"(e.g. ViT-B-32 and openai{_open_clip_tags(spec.name_or_path, f'; tags for {spec.name_or_path}: ')}; "
        f"offline, the tag's weights must already be "
        f"in the Hugging Face cache, and HF_HUB_OFFLINE=1 saves the retries), or {key}.name_or_path to "
        f"hf-hub:org/repo or to local-dir:/path (a directory holding open_clip_config.json and the weights, "
        f"e.g. open_clip_model.safetensors)")


class ScoresFileScorer:
    """Scores computed elsewhere, read from a documented CSV/JSONL file."""

    def __init__(self, path):
        self.path = Path(path)
        self.name = f"scores_{self.path.stem}"
        self.model_id = str(self.path)
        self.scores = read_scores_file(self.path)

    def config(self) -> dict:
        return {"library": "scores file", "path": str(self.path), "sha256": file_sha256(self.path)}

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
    """The `evaluate` block (the schema's, defaults filled in, as the dict scorer factories get), its scorers checked
    against the registry."""
    settings = typed_params(params).evaluate.model_dump()
    names = settings["scorers"]
    unknown = [n for n in names if n not in SCORERS.unversioned() and n not in SCORERS.names()]
    if unknown:
        raise ConfigError(f"params.yaml evaluate.scorers: unknown scorer(s) {', '.join(unknown)}; "
                          f"known: {', '.join(SCORERS.unversioned())}")
    return settings


@SCORERS.register("text_lm.v1")
def text_lm_scorer(params: dict, settings: dict, skipped: dict):
    from foilforge.pipeline.text_lm import load_text_lm

    return TextLMScorer(load_text_lm(params))


#: what counts as an image under evaluate.image_root (its README.md, which keeps the DVC dep present, does not)
IMAGE_SUFFIXES = frozenset((".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"))


def has_images(root) -> bool:
    return any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in Path(root).rglob("*"))


def _image_scorer(cls, params: dict, settings: dict, skipped: dict):
    """An ImageScorer subclass built from its `models.<role>` block, or None (noted in `skipped`) without images."""
    root = settings.get("image_root")
    if not root or not Path(root).is_dir() or not has_images(root):
        skipped[cls.name] = f"no image files under evaluate.image_root ({root!r})"
        log.info("%s scorer skipped: %s", cls.name, skipped[cls.name])
        return None
    block = (params.get("models") or {}).get(cls.PARAM_KEY.split(".", 1)[1])
    return cls(ModelSpec.from_params(block, cls.PARAM_KEY), root)


@SCORERS.register("image_text.v1")
def image_text_scorer(params: dict, settings: dict, skipped: dict):
    return _image_scorer(ImageTextScorer, params, settings, skipped)


@SCORERS.register("open_clip.v1")
def open_clip_scorer(params: dict, settings: dict, skipped: dict):
    return _image_scorer(OpenClipScorer, params, settings, skipped)


def build_scorers(params: dict, scores_files) -> tuple[list, dict]:
    settings = check_settings(params)
    scorers, skipped = [], {}
    for name in settings["scorers"]:
        scorer = SCORERS.get(SCORERS.newest(name))(params, settings, skipped)
        if scorer is not None:
            scorers.append(scorer)
    scorers.extend(ScoresFileScorer(p) for p in scores_files or [])
    return scorers, skipped


def record_correct(record: dict, scores: list[float] | None) -> bool | None:
    """Whether the model got one record right, as the metrics count it: the caption strictly above the foil, or the
    labelled candidate strictly above every other (a tie is a miss); None when the record was not scored."""
    if scores is None:
        return None
    # a caption/foil pair is a two-candidate item whose target is the caption: one rule, the metrics' own
    label = record["label"] if "candidates" in record else 0
    return metrics.multiple_choice_accuracy([(scores, label)])["accuracy"] == 1.0


def scorer_config(scorer) -> dict:
    """The `config` block of a scorer's results; {} for a scorer (an entry point's) that does not say."""
    config = getattr(scorer, "config", None)
    return config() if callable(config) else {}


def read_groups(benchmark_dir, image_root: str) -> dict[str, tuple[Path, list[dict]]]:
    """winoground/<I>.jsonl of an export, by instrument: the groups, image paths made relative to `image_root`
    again (the export writes them as `<image_root>/<file>`, the way rows/ gives them)."""
    from foilforge.io import read_jsonl

    prefix = image_root.rstrip("/") + "/"
    found = {}
    for path in sorted((Path(benchmark_dir) / "winoground").glob("*.jsonl")):
        rows = read_jsonl(path, allow_empty=True)
        for row in rows:
            for key in ("id", "image_0", "image_1", "caption_0", "caption_1"):
                require(row, key, str, path, row.get("id"))
                if key.startswith("image") and row[key].startswith(prefix):
                    row[key] = row[key][len(prefix):]
        found[path.stem] = (path, rows)
    return found


def group_metrics(scorer, groups: list[dict]) -> dict:
    """Winoground text / image / group scores and the accuracy over each group's two pairs, for one scorer: each
    group is scored as two items (image_0 and image_1, each against caption_0 and caption_1)."""
    items = [(f"{g['id']}#{m}", {"image_file": g[f"image_{m}"]}, [g["caption_0"], g["caption_1"]])
             for g in groups for m in (0, 1)]
    scores = scorer.score(items) if items else []
    examples = []
    for k in range(0, len(scores), 2):
        first, second = scores[k], scores[k + 1]
        if first is not None and second is not None:
            examples.append((first[0], first[1], second[0], second[1]))
    return {"groups": len(groups), **metrics.winoground_scores(examples), **metrics.group_pair_accuracy(examples)}


def evaluate(benchmark: dict, scorers, threshold_for, item_rows: list | None = None, groups: dict | None = None) -> dict:
    """{scorer: {model, config, instruments: {instrument: metrics}, groups: {instrument: Winoground scores}}}; with
    `item_rows`, one row per scored-or-not record is appended to it (the items file's lines: scorer, instrument, id,
    scores, correct)."""
    # texts are checked once, before any model runs, so a bad record fails fast
    items_by_instrument = {instrument: [(rid, r, record_texts(path, rid, r)) for rid, r in records.items()]
                           for instrument, (path, records) in benchmark.items()}
    out = {}
    for scorer in scorers:
        per_instrument = {}
        for instrument, (path, _) in benchmark.items():
            items = items_by_instrument[instrument]
            try:
                scores = scorer.score(items)
                per_instrument[instrument] = instrument_metrics(items, scores, threshold_for(scorer))
            except ValueError as err:
                raise InputError(path, f"{scorer.name}: {err}") from None
            if item_rows is not None:
                item_rows.extend({"scorer": scorer.name, "instrument": instrument, "id": record_id,
                                  "scores": item_scores, "correct": record_correct(record, item_scores)}
                                 for (record_id, record, _), item_scores in zip(items, scores))
        out[scorer.name] = {"model": scorer.model_id, "config": scorer_config(scorer), "instruments": per_instrument}
        if groups:
            out[scorer.name]["groups"] = {}
            for instrument, (path, rows) in groups.items():
                try:
                    out[scorer.name]["groups"][instrument] = group_metrics(scorer, rows)
                except ValueError as err:
                    raise InputError(path, f"{scorer.name}: {err}") from None
    return out


def write_items(path, rows: list[dict]) -> int:
    """The per-item scores file (JSONL, written atomically): sorted by scorer, instrument and id."""
    rows = sorted(rows, key=lambda r: (r["scorer"], r["instrument"], str(r["id"])))
    return write_jsonl(path, rows, sort_by_id=False)
