"""Softmax and layer norm over many short rows: a warp per row (`dlight.gpu.WarpRowReduction`,
before `GeneralReduction` in the default CUDA schedules). On an H200 a GPT block's attention
softmax (49152 rows of 512) took 117 µs with a block of 256 threads per row, each reduction
ending in a block-wide combination with barriers.

Each kernel is checked for its shape (8 rows a block, shuffles only: no barrier, no shared
memory) and run on the CPU emulator against the CPU backend.
"""

from __future__ import annotations

import pytest

from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.dlight.gpu import WarpRowReduction
from tvmscript.target import Target

from support.cuda_check import relax_prim_funcs
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"


def row_op(op: str, rows: int, cols: int) -> dict:
    """A legalized softmax or layer norm over the last axis of a rows x cols matrix."""
    params = f'x: R.Tensor(({rows}, {cols}), "float32")'
    if op == "softmax":
        call = "R.nn.softmax(x, axis=-1)"
    else:
        params += f', g: R.Tensor(({cols},), "float32"), b: R.Tensor(({cols},), "float32")'
        call = "R.nn.layer_norm(x, g, b, axes=[-1])"
    return relax_prim_funcs(params, f"            y = {call}")


def applies(funcs: dict) -> bool:
    (func,) = funcs.values()
    return WarpRowReduction().apply(func, Target(SM90)) is not None


@pytest.mark.parametrize("op, rows, cols", [
    ("softmax", 1024, 512),       # attention scores' rows
    ("softmax", 1030, 100),       # a partial last block, rows not whole lanes
    ("layer_norm", 1030, 768),    # a GPT block's
])
def test_a_warp_per_row_with_no_barrier_matches_the_cpu(op, rows, cols):
    funcs = row_op(op, rows, cols)
    assert applies(funcs)
    code = build_cuda(funcs, SM90, kind="source")
    (launch,) = [launch for f in code.functions.values() for launch in f.launches]
    assert launch.block[:2] == ("32", "8") and launch.grid[0] == str(-(-rows // 8)), launch
    kernel = code.source[code.source.index('extern "C"'):]
    assert "__shfl_xor_sync" in kernel and "__syncthreads" not in kernel and "__shared__" not in kernel, kernel
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-4, atol=1e-5).values()
    assert result.ok, result


def test_few_or_long_rows_keep_a_block_per_row():
    assert not applies(row_op("softmax", 64, 512))        # 8 blocks: too few to fill the GPU
    assert not applies(row_op("softmax", 4096, 4096))     # 128 elements a lane: a block's 256 threads
    assert not applies(row_op("softmax", 4096, 16))       # shorter than a warp
