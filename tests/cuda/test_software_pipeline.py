"""Software pipelines written by hand: TVM's ``software_pipeline_stage`` / ``_order`` /
``_async_stages`` loop annotations in a TVMScript kernel (compiler/lower_gpu/software_pipeline.py,
async_copy.py), checked in the emulator against the CPU backend (which runs the loop as
written: the annotations do not change what it computes)."""

from __future__ import annotations

import re

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.build_error import BuildError
from support.cuda_check import prim_funcs_of
from support.cuda_emulator import compare_with_cpu


def pipelined(stages: list, order: list, async_stages: list, steps: int = 12) -> str:
    """Each step copies a row of A into shared memory (8 floats per thread, two 16-byte
    vectors) and then writes that row reversed, doubled, into C: a thread reads what other
    threads copied, so the step needs its copy finished and visible."""
    ann = (f'{{"software_pipeline_stage": {stages}, "software_pipeline_order": {order}, '
           f'"software_pipeline_async_stages": {async_stages}}}')
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def rev(A: T.Buffer(({steps}, 256), "float32"), C: T.Buffer(({steps}, 256), "float32")):
        T.func_attr({{"tir.noalias": True}})
        A_shared = T.alloc_buffer((256,), "float32", scope="shared")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for i in T.serial({steps}, annotations={ann}):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    for v0 in range(2):
                        for v1 in T.vectorized(4):
                            with T.block("copy"):
                                vi = T.axis.spatial({steps}, i)
                                vj = T.axis.spatial(256, tx * 8 + v0 * 4 + v1)
                                A_shared[vj] = A[vi, vj]
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    for e in range(8):
                        with T.block("use"):
                            vi = T.axis.spatial({steps}, i)
                            vj = T.axis.spatial(256, tx * 8 + e)
                            C[vi, vj] = A_shared[255 - vj] * T.float32(2)
"""


@pytest.mark.parametrize("stages, order, async_stages, steps", [
    ([0, 1], [0, 1], [], 12),        # two buffers, synchronous copies
    ([0, 1], [0, 1], [0], 12),       # cp.async, one group in flight
    ([0, 2], [0, 1], [0], 12),       # three versions, two groups in flight
    ([0, 3], [1, 0], [0], 12),       # use before copy within a step
    ([0, 2], [0, 1], [0], 1),        # fewer steps than stages: prologue and epilogue only
    ([0, 3], [0, 1], [0], 2),        # fewer, and empty steps between: they still commit a group
])
def test_pipelined_loop_matches_the_cpu(stages, order, async_stages, steps):
    src = pipelined(stages, order, async_stages, steps)
    funcs = prim_funcs_of(tvms.parse(src))
    text = build_cuda(funcs, "cuda -arch=sm_90", kind="source").source
    depth = stages[1] - stages[0]
    if steps > depth:
        assert f"% {depth + 1})" in text                   # the shared row in depth + 1 versions
    if async_stages and steps > 1:      # (a loop of one step is no loop: nothing to pipeline)
        assert text.count("tvms_cp_async16(") >= 1
        n = depth - 1 + (1 if order == [0, 1] else 0)
        assert set(re.findall(r"tvms_cp_async_wait<(\d+)>", text)) == {str(n)}
    elif not async_stages:
        assert "cp_async" not in text
    (result,) = compare_with_cpu(funcs, target="cuda -arch=sm_90").values()
    assert result.ok, result


def test_a_missing_stage_entry_is_an_error():
    funcs = prim_funcs_of(tvms.parse(pipelined([0], [0, 1], [])))
    with pytest.raises(BuildError, match="one entry per statement"):
        build_cuda(funcs, "cuda -arch=sm_90", kind="source")
