"""The CPU emulator of generated CUDA C (tests/support/cuda_emulator.py, tests/support/cuda_emulator_shim.h).

What is checked:

* hand-written CUDA C runs as CUDA would run it: thread and block indices, shared memory
  shared by a block and ordered by __syncthreads, __shfl_xor_sync for every type the code
  generator shuffles (and its ``width``), threads that return before a barrier, dynamic shared
  memory, half and bfloat16 conversions, the math functions the code generator prints;
* the emulator reports what a GPU would get wrong or refuse: a missing barrier (results
  differ), a divergent __syncthreads, a shuffle with lanes missing, a local array indexed past
  its end, a misaligned vector access, a write outside a buffer or past the dynamic shared
  memory, a launch beyond __launch_bounds__, an argument passed as the wrong C type;
* `EmulatedModule.run` on `build_cuda`'s output matches the CPU backend for the seed MLP's
  kernels, a 256x256x256 matmul, a row sum and a softmax, and on a hand-made `CUDACode` with a
  workspace and symbolic dimensions; integer powers are exact and wrap as NumPy's do;
* the hand-written kernels are valid CUDA (NVRTC compiles them, when it is installed).
"""

from __future__ import annotations

import pathlib
import shutil
import time

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.cuda_spec import CUDACode, CUDAFunction, KernelArg, LaunchSpec
from tvmscript.runtime.kernel_abi import ParamSpec

from support import int_power
from support.cuda_emulator import (EmulatedModule, EmulationError, bfloat16_bits, bfloat16_to_float32, compare_with_cpu,
                                   parse_kernels)

if shutil.which("g++") is None:
    pytest.skip("the CUDA emulator needs g++", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(0)

HEADER = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"

# ----------------------------------------------------------------------------- hand-written kernels

BASICS = HEADER + r'''
extern "C" __global__ void __launch_bounds__(128) add2d(const float* __restrict__ a, const float* __restrict__ b,
                                                       float* __restrict__ c, int rows, int cols) {
  int r = (int)blockIdx.y * (int)blockDim.y + (int)threadIdx.y;
  int col = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
  if (r < rows && col < cols) c[r * cols + col] = a[r * cols + col] + b[r * cols + col];
}

// Each block reverses its 256 elements through shared memory.
extern "C" __global__ void __launch_bounds__(256) reverse_synced(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ __align__(16) float tile[256];
  int t = (int)threadIdx.x, base = (int)blockIdx.x * 256;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[255 - t];
}

// The same without the barrier: a race on a GPU.
extern "C" __global__ void __launch_bounds__(256) reverse_racy(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ __align__(16) float tile[256];
  int t = (int)threadIdx.x, base = (int)blockIdx.x * 256;
  tile[t] = in[base + t];
  out[base + t] = tile[255 - t];
}

// The same, with a __syncwarp between the write and the read: it orders a warp's own lanes,
// not the other warps, so it is still a race on a GPU.
extern "C" __global__ void __launch_bounds__(256) reverse_warp_synced(const float* __restrict__ in,
                                                                     float* __restrict__ out) {
  __shared__ __align__(16) float tile[256];
  int t = (int)threadIdx.x, base = (int)blockIdx.x * 256;
  tile[t] = in[base + t];
  __syncwarp();
  out[base + t] = tile[255 - t];
}

// A block sum over 1024 threads: warp shuffles, then shared memory between the warps.
extern "C" __global__ void __launch_bounds__(1024) block_sum(const float* __restrict__ a, float* __restrict__ out, int n) {
  __shared__ float partial[32];
  float v = 0.0f;
  for (int i = (int)threadIdx.x; i < n; i += 1024) v += a[(int)blockIdx.x * n + i];
  for (int off = 16; off >= 1; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off, 32);
  int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = partial[lane];
  for (int off = 16; off >= 1; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off, 32);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Threads past the data return before the barrier (allowed since sm_70: exited threads do not count).
extern "C" __global__ void __launch_bounds__(128) early_exit(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[128];
  int t = (int)threadIdx.x;
  if (t >= n) return;
  tile[t] = in[t] * 2.0f;
  __syncthreads();
  out[t] = tile[n - 1 - t];
}

// Reads shared memory that no thread of the block wrote: what it reads is not defined.
extern "C" __global__ void __launch_bounds__(64) stale_shared(float* __restrict__ out) {
  __shared__ float tile[128];
  tile[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x + 64];
}

extern "C" __global__ void __launch_bounds__(256) dyn_smem(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char tvms_dynamic_smem[];
  float* a = (float*)(tvms_dynamic_smem + 0);
  float* b = (float*)(tvms_dynamic_smem + 1024);
  int t = (int)threadIdx.x;
  a[t] = in[t];
  b[t] = in[t] * 10.0f;
  __syncthreads();
  out[t] = a[(t + 1) % 256] + b[(t + 255) % 256];
}
'''

SHUFFLES = HEADER + r'''
extern "C" __global__ void __launch_bounds__(64) sum_f32(const float* __restrict__ in, float* __restrict__ out) {
  float v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off, 32);
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(64) sum_f64(const double* __restrict__ in, double* __restrict__ out) {
  double v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off, 32);
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(64) sum_i32(const int* __restrict__ in, int* __restrict__ out) {
  int v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off, 32);
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(64) sum_u32(const unsigned int* __restrict__ in, unsigned int* __restrict__ out) {
  unsigned int v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off, 32);
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(64) sum_i64(const long long* __restrict__ in, long long* __restrict__ out) {
  long long v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off, 32);
  out[threadIdx.x] = v;
}


extern "C" __global__ void __launch_bounds__(32) max_f16(const half* __restrict__ in, half* __restrict__ out) {
  half v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = __hmax(v, __shfl_xor_sync(0xffffffffu, v, off, 32));
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(32) max_bf16(const nv_bfloat16* __restrict__ in, nv_bfloat16* __restrict__ out) {
  nv_bfloat16 v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2) v = __hmax(v, __shfl_xor_sync(0xffffffffu, v, off, 32));
  out[threadIdx.x] = v;
}

// Narrow integers travel as int, as codegen_cuda prints them.
extern "C" __global__ void __launch_bounds__(32) max_i8(const signed char* __restrict__ in, signed char* __restrict__ out) {
  signed char v = in[threadIdx.x];
  for (int off = 16; off >= 1; off /= 2)
    v = ((signed char)max((int)v, (int)((signed char)__shfl_xor_sync(0xffffffffu, (int)v, off, 32))));
  out[threadIdx.x] = v;
}

// A 16-thread block: the mask names only the lanes that exist.
extern "C" __global__ void __launch_bounds__(16) sum16(const float* __restrict__ in, float* __restrict__ out) {
  float v = in[threadIdx.x];
  for (int off = 8; off >= 1; off /= 2) v = v + __shfl_xor_sync(0xffffu, v, off, 32);
  out[threadIdx.x] = v;
}

// __shfl_sync, __shfl_up_sync, __shfl_down_sync and __syncwarp, which codegen_cuda may use one day.
extern "C" __global__ void __launch_bounds__(64) other_shuffles(const int* __restrict__ in, int* __restrict__ idx,
                                                               int* __restrict__ up, int* __restrict__ down) {
  int v = in[threadIdx.x];
  idx[threadIdx.x] = __shfl_sync(0xffffffffu, v, 5, 16);
  __syncwarp();
  up[threadIdx.x] = __shfl_up_sync(0xffffffffu, v, 3);
  down[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 2, 8);
}

// width 8: a lane reading a later group of 8 keeps its own value.
extern "C" __global__ void __launch_bounds__(32) xor_width8(const int* __restrict__ in, int* __restrict__ out, int lane_mask) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], lane_mask, 8);
}
'''

MISTAKES = HEADER + r'''
extern "C" __global__ void __launch_bounds__(64) divergent_barrier(float* __restrict__ out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

extern "C" __global__ void __launch_bounds__(32) partial_shuffle(float* __restrict__ out) {
  float v = (float)threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1, 32);
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(32) shuffle_vs_barrier(float* __restrict__ out) {
  float v = (float)threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1, 32);
  else __syncthreads();
  out[threadIdx.x] = v;
}

extern "C" __global__ void __launch_bounds__(32) local_overflow(float* __restrict__ out, int k) {
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = (float)i;
  out[threadIdx.x] = acc[k];
}

extern "C" __global__ void __launch_bounds__(32) misaligned_vector(const float* __restrict__ in, float* __restrict__ out) {
  float4 v = *(float4*)(in + 1 + (int)threadIdx.x * 4);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

extern "C" __global__ void __launch_bounds__(32) dyn_overflow(float* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char tvms_dynamic_smem[];
  float* a = (float*)tvms_dynamic_smem;
  a[threadIdx.x] = 1.0f;  // launched with 64 bytes: threads 16.. write past them
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x % 16];
}

extern "C" __global__ void __launch_bounds__(32) one_past(float* __restrict__ a, long long n) {
  if ((long long)threadIdx.x <= n) a[threadIdx.x] = 7.0f;  // <= : writes a[n]
}
'''

CONVERSIONS = HEADER + r'''
extern "C" __global__ void __launch_bounds__(64) to_half(const float* __restrict__ in, half* __restrict__ h,
                                                        nv_bfloat16* __restrict__ b, float* __restrict__ back) {
  int t = (int)threadIdx.x;
  h[t] = __float2half_rn(in[t]);
  b[t] = __float2bfloat16_rn(in[t]);
  back[t] = __half2float(h[t]) + __bfloat162float(b[t]);
}

extern "C" __global__ void __launch_bounds__(64) half_vectors(const half* __restrict__ a, half* __restrict__ out) {
  half2 v = *(half2*)(a + (int)threadIdx.x * 2);
  half2 r;
  r.x = __float2half_rn((__half2float(v.x) * 2.000000000e+00f));
  r.y = __float2half_rn((__half2float(v.y) + 1.000000000e+00f));
  *(half2*)(out + (int)threadIdx.x * 2) = r;
}

extern "C" __global__ void __launch_bounds__(1) math(float* __restrict__ f, double* __restrict__ d, int* __restrict__ i,
                                                    long long* __restrict__ q) {
  float x = f[0];
  f[1] = expf(x); f[2] = exp2f(x); f[3] = exp10f(x); f[4] = logf(x); f[5] = log2f(x); f[6] = log10f(x);
  f[7] = log1pf(x); f[8] = sqrtf(x); f[9] = fabsf(-x); f[10] = floorf(x); f[11] = ceilf(x); f[12] = rintf(2.5f);
  f[13] = nearbyintf(3.5f); f[14] = truncf(-x); f[15] = sinf(x); f[16] = cosf(x); f[17] = tanf(x);
  f[18] = tanhf(x); f[19] = sinhf(x); f[20] = coshf(x); f[21] = asinf(0.5f); f[22] = acosf(0.5f); f[23] = atanf(x);
  f[24] = asinhf(x); f[25] = acoshf(1.0f + x); f[26] = atanhf(0.5f); f[27] = erff(x); f[28] = powf(x, 3.0f);
  f[29] = fmodf(7.0f, x); f[30] = atan2f(1.0f, x); f[31] = hypotf(3.0f, 4.0f); f[32] = copysignf(2.0f, -1.0f);
  f[33] = nextafterf(1.0f, 2.0f); f[34] = max(x, 3.0f); f[35] = min(x, 3.0f);
  f[36] = max(__int_as_float(0x7fc00000), 1.0f);  // CUDA's max ignores a NaN
  f[37] = __int_as_float(__float_as_int(x)); f[38] = (isnan(__int_as_float(0x7fc00000)) ? 1.0f : 0.0f);
  f[39] = (isinf((-__int_as_float(0x7f800000))) ? 1.0f : 0.0f); f[40] = (isfinite(x) ? 1.0f : 0.0f);
  d[1] = exp(d[0]); d[2] = __longlong_as_double(__double_as_longlong(d[0])); d[3] = max(d[0], 9.0);
  d[4] = exp10(d[0]);
  i[0] = __popc(0xf0f0u); i[1] = __clz(1); i[2] = __clz(0); i[3] = max(3, -4); i[4] = min(3, -4);
  i[5] = tvms_floordiv<int>(-7, 2); i[6] = tvms_floormod<int>(-7, 2); i[7] = (int)max(7u, 9u);
  q[0] = __popcll(0xffffffffffULL); q[1] = __clzll(1LL); q[2] = max(5LL, -6LL); q[3] = min(5LL, -6LL);
}
'''

# tvms_floordiv / tvms_floormod: codegen_cuda's own prelude (its #includes are stripped by the emulator)
from tvmscript.compiler.codegen_cuda.source import PRELUDE  # noqa: E402
CONVERSIONS = CONVERSIONS.replace(HEADER, HEADER + PRELUDE, 1)

ALL_SOURCES = {"basics": BASICS, "shuffles": SHUFFLES, "mistakes": MISTAKES, "conversions": CONVERSIONS}


@pytest.fixture(scope="module")
def basics():
    return EmulatedModule(BASICS)


@pytest.fixture(scope="module")
def shuffles():
    return EmulatedModule(SHUFFLES)


@pytest.fixture(scope="module")
def mistakes():
    return EmulatedModule(MISTAKES)


@pytest.fixture(scope="module")
def conversions():
    return EmulatedModule(CONVERSIONS)


def test_parse_kernels():
    ks = parse_kernels(BASICS)
    assert set(ks) == {"add2d", "reverse_synced", "reverse_racy", "reverse_warp_synced", "block_sum", "early_exit",
                       "stale_shared", "dyn_smem"}
    assert ks["add2d"].params == [("const float*", "a"), ("const float*", "b"), ("float*", "c"), ("int", "rows"),
                                  ("int", "cols")]
    assert ks["add2d"].launch_bounds == 128
    assert ks["reverse_synced"].static_shared_bytes == 1024
    assert ks["block_sum"].static_shared_bytes == 128


def test_indices_2d_grid(basics):
    a = RNG.standard_normal((37, 45)).astype(np.float32)
    b = RNG.standard_normal((37, 45)).astype(np.float32)
    c = np.zeros_like(a)
    basics.launch("add2d", (3, 5), (16, 8), a, b, c, 37, 45)
    np.testing.assert_array_equal(c, a + b)


def test_syncthreads_orders_shared_memory(basics):
    x = RNG.standard_normal(256 * 6).astype(np.float32)
    out = np.zeros_like(x)
    basics.launch("reverse_synced", 6, 256, x, out)
    np.testing.assert_array_equal(out, x.reshape(6, 256)[:, ::-1].ravel())


def test_a_missing_barrier_changes_the_result(basics):
    x = RNG.standard_normal(256 * 2).astype(np.float32)
    out = np.zeros_like(x)
    basics.launch("reverse_racy", 2, 256, x, out)
    # block 0 runs its threads first to last: the upper half reads slots nothing wrote yet
    # (0xff bytes: NaN); block 1 runs them last to first: the lower half does.
    assert np.isnan(out[:128]).all() and np.isnan(out[256 + 128:]).all()
    np.testing.assert_array_equal(out[128:256], x[:256][::-1][128:])


def test_a_warp_barrier_does_not_order_other_warps(basics):
    """Each warp runs ahead through its own __syncwarp before the next warp starts, as warps
    drift apart on a GPU: the reads of slots other warps write find them unwritten."""
    x = RNG.standard_normal(256).astype(np.float32)
    out = np.zeros_like(x)
    basics.launch("reverse_warp_synced", 1, 256, x, out)
    # Warp w reads the slots warp 7 - w writes: warps 0..3 run before their writers.
    assert np.isnan(out[:128]).all()
    np.testing.assert_array_equal(out[128:], x[::-1][128:])


def test_block_sum_1024_threads(basics):
    a = RNG.standard_normal((300, 2000)).astype(np.float32)
    out = np.zeros(300, np.float32)
    t0 = time.perf_counter()
    basics.launch("block_sum", 300, 1024, a, out, 2000)
    elapsed = time.perf_counter() - t0
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert elapsed < 30, f"300 blocks of 1024 threads took {elapsed:.1f} s"


def test_threads_that_return_do_not_block_a_barrier(basics):
    x = RNG.standard_normal(128).astype(np.float32)
    out = np.full(128, -1.0, np.float32)
    basics.launch("early_exit", 1, 128, x, out, 100)
    np.testing.assert_array_equal(out[:100], (x[:100] * 2)[::-1])
    assert (out[100:] == -1).all()


def test_unwritten_shared_memory_reads_as_nan(basics):
    out = np.zeros(64, np.float32)
    basics.launch("stale_shared", 1, 64, out)
    assert np.isnan(out).all()


def test_dynamic_shared_memory(basics):
    x = RNG.standard_normal(256).astype(np.float32)
    out = np.zeros_like(x)
    basics.launch("dyn_smem", 1, 256, x, out, dyn_shared_bytes=2048)
    np.testing.assert_allclose(out, np.roll(x, -1) + 10 * np.roll(x, 1), rtol=1e-6)


@pytest.mark.parametrize("kernel,dtype", [("sum_f32", np.float32), ("sum_f64", np.float64), ("sum_i32", np.int32),
                                          ("sum_u32", np.uint32), ("sum_i64", np.int64)])
def test_shfl_xor_butterfly(shuffles, kernel, dtype):
    x = RNG.integers(0, 1000, 64).astype(dtype)
    out = np.zeros_like(x)
    shuffles.launch(kernel, 1, 64, x, out)
    want = np.repeat(x.reshape(2, 32).sum(axis=1), 32).astype(dtype)
    np.testing.assert_array_equal(out, want)


def test_shfl_xor_half_and_bfloat16(shuffles):
    x = RNG.standard_normal(32).astype(np.float16)
    out = np.zeros_like(x)
    shuffles.launch("max_f16", 1, 32, x, out)
    assert (out == x.max()).all()
    xb = bfloat16_bits(RNG.standard_normal(32).astype(np.float32))
    outb = np.zeros_like(xb)
    shuffles.launch("max_bf16", 1, 32, xb, outb)
    assert (bfloat16_to_float32(outb) == bfloat16_to_float32(xb).max()).all()


def test_shfl_xor_narrow_ints(shuffles):
    x = RNG.integers(-128, 128, 32).astype(np.int8)
    out = np.zeros_like(x)
    shuffles.launch("max_i8", 1, 32, x, out)
    assert (out == x.max()).all()


def test_shfl_xor_partial_warp_mask(shuffles):
    x = RNG.standard_normal(16).astype(np.float32)
    out = np.zeros_like(x)
    shuffles.launch("sum16", 1, 16, x, out)
    np.testing.assert_allclose(out, np.full(16, x.sum()), rtol=1e-5)


@pytest.mark.parametrize("lane_mask", [1, 3, 4, 8, 16])
def test_shfl_xor_width(shuffles, lane_mask):
    x = np.arange(32, dtype=np.int32) * 10
    out = np.zeros_like(x)
    shuffles.launch("xor_width8", 1, 32, x, out, lane_mask)
    lanes = np.arange(32)
    src = lanes ^ lane_mask
    want = np.where((src // 8) > (lanes // 8), x, x[src % 32])
    np.testing.assert_array_equal(out, want)


def test_other_shuffles(shuffles):
    x = np.arange(64, dtype=np.int32) * 10
    idx, up, down = (np.zeros_like(x) for _ in range(3))
    shuffles.launch("other_shuffles", 1, 64, x, idx, up, down)
    lanes = np.arange(64)
    np.testing.assert_array_equal(idx, x[(lanes // 16) * 16 + 5])
    np.testing.assert_array_equal(up, np.where(lanes % 32 >= 3, x[lanes - 3], x))
    np.testing.assert_array_equal(down, np.where(lanes % 8 + 2 < 8, x[np.minimum(lanes + 2, 63)], x))


def _raises(mod, kernel, grid, block, *args, match, **kw):
    with pytest.raises(EmulationError, match=match) as info:
        mod.launch(kernel, grid, block, *args, **kw)
    return str(info.value)


def test_divergent_syncthreads(mistakes):
    msg = _raises(mistakes, "divergent_barrier", 1, 64, np.zeros(64, np.float32), match="divergent __syncthreads")
    assert "__syncthreads();" in msg  # the source lines are quoted


def test_shuffle_with_lanes_missing(mistakes):
    _raises(mistakes, "partial_shuffle", 1, 32, np.zeros(32, np.float32), match="named by the mask, has returned")


def test_shuffle_while_others_wait_at_a_barrier(mistakes):
    _raises(mistakes, "shuffle_vs_barrier", 1, 32, np.zeros(32, np.float32),
            match="lane 16, named by the mask, waits at __syncthreads")


def test_local_array_index_out_of_bounds(mistakes):
    out = np.zeros(32, np.float32)
    mistakes.launch("local_overflow", 1, 32, out, 3)
    assert (out == 3).all()
    _raises(mistakes, "local_overflow", 1, 32, out, 4, match="index 4 is out of bounds")


def test_misaligned_vector_access(mistakes):
    _raises(mistakes, "misaligned_vector", 1, 32, np.zeros(200, np.float32), np.zeros(32, np.float32),
            match="not aligned to 16 bytes")


WMMA = HEADER + r'''#include <mma.h>
// One warp: C (16x16 float) = A (16x16 half, at a + offset) @ B.
extern "C" __global__ void __launch_bounds__(32) tile_mm(const half* __restrict__ a, const half* __restrict__ b,
                                                        float* __restrict__ c, int offset, int ldm) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> fa;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> fb;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  nvcuda::wmma::fill_fragment(fc, 0.0f);
  nvcuda::wmma::load_matrix_sync(fa, a + offset, ldm);
  nvcuda::wmma::load_matrix_sync(fb, b, 16);
  nvcuda::wmma::mma_sync(fc, fa, fb, fc);
  nvcuda::wmma::store_matrix_sync(c, fc, 16, nvcuda::wmma::mem_row_major);
}

// Only half of the warp takes part.
extern "C" __global__ void __launch_bounds__(32) half_warp_fill(float* __restrict__ c) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
  if (threadIdx.x < 16) {
    nvcuda::wmma::fill_fragment(fc, 1.0f);
    nvcuda::wmma::store_matrix_sync(c, fc, 16, nvcuda::wmma::mem_row_major);
  }
}
'''


def _aligned(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` at a 256-byte aligned address, as cudaMalloc gives."""
    raw = np.empty(values.nbytes + 256, np.uint8)
    start = (-raw.ctypes.data) % 256
    out = raw[start:start + values.nbytes].view(values.dtype)
    out[:] = values
    return out


def test_wmma_tiles():
    mod = EmulatedModule(WMMA)
    rng = np.random.default_rng(3)
    a = _aligned(rng.standard_normal(16 * 24).astype(np.float16))  # rows of 24, the tile in the first 16 columns
    b = _aligned(rng.standard_normal(256).astype(np.float16))      # read column-major: B[k, n] = b[n * 16 + k]
    c = _aligned(np.zeros(256, np.float32))
    mod.launch("tile_mm", 1, 32, a, b, c, 0, 24)
    ref = a.reshape(16, 24)[:, :16].astype(np.float32) @ b.reshape(16, 16).T.astype(np.float32)
    np.testing.assert_allclose(c.reshape(16, 16), ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(EmulationError, match=r"wmma::load_matrix_sync at address .* which is not 32-byte aligned"):
        mod.launch("tile_mm", 1, 32, a, b, c, 8, 24)        # 16 bytes past a 32-byte boundary
    with pytest.raises(EmulationError, match="leading dimension of 20 elements, not a multiple of 16 bytes"):
        mod.launch("tile_mm", 1, 32, a, b, c, 0, 20)
    with pytest.raises(EmulationError, match=r"warp shuffle \(0xffffffff, ...\) in warp 0 .* lane 16, named by the "
                                             r"mask, has returned"):
        mod.launch("half_warp_fill", 1, 32, c)


def test_write_past_dynamic_shared_memory(mistakes):
    _raises(mistakes, "dyn_overflow", 1, 32, np.zeros(32, np.float32), match="past the 64 bytes",
            dyn_shared_bytes=64)


def test_launches_a_gpu_refuses(basics):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(EmulationError, match="more than __launch_bounds__"):
        basics.launch("add2d", 1, (16, 16), a, a, a, 4, 4)
    with pytest.raises(EmulationError, match="1024 threads"):
        basics.launch("block_sum", 1, 2048, a, a, 4)
    with pytest.raises(EmulationError, match="shared memory"):
        basics.launch("dyn_smem", 1, 256, a, a, dyn_shared_bytes=240 * 1024)


def test_half_and_bfloat16_conversions(conversions):
    x = np.concatenate([RNG.standard_normal(56) * 100, [0.0, -0.0, 1e-8, 65504.0, 70000.0, 1.00390625, 3.0e38, -2.5]])
    x = x.astype(np.float32)
    h = np.zeros(64, np.float16)
    b = np.zeros(64, np.uint16)
    back = np.zeros(64, np.float32)
    conversions.launch("to_half", 1, 64, x, h, b, back)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h, x.astype(np.float16))
    np.testing.assert_array_equal(b, bfloat16_bits(x))
    np.testing.assert_array_equal(back, h.astype(np.float32) + bfloat16_to_float32(b))


def test_half2_vector_access(conversions):
    a = RNG.standard_normal(128).astype(np.float16)
    out = np.zeros_like(a)
    conversions.launch("half_vectors", 1, 64, a, out)
    want = a.copy()
    want[0::2] = (a[0::2].astype(np.float32) * 2).astype(np.float16)
    want[1::2] = (a[1::2].astype(np.float32) + 1).astype(np.float16)
    np.testing.assert_array_equal(out, want)


def test_math_functions(conversions):
    f = np.zeros(41, np.float32)
    f[0] = 0.75
    d = np.zeros(5, np.float64)
    d[0] = 1.25
    i = np.zeros(8, np.int32)
    q = np.zeros(4, np.int64)
    conversions.launch("math", 1, 1, f, d, i, q)
    x = np.float32(0.75)
    want = [np.exp(x), np.exp2(x), 10 ** x, np.log(x), np.log2(x), np.log10(x), np.log1p(x), np.sqrt(x), x,
            np.floor(x), np.ceil(x), 2.0, 4.0, -0.0, np.sin(x), np.cos(x), np.tan(x), np.tanh(x), np.sinh(x),
            np.cosh(x), np.arcsin(0.5), np.arccos(0.5), np.arctan(x), np.arcsinh(x), np.arccosh(1 + x),
            np.arctanh(0.5), 0.7111556, x ** 3, np.fmod(7, x), np.arctan2(1, x), 5.0, -2.0,
            np.nextafter(np.float32(1), np.float32(2)), 3.0, x, 1.0, x, 1.0, 1.0, 1.0]
    np.testing.assert_allclose(f[1:], np.array(want, np.float32), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(d[1:], [np.exp(1.25), 1.25, 9.0, 10 ** 1.25], rtol=1e-14)
    assert i.tolist() == [8, 31, 32, 3, -4, -4, 1, 9]
    assert q.tolist() == [40, 63, 5, -6]


def test_hand_written_kernels_are_valid_cuda():
    """What the emulator runs must be CUDA, or its verdicts mean nothing."""
    nvrtc = pytest.importorskip("tvmscript.compiler.nvrtc")
    try:
        nvrtc.nvrtc_version()
    except Exception as err:  # noqa: BLE001 - no NVRTC wheel here
        pytest.skip(f"NVRTC is not available: {err}")
    for name, src in ALL_SOURCES.items():
        res = nvrtc.compile_cuda(src, "sm_90", kind="ptx")
        assert res.binary, name


# ----------------------------------------------------------------------------- CUDACode and prim_funcs


def _one_past_code():
    """A CUDACode by hand: one buffer with a symbolic length, a kernel that writes a[n]."""
    fn = CUDAFunction("one_past", [ParamSpec("buffer", "a", "float32", ["n"], written=True)], ["n"], [],
                      [LaunchSpec("one_past", ("1", "1", "1"), ("32", "1", "1"), "0",
                                  [KernelArg("buffer", "P", 0), KernelArg("sym", "q", name="n")])])
    return CUDACode(MISTAKES, {"one_past": fn}, "sm_90")


def test_run_reports_a_write_out_of_bounds():
    mod = EmulatedModule(_one_past_code())
    a = np.zeros(8, np.float32)
    with pytest.raises(EmulationError, match=r"buffer 'a' \(32 bytes\): 4 byte\(s\) written outside it.*element 8"):
        mod.run("one_past", a)


def test_run_checks_argument_types():
    code = _one_past_code()
    code.functions["one_past"].launches[0].args[1] = KernelArg("sym", "i", name="n")
    mod = EmulatedModule(code)
    with pytest.raises(EmulationError, match="passes parameter 'n' \\(long long\\) as 'i'"):
        mod.run("one_past", np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="expects dtype float32"):
        mod.run("one_past", np.zeros(8, np.float64))


WORKSPACE = r'''
extern "C" __global__ void __launch_bounds__(256) stage1(const float* __restrict__ x, float* __restrict__ ws, long long n) {
  long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i < n) ws[i] = x[i] * x[i];
}
extern "C" __global__ void __launch_bounds__(256) stage2(const float* __restrict__ ws, float* __restrict__ y, float alpha,
                                                        long long n) {
  long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i < n) y[i] = ws[i] * alpha;
}
'''


def test_run_with_workspace_scalars_and_symbols():
    fn = CUDAFunction(
        "f", [ParamSpec("buffer", "x", "float32", ["n"]), ParamSpec("buffer", "y", "float32", ["n"], written=True),
              ParamSpec("scalar", "alpha", "float32")], ["n"], ["(n * 4)"],
        [LaunchSpec("stage1", ("((n + 255) // 256)", "1", "1"), ("256", "1", "1"), "0",
                    [KernelArg("buffer", "P", 0), KernelArg("workspace", "P", 0), KernelArg("sym", "q", name="n")]),
         LaunchSpec("stage2", ("((n + 255) // 256)", "1", "1"), ("256", "1", "1"), "0",
                    [KernelArg("workspace", "P", 0), KernelArg("buffer", "P", 1), KernelArg("scalar", "f", 0),
                     KernelArg("sym", "q", name="n")])])
    mod = EmulatedModule(CUDACode(WORKSPACE, {"f": fn}, "sm_90"))
    for n in (1, 300, 1000):
        x = RNG.standard_normal(n).astype(np.float32)
        y = np.zeros_like(x)
        mod.run("f", x, y, 0.5)
        np.testing.assert_allclose(y, x * x * 0.5, rtol=1e-6)
    mod.run("f", np.zeros(0, np.float32), np.zeros(0, np.float32), 1.0)  # empty: no launch


def _prim_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def _assert_all_ok(results: dict) -> None:
    bad = [str(r) for r in results.values() if not r.ok]
    assert not bad, "\n".join(bad)


def test_mlp_kernels_match_the_cpu():
    mod = relax.transform.LegalizeOps()(tvms.parse((ROOT / "samples" / "mlp.tvms").read_text()))
    _assert_all_ok(compare_with_cpu(_prim_funcs(mod)))


KERNELS = '''
@I.ir_module
class Module:
    @T.prim_func
    def matmul(A: T.Buffer((256, 256), "float32"), B: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 256), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(256, 256, 256):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def row_sum(A: T.Buffer((128, 1000), "float32"), B: T.Buffer((128,), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, k in T.grid(128, 1000):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
'''


def test_matmul_and_row_sum_match_the_cpu():
    _assert_all_ok(compare_with_cpu(_prim_funcs(tvms.parse(KERNELS))))


@pytest.mark.parametrize("dtype", int_power.DTYPES)
def test_integer_power_is_exact_and_wraps(dtype):
    """By repeated squaring (an H200's double pow(3.0, 1.0) truncated to 2), as the CPU's."""
    from tvmscript.compiler.build_cuda import build_cuda

    a, b = int_power.operands(dtype)
    code = build_cuda({"ipow": tvms.parse(int_power.source(dtype, len(a)))}, kind="source")
    c = np.zeros_like(a)
    EmulatedModule(code).run("ipow", a, b, c)
    np.testing.assert_array_equal(c, int_power.reference(a, b))


def _one_op(op_fn, shape, **attrs):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(list(shape), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op_fn(x, **attrs))
        bb.emit_func_output(out)
    return _prim_funcs(relax.transform.LegalizeOps()(bb.get()))


def test_softmax_matches_the_cpu():
    _assert_all_ok(compare_with_cpu(_one_op(relax.op.nn.softmax, (64, 1000))))


# Found by the emulator: the write-back of a cross-thread reduction into a thread's *local*
# buffer must happen in every thread, since its consumer (mean's division, a fused bias add)
# runs in every thread of the block; and every lane must hold the total after a multi-warp
# all-reduce.
@pytest.mark.parametrize("case", ["mean", "fused_mlp"])
def test_reduction_epilogues_match_the_cpu(case):
    if case == "mean":
        funcs = _one_op(relax.op.mean, (64, 1000), axis=[1])
    else:
        mod = relax.get_pipeline("zero")(tvms.parse((ROOT / "samples" / "mlp.tvms").read_text()))
        funcs = _prim_funcs(mod)
    _assert_all_ok(compare_with_cpu(funcs))


# Found by the take_backward and get_valid_counts kernels: an int32 value widened to int64
# (`T.Cast("int64", valid[vb, vk])`) in a narrowed index comparison kept its own indices' int64
# loop variables, which narrowing had retyped: the kernel used a variable nothing defined.
WIDENED_LOAD = '''
@T.prim_func
def count_below(valid: T.Buffer((T.int64(4), T.int64(16)), "int32"), out: T.Buffer((T.int64(4), T.int64(16)), "int32")):
    T.func_attr({"tir.noalias": True})
    for b, j, k in T.grid(T.int64(4), T.int64(16), T.int64(16)):
        with T.block("out"):
            vb, vj, vk = T.axis.remap("SSR", [b, j, k])
            with T.init():
                out[vb, vj] = 0
            out[vb, vj] = out[vb, vj] + T.if_then_else(T.Cast("int64", valid[vb, vk]) < vj, 1, 0)
'''


def test_a_widened_load_in_a_narrowed_comparison_matches_the_cpu():
    func = tvms.parse(WIDENED_LOAD)
    _assert_all_ok(compare_with_cpu({"count_below": func}, int_range=(0, 16)))


# ----------------------------------------------------------------------------- the emulated GPU driver


def _spill_kernel(monkeypatch, threads: int):
    """A kernel writing ``out[threadIdx.x]`` for ``threads`` threads, loaded through the
    runtime on the emulated GPU (`gpu_drivers.EmulatedDriver`)."""
    from support.gpu_drivers import EmulatedDriver, install_driver
    from tvmscript.compiler import nvrtc
    from tvmscript.compiler.cuda_spec import CUDACode, CUDAFunction, KernelArg, LaunchSpec
    from tvmscript.runtime import cuda_kernels
    from tvmscript.runtime.kernel_abi import ParamSpec

    driver = EmulatedDriver()
    install_driver(monkeypatch, driver)
    src = ('extern "C" __global__ void __launch_bounds__(1024) spill(float* __restrict__ out) {\n'
           '  out[threadIdx.x] = 1.0f;\n}\n')
    launch = LaunchSpec("spill", ("1", "1", "1"), (str(threads), "1", "1"), "0", [KernelArg("buffer", "P", index=0)])
    func = CUDAFunction("spill", [ParamSpec("buffer", "out", "float32", ["n"], written=True)], ["n"], [], [launch])
    code = CUDACode(src, {"spill": func}, "sm_90", cubin=nvrtc.compile_cuda(src, "sm_90").binary)
    driver.sources[code.cubin] = src       # built by hand, not by build_cuda
    return cuda_kernels.load_module(code, tvms.cuda()).kernels["spill"]


def test_the_emulated_gpu_runs_the_kernels_the_runtime_launches(monkeypatch):
    kernel = _spill_kernel(monkeypatch, 16)
    x = tvms.nd.array(np.zeros(16, "float32"), tvms.cuda())
    kernel(x)
    assert x.numpy().tolist() == [1.0] * 16


def test_the_emulated_gpu_reports_a_write_outside_device_memory(monkeypatch):
    kernel = _spill_kernel(monkeypatch, 1024)     # 4096 bytes into an allocation of 512
    x = tvms.nd.array(np.zeros(16, "float32"), tvms.cuda())
    with pytest.raises(RuntimeError, match=r"spill: launching a kernel on cuda:0 failed: kernel 'spill' wrote outside "
                                           r"device memory: the 512-byte allocation"):
        kernel(x)


def test_the_emulated_gpu_refuses_an_image_it_has_no_source_for(monkeypatch):
    from support.gpu_drivers import EmulatedDriver, install_driver
    from tvmscript.compiler.cuda_spec import CUDACode
    from tvmscript.runtime import cuda_kernels

    install_driver(monkeypatch, EmulatedDriver())
    code = CUDACode("", {}, "sm_90", cubin=b"\x7fELF compiled elsewhere")
    with pytest.raises(RuntimeError, match="no CUDA source for this image"):
        cuda_kernels.load_module(code, tvms.cuda())
