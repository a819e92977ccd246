"""Importing foilforge pins OpenBLAS's kernels and oneDNN's instruction set (foilforge/host.py `pin_kernels`), so a
build's float64 sums and a model's bfloat16 passes, and with them its bytes, do not depend on which x86-64 CPU
generation the libraries detect, nor a text's passes on the texts that share its batch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foilforge.host import (
    ONEDNN_ISA,
    OPENBLAS_KERNELS,
    cpu_flags,
    is_x86_64,
    pin_kernels,
    pin_onednn_isa,
    pin_openblas_kernels,
)

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


def test_onednn_is_capped_below_amx_on_x86_unless_the_user_chose():
    environ: dict = {}
    assert pin_onednn_isa(environ, "x86_64") == "AVX512_CORE_BF16" == ONEDNN_ISA
    assert environ == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
    chosen = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}
    assert pin_onednn_isa(chosen, "x86_64") is None and chosen == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}
    off_x86: dict = {}
    assert pin_onednn_isa(off_x86, "aarch64") is None and off_x86 == {}


def test_a_pin_set_after_its_library_loaded_is_reported(caplog):
    if not is_x86_64():
        pytest.skip("the oneDNN pin applies to x86-64")
    with caplog.at_level("WARNING", logger="foilforge.host"):
        assert pin_kernels({"OPENBLAS_CORETYPE": "Zen"}, modules={}) == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
        assert caplog.messages == []
        pin_kernels({"OPENBLAS_CORETYPE": "Zen"}, modules={"torch": object()})
    assert caplog.messages == ["ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 was set after torch loaded, which keeps the "
                               "kernels it chose: outputs may differ from another host's; import foilforge before "
                               "numpy and torch"]


def test_after_importing_foilforge_a_bfloat16_product_of_one_text_does_not_depend_on_its_batch():
    """SmolLM2's shape (576 -> 1,536), a 12-token text alone and beside copies of it in batches of 3 to 32: the
    same bits in a fresh process that imported foilforge first. On a CPU with AMX, oneDNN's default kernels gave
    other bits from a batch of 3 on; elsewhere this holds with or without the pin."""
    script = ("import foilforge, torch\ntorch.manual_seed(0)\ntorch.set_num_threads(1)\n"
              "w = torch.randn(1536, 576).bfloat16()\nx = torch.randn(1, 12, 576).bfloat16()\n"
              "alone = torch.nn.functional.linear(x, w)[0]\n"
              "print(all(torch.equal(torch.nn.functional.linear(x.expand(b, -1, -1).contiguous(), w)[b - 1], alone)\n"
              "          for b in (3, 4, 8, 16, 32)))")
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_the_pass_stores_device_kind_names_the_processor_and_onednns_cap(monkeypatch):
    """An Intel and an AMD CPU with AVX512-BF16 gave SmolLM2 other bits: a pass store shared by both must key them
    apart (foilforge/lm.py `device_kind`, part of the store key)."""
    import torch

    import foilforge.host
    from foilforge.lm import device_kind

    cpu = torch.device("cpu")
    amd = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17"}
    intel = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "167"}
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    monkeypatch.setattr(foilforge.host, "cpu_info", lambda: amd)
    on_amd = device_kind(cpu)
    assert on_amd.endswith(":AuthenticAMD 25/17:onednn<=AVX512_CORE_BF16") and on_amd.startswith("cpu:")
    monkeypatch.setattr(foilforge.host, "cpu_info", lambda: intel)
    assert device_kind(cpu).endswith(":GenuineIntel 6/167:onednn<=AVX512_CORE_BF16")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert device_kind(cpu).endswith(":GenuineIntel 6/167:onednn<=AVX512_CORE_AMX")
