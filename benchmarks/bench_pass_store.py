"""The pass store (foilforge/pass_store.py) against the per-call score cache it replaced: the CPU of the stages that
run the text LM and the probes, and what moved in their outputs.

    python -m benchmarks.bench_pass_store --base /path/to/built/checkout [--workdir DIR]
        [--instruments plurals foil_it relations] [--foil relations action_replacement] [--skip-stages]

`--base` is a checkout built on the code before this change (`make repro` done: its data/ and params.yaml); its
code is the old side, this checkout the new. Two parts, both written to benchmarks/results/pass_store.json:

* `invariance` (this checkout's code, the text LM of params.yaml, SmolLM2 offline): the distinct texts of an
  instrument's scored candidates. Padded batches as every stage scored before (sorted, 16 a batch), against other
  companions and one text at a time; the canonical pass (foilforge/lm.py) against one text at a time, other
  companions, other batch sizes and the process on 1 or 2 torch threads; the probe's pooled states likewise.
* `stages`: each side in a copy of the base's data/ with its own params.yaml and a fresh store, the stage commands
  of dvc.yaml run one at a time as `foilforge repro` runs them on 2 cores (OpenMP threads asleep while they wait;
  the new side's torch on 1 thread a worker, the old side's on the process's count, as each version of the runner
  gives them): `score` of every instrument, `select` and `baseline` of `--instruments`, `evaluate` (on the base's
  exported benchmark), `foil` of `--foil`. Each stage's CPU seconds (foilforge/timings.py) cold; then warm, the
  store (the old side: its per-call cache) kept and the batch journals removed; the new side also with no store
  and on 2 threads, which must give the same bytes. The outputs of the two sides compared: which files changed,
  the largest difference of the plausibility scores, the caption/foil gaps whose sign flipped, the records
  select kept on one side only, and the largest difference of any number in the baseline and evaluate reports.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "pass_store.json"
PYTHON = sys.executable
#: a stage command as a `foilforge repro` worker runs it: torch's threads set first (0: the process's own count)
RUNNER = ("import sys, torch\nthreads = int(sys.argv[1])\nif threads: torch.set_num_threads(threads)\n"
          "from foilforge.pipeline.stages import cli\nsys.exit(cli.main(sys.argv[2:]))")


# ---- invariance ------------------------------------------------------------------------------------------------

def padded_logprobs(lm, texts: list[str], batch_size: int) -> list[float]:
    """Summed log-probabilities as every stage computed them before: length-sorted batches padded on the right."""
    import torch

    from foilforge.lm import token_logprobs

    encoded = lm.encode(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
    out = [0.0] * len(texts)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = lm.pad([encoded[i] for i in idx])
            logits = lm.model(input_ids=ids, attention_mask=mask).logits
            sums = (token_logprobs(logits[:, :-1], ids[:, 1:]) * mask[:, 1:]).sum(-1).tolist()
            for row, i in enumerate(idx):
                out[i] = sums[row]
    return out


def equal_rows(a, b) -> dict:
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    same = (a == b).reshape(len(a), -1).all(axis=1)
    return {"texts": len(a), "bit_equal": int(same.sum()), "max_abs_difference": float(np.abs(a - b).max())}


def invariance(base: Path, instrument: str, limit: int) -> dict:
    import torch

    from foilforge.filters.attackers import build_attacker
    from foilforge.params import load_params
    from foilforge.pipeline.text_lm import load_text_lm
    from foilforge.records import read_record_file

    os.environ["FOILFORGE_SCORE_CACHE"] = "off"
    params = load_params(ROOT / "params.yaml")
    lm = load_text_lm(params)
    probe = build_attacker(params["attackers"]["smollm2_probe"], "params.yaml attackers.smollm2_probe")
    texts = list(dict.fromkeys(t for _, r in read_record_file(base / "data" / "scored" / f"{instrument}.jsonl")
                               for t in (r["caption"], r["foil"])))[:limit]
    texts += ["cat", "two dogs", "a man"]  # 2 to 3 tokens: where a product of few rows takes another BLAS path
    shuffled = texts[:]
    random.Random(1).shuffle(shuffled)
    threads = torch.get_num_threads()
    out = {"instrument": instrument, "texts": len(texts), "torch_threads": threads, "text_lm": lm.spec.describe()}

    padded = padded_logprobs(lm, texts, 16)
    others = dict(zip(shuffled, padded_logprobs(lm, shuffled + texts[:7], 16)))
    out["padded"] = {"other_companions": equal_rows(padded, [others[t] for t in texts]),
                     "one_at_a_time": equal_rows(padded[:40], [padded_logprobs(lm, [t], 1)[0] for t in texts[:40]])}
    torch.set_num_threads(1)
    out["padded"]["one_thread"] = equal_rows(padded, padded_logprobs(lm, texts, 16))
    torch.set_num_threads(threads)

    start = time.process_time()
    canonical = [lp for lp, _ in lm.sentence_logprobs(texts)]
    out["canonical_cpu_s"] = round(time.process_time() - start, 2)
    others = dict(zip(shuffled, (lp for lp, _ in lm.sentence_logprobs(shuffled + texts[:7], batch_size=7))))
    alone = [lm.sentence_logprobs([t])[0][0] for t in texts[:40] + texts[-3:]]
    torch.set_num_threads(1 if threads > 1 else 2)
    other_threads = [lp for lp, _ in lm.sentence_logprobs(texts)]
    torch.set_num_threads(threads)
    out["canonical"] = {"other_companions_batch_size_7": equal_rows(canonical, [others[t] for t in texts]),
                        "one_at_a_time": equal_rows(canonical[:40] + canonical[-3:], alone),
                        "other_process_threads": equal_rows(canonical, other_threads),
                        "against_padded": equal_rows(canonical, padded)}
    vectors = probe.vectors(texts)
    from foilforge.filters.attackers import hidden_probe

    hidden_probe._CACHE.clear()
    again = probe.vectors(shuffled)
    order = {t: k for k, t in enumerate(shuffled)}
    hidden_probe._CACHE.clear()
    out["probe"] = {"other_order": equal_rows(vectors, again[[order[t] for t in texts]]),
                    "one_at_a_time": equal_rows(vectors[:20], [_alone(probe, t) for t in texts[:20]])}
    return out


def _alone(probe, text):
    from foilforge.filters.attackers import hidden_probe

    hidden_probe._CACHE.clear()
    return probe.vectors([text])[0]


# ---- stages ----------------------------------------------------------------------------------------------------

def stage_argv(kind: str, instrument: str | None) -> list[str]:
    """The stage's command of dvc.yaml."""
    i = instrument
    if kind == "foil":
        return ["foil", i, "--input", f"data/ingested/{_SOURCES[i]}.jsonl", "--output", f"data/foils/{i}.jsonl",
                "--metrics", f"data/metrics/foil/{i}.json", "--cache-dir", ".foilforge-cache"]
    return {
        "score": ["score", i, "--input", f"data/foils/{i}.jsonl", "--output", f"data/scored/{i}.jsonl",
                  "--cache-dir", ".foilforge-cache"],
        "select": ["select", i, "--input", f"data/scored/{i}.jsonl", "--output", f"data/filtered/{i}.jsonl",
                   "--rejected", f"data/rejected/{i}.jsonl", "--metrics", f"data/metrics/select/{i}.json",
                   "--funnel", f"data/metrics/select/{i}.funnel.csv", "--partners", f"data/partners/{i}.jsonl"],
        "baseline": ["baseline", i, "--input", f"data/filtered/{i}.jsonl", "--output", f"data/baseline/{i}.json",
                     "--rejected", f"data/rejected/{i}.jsonl"],
        "evaluate": ["evaluate", "--benchmark-dir", "data/benchmark", "--output", "data/metrics/evaluate.json",
                     "--items-output", "data/metrics/evaluate_items.jsonl"],
    }[kind]


_SOURCES: dict = {}


def outputs(kind: str, instrument: str | None) -> list[str]:
    argv = stage_argv(kind, instrument)
    return [argv[k + 1] for k, word in enumerate(argv) if word in ("--output", "--items-output", "--rejected",
                                                                    "--metrics", "--funnel")
            and not (kind == "baseline" and word == "--rejected")]


def digest(path: Path) -> str | None:
    return hashlib.md5(path.read_bytes()).hexdigest() if path.is_file() else None


class Side:
    def __init__(self, name: str, code: Path, params: Path, base: Path, workdir: Path, threads: int,
                 resume: bool = False):
        self.name, self.code, self.threads, self.resume = name, code, threads, resume
        self.dir = workdir / name
        if not (resume and self.dir.exists()):
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.copytree(base / "data", self.dir / "data")
            shutil.copy(params, self.dir / "params.yaml")
        self.store = self.dir / "store"
        self.timings: dict = {}
        previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        self.previous = ((previous.get("stages") or {}).get("timings") or {}).get(name, {})

    def run(self, kind: str, instrument: str | None, phase: str, store: str | None = None, threads=None) -> dict:
        shutil.rmtree(self.dir / ".foilforge-cache", ignore_errors=True)  # the batch journals and span scores
        name = f"{phase} {kind}@{instrument}" if instrument else f"{phase} {kind}"
        timing_dir = self.dir / "timings" / f"{phase}-{kind}-{instrument or 'all'}"
        # the outputs' digests right after the run: a later phase rewrites the same files
        digests = self.dir / "timings" / f"{phase}-{kind}-{instrument or 'all'}.outputs.json"
        if not (self.resume and list(timing_dir.glob("*.json"))):
            shutil.rmtree(timing_dir, ignore_errors=True)
            self._run(kind, instrument, timing_dir, store, threads)
            digests.write_text(json.dumps({path: digest(self.dir / path) for path in outputs(kind, instrument)}))
        elif not digests.is_file():  # a run of a version of this script without the file: the last results
            digests.write_text(json.dumps(self.previous.get(name, {}).get("outputs")
                                          or {path: digest(self.dir / path) for path in outputs(kind, instrument)}))
        [entry] = [json.loads(p.read_text()) for p in timing_dir.glob("*.json")]
        row = {"cpu_s": round(entry["cpu_user_s"] + entry["cpu_sys_s"], 1), "wall_s": round(entry["wall_s"], 1),
               "model_load_s": round(entry["model_load_s"], 1), "outputs": json.loads(digests.read_text())}
        self.timings[name] = row
        print(self.name, phase, kind, instrument or "", row["cpu_s"], "CPU-s", flush=True)
        return row

    def _run(self, kind: str, instrument: str | None, timing_dir: Path, store: str | None, threads) -> None:
        env = {**os.environ, "PYTHONPATH": str(self.code), "FOILFORGE_SCORE_CACHE": store or str(self.store),
               "FOILFORGE_STAGE_TIMINGS": str(timing_dir), "OMP_WAIT_POLICY": "PASSIVE"}
        env.pop("OMP_NUM_THREADS", None)
        argv = stage_argv(kind, instrument)
        done = subprocess.run([PYTHON, "-c", RUNNER, str(self.threads if threads is None else threads), *argv],
                              cwd=self.dir, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} {' '.join(argv)} failed:\n{done.stderr[-3000:]}")


def numbers(value, prefix="") -> dict:
    """{path: number} of every int/float leaf of a JSON value."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in numbers(item, f"{prefix}.{key}").items()}
    if isinstance(value, list):
        return {k: v for n, item in enumerate(value) for k, v in numbers(item, f"{prefix}[{n}]").items()}
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return {}
    return {prefix: float(value)}


def report_difference(old: Path, new: Path) -> dict:
    a, b = numbers(json.loads(old.read_text())), numbers(json.loads(new.read_text()))
    common = sorted(set(a) & set(b))
    moved = {k: round(b[k] - a[k], 6) for k in common if a[k] != b[k]}
    largest = sorted(moved.items(), key=lambda kv: -abs(kv[1]))[:12]
    return {"numbers": len(common), "moved": len(moved), "only_one_side": len(set(a) ^ set(b)),
            "max_abs_difference": max((abs(v) for v in moved.values()), default=0.0), "largest": dict(largest)}


def scored_difference(old: Path, new: Path) -> dict:
    from foilforge.records import read_record_file

    a = {r["id"]: r for _, r in read_record_file(old)}
    b = {r["id"]: r for _, r in read_record_file(new)}
    diffs, flips, other_scorers = [], 0, 0.0
    for rid in sorted(set(a) & set(b)):
        # a record refused before scoring (refused: its reason) has no plausibility scores
        sa = ((a[rid].get("filters") or {}).get("plausibility") or {}).get("scores") or {}
        sb = ((b[rid].get("filters") or {}).get("plausibility") or {}).get("scores") or {}
        for name in sa:
            for side in ("caption", "foil", "gap"):
                d = abs(sa[name][side] - sb[name][side])
                if name == "smollm2":
                    diffs.append(d)
                else:
                    other_scorers = max(other_scorers, d)
            flips += (sa[name]["gap"] > 0) != (sb[name]["gap"] > 0)
    return {"records": len(set(a) & set(b)), "smollm2_max_abs_difference": max(diffs, default=0.0),
            "smollm2_values_moved": sum(d > 0 for d in diffs), "smollm2_values": len(diffs),
            "gap_sign_flips": flips, "other_scorers_max_abs_difference": other_scorers}


def foils_difference(old: Path, new: Path) -> dict:
    """Two foil outputs record by record: records whose foil text differs, and the numbers that moved."""
    from foilforge.records import read_record_file

    a = {r["id"]: r for _, r in read_record_file(old)}
    b = {r["id"]: r for _, r in read_record_file(new)}
    common = sorted(set(a) & set(b))
    moved: dict[str, int] = {}
    largest = 0.0
    for rid in common:
        x, y = numbers(a[rid]), numbers(b[rid])
        for key in set(x) | set(y):
            if x.get(key) != y.get(key):
                field = "".join(c for c in key if not c.isdigit() and c not in "[]")
                moved[field] = moved.get(field, 0) + 1
                if key in x and key in y:
                    largest = max(largest, abs(x[key] - y[key]))
    return {"records": len(common), "only_one_side": len(set(a) ^ set(b)),
            "foil_text_changed": sum(a[r].get("foil") != b[r].get("foil") for r in common),
            "numbers_moved": moved, "max_abs_difference": largest}


def kept_difference(old: Path, new: Path) -> dict:
    from foilforge.records import read_record_file

    a = {r["id"] for _, r in read_record_file(old)}
    b = {r["id"] for _, r in read_record_file(new)}
    return {"kept_old": len(a), "kept_new": len(b), "kept_only_old": len(a - b), "kept_only_new": len(b - a)}


def stages(base: Path, workdir: Path, instruments: list[str], foil: list[str], resume: bool = False) -> dict:
    import yaml

    params = yaml.safe_load((base / "params.yaml").read_text())
    _SOURCES.update({name: block["source"] for name, block in params["instruments"].items()})
    every = list(params["instruments"])
    old = Side("old", base, base / "params.yaml", base, workdir, threads=0, resume=resume)
    new = Side("new", ROOT, ROOT / "params.yaml", base, workdir, threads=1, resume=resume)
    first = instruments[0]
    for side in (old, new):
        for instrument in every:
            side.run("score", instrument, "cold")
        for instrument in instruments:
            side.run("select", instrument, "cold")
            side.run("baseline", instrument, "cold")
        side.run("evaluate", None, "cold")
        for instrument in foil:
            side.run("foil", instrument, "cold")
    result: dict = {"instruments": instruments, "foil": foil, "compare": {}}
    for kind, instrument in ([("score", i) for i in every] + [("select", i) for i in instruments]
                             + [("baseline", i) for i in instruments] + [("evaluate", None)]
                             + [("foil", i) for i in foil]):
        name = f"{kind}@{instrument}" if instrument else kind
        row = {"cpu_s_old": old.timings[f"cold {name}"]["cpu_s"], "cpu_s_new": new.timings[f"cold {name}"]["cpu_s"],
               "same_bytes": {path: old.timings[f"cold {name}"]["outputs"][path]
                              == new.timings[f"cold {name}"]["outputs"][path] for path in outputs(kind, instrument)}}
        if kind == "score":
            row["scores"] = scored_difference(old.dir / f"data/scored/{instrument}.jsonl",
                                              new.dir / f"data/scored/{instrument}.jsonl")
        elif kind == "select":
            row["kept"] = kept_difference(old.dir / f"data/filtered/{instrument}.jsonl",
                                          new.dir / f"data/filtered/{instrument}.jsonl")
        elif kind == "baseline":
            row["report"] = report_difference(old.dir / f"data/baseline/{instrument}.json",
                                              new.dir / f"data/baseline/{instrument}.json")
        elif kind == "foil":
            row["foils"] = foils_difference(old.dir / f"data/foils/{instrument}.jsonl",
                                            new.dir / f"data/foils/{instrument}.jsonl")
        elif kind == "evaluate":
            row["report"] = report_difference(old.dir / "data/metrics/evaluate.json",
                                              new.dir / "data/metrics/evaluate.json")
        result["compare"][name] = row
    # warm: the store (old: the per-call cache) kept, the batch journals gone
    warm = [("score", first)] + [("baseline", i) for i in instruments] + [("evaluate", None)]
    for side in (old, new):
        for kind, instrument in warm:
            side.run(kind, instrument, "warm")
    # the new side with no store, and on 2 torch threads: the same bytes
    checks = [("score", first), ("baseline", first)]
    for kind, instrument in checks:
        new.run(kind, instrument, "off", store="off")
        new.run(kind, instrument, "two_threads", threads=2)
    for instrument in foil:
        new.run("foil", instrument, "two_threads", threads=2)
    same = {}
    for key, row in new.timings.items():
        phase, name = key.split(" ", 1)
        if phase != "cold":
            same[key] = row["outputs"] == new.timings[f"cold {name}"]["outputs"]
    same.update({f"old {key}": row["outputs"] == old.timings[f"cold {key.split(' ', 1)[1]}"]["outputs"]
                 for key, row in old.timings.items() if not key.startswith("cold")})
    result["same_bytes_as_cold"] = same
    import sqlite3

    from foilforge.pass_store import STORE_FILE

    with sqlite3.connect(new.store / STORE_FILE) as connection:
        rows = connection.execute("SELECT field, count(*), sum(length(value)) FROM passes GROUP BY field").fetchall()
    result["store"] = {"file_mb": round((new.store / STORE_FILE).stat().st_size / 1e6, 1),
                       "rows": {field: {"rows": n, "value_mb": round(size / 1e6, 1)} for field, n, size in rows}}
    result["timings"] = {"old": old.timings, "new": new.timings}
    totals = {}
    for side in (old, new):
        for key, row in side.timings.items():
            phase, name = key.split(" ", 1)
            kind = name.split("@")[0]
            totals.setdefault(f"{side.name} {phase} {kind}", 0.0)
            totals[f"{side.name} {phase} {kind}"] = round(totals[f"{side.name} {phase} {kind}"] + row["cpu_s"], 1)
    result["cpu_s_totals"] = totals
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="a checkout built on the old code (data/, params.yaml)")
    parser.add_argument("--workdir", default=None, help="where the two copies go (default: a temporary directory)")
    parser.add_argument("--instruments", nargs="+", default=["plurals", "foil_it", "relations"])
    parser.add_argument("--foil", nargs="*", default=["relations", "action_replacement"])
    parser.add_argument("--invariance-instrument", default="foil_it")
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--skip-stages", action="store_true", help="only the in-process invariance part")
    parser.add_argument("--skip-invariance", action="store_true", help="keep the results file's invariance part")
    parser.add_argument("--resume", action="store_true",
                        help="keep --workdir's copies and the stage runs it has timings of (a run broken off)")
    args = parser.parse_args(argv)
    base = Path(args.base).resolve()
    result = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    result["machine"] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    if not args.skip_invariance:
        result["invariance"] = invariance(base, args.invariance_instrument, args.texts)
        print(json.dumps(result["invariance"], indent=1), flush=True)
    if not args.skip_stages:
        workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="pass-store-"))
        result["stages"] = stages(base, workdir, args.instruments, args.foil, args.resume)
    result["machine"]["load_after"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
