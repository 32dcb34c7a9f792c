"""Generate golden files for ``tvms.tir.Schedule`` and ``tvms.dlight`` from real Apache TVM.

A *developer tool* only (TVM is never a dependency of tvms; tests only read the files written
here, through ``tests/support/schedule_cases.py``).  It holds the schedule cases of every primitive
family (an input module as TVMScript text + schedule steps as Python code, run and written by
``tools/tvm_oracle.py`` into ``tests/golden/schedule/``) and DLight cases (an input module + a
rule list + a target, written into ``tests/golden/dlight/``).

Setup as in ``tools/tvm_oracle.py``; run from the repository root::

    /work/tvmref/bin/python tools/tvm_schedule_reference.py            # every case
    /work/tvmref/bin/python tools/tvm_schedule_reference.py mlc_ gpu_  # cases whose name starts so
    /work/tvmref/bin/python tools/tvm_schedule_reference.py --list

The DLight inputs are modules that tvms itself legalizes (the ops tvms lowers, printed by
tvms's printer in the classic dialect); they are kept in ``tools/tvm_schedule_reference_inputs/``
and are made with *tvms's* Python (no TVM involved)::

    python tools/tvm_schedule_reference.py --make-dlight-inputs

Per schedule case: ``<name>.input.tvms``, ``<name>.steps.py``, then ``<name>.tvms`` and
``<name>.trace.py`` or ``<name>.error.txt`` (see ``tools/tvm_oracle.py``).

Per DLight case (tests/golden/dlight/): ``<name>.input.tvms`` (the module TVM parsed, modern
dialect), ``<name>.rules.txt`` (line 1: the rule class names in ``tvm.s_tir.dlight.gpu``, comma
separated; line 2: the target, exactly the JSON text given to ``tvm.target.Target``) and
``<name>.tvms`` (``ApplyDefaultSchedule(*rules)(mod).script()`` under ``with target:``), and
``<name>.applied.txt``: one line per PrimFunc, ``<function name> <rule that scheduled it>``
(``none`` when no rule applies).

TVM 0.27 notes: the CLI target form ``"cuda -arch=sm_90"`` is rejected ("CLI target string form
is no longer supported"); targets are JSON dicts.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from dataclasses import dataclass

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import tvm_oracle as oracle  # noqa: E402
from tvm_oracle import (EW2D, GPU_MATMUL, GPU_WINDOW_SUM, MATMUL_128, MLC_GET_RELU, MLC_MOVE_RELU,  # noqa: E402
                        MLC_REORDER, MLC_SPLIT, MM_RELU, PRODUCER_CONSUMER, ROOT, ROW_SUM, clean, steps)

DLIGHT_INPUTS = ROOT / "tools" / "tvm_schedule_reference_inputs"

CASES = oracle.Cases(oracle.Layout(oracle.GOLDEN / "schedule"))
case, error_case, on_block, looped = CASES.add, CASES.error, CASES.on_block, CASES.looped


# =============================================================================================
# Input modules (and, from tools/tvm_oracle.py, MM_RELU, GPU_WINDOW_SUM, GPU_MATMUL, EW2D,
# PRODUCER_CONSUMER, MATMUL_128, ROW_SUM)
# =============================================================================================

# mlc.ai GPU chapter: vector add.
GPU_VECTOR_ADD = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class MyModuleVecAdd:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.spatial(1024, i)
                C[vi] = A[vi] + B[vi]
'''

EW3D = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 32, 64), "float32"), B: T.Buffer((16, 32, 64), "float32")):
    for i, j, k in T.grid(16, 32, 64):
        with T.sblock("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] + T.float32(1)
'''

EW1D_ODD = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i in range(100):
        with T.sblock("B"):
            vi = T.axis.spatial(100, i)
            B[vi] = A[vi] + T.float32(1)
'''

EW_SYM_INT32 = '''
@T.prim_func(s_tir=True)
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    for i, j in T.grid(n, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''

EW_SYM_INT64 = '''
@T.prim_func(s_tir=True)
def main(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, T.int64(64)), "float32")
    B = T.match_buffer(b, (n, T.int64(64)), "float32")
    for i, j in T.grid(n, T.int64(64)):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''

# A chain of four elementwise blocks.
EW_CHAIN = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), D: T.Buffer((64, 64), "float32")):
    B = T.sblock_alloc_buffer((64, 64), "float32")
    C = T.sblock_alloc_buffer((64, 64), "float32")
    E = T.sblock_alloc_buffer((64, 64), "float32")
    for i, j in T.grid(64, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(64, 64):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.sblock("E"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = C[vi, vj] - T.float32(3)
    for i, j in T.grid(64, 64):
        with T.sblock("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(E[vi, vj], T.float32(0))
'''

# Full sum of a vector into a 1-element buffer.
VEC_SUM = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1,), "float32")):
    for k in range(1024):
        with T.sblock("B"):
            vk = T.axis.reduce(1024, k)
            with T.init():
                B[0] = T.float32(0)
            B[0] = B[0] + A[vk]
'''

# Annotated input for unannotate.
ANNOTATED = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i in T.serial(128, annotations={"pragma_auto_unroll_max_step": 16, "pragma_unroll_explicit": 1}):
        for j in range(128):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                T.sblock_attr({"meta_schedule.tiling_structure": "SSRSRS", "schedule_rule": "None"})
                B[vi, vj] = A[vi, vj] * T.float32(2)
'''

# tvms's LegalizeOps output for R.add with T.int64 shapes (legalized-op style).
LEGAL_ADD = '''
@T.prim_func(private=True, s_tir=True)
def add(m: T.Buffer((T.int64(256), T.int64(128)), "float32"), c: T.Buffer((T.int64(128),), "float32"), T_add: T.Buffer((T.int64(256), T.int64(128)), "float32")):
    T.func_attr({"tir.noalias": True})
    for ax0, ax1 in T.grid(T.int64(256), T.int64(128)):
        with T.sblock("T_add"):
            v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(m[v_ax0, v_ax1], c[v_ax1])
            T.writes(T_add[v_ax0, v_ax1])
            T_add[v_ax0, v_ax1] = m[v_ax0, v_ax1] + c[v_ax1]
'''

LEGAL_MATMUL = '''
@T.prim_func(private=True, s_tir=True)
def matmul(a: T.Buffer((T.int64(256), T.int64(512)), "float32"), b: T.Buffer((T.int64(512), T.int64(128)), "float32"), matmul: T.Buffer((T.int64(256), T.int64(128)), "float32")):
    T.func_attr({"tir.noalias": True})
    for i0, i1, k in T.grid(T.int64(256), T.int64(128), T.int64(512)):
        with T.sblock("matmul"):
            v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
            T.reads(a[v_i0, v_k], b[v_k, v_i1])
            T.writes(matmul[v_i0, v_i1])
            with T.init():
                matmul[v_i0, v_i1] = T.float32(0.0)
            matmul[v_i0, v_i1] = matmul[v_i0, v_i1] + a[v_i0, v_k] * b[v_k, v_i1]
'''

LEGAL_TRANSPOSE = '''
@T.prim_func(private=True, s_tir=True)
def transpose(a: T.Buffer((T.int64(256), T.int64(512)), "float32"), T_transpose: T.Buffer((T.int64(512), T.int64(256)), "float32")):
    T.func_attr({"tir.noalias": True})
    for ax0, ax1 in T.grid(T.int64(512), T.int64(256)):
        with T.sblock("T_transpose"):
            v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(a[v_ax1, v_ax0])
            T.writes(T_transpose[v_ax0, v_ax1])
            T_transpose[v_ax0, v_ax1] = a[v_ax1, v_ax0]
'''

LEGAL_SOFTMAX = '''
@T.prim_func(private=True, s_tir=True)
def softmax(x: T.Buffer((T.int64(4), T.int64(256)), "float32"), T_softmax_norm: T.Buffer((T.int64(4), T.int64(256)), "float32")):
    T.func_attr({"tir.noalias": True})
    T_softmax_maxelem = T.sblock_alloc_buffer((T.int64(4),))
    T_softmax_exp = T.sblock_alloc_buffer((T.int64(4), T.int64(256)))
    T_softmax_expsum = T.sblock_alloc_buffer((T.int64(4),))
    for i0, k in T.grid(T.int64(4), T.int64(256)):
        with T.sblock("T_softmax_maxelem"):
            v_i0, v_k = T.axis.remap("SR", [i0, k])
            T.reads(x[v_i0, v_k])
            T.writes(T_softmax_maxelem[v_i0])
            with T.init():
                T_softmax_maxelem[v_i0] = T.float32(-340282346638528859811704183484516925440.0)
            T_softmax_maxelem[v_i0] = T.max(T_softmax_maxelem[v_i0], x[v_i0, v_k])
    for i0, i1 in T.grid(T.int64(4), T.int64(256)):
        with T.sblock("T_softmax_exp"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(x[v_i0, v_i1], T_softmax_maxelem[v_i0])
            T.writes(T_softmax_exp[v_i0, v_i1])
            T_softmax_exp[v_i0, v_i1] = T.exp(x[v_i0, v_i1] - T_softmax_maxelem[v_i0])
    for i0, k in T.grid(T.int64(4), T.int64(256)):
        with T.sblock("T_softmax_expsum"):
            v_i0, v_k = T.axis.remap("SR", [i0, k])
            T.reads(T_softmax_exp[v_i0, v_k])
            T.writes(T_softmax_expsum[v_i0])
            with T.init():
                T_softmax_expsum[v_i0] = T.float32(0.0)
            T_softmax_expsum[v_i0] = T_softmax_expsum[v_i0] + T_softmax_exp[v_i0, v_k]
    for i0, i1 in T.grid(T.int64(4), T.int64(256)):
        with T.sblock("T_softmax_norm"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(T_softmax_exp[v_i0, v_i1], T_softmax_expsum[v_i0])
            T.writes(T_softmax_norm[v_i0, v_i1])
            T.sblock_attr({"axis": 1})
            T_softmax_norm[v_i0, v_i1] = T_softmax_exp[v_i0, v_i1] / T_softmax_expsum[v_i0]
'''

# Seed 000's fused function (zero pipeline), int64 shapes.
SEED_FUSED_MATMUL_ADD_RELU = '''
@T.prim_func(private=True, s_tir=True)
def fused_matmul_add_relu(x: T.Buffer((T.int64(1), T.int64(784)), "float32"), lv: T.Buffer((T.int64(784), T.int64(256)), "float32"), p_fc1_bias: T.Buffer((T.int64(256),), "float32"), compute_intermediate: T.Buffer((T.int64(1), T.int64(256)), "float32")):
    T.func_attr({"tir.noalias": True})
    matmul_intermediate = T.sblock_alloc_buffer((T.int64(1), T.int64(256)))
    T_add_intermediate = T.sblock_alloc_buffer((T.int64(1), T.int64(256)))
    for i0, i1, k in T.grid(T.int64(1), T.int64(256), T.int64(784)):
        with T.sblock("matmul"):
            v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
            T.reads(x[v_i0, v_k], lv[v_k, v_i1])
            T.writes(matmul_intermediate[v_i0, v_i1])
            with T.init():
                matmul_intermediate[v_i0, v_i1] = T.float32(0.0)
            matmul_intermediate[v_i0, v_i1] = matmul_intermediate[v_i0, v_i1] + x[v_i0, v_k] * lv[v_k, v_i1]
    for ax0, ax1 in T.grid(T.int64(1), T.int64(256)):
        with T.sblock("T_add"):
            v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(matmul_intermediate[v_ax0, v_ax1], p_fc1_bias[v_ax1])
            T.writes(T_add_intermediate[v_ax0, v_ax1])
            T_add_intermediate[v_ax0, v_ax1] = matmul_intermediate[v_ax0, v_ax1] + p_fc1_bias[v_ax1]
    for i0, i1 in T.grid(T.int64(1), T.int64(256)):
        with T.sblock("compute"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(T_add_intermediate[v_i0, v_i1])
            T.writes(compute_intermediate[v_i0, v_i1])
            compute_intermediate[v_i0, v_i1] = T.max(T_add_intermediate[v_i0, v_i1], T.float32(0.0))
'''

# Two independent loop nests (for reorder/fuse/compute_at errors).
TWO_NESTS = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j in T.grid(32, 32):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(32, 32):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2)
'''


# =============================================================================================
# Schedule cases
# =============================================================================================

# ---- mlc.ai chapter 2: mm_relu -------------------------------------------------------------

case("mlc_mm_relu_split", MM_RELU, MLC_SPLIT)
case("mlc_mm_relu_reorder", MM_RELU, MLC_REORDER)
case("mlc_mm_relu_reverse_compute_at", MM_RELU, MLC_MOVE_RELU)
case("mlc_mm_relu_transform", MM_RELU, steps(MLC_MOVE_RELU, "sch.decompose_reduction(block_Y, k)"))

case("mlc_mm_relu_transform_jfactor8", MM_RELU, '''
    def transform(sch, jfactor):
        block_Y = sch.get_block("Y", func_name="mm_relu")
        i, j, k = sch.get_loops(block_Y)
        j0, j1 = sch.split(j, factors=[None, jfactor])
        sch.reorder(j0, k, j1)
        block_C = sch.get_block("C", "mm_relu")
        sch.reverse_compute_at(block_C, j0)
        return sch

    transform(sch, jfactor=8)
''')

case("mlc_mm_relu_parallel_vectorize_unroll", MM_RELU, steps(MLC_MOVE_RELU, '''
    sch.parallel(i)
    sch.unroll(j1)
    sch.vectorize(sch.get_loops(block_C)[-1])
    sch.decompose_reduction(block_Y, k)
'''))

case("mlc_mm_relu_reverse_compute_at_preserve_unit_loops", MM_RELU,
     steps(MLC_REORDER, MLC_GET_RELU, "sch.reverse_compute_at(block_C, j0, preserve_unit_loops=True)"))

case("mlc_mm_relu_compute_at_producer", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    block_C = sch.get_block("C", func_name="mm_relu")
    i, j = sch.get_loops(block_C)
    sch.compute_at(block_Y, j)
''')

case("mlc_mm_relu_cache_write_local", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    Y_local = sch.cache_write(block_Y, 0, "local")
    i, j, k = sch.get_loops(block_Y)
''')

# ---- mlc.ai GPU chapter --------------------------------------------------------------------

case("gpu_vector_add_bind", GPU_VECTOR_ADD, '''
    block_C = sch.get_block("C")
    i, = sch.get_loops(block=block_C)
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
''')

# The window sum, as the course builds it up: bind, then a shared copy of A per thread block,
# then fetched cooperatively by the block's threads.
WINDOW_SUM_BIND = '''
nthread = 128
block_C = sch.get_block("C")
i, = sch.get_loops(block=block_C)
i0, i1 = sch.split(i, [None, nthread])
sch.bind(i0, "blockIdx.x")
sch.bind(i1, "threadIdx.x")
'''
WINDOW_SUM_SHARED = WINDOW_SUM_BIND + '''\
A_shared = sch.cache_read(block_C, read_buffer_index=0, storage_scope="shared")
sch.compute_at(A_shared, i1)
'''
case("gpu_window_sum_bind", GPU_WINDOW_SUM, WINDOW_SUM_BIND)
case("gpu_window_sum_shared", GPU_WINDOW_SUM, WINDOW_SUM_SHARED)

case("gpu_window_sum_shared_coop_fetch", GPU_WINDOW_SUM, steps(WINDOW_SUM_SHARED, '''
    ax = sch.get_loops(A_shared)[-1]
    ax0, ax1 = sch.split(ax, [None, nthread])
    sch.bind(ax1, "threadIdx.x")
'''))

case("gpu_matmul_blocking", GPU_MATMUL, '''
    def blocking(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
        block_C = sch.get_block("C", "main")
        C_local = sch.cache_write(block_C, 0, "local")
        i, j, k = sch.get_loops(block=block_C)
        i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
        j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
        k0, k1 = sch.split(loop=k, factors=[None, tile_k])
        sch.unroll(k1)
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        sch.reverse_compute_at(C_local, j1)
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        sch.bind(i1, "threadIdx.y")
        sch.bind(j1, "threadIdx.x")
        sch.decompose_reduction(block_C, k0)
        return sch

    blocking(sch, 8, 8, 8, 8, 4)
''')

case("gpu_matmul_blocking_shared", GPU_MATMUL, '''
    def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
        read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
        sch.compute_at(block=read_cache, loop=read_loc)
        # vectorized cooperative fetch
        inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
        inner = sch.fuse(inner0, inner1)
        _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
        sch.vectorize(vec)
        sch.bind(tx, "threadIdx.x")

    def blocking_with_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
        block_C = sch.get_block("C", "main")
        C_local = sch.cache_write(block_C, 0, "local")
        i, j, k = sch.get_loops(block=block_C)
        i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
        j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
        k0, k1 = sch.split(loop=k, factors=[None, tile_k])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        sch.reverse_compute_at(C_local, j1)
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        tx = sch.fuse(i1, j1)
        sch.bind(tx, "threadIdx.x")
        nthread = tile_block_y * tile_block_x
        cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
        cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
        sch.decompose_reduction(block_C, k0)
        return sch

    blocking_with_shared(sch, 8, 8, 8, 8, 8)
''')

# ---- split ---------------------------------------------------------------------------------

looped("split_two", EW2D, "i, j", 'sch.split(i, factors=[None, 16])')
looped("split_outer_factor", EW2D, "i, j", 'sch.split(j, factors=[8, None])')
looped("split_three", EW2D, "i, j", 'sch.split(j, factors=[2, None, 8])')
looped("split_all_factors_given", EW2D, "i, j", 'sch.split(i, factors=[4, 4, 8])')
looped("split_nondivisible_predicate", EW1D_ODD, "i,", 'sch.split(i, factors=[None, 32])')
looped("split_product_exceeds_extent", EW1D_ODD, "i,", 'sch.split(i, factors=[8, 16])')

looped("split_nondivisible_then_fuse", EW1D_ODD, "i,", '''
    i0, i1, i2 = sch.split(i, factors=[None, 4, 8])
    sch.fuse(i1, i2)
''')

looped("split_unit_factor", EW2D, "i, j", 'sch.split(i, factors=[None, 1])')
looped("split_unit_factor_no_preserve", EW2D, "i, j", 'sch.split(i, factors=[None, 1], preserve_unit_iters=False)')
looped("split_symbolic_int32", EW_SYM_INT32, "i, j", 'sch.split(i, factors=[None, 32])')
looped("split_symbolic_int64", EW_SYM_INT64, "i, j", 'sch.split(i, factors=[None, 32])')

case("split_int64_legalized", LEGAL_ADD, '''
    b = sch.get_block("T_add", func_name="main")
    ax0, ax1 = sch.get_loops(b)
    sch.split(ax1, factors=[None, 32])
    sch.split(ax0, factors=[4, None])
''')

# ---- fuse ----------------------------------------------------------------------------------

looped("fuse_two", EW2D, "i, j", 'sch.fuse(i, j)')
looped("fuse_three", EW3D, "i, j, k", 'sch.fuse(i, j, k)')
looped("fuse_inner_two_of_three", EW3D, "i, j, k", 'sch.fuse(j, k)')

looped("fuse_then_split_bind", EW2D, "i, j", '''
    f = sch.fuse(i, j)
    bx, tx = sch.split(f, factors=[None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
''')

case("fuse_int64_legalized", LEGAL_TRANSPOSE, '''
    b = sch.get_block("T_transpose", func_name="main")
    ax0, ax1 = sch.get_loops(b)
    f = sch.fuse(ax0, ax1)
    sch.split(f, factors=[None, 1024])
''')

looped("fuse_symbolic", EW_SYM_INT32, "i, j", '''
    f = sch.fuse(i, j)
    sch.split(f, factors=[None, 128])
''')

# ---- reorder -------------------------------------------------------------------------------

looped("reorder_two", EW2D, "i, j", 'sch.reorder(j, i)')
looped("reorder_non_adjacent", EW3D, "i, j, k", 'sch.reorder(k, i)')

looped("reorder_tile", EW2D, "i, j", '''
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1)
''')

case("reorder_matmul_k_outer", MATMUL_128, '''
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    sch.reorder(k, i, j)
''')

# ---- loop kinds, bind, annotations ---------------------------------------------------------

looped("parallel_outer", EW2D, "i, j", 'sch.parallel(i)')

looped("vectorize_inner", EW2D, "i, j", '''
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.vectorize(j1)
''')

looped("unroll_inner", EW2D, "i, j", '''
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.unroll(j1)
''')

looped("parallel_vectorize_unroll", EW3D, "i, j, k", '''
    sch.parallel(i)
    sch.unroll(j)
    sch.vectorize(k)
''')

looped("vectorize_symbolic_extent", EW_SYM_INT32, "i, j", 'sch.vectorize(i)')

looped("bind_block_thread", EW2D, "i, j", '''
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
''')

looped("bind_reduction_thread", ROW_SUM, "i, k", '''
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")
''')

looped("annotate_loop_and_block", EW2D, "i, j", '''
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(j, "pragma_unroll_explicit", 1)
    sch.annotate(b, "meta_schedule.tiling_structure", "SSRSRS")
    sch.annotate(b, "some_float", 0.5)
''')

looped("unannotate_loop_and_block", ANNOTATED, "i, j", '''
    sch.unannotate(i, "pragma_unroll_explicit")
    sch.unannotate(b, "schedule_rule")
''')

# ---- block queries -------------------------------------------------------------------------

on_block("get_child_blocks_inline_all_but_last", EW_CHAIN, '''
    blocks = sch.get_child_blocks(root)
    for b in blocks[:-1]:
        sch.compute_inline(b)
''', block="root")

case("get_child_blocks_of_loop", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    block_C = sch.get_block("C", func_name="mm_relu")
    sch.reverse_compute_at(block_C, i)
    children = sch.get_child_blocks(i)
    sch.annotate(children[1], "child_index", 1)
''')

on_block("get_producers_compute_inline", EW_CHAIN, '''
    (e,) = sch.get_producers(d)
    sch.compute_inline(e)
    (c,) = sch.get_producers(d)
    sch.compute_inline(c)
''', block="D")

on_block("get_consumers_reverse_compute_inline", EW_CHAIN, '''
    (c,) = sch.get_consumers(b)
    sch.reverse_compute_inline(c)
''')

case("get_consumers_reverse_compute_at", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    consumer = sch.get_consumers(block_Y)[0]
    sch.reverse_compute_at(consumer, j)
''')

# ---- compute_at / reverse_compute_at -------------------------------------------------------

# compute_at moves B under C's loops, reverse_compute_at moves C under B's; the loops tiled first
# in the *_tiled cases.
for prim, moved, host in (("compute_at", "b", "c"), ("reverse_compute_at", "c", "b")):
    for where, args in (("inner", "j"), ("outer", "i"), ("inner_preserve_unit_loops", "j, preserve_unit_loops=True")):
        case(f"{prim}_{where}", PRODUCER_CONSUMER, f'''
            b = sch.get_block("B")
            c = sch.get_block("C")
            i, j = sch.get_loops({host})
            sch.{prim}({moved}, {args})
        ''')

for name, host, (ti, tj), call in (
    ("compute_at_tiled", "c", (16, 16), "sch.compute_at(b, j0)"),
    ("compute_at_tiled_preserve_unit_loops", "c", (16, 16), "sch.compute_at(b, j0, preserve_unit_loops=True)"),
    ("reverse_compute_at_tiled", "b", (32, 8), "sch.reverse_compute_at(c, j0)"),
):
    case(name, PRODUCER_CONSUMER, f'''
        b = sch.get_block("B")
        c = sch.get_block("C")
        i, j = sch.get_loops({host})
        i0, i1 = sch.split(i, factors=[None, {ti}])
        j0, j1 = sch.split(j, factors=[None, {tj}])
        sch.reorder(i0, j0, i1, j1)
        {call}
    ''')

case("compute_at_softmax_int64", LEGAL_SOFTMAX, '''
    norm = sch.get_block("T_softmax_norm", func_name="main")
    i0, i1 = sch.get_loops(norm)
    sch.compute_at(sch.get_block("T_softmax_expsum"), i0)
    sch.compute_at(sch.get_block("T_softmax_exp"), i0)
    sch.compute_at(sch.get_block("T_softmax_maxelem"), i0)
''')

# ---- inline --------------------------------------------------------------------------------

on_block("compute_inline", PRODUCER_CONSUMER, 'sch.compute_inline(b)')
on_block("reverse_compute_inline", PRODUCER_CONSUMER, 'sch.reverse_compute_inline(c)', block="C")

case("compute_inline_seed_fused", SEED_FUSED_MATMUL_ADD_RELU, '''
    sch.compute_inline(sch.get_block("T_add", func_name="main"))
''')

case("reverse_compute_inline_seed_fused", SEED_FUSED_MATMUL_ADD_RELU, '''
    relu = sch.get_block("compute", func_name="main")
    sch.reverse_compute_inline(relu)
''')

case("compute_inline_softmax_exp", LEGAL_SOFTMAX, '''
    sch.compute_inline(sch.get_block("T_softmax_exp"))
''')

# ---- caches and scopes ---------------------------------------------------------------------

on_block("cache_read_global", EW2D, 'sch.cache_read(b, 0, "global")')

looped("cache_read_shared_compute_at", EW2D, "i, j", '''
    A_shared = sch.cache_read(b, 0, "shared")
    sch.compute_at(A_shared, i)
''')

looped("cache_read_local_matmul", MATMUL_128, "i, j, k", '''
    A_local = sch.cache_read(c, 0, "local")
    B_local = sch.cache_read(c, 1, "local")
    sch.compute_at(A_local, k)
    sch.compute_at(B_local, k)
''', block="C")

on_block("cache_write_global", EW2D, 'sch.cache_write(b, 0, "global")')

looped("cache_write_local_reverse_compute_at", MATMUL_128, "i, j, k", '''
    C_local = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(C_local, i)
''', block="C")

on_block("cache_write_shared", PRODUCER_CONSUMER, 'sch.cache_write(b, 0, "shared")')
on_block("cache_read_intermediate", PRODUCER_CONSUMER, 'sch.cache_read(c, 0, "local")', block="C")
on_block("set_scope_shared", PRODUCER_CONSUMER, 'sch.set_scope(b, 0, "shared")')

case("set_scope_local", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    sch.set_scope(block_Y, 0, "local")
''')

# ---- reductions ----------------------------------------------------------------------------

looped("decompose_reduction_innermost", MATMUL_128, "i, j, k", 'sch.decompose_reduction(c, k)', block="C")
looped("decompose_reduction_middle", MATMUL_128, "i, j, k", 'sch.decompose_reduction(c, j)', block="C")
looped("decompose_reduction_outermost", MATMUL_128, "i, j, k", 'sch.decompose_reduction(c, i)', block="C")

looped("decompose_reduction_k_outer", MATMUL_128, "i, j, k", '''
    sch.reorder(k, i, j)
    sch.decompose_reduction(c, k)
''', block="C")

looped("decompose_reduction_row_sum", ROW_SUM, "i, k", 'sch.decompose_reduction(b, k)')

looped("rfactor_inner", ROW_SUM, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 4])
    sch.rfactor(ki, 0)
''')

looped("rfactor_outer", ROW_SUM, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 4])
    sch.rfactor(ko, 1)
''')

looped("rfactor_vector_sum", VEC_SUM, "k,", '''
    ko, ki = sch.split(k, factors=[None, 32])
    rf = sch.rfactor(ki, 0)
    sch.vectorize(sch.get_loops(rf)[-1])
''')

looped("rfactor_then_bind", ROW_SUM, "i, k", '''
    ko, ki = sch.split(k, factors=[None, 32])
    rf = sch.rfactor(ki, 1)
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
''')

# ---- blockize, storage_align ---------------------------------------------------------------

looped("blockize_inner_tile", EW2D, "i, j", '''
    i0, i1 = sch.split(i, factors=[None, 16])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)
''')

looped("blockize_matmul", MATMUL_128, "i, j, k", '''
    i0, i1 = sch.split(i, factors=[None, 16])
    j0, j1 = sch.split(j, factors=[None, 16])
    k0, k1 = sch.split(k, factors=[None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.blockize(i1)
''', block="C")

looped("storage_align_shared", EW2D, "i, j", '''
    A_shared = sch.cache_read(b, 0, "shared")
    sch.compute_at(A_shared, i)
    sch.storage_align(A_shared, 0, axis=0, factor=32, offset=1)
''')

on_block("storage_align_intermediate", PRODUCER_CONSUMER, 'sch.storage_align(b, 0, axis=1, factor=64, offset=4)')

# ---- transform_layout ----------------------------------------------------------------------

on_block("transform_layout_transpose_write", PRODUCER_CONSUMER,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (j, i))')

on_block("transform_layout_pack", PRODUCER_CONSUMER,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (i // 4, j, i % 4))')

on_block("transform_layout_by_buffer_name", PRODUCER_CONSUMER,
         'sch.transform_layout(c, "B", lambda i, j: (j, i))', block="C")

on_block("transform_layout_read_param", EW2D,
         'sch.transform_layout(b, ("read", 0), lambda i, j: (i // 16, j // 16, i % 16, j % 16))')

case("transform_layout_mm_relu", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    sch.transform_layout(block_Y, ("write", 0), lambda i, j: (i // 4, j, i % 4))
''')

# ---- int64 (legalized-op style) ------------------------------------------------------------

case("int64_matmul_tile_decompose", LEGAL_MATMUL, '''
    b = sch.get_block("matmul", func_name="main")
    i0, i1, k = sch.get_loops(b)
    i0_0, i0_1 = sch.split(i0, factors=[None, 32])
    i1_0, i1_1 = sch.split(i1, factors=[None, 32])
    k_0, k_1 = sch.split(k, factors=[None, 8])
    sch.reorder(i0_0, i1_0, k_0, i0_1, i1_1, k_1)
    sch.decompose_reduction(b, k_0)
''')

case("int64_matmul_gpu_bind", LEGAL_MATMUL, '''
    b = sch.get_block("matmul", func_name="main")
    i0, i1, k = sch.get_loops(b)
    local = sch.cache_write(b, 0, "local")
    by, ty = sch.split(i0, factors=[None, 16])
    bx, tx = sch.split(i1, factors=[None, 16])
    sch.reorder(by, bx, ty, tx, k)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.reverse_compute_at(local, tx)
    sch.decompose_reduction(b, k)
''')

case("int64_add_fuse_split_vectorize", LEGAL_ADD, '''
    b = sch.get_block("T_add", func_name="main")
    f = sch.fuse(*sch.get_loops(b))
    o, i = sch.split(f, factors=[None, 8])
    sch.parallel(o)
    sch.vectorize(i)
''')

case("int64_softmax_rfactor", LEGAL_SOFTMAX, '''
    b = sch.get_block("T_softmax_expsum")
    i0, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 32])
    sch.rfactor(ki, 0)
''')

# =============================================================================================
# Error cases: TVM rejects these (the preconditions a schedule primitive checks).
# =============================================================================================

looped("err_split_two_none", EW2D, "i, j", 'sch.split(i, factors=[None, None])', expect_error=True)
looped("err_split_product_too_small", EW2D, "i, j", 'sch.split(i, factors=[4, 16])', expect_error=True)
looped("err_split_zero_factor", EW2D, "i, j", 'sch.split(i, factors=[None, 0])', expect_error=True)

error_case("err_reorder_not_one_chain", TWO_NESTS, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    i, _ = sch.get_loops(b)
    _, j = sch.get_loops(c)
    sch.reorder(j, i)
''')

looped("err_reorder_duplicate_loop", EW2D, "i, j", 'sch.reorder(i, i)', expect_error=True)
looped("err_fuse_non_adjacent", EW3D, "i, j, k", 'sch.fuse(i, k)', expect_error=True)
looped("err_fuse_wrong_order", EW2D, "i, j", 'sch.fuse(j, i)', expect_error=True)

error_case("err_fuse_different_nests", TWO_NESTS, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    i, _ = sch.get_loops(b)
    _, j = sch.get_loops(c)
    sch.fuse(i, j)
''')

error_case("err_compute_inline_reduction", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    sch.compute_inline(block_Y)
''')

on_block("err_compute_inline_output_block", PRODUCER_CONSUMER, 'sch.compute_inline(c)', block="C", expect_error=True)

error_case("err_reverse_compute_inline_into_reduction", MM_RELU, '''
    block_C = sch.get_block("C", func_name="mm_relu")
    sch.reverse_compute_inline(block_C)
''')

error_case("err_reverse_compute_inline_into_matmul_seed_fused", SEED_FUSED_MATMUL_ADD_RELU, '''
    sch.reverse_compute_inline(sch.get_block("T_add", func_name="main"))
''')

on_block("err_reverse_compute_inline_input_reader", PRODUCER_CONSUMER,
         'sch.reverse_compute_inline(b)', expect_error=True)

error_case("err_compute_at_output_block", PRODUCER_CONSUMER, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    i, j = sch.get_loops(b)
    sch.compute_at(c, i)
''')

looped("err_compute_at_own_loop", PRODUCER_CONSUMER, "i, j", 'sch.compute_at(b, i)', expect_error=True)
looped("err_parallel_reduce_loop", MATMUL_128, "i, j, k", 'sch.parallel(k)', block="C", expect_error=True)
looped("err_vectorize_reduce_loop", MATMUL_128, "i, j, k", 'sch.vectorize(k)', block="C", expect_error=True)
looped("err_bind_block_idx_to_reduce_loop", ROW_SUM, "i, k", 'sch.bind(k, "blockIdx.x")', expect_error=True)
looped("err_decompose_reduction_spatial_block", EW2D, "i, j", 'sch.decompose_reduction(b, i)', expect_error=True)

error_case("err_decompose_reduction_loop_not_ancestor", MM_RELU, '''
    block_Y = sch.get_block("Y", func_name="mm_relu")
    block_C = sch.get_block("C", func_name="mm_relu")
    i, j = sch.get_loops(block_C)
    sch.decompose_reduction(block_Y, i)
''')

looped("err_rfactor_spatial_loop", ROW_SUM, "i, k", 'sch.rfactor(i, 0)', expect_error=True)
looped("err_rfactor_bad_factor_axis", ROW_SUM, "i, k", 'sch.rfactor(k, 5)', expect_error=True)
on_block("err_cache_read_index_out_of_range", EW2D, 'sch.cache_read(b, 3, "shared")', expect_error=True)
on_block("err_cache_write_index_out_of_range", EW2D, 'sch.cache_write(b, 1, "local")', expect_error=True)
on_block("err_set_scope_output_buffer", EW2D, 'sch.set_scope(b, 0, "shared")', expect_error=True)

on_block("err_storage_align_bad_axis", PRODUCER_CONSUMER,
         'sch.storage_align(b, 0, axis=5, factor=32, offset=1)', expect_error=True)

error_case("err_get_block_missing", EW2D, '''
    sch.get_block("nope")
''')

on_block("err_transform_layout_wrong_arity", PRODUCER_CONSUMER,
         'sch.transform_layout(b, ("write", 0), lambda i: (i,))', expect_error=True)

looped("err_blockize_non_affine_split", EW1D_ODD, "i,", '''
    i0, i1 = sch.split(i, factors=[None, 32])
    sch.blockize(i1)
''', expect_error=True)


# =============================================================================================
# DLight cases: inputs are tvms's own LegalizeOps / zero-pipeline outputs
# =============================================================================================

# H100 defaults (what TVM's "nvidia/nvidia-h100" tag gives, without its registers/L2 entries).
H100_TARGET = json.dumps({
    "kind": "cuda",
    "arch": "sm_90",
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "thread_warp_size": 32,
})

ALL_RULES = "Matmul,GEMV,Reduction,GeneralReduction,Fallback"
SEED_RULES = "Matmul,Fallback"


@dataclass
class DLightCase:
    name: str
    input_file: str          # under tools/tvm_schedule_reference_inputs/ (classic dialect, tvms's print)
    rules: str               # comma separated class names in tvm.s_tir.dlight.gpu
    target: str = H100_TARGET


def run_dlight_case(c: DLightCase) -> str:
    import tvm
    from tvm.s_tir import dlight as dl

    out = DLIGHT_CASES.layout.directory
    src = oracle.to_modern((DLIGHT_INPUTS / f"{c.input_file}.tvms").read_text())
    (out / f"{c.name}.input.tvms").write_text(src)
    (out / f"{c.name}.rules.txt").write_text(f"{c.rules}\n{c.target}\n")
    mod = oracle.parse_with_tvm(src)
    rules = [getattr(dl.gpu, r)() for r in c.rules.split(",")]
    target = tvm.target.Target(json.loads(c.target))
    # Which rule schedules each function (what ApplyDefaultSchedule does: the first rule whose
    # apply() returns a schedule wins; functions marked tirx.is_scheduled are skipped).
    applied = []
    with target:
        for gv, func in oracle.parse_with_tvm(src).functions_items():
            if not isinstance(func, tvm.tirx.PrimFunc):
                continue
            if func.attrs is not None and "tirx.is_scheduled" in func.attrs:
                applied.append(f"{gv.name_hint} (already scheduled)")
                continue
            name = "none"
            for rule in rules:
                if rule.apply(func, target, False) is not None:
                    name = type(rule).__name__
                    break
            applied.append(f"{gv.name_hint} {name}")
        # NB: ApplyDefaultSchedule updates the module it is given in place (the parsed `mod`
        # is scheduled afterwards); parse again rather than reuse it.
        result = dl.ApplyDefaultSchedule(*rules)(mod)
    (out / f"{c.name}.tvms").write_text(result.script() + "\n")
    (out / f"{c.name}.applied.txt").write_text("\n".join(sorted(applied)) + "\n")
    return "ok"


DLIGHT_CASES = oracle.Suite(oracle.Layout(oracle.GOLDEN / "dlight"), label="dlight", run=run_dlight_case)

# name -> (Relax source, pipeline, keep Relax functions).  `--make-dlight-inputs` (run with
# tvms's Python) writes tools/tvm_schedule_reference_inputs/<name>.tvms from these.
DLIGHT_RELAX: dict[str, tuple[str, str, bool]] = {}


def dlight_input(name: str, relax_src: str, pipeline: str = "legalize", keep_relax: bool = False) -> str:
    DLIGHT_RELAX[name] = (clean(relax_src), pipeline, keep_relax)
    return name


def relax_main(params: str, body: str, ret: str) -> str:
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f"    def main({params}):\n        with R.dataflow():\n"
        + "".join(f"            {ln}\n" for ln in body.strip().splitlines())
        + f"            R.output({ret})\n        return {ret}\n"
    )


def matmul_input(name: str, params: str) -> str:
    """``gv = R.matmul(p, q)`` of the two parameters ``params`` declares."""
    p, q = re.findall(r"(\w+): R\.Tensor", params)
    return dlight_input(name, relax_main(params, f"gv = R.matmul({p}, {q})", "gv"))


def dlight(name: str, input_name: str, rules: str) -> None:
    DLIGHT_CASES.register(name, DLIGHT_CASES.layout)
    DLIGHT_CASES.append(DLightCase(name, input_name, rules))


# seed 000's zero-pipeline module (tests/golden/seed000/zero_pipeline.tvms), Relax main kept
SEED000 = "seed000_zero_pipeline"
MATMUL = matmul_input("matmul_256x512x128", 'a: R.Tensor((256, 512), "float32"), b: R.Tensor((512, 128), "float32")')
MATMUL_F16 = matmul_input("matmul_f16_512x1024x512",
                          'a: R.Tensor((512, 1024), "float16"), b: R.Tensor((1024, 512), "float16")')
MATMUL_ODD = matmul_input("matmul_100x300x200",
                          'a: R.Tensor((100, 300), "float32"), b: R.Tensor((300, 200), "float32")')
MATMUL_DYN = matmul_input("matmul_dynamic_m", 'a: R.Tensor(("m", 512), "float32"), b: R.Tensor((512, 256), "float32")')
BMM = matmul_input("batch_matmul", 'a: R.Tensor((4, 64, 32), "float32"), b: R.Tensor((4, 32, 64), "float32")')
FUSED_MM = dlight_input("fused_matmul_add_relu_b128", relax_main(
    'x: R.Tensor((128, 784), "float32"), w: R.Tensor((784, 256), "float32"), b: R.Tensor((256,), "float32")',
    "lv = R.matmul(x, w)\nlv1 = R.add(lv, b)\ngv = R.nn.relu(lv1)", "gv"), pipeline="zero")
GEMV_ROW = matmul_input("gemv_1xk_kxn_f16", 'x: R.Tensor((1, 4096), "float16"), w: R.Tensor((4096, 4096), "float16")')
GEMV_COL = matmul_input("gemv_nxk_kx1_f16", 'w: R.Tensor((4096, 4096), "float16"), x: R.Tensor((4096, 1), "float16")')
LOW_BATCH = matmul_input("low_batch_gemv_dynamic_b_f16",
                         'x: R.Tensor(("b", 4096), "float16"), w: R.Tensor((4096, 4096), "float16")')
SUM = dlight_input("sum_rows", relax_main(
    'x: R.Tensor((64, 1024), "float32")', "gv = R.sum(x, axis=[1])", "gv"))
MEAN = dlight_input("mean_keepdims", relax_main(
    'x: R.Tensor((64, 1024), "float32")', "gv = R.mean(x, axis=[1], keepdims=True)", "gv"))
SOFTMAX = dlight_input("softmax", relax_main(
    'x: R.Tensor((32, 1024), "float32")', "gv = R.nn.softmax(x, axis=-1)", "gv"))
LAYER_NORM = dlight_input("layer_norm", relax_main(
    'x: R.Tensor((32, 1024), "float32"), g: R.Tensor((1024,), "float32"), b: R.Tensor((1024,), "float32")',
    "gv = R.nn.layer_norm(x, g, b, axes=[-1], epsilon=1e-5)", "gv"))
TRANSPOSE = dlight_input("transpose", relax_main(
    'x: R.Tensor((512, 256), "float32")', "gv = R.permute_dims(x)", "gv"))
RELU = dlight_input("relu", relax_main(
    'x: R.Tensor((64, 1024), "float32")', "gv = R.nn.relu(x)", "gv"))
ADD_BCAST = dlight_input("add_broadcast", relax_main(
    'x: R.Tensor((64, 1024), "float32"), b: R.Tensor((1024,), "float32")', "gv = R.add(x, b)", "gv"))

dlight("seed000_matmul_fallback", SEED000, SEED_RULES)
dlight("seed000_all_rules", SEED000, ALL_RULES)
dlight("matmul_matmul_fallback", MATMUL, SEED_RULES)
dlight("matmul_f16_matmul_fallback", MATMUL_F16, SEED_RULES)
dlight("matmul_nondivisible_matmul_fallback", MATMUL_ODD, SEED_RULES)
dlight("matmul_dynamic_m_matmul_fallback", MATMUL_DYN, SEED_RULES)
dlight("batch_matmul_matmul_fallback", BMM, SEED_RULES)
dlight("fused_matmul_add_relu_all_rules", FUSED_MM, ALL_RULES)
dlight("gemv_row_all_rules", GEMV_ROW, ALL_RULES)
dlight("gemv_col_gemv_fallback", GEMV_COL, "GEMV,Fallback")
dlight("gemv_col_all_rules", GEMV_COL, ALL_RULES)
dlight("low_batch_gemv", LOW_BATCH, "LowBatchGEMV,Fallback")
dlight("sum_reduction_fallback", SUM, "Reduction,Fallback")
dlight("mean_all_rules", MEAN, ALL_RULES)
dlight("softmax_general_reduction_fallback", SOFTMAX, "GeneralReduction,Fallback")
dlight("layer_norm_general_reduction_fallback", LAYER_NORM, "GeneralReduction,Fallback")
dlight("transpose_transpose_fallback", TRANSPOSE, "Transpose,Fallback")
dlight("relu_fallback", RELU, "Fallback")
dlight("add_broadcast_all_rules", ADD_BCAST, ALL_RULES)


# =============================================================================================
# Making the DLight inputs (tvms's Python, no TVM)
# =============================================================================================


def make_dlight_inputs() -> None:
    sys.path.insert(0, str(ROOT))
    import tvmscript as tvms
    from tvmscript import ir

    DLIGHT_INPUTS.mkdir(parents=True, exist_ok=True)
    texts = {
        SEED000: (oracle.GOLDEN / "seed000" / "zero_pipeline.tvms").read_text(),
    }
    for name, (src, pipeline, keep_relax) in DLIGHT_RELAX.items():
        mod = tvms.parse(src)
        if pipeline == "zero":
            mod = tvms.relax.transform.get_pipeline("zero")(mod)
        else:
            mod = tvms.relax.transform.LegalizeOps()(mod)
        if not keep_relax:
            mod = ir.IRModule({gv: f for gv, f in mod.functions.items() if isinstance(f, tvms.tir.PrimFunc)})
        texts[name] = mod.script()
    for name, text in texts.items():
        (DLIGHT_INPUTS / f"{name}.tvms").write_text(text)
        print("wrote", (DLIGHT_INPUTS / f"{name}.tvms").relative_to(ROOT))


def main(argv: list) -> int:
    if "--make-dlight-inputs" in argv:
        make_dlight_inputs()
        return 0
    return oracle.main(argv, CASES, DLIGHT_CASES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
