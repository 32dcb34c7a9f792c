"""Counters of CUDA kernels from the CPU emulator, and the roofline estimate built on them.

What is checked:

* the shim's counters on hand-written CUDA C with known answers: a coalesced float copy (4
  sectors per request), a stride-32 read (32), a float4 copy (16 sectors, 4 lines); shared
  memory without conflicts, with 2-way and 32-way conflicts, a broadcast, 8- and 16-byte
  accesses (2 and 4 phases); an FMA loop's thread and warp-level counts, with half the warp
  idle; a wmma tile's ldmatrix-shaped requests and its MMA;
* the printer's trace mode on tvms kernels: the default fp32 matmul schedule's FMAs are the
  matmul's and its global loads are coalesced, the elementwise add issues float4 accesses, a
  sample of blocks scaled up gives a uniform kernel's exact counts, the wmma kernel's MMA
  count; traced kernels compute what untraced ones do (compare_with_cpu with trace=True), and
  the CUDA C for GPUs has no trace in it;
* `compiler.roofline`: estimates worked out by hand for a memory-bound copy and a
  compute-bound FMA kernel, the static estimate of a matmul, the GPU table, op counting.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.codegen_cuda.trace import op_counts
from tvmscript.compiler.roofline import (GPUS, KernelCounters, estimate, gpu_for_device, gpu_spec, pipelined_kernel,
                                         static_estimate)

if shutil.which("g++") is None:
    pytest.skip("the CUDA emulator needs g++", allow_module_level=True)

from support.cuda_counters import CountingModule, count, sample_blocks  # noqa: E402
from support.cuda_check import conv2d_src, prim_funcs_of, scheduled_by, square_matmul_src  # noqa: E402
from support.cuda_emulator import compare_with_cpu  # noqa: E402

HEADER = "#include <cuda_fp16.h>\n#include <mma.h>\n"

GLOBAL = HEADER + r'''
extern "C" __global__ void __launch_bounds__(256) copy(const float* __restrict__ in, float* __restrict__ out) {
  int i = (int)blockIdx.x * 256 + (int)threadIdx.x;
  (*tvms_trace(1, 2, &out[i])) = (*tvms_trace(0, 0, &in[i]));
}

extern "C" __global__ void __launch_bounds__(256) strided(const float* __restrict__ in, float* __restrict__ out) {
  int i = (int)blockIdx.x * 256 + (int)threadIdx.x;
  (*tvms_trace(1, 2, &out[i])) = (*tvms_trace(0, 0, &in[i * 32]));
}

extern "C" __global__ void __launch_bounds__(256) copy4(const float* __restrict__ in, float* __restrict__ out) {
  int i = (int)blockIdx.x * 256 + (int)threadIdx.x;
  *tvms_trace(1, 2, (float4*)(out + i * 4)) = *tvms_trace(0, 0, (float4*)(in + i * 4));
}

// Every lane adds n products; lanes >= active skip the loop (their warp still issues it).
extern "C" __global__ void __launch_bounds__(64) fma_loop(const float* __restrict__ a, float* __restrict__ out, int n,
                                                          int active) {
  float acc = 0.0f;
  if ((int)threadIdx.x < active) {
    for (int k = 0; k < n; ++k) {
      tvms_ops(2, 1, 0, 0, 0);
      acc = acc + (*tvms_trace(4, 0, &a[k])) * (*tvms_trace(5, 0, &a[k]));
    }
    tvms_ops(3, 0, 1, 0, 1);
    acc = expf(acc) / 2.0f;
  }
  out[threadIdx.x] = acc;
}

// One warp: a 16x16x16 product from global memory, tiles traced as the printer traces them.
extern "C" __global__ void __launch_bounds__(32) tile_mm(const half* __restrict__ a, const half* __restrict__ b,
                                                        float* __restrict__ c) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major> fb;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::load_matrix_sync(fa, tvms_trace_tile(0, 0, a, 16, 16, 16, 0), 16);
  nvcuda::wmma::load_matrix_sync(fb, tvms_trace_tile(1, 0, b, 16, 16, 16, 0), 16);
  (tvms_mma(2, 16, 16, 16, 0), nvcuda::wmma::mma_sync(fc, fa, fb, fc));
  nvcuda::wmma::store_matrix_sync(tvms_trace_tile(3, 2, c, 16, 16, 16, 0), fc, 16, nvcuda::wmma::mem_row_major);
}
'''

# One warp reads shared memory at word (lane * STRIDE) of an array of T; the array is written
# first (a store of the same pattern).
SHARED_PATTERNS = {  # name: (T, index, wavefronts of one load, ideal)
    "linear": ("float", "lane", 1, 1),
    "two_way": ("float", "lane * 2", 2, 1),
    "thirty_two_way": ("float", "lane * 32", 32, 1),
    "broadcast": ("float", "0", 1, 1),
    "halves": ("half", "lane", 1, 1),
    "float2": ("float2", "lane", 2, 2),
    "float4": ("float4", "lane", 4, 4),
    "float4_two_way": ("float4", "lane * 2", 8, 4),
}


def _shared_source() -> str:
    out = [HEADER]
    for name, (t, index, _, _) in SHARED_PATTERNS.items():
        out.append(f'''
extern "C" __global__ void __launch_bounds__(32) shared_{name}(float* __restrict__ out) {{
  __shared__ __align__(16) {t} tile[2048];
  int lane = (int)threadIdx.x;
  (*tvms_trace(0, 3, &tile[{index}])) = {t}();
  __syncthreads();
  {t} v = (*tvms_trace(1, 1, &tile[{index}]));
  (void)v;
  out[lane] = 0.0f;
}}''')
    return "\n".join(out)


def _aligned(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` at a 256-byte aligned address, as cudaMalloc gives (sectors then
    fall where a GPU's do)."""
    raw = np.empty(values.nbytes + 256, np.uint8)
    start = (-raw.ctypes.data) % 256
    out = raw[start:start + values.nbytes].view(values.dtype)
    out[:] = values
    return out


@pytest.fixture(scope="module")
def global_mod():
    return CountingModule(GLOBAL)


def _launch(mod, kernel, grid, block, *args) -> KernelCounters:
    mod.launch(kernel, grid, block, *args)
    (c,) = mod.counters
    return c


# ----------------------------------------------------------------------------- global memory


def test_coalesced_copy(global_mod):
    src, dst = _aligned(np.arange(1024, dtype=np.float32)), _aligned(np.zeros(1024, np.float32))
    c = _launch(global_mod, "copy", 4, 256, src, dst)
    np.testing.assert_array_equal(dst, src)
    assert (c.global_load_requests, c.global_store_requests) == (32, 32)  # 4 blocks of 8 warps
    assert c.sectors_per_request() == c.ideal_sectors_per_request() == 4
    assert c.sectors_per_request(store=True) == 4
    assert c.global_load_bytes == 4096 and c.global_load_lines == 32
    assert c.dram_bytes == 8192


def test_stride_32_reads_one_sector_per_lane(global_mod):
    src, dst = _aligned(np.zeros(1024 * 32, np.float32)), _aligned(np.zeros(1024, np.float32))
    c = _launch(global_mod, "strided", 4, 256, src, dst)
    assert c.sectors_per_request() == 32 and c.ideal_sectors_per_request() == 4
    assert c.global_load_lines == 32 * 32
    assert c.sectors_per_request(store=True) == 4


def test_float4_copy(global_mod):
    src, dst = _aligned(np.arange(4096, dtype=np.float32)), _aligned(np.zeros(4096, np.float32))
    c = _launch(global_mod, "copy4", 4, 256, src, dst)
    np.testing.assert_array_equal(dst, src)
    assert c.global_load_requests == 32 and c.global_load_bytes == 32 * 512
    assert c.sectors_per_request() == 16 and c.global_load_lines == 32 * 4


# ----------------------------------------------------------------------------- shared memory


@pytest.mark.parametrize("name", list(SHARED_PATTERNS))
def test_shared_memory_bank_conflicts(name):
    _, _, waves, ideal = SHARED_PATTERNS[name]
    mod = _shared_module()
    c = _launch(mod, f"shared_{name}", 1, 32, np.zeros(32, np.float32))
    assert (c.shared_load_requests, c.shared_store_requests) == (1, 1)
    assert (c.shared_load_wavefronts, c.shared_load_ideal) == (waves, ideal)
    assert c.shared_store_wavefronts == waves   # the same pattern written
    assert c.shared_conflicts == 2 * (waves - ideal)


_SHARED = {}


def _shared_module():
    if "mod" not in _SHARED:
        _SHARED["mod"] = CountingModule(_shared_source())
    return _SHARED["mod"]


# ----------------------------------------------------------------------------- operations, tensor cores


def test_fma_loop_counts_threads_and_warp_instructions(global_mod):
    a, out = _aligned(np.ones(100, np.float32)), _aligned(np.zeros(64, np.float32))
    c = _launch(global_mod, "fma_loop", 1, 64, a, out, 100, 64)
    assert (c.fma, c.fma_inst) == (64 * 100, 2 * 100)
    assert (c.fp32_ops, c.special_ops, c.special_inst) == (64, 64, 2)
    # Half of each warp idle: half the thread-level operations, the same warp instructions.
    c = _launch(global_mod, "fma_loop", 1, 64, a, out, 100, 16)
    assert (c.fma, c.fma_inst) == (16 * 100, 100)
    # The loads of a[k]: one per k and warp; the second a[k] of each product reuses the first.
    assert c.global_load_requests == 100 and c.reused_loads == 100 and c.sectors_per_request() == 1


def test_wmma_tile_requests_and_mma(global_mod):
    a, b = _aligned(np.ones(256, np.float16)), _aligned(np.ones(256, np.float16))
    out = _aligned(np.zeros(256, np.float32))
    c = _launch(global_mod, "tile_mm", 1, 32, a, b, out)
    np.testing.assert_array_equal(out, 16)
    assert c.mma == 1 and c.tensor_flops == {"fp16": 2 * 16 ** 3}
    # Each 16x16 half tile: one ldmatrix-like request of 32 rows pieces of 16 bytes (16 sectors);
    # the float accumulator: 1 KB in 8-byte pieces, 4 requests of 256 bytes.
    assert (c.global_load_requests, c.global_load_bytes, c.global_load_sectors) == (2, 1024, 32)
    assert (c.global_store_requests, c.global_store_bytes, c.global_store_sectors) == (4, 1024, 32)


# ----------------------------------------------------------------------------- tvms kernels


def _funcs(src: str) -> dict:
    return prim_funcs_of(tvms.parse(src))


ADD = """
@I.ir_module
class Module:
    @T.prim_func
    def add(A: T.Buffer((65536,), "float32"), B: T.Buffer((65536,), "float32"), C: T.Buffer((65536,), "float32")):
        T.func_attr({"tir.noalias": True})
        for i in range(65536):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]
"""


def test_default_fp32_matmul_schedule_counts():
    n = 256
    (c,) = count(_funcs(square_matmul_src(n, "float32")), "mm")
    assert c.fma == n ** 3 and c.fma_inst == n ** 3 // 32
    assert c.sectors_per_request() <= 1.5 * c.ideal_sectors_per_request() < 8   # coalesced loads
    assert c.shared_load_requests > 0 and c.reused_loads > 0
    assert c.dram_bytes == 3 * n * n * 4


CONV_FP32 = conv2d_src((2, 64, 28, 28), (64, 64, 3, 3))


def test_an_fp32_convolution_reads_its_input_and_weights_coalesced():
    """Matmul's implicit GEMM of an NCHW convolution: the im2col read of the input goes along
    the output pixels (contiguous in a row of the image), the weights along K; each warp's
    request touches few more sectors than its bytes need (TVM's copy order: 24 a request, 6x
    the ideal), and the shared tiles are nearly free of bank conflicts. Results match the CPU.
    (At this size, 49 of Matmul's tiles, the default schedules take `MatmulSplitK`: below.)"""
    from tvmscript import relax
    from tvmscript.compiler import dlight as dl

    funcs = prim_funcs_of(relax.transform.LegalizeOps()(tvms.parse(CONV_FP32)))
    scheduled = scheduled_by(dl.gpu.Matmul(), tvms.IRModule(funcs))
    (c,) = count(scheduled, next(iter(funcs)), blocks=4)
    assert c.sectors_per_request() <= 2 * c.ideal_sectors_per_request(), c.summary()
    assert c.shared_conflicts <= c.shared_wavefronts // 8, c.summary()
    code = build_cuda(scheduled, "cuda", kind="source")
    (result,) = compare_with_cpu(funcs, code=code, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_a_split_k_convolution_reads_its_weights_coalesced_and_no_shared_tiles():
    """The same convolution under the default schedules (`MatmulSplitK`: 32 lanes along K):
    the weights' requests are whole (4 sectors of 32 consecutive floats), the im2col gathers of
    the input cross kernel rows and channels (about 12 sectors), and no shared tile is staged:
    shared memory holds only the warps' sums."""
    from tvmscript import relax

    funcs = prim_funcs_of(relax.transform.LegalizeOps()(tvms.parse(CONV_FP32)))
    (c,) = count(funcs, next(iter(funcs)), blocks=4)
    assert c.block[:2] == (32, 4), c.summary()
    assert c.sectors_per_request() <= 3 * c.ideal_sectors_per_request(), c.summary()
    assert c.shared_load_requests * 8 <= c.global_load_requests, c.summary()
    assert c.fma_inst * 32 == c.fma, c.summary()


def test_a_models_estimate_is_its_kernels_times_their_calls():
    """benchmarks/cuda_models.py's "est ms": every kernel ``main`` launches, on the emulator,
    as many times as ``main`` calls it; a function replayed as a CUDA graph pays each kernel's
    GPU launch, not the VM's."""
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    saved = list(sys.path)      # the benchmark puts the checkout and its own folder first
    sys.path.insert(0, os.path.join(root, "benchmarks"))
    try:
        import cuda_estimates
    finally:
        sys.path[:] = saved
    mod = tvms.relax.transform.LegalizeOps()(tvms.load(os.path.join(root, "samples", "mlp.tvms")))
    ex = tvms.compile(mod, target="cuda")
    calls = cuda_estimates.kernel_calls(ex.mod)
    assert sum(calls.values()) == ex.functions["main"].num_kernel_calls > 1
    row = cuda_estimates.model_estimate(ex, "cuda")
    assert len(row.kernels) >= sum(calls.values()) and all(k.seconds > 0 for k in row.kernels)
    graphed = ex.functions["main"].cuda_graph
    per_launch = [k.seconds if graphed else max(k.seconds, cuda_estimates.VM_LAUNCH_S) for k in row.kernels]
    assert row.seconds == pytest.approx(sum(per_launch))


def test_elementwise_add_issues_float4_accesses():
    (c,) = count(_funcs(ADD), "add")
    assert c.global_load_bytes == 2 * 65536 * 4 and c.global_store_bytes == 65536 * 4
    assert c.global_load_bytes // c.global_load_requests == 32 * 16
    assert c.sectors_per_request() == 16 and c.sectors_per_request(store=True) == 16
    assert c.fp32_ops == 65536


def test_sampled_blocks_scale_exactly_for_a_uniform_kernel():
    funcs = _funcs(ADD)
    (full,) = count(funcs, "add")
    (sampled,) = count(funcs, "add", blocks=5)
    assert sampled.blocks_run == 5 and full.blocks_run == full.blocks_total == sampled.blocks_total
    for name in ("global_load_requests", "global_load_sectors", "global_store_bytes", "fp32_ops", "fp32_inst"):
        assert getattr(sampled, name) == getattr(full, name), name
    assert sample_blocks((10, 1, 1), 3) == [0, 3, 6] and sample_blocks((10, 1, 1), None) is None
    with pytest.raises(ValueError):
        sample_blocks((10, 1, 1), [10])


def test_tensor_core_matmul_mma_count():
    n = 128
    (c,) = count(_funcs(square_matmul_src(n, "float16")), "mm", target="cuda -arch=sm_75")   # MatmulTensorCore: wmma
    assert c.mma == (n // 16) ** 3 and c.tensor_flops == {"fp16": 2 * n ** 3}
    (c,) = count(_funcs(square_matmul_src(n, "float16")), "mm")   # sm_80 and later: mma.sync m16n8k16
    assert c.mma == 2 * (n // 16) ** 3 and c.tensor_flops == {"fp16": 2 * n ** 3}
    assert c.fma == 0 and c.shared_load_requests > 0


def test_hand_written_wmma_kernel_counts_and_static_estimate():
    """benchmarks/cuda.py's wmma kernel (TVM's tensor-core intrinsics written in TVMScript): one
    MMA per 16x16x16 product in the emulator's counts and in the TensorIR's."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "cuda.py"
    spec = importlib.util.spec_from_file_location("benchmarks_cuda", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    n = 128
    funcs = _funcs(bench.tensor_core_matmul_src(n))
    (c,) = count(funcs, "mm")
    assert c.mma == (n // 16) ** 3 and c.tensor_flops == {"fp16": 2 * n ** 3}
    assert c.shared_load_requests == c.mma * 6 // 8     # per warp and k step: 4 A and 2 B tiles for 8 MMAs
    static = static_estimate(funcs["mm"], "h200")
    assert static.times["tensor"] == pytest.approx(2 * n ** 3 / 989.5e12)


def test_trace_mode_keeps_results_and_stays_out_of_gpu_code():
    funcs = {**_funcs(square_matmul_src(64, "float32")), **{"add": _funcs(ADD)["add"]}}
    plain = build_cuda(funcs, kind="source").source
    assert "tvms_trace" not in plain and "tvms_ops" not in plain
    traced = build_cuda(funcs, kind="source", trace=True).source
    assert "tvms_trace" in traced and "tvms_ops" in traced
    results = compare_with_cpu(funcs, trace=True)
    for r in results.values():
        assert r.ok, str(r)
        assert r.counters and r.counters[0].global_load_requests > 0
    with pytest.raises(ValueError, match="kind='source'"):
        build_cuda(funcs, kind="ptx", trace=True)


def test_trace_mode_counts_a_softmax_and_its_reductions():
    from tvmscript import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo([64, 256], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.softmax(x, axis=-1))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    (result,) = compare_with_cpu(prim_funcs_of(mod), trace=True).values()
    assert result.ok, str(result)
    c = result.counters[0]
    assert c.special_ops >= 2 * 64 * 256    # an exp per element in the sum, and again in the output
    assert c.dram_bytes == 2 * 64 * 256 * 4


# ----------------------------------------------------------------------------- the roofline


def test_memory_bound_copy_estimate():
    h200 = gpu_spec("h200")
    nbytes = 2 * 4 << 26   # read and write 2^26 floats
    c = KernelCounters(kernel="copy", blocks_total=1 << 18, global_load_sectors=nbytes // 2 // 32,
                       global_store_sectors=nbytes // 2 // 32, dram_bytes=nbytes)
    e = estimate(c, "h200")
    assert e.bound == "dram"
    assert e.seconds == pytest.approx(nbytes / 4.8e12 + 2e-6)
    assert e.times["l2"] == pytest.approx(nbytes / (h200.l2_gbs * 1e9))
    assert estimate(c, "a100").seconds == pytest.approx(nbytes / 2.039e12 + 2e-6)


def test_a_cp_async_pipeline_overlaps_its_pipelines_in_the_estimate():
    """A kernel with a cp.async software pipeline (the default fp16 matmul on sm_80+) is
    estimated at its busiest SM pipeline; one without (wmma on sm_75) at their sum."""
    funcs = _funcs(square_matmul_src(256, "float16"))
    mma = build_cuda(funcs, "cuda -arch=sm_90", kind="source").source
    wmma = build_cuda(funcs, "cuda -arch=sm_75", kind="source").source
    assert pipelined_kernel(mma, "mm_kernel") and not pipelined_kernel(wmma, "mm_kernel")
    c = KernelCounters(kernel="mm", blocks_total=132, shared_load_wavefronts=10 ** 9, fma_inst=10 ** 9)
    apart, overlapped = estimate(c, "h100", launch=False), estimate(c, "h100", launch=False, pipelined=True)
    assert apart.times["sm"] == pytest.approx(apart.times["load/store"] + apart.times["fp32"])
    assert overlapped.times["sm"] == pytest.approx(max(apart.times["load/store"], apart.times["fp32"]))


def test_compute_bound_fma_estimate():
    warps = 1 << 20
    c = KernelCounters(kernel="fma", blocks_total=132 * 8, fma=warps * 32 * 1000, fma_inst=warps * 1000,
                       dram_bytes=1 << 20)
    e = estimate(c, "h100", launch=False)
    assert e.bound == "fp32"
    # 2 FLOPs per FMA at 67 TFLOP/s; the grid is a whole number of waves.
    assert e.seconds == pytest.approx(2 * warps * 32 * 1000 / 67e12)
    # A grid of one block per SM plus one: the busiest SM runs two blocks.
    c.blocks_total = 133
    assert estimate(c, "h100", launch=False).seconds == pytest.approx(2 * warps * 32 * 1000 / 67e12 * 2 * 132 / 133)


def test_static_estimate_of_asquare_matmul_src():
    (func,) = _funcs(square_matmul_src(1024, "float32")).values()
    e = static_estimate(func, "h200", name="mm")
    assert e.bound == "fp32"
    assert e.seconds == pytest.approx(2 * 1024 ** 3 / 67e12 + 2e-6)
    (half,) = _funcs(square_matmul_src(1024, "float16")).values()
    e = static_estimate(half, "h200")
    assert e.bound == "tensor" and e.times["tensor"] == pytest.approx(2 * 1024 ** 3 / 989.5e12)


def test_gpu_table():
    assert set(GPUS) >= {"h100", "h200", "a100"}
    for g in GPUS.values():
        assert g.sources and g.sms and g.dram_gbs and g.l2_gbs and g.fp16_tflops > g.fp32_tflops
    assert gpu_spec("H100 SXM") is GPUS["h100"] and gpu_for_device("NVIDIA H200") is GPUS["h200"]
    assert gpu_for_device("NVIDIA A100-SXM4-80GB") is GPUS["a100"] and gpu_for_device("Tesla T4") is None
    with pytest.raises(KeyError, match="known are"):
        gpu_spec("v100")


def test_op_counts():
    f32, f16 = (tir.Var("x", d) for d in ("float32", "float16"))
    one = tir.FloatImm("float32", 1.0)
    assert op_counts(tir.Add("float32", f32, tir.Mul("float32", f32, one))) == (1, 0, 0, 0)
    assert op_counts(tir.Div("float32", tir.Call("float32", "tir.exp", [f32]), one)) == (0, 1, 0, 1)
    assert op_counts(tir.Max("float16", f16, tir.Mul("float16", f16, f16))) == (0, 0, 2, 0)
    i = tir.Var("i", "int32")
    assert op_counts(tir.Add("int32", i, tir.Mul("int32", i, i))) == (0, 0, 0, 0)
