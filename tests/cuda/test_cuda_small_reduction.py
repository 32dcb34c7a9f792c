"""Depthwise convolutions and pooling windows: many outputs, each reducing a few elements, one
thread per output (`dlight.gpu.SmallReduction`, in the default CUDA schedules before the
cooperative reductions). On an H200, mobilenet_v2's 3x3 depthwise convolutions took 0.1 to
0.4 ms each under `GeneralReduction` (a block of 256 threads per output, 9 of them busy).

Each schedule is checked for its shape (one kernel, the accumulator in a register, the
epilogue at the thread) and run on the CPU emulator against the CPU backend.
"""

from __future__ import annotations

import pytest

from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.dlight.gpu import SmallReduction
from tvmscript.target import Target

from support.cuda_check import relax_prim_funcs
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"


def fused(body: str, params: str) -> dict:
    """The prim_funcs of a Relax ``main`` after legalization and fusion, as the default
    pipeline makes them."""
    return relax_prim_funcs(params, body, fuse=True)


def depthwise(channels: int, size: int, stride: int = 1) -> dict:
    """A 3x3 depthwise convolution (padding 1), a bias and ReLU6: mobilenet_v2's."""
    conv = f"R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[1, 1, 1, 1], groups={channels})"
    return fused(f"""            c = {conv}
            a = R.add(c, b)
            y = R.clip(a, R.prim_value(0), R.prim_value(6))""",
                 f'x: R.Tensor((1, {channels}, {size}, {size}), "float32"), '
                 f'w: R.Tensor(({channels}, 1, 3, 3), "float32"), b: R.Tensor((1, {channels}, 1, 1), "float32")')


def max_pool(channels: int, size: int) -> dict:
    return fused("            y = R.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])",
                 f'x: R.Tensor((1, {channels}, {size}, {size}), "float32")')


def applies(funcs: dict) -> bool:
    (func,) = funcs.values()
    return SmallReduction().apply(func, Target(SM90)) is not None


@pytest.mark.parametrize("channels, size, stride", [(32, 32, 1), (64, 64, 2), (24, 30, 1)])
def test_a_depthwise_convolution_is_one_thread_per_output_and_matches_the_cpu(channels, size, stride):
    funcs = depthwise(channels, size, stride)
    assert applies(funcs)
    source = build_cuda(funcs, SM90, kind="source").source
    assert source.count('extern "C" __global__') == 1, source        # the bias and clip at the thread
    assert "__launch_bounds__(256)" in source
    assert "_local[1]" in source and "__shfl" not in source and "__syncthreads" not in source, source
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-5, atol=1e-5).values()
    assert result.ok, result


def test_a_max_pool_is_one_thread_per_output_and_matches_the_cpu():
    """A pooling window with no epilogue still accumulates in a register and stores each
    output once (it was 9 reads and 10 writes of global memory per output: resnet18's max
    pool at batch 32, estimated on an H200, 73 -> 29 us)."""
    funcs = max_pool(64, 64)                                           # 64 x 32 x 32 outputs
    assert applies(funcs)
    source = build_cuda(funcs, SM90, kind="source").source
    assert "pool_max_local[1]" in source and source.count("pool_max[") == 1, source
    (result,) = compare_with_cpu(funcs, target=SM90).values()
    assert result.ok, result


def test_the_fallback_rule_accumulates_in_a_register():
    """`Fallback` (a reduction no other rule takes: here, given alone) accumulates each
    thread's output in a register and stores it once, and matches the CPU."""
    from tvmscript.compiler import dlight as dl

    ((name, func),) = max_pool(16, 16).items()
    sch = dl.gpu.Fallback().apply(func, Target(SM90), False)
    funcs = {name: sch.mod["main"]}
    source = build_cuda(funcs, SM90, kind="source").source
    assert "_local[1]" in source and source.count("pool_max[") == 1, source
    (result,) = compare_with_cpu(funcs, target=SM90).values()
    assert result.ok, result


def test_few_outputs_or_long_reductions_stay_with_the_cooperative_rules():
    assert not applies(depthwise(16, 16))                             # 4096 outputs: too few to fill the GPU
    pool = fused("            y = R.nn.adaptive_avg_pool2d(x, output_size=[1, 1])",
                 'x: R.Tensor((32, 512, 7, 7), "float32")')          # 16384 outputs, each of 49: small enough
    assert applies(pool)
    wide = fused("            y = R.nn.adaptive_avg_pool2d(x, output_size=[1, 1])",
                 'x: R.Tensor((64, 512, 9, 9), "float32")')          # each of 81 elements
    assert not applies(wide)
    softmax = fused("            y = R.nn.softmax(x, axis=-1)", 'x: R.Tensor((4096, 32), "float32")')
    assert not applies(softmax)                                       # two reductions and a tail
