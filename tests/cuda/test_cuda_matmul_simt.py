"""The big-tile fp32 matmul schedule (dlight.gpu.MatmulSIMT) held to its design without a GPU:
which products take it, its results in the emulator against the CPU, ptxas's report for the
4096^3 benchmark product (no spills) and the emulator's counters (coalesced loads, one FMA
instruction per warp per 32 multiply-adds)."""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.kernel_resources import resources_of
from tvmscript.compiler.dlight.gpu import MatmulSIMT
from tvmscript.target import Target
from support import cuda_check
from support.cuda_check import batch_matmul_src, conv2d_src, prim_funcs_of, relax_prim_funcs, square_matmul_src
from support.cuda_counters import count
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"
STEP = 8        # K per step of the pipeline (matmul_simt.STEP_K)


def matmul_src(m: int, n: int, k: int, b_transposed: bool = False, epilogue: bool = False) -> str:
    return cuda_check.matmul_src(m, n, k, "float32", b_transposed, "float32", epilogue)


def applies(src: str) -> bool:
    (func,) = prim_funcs_of(tvms.parse(src)).values()
    return MatmulSIMT().apply(func, Target(SM90)) is not None


def test_only_fp32_products_of_128_tiles_or_more_whose_tiles_divide_them():
    assert applies(square_matmul_src(4096, "float32"))
    assert applies(matmul_src(1024, 2048, 24, b_transposed=True))
    assert applies(matmul_src(4096, 768, 64, b_transposed=True))   # a GPT block's projection: 192 tiles
    assert not applies(square_matmul_src(512, "float32"))          # 32 tiles: Matmul's smaller ones fill the GPU
    assert applies(square_matmul_src(1024, "float32"))             # 64 tiles of 128 columns, 128 of 64
    assert not applies(matmul_src(1024, 1088 + 8, 64))              # J not a multiple of 128
    assert not applies(matmul_src(1024, 1024, 12))                  # K 12 -> 16: too much padding
    assert not applies(matmul_src(900, 2048, 64))                   # I 900 -> 1024: too much padding
    assert applies(matmul_src(2048 - 100, 1024, 147))               # I 1948 -> 2048, K 147 -> 152: 5% each
    assert not applies(square_matmul_src(1024, "float16"))


@pytest.mark.parametrize("m, n, columns", [
    (4096, 4096, 128),      # 1024 tiles or 2048 halves: 8 whole tiles on the busiest SM either way
    (4096, 3072, 128),      # 768 or 1536: 6 either way
    (4096, 768, 64),        # 192 tiles: 2 on the busiest SM; 384 halves: 3, 1.5 tiles' work
    (4096, 2304, 64),       # 576: 5; 1152 halves: 9, 4.5 tiles' work
])
def test_the_columns_a_block_takes_balance_the_multiprocessors(m, n, columns):
    """The tile width that leaves the busiest of the 132 SMs the least of C, 128 on a tie (on
    the H200 a 4096 x 768 product of 192 whole tiles ran at 72% of the 4096^2 one's speed)."""
    src = build_cuda(prim_funcs_of(tvms.parse(matmul_src(m, n, 64, b_transposed=True))), SM90, kind="source").source
    assert f"__launch_bounds__({256 if columns == 128 else 128})" in src


def test_the_default_fp32_schedule_is_the_big_tile_one():
    funcs = prim_funcs_of(tvms.parse(square_matmul_src(4096, "float32")))
    src = build_cuda(funcs, SM90, kind="source").source
    assert "__launch_bounds__(256)" in src
    assert "tvms_cp_async16(" in src and "tvms_cp_async_wait<2>()" in src     # B's tiles, 3 stages
    ptx = build_cuda(funcs, SM90, kind="ptx").ptx
    # Unrolled in full (3 copies of the step: prologue, steady state, epilogue): per k 64 FMAs
    # and four 16-byte shared loads (A's 8 rows, B's two runs of 4 columns); no local memory.
    assert ptx.count("fma.rn.f32") == 3 * STEP * 64
    assert ptx.count("ld.shared.v4.f32") == 3 * STEP * 4
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("shape, b_transposed, epilogue", [
    ((1024, 2048, 16), False, False),    # 2 steps of K: the pipeline's prologue and epilogue only
    ((2048, 1024, 40), False, True),     # a steady state, bias and relu in the write-back
    ((1024, 2304, 24), True, False),     # x @ w.T: both tiles transposed into shared memory
])
def test_results_match_the_cpu(shape, b_transposed, epilogue):
    src = matmul_src(*shape, b_transposed=b_transposed, epilogue=epilogue)
    assert applies(src)
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


BATCHED = batch_matmul_src(128, 128, 128, 16, "float32")

CONV = conv2d_src((16, 16, 32, 32), (128, 16, 3, 3))


def test_a_batched_product_of_one_tile_a_batch_matches_the_cpu():
    """128 heads of 128 x 128 scores (attention's Q @ K.T, one tile each): the batch is the
    grid's y."""
    funcs = prim_funcs_of(tvms.parse(BATCHED))
    assert MatmulSIMT().apply(funcs["bmm"], Target(SM90)) is not None
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_64_columns_of_c_a_block_where_128_would_be_too_few_or_do_not_divide():
    """A convolution's 64 output channels, or too few 128-column tiles: 16 x 8 threads, each
    8x8 of C in runs of 4 columns 32 apart; the shared tiles 3 stages of 8 rows of K, of 128
    (A) and 64 (B) floats padded by 4."""
    for shape in ((16384, 64, 32), (1024, 1024, 32)):
        assert applies(matmul_src(*shape))
        src = build_cuda(prim_funcs_of(tvms.parse(matmul_src(*shape))), SM90, kind="source").source
        assert "__launch_bounds__(128)" in src
        assert "float B_reindex_shared[" + str((3 * STEP - 1) * 68 + 64) + "]" in src, shape
    assert not applies(matmul_src(2048, 64, 32))                   # 16 tiles


@pytest.mark.parametrize("shape, b_transposed", [((16384, 64, 40), False), ((1024, 1024, 16), True)])
def test_the_64_column_tiling_matches_the_cpu(shape, b_transposed):
    src = matmul_src(*shape, b_transposed=b_transposed, epilogue=True)
    assert applies(src)
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_a_convolution_as_an_implicit_gemm_matches_the_cpu():
    """16 x 32 x 32 output pixels (I, 128 tiles) by 128 channels (J), K = 16 channels x 3 x 3:
    the input's tile is read through the im2col index, with its zero padding."""
    from tvmscript import relax

    funcs = prim_funcs_of(relax.transform.LegalizeOps()(tvms.parse(CONV)))
    (conv,) = funcs.values()
    assert MatmulSIMT().apply(conv, Target(SM90)) is not None
    code = build_cuda(funcs, SM90, kind="source")
    kernel = code.source[code.source.index('extern "C"'):]
    # The gathers are asynchronous, one float each, the padding's zeros written by cp.async
    # itself; their offsets in 32-bit arithmetic although Relax's shapes are int64.
    assert "tvms_cp_async4_zfill(" in kernel and "tvms_cp_async4(" in kernel, kernel
    assert "long long)((" in kernel and "LL" not in kernel, kernel
    # A thread's pixel is known once the block's 16 x 8 threads bound (f * 128 + t) % 128 to t.
    assert "% 128" not in kernel and "/ 128" not in kernel, kernel
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_no_register_spills(arch):
    """The 64 accumulators, 16 operands and the addresses of a thread fit its registers, and
    two blocks of 256 threads share a multiprocessor."""
    code = build_cuda(prim_funcs_of(tvms.parse(square_matmul_src(4096, "float32"))), f"cuda -arch={arch}")
    (res,) = resources_of(code).values()
    assert res.ptxas.spill_store_bytes == 0 and res.ptxas.spill_load_bytes == 0 and res.ptxas.stack_bytes == 0
    assert res.ptxas.registers <= 128 and res.occupancy.blocks >= 2


def test_counters_coalesced_loads_conflict_free_stores_and_64_fmas_per_16_shared_loads():
    n = 2048
    (c,) = count(prim_funcs_of(tvms.parse(square_matmul_src(n, "float32"))), "mm", blocks=2, target=SM90)
    assert c.fma_inst == n ** 3 // 32 and c.mma == 0
    assert c.sectors_per_request() == c.ideal_sectors_per_request()       # both copies, global
    assert c.shared_store_wavefronts == c.shared_store_ideal              # incl. the transposing one
    # The CUDA C loads a thread's operands 16 bytes at a time, as the PTX does (see above: a
    # vectorized copy into registers is vector loads, then the lanes one by one): 2 + 2 per k
    # for 64 FMAs (Matmul: 4 + 4 scalar loads for 16), none with bank conflicts.
    assert c.shared_load_requests * 16 == c.fma_inst
    assert c.shared_load_wavefronts == c.shared_load_ideal


def test_rows_and_k_padded_to_whole_tiles_match_the_cpu():
    """resnet18's first convolution, at a smaller image: 16 x 32 x 32 pixels by 64 channels,
    K = 3 x 7 x 7 = 147 padded to 152 (19 steps), the padded K read as zeros."""
    funcs = relax_prim_funcs('x: R.Tensor((16, 3, 64, 64), "float32"), w: R.Tensor((64, 3, 7, 7), "float32")',
                             "            y = R.nn.conv2d(x, w, strides=[2, 2], padding=[3, 3, 3, 3])")
    (conv,) = funcs.values()
    assert MatmulSIMT().apply(conv, Target(SM90)) is not None
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


SPLIT = {   # products of too few tiles: (I, J, K) -> (launches' blocks, parts of K)
    (1568, 512, 4608): ("8x26x1 of 8x16x1", 2),     # resnet18's last convolution at batch 32: 104 tiles
    (1000, 512, 1024): ("8x16x1 of 8x16x1", 2),     # 64 tiles of 128 x 64 (I padded), K in 2 parts of 512
}


@pytest.mark.parametrize("shape", list(SPLIT))
def test_too_few_tiles_split_k_over_blocks_and_add_the_parts_in_a_second_kernel(shape):
    launch, parts = SPLIT[shape]
    code = build_cuda(prim_funcs_of(tvms.parse(matmul_src(*shape, b_transposed=True, epilogue=True))), SM90,
                      kind="source")
    first, second = code.functions["mm"].launches
    assert f"{'x'.join(first.grid)} of {'x'.join(first.block)}" == launch
    assert first.args[-1].kind == second.args[-1].kind == "workspace"      # the parts, in global memory
    (workspace,) = code.functions["mm"].workspaces                         # bytes, as a C expression
    assert eval(workspace) == parts * -(-shape[0] // 128) * 128 * shape[1] * 4
    assert "max(" in code.source[code.source.index("mm_kernel_1"):]       # the epilogue after the sum


def test_k_split_over_blocks_matches_the_cpu():
    """32 tiles of 128 x 128 (1000 rows padded to 1024) by K = 256 in 4 parts of 64: 128 blocks,
    then the parts added, with the bias and ReLU."""
    from tvmscript.compiler.dlight.gpu import matmul_simt

    src = matmul_src(1000, 512, 256, b_transposed=True, epilogue=True)
    funcs = prim_funcs_of(tvms.parse(src))
    old = matmul_simt.MIN_SPLIT_K
    matmul_simt.MIN_SPLIT_K = 64          # (the default 256 would need K = 1024: slow to emulate)
    try:
        code = build_cuda(funcs, SM90, kind="source")
    finally:
        matmul_simt.MIN_SPLIT_K = old
    assert len(code.functions["mm"].launches) == 2
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result
