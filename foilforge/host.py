"""The machine a process runs on: its CPU's /proc/cpuinfo fields, and the kernels foilforge pins so that its
bytes do not depend on which x86-64 CPU generation a library detects.

`pin_kernels` runs when the package is imported (foilforge/__init__.py), before numpy or torch load in any
foilforge command, test or benchmark; `cpu_info` also feeds the benchmarks' machine record (benchmarks/common.py).
Why each pin: docs/performance.md, "Hosts of one CPU name"."""

from __future__ import annotations

import logging
import os
import platform
import sys

log = logging.getLogger(__name__)

#: OpenBLAS's kernels every foilforge process uses on an x86-64 CPU with AVX2 and FMA, unless OPENBLAS_CORETYPE is set
OPENBLAS_KERNELS = "Haswell"
#: the highest instruction set oneDNN (torch's bfloat16 products on the CPU) may use, unless ONEDNN_MAX_CPU_ISA is
#: set: AVX-512 with bfloat16, not AMX
ONEDNN_ISA = "AVX512_CORE_BF16"


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


def is_x86_64(machine: str | None = None) -> bool:
    """Whether `machine` (default this one's, platform.machine()) is x86-64, the CPUs both pins apply to."""
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


def pin_onednn_isa(environ=os.environ, machine: str | None = None) -> str | None:
    """Set ONEDNN_MAX_CPU_ISA to ONEDNN_ISA (returned) on x86-64 where the variable is unset.

    On a CPU with AMX, oneDNN computes a bfloat16 product of several texts of one length with AMX tiles and one
    text alone without them, and the two sum in another order: every SmolLM2 log-probability and pooled state of
    the sample build then depended on which texts shared its batch, against the pass store's promise (a text's
    outputs are a function of the model and the text; foilforge/pass_store.py). Capped at AVX-512 with bfloat16
    a text gets the same bits alone and in any batch there (not the bits of another vendor's CPU: the pass store
    keys the processor, foilforge/lm.py `device_kind`). A CPU below the cap is unaffected. oneDNN reads the
    variable when torch loads, so this runs before anything imports torch."""
    if "ONEDNN_MAX_CPU_ISA" in environ:
        return None
    if not is_x86_64(machine):
        return None
    environ["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA
    return ONEDNN_ISA


def pin_kernels(environ=os.environ, modules=None) -> dict[str, str]:
    """Both pins ({variable: value} of those set now). A library already loaded has read its variable: pinned too
    late, it keeps the kernels it chose, and that is logged (import foilforge before numpy and torch)."""
    modules = sys.modules if modules is None else modules
    pinned = {}
    for variable, pin, library in (("OPENBLAS_CORETYPE", pin_openblas_kernels, "numpy"),
                                   ("ONEDNN_MAX_CPU_ISA", pin_onednn_isa, "torch")):
        value = pin(environ)
        if value is None:
            continue
        pinned[variable] = value
        if library in modules:
            log.warning("%s=%s was set after %s loaded, which keeps the kernels it chose: outputs may differ from "
                        "another host's; import foilforge before numpy and torch", variable, value, library)
    return pinned
