"""The release gate's n-gram attackers with each text split once a stage against CountVectorizer, side by side.

    python -m benchmarks.bench_ngram_rows [--data data] [--instruments plurals bd2bb_decoys foil_it]

Needs a built sample (`make repro`: data/filtered/<I>.jsonl). For each instrument, the gate's runs of the
n-gram attackers of params.yaml (word_ngram and char_ngram with their grids, ngram_bayes) on the kept records,
as `foilforge baseline` makes them (`certify`: 5 grouped partitions, nested grid), twice in one process:
with filters/attackers/ngrams.py's BinaryNgramVectorizer (what the attackers use) and with scikit-learn's
CountVectorizer in its place (the reference), alternating which goes first. Each run starts with an empty
table, as a stage does. The figures of both runs must be equal to the last digit.

Writes benchmarks/results/ngram_rows.json (CPU seconds per run).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ATTACKERS = ("word_ngram", "char_ngram", "ngram_bayes")


class CountVectorizerRows:
    """The reference: CountVectorizer(binary=True) with BinaryNgramVectorizer's arguments."""

    def __new__(cls, analyzer="word", ngram_range=(1, 1), lowercase=True, token_pattern=r"(?u)\b\w\w+\b",
                allow_empty=False):
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(analyzer=analyzer, ngram_range=tuple(ngram_range), lowercase=lowercase,
                               token_pattern=token_pattern, binary=True)


def gate_run(records: list[dict], settings: dict, reference: bool) -> tuple[float, dict]:
    from foilforge import stage_state
    from foilforge.filters.attackers import certify, ngrams

    blocks = {name: settings["attacker_blocks"][name] for name in ATTACKERS if name in settings["attacker_blocks"]}
    stage_state.reset()
    original = ngrams.BinaryNgramVectorizer
    if reference:
        ngrams.BinaryNgramVectorizer = CountVectorizerRows
    try:
        start = time.process_time()
        figures = certify(records, blocks, folds=settings["folds"], seed=settings["seed"],
                          repeats=settings["repeats"], max_accuracy=settings["max_accuracy"])
        return time.process_time() - start, figures
    finally:
        ngrams.BinaryNgramVectorizer = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--instruments", nargs="+", default=["plurals", "bd2bb_decoys", "foil_it"])
    args = parser.parse_args()

    from foilforge.filters.adversarial import gate_settings
    from foilforge.params import load_params
    from foilforge.records import read_record_file

    params = load_params(args.params)
    rows = []
    for k, instrument in enumerate(args.instruments):
        settings = gate_settings(params, instrument)
        records = [r for _, r in read_record_file(Path(args.data) / "filtered" / f"{instrument}.jsonl")]
        order = (False, True) if k % 2 == 0 else (True, False)
        runs = {reference: gate_run(records, settings, reference) for reference in order}
        same = json.dumps(runs[False][1], sort_keys=True) == json.dumps(runs[True][1], sort_keys=True)
        if not same:
            raise SystemExit(f"{instrument}: the gate's figures differ between the two vectorizers")
        row = {"instrument": instrument, "records": len(records), "first": "reference" if order[0] else "table",
               "cpu_s_countvectorizer": round(runs[True][0], 2), "cpu_s_table": round(runs[False][0], 2),
               "speedup": round(runs[True][0] / runs[False][0], 2), "figures_equal": same}
        print(row, flush=True)
        rows.append(row)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"attackers": list(ATTACKERS), "machine": {"cpus": __import__("os").cpu_count(),
                                                     "python": platform.python_version()},
           "instruments": rows}
    (RESULTS / "ngram_rows.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
