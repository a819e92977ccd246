"""foilforge's refinement against SugarCrepe's own, at its size (benchmarks/results/sugarcrepe_refilter.json).

`../shared/data/real/sugarcrepe/unrefined/` holds SugarCrepe's ChatGPT-written candidates before its refinement
(3,177 replace_rel, 1,413 swap_obj); the released files beside them are what SugarCrepe kept (1,406 and 245). For
each type:

* **foilforge**: `foilforge refilter unrefined/<type>.json --like <type>`: the entailment and exact-edit checks
  of the type, the instrument's filters and keep rules, the plausibility refinement with the adversarial filter,
  and the release gate (every gate attacker within the kept pairs and fitted on the removed ones) with its
  certification verdict;
* **SugarCrepe's released set**: the same gate and verdict on the released pairs as they are (no check, no
  filter: what SugarCrepe published), every attacker within (no removed pairs to fit on).

Reported side by side: pairs kept, refusals by reason, every reading with its interval and standing, the verdict
and why. Pass `--limit N` to run on the first N pairs of each file (a quick look; the figures are at SugarCrepe's
size only without it).

    python -m benchmarks.bench_sugarcrepe_refilter [--types replace_rel,swap_obj] [--limit N] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, SHARED, read_metrics, result_path, write_result

NAME = "sugarcrepe_refilter"
SUGARCREPE = SHARED / "real" / "sugarcrepe"


def readings(gate: dict | None) -> dict:
    """Every reading of a gate report: accuracy, n, 95% CI, standing (within, and fitted on the removed pairs)."""
    if not gate:
        return {}
    out = {}
    for name, entry in (gate.get("attackers") or {}).items():
        after = entry.get("after") or {}
        out[name] = {k: after.get(k) for k in ("accuracy", "n", "ci95", "standing")}
    for name, after in (gate.get("transfer") or {}).items():
        out[f"{name} from removed"] = {k: after.get(k) for k in ("accuracy", "n", "ci95", "standing")}
    return out


def limited_copy(path: Path, limit: int | None, folder: Path) -> Path:
    if not limit:
        return path
    data = json.loads(path.read_text())
    out = folder / path.name
    out.write_text(json.dumps(dict(list(data.items())[:limit])))
    return out


def run_type(params: dict, type_: str, limit: int | None, folder: Path, workers: int = 1) -> dict:
    from foilforge.filters.attackers.runs import ForkedRunner
    from foilforge.pipeline.gate import release_gate
    from foilforge.pipeline.refiltering import refilter
    from foilforge.released import read_released, to_records

    started = time.perf_counter()
    unrefined = limited_copy(SUGARCREPE / "unrefined" / f"{type_}.json", limit, folder / "unrefined")
    report = refilter(params, unrefined, type_, folder / f"out_{type_}", progress=False, workers=workers)
    foilforge = {"pairs_in": report["records_before"], "kept": report["records_after"], "refused": report["refused"],
                 "funnel": report["funnel"], "certified": report["certified"], "why": report["why"],
                 "status": (report["gate"] or {}).get("status"), "readings": readings(report["gate"]),
                 "seconds": round(time.perf_counter() - started, 1)}
    started = time.perf_counter()
    released_path = limited_copy(SUGARCREPE / f"{type_}.json", limit, folder / "released")
    fmt, rows = read_released(released_path)
    records = to_records(fmt, rows, released_path, type_)
    gate = release_gate(params, type_, records, [], runner=ForkedRunner(workers))
    released = {"pairs": len(records), "certified": bool((gate or {}).get("certified")), "why": (gate or {}).get("why"),
                "status": (gate or {}).get("status"), "readings": readings(gate),
                "seconds": round(time.perf_counter() - started, 1)}
    return {"foilforge_refilter_of_unrefined": foilforge, "sugarcrepe_released": released}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", default="replace_rel,swap_obj")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--output", default=str(result_path(NAME)))
    parser.add_argument("--workers", type=int, default=None, help="processes for the model passes and attackers' "
                                                                  "fits (default: the CPUs this process may use)")
    args = parser.parse_args(argv)
    if not SUGARCREPE.is_dir():
        print(f"{SUGARCREPE} is absent: nothing to measure")
        return 0
    from foilforge.params import load_params
    from foilforge.pipeline.refiltering import default_workers

    params = load_params(ROOT / "params.yaml")
    workers = args.workers or default_workers()
    output = Path(args.output)
    result = read_metrics(output)
    result["limit"] = args.limit
    for type_ in args.types.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            (folder / "unrefined").mkdir()
            (folder / "released").mkdir()
            result[type_] = run_type(params, type_, args.limit, folder, workers)
        print(type_, json.dumps(result[type_])[:2000], flush=True)
        write_result(NAME, result, args, argv, path=output)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
