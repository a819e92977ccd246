"""The machine a process runs on: its CPU's /proc/cpuinfo fields, and the OpenBLAS kernels foilforge pins.

`cpu_info` is read by `pin_openblas_kernels` (every `foilforge` command, pipeline/stages/cli.py) and by the
benchmarks' machine record (benchmarks/common.py)."""

from __future__ import annotations

import os
import platform

#: OpenBLAS's kernels every foilforge process uses on an x86-64 CPU with AVX2 and FMA, unless OPENBLAS_CORETYPE is set
OPENBLAS_KERNELS = "Haswell"


def cpu_info(path="/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_flags(path="/proc/cpuinfo") -> set[str]:
    """The first processor's flags (empty where /proc/cpuinfo is not)."""
    return set(cpu_info(path).get("flags", "").split())


def pin_openblas_kernels(environ=os.environ, cpuinfo: str = "/proc/cpuinfo", machine: str | None = None) -> str | None:
    """Set OPENBLAS_CORETYPE to OPENBLAS_KERNELS (returned) where the CPU runs them and the variable is unset.

    OpenBLAS (numpy's and scipy's: liblinear's fits, the attackers' products) picks its kernels by the CPU it
    detects, and two hosts of one CPU name took different ones (AVX-512 and AVX2 kernels), whose float64 sums differ
    in their last bits: two baseline outputs of the sample build differed between those hosts, and were equal with
    the AVX2 kernels on both (docs/performance.md, "Hosts of one CPU name"). So OpenBLAS sums alike on any x86-64
    Linux host with AVX2 (elsewhere, without /proc/cpuinfo, it chooses); torch's libraries decide the models' bits
    (that page says which switches do). OpenBLAS reads the variable when it loads: the CLI calls this before any
    stage imports numpy, and the runner's workers inherit it."""
    if "OPENBLAS_CORETYPE" in environ:
        return None
    if (machine or platform.machine()).lower() not in ("x86_64", "amd64"):
        return None
    if not {"avx2", "fma"} <= cpu_flags(cpuinfo):
        return None
    environ["OPENBLAS_CORETYPE"] = OPENBLAS_KERNELS
    return OPENBLAS_KERNELS
