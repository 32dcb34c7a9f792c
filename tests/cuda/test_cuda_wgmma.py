"""Hopper's warpgroup MMA (dlight.gpu.matmul_wgmma, compiler.wgmma_tiles): fp16 and bf16 products
from 128-byte-swizzled shared tiles, held to its design without a GPU: the CUDA C and PTX it
prints (sm_90a), its results in the emulator against the CPU (the emulator reads the operands
through the descriptors as the PTX ISA lays out a swizzled tile), ptxas's report (no spills, no
wgmma serialized), and where the tuner may pick it (choice kind ``instructions``). On an H100 or
H200 (``-m cuda``) the same kernels run against NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler import dlight as dl
from tvmscript.compiler import nvrtc
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.dlight.gpu.matmul_wgmma import WgmmaTiling
from tvmscript.compiler.kernel_resources import resources_of
from tvmscript.compiler.schedule_choices import INSTRUCTIONS, choice_points, with_choices
from support.cuda_check import (
    batch_matmul_src, matmul_src, nhwc_conv2d_src, prim_funcs_of, scheduled_by, square_matmul_src,
)
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"


def wgmma_funcs(src: str, tiling=None, target: str = SM90, in_flight: int = 1) -> dict:
    """The prim_funcs of ``src`` scheduled by `MatmulTensorCore` with wgmma first (``tiling``
    alone when given; ``in_flight`` step batches left running)."""
    rule = dl.gpu.MatmulTensorCore(instructions="wgmma", wgmma_tilings=(tiling,) if tiling else None,
                                   wgmma_in_flight=in_flight)
    return dict(scheduled_by(rule, tvms.parse(src), target))


def source_of(funcs: dict, target: str = SM90):
    return build_cuda(funcs, target, kind="source")


@pytest.mark.parametrize("tiling", [WgmmaTiling(2, 1, 256), WgmmaTiling(2, 1, 128), WgmmaTiling(1, 2, 128),
                                    WgmmaTiling(2, 2, 64)], ids=str)
@pytest.mark.parametrize("b_transposed", [False, True], ids=["b_n_major", "b_k_major"])
def test_wgmma_matmuls_match_the_cpu(tiling, b_transposed):
    """Each tiling (2 warpgroups or 1, one or two 64-row tiles each, wgmma's n 256, 128, 64),
    with B N-major (``A @ B``: [n / 64][K][64] tiles, the descriptor's leading byte offset
    between them) and K-major (``x @ w.T``); 3 steps of K run the pipeline's prologue, steady
    state and epilogue."""
    funcs = wgmma_funcs(matmul_src(256, 256, 192, "float32", b_transposed), tiling)
    code = source_of(funcs)
    n = tiling.n
    assert f"tvms_wgmma_m64n{n}k16_f32_f16_t0{0 if b_transposed else 1}(" in code.source
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


@pytest.mark.parametrize("in_flight", [1, 0])
def test_copies_land_only_in_tiles_no_wgmma_still_reads(in_flight):
    """The emulator's other extreme, each cp.async performed as soon as it is issued (a GPU
    may): a step's copies go into tiles whose wgmmas the wait before them has finished, so the
    results still match; with the copies moved before the wgmmas of their step while a batch
    stays running, they overwrite the tiles of the batch in flight, which the emulator reports."""
    from tvmscript.target import Target

    src = matmul_src(128, 256, 384, "float32", False)
    funcs = wgmma_funcs(src, in_flight=in_flight)
    for result in compare_with_cpu(funcs, target=SM90, rtol=1e-3, atol=1e-3, eager_copies=True).values():
        assert result.ok, result
    if not in_flight:
        return
    (func,) = prim_funcs_of(tvms.parse(src)).values()
    sch = dl.gpu.MatmulTensorCore(instructions="wgmma").apply(func, Target(SM90), False)
    (k0,) = [lp for lp in sch.get_loops(sch.get_block("C_update_o"))
             if "software_pipeline_order" in (sch.get(lp).annotations or {})]
    sch.annotate(k0, "software_pipeline_order", [0, 1, 2])    # copies first: wrong with a batch in flight
    (result,) = compare_with_cpu({"mm": sch.mod["main"]}, target=SM90, eager_copies=True).values()
    assert not result.ok and "changed between its issue and the wait" in result.error


@pytest.mark.parametrize("case", ["fp16_accumulators", "bf16", "epilogue", "batched", "long_k", "wait_0"])
def test_wgmma_variants_match_the_cpu(case):
    """float16 accumulators (two halves a register), bfloat16 operands, a bias + ReLU epilogue
    written by each thread from its registers, a batched product (the batch on blockIdx.y),
    a K of 16 steps, and each step's batch finished before the next step's copies."""
    tol, in_flight = 1e-3, 1
    if case == "fp16_accumulators":
        src, tol = matmul_src(128, 256, 128, "float16", False), 2e-2
    elif case == "bf16":
        src, tol = matmul_src(128, 128, 128, "float32", True, "bfloat16"), 1e-2
    elif case == "epilogue":
        src = matmul_src(128, 256, 128, "float32", True, epilogue=True)
    elif case == "batched":
        src = batch_matmul_src(4, 128, 128, 64, b_transposed=False)
    elif case == "long_k":
        src = matmul_src(128, 128, 1024, "float32", False)
    else:
        src, in_flight = matmul_src(128, 256, 384, "float32", False), 0
    funcs = wgmma_funcs(src, in_flight=in_flight)
    assert "tvms_wgmma_m64n" in source_of(funcs).source
    for result in compare_with_cpu(funcs, target=SM90, rtol=tol, atol=tol).values():
        assert result.ok, result


TF32 = SM90 + " -allow_tf32=1"


@pytest.mark.parametrize("tiling", [WgmmaTiling(2, 1, 256), WgmmaTiling(1, 2, 128)], ids=str)
def test_tf32_wgmma_matches_the_cpu(tiling):
    """A float32 product where the target allows TF32, B K-major (``x @ w.T``): m64nNk8 from
    [rows][32] float32 tiles (128-byte rows, the fp16 tiles' swizzle), 3 steps of 32 of K; the
    emulator reads the operands truncated to TF32 as the tensor cores do."""
    funcs = wgmma_funcs(matmul_src(256, 256, 96, "float32", True, "float32"), tiling, target=TF32)
    code = source_of(funcs, TF32)
    assert f"tvms_wgmma_m64n{tiling.n}k8_f32_tf32_t00(reinterpret_cast" in code.source and code.arch == "sm_90a"
    for eager in (False, True):
        (result,) = compare_with_cpu(funcs, target=TF32, rtol=1e-2, atol=1e-2, eager_copies=eager).values()
        assert result.ok, result


def test_tf32_wgmma_ptx_and_where_it_does_not_apply():
    """TF32's wgmma has no transpose immediates in PTX; an N-major B (``A @ B``) keeps the
    mma.sync schedule (m16n8k8), as does a float32 product where TF32 is not allowed."""
    funcs = wgmma_funcs(matmul_src(512, 512, 256, "float32", True, "float32"), target=TF32)
    ptx = build_cuda(funcs, TF32, kind="ptx").ptx
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n64k8\.f32\.tf32\.tf32 \{[^}]*\}, %rd\d+, %rd\d+, "
                     r"p, 1, 1;", ptx)
    n_major = source_of(wgmma_funcs(matmul_src(512, 512, 256, "float32", False, "float32"), target=TF32), TF32)
    assert "tvms_wgmma" not in n_major.source and "tvms_mma_m16n8k8_f32_tf32" in n_major.source
    (func,) = prim_funcs_of(tvms.parse(matmul_src(512, 512, 256, "float32", True, "float32"))).values()
    assert choice_points(func, TF32)[INSTRUCTIONS] == [2]
    assert choice_points(func, SM90)[INSTRUCTIONS] == []


@pytest.mark.parametrize("layout, w_shape, dtype", [("HWIO", (3, 3, 64, 128), "float16"),
                                                     ("OHWI", (128, 3, 3, 64), "float16"),
                                                     ("OHWI", (128, 3, 3, 64), "float32")])
def test_an_nhwc_convolution_is_an_implicit_gemm_on_wgmma(layout, w_shape, dtype):
    """A convolution as the CUDA pipeline lays tensor-core convolutions out (NHWC): A is the
    input through the im2col index, K-major (channels last), its padding zero-filled by the
    copies; B the weights, N-major (HWIO) or K-major (OHWI; TF32 takes that one only). Against
    the CPU with each copy landing at its wait and at its issue."""
    from tvmscript import relax

    src = nhwc_conv2d_src((2, 16, 16, 64), w_shape, dtype, layout)
    target, tol = (TF32, 1e-2) if dtype == "float32" else (SM90, 1e-3)
    mod = relax.transform.LegalizeOps()(tvms.parse(src))
    funcs = dict(scheduled_by(dl.gpu.MatmulTensorCore(instructions="wgmma"), mod, target))
    assert f"k{8 if dtype == 'float32' else 16}_f32_{'tf32' if dtype == 'float32' else 'f16'}_" \
           f"t0{1 if layout == 'HWIO' else 0}(reinterpret_cast" in source_of(funcs, target).source
    for eager in (False, True):
        (result,) = compare_with_cpu(funcs, target=target, rtol=tol, atol=tol, eager_copies=eager).values()
        assert result.ok, result


@pytest.mark.parametrize("b_transposed", [False, True], ids=["b_n_major", "b_k_major"])
def test_counters_tensor_core_work_and_ideal_copies(b_transposed):
    """The emulator's counters (trace mode): one m64n128k16 per 64 x 128 x 16 of the product
    (counted per warp, 16 rows each); no FMA; the operands never pass through the load/store
    unit (wgmma reads shared memory itself); the cp.async copies hit every bank once in the
    swizzled tiles and read whole 16-byte runs; C stored in full 32-byte sectors."""
    from support.cuda_counters import count

    n = 256
    funcs = wgmma_funcs(matmul_src(n, n, n, b_transposed=b_transposed), WgmmaTiling(2, 1, 128))
    (c,) = count(funcs, "mm", target=SM90)
    assert c.mma * 2 * 16 * 128 * 16 == 2 * n ** 3 and c.fma == 0 and c.shared_load_requests == 0
    assert c.shared_store_wavefronts == c.shared_store_ideal
    assert c.sectors_per_request() == c.ideal_sectors_per_request()
    assert c.global_store_bytes == 4 * n * n and c.global_store_sectors * 32 == c.global_store_bytes


def test_the_cuda_text_and_ptx_of_the_4096_product():
    """The 4096^3 benchmark product: 128x256 tiles of 2 warpgroups, m64n256k16 from descriptors
    of 1024-byte-aligned dynamic shared memory, each step's 4 wgmmas between a proxy fence, a
    barrier and wgmma's fence, and a commit and a wait that leaves that batch running; a
    4-stage cp.async pipeline; sm_90a."""
    funcs = wgmma_funcs(square_matmul_src(4096, "float16"))
    code = source_of(funcs)
    src = code.source
    assert code.arch == "sm_90a"
    assert "__align__(1024) unsigned char tvms_dynamic_smem[]" in src
    assert re.search(r"tvms_fence_proxy_async\(\);\s*__syncthreads\(\);\s*tvms_wgmma_fence\(\);", src)
    # A step's batch stays running while the copies of a later step go into the tiles of the
    # step before it, which the wait finished: commit, wait for all but one, barrier, copies.
    assert re.search(r"tvms_wgmma_commit\(\);\s*tvms_wgmma_wait<1>\(\);\s*__syncthreads\(\);\s*for [^\n]*\n"
                     r"\s*tvms_cp_async16", src)
    assert re.search(r"tvms_wgmma_wait<0>\(\);\s*#pragma unroll\s*for \(int h", src)   # all done before the store
    assert "tvms_wgmma_m64n256k16_f16_f16_t01(" in src   # float16 C: float16 accumulators
    # 4 stages: step s waits for its tiles with the copies of steps s + 1 and s + 2 in flight
    # (those of s + 3 are issued after its wgmmas).
    assert set(re.findall(r"tvms_cp_async_wait<(\d+)>", src)) == {"2"}
    assert "__launch_bounds__(256)" in src and "tvms_mma_m16n8k16" not in src
    ptx = build_cuda(funcs, SM90, kind="ptx").ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16" in ptx
    assert "wgmma.fence.sync.aligned" in ptx and "wgmma.commit_group.sync.aligned" in ptx
    assert "wgmma.wait_group.sync.aligned 0" in ptx and "fence.proxy.async.shared::cta" in ptx


@pytest.mark.parametrize("acc, dtype", [("float32", "float16"), ("float16", "float16"), ("float32", "float32")])
def test_ptxas_keeps_the_accumulators_in_registers_and_serializes_no_wgmma(acc, dtype):
    """ptxas's report for the 4096^3 product (128 accumulators a thread with float32; TF32 with
    B K-major): no spills, and none of its notes that it had to insert warpgroup waits or
    serialize the wgmmas (C7515-C7520: registers used by a wgmma in flight), one block a
    multiprocessor."""
    target = TF32 if dtype == "float32" else SM90
    funcs = wgmma_funcs(matmul_src(4096, 4096, 4096, acc, dtype == "float32", dtype), target=target)
    code = build_cuda(funcs, target)
    assert "tvms_wgmma_m64n256" in code.source
    (res,) = resources_of(code).values()
    assert res.ptxas.spill_store_bytes == 0 and res.ptxas.spill_load_bytes == 0 and res.ptxas.stack_bytes == 0
    assert res.occupancy.warps_per_block == 8 and res.occupancy.blocks >= 1
    assert res.dyn_shared_bytes == 4 * (128 + 256) * 128
    log = nvrtc.compile_cuda(code.source, code.arch, kind="cubin").log
    assert not re.search(r"C75\d\d|serializ", log), log


def test_the_default_schedule_keeps_mma_sync_and_the_tuner_may_pick_wgmma():
    """Until timed on a GPU, the default fp16 schedule on sm_90 stays mma.sync; the choice
    point ``instructions`` offers wgmma beside it on sm_90 (not on sm_80, nor where A is
    M-major or the tiles do not divide the product), and a choice of it builds wgmma."""
    (func,) = prim_funcs_of(tvms.parse(matmul_src(1024, 1024, 512, "float32"))).values()
    assert "tvms_mma_m16n8k16" in source_of({"mm": func}).source
    assert choice_points(func, SM90)[INSTRUCTIONS] == [2]
    assert choice_points(func, "cuda -arch=sm_80")[INSTRUCTIONS] == []
    picked = with_choices(func, {INSTRUCTIONS: [1]})
    src = source_of({"mm": picked}).source
    # 64x128 tiles: the largest that still give 128 blocks (an H100's 132 multiprocessors).
    assert "tvms_wgmma_m64n128k16_f32_f16_t01(" in src and "tvms_mma_m16n8k16" not in src
    m_major_a = matmul_src(1024, 1024, 512, "float32").replace("A[vi, vk]", "A[vk, vi]").replace(
        "A: T.Buffer((1024, 512)", "A: T.Buffer((512, 1024)")
    (func,) = prim_funcs_of(tvms.parse(m_major_a)).values()
    assert choice_points(func, SM90)[INSTRUCTIONS] == []
    assert "tvms_wgmma" not in source_of(wgmma_funcs(m_major_a)).source
    assert "tvms_wgmma" not in source_of(wgmma_funcs(matmul_src(1000, 1024, 512, "float32"))).source


def test_a_bad_descriptor_is_an_emulator_error():
    """The emulator checks what it reads through a descriptor: a tile outside dynamic shared
    memory is an error, not a silent read."""
    from support.cuda_emulator import EmulatedModule

    src = r"""
extern "C" __global__ void k(float* out) {
  __shared__ __align__(16) unsigned char tile[2048];
  float d[32] = {0};
  unsigned long long desc = tvms_wgmma_desc(tile, 16, 1024);
  tvms_wgmma_m64n64k16_f32_f16_t00(d, desc, desc);
  out[threadIdx.x] = d[0];
}
"""
    mod = EmulatedModule(src)
    out = np.zeros(128, "float32")
    with pytest.raises(Exception, match="not in dynamic shared memory"):
        mod.launch("k", (1, 1, 1), (128, 1, 1), out)


ASYNC_KERNEL = r"""
extern "C" __global__ void k(float* before, float* after, int wait, int overwrite) {
  extern __shared__ __align__(1024) unsigned char smem[];
  half* h = (half*)smem;
  for (int i = threadIdx.x; i < 8192; i += 128) h[i] = __float2half(1.0f);
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  unsigned long long da = tvms_wgmma_desc(smem, 16, 1024), db = tvms_wgmma_desc(smem + 8192, 16, 1024);
  tvms_wgmma_fence();
  tvms_wgmma_m64n64k16_f32_f16_t00(d, da, db);
  tvms_wgmma_commit();
  before[blockIdx.x * 128 + threadIdx.x] = d[0];
  if (overwrite) {
    __syncthreads();
    for (int i = threadIdx.x; i < 8192; i += 128) h[i] = __float2half(2.0f);
  }
  if (wait) tvms_wgmma_wait<0>();
  after[blockIdx.x * 128 + threadIdx.x] = d[0];
}
"""


def test_the_emulator_runs_wgmma_asynchronously():
    """As on the GPU, a wgmma's registers hold D only once the wait that covers its group has
    returned: read before it, they hold what they held (0 here; 16, the sum of 16 products of
    ones, after). A thread that returns with a group it never waited for is reported, and so is
    shared memory a wgmma reads overwritten before its wait."""
    from support.cuda_emulator import EmulatedModule

    mod = EmulatedModule(ASYNC_KERNEL)
    before, after = np.full(256, -1, "float32"), np.full(256, -1, "float32")
    mod.launch("k", (2, 1, 1), (128, 1, 1), before, after, 1, 0, dyn_shared_bytes=16384)
    assert (before == 0).all() and (after == 16).all()
    with pytest.raises(Exception, match="never waited for"):
        mod.launch("k", (2, 1, 1), (128, 1, 1), before, after, 0, 0, dyn_shared_bytes=16384)
    mod = EmulatedModule(ASYNC_KERNEL)
    with pytest.raises(Exception, match="changed between its issue and the wait"):
        mod.launch("k", (1, 1, 1), (128, 1, 1), before, after, 1, 1, dyn_shared_bytes=16384)


def _on_hopper():
    try:
        from tvmscript.runtime.cuda import device_arch, unavailable_reason
    except ImportError as err:   # no pycuda
        return f"no CUDA runtime: {err}"
    reason = unavailable_reason(0)
    if reason is not None:
        return reason
    arch = device_arch(0)
    return None if arch == "sm_90" else f"wgmma needs an sm_90 GPU, this one is {arch}"


@pytest.mark.cuda
@pytest.mark.parametrize("shape, b_transposed, acc, dtype", [((512, 512, 256), False, "float32", "float16"),
                                                              ((256, 512, 192), True, "float32", "float16"),
                                                              ((4096, 4096, 4096), False, "float16", "float16"),
                                                              ((512, 256, 160), True, "float32", "float32")])
def test_wgmma_on_a_hopper_gpu(shape, b_transposed, acc, dtype):
    """On an H100 or H200: the wgmma kernels against NumPy (integer-valued operands: the float32
    products, TF32's too, are exact; the 4096^3 float16 one within half's rounding)."""
    reason = _on_hopper()
    if reason:
        pytest.skip(reason)
    m, n, k = shape
    funcs = wgmma_funcs(matmul_src(m, n, k, acc, b_transposed, dtype), target=TF32 if dtype == "float32" else SM90)
    ex = tvms.compile(tvms.IRModule(funcs), target="cuda")
    assert "tvms_wgmma_m64n" in ex.cuda_code.source
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, (m, k)).astype(dtype)
    b = rng.integers(-2, 3, (n, k) if b_transposed else (k, n)).astype(dtype)
    dev = tvms.cuda(0)
    out = tvms.nd.array(np.zeros((m, n), acc), dev)
    ex["mm"](tvms.nd.array(a, dev), tvms.nd.array(b, dev), out)
    ref = a.astype("float32") @ (b.T if b_transposed else b).astype("float32")
    if acc == "float32":
        np.testing.assert_array_equal(out.numpy(), ref)
    else:
        np.testing.assert_allclose(out.numpy().astype("float32"), ref, rtol=2e-2, atol=2.0)
