"""Per-kernel resources from ptxas and the occupancy they allow (`compiler.kernel_resources`):
the log parser on recorded logs, occupancy against numbers worked out by hand from the CUDA C
Programming Guide's limits, real NVRTC compiles, tvms's own kernels through both caches,
``tvms compile --stats`` and the VM profiler's columns on the emulated GPU. No GPU needed."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler import kernel_resources as kr
from tvmscript.compiler.kernel_resources import PtxasInfo, occupancy, parse_ptxas_log

from support.cuda_check import prim_funcs_of


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMS_CACHE_DIR", str(tmp_path / "cache"))


def needs_nvrtc():
    from tvmscript.compiler import nvrtc

    try:
        nvrtc.nvrtc_version()
        nvrtc.include_dirs()
    except Exception as err:  # noqa: BLE001 - no NVRTC wheel or headers here
        pytest.skip(f"NVRTC is not available: {err}")
    return nvrtc


# ----------------------------------------------------------------------------- the parser

# NVRTC 13.0's log for four kernels (a callee-less compile for sm_90, recorded as it came).
LOG_CUDA13 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'pressure' for 'sm_90'
ptxas info    : Function properties for pressure
ptxas         .     616 bytes stack frame, 700 bytes spill stores, 700 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 616 bytes cumulative stack size
ptxas info    : Compile time = 44.294 ms
ptxas info    : Compiling entry function 'dyn' for 'sm_90'
ptxas info    : Function properties for dyn
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers
ptxas info    : Compile time = 1.865 ms
ptxas info    : Compiling entry function 'spill' for 'sm_90'
ptxas info    : Function properties for spill
ptxas         .     2048 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 2048 bytes cumulative stack size
ptxas info    : Compile time = 18.578 ms
ptxas info    : Compiling entry function 'smem' for 'sm_90'
ptxas info    : Function properties for smem
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 1.299 ms
"""

# The older shape: constant memory banks on the "Used" line, no barrier count, no smem, and a
# non-inlined callee whose own stack frame must not be taken for the kernel's.
LOG_OLDER = """\
ptxas info    : 0 bytes gmem, 8 bytes cmem[3]
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     32 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'k1' for 'sm_80'
ptxas info    : Function properties for k1
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 360 bytes cmem[0]
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     32 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas info    : Function properties for k2
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas warning : Registers are spilled to local memory in function 'k2', 24 bytes spill stores, 24 bytes spill loads
ptxas info    : Used 255 registers, used 2 barriers, 49152 bytes smem, 368 bytes cmem[0], 8 bytes cmem[2]
"""


def test_the_parser_reads_every_kernel_of_a_cuda13_log():
    found = parse_ptxas_log(LOG_CUDA13)
    assert list(found) == ["pressure", "dyn", "spill", "smem"]
    assert found["pressure"] == PtxasInfo("pressure", registers=64, stack_bytes=616, spill_store_bytes=700,
                                          spill_load_bytes=700)
    assert found["pressure"].spills and not found["spill"].spills
    assert found["dyn"] == PtxasInfo("dyn", registers=10, barriers=1)
    assert found["spill"] == PtxasInfo("spill", registers=32, stack_bytes=2048)
    assert found["smem"] == PtxasInfo("smem", registers=10, barriers=1, shared_bytes=1024)


def test_the_parser_reads_constant_banks_and_skips_a_callees_frame():
    found = parse_ptxas_log(LOG_OLDER)
    assert found["k1"] == PtxasInfo("k1", registers=8, stack_bytes=16, constant_bytes=360)
    assert found["k2"] == PtxasInfo("k2", registers=255, barriers=2, shared_bytes=49152, constant_bytes=376), \
        "the callee's 32-byte frame printed after k1's is not k2's"


def test_the_parser_finds_nothing_in_a_log_without_kernels():
    assert parse_ptxas_log("") == {}
    assert parse_ptxas_log("ptxas info    : 0 bytes gmem\nwarning: something else\n") == {}


# ----------------------------------------------------------------------------- occupancy
#
# Each case worked out from the published limits: registers per warp = 32 x registers rounded
# up to 256; each of 4 sub-partitions holds 16384 registers; warps per block = threads / 32.


def test_full_occupancy_when_nothing_limits():
    # sm_90, 256 threads (8 warps), 32 registers: 1024 per warp, 16 warps per sub-partition =
    # 64 per SM = 8 blocks; 64 warps / 8 = 8 blocks too: 64/64.
    occ = occupancy("sm_90", 256, 32)
    assert (occ.blocks, occ.warps, occ.max_warps) == (8, 64, 64)
    assert str(occ) == "100% (64/64 warps)" and occ.limited_by == ()


@pytest.mark.parametrize("arch, threads, registers, blocks, warps, text, limited_by", [
    # 128 registers: 4096 per warp, 4 warps per sub-partition, 16 per SM: 2 blocks of 8 warps.
    ("sm_90", 256, 128, 2, 16, "25% (16/64 warps)", ("registers",)),
    # 64 registers: 2048 per warp, 8 per sub-partition, 32 per SM: 4 blocks.
    ("sm_90", 256, 64, 4, 32, "50% (32/64 warps)", ("registers",)),
    # sm_80, 40 registers: 1280 per warp, 12 per sub-partition, 48 per SM: 12 blocks of 4 warps.
    ("sm_80", 128, 40, 12, 48, "75% (48/64 warps)", ("registers",)),
    # sm_86 holds 48 warps: one block of 32.
    ("sm_86", 1024, 32, 1, 32, "67% (32/48 warps)", ("block size",)),
    # 160 threads = 5 warps: 64 // 5 = 12 blocks; 31 registers (1024 per warp) would allow 64
    # warps, so registers are not what limits.
    ("sm_90", 160, 31, 12, 60, "94% (60/64 warps)", ("block size",)),
    # one warp per block: 32 blocks per SM on sm_90, 16 on sm_86, 24 on sm_89.
    ("sm_90", 32, 16, 32, 32, "50% (32/64 warps)", ("blocks per SM",)),
    ("sm_86", 64, 16, 16, 32, "67% (32/48 warps)", ("blocks per SM",)),
    ("sm_89", 64, 16, 24, 48, "100% (48/48 warps)", ()),
    # sm_75 holds 32 warps; 64 registers: 8 warps per sub-partition = 32: one block of 1024.
    ("sm_75", 1024, 64, 1, 32, "100% (32/32 warps)", ()),
    # 1024 threads x 72 registers: 2304 x 32 warps = 73728 > 65536 registers per block.
    ("sm_90", 1024, 72, 0, 0, "0% (0/64 warps)", ("registers",)),
    ("sm_90", 2048, 16, 0, 0, "0% (0/64 warps)", ("block size",)),
])
def test_occupancy_matches_the_hand_worked_numbers(arch, threads, registers, blocks, warps, text, limited_by):
    occ = occupancy(arch, threads, registers)
    assert (occ.blocks, occ.warps, str(occ), occ.limited_by) == (blocks, warps, text, limited_by)


@pytest.mark.parametrize("arch, shared, blocks", [
    # sm_90: 48 KiB + the 1 KiB reserve = 50176 bytes (a multiple of 128); 233472 // 50176 = 4.
    ("sm_90", 48 * 1024, 4),
    # sm_80: 100 bytes + 1 KiB = 1124, rounded to 1152: 145 blocks, more than the 32 allowed.
    ("sm_80", 100, None),
    # sm_70: no reserve, 256-byte units: 48 KiB twice in 96 KiB; one byte more rounds up past it.
    ("sm_70", 48 * 1024, 2),
    ("sm_70", 48 * 1024 + 1, 1),
    # more than a block may have (227 KiB on sm_90): it cannot launch.
    ("sm_90", 228 * 1024, 0),
])
def test_shared_memory_limits_blocks_with_the_reserve_and_granularity(arch, shared, blocks):
    occ = occupancy(arch, 128, 32, shared)
    if blocks is None:
        assert occ.limited_by == () and dict(occ.limits)["shared memory"] > 32
    else:
        assert occ.blocks == blocks and occ.limited_by == ("shared memory",)


def test_architectures_outside_the_table_have_no_occupancy():
    assert set(kr.ARCHS) == {"sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    assert occupancy("sm_100", 256, 32) is None and kr.arch_limits("sm_61") is None
    assert kr.arch_limits("sm_90a") is kr.ARCHS["sm_90"]


# ----------------------------------------------------------------------------- NVRTC

HAND_WRITTEN = r"""
extern "C" __global__ void __launch_bounds__(256) smem(float* a) {
  __shared__ float s[256];
  s[threadIdx.x] = a[threadIdx.x];
  __syncthreads();
  a[threadIdx.x] = s[255 - threadIdx.x];
}
extern "C" __global__ void local_array(float* a, int k) {
  float loc[512];
  for (int i = 0; i < 512; ++i) loc[i] = a[i * k];
  a[threadIdx.x] = loc[(threadIdx.x * 7 + k) & 511];
}
extern "C" __global__ void __launch_bounds__(1024) pressure(float* a, int n) {
  float acc[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) acc[j] = a[j * n + threadIdx.x];
  for (int r = 0; r < n; ++r) {
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) & 63] + a[r];
  }
#pragma unroll
  for (int j = 0; j < 64; ++j) a[j * n + threadIdx.x] = acc[j];
}
"""


def test_nvrtc_reports_shared_memory_stack_and_spills():
    """1 KiB of __shared__ and a barrier; a local array indexed at run time lives in a stack
    frame; 64 live floats under a 1024-thread bound (64 registers at most) spill."""
    nvrtc = needs_nvrtc()
    result = nvrtc.compile_cuda(HAND_WRITTEN, "sm_90")
    found = parse_ptxas_log(result.log)
    assert set(found) == {"smem", "local_array", "pressure"}, result.log
    smem = found["smem"]
    assert (smem.shared_bytes, smem.barriers, smem.stack_bytes) == (1024, 1, 0) and 0 < smem.registers <= 32
    assert found["local_array"].stack_bytes >= 2048 and found["local_array"].shared_bytes == 0
    pressure = found["pressure"]
    assert pressure.registers <= 64 and pressure.spill_store_bytes > 0 and pressure.spill_load_bytes > 0


def test_the_log_survives_nvrtcs_disk_cache():
    nvrtc = needs_nvrtc()
    first = nvrtc.compile_cuda(HAND_WRITTEN, "sm_80")
    again = nvrtc.compile_cuda(HAND_WRITTEN, "sm_80")
    assert not first.cached and again.cached
    assert again.binary == first.binary and again.log == first.log and "ptxas info" in again.log
    ptx = nvrtc.compile_cuda(HAND_WRITTEN, "sm_80", kind="ptx")
    assert parse_ptxas_log(ptx.log) == {}, "PTX is not assembled: no ptxas report"


def test_a_ptxas_error_still_reaches_the_error():
    """With ``-v``, NVRTC's log of a failed compile holds ptxas's report but not its error: the
    error comes from a second compile without it."""
    nvrtc = needs_nvrtc()
    src = ('extern "C" __global__ void big(float* a) {\n  __shared__ float s[70000];\n'
           '  s[threadIdx.x] = a[threadIdx.x];\n  __syncthreads();\n  a[threadIdx.x] = s[69999 - threadIdx.x];\n}\n')
    with pytest.raises(nvrtc.NVRTCError) as info:
        nvrtc.compile_cuda(src, "sm_90")
    assert "uses too much shared data" in info.value.log and "ptxas info" not in info.value.log


# ----------------------------------------------------------------------------- tvms's kernels

SHARED_REVERSE = """
@I.ir_module
class Module:
    @T.prim_func
    def reverse(A: T.Buffer((64, 256), "float32"), B: T.Buffer((64, 256), "float32")):
        T.func_attr({"tir.noalias": True})
        S = T.alloc_buffer((256,), scope="shared")
        for bx in T.thread_binding(64, thread="blockIdx.x"):
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                with T.block("S"):
                    vi, vj = T.axis.remap("SS", [bx, tx])
                    S[vj] = A[vi, vj]
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [bx, tx])
                    B[vi, vj] = S[255 - vj]
"""


def test_a_tvms_kernel_has_a_report_through_both_build_caches():
    needs_nvrtc()
    from tvmscript.compiler import build_cuda as cuda_build

    mod = tvms.parse(SHARED_REVERSE)
    ex = tvms.compile(mod, target="cuda -arch=sm_90")
    (res,) = ex.kernel_resources().values()
    assert (res.kernel, res.func, res.block, res.threads, res.dyn_shared_bytes) == (
        "reverse_kernel", "reverse", (256, 1, 1), 256, 0)
    assert res.ptxas.shared_bytes == 1024 and res.ptxas.barriers == 1 and 0 < res.ptxas.registers <= 64
    assert res.occupancy == occupancy("sm_90", 256, res.ptxas.registers, 1024)
    assert str(res.occupancy) == "100% (64/64 warps)"
    first = ex.cuda_code.ptxas
    cuda_build.clear_cuda_cache()      # the next process: the build comes from the disk cache
    again = cuda_build.build_cuda(prim_funcs_of(mod), "cuda -arch=sm_90")
    assert again is not ex.cuda_code and again.ptxas == first


from test_cuda_codegen import BIG_TILE  # noqa: E402  (a copy whose A_shared needs 64 KiB)



def test_dynamic_shared_memory_counts_toward_occupancy():
    """64 KiB of dynamic shared memory per block (+1 KiB reserved) fits 3 times in an H100's
    228 KiB: 3 blocks of 8 warps."""
    needs_nvrtc()
    from tvmscript.compiler.build_cuda import build_cuda

    code = build_cuda(prim_funcs_of(tvms.parse(BIG_TILE)), "cuda -arch=sm_90")
    res = code.resources["copy_kernel"]
    assert res.dyn_shared_bytes == 65536 and res.shared_bytes == 65536 + res.ptxas.shared_bytes
    assert res.ptxas.registers <= 64, "fewer than 4 blocks by registers would change the case"
    assert str(res.occupancy) == "38% (24/64 warps)" and res.occupancy.limited_by == ("shared memory",)


def test_the_cpu_and_source_only_builds_have_no_report():
    from tvmscript.compiler.build_cuda import build_cuda

    assert tvms.compile(tvms.parse(SHARED_REVERSE), target="llvm").kernel_resources() == {}
    code = build_cuda(prim_funcs_of(tvms.parse(SHARED_REVERSE)), "cuda", kind="source")
    (res,) = code.resources.values()
    assert res.ptxas is None and res.occupancy is None and res.block == (256, 1, 1)


# ----------------------------------------------------------------------------- tvms compile --stats


def test_cli_stats_prints_one_row_per_kernel(tmp_path):
    needs_nvrtc()
    from support.cli import ok, tvms as run_tvms

    src = tmp_path / "k.tvms"
    src.write_text(SHARED_REVERSE + BIG_TILE.split("class Module:", 1)[1])
    out = ok("compile", str(src), "--target", "cuda", "--arch", "sm_90", "--stats").out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["kernel", "block", "registers"] and "occupancy" in lines[0]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert set(rows) == {"reverse_kernel", "copy_kernel"}
    assert "1024 B" in rows["reverse_kernel"] and "100% (64/64 warps)" in rows["reverse_kernel"]
    assert "  64 KiB dynamic  " in rows["copy_kernel"] and rows["copy_kernel"].endswith("shared memory")
    assert "38% (24/64 warps)" in rows["copy_kernel"]
    assert lines[-1].startswith("sm_90 (H100), per SM: 64 warps")
    one = ok("compile", str(src), "--target", "cuda", "--stats", "--func", "copy").out
    assert "copy_kernel" in one and "reverse_kernel" not in one
    for args, message in [(("--stats",), "use it with --target cuda"),
                          (("--target", "cuda", "--stats", "--emit", "ptx"), "leave out --emit and -o")]:
        bad = run_tvms("compile", str(src), *args)
        assert bad.returncode == 1 and message in bad.err, bad.err


def test_stats_rows_say_what_is_dynamic_spilled_or_unknown():
    from tvmscript.cli.kernel_stats import stats_rows

    spilled = PtxasInfo("k", registers=64, shared_bytes=2048, stack_bytes=616, spill_store_bytes=700,
                        spill_load_bytes=700)
    resources = {
        "k": kr.KernelResources("k", "f", "sm_80", (32, 4, 1), 16384, spilled, occupancy("sm_80", 128, 64, 18432)),
        "sym": kr.KernelResources("sym", "g", "sm_80", (256, 1, 1), None, PtxasInfo("sym", registers=16),
                                  occupancy("sm_80", 256, 16)),
        "new": kr.KernelResources("new", "h", "sm_100", None, 0, None, None),
    }
    k, sym, new = stats_rows(resources)
    # sm_80, 64 registers: 2048 per warp, 32 warps per SM = 8 blocks of 4 warps; 18 KiB + 1 KiB
    # of shared memory: 167936 // 19456 = 8 blocks as well.
    assert k == ("k", "128 (32x4)", "64", "700 B / 700 B", "616 B", "18 KiB (16 KiB dynamic)", "50% (32/64 warps)",
                 "registers, shared memory")
    assert sym[5] == "dynamic" and sym[6] == "100% (64/64 warps)" and sym[7] == "-"
    assert new == ("new", "?", "-", "-", "-", "-", "-", "-")


# ----------------------------------------------------------------------------- the VM profiler

RELAX_REVERSE = SHARED_REVERSE.rstrip() + """

    @R.function
    def main(a: R.Tensor((64, 256), "float32")) -> R.Tensor((64, 256), "float32"):
        cls = Module
        b = R.call_tir(cls.reverse, (a,), out_sinfo=R.Tensor((64, 256), "float32"))
        return b
"""


def test_the_profiler_shows_registers_and_occupancy_on_the_emulated_gpu(monkeypatch):
    needs_nvrtc()
    from support.gpu_drivers import EmulatedDriver, install_driver

    install_driver(monkeypatch, EmulatedDriver())
    ex = tvms.compile(tvms.parse(RELAX_REVERSE), target="cuda -arch=sm_90")
    vm = tvms.relax.VirtualMachine(ex, tvms.cuda())
    a = np.arange(64 * 256, dtype="float32").reshape(64, 256)
    report = vm.profile("main", tvms.nd.array(a, tvms.cuda()))
    res = ex.kernel_resources()["reverse_kernel"]
    assert report.header[-2:] == ("Registers", "Occupancy")
    assert report.resources == {"reverse": (str(res.ptxas.registers), "100% (64/64 warps)")}
    (row,) = [r for r in report.table() if r[0] == "reverse"]
    assert row[-2:] == (str(res.ptxas.registers), "100% (64/64 warps)")
    assert "Occupancy" in str(report) and "100% (64/64 warps)" in str(report)
    np.testing.assert_array_equal(vm["main"](tvms.nd.array(a, tvms.cuda())).numpy(), a[:, ::-1])


def test_the_profile_table_has_no_resource_columns_without_a_report():
    from tvmscript.runtime.vm import ProfileReport

    plain = ProfileReport("main", {"k": (1, 2e-6)}, 3e-6, "cuda:0")
    assert plain.header[-1] == "Percent" and all(len(r) == 5 for r in plain.table())
    both = ProfileReport("main", {"k": (1, 2e-6), "other": (1, 1e-7)}, 3e-6, "cuda:0",
                         {"k": ("40 / 12", "75% (48/64 warps) / 100% (64/64 warps)")})
    rows = both.table()
    assert all(len(r) == 7 for r in rows)
    assert rows[0][-2:] == ("40 / 12", "75% (48/64 warps) / 100% (64/64 warps)")
    assert rows[1][-2:] == ("-", "-") and rows[-1][-2:] == ("", "")
