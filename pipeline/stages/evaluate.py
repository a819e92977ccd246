"""Score a benchmark and write metrics.json (VALSE §5.1 metrics; pairs, Winoground, multiple choice).

Scorers (params.yaml `evaluate.scorers`, plus every `--scores` file):

* `text_lm`: the text-only LM of `models.text_baseline`; score = -perplexity.
* `image_text`: an image-text model through transformers (`models.image_text`,
  CLIP `openai/clip-vit-base-patch32` by default); score = the model's
  `logits_per_image` (scaled cosine). Runs on the records whose image file
  exists under `evaluate.image_root`; with no image there it is skipped and
  says so in metrics.json.
* `open_clip`: an open_clip model (`models.open_clip`: `name_or_path` an
  open_clip model name with `pretrained` one of its tags from
  `open_clip.list_pretrained()`, e.g. ViT-B-32 + openai, or `hf-hub:org/repo`,
  or `local-dir:/path` holding open_clip_config.json and the weights); score =
  the cosine of the L2-normalised image and text embeddings, the image through
  open_clip's eval transform: CLIP_benchmark's image_caption_selection
  (SugarCrepe), so acc_r is its text_acc on the same files (except that a tie
  is a miss here). Runs on the records with an image, as `image_text`. A model
  that cannot load (an unknown name or tag, weights not downloaded on an
  offline machine, a directory without weights) is a ConfigError naming
  `models.open_clip`, never random weights.
* a scores file (`--scores FILE`, repeatable), for models run elsewhere:
  JSONL lines `{"id": ..., "caption_score": x, "foil_score": y}` or a CSV with
  the header `id,caption_score,foil_score`; multiple-choice items give
  `"candidate_scores": [...]` (JSONL) instead. Higher = better match. `id` is
  the record's key in the benchmark file. When the scores are probabilities of
  "matches" set `evaluate.scores_threshold` (e.g. 0.5) to get acc, p_c, p_f.

Winoground groups (`winoground/<I>.jsonl` of the export) give each scorer's text / image / group scores and its
accuracy over the groups' two pairs (a tie one half), under `groups.<I>`: a score that reads only the text gets
0 / 0 / 0 and exactly 50% there, whatever it learned.

Record shapes: a caption/foil record gives the five VALSE metrics; records
that carry a `pair_id` also give pair accuracy (both members right) and, when
the two members swap caption and foil (I1: C1 vs C2; I2: C2 vs C1), the
Winoground text/image/group scores; records with `candidates` (list of texts)
and `label` (index) give multiple-choice accuracy.

Results as they are reported: each scorer's block in metrics.json has `model`,
`instruments` (the metrics) and `config`, what pins the numbers: the library,
name_or_path, revision, pretrained (open_clip), the dtype the model ran in, its
image preprocessing (open_clip's preprocess config: size, mean, std,
interpolation, resize mode; for transformers the processor classes and image
size, mean, std), the score, and the library versions (open_clip or
transformers, torch); a scores file's config is its path and sha256.
`--items-output FILE` also writes the per-item scores (JSONL, one line per
scorer, instrument and record, sorted so): `{"scorer", "instrument", "id",
"scores": [caption, foil] or the candidates' scores, "correct": true/false}`,
`scores` and `correct` null for a record the scorer did not score (no image).
"""

from __future__ import annotations

import logging

from foilforge.io import write_json
from foilforge.params import load_params, typed_params
from foilforge.pipeline.evaluate_scorers import ScoresFileScorer, build_scorers
from foilforge.pipeline.evaluation import evaluate, read_groups, write_items
from foilforge.pipeline.loadable import read_benchmark

log = logging.getLogger(__name__)

def run(params: dict, benchmark_dir, output, scores_files=(), scorers=None, items_output=None) -> dict:
    benchmark = read_benchmark(benchmark_dir)
    skipped = {}
    if scorers is None:
        scorers, skipped = build_scorers(params, scores_files)
    scores_threshold = typed_params(params).evaluate.scores_threshold

    def threshold_for(scorer):
        # only probabilities from a scores file have a meaningful threshold; LM and CLIP scores only rank
        return scores_threshold if isinstance(scorer, ScoresFileScorer) else None

    item_rows = [] if items_output is not None else None
    image_root = typed_params(params).export.image_root
    result = evaluate(benchmark, scorers, threshold_for, item_rows, groups=read_groups(benchmark_dir, image_root))
    for name, reason in skipped.items():
        result[name] = {"skipped": reason}
    if items_output is not None:
        write_items(items_output, item_rows)
    write_json(output, result)
    return result


def add_arguments(parser) -> None:
    parser.add_argument("--benchmark-dir", required=True, help="directory of exported VALSE-format JSON files")
    parser.add_argument("--scores", action="append", default=[],
                        help="scores file (CSV or JSONL: id, caption_score, foil_score); repeatable")
    parser.add_argument("--output", required=True, help="metrics JSON (for `dvc metrics show`)")
    parser.add_argument("--items-output", default=None,
                        help="per-item scores (JSONL: scorer, instrument, id, scores, correct), one line per record "
                             "and scorer")


def main(args) -> int:
    result = run(load_params(args.params), args.benchmark_dir, args.output, args.scores,
                 items_output=getattr(args, "items_output", None))
    for scorer, block in result.items():
        for instrument, values in (block.get("instruments") or {}).items():
            acc = values.get("acc_r")
            log.info("%s / %s: acc_r %s over %d", scorer, instrument, "n/a" if acc is None else f"{100 * acc:.1f}%",
                     values.get("n_scored", 0))
    return 0
