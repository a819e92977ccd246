"""What the sample build's remaining CPU would give back, and whether the outputs would stay the same bytes.

    python -m benchmarks.bench_exact_levers [--data data] [--instrument foil_it] [--gate-instruments ...]

Needs a built sample (`make repro`). Three measurements, each side by side in one run (the text LM's scores
computed the way every stage computed them before the pass store: padded, length-sorted batches; what the
canonical pass does instead: benchmarks/bench_pass_store.py):

* `batch_composition`: the text LM's (models.text_baseline) log-probabilities of the instrument's distinct texts
  in sorted batches of 16 (as every stage scores), in batches with other companions, and one text at a time. A
  per-text cache shared by score, baseline and evaluate (each text scored once) gives the same bytes only if
  these are equal.
* `torch_threads`: the same texts under the text LM and the smollm2 probe's model with torch on 1 and on all
  cores: equal bits, and the CPU seconds of each (one stage alone).
* `gate_repeats`: `foilforge baseline` of each `--gate-instruments` with params.yaml's `gate.repeats` and with 1
  (a cheaper gate protocol: its figures change), CPU seconds of the stage process.

Writes benchmarks/results/exact_levers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_pass_store import padded_logprobs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def distinct_texts(data: Path, instrument: str, limit: int) -> list[str]:
    from foilforge.records import read_record_file

    texts = [t for _, r in read_record_file(data / "scored" / f"{instrument}.jsonl") for t in (r["caption"], r["foil"])]
    return list(dict.fromkeys(texts))[:limit]


def equal_rows(a, b) -> dict:
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    same = (a == b).reshape(len(a), -1).all(axis=1)
    return {"texts": len(a), "bit_equal": int(same.sum()), "max_abs_difference": float(np.abs(a - b).max())}


def batch_composition(lm, texts: list[str]) -> dict:
    sorted_batches = padded_logprobs(lm, texts, 16)
    shuffled = texts[:]
    random.Random(1).shuffle(shuffled)
    others = dict(zip(shuffled, padded_logprobs(lm, shuffled + texts[:7], 16)))
    alone = [padded_logprobs(lm, [t], 1)[0] for t in texts[:40]]
    return {"other_companions": equal_rows(sorted_batches, [others[t] for t in texts]),
            "one_at_a_time": equal_rows(sorted_batches[:40], alone)}


def torch_threads(lm, probe, texts: list[str]) -> dict:
    import torch

    from foilforge import stage_state

    out, rows = {}, {}
    for threads in (torch.get_num_threads(), 1):
        torch.set_num_threads(threads)
        stage_state.reset()
        start = time.process_time()
        rows[threads] = (padded_logprobs(lm, texts, 16), probe.vectors(texts))
        out[f"cpu_s_{threads}_threads"] = round(time.process_time() - start, 2)
    many, one = rows.values()
    out["text_lm"] = equal_rows(many[0], one[0])
    out["smollm2_probe"] = equal_rows(many[1], one[1])
    return out


def stage_cpu(argv: list[str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "FOILFORGE_SCORE_CACHE": "off"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)


def gate_repeats(root: Path, params_path: Path, instruments: list[str]) -> list[dict]:
    import yaml

    params = yaml.safe_load(params_path.read_text(encoding="utf-8"))
    repeats = params["gate"]["repeats"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cheap = Path(tmp) / "params.yaml"
        cheap.write_text(yaml.safe_dump({**params, "gate": {**params["gate"], "repeats": 1}}, sort_keys=False),
                         encoding="utf-8")  # key order kept: a grid tie goes to the first setting listed
        for instrument in instruments:
            row = {"instrument": instrument}
            for label, path in ((f"repeats_{repeats}", params_path), ("repeats_1", cheap)):
                output = Path(tmp) / f"{instrument}.{label}.json"
                row[f"cpu_s_{label}"] = stage_cpu(
                    [str(Path(sys.executable).parent / "foilforge"), "baseline", instrument, "--params", str(path),
                     "--input", f"data/filtered/{instrument}.jsonl", "--rejected", f"data/rejected/{instrument}.jsonl",
                     "--output", str(output)], root)
                gate = json.loads(output.read_text(encoding="utf-8"))["gate"]
                row[f"accuracy_{label}"] = {name: a["after"]["accuracy"] for name, a in gate["attackers"].items()}
            print(row, flush=True)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="the built checkout (its data/ and params.yaml)")
    parser.add_argument("--instrument", default="foil_it")
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--gate-instruments", nargs="*", default=["plurals", "foil_it", "bd2bb_decoys"])
    args = parser.parse_args()

    from foilforge.filters.attackers import build_attacker
    from foilforge.params import load_params
    from foilforge.pipeline.text_lm import load_text_lm

    root = Path(args.root).resolve()
    params = load_params(root / "params.yaml")
    texts = distinct_texts(root / "data", args.instrument, args.texts)
    lm = load_text_lm(params)
    probe = build_attacker(params["attackers"]["smollm2_probe"], "params.yaml attackers.smollm2_probe")
    result = {"machine": {"cpus": os.cpu_count()}, "instrument": args.instrument, "text_lm": lm.spec.describe()}
    result["batch_composition"] = batch_composition(lm, texts)
    print("batch_composition", result["batch_composition"], flush=True)
    result["torch_threads"] = torch_threads(lm, probe, texts)
    print("torch_threads", result["torch_threads"], flush=True)
    result["gate_repeats"] = gate_repeats(root, root / "params.yaml", args.gate_instruments)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "exact_levers.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
