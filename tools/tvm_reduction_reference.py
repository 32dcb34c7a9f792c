"""Golden files for tvms's reduction primitives and blockize, made with the real Apache TVM.

A *developer tool* (TVM is never a dependency of tvms; tests only read the files it writes).
It complements ``tools/tvm_schedule_reference.py`` with the cases that
``tests/test_schedule_reduction.py`` and ``tests/test_schedule_blockize.py`` need: more
``decompose_reduction``, ``rfactor`` and ``blockize`` situations, and their rejections.

Run (from the repository root, with TVM 0.27 in /work/tvmref as for the other tools)::

    /work/tvmref/bin/python tools/tvm_reduction_reference.py           # every case
    /work/tvmref/bin/python tools/tvm_reduction_reference.py rfactor_  # cases whose name starts so

Per case ``<name>`` it writes into ``tests/golden/schedule_reduction/``: ``<name>.input.tvms``
(the input, TVM 0.27's dialect), ``<name>.steps.py`` (Python using only ``sch``, runs on both
schedules; ``get_block`` is TVM's ``get_sblock``), then either ``<name>.tvms`` (the module TVM
printed) and ``<name>.trace.py`` (its trace), or ``<name>.error.txt`` (the exception class, then
TVM's message without the IR dump) when TVM rejected the last step.

Schedules run with ``debug_mask="all"`` (TVM verifies its state after every step), except the
cases marked ``debug=False``: there TVM's own verification rejects a correct result (after
``rfactor`` of a loop under a ``T.where``, TVM flags the new block's binding as affine and then
finds it is not), so they run unverified.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "golden" / "schedule_reduction"


@dataclass
class Case:
    name: str
    source: str
    steps: str
    debug: bool = True


CASES: list = []


def _clean(text: str) -> str:
    lines = text.strip("\n").splitlines()
    indent = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return "\n".join(ln[indent:] for ln in lines) + "\n"


def case(name: str, source: str, steps: str, debug: bool = True) -> None:
    assert all(c.name != name for c in CASES), name
    CASES.append(Case(name, _clean(source), _clean(steps), debug))


# ----------------------------------------------------------------------------- inputs

MM_RELU = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.sblock_alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''

MATMUL = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

ROW_SUM = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 128):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
'''

ROW_SUM_RHS_FIRST = ROW_SUM.replace("B[vi] = B[vi] + A[vi, vk]", "B[vi] = A[vi, vk] + B[vi]")
ROW_SUM_BAD_INIT = ROW_SUM.replace("B[vi] = T.float32(0)", "B[vi] = T.float32(1)")

ROW_MAX = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 100), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 100):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-3.4028234663852886e+38)
            B[vi] = T.max(B[vi], A[vi, vk])
'''

ROW_MIN_INT = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "int32"), B: T.Buffer((64,), "int32")):
    for i, k in T.grid(64, 64):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 2147483647
            B[vi] = T.min(B[vi], A[vi, vk])
'''

ROW_PROD = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 64):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] * A[vi, vk]
'''

SUM_2AXES = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 32, 8), "float32"), B: T.Buffer((16,), "float32")):
    for i, k, l in T.grid(16, 32, 8):
        with T.sblock("B"):
            vi, vk, vl = T.axis.remap("SRR", [i, k, l])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk, vl]
'''

TWO_WRITERS = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 128):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i in range(128):
        with T.sblock("B2"):
            vi = T.axis.spatial(128, i)
            B[vi] = B[vi] * T.float32(2)
'''

TWO_UNDER_K = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32"), D: T.Buffer((128, 128), "float32")):
    for i in range(128):
        for k in range(128):
            with T.sblock("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
            with T.sblock("D"):
                vi, vk = T.axis.remap("SS", [i, k])
                D[vi, vk] = A[vi, vk] * T.float32(2)
'''

ELEMWISE_100 = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((100, 128), "float32"), B: T.Buffer((100, 128), "float32")):
    for i, j in T.grid(100, 128):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''

TWO_BLOCKS_ONE_LOOP = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.sblock("B"):
            vi = T.axis.spatial(128, i)
            B[vi] = A[vi] + T.float32(1)
        with T.sblock("C"):
            vi = T.axis.spatial(128, i)
            C[vi] = B[vi] * T.float32(2)
'''

SIDE_BY_SIDE = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 16), "float32"), B: T.Buffer((128, 16), "float32"), C: T.Buffer((128, 16), "float32")):
    for i in range(128):
        for j in range(16):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for j in range(16):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] * T.float32(2)
'''

SIDE_BY_SIDE_TILED = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 16), "float32"), B: T.Buffer((128, 16), "float32"), C: T.Buffer((128, 16), "float32")):
    for i, j0 in T.grid(128, 4):
        for j1 in range(4):
            with T.sblock("B"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(16, j0 * 4 + j1)
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for j1 in range(4):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(16, j0 * 4 + j1)
                C[vi, vj] = B[vi, vj] * A[vi, vj]
'''

MATMUL_DYNAMIC_M = '''
@T.prim_func(s_tir=True)
def main(a: T.handle, B: T.Buffer((128, 128), "float32"), c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 128), "float32")
    C = T.match_buffer(c, (n, 128), "float32")
    for i, j, k in T.grid(n, 128, 128):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

TILE = '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, {t}])
    j0, j1 = sch.split(j, factors=[None, {t}])
    k0, k1 = sch.split(k, factors=[None, {t}])'''

# ----------------------------------------------------------------------------- decompose_reduction

case("mlc_mm_relu_decompose_split_reorder", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(block_Y, k)
''')
case("mlc_mm_relu_decompose_outer_loop", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(block_Y, j0)
''')
case("decompose_tiled_with_predicate", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 3])
    j0, j1 = sch.split(j, factors=[None, 5])
    k0, k1 = sch.split(k, factors=[None, 6])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.decompose_reduction(c, k0)
''')
case("decompose_thread_bound_annotated", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.annotate(c, "foo", 1)
    sch.decompose_reduction(c, i)
''')
case("decompose_then_schedule_update", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    init = sch.decompose_reduction(c, i)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.unroll(sch.get_loops(c)[-1])
''')
case("decompose_row_max_split", ROW_MAX, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 8])
    sch.reorder(i0, k, i1)
    sch.decompose_reduction(b, k)
''')
case("decompose_dynamic_m_tiled", MATMUL_DYNAMIC_M, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 32])
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.reorder(i0, j, k0, i1, k1)
    sch.decompose_reduction(c, k0)
''')
case("err_decompose_loop_below_reduce_loop", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    sch.decompose_reduction(c, j)
''')
case("err_decompose_not_dominant", TWO_WRITERS, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.decompose_reduction(b, i)
''')
case("err_decompose_twice", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, k)
    sch.decompose_reduction(c, i)
''')

# ----------------------------------------------------------------------------- rfactor

case("rfactor_matmul_k_split_axis2", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.rfactor(k1, 2)
''')
case("rfactor_matmul_whole_k", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.rfactor(k, 0)
''')
case("rfactor_row_sum_k_split_outer_first", ROW_SUM, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    k0, k1 = sch.split(k, factors=[4, None])
    sch.reorder(k0, i, k1)
    rf = sch.rfactor(k0, -1)
    sch.parallel(sch.get_loops(rf)[0])
''')
case("rfactor_row_max_predicate", ROW_MAX, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 8])
    sch.rfactor(ki, 0)
''', debug=False)
case("rfactor_row_min_int", ROW_MIN_INT, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 16])
    sch.rfactor(ko, 1)
''')
case("rfactor_row_product", ROW_PROD, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 8])
    sch.rfactor(ki, 0)
''')
case("rfactor_two_reduce_axes", SUM_2AXES, '''
    b = sch.get_block("B")
    i, k, l = sch.get_loops(b)
    sch.rfactor(l, 1)
''')
case("rfactor_fused_reduce_axes", SUM_2AXES, '''
    b = sch.get_block("B")
    i, k, l = sch.get_loops(b)
    f = sch.fuse(k, l)
    f0, f1 = sch.split(f, factors=[None, 16])
    sch.rfactor(f1, 0)
''')
case("rfactor_then_decompose", ROW_SUM, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(ki, 0)
    sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    sch.decompose_reduction(b, sch.get_loops(b)[1])
''')
case("rfactor_dynamic_m", MATMUL_DYNAMIC_M, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.rfactor(k1, 0)
''')
case("err_rfactor_rhs_first", ROW_SUM_RHS_FIRST, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.rfactor(k, 0)
''')
case("err_rfactor_init_not_identity", ROW_SUM_BAD_INIT, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.rfactor(k, 0)
''')
case("err_rfactor_unrolled_loop", ROW_SUM, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.unroll(k)
    sch.rfactor(k, 0)
''')
case("err_rfactor_loop_of_both_kinds", ROW_SUM, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    f = sch.fuse(i, k)
    sch.rfactor(f, 0)
''')
case("err_rfactor_loop_with_two_blocks", TWO_UNDER_K, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.rfactor(k, 0)
''')
case("err_rfactor_not_dominant", TWO_WRITERS, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.rfactor(k, 0)
''')
case("err_rfactor_negative_factor_axis", ROW_SUM, '''
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    sch.rfactor(k, -3)
''')

# ----------------------------------------------------------------------------- blockize

case("blockize_matmul_4x4_tile", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(i0, j0, k, i1, j1)
    sch.blockize(i1)
''')
case("blockize_matmul_inner_reduction_only", MATMUL, TILE.format(t=4) + '''
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.blockize(k1)
''')
case("blockize_matmul_spatial_tile_reduce_inside", MATMUL, TILE.format(t=16) + '''
    sch.reorder(i0, j0, i1, j1, k0, k1)
    sch.blockize(i1)
''')
case("blockize_whole_nest", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize(i0)
''')
case("blockize_unit_loop_preserve", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 1])
    sch.reorder(j, k, i1)
    sch.blockize(i1, preserve_unit_iters=True)
''')
case("blockize_unit_loop_no_preserve", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 1])
    sch.reorder(j, k, i1)
    sch.blockize(i1, preserve_unit_iters=False)
''')
case("blockize_predicate_outer", ELEMWISE_100, '''
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 32])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(j1)
''')
case("blockize_predicate_inner", ELEMWISE_100, '''
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 32])
    sch.blockize(i0)
''')
case("blockize_fused_inner", ELEMWISE_100, '''
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    f = sch.fuse(i, j)
    f0, f1 = sch.split(f, factors=[None, 128])
    sch.blockize(f1)
''')
case("blockize_then_decompose_outer", MATMUL, TILE.format(t=16) + '''
    sch.reorder(i0, j0, k0, i1, j1, k1)
    o = sch.blockize(i1)
    sch.decompose_reduction(o, k0)
''')
case("err_blockize_predicate_mixed", ELEMWISE_100, '''
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 32])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(j0, i0, j1, i1)
    sch.blockize(j1)
''')
case("err_blockize_fused_not_divisible", MATMUL, '''
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    f = sch.fuse(i, j)
    f0, f1 = sch.split(f, factors=[None, 64])
    sch.blockize(f1)
''')
case("err_blockize_two_blocks", TWO_BLOCKS_ONE_LOOP, '''
    b = sch.get_block("B")
    i, = sch.get_loops(b)
    sch.blockize(i)
''')

case("blockize_blocks_side_by_side", SIDE_BY_SIDE, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    sch.blockize([b, c])
''')
case("blockize_blocks_split_outer", SIDE_BY_SIDE, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    i, j = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize([b, c])
''')
case("blockize_blocks_tiled_shared_input", SIDE_BY_SIDE_TILED, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    sch.blockize([b, c])
''')
case("err_blockize_list_of_one_block", SIDE_BY_SIDE_TILED, '''
    b = sch.get_block("B")
    sch.blockize([b])
''')


# ----------------------------------------------------------------------------- running


class _SchProxy:
    """The TVM schedule, with ``get_block`` spelled as tvms spells it."""

    def __init__(self, sch):
        object.__setattr__(self, "_sch", sch)

    def get_block(self, name, func_name=None):
        return self._sch.get_sblock(name, func_name=func_name)

    def __getattr__(self, name):
        return getattr(self._sch, name)


def _error_text(e: BaseException) -> str:
    msg = str(e)
    name = type(e).__name__
    m = re.search(r"An error occurred in the schedule primitive '[^']*'\.", msg)
    if m and "Error message:" in msg:
        detail = re.sub(r"^ScheduleError:\s*", "", msg.split("Error message:", 1)[1].strip())
        body = m.group(0) + "\n" + detail
    else:
        body = re.sub(rf"^{re.escape(name)}:\s*", "", msg.strip())
    return f"{name}\n{body.rstrip()}\n"


def run(c: Case) -> str:
    import tvm
    from tvm import s_tir
    from tvm.script import ir as I  # noqa: E741
    from tvm.script import tirx as T

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{c.name}.input.tvms").write_text(c.source)
    (OUT / f"{c.name}.steps.py").write_text(c.steps)
    mod = tvm.script.from_source(c.source, extra_vars={"T": T, "I": I, "tvm": tvm})
    sch = s_tir.Schedule(mod, debug_mask="all" if c.debug else 0)
    for suffix in (".tvms", ".trace.py", ".error.txt"):
        path = OUT / f"{c.name}{suffix}"
        if path.exists():
            path.unlink()
    try:
        exec(compile(c.steps, f"<{c.name}.steps.py>", "exec"), {"sch": _SchProxy(sch)})
    except Exception as e:  # pylint: disable=broad-except
        (OUT / f"{c.name}.error.txt").write_text(_error_text(e))
        return "error" + ("" if c.name.startswith("err_") else "  <-- UNEXPECTED")
    (OUT / f"{c.name}.tvms").write_text(sch.mod.script() + "\n")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        sch.trace.show()
    (OUT / f"{c.name}.trace.py").write_text(buf.getvalue())
    return "ok" + ("  <-- EXPECTED AN ERROR" if c.name.startswith("err_") else "")


def main(argv: list) -> None:
    prefixes = [a for a in argv if not a.startswith("-")]
    for c in CASES:
        if prefixes and not any(c.name.startswith(p) for p in prefixes):
            continue
        print(f"{c.name}: {run(c)}")
    import tvm
    (OUT / "VERSION.txt").write_text(f"apache-tvm {tvm.__version__}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
