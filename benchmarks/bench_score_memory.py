"""Peak memory of the score stage on a big instrument: this checkout vs a reference checkout, side by side.

    .venv/bin/python -m benchmarks.bench_score_memory [--records 4096 50000 200000] [--reference DIR]
                                                      [--batch-size 4096]

For each --records size, writes a foils file of that many records (the sample build's data/foils/relations.jsonl, repeated under new
ids: real records, about 0.7 kB each) and runs `foilforge score` on it in a subprocess for each checkout,
twice: with the length filter alone (a per-record filter: tokenizer counts), and with plausibility's n-gram
prior too (a corpus-level filter: it needs every record's texts, and its count model grows with them; no
LM, so the runs take seconds, not hours).
Each child reports its own peak RSS (`ru_maxrss`); the outputs of the two checkouts are compared byte for
byte. `--reference` is another checkout of foilforge (`git worktree add /tmp/ref <commit>`), run with the
same Python. Writes benchmarks/results/score_memory.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, write_result

NAME = "score_memory"
CHILD = """
import resource, sys, time
sys.argv = ["foilforge"] + sys.argv[1:]
from foilforge.pipeline.stages.cli import main
start = time.perf_counter()
code = main()
import foilforge.pipeline
print("RESULT", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter() - start,
      foilforge.pipeline.__file__,
      flush=True)
sys.exit(code)
"""


def write_foils(path: Path, n: int) -> int:
    source = [json.loads(line) for line in (ROOT / "data" / "foils" / "relations.jsonl").read_text().splitlines()]
    with path.open("w", encoding="utf-8") as handle:
        for k in range(n):
            record = dict(source[k % len(source)], id=f"relations:bench:{k:09d}")
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    return path.stat().st_size


FILTER_SETS = {"per_record": ["length"], "with_corpus_prior": ["length", "plausibility"]}


def bench_params(path: Path, batch_size: int, run: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    import yaml

    from foilforge.params import load_params

    params = load_params(ROOT / "params.yaml")
    params["instruments"]["relations"]["filters"] = {"run": run, "keep": {}}
    params["filters"]["plausibility"]["scorers"] = {
        name: block for name, block in params["filters"]["plausibility"]["scorers"].items() if block["kind"] == "ngram"}
    params["engine"] = {**params.get("engine", {}), "name": "local", "batch_size": batch_size}
    path.write_text(yaml.safe_dump(params))


def run_score(code: Path, params: Path, foils: Path, out: Path) -> dict:
    command = [sys.executable, "-c", CHILD, "score", "relations", "--params", str(params), "--input", str(foils),
               "--output", str(out), "--no-progress"]
    done = subprocess.run(command, cwd=code, env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin",
                                                  "HOME": str(Path.home())},
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"score failed in {code}:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    _, rss_kib, seconds, package = line.split()
    if not Path(package).resolve().is_relative_to(code):
        raise RuntimeError(f"the run meant for {code} imported {package}")
    return {"checkout": str(code), "peak_rss_mib": round(int(rss_kib) / 1024), "seconds": round(float(seconds), 1),
            "output_sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[4096, 50_000, 200_000])
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--reference", type=Path, help="another foilforge checkout to run side by side")
    args = parser.parse_args(argv)
    checkouts = [("this", ROOT)] + ([("reference", args.reference.resolve())] if args.reference else [])
    runs = []
    for records in args.records:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            size = write_foils(tmp / "foils.jsonl", records)
            for filters, run in FILTER_SETS.items():
                bench_params(tmp / f"{filters}.yaml", args.batch_size, run)
                for name, code in checkouts:
                    out = tmp / f"{filters}.{name}.jsonl"
                    runs.append({"records": records, "input_bytes": size, "filters": filters, "run": name,
                                 **run_score(code, tmp / f"{filters}.yaml", tmp / "foils.jsonl", out)})
    result = {"batch_size": args.batch_size, "filter_sets": FILTER_SETS,
              "plausibility_scorers": "the n-gram prior only (params.yaml's ngram scorers)", "runs": runs}
    if args.reference:
        result["identical_outputs"] = all(
            len({r["output_sha256"] for r in runs if (r["records"], r["filters"]) == key}) == 1
            for key in {(r["records"], r["filters"]) for r in runs})
    write_result(NAME, result, args, argv)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
