"""Every foilforge command pins OpenBLAS's kernels (foilforge/host.py `pin_openblas_kernels`), so a build's
float64 sums, and with them its bytes, do not depend on which x86-64 CPU generation OpenBLAS detects."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foilforge.host import OPENBLAS_KERNELS, cpu_flags, pin_openblas_kernels

CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
           "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512_bf16\n\n")


def cpuinfo(tmp_path, text=CPUINFO) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_an_x86_cpu_with_avx2_gets_the_haswell_kernels_unless_the_user_chose(tmp_path):
    environ: dict = {}
    assert pin_openblas_kernels(environ, cpuinfo(tmp_path), "x86_64") == "Haswell" == OPENBLAS_KERNELS
    assert environ == {"OPENBLAS_CORETYPE": "Haswell"}
    chosen = {"OPENBLAS_CORETYPE": "SkylakeX"}
    assert pin_openblas_kernels(chosen, cpuinfo(tmp_path), "x86_64") is None and chosen == {"OPENBLAS_CORETYPE": "SkylakeX"}


def test_no_pin_where_the_kernels_would_not_run_or_the_cpu_is_unknown(tmp_path):
    environ: dict = {}
    no_avx2 = cpuinfo(tmp_path, CPUINFO.replace(" avx2", ""))
    assert pin_openblas_kernels(environ, no_avx2, "x86_64") is None
    assert pin_openblas_kernels(environ, cpuinfo(tmp_path), "aarch64") is None
    assert pin_openblas_kernels(environ, str(tmp_path / "absent"), "x86_64") is None
    assert environ == {}


def x86_with_avx2() -> bool:
    return {"avx2", "fma"} <= cpu_flags()


@pytest.mark.skipif(not x86_with_avx2(), reason="the pin applies to x86-64 Linux CPUs with AVX2 and FMA")
def test_a_foilforge_command_loads_openblas_with_the_pinned_kernels():
    script = ("import sys\nfrom foilforge.pipeline.stages.cli import main\n"
              "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
              "import numpy, scipy.linalg\nfrom threadpoolctl import threadpool_info\n"
              "print(sorted({i['architecture'] for i in threadpool_info() if i['internal_api'] == 'openblas'}))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "['Haswell']"  # numpy's and scipy's OpenBLAS alike
