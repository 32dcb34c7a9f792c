"""GPU-scheduled TensorIR runs on the CPU with its sequential meaning.

Each kernel is written by hand in the shape TVM's GPU schedules (and dlight's rules) print:
loops bound to ``blockIdx.*``/``threadIdx.*``/``vthread``, ``T.where`` predicates for the
ragged last block, ``"shared"``/``"local"`` buffers, cooperative fetches, cross-thread
reductions. Each is compiled for the CPU (`compiler.lower_tir.lower_thread_bindings` makes the
bound loops serial) and checked against NumPy."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.lower_tir import lower, lower_thread_bindings
from tvmscript.ir.tir_visitor import TIRVisitor

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def kernel(text: str):
    """The one kernel of a lone prim_func, compiled for the CPU."""
    func = tvms.parse(text)
    assert isinstance(func, tir.PrimFunc)
    ex = tvms.compile(func)
    (name,) = ex.kernels
    return ex[name]


# ----------------------------------------------------------------------------- elementwise

# exp(A) + 1 over a (37, 53) tensor, the two loops fused, split by 256 and bound to
# blockIdx.x / threadIdx.x: 8 * 256 = 2048 threads for 1961 elements, the last block ragged,
# hence the T.where (without it v0 would reach 38).
FUSED_ELEMENTWISE = '''
@T.prim_func
def fused_exp_add(A: T.Buffer((37, 53), "float32"), B: T.Buffer((37, 53), "float32")):
    T.func_attr({"tir.noalias": True})
    for ax0_ax1_fused_0 in T.thread_binding(8, thread="blockIdx.x"):
        for ax0_ax1_fused_1 in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("T_add"):
                v0 = T.axis.spatial(37, (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1) // 53)
                v1 = T.axis.spatial(53, (ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1) % 53)
                T.where(ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 < 1961)
                T.reads(A[v0, v1])
                T.writes(B[v0, v1])
                B[v0, v1] = T.exp(A[v0, v1]) + T.float32(1)
'''


def test_fused_elementwise_with_predicate():
    a = rand(37, 53)
    # The output sits inside a larger array: a store the predicate failed to stop would land
    # in the guard elements after it.
    storage = np.full(37 * 53 + 64, 123.0, "float32")
    b = storage[: 37 * 53].reshape(37, 53)
    kernel(FUSED_ELEMENTWISE)(a, b)
    np.testing.assert_allclose(b, np.exp(a) + 1, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(storage[37 * 53:], 123.0)


# ----------------------------------------------------------------------------- tiled matmul

# C = A @ B, 64x64x64: a 2x2 grid of blocks (blockIdx.y/x), each computing a 32x32 tile with
# 8x8 threads (threadIdx.y/x) of 4x4 elements, accumulated in a "local" buffer and written
# back; for each step of 8 along k, the 32x8 tile of A and the 8x32 tile of B are fetched into
# "shared" memory cooperatively (the fetch loop fused, split and its parts bound to
# threadIdx.y/x again, as meta-schedule's cooperative fetch writes it), with a barrier after.
TILED_MATMUL = '''
@T.prim_func
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    T.func_attr({"tir.noalias": True})
    C_local = T.alloc_buffer((64, 64), scope="local")
    A_shared = T.alloc_buffer((64, 64), scope="shared")
    B_shared = T.alloc_buffer((64, 64), scope="shared")
    for i_0 in T.thread_binding(2, thread="blockIdx.y"):
        for j_0 in T.thread_binding(2, thread="blockIdx.x"):
            for i_1 in T.thread_binding(8, thread="threadIdx.y"):
                for j_1 in T.thread_binding(8, thread="threadIdx.x"):
                    for k_0 in range(8):
                        for ax0_ax1_fused_0 in range(4):
                            for ax0_ax1_fused_1 in T.thread_binding(8, thread="threadIdx.y"):
                                for ax0_ax1_fused_2 in T.thread_binding(8, thread="threadIdx.x"):
                                    with T.block("A_shared"):
                                        v0 = T.axis.spatial(64, i_0 * 32 + (ax0_ax1_fused_0 * 64 + ax0_ax1_fused_1 * 8 + ax0_ax1_fused_2) // 8)
                                        v1 = T.axis.spatial(64, k_0 * 8 + (ax0_ax1_fused_0 * 64 + ax0_ax1_fused_1 * 8 + ax0_ax1_fused_2) % 8)
                                        T.reads(A[v0, v1])
                                        T.writes(A_shared[v0, v1])
                                        A_shared[v0, v1] = A[v0, v1]
                        for ax0_ax1_fused_0 in range(4):
                            for ax0_ax1_fused_1 in T.thread_binding(8, thread="threadIdx.y"):
                                for ax0_ax1_fused_2 in T.thread_binding(8, thread="threadIdx.x"):
                                    with T.block("B_shared"):
                                        v0 = T.axis.spatial(64, k_0 * 8 + (ax0_ax1_fused_0 * 64 + ax0_ax1_fused_1 * 8 + ax0_ax1_fused_2) // 32)
                                        v1 = T.axis.spatial(64, j_0 * 32 + (ax0_ax1_fused_0 * 64 + ax0_ax1_fused_1 * 8 + ax0_ax1_fused_2) % 32)
                                        T.reads(B[v0, v1])
                                        T.writes(B_shared[v0, v1])
                                        B_shared[v0, v1] = B[v0, v1]
                        T.tvm_storage_sync("shared")
                        for k_1, i_2, j_2 in T.grid(8, 4, 4):
                            with T.block("C_update"):
                                vi = T.axis.spatial(64, i_0 * 32 + i_1 * 4 + i_2)
                                vj = T.axis.spatial(64, j_0 * 32 + j_1 * 4 + j_2)
                                vk = T.axis.reduce(64, k_0 * 8 + k_1)
                                T.reads(A_shared[vi, vk], B_shared[vk, vj])
                                T.writes(C_local[vi, vj])
                                with T.init():
                                    C_local[vi, vj] = T.float32(0)
                                C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                        T.tvm_storage_sync("shared")
                    for ax0, ax1 in T.grid(4, 4):
                        with T.block("C_local"):
                            v0 = T.axis.spatial(64, i_0 * 32 + i_1 * 4 + ax0)
                            v1 = T.axis.spatial(64, j_0 * 32 + j_1 * 4 + ax1)
                            T.reads(C_local[v0, v1])
                            T.writes(C[v0, v1])
                            C[v0, v1] = C_local[v0, v1]
'''


def test_tiled_matmul_with_shared_and_local_buffers():
    a, b = rand(64, 64), rand(64, 64)
    c = np.zeros((64, 64), "float32")
    kernel(TILED_MATMUL)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


# The same tiling with the scratch buffers declared where CompactBufferAllocation leaves them:
# inside the kernel, in an opaque block under the thread loops, tile-sized, in the modern
# dialect (T.sblock, T.sblock_alloc_buffer) and with the other scopes ("warp", "shared.dyn").
TILED_MATMUL_COMPACT = '''
@T.prim_func
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i_0 in T.thread_binding(2, thread="blockIdx.y"):
        for j_0 in T.thread_binding(2, thread="blockIdx.x"):
            for i_1 in T.thread_binding(8, thread="threadIdx.y"):
                for j_1 in T.thread_binding(8, thread="threadIdx.x"):
                    with T.sblock("tile"):
                        T.reads(A[i_0 * 32:i_0 * 32 + 32, 0:64], B[0:64, j_0 * 32:j_0 * 32 + 32])
                        T.writes(C[i_0 * 32 + i_1 * 4:i_0 * 32 + i_1 * 4 + 4, j_0 * 32 + j_1 * 4:j_0 * 32 + j_1 * 4 + 4])
                        acc = T.sblock_alloc_buffer((4, 4), scope="local")
                        a_tile = T.sblock_alloc_buffer((32, 8), scope="shared.dyn")
                        b_tile = T.sblock_alloc_buffer((8, 32), scope="warp")
                        for ii, jj in T.grid(4, 4):
                            with T.sblock("init"):
                                vi, vj = T.axis.remap("SS", [ii, jj])
                                acc[vi, vj] = T.float32(0)
                        for k_0 in range(8):
                            for f_0 in range(4):
                                for f_1 in T.thread_binding(8, thread="threadIdx.y"):
                                    for f_2 in T.thread_binding(8, thread="threadIdx.x"):
                                        with T.sblock("a_tile"):
                                            v0 = T.axis.spatial(32, (f_0 * 64 + f_1 * 8 + f_2) // 8)
                                            v1 = T.axis.spatial(8, (f_0 * 64 + f_1 * 8 + f_2) % 8)
                                            a_tile[v0, v1] = A[i_0 * 32 + v0, k_0 * 8 + v1]
                                            b_tile[(f_0 * 64 + f_1 * 8 + f_2) // 32, (f_0 * 64 + f_1 * 8 + f_2) % 32] = B[k_0 * 8 + (f_0 * 64 + f_1 * 8 + f_2) // 32, j_0 * 32 + (f_0 * 64 + f_1 * 8 + f_2) % 32]
                            T.tvm_storage_sync("shared.dyn")
                            for k_1, ii, jj in T.grid(8, 4, 4):
                                with T.sblock("update"):
                                    vk, vi, vj = T.axis.remap("RSS", [k_1, ii, jj])
                                    acc[vi, vj] = acc[vi, vj] + a_tile[i_1 * 4 + vi, vk] * b_tile[vk, j_1 * 4 + vj]
                            T.tvm_storage_sync("shared.dyn")
                        for ii, jj in T.grid(4, 4):
                            with T.sblock("write_back"):
                                vi, vj = T.axis.remap("SS", [ii, jj])
                                C[i_0 * 32 + i_1 * 4 + vi, j_0 * 32 + j_1 * 4 + vj] = acc[vi, vj]
'''


def test_tiled_matmul_with_buffers_allocated_in_the_kernel():
    a, b = rand(64, 64), rand(64, 64)
    c = np.zeros((64, 64), "float32")
    kernel(TILED_MATMUL_COMPACT)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- reductions

# Row sums as dlight's Reduction rule schedules them: a block per row, the reduce loop split
# and its inner part bound to threadIdx.x (a cross-thread reduction), T.where for the ragged
# last step of 1000 = 7 * 128 + 104.
ROW_SUM = '''
@T.prim_func
def row_sum(A: T.Buffer((16, 1000), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"tir.noalias": True})
    for ax0 in T.thread_binding(16, thread="blockIdx.x"):
        for ax1_1 in T.thread_binding(128, thread="threadIdx.x", annotations={"pragma_auto_unroll_max_step": 256, "pragma_unroll_explicit": 1}):
            for ax1_0 in T.serial(8, annotations={"pragma_auto_unroll_max_step": 256, "pragma_unroll_explicit": 1}):
                with T.block("B"):
                    v0 = T.axis.spatial(16, ax0)
                    v1 = T.axis.reduce(1000, ax1_0 * 128 + ax1_1)
                    T.where(ax1_0 * 128 + ax1_1 < 1000)
                    T.reads(A[v0, v1])
                    T.writes(B[v0])
                    with T.init():
                        B[v0] = T.float32(0)
                    B[v0] = B[v0] + A[v0, v1]
'''


def test_cross_thread_row_sum():
    a = rand(16, 1000)
    b = np.full(16, 99.0, "float32")  # T.init must reset it
    kernel(ROW_SUM)(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-4, atol=1e-4)


# The GEMV shape of dlight: each thread first sums its strided slice of the row into a
# "local" rfactor buffer, then a cross-thread reduction over threadIdx.x sums the partials.
GEMV_RFACTOR = '''
@T.prim_func
def gemv(A: T.Buffer((16, 1000), "float32"), x: T.Buffer((1000,), "float32"), y: T.Buffer((16,), "float32")):
    T.func_attr({"tir.noalias": True})
    y_rf_local = T.alloc_buffer((128, 16), scope="local")
    for ax0 in T.thread_binding(16, thread="blockIdx.x"):
        for ax1_1 in T.thread_binding(128, thread="threadIdx.x"):
            for ax1_0 in range(8):
                with T.block("y_rf"):
                    vax1_1 = T.axis.spatial(128, ax1_1)
                    v0 = T.axis.spatial(16, ax0)
                    vax1_0 = T.axis.reduce(8, ax1_0)
                    T.where(ax1_0 * 128 + ax1_1 < 1000)
                    T.reads(A[v0, vax1_0 * 128 + vax1_1], x[vax1_0 * 128 + vax1_1])
                    T.writes(y_rf_local[vax1_1, v0])
                    with T.init():
                        y_rf_local[vax1_1, v0] = T.float32(0)
                    y_rf_local[vax1_1, v0] = y_rf_local[vax1_1, v0] + A[v0, vax1_0 * 128 + vax1_1] * x[vax1_0 * 128 + vax1_1]
        for ax1_1 in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("y"):
                vax1_1 = T.axis.reduce(128, ax1_1)
                v0 = T.axis.spatial(16, ax0)
                T.reads(y_rf_local[vax1_1, v0])
                T.writes(y[v0])
                with T.init():
                    y[v0] = T.float32(0)
                y[v0] = y[v0] + y_rf_local[vax1_1, v0]
'''


def test_gemv_rfactor_with_cross_thread_reduction():
    a, x = rand(16, 1000), rand(1000)
    y = np.full(16, -5.0, "float32")
    kernel(GEMV_RFACTOR)(a, x, y)
    np.testing.assert_allclose(y, a @ x, rtol=1e-4, atol=1e-4)


# Softmax in two reduction stages and a normalization, one row per block: the row max, then
# the sum of exponentials, both cross-thread reductions into "shared" scalars, then each
# thread normalizes its strided part of the row.
SOFTMAX = '''
@T.prim_func
def softmax(A: T.Buffer((8, 300), "float32"), B: T.Buffer((8, 300), "float32")):
    T.func_attr({"tir.noalias": True})
    T_max = T.alloc_buffer((8,), scope="shared")
    T_sum = T.alloc_buffer((8,), scope="shared")
    for i0 in T.thread_binding(8, thread="blockIdx.x"):
        for k_1 in T.thread_binding(64, thread="threadIdx.x"):
            for k_0 in range(5):
                with T.block("T_max"):
                    v0 = T.axis.spatial(8, i0)
                    vk = T.axis.reduce(300, k_0 * 64 + k_1)
                    T.where(k_0 * 64 + k_1 < 300)
                    T.reads(A[v0, vk])
                    T.writes(T_max[v0])
                    with T.init():
                        T_max[v0] = T.min_value("float32")
                    T_max[v0] = T.max(T_max[v0], A[v0, vk])
        for k_1 in T.thread_binding(64, thread="threadIdx.x"):
            for k_0 in range(5):
                with T.block("T_sum"):
                    v0 = T.axis.spatial(8, i0)
                    vk = T.axis.reduce(300, k_0 * 64 + k_1)
                    T.where(k_0 * 64 + k_1 < 300)
                    T.reads(A[v0, vk], T_max[v0])
                    T.writes(T_sum[v0])
                    with T.init():
                        T_sum[v0] = T.float32(0)
                    T_sum[v0] = T_sum[v0] + T.exp(A[v0, vk] - T_max[v0])
        for j_0 in range(5):
            for j_1 in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("T_softmax"):
                    v0 = T.axis.spatial(8, i0)
                    v1 = T.axis.spatial(300, j_0 * 64 + j_1)
                    T.where(j_0 * 64 + j_1 < 300)
                    T.reads(A[v0, v1], T_max[v0], T_sum[v0])
                    T.writes(B[v0, v1])
                    B[v0, v1] = T.exp(A[v0, v1] - T_max[v0]) / T_sum[v0]
'''


def test_softmax_two_stage_cross_thread_reduction():
    a = rand(8, 300) * 4
    b = np.zeros((8, 300), "float32")
    kernel(SOFTMAX)(a, b)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(b, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- vthread

# A 2-D elementwise kernel with virtual threads: each real thread handles 2x2 elements spread
# by the vthread loops (the strided pattern vthread gives for coalesced access).
VTHREAD = '''
@T.prim_func
def scale_shift(A: T.Buffer((64, 128), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((64, 128), "float32")):
    for by in T.thread_binding(4, thread="blockIdx.y"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for vy in T.thread_binding(2, thread="vthread.y"):
                for vx in T.thread_binding(2, thread="vthread"):
                    for ty in T.thread_binding(8, thread="threadIdx.y"):
                        for tx in T.thread_binding(32, thread="threadIdx.x"):
                            with T.block("C"):
                                vi = T.axis.spatial(64, by * 16 + vy * 8 + ty)
                                vj = T.axis.spatial(128, bx * 64 + vx * 32 + tx)
                                T.reads(A[vi, vj], B[vj])
                                T.writes(C[vi, vj])
                                C[vi, vj] = A[vi, vj] * T.float32(3) - B[vj]
'''


def test_vthread():
    a, b = rand(64, 128), rand(128)
    c = np.zeros((64, 128), "float32")
    kernel(VTHREAD)(a, b, c)
    np.testing.assert_allclose(c, a * 3 - b, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- the pass itself


class _LoopsAndCalls(TIRVisitor):
    """Every For loop, every Evaluate of a Call and every Call of a function's body (all of
    the tree: IfThenElse, LetStmt, block inits included)."""

    def __init__(self, func: tir.PrimFunc) -> None:
        self.loops, self.evaluated_calls, self.calls = [], [], []
        self.visit(func.body)

    def visit_For(self, node) -> None:
        self.loops.append(node)
        self.generic_visit(node)

    def visit_Evaluate(self, node) -> None:
        if isinstance(node.value, tir.Call):
            self.evaluated_calls.append(node)
        self.generic_visit(node)

    def visit_Call(self, node) -> None:
        self.calls.append(node)
        self.generic_visit(node)


def test_lower_thread_bindings_makes_bound_loops_serial():
    func = tvms.parse(TILED_MATMUL)
    before = _LoopsAndCalls(func)
    assert any(lp.kind == "thread_binding" for lp in before.loops)
    assert any(c.op == "tir.tvm_storage_sync" for c in before.calls)
    out = _LoopsAndCalls(lower_thread_bindings(func))
    assert out.loops and all(lp.kind == "serial" and lp.thread_tag is None for lp in out.loops)
    assert not out.evaluated_calls  # the barriers are gone
    # The input is left alone, and the loops keep their variables and extents.
    assert tvms.ir.structural_equal(func, tvms.parse(TILED_MATMUL))
    # Nor does the whole lowering leave a bound loop or a barrier behind.
    lowered = _LoopsAndCalls(lower(func))
    assert not any(lp.kind == "thread_binding" or lp.thread_tag is not None for lp in lowered.loops)
    assert not any(c.op == "tir.tvm_storage_sync" for c in lowered.calls)


def test_row_sum_keeps_loop_annotations():
    out = lower_thread_bindings(tvms.parse(ROW_SUM))
    outer = out.body.block.body if isinstance(out.body, tir.BlockRealize) else out.body
    tx = outer.body
    assert tx.kind == "serial" and tx.annotations["pragma_auto_unroll_max_step"] == 256


def test_storage_sync_round_trips_and_is_checked():
    text = '''# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        A[i] = T.float32(0.0)
        T.tvm_storage_sync("shared")
'''
    func = tvms.parse(text)
    assert func.script().rstrip("\n") == text.rstrip("\n")  # printed back as TVM prints it
    with pytest.raises(tvms.TVMScriptError, match="storage scope must be one of"):
        tvms.parse(text.replace('"shared")', '"texture")'))


# ----------------------------------------------------------------------------- tvms run

TVMS = shutil.which("tvms")


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_tvms_run_on_a_gpu_scheduled_file(tmp_path):
    path = tmp_path / "softmax.tvms"
    path.write_text("# from tvm.script import tir as T\n" + SOFTMAX)
    a = rand(8, 300)
    np.save(tmp_path / "a.npy", a)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TVMS_DEBUG")}
    proc = subprocess.run([TVMS, "run", str(path), "--input", f"A={tmp_path / 'a.npy'}",
                           "--out", str(tmp_path / "out.npz")], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    with np.load(tmp_path / "out.npz") as z:
        assert list(z.files) == ["B"]
        e = np.exp(a - a.max(axis=1, keepdims=True))
        np.testing.assert_allclose(z["B"], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
