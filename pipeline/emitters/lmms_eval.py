"""An lmms-eval task per instrument: `lmms_eval/foilforge_<instrument>.yaml` plus the shared `utils.py`.

The task reads the export's Hugging Face dataset (`dataset_path`: the export directory, `dataset_name`: the
instrument's config, split `test`; pipeline/loadable.py) and scores each pair as a two-option question
(pipeline/emitters/lmms_eval_task_utils.py, written as `utils.py`). `dataset_path` and the `images` column
are paths relative to the directory lmms-eval runs in: the project root, as in docs/harnesses.md:
`lmms-eval --model ... --include_path data/benchmark/lmms_eval --tasks foilforge_<instrument>`.
"""

from __future__ import annotations

from pathlib import Path

from foilforge.io import atomic_write
from foilforge.pipeline.emitters import EMITTERS, Emitted, image_pairs
from foilforge.schema import ExportBlock

FOLDER = "lmms_eval"
UTILS = Path(__file__).with_name("lmms_eval_task_utils.py")


def task_name(instrument: str) -> str:
    return f"foilforge_{instrument}"


def task_yaml(instrument: str, dataset_path: str) -> str:
    # written as text: the `!function` tags are lmms-eval's YAML extension, which yaml.safe_dump cannot write
    return "\n".join([
        f"task: {task_name(instrument)}",
        f"dataset_path: {dataset_path}",
        f"dataset_name: {instrument}",
        "test_split: test",
        "output_type: generate_until",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: !function utils.doc_to_target",
        "process_results: !function utils.process_results",
        "generation_kwargs:",
        "  max_new_tokens: 8",
        "  temperature: 0",
        "  do_sample: false",
        "metric_list:",
        "  - metric: accuracy",
        "    aggregation: mean",
        "    higher_is_better: true",
        "metadata:",
        "  version: 1",
        f"  foilforge_instrument: {instrument}",
        "",
    ])


@EMITTERS.register("lmms_eval.v1")
def emit_lmms_eval(output_dir, instrument: str, rows: list[dict], settings: ExportBlock) -> Emitted:
    pairs, left_out = image_pairs(rows)
    if len(pairs) != len(rows):
        # the task reads the instrument's whole config: it cannot leave a record out
        if pairs:
            left_out["left out with them (the task reads the whole config)"] = len(pairs)
        return Emitted(left_out=left_out)
    folder = Path(output_dir) / FOLDER
    with atomic_write(folder / f"{task_name(instrument)}.yaml") as handle:
        handle.write(task_yaml(instrument, Path(output_dir).as_posix()))
    with atomic_write(folder / "utils.py") as handle:
        handle.write(UTILS.read_text(encoding="utf-8"))
    return Emitted(files=[f"{FOLDER}/{task_name(instrument)}.yaml", f"{FOLDER}/utils.py"], records=len(pairs))
