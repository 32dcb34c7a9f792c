"""Products with few tiles of C and a long K: K split over the 32 lanes of a warp (or 2 or 4
warps), the threads' sums added with shuffles (and shared memory), one launch
(`dlight.gpu.MatmulSplitK`, in the default CUDA schedules before `Matmul`). On an H200,
resnet18's last 3x3 convolutions at batch 1 (49 x 512, K = 4608: 16 of `Matmul`'s tiles)
took 0.56 ms each, walking K one block at a time; 51 µs with K split over 4 warps.

Each kernel is checked for its shape and run on the CPU emulator against the CPU backend.
"""

from __future__ import annotations

import re

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.dlight.gpu import MatmulSplitK
from tvmscript.target import Target

from support.cuda_check import batch_matmul_src, matmul_src, prim_funcs_of, relax_prim_funcs, scheduled_by
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"


def applies(funcs: dict) -> bool:
    (func,) = funcs.values()
    return MatmulSplitK().apply(func, Target(SM90)) is not None


def fp32_matmul(m: int, n: int, k: int, b_transposed: bool = True, epilogue: bool = True) -> dict:
    return prim_funcs_of(tvms.parse(matmul_src(m, n, k, "float32", b_transposed, "float32", epilogue)))


def test_only_products_of_few_tiles_and_a_long_k():
    assert applies(fp32_matmul(49, 512, 4608))              # resnet18's last stage at batch 1: 16 tiles
    assert applies(fp32_matmul(128, 768, 3072))             # a GPT block's projection at 128 tokens: 48 tiles
    assert not applies(fp32_matmul(1024, 1024, 1024))       # 512 tiles: other rules fill the GPU
    assert not applies(fp32_matmul(49, 512, 128))           # K too short to split 32 ways
    assert not applies(fp32_matmul(49, 512, 4608, b_transposed=False))   # B[K, J]: lanes a row apart
    assert not applies(fp32_matmul(1, 1000, 512))           # a matrix-vector product: GEMV's
    assert not applies(prim_funcs_of(tvms.parse(matmul_src(64, 64, 512, "int32", dtype="int32"))))


@pytest.mark.parametrize("shape, b_transposed", [
    ((50, 200, 300), True),       # every extent padded: 56 x 208 x 320
    ((24, 96, 480), True),        # whole tiles along J and K, rows padded 24 -> 32
])
def test_a_split_k_product_is_one_kernel_and_matches_the_cpu(shape, b_transposed):
    """K too short for 2 warps a sum (under 512): a warp of lanes along K, 4 warps a block,
    each output's sum by shuffles alone."""
    funcs = fp32_matmul(*shape, b_transposed=b_transposed)
    assert applies(funcs)
    code = build_cuda(funcs, SM90, kind="source")
    kernel = code.source[code.source.index('extern "C"'):]
    (launch,) = code.functions["mm"].launches
    assert launch.block[:2] == ("32", "4"), launch           # a warp of lanes along K, 4 warps
    assert kernel.count("__shfl_xor_sync") == 5, kernel      # one warp's sum, no block-wide one
    loop = kernel[kernel.index("for (int ax3_0"):kernel.index("__shfl_xor_sync")]
    assert "__syncthreads" not in loop and "__shared__" not in loop, loop   # the K loop: registers only
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_a_batched_product_matches_the_cpu():
    funcs = prim_funcs_of(tvms.parse(batch_matmul_src(3, 24, 40, 512, "float32")))
    assert applies(funcs)
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_a_convolution_at_batch_1_with_its_epilogue_matches_the_cpu():
    """7 x 7 pixels by 128 channels, K = 64 x 3 x 3 through the im2col index, with the bias and
    ReLU fused after it: one kernel, whose lanes write the 4-D output."""
    funcs = relax_prim_funcs('x: R.Tensor((1, 64, 7, 7), "float32"), w: R.Tensor((128, 64, 3, 3), "float32"), '
                             'b: R.Tensor((1, 128, 1, 1), "float32")',
                             "            c = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])\n"
                             "            y = R.nn.relu(R.add(c, b))", fuse=True)
    assert applies(funcs)
    code = build_cuda(funcs, SM90, kind="source")
    assert code.source.count('extern "C" __global__') == 1
    assert re.search(r"= max\(\(\w+_shared\[", code.source), "the bias and ReLU applied to the warp's sums"
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


RESNET18_B1 = {   # resnet18's 3x3 convolutions at batch 1 as products: (I, J, K)
    "stage 1": (3136, 64, 576), "stage 2": (784, 128, 1152), "stage 3": (196, 256, 2304), "stage 4": (49, 512, 4608),
}


@pytest.mark.parametrize("stage, threads", [
    ("stage 2", (32, 4)),      # 784 blocks with a warp per output group: 2 warps would make 1568
    ("stage 3", (64, 2)),      # 2 warps share each output's K: 800 blocks
    ("stage 4", (128, 1)),     # 4 warps: 896 blocks
])
def test_the_warps_that_share_k_keep_the_grid_within_8_blocks_a_multiprocessor(stage, threads):
    """As many warps share an output's K (4, 2 or 1) as keep the grid within 8 x 132 blocks:
    on an H200 these were the fastest of the three for each of resnet18's convolutions."""
    m, n, k = RESNET18_B1[stage]
    code = build_cuda(fp32_matmul(m, n, k), SM90, kind="source")
    (launch,) = code.functions["mm"].launches
    assert tuple(launch.block[:2]) == tuple(map(str, threads)), launch
    assert int(launch.grid[0]) * int(launch.grid[1]) <= 8 * 132


def test_a_product_whose_grid_would_be_too_large_is_left_to_matmul():
    """3136 x 64, K = 576: 1568 blocks even with one warp per group; `Matmul` took half the time."""
    assert not applies(fp32_matmul(*RESNET18_B1["stage 1"]))


@pytest.mark.parametrize("warps_k", [2, 4])
def test_k_shared_by_several_warps_matches_the_cpu(warps_k):
    """The threads' sums of each output added with shuffles, then through shared memory
    between the warps; every extent padded (56 x 208 x 1152)."""
    src = matmul_src(50, 200, 1100, "float32", True, "float32", True)
    funcs = scheduled_by(MatmulSplitK(warps_k=warps_k), src, SM90)
    code = build_cuda(funcs, SM90, kind="source")
    (launch,) = code.functions["mm"].launches
    assert launch.block[:2] == (str(32 * warps_k), str(4 // warps_k)), launch
    assert "red_smem" in code.source       # the block-wide part of the sum
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), code=code, target=SM90, rtol=1e-4,
                                 atol=1e-4).values()
    assert result.ok, result
    with pytest.raises(ValueError, match="1, 2 or 4"):
        MatmulSplitK(warps_k=3)
