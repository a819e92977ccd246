"""Importing foilforge pins OpenBLAS's kernels (foilforge/host.py `pin_kernels`), so a build's float64 sums, and
with them its bytes, do not depend on which x86-64 CPU generation OpenBLAS detects; on a CPU with AMX a bfloat16
pass's batch has a shape fixed by its texts' length (foilforge/batching.py), and the pass store keys the
processor."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foilforge.host import OPENBLAS_KERNELS, cpu_flags, has_amx, pin_kernels, pin_openblas_kernels

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


@pytest.mark.skipif(not x86_with_avx2(), reason="the pin applies to x86-64 Linux CPUs with AVX2 and FMA")
def test_a_pin_set_after_numpy_loaded_is_reported(caplog):
    with caplog.at_level("WARNING", logger="foilforge.host"):
        assert pin_kernels({}, modules={}) == {"OPENBLAS_CORETYPE": "Haswell"}
        assert caplog.messages == []
        assert pin_kernels({"OPENBLAS_CORETYPE": "Zen"}, modules={"numpy": object()}) == {}
        assert caplog.messages == []  # the user's choice: nothing set, nothing to report
        pin_kernels({}, modules={"numpy": object()})
    assert caplog.messages == ["OPENBLAS_CORETYPE=Haswell was set after numpy loaded, which keeps the kernels it "
                               "chose: outputs may differ from another host's; import foilforge before numpy"]


def test_amx_is_read_from_the_cpu_flags(tmp_path):
    assert not has_amx(cpuinfo(tmp_path))
    assert has_amx(cpuinfo(tmp_path, CPUINFO.replace("avx512_bf16", "avx512_bf16 amx_bf16 amx_tile")))
    assert not has_amx(cpuinfo(tmp_path, CPUINFO.replace("avx512_bf16", "avx512_bf16 amx_tile")))


@pytest.mark.skipif(not has_amx(), reason="the rule is about oneDNN's AMX kernels: this CPU has no AMX")
def test_with_amx_a_bfloat16_row_has_the_same_bits_in_any_batch_of_the_fixed_shape():
    """SmolLM2's shape (576 -> 1,536), a 12-token text: in a batch of ceil(128 / 12) = 11 rows beside other texts at
    every place or beside copies of itself, the same bits (the AMX rule of foilforge/batching.py). oneDNN as it
    comes (no cap), in a fresh process. Alone the row had other bits than in a batch of 6 on an Intel CPU of
    family 6 model 167 (the printed False), which is why the shape is fixed; another CPU may choose alike there,
    so that part is not asserted."""
    script = ("import foilforge, torch\nfrom foilforge.batching import batch_rows\ntorch.manual_seed(0)\n"
              "torch.set_num_threads(1)\nrows = batch_rows(12, 'amx', 32)\n"
              "w = torch.randn(1536, 576).bfloat16()\nx = torch.randn(1, 12, 576).bfloat16()\n"
              "f = lambda b: torch.nn.functional.linear(b, w)\n"
              "copies = f(x.expand(rows[1], -1, -1).contiguous())\n"
              "others = [f(torch.cat([torch.randn(k, 12, 576).bfloat16(), x, torch.randn(rows[1] - k - 1, 12, 576)"
              ".bfloat16()]))[k] for k in range(rows[1])]\n"
              "print(rows, all(torch.equal(o, copies[0]) for o in others), torch.equal(f(x)[0], copies[0]))")
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().startswith("(11, 11) True ")


def test_the_pass_stores_device_kind_names_the_processor_and_a_cap_on_onednn(monkeypatch):
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
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert device_kind(cpu).endswith(":GenuineIntel 6/167:onednn<=default")
