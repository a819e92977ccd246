"""The benchmark suite: every benchmark that measures foilforge (speed, memory, quality on real data), one runner.

    python -m benchmarks.suite --list                  # every benchmark: what it measures, its sizes, what it needs
    python -m benchmarks.suite                         # the default set (make benchmarks), at their default sizes
    python -m benchmarks.suite NAME [NAME ...]         # these, at their default sizes
    python -m benchmarks.suite --all                   # every benchmark whose inputs are here
    python -m benchmarks.suite --quick [NAME ...]      # the quick sizes (a smoke test), into a temporary folder

Each benchmark is a module benchmarks/bench_NAME.py with its own `main(argv)` (its command line, which the docs
quote: `python -m benchmarks.bench_NAME --help`); the suite calls it with the argv of the size asked for. Every
result is one JSON file in one shape (benchmarks/common.py), in benchmarks/results/ or `--results DIR`; `--quick`
writes to a temporary folder unless `--results` names one, so a smoke run never overwrites the measured figures.
A benchmark whose inputs are absent (the shared real data, a built sample, a GPU) is skipped and says why.

Benchmarks are on demand, never part of `make test`. The design studies that ran once are in docs/studies.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import REAL_COCO, RESULTS, RESULTS_ENV, ROOT, SHARED, is_result

SUGARCREPE_UNREFINED_REL = SHARED / "real" / "sugarcrepe" / "unrefined" / "replace_rel.json"


@dataclass(frozen=True)
class Benchmark:
    name: str
    measures: str                      # speed, memory or quality
    what: str                          # one line
    quick: tuple[str, ...]             # argv of the quick size: a smoke test, seconds to a few minutes
    default: tuple[str, ...] = ()      # argv of the default size: the figures docs/ quote
    needs: tuple[Path, ...] = ()       # inputs that must exist, else the benchmark is skipped
    gpu: bool = False                  # needs a CUDA device
    in_default_set: bool = False       # run by `make benchmarks` (python -m benchmarks.suite without names)
    module: str = field(default="")

    def __post_init__(self):
        if not self.module:
            object.__setattr__(self, "module", f"benchmarks.bench_{self.name}")

    def missing(self) -> str | None:
        """Why this benchmark cannot run here, or None."""
        absent = [str(path) for path in self.needs if not Path(path).exists()]
        if absent:
            return "not found: " + ", ".join(absent)
        if self.gpu:
            try:
                import torch
            except ImportError:
                return "needs a CUDA device (no torch)"
            if not torch.cuda.is_available():
                return "needs a CUDA device"
        return None


_BUILT = ROOT / "data" / "foils" / "relations.jsonl"   # `make repro` done in this checkout
_VALSE = SHARED / "valse-dev"
_BD2BB = SHARED / "real" / "bd2bb" / "test.csv"
_COCO = REAL_COCO
_SUGARCREPE = SHARED / "real" / "sugarcrepe"

BENCHMARKS = {b.name: b for b in (
    # speed and memory
    Benchmark("ingest_memory", "memory", "peak RSS of `foilforge ingest` on a synthetic Open Images boxes CSV",
              quick=("--gib", "0.002", "--images-with-relationships", "20"), in_default_set=True),
    Benchmark("score_memory", "memory", "peak RSS of the score stage on a big instrument (copies of the sample's foils)",
              quick=("--records", "200"), needs=(_BUILT,), in_default_set=True),
    Benchmark("refinement_scale", "speed", "the refinement's 0/1 program on synthetic pools up to a full COCO build",
              quick=("--sizes", "300"), in_default_set=True),
    Benchmark("attacker_fits", "speed", "boosted trees by LightGBM against scikit-learn's, and dense logistic fits by "
              "Newton's method against liblinear's primal solver, on a built sample's rows",
              quick=("--instruments", "relations", "--repeats", "1"),
              needs=(ROOT / "data" / "scored" / "relations.jsonl", ROOT / "data" / "filtered" / "relations.jsonl")),
    Benchmark("amx_batch_tokens", "speed", "SmolLM2's stored passes at several token budgets of the AMX shape rule, "
              "with their bits compared, on a built sample's texts", quick=("--texts", "40", "--repeats", "1"),
              needs=(ROOT / "data" / "scored" / "relations.jsonl",)),
    Benchmark("weight_search", "speed", "the adversarial filter's JS weight search from the last round's weight "
              "against from scratch, on a built sample's select", quick=("--instruments", "action_replacement"),
              needs=(ROOT / "data" / "scored" / "foil_it.jsonl", ROOT / "data" / "scored" / "action_replacement.jsonl")),
    Benchmark("span_scoring", "speed", "relations' span scoring batched across captions against one at a time",
              quick=("--limit", "4", "--attested-from", "200", "--repeats", "1"), in_default_set=True),
    Benchmark("relations_scaling", "speed", "the span ranker's pruning against exhaustive scoring: time and agreement",
              quick=("--limit", "10", "--attested-from", "limit", "--skip-masked", "--skip-actions"), needs=(_COCO,),
              in_default_set=True),
    Benchmark("span_passes", "speed", "how full relations' span-scoring forward passes are (rows, tokens, prefixes)",
              quick=("--n", "20", "--max-batch-tokens", "8192", "--merge", "true"), in_default_set=True),
    Benchmark("filters", "speed", "GRUEN's LM term and NLI, batched against one sentence at a time (small random BERT)",
              quick=("--n", "16", "--repeats", "1"), in_default_set=True),
    Benchmark("filters_paper", "speed", "GRUEN and NLI at the paper's model shapes (random weights)",
              quick=("--n", "4", "--nli-n", "2")),
    Benchmark("bd2bb_clustering", "speed", "BD2BB's action encoding and k-means elbow, as bd2bb_decoys prepares",
              quick=("--n", "300", "--k-min", "2", "--k-max", "6", "--k-step", "2"), needs=(_BD2BB,),
              in_default_set=True),
    Benchmark("ray_scaling", "speed", "the score stage on the local engine against Ray pools",
              quick=("--n", "32", "--workers", "1"), in_default_set=True),
    Benchmark("coco_build", "speed", "every COCO instrument's foil, score, select and gate: local engine and Ray pools",
              quick=("--n", "5", "--workers", "--stages", "foil", "score", "--only", "plurals"), in_default_set=True),
    Benchmark("sample_build", "speed", "the sample build (`make repro`) stage by stage in a fresh worktree, with "
              "this checkout's .venv (make setup)", quick=("--label", "quick", "--only", "ingest@coco"),
              needs=(ROOT / ".venv",)),
    Benchmark("refilter_speed", "speed", "`foilforge refilter` of SugarCrepe's unrefined replace_rel: HEAD against "
              "this working tree", quick=("--base-ref", "HEAD", "--input", str(SUGARCREPE_UNREFINED_REL), "--first", "20"),
              default=("--base-ref", "HEAD", "--input", str(SUGARCREPE_UNREFINED_REL)), needs=(SUGARCREPE_UNREFINED_REL,)),
    Benchmark("cpu_dtype", "speed", "SmolLM2's passes on a CPU in float32 and bfloat16, native and emulated: time and "
              "agreement", quick=("--n", "16", "--repeats", "1", "--isas", "native")),
    Benchmark("blas_threads", "speed", "the gate's logistic fits on one BLAS thread against the process's default, "
              "idle and beside busy cores", quick=("--pairs", "60", "--repeats", "1")),
    Benchmark("relations_cuda", "speed", "span scoring on a GPU: float32 and bfloat16, token budgets",
              quick=("--limit", "20"), needs=(_COCO,), gpu=True),
    # quality on real data
    Benchmark("bd2bb_released_overlap", "quality", "how often foilforge's BD2BB decoys are among the released ones",
              quick=("--limit", "50", "--n-clusters", "5"), needs=(_BD2BB,), in_default_set=True),
    Benchmark("attackers_real", "quality", "`foilforge refilter` on the released VALSE and SugarCrepe pieces: the "
              "attackers before and after", quick=("--only", "existence.json", "--methods", "aflite"), needs=(_VALSE,),
              in_default_set=True),
    Benchmark("unseen_attackers", "quality", "learners neither the filter nor the gate uses, on what the filter keeps",
              quick=("--only", "existence.json"), needs=(_VALSE,), in_default_set=True),
    Benchmark("certification", "quality", "the release gate's certification of the released pieces, before and after",
              quick=("--only", "existence.json", "--repeats", "1"), needs=(_VALSE,)),
    Benchmark("certification_power", "quality", "the certification rule's error rates, by simulation",
              quick=("--trials", "100", "--real-sets", "0")),
    Benchmark("gate_repeats", "quality", "the gate's readings' scatter, power and size by the partitions averaged",
              quick=("--sets", "5", "--sizes", "60", "--repeats", "1", "2")),
    Benchmark("transformer_pair", "quality", "the fine-tuned pair classifier on every VALSE dev piece (a GPU advised: "
              "minutes a fold on a CPU, even quick)",
              quick=("--only", "existence.json", "--epochs", "1", "--folds", "2"), needs=(_VALSE,)),
    Benchmark("refinement_real", "quality", "the refinement on real data: acc_r, records kept, JS before and after",
              quick=("--only", "valse_existence"), needs=(_VALSE, _COCO)),
    Benchmark("instruments_vs_released", "quality", "coreference_strict, foil_it and swap_obj against the released "
              "items (no smaller size: the quick run is the default without --lm)", quick=(), needs=(_VALSE, _COCO)),
    Benchmark("pairing", "quality", "Winoground groups: how many foils of the released files get a second image "
              "(no smaller size)", quick=(), needs=(_VALSE,)),
    Benchmark("group_evidence", "quality", "groups whose second text is evidenced of the second image, COCO val",
              quick=("--coco-n", "20", "--only", "foil_it"), needs=(_COCO,)),
    Benchmark("sugarcrepe_checks", "quality", "the exact-edit checks over SugarCrepe's own pairs",
              quick=("--limit", "50"), needs=(_SUGARCREPE,)),
    Benchmark("sugarcrepe_refilter", "quality", "foilforge's refinement against SugarCrepe's own, at its size",
              quick=("--limit", "40", "--types", "swap_obj"), needs=(_SUGARCREPE,)),
    Benchmark("sugarcrepe_types", "quality", "SugarCrepe's seven types foiled from COCO val captions",
              quick=("--images", "3", "--types", "replace_obj", "--skip-gate"), needs=(_COCO,)),
)}


def written_since(folder: Path, name: str, since: float) -> list[Path]:
    """The result files of benchmark `name` in `folder` written at or after `since`."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.stat().st_mtime < since:
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if is_result(document) and document["benchmark"] == name:
            found.append(path)
    return found


def run(benchmark: Benchmark, quick: bool, results: Path) -> tuple[str, list[Path]]:
    """Run one benchmark into `results`: ("ok" | "failed: ..." | "skipped: ...", the result files it wrote)."""
    why = benchmark.missing()
    if why:
        return f"skipped: {why}", []
    argv = list(benchmark.quick if quick else benchmark.default)
    before = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(results)
    started = time.time() - 1   # file times may be coarser than the clock
    try:
        module = importlib.import_module(benchmark.module)
        code = module.main(argv)
    except SystemExit as exit_:  # a benchmark that refuses its inputs exits with a message
        if exit_.code not in (0, None):
            return f"failed: {exit_.code}", []
        code = 0
    except Exception as err:  # one broken benchmark should not hide the others' figures
        return f"failed: {type(err).__name__}: {err}", []
    finally:
        if before is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = before
    files = written_since(results, benchmark.name, started)
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"failed: exit {code}", files
    if not files:
        return "failed: it wrote no result file", files
    return "ok", files


def listing() -> str:
    lines = []
    for b in BENCHMARKS.values():
        flags = " ".join(filter(None, ["[default set]" if b.in_default_set else "", "[GPU]" if b.gpu else ""]))
        lines.append(f"{b.name}  ({b.measures}) {flags}".rstrip())
        lines.append(f"    {b.what}")
        lines.append(f"    python -m {b.module} {' '.join(b.default)}".rstrip())
        lines.append(f"    quick: {' '.join(b.quick) or '(the default arguments)'}")
        if b.needs:
            lines.append("    needs: " + ", ".join(os.path.relpath(p, ROOT) for p in b.needs))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: the default set)")
    parser.add_argument("--all", action="store_true", help="every benchmark (those whose inputs are absent skip)")
    parser.add_argument("--quick", action="store_true", help="the quick sizes (a smoke test)")
    parser.add_argument("--results", type=Path, default=None,
                        help="where the result files go (default benchmarks/results/; with --quick a temporary folder)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print(listing())
        return 0
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"no benchmark {', '.join(unknown)} (python -m benchmarks.suite --list)")
    names = args.names or [b.name for b in BENCHMARKS.values() if args.all or b.in_default_set]
    results = args.results or (Path(tempfile.mkdtemp(prefix="foilforge-bench-quick-")) if args.quick else RESULTS)
    results.mkdir(parents=True, exist_ok=True)
    print(f"results: {results}", flush=True)
    failed = []
    for name in names:
        print(f"== {name}{' (quick)' if args.quick else ''}", flush=True)
        started = time.perf_counter()
        status, files = run(BENCHMARKS[name], args.quick, results)
        print(f"== {name}: {status} ({time.perf_counter() - started:.1f} s) "
              + " ".join(str(path) for path in files), flush=True)
        if status.startswith("failed"):
            failed.append(name)
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
