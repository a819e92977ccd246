"""The machine a process runs on: its CPU's /proc/cpuinfo fields, and the OpenBLAS kernels foilforge pins so that
its bytes do not depend on which x86-64 CPU generation OpenBLAS detects.

`pin_kernels` runs when the package is imported (foilforge/__init__.py), before numpy loads in any foilforge
command, test or benchmark; `cpu_info` also feeds the benchmarks' machine record (benchmarks/common.py) and
`has_amx` the pass store's batch shapes (foilforge/lm.py). Why: docs/performance.md, "Hosts of one CPU name"."""

from __future__ import annotations

import logging
import os
import platform
import sys

log = logging.getLogger(__name__)

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


def has_amx(path="/proc/cpuinfo") -> bool:
    """Whether the CPU has AMX tiles for bfloat16 (flags amx_tile and amx_bf16), which oneDNN uses for torch's
    bfloat16 products by a rule of their shape (foilforge/batching.py)."""
    return {"amx_tile", "amx_bf16"} <= cpu_flags(path)


def is_x86_64(machine: str | None = None) -> bool:
    """Whether `machine` (default this one's, platform.machine()) is x86-64, the CPUs the OpenBLAS pin applies to."""
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def pin_openblas_kernels(environ=os.environ, cpuinfo: str = "/proc/cpuinfo", machine: str | None = None) -> str | None:
    """Set OPENBLAS_CORETYPE to OPENBLAS_KERNELS (returned) where the CPU runs them and the variable is unset.

    OpenBLAS (numpy's and scipy's: liblinear's fits, the attackers' products) picks its kernels by the CPU it
    detects, and two hosts of one CPU name took different ones (AVX-512 and AVX2 kernels), whose float64 sums differ
    in their last bits: two baseline outputs of the sample build differed between those hosts, and were equal with
    the AVX2 kernels on both (docs/performance.md, "Hosts of one CPU name"). So OpenBLAS sums alike on any x86-64
    Linux host with AVX2 (elsewhere, without /proc/cpuinfo, it chooses). OpenBLAS reads the variable when it loads:
    `pin_kernels` calls this before anything imports numpy, and the runner's workers inherit it."""
    if "OPENBLAS_CORETYPE" in environ:
        return None
    if not is_x86_64(machine):
        return None
    if not {"avx2", "fma"} <= cpu_flags(cpuinfo):
        return None
    environ["OPENBLAS_CORETYPE"] = OPENBLAS_KERNELS
    return OPENBLAS_KERNELS


def pin_kernels(environ=os.environ, modules=None) -> dict[str, str]:
    """The pin ({variable: value} if set now). OpenBLAS, once loaded, has read its variable: pinned too late, it
    keeps the kernels it chose, and that is logged (import foilforge before numpy)."""
    modules = sys.modules if modules is None else modules
    value = pin_openblas_kernels(environ)
    if value is None:
        return {}
    if "numpy" in modules:
        log.warning("OPENBLAS_CORETYPE=%s was set after numpy loaded, which keeps the kernels it chose: outputs may "
                    "differ from another host's; import foilforge before numpy", value)
    return {"OPENBLAS_CORETYPE": value}
