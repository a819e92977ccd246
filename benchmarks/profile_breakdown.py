"""Where a profiled build's time went: py-spy's raw samples summed by stage and by kind of work.

Record a build with py-spy (not a dependency: `pip install --target DIR py-spy`), then read the samples:

    DIR/bin/py-spy record --subprocesses --rate 20 --format raw -o build.raw -- \\
        python -m benchmarks.bench_sample_build --label L --results /tmp/sample_build.json
    python -m benchmarks.profile_breakdown build.raw --rate 20 --output benchmarks/results/profile_L.json

py-spy's raw format is one line per distinct stack: `frame;frame;...;frame COUNT`, each frame `function (file:line)`.
A sample belongs to the stage whose module (pipeline/stages/NAME.py, the command line's module excepted) is on its
stack, else to "other" (the runner, DVC, a waiting thread), and to the first kind in KINDS whose pattern matches a
frame, else to "rest". Seconds are samples divided by the rate. py-spy counts a thread that waits in Python as well,
so "other" holds the benchmark's own waiting threads; the stage rows are what the stages did.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

#: (kind, pattern on one stack's text): the first that matches names the sample's work
KINDS = (
    ("smollm2_forward", r"LlamaForCausalLM\.forward|LlamaModel\.forward"),
    ("other_torch_forward", r"Module\._call_impl"),
    ("highs", r"[Hh]ighs|milp \("),
    ("spacy", r"[(/](?:spacy|thinc)/"),
    ("attackers", r"[(/](?:sklearn|scipy/sparse|lightgbm)/|liblinear|fit_(?:dense_)?logistic"),
    ("link_grammar", r"linkgrammar"),
    ("gguf_conversion", r"gguf"),
    ("imports", r"_find_and_load"),
)
STAGE = re.compile(r"main \((?:\S*/)?pipeline/stages/(?!cli\.py)(\w+)\.py")


def breakdown(lines, rate: float) -> dict:
    """{"total_s", "by_stage": {stage: {"all": s, kind: s, ...}}, "by_kind": {kind: s}} from py-spy raw lines."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    by_stage: dict[str, Counter] = {}
    by_kind: Counter = Counter()
    total = 0
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"line {number}: expected 'frame;...;frame COUNT' (py-spy --format raw), got {line[:80]!r}")
        samples = int(count)
        total += samples
        match = STAGE.search(stack)
        stage = match.group(1) if match else "other"
        kind = next((name for name, pattern in KINDS if re.search(pattern, stack)), "rest")
        counts = by_stage.setdefault(stage, Counter())
        counts["all"] += samples
        counts[kind] += samples
        by_kind[kind] += samples

    def seconds(counter: Counter) -> dict:
        return {key: round(value / rate, 1) for key, value in counter.most_common()}

    return {"total_s": round(total / rate, 1),
            "by_stage": {stage: seconds(c) for stage, c in sorted(by_stage.items(), key=lambda kv: -kv[1]["all"])},
            "by_kind": seconds(by_kind)}


def table(result: dict) -> str:
    """The stages as rows and the kinds as columns, in markdown."""
    kinds = [name for name, _ in KINDS if name in result["by_kind"]] + (["rest"] if "rest" in result["by_kind"] else [])
    rows = ["| stage | all (s) | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 2) + "|"]
    for stage, seconds in result["by_stage"].items():
        rows.append(f"| {stage} | {seconds['all']:,.0f} | " + " | ".join(
            f"{seconds[k]:,.0f}" if k in seconds else "-" for k in kinds) + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="py-spy's output of `record --format raw`")
    parser.add_argument("--rate", type=float, required=True, help="the --rate it sampled at (samples a second)")
    parser.add_argument("--output", type=Path, help="write the breakdown here as JSON (atomically)")
    args = parser.parse_args(argv)
    try:
        with args.raw.open(encoding="utf-8") as handle:
            result = breakdown(handle, args.rate)
    except (OSError, ValueError) as err:
        print(f"profile_breakdown: {args.raw}: {err}", file=sys.stderr)
        return 2
    print(table(result))
    if args.output:
        from foilforge.io import atomic_write

        with atomic_write(args.output) as handle:
            handle.write(json.dumps({"raw": str(args.raw), "rate": args.rate, **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
