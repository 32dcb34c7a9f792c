"""Golden files for tvms's reduction primitives and blockize, made with the real Apache TVM.

A *developer tool* (TVM is never a dependency of tvms; tests only read the files it writes).
It complements ``tools/tvm_schedule_reference.py`` with the cases that
``tests/schedules/test_schedule_reduction.py`` and ``tests/schedules/test_schedule_blockize.py`` need: more
``decompose_reduction``, ``rfactor`` and ``blockize`` situations, and their rejections.

Run (from the repository root, with TVM 0.27 in /work/tvmref, see tools/tvm_oracle.py)::

    /work/tvmref/bin/python tools/tvm_reduction_reference.py           # every case
    /work/tvmref/bin/python tools/tvm_reduction_reference.py rfactor_  # cases whose name starts so

Per case ``<name>`` ``tools/tvm_oracle.py`` writes into ``tests/golden/schedule_reduction/``:
``<name>.input.tvms``, ``<name>.steps.py``, then either ``<name>.tvms`` (the module TVM printed)
and ``<name>.trace.py`` (its trace), or ``<name>.error.txt`` when TVM rejected the last step.
(This directory's VERSION.txt names the TVM version only.)

Schedules run with ``debug_mask="all"`` (TVM verifies its state after every step), except the
cases marked ``verify=False``: there TVM's own verification rejects a correct result (after
``rfactor`` of a loop under a ``T.where``, TVM flags the new block's binding as affine and then
finds it is not), so they run unverified.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import tvm_oracle as oracle  # noqa: E402
from tvm_oracle import MATMUL_128, MLC_REORDER, MM_RELU, ROW_SUM, row_reduction, steps  # noqa: E402

CASES = oracle.Cases(oracle.Layout(oracle.GOLDEN / "schedule_reduction", full_versions=False))
case, error_case, on_block, looped = CASES.add, CASES.error, CASES.on_block, CASES.looped

# ----------------------------------------------------------------------------- inputs (and, from
# tools/tvm_oracle.py, MM_RELU, MATMUL_128, ROW_SUM)

# The accumulator on the right, an init that is not the sum's identity: no reducer TVM knows.
ROW_SUM_RHS_FIRST = row_reduction(128, 128, "T.float32(0)", "A[vi, vk] + B[vi]")
ROW_SUM_BAD_INIT = row_reduction(128, 128, "T.float32(1)", "B[vi] + A[vi, vk]")
ROW_MAX = row_reduction(128, 100, "T.float32(-3.4028234663852886e+38)", "T.max(B[vi], A[vi, vk])")
ROW_MIN_INT = row_reduction(64, 64, "2147483647", "T.min(B[vi], A[vi, vk])", dtype="int32")
ROW_PROD = row_reduction(16, 64, "T.float32(1)", "B[vi] * A[vi, vk]")

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

# The row sum, then a second writer of B.
TWO_WRITERS = ROW_SUM + '''\
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

case("mlc_mm_relu_decompose_split_reorder", MM_RELU, steps(MLC_REORDER, "sch.decompose_reduction(block_Y, k)"))
case("mlc_mm_relu_decompose_outer_loop", MM_RELU, steps(MLC_REORDER, "sch.decompose_reduction(block_Y, j0)"))

looped("decompose_tiled_with_predicate", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 3])
    j0, j1 = sch.split(j, factors=[None, 5])
    k0, k1 = sch.split(k, factors=[None, 6])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.decompose_reduction(c, k0)
''', block="C")

looped("decompose_thread_bound_annotated", MATMUL_128, "i, j, k", '''
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.annotate(c, "foo", 1)
    sch.decompose_reduction(c, i)
''', block="C")

looped("decompose_then_schedule_update", MATMUL_128, "i, j, k", '''
    init = sch.decompose_reduction(c, i)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.unroll(sch.get_loops(c)[-1])
''', block="C")

looped("decompose_row_max_split", ROW_MAX, "i, k", '''
    i0, i1 = sch.split(i, factors=[None, 8])
    sch.reorder(i0, k, i1)
    sch.decompose_reduction(b, k)
''')

looped("decompose_dynamic_m_tiled", MATMUL_DYNAMIC_M, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 32])
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.reorder(i0, j, k0, i1, k1)
    sch.decompose_reduction(c, k0)
''', block="C")

looped("err_decompose_loop_below_reduce_loop", MATMUL_128, "i, j, k", '''
    sch.reorder(i, k, j)
    sch.decompose_reduction(c, j)
''', block="C", expect_error=True)

looped("err_decompose_not_dominant", TWO_WRITERS, "i, k", 'sch.decompose_reduction(b, i)', expect_error=True)

looped("err_decompose_twice", MATMUL_128, "i, j, k", '''
    sch.decompose_reduction(c, k)
    sch.decompose_reduction(c, i)
''', block="C", expect_error=True)

# ----------------------------------------------------------------------------- rfactor

looped("rfactor_matmul_k_split_axis2", MATMUL_128, "i, j, k", '''
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.rfactor(k1, 2)
''', block="C")

looped("rfactor_matmul_whole_k", MATMUL_128, "i, j, k", 'sch.rfactor(k, 0)', block="C")

looped("rfactor_row_sum_k_split_outer_first", ROW_SUM, "i, k", '''
    k0, k1 = sch.split(k, factors=[4, None])
    sch.reorder(k0, i, k1)
    rf = sch.rfactor(k0, -1)
    sch.parallel(sch.get_loops(rf)[0])
''')

looped("rfactor_row_max_predicate", ROW_MAX, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 8])
    sch.rfactor(ki, 0)
''', verify=False)

looped("rfactor_row_min_int", ROW_MIN_INT, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 16])
    sch.rfactor(ko, 1)
''')

looped("rfactor_row_product", ROW_PROD, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 8])
    sch.rfactor(ki, 0)
''')

looped("rfactor_two_reduce_axes", SUM_2AXES, "i, k, l", 'sch.rfactor(l, 1)')

looped("rfactor_fused_reduce_axes", SUM_2AXES, "i, k, l", '''
    f = sch.fuse(k, l)
    f0, f1 = sch.split(f, factors=[None, 16])
    sch.rfactor(f1, 0)
''')

looped("rfactor_then_decompose", ROW_SUM, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(ki, 0)
    sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    sch.decompose_reduction(b, sch.get_loops(b)[1])
''')

looped("rfactor_dynamic_m", MATMUL_DYNAMIC_M, "i, j, k", '''
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.rfactor(k1, 0)
''', block="C")

looped("err_rfactor_rhs_first", ROW_SUM_RHS_FIRST, "i, k", 'sch.rfactor(k, 0)', expect_error=True)
looped("err_rfactor_init_not_identity", ROW_SUM_BAD_INIT, "i, k", 'sch.rfactor(k, 0)', expect_error=True)

looped("err_rfactor_unrolled_loop", ROW_SUM, "i, k", '''
    sch.unroll(k)
    sch.rfactor(k, 0)
''', expect_error=True)

looped("err_rfactor_loop_of_both_kinds", ROW_SUM, "i, k", '''
    f = sch.fuse(i, k)
    sch.rfactor(f, 0)
''', expect_error=True)

looped("err_rfactor_loop_with_two_blocks", TWO_UNDER_K, "i, k", 'sch.rfactor(k, 0)', expect_error=True)
looped("err_rfactor_not_dominant", TWO_WRITERS, "i, k", 'sch.rfactor(k, 0)', expect_error=True)
looped("err_rfactor_negative_factor_axis", ROW_SUM, "i, k", 'sch.rfactor(k, -3)', expect_error=True)

# ----------------------------------------------------------------------------- blockize

looped("blockize_matmul_4x4_tile", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(i0, j0, k, i1, j1)
    sch.blockize(i1)
''', block="C")

case("blockize_matmul_inner_reduction_only", MATMUL_128, TILE.format(t=4) + '''
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.blockize(k1)
''')

case("blockize_matmul_spatial_tile_reduce_inside", MATMUL_128, TILE.format(t=16) + '''
    sch.reorder(i0, j0, i1, j1, k0, k1)
    sch.blockize(i1)
''')

looped("blockize_whole_nest", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize(i0)
''', block="C")

looped("blockize_unit_loop_preserve", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 1])
    sch.reorder(j, k, i1)
    sch.blockize(i1, preserve_unit_iters=True)
''', block="C")

looped("blockize_unit_loop_no_preserve", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 1])
    sch.reorder(j, k, i1)
    sch.blockize(i1, preserve_unit_iters=False)
''', block="C")

looped("blockize_predicate_outer", ELEMWISE_100, "i, j", '''
    i0, i1 = sch.split(i, factors=[None, 32])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(j1)
''')

looped("blockize_predicate_inner", ELEMWISE_100, "i, j", '''
    i0, i1 = sch.split(i, factors=[None, 32])
    sch.blockize(i0)
''')

looped("blockize_fused_inner", ELEMWISE_100, "i, j", '''
    f = sch.fuse(i, j)
    f0, f1 = sch.split(f, factors=[None, 128])
    sch.blockize(f1)
''')

case("blockize_then_decompose_outer", MATMUL_128, TILE.format(t=16) + '''
    sch.reorder(i0, j0, k0, i1, j1, k1)
    o = sch.blockize(i1)
    sch.decompose_reduction(o, k0)
''')

looped("err_blockize_predicate_mixed", ELEMWISE_100, "i, j", '''
    i0, i1 = sch.split(i, factors=[None, 32])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(j0, i0, j1, i1)
    sch.blockize(j1)
''', expect_error=True)

looped("err_blockize_fused_not_divisible", MATMUL_128, "i, j, k", '''
    f = sch.fuse(i, j)
    f0, f1 = sch.split(f, factors=[None, 64])
    sch.blockize(f1)
''', block="C", expect_error=True)

looped("err_blockize_two_blocks", TWO_BLOCKS_ONE_LOOP, "i,", 'sch.blockize(i)', expect_error=True)

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

on_block("err_blockize_list_of_one_block", SIDE_BY_SIDE_TILED, 'sch.blockize([b])', expect_error=True)


if __name__ == "__main__":
    sys.exit(oracle.main(sys.argv[1:], CASES))
