"""TIR lowering passes (compiler.lower_tir) and the CPU default schedule
(compiler.schedule_cpu): the IR each produces, and that scheduling never changes results."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler import lower_tir as lt
from tvmscript.ir.tir import Allocate
from tvmscript.compiler.schedule_cpu import default_schedule, tile_bytes
from tvmscript.compiler.build_cpu import build_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
RNG = np.random.default_rng(1)


def nodes(stmt, cls) -> list:
    """Every node of type ``cls`` in a statement tree (statements and expressions)."""
    out = []

    def walk(x):
        if isinstance(x, cls):
            out.append(x)
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
            return
        if isinstance(x, tir.Buffer) or not hasattr(x, "__dataclass_fields__"):
            return
        for name in x.__dataclass_fields__:
            if name in ("span", "reads", "writes", "iter_vars", "alloc_buffers", "buffer", "loop_var", "var"):
                continue
            walk(getattr(x, name))

    walk(stmt)
    return out


def loop_chain(stmt) -> list:
    """The For loops from ``stmt`` down through single-child bodies."""
    out = []
    while True:
        if isinstance(stmt, tir.For):
            out.append(stmt)
            stmt = stmt.body
        elif isinstance(stmt, tir.BlockRealize):
            stmt = stmt.block.body
        elif isinstance(stmt, tir.SeqStmt):
            stmt = stmt.seq[-1]
        else:
            return out


MATMUL = '''
@T.prim_func
def mm(A: T.Buffer((128, 64), "float32"), B: T.Buffer((64, 256), "float32"), C: T.Buffer((128, 256), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(128, 256, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def matmul_source(m: int, k: int, n: int) -> str:
    return (MATMUL.replace("(128, 64)", f"({m}, {k})").replace("(64, 256)", f"({k}, {n})")
            .replace("(128, 256)", f"({m}, {n})").replace("T.grid(128, 256, 64)", f"T.grid({m}, {n}, {k})"))


# ----------------------------------------------------------------------------- lowering passes


def test_lower_init_becomes_a_condition_on_the_first_reduce_iteration():
    f = lt.lower_init(tvms.parse(MATMUL))
    block = nodes(f.body, tir.Block)[-1]
    assert block.init is None
    first = block.body.seq[0]
    assert isinstance(first, tir.IfThenElse)
    cond = first.condition
    assert isinstance(cond, tir.EQ) and cond.a is block.iter_vars[2].var and cond.b.value == 0


def test_convert_blocks_to_loops_substitutes_bindings_and_where():
    src = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    tmp = T.alloc_buffer((16,))
    for i in range(5):
        with T.block("b"):
            vi = T.axis.spatial(16, i * 3 + 1)
            T.where(i * 3 + 1 < 16)
            tmp[vi] = A[vi]
    for i in range(16):
        with T.block("c"):
            vi = T.axis.spatial(16, i)
            B[vi] = tmp[vi]
'''
    f = lt.convert_blocks_to_loops(lt.lower_init(tvms.parse(src)))
    assert not nodes(f.body, tir.Block) and not nodes(f.body, tir.BlockRealize)
    assert isinstance(f.body, Allocate) and f.body.buffer.name == "tmp"
    loops = nodes(f.body, tir.For)
    guard = loops[0].body
    assert isinstance(guard, tir.IfThenElse)
    store = guard.then_case
    # The block iterator is gone: the index is the binding over the loop variable.
    assert isinstance(store.indices[0], tir.Add) and isinstance(store.indices[0].a, tir.Mul)
    assert store.indices[0].a.a is loops[0].loop_var


def test_flatten_buffers_row_major_and_explicit_strides():
    src = '''
@T.prim_func
def f(a: T.handle, B: T.Buffer((4, 5, 6), "float32")):
    A = T.match_buffer(a, (4, 6), strides=(10, 1))
    for i, j, k in T.grid(4, 5, 6):
        B[i, j, k] = A[i, k]
'''
    f = lt.lower(tvms.parse(src))
    store = nodes(f.body, tir.BufferStore)[0]
    (i, j, k) = [lp.loop_var for lp in nodes(f.body, tir.For)]
    assert len(store.indices) == 1 and len(store.value.indices) == 1
    assert lt.dump(f).count("B[(((i * 30) + (j * 6)) + k)] = A[((i * 10) + k)]") == 1
    # Flat buffers keep the data variable of the buffer they come from.
    assert store.buffer.data is f.buffer_map[f.params[1]].data
    assert f.buffer_map[f.params[0]].shape[0].value == 4  # parameters keep their N-d buffers


def test_flatten_uses_int64_offsets_for_symbolic_shapes():
    src = '''
@T.prim_func
def f(a: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 3))
    for i, j in T.grid(n, 3):
        A[i, j] = T.float32(0)
'''
    f = lt.lower(tvms.parse(src))
    store = nodes(f.body, tir.BufferStore)[0]
    assert store.indices[0].dtype == "int64"
    small = lt.lower(tvms.parse(MATMUL))
    assert nodes(small.body, tir.BufferStore)[-1].indices[0].dtype == "int32"


def test_lower_intrinsics_rewrites_derived_functions():
    src = '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32")):
    for i in range(4):
        A[i] = T.sigmoid(A[i]) + T.rsqrt(A[i])
        B[i] = T.abs(B[i])
'''
    f = lt.lower(tvms.parse(src))
    ops = {c.op for c in nodes(f.body, tir.Call)}
    assert ops == {"tir.exp", "tir.sqrt"}
    assert nodes(f.body, tir.Select)


@pytest.mark.parametrize("elems,storage", [(16, "stack"), (lt.STACK_ALLOC_LIMIT // 4, "stack"),
                                           (lt.STACK_ALLOC_LIMIT // 4 + 1, "heap")])
def test_plan_allocations_by_size(elems, storage):
    src = f'''
@T.prim_func
def f(A: T.Buffer(({elems},), "float32")):
    tmp = T.alloc_buffer(({elems},))
    for i in range({elems}):
        tmp[i] = A[i]
    for i in range({elems}):
        A[i] = tmp[i] + T.float32(1)
'''
    f = lt.lower(tvms.parse(src))
    assert [a.storage for a in nodes(f.body, Allocate)] == [storage]


def test_lower_is_idempotent_and_marks_the_function():
    f = lt.lower(tvms.parse(MATMUL))
    assert f.attrs["tvms.lowered"] is True
    assert lt.lower(f) is f


def test_lower_every_sample_prim_func():
    for fname in sorted(f for f in os.listdir(SAMPLES) if f.endswith(".tvms")):
        try:
            mod = tvms.load(os.path.join(SAMPLES, fname))
        except tvms.TVMScriptError:
            continue
        funcs = [mod] if isinstance(mod, tir.PrimFunc) else [f for _, f in mod.items() if isinstance(f, tir.PrimFunc)] if isinstance(mod, tvms.IRModule) else []
        for func in funcs:
            low = lt.lower(func)
            assert not nodes(low.body, tir.Block)
            assert all(len(s.indices) == 1 for s in nodes(low.body, tir.BufferStore))


# ----------------------------------------------------------------------------- default schedule


def test_matmul_schedule_reorders_tiles_packs_and_parallelizes(monkeypatch):
    """A tile of rows x vectors of C is accumulated in registers (a local buffer) over the whole
    reduction, from a packed panel of B; the column-panel loop is the parallel one."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the loop order depends on the thread count
    f = default_schedule(tvms.parse(MATMUL))
    top = f.body.block.body if isinstance(f.body, tir.BlockRealize) else f.body
    assert isinstance(top, tir.For) and top.loop_var.name == "j_0" and top.kind == "parallel"
    blocks = {b.name: b for b in nodes(top, tir.Block)}
    assert {"C_pack", "C_tile", "C"} <= set(blocks)
    (acc,) = [buf for node in nodes(top, tir.Block) for buf in node.alloc_buffers if buf.scope == "local"]
    assert acc.name == "C_local"
    assert any(lp.kind == "unroll" for lp in nodes(top, tir.For))  # the tile's rows
    assert blocks["C"].init is None  # initialized in the tile, before the reduction


def _run(func_src, inputs, outputs, schedule):
    mod = build_cpu({"f": tvms.parse(func_src)}, schedule=schedule)
    outs = [o.copy() for o in outputs]
    mod["f"](*inputs, *outs)
    return outs


SHAPES = [(128, 64, 256), (100, 70, 50), (3, 1000, 7), (1, 784, 256), (130, 512, 2048)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_schedule_keeps_results_bitwise(m, k, n):
    src = matmul_source(m, k, n)
    a = RNG.standard_normal((m, k)).astype("float32")
    b = RNG.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    fast = _run(src, [a, b], [c], True)[0]
    plain = _run(src, [a, b], [c], False)[0]
    np.testing.assert_array_equal(fast, plain)
    np.testing.assert_allclose(fast, a @ b, rtol=1e-4, atol=1e-3)


MORE = '''
@I.ir_module
class Module:
    @T.prim_func
    def bmm_max(A: T.Buffer((4, 32, 48), "float32"), B: T.Buffer((4, 48, 64), "float32"), C: T.Buffer((4, 32, 64), "float32")):
        T.func_attr({"tir.noalias": True})
        for b, i, j, k in T.grid(4, 32, 64, 48):
            with T.block("C"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.float32(-3.0e38)
                C[vb, vi, vj] = T.max(C[vb, vi, vj], A[vb, vi, vk] * B[vb, vk, vj])

    @T.prim_func
    def conv(X: T.Buffer((8, 20, 20), "float32"), W: T.Buffer((16, 8, 3, 3), "float32"), Y: T.Buffer((16, 18, 18), "float32")):
        T.func_attr({"tir.noalias": True})
        for co, h, w, ci, kh, kw in T.grid(16, 18, 18, 8, 3, 3):
            with T.block("Y"):
                vco, vh, vw, vci, vkh, vkw = T.axis.remap("SSSRRR", [co, h, w, ci, kh, kw])
                with T.init():
                    Y[vco, vh, vw] = T.float32(0)
                Y[vco, vh, vw] = Y[vco, vh, vw] + X[vci, vh + vkh, vw + vkw] * W[vco, vci, vkh, vkw]

    @T.prim_func
    def transposed(A: T.Buffer((300, 500), "float32"), C: T.Buffer((300, 500), "float32")):
        T.func_attr({"tir.noalias": True})
        for j, i in T.grid(500, 300):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)

    @T.prim_func
    def dot(A: T.Buffer((64, 512), "float32"), B: T.Buffer((96, 512), "float32"), C: T.Buffer((64, 96), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(64, 96, 512):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

    @T.prim_func
    def int_matmul(A: T.Buffer((64, 96), "int32"), B: T.Buffer((96, 512), "int32"), C: T.Buffer((64, 512), "int32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(64, 512, 96):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 7
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_schedule_keeps_results_of_other_nests():
    mod = tvms.parse(MORE)
    fast = build_cpu(mod, schedule=True)
    plain = build_cpu(mod, schedule=False)
    a, b = RNG.standard_normal((4, 32, 48)).astype("float32"), RNG.standard_normal((4, 48, 64)).astype("float32")
    outs = []
    for m in (fast, plain):
        c = np.zeros((4, 32, 64), "float32")
        m["bmm_max"](a, b, c)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], (a[:, :, :, None] * b[:, None, :, :]).max(axis=2), rtol=1e-6)
    x, w = RNG.standard_normal((8, 20, 20)).astype("float32"), RNG.standard_normal((16, 8, 3, 3)).astype("float32")
    want = np.zeros((16, 18, 18), "float64")
    for kh in range(3):
        for kw in range(3):
            want += np.einsum("oc,chw->ohw", w[:, :, kh, kw], x[:, kh:kh + 18, kw:kw + 18])
    ys = []
    for m in (fast, plain):
        y = np.zeros((16, 18, 18), "float32")
        m["conv"](x, w, y)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_allclose(ys[0], want, rtol=1e-4, atol=1e-4)
    a2 = RNG.standard_normal((300, 500)).astype("float32")
    c2 = np.zeros((300, 500), "float32")
    fast["transposed"](a2, c2)
    np.testing.assert_allclose(c2, a2 * 2 + 1, rtol=1e-6, atol=1e-6)
    a3, b3 = RNG.standard_normal((64, 512)).astype("float32"), RNG.standard_normal((96, 512)).astype("float32")
    c3 = [np.zeros((64, 96), "float32") for _ in range(2)]
    fast["dot"](a3, b3, c3[0])
    plain["dot"](a3, b3, c3[1])
    np.testing.assert_array_equal(c3[0], c3[1])
    ia, ib = RNG.integers(-9, 9, (64, 96)).astype("int32"), RNG.integers(-9, 9, (96, 512)).astype("int32")
    ic = np.zeros((64, 512), "int32")
    fast["int_matmul"](ia, ib, ic)
    np.testing.assert_array_equal(ic, ia @ ib + 7)


def test_schedule_moves_the_unit_stride_loop_inside():
    f = default_schedule(tvms.parse(MORE)["transposed"])
    chain = loop_chain(f.body)
    assert [lp.loop_var.name for lp in chain] == ["i", "j"]
    assert chain[0].kind == "parallel"  # 150000 iterations
    # C = A @ B.T: the reused B panel is packed (transposed), so j can go innermost.
    g = default_schedule(tvms.parse(MORE)["dot"])
    assert loop_chain(g.body)[-1].loop_var.name == "j_1"
    assert any(b.name == "C_pack" for b in nodes(g.body, tir.Block))
    # A vector-matrix product with its matrix in rows: no reuse to pay for packing; a dot
    # product per output, vector partial sums along k (k_l) for a tile of j's (unrolled).
    vecdot = '''
@T.prim_func
def f(A: T.Buffer((1, 512), "float32"), B: T.Buffer((96, 512), "float32"), C: T.Buffer((1, 96), "float32")):
    for i, j, k in T.grid(1, 96, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''
    h = default_schedule(tvms.parse(vecdot))
    (block_c,) = [b for b in nodes(h.body, tir.Block) if b.name == "C"]
    assert [buf.name for buf in block_c.alloc_buffers] == ["C_dot"]
    inner = [lp.loop_var.name for lp in nodes(block_c.body, tir.For)]
    assert inner[:2] == ["j_r", "k_l"] and "k_o" in inner
    assert not any(b.name == "C_pack" for b in nodes(h.body, tir.Block))


NOT_SCHEDULED = {
    "scan": '''
@T.prim_func
def f(A: T.Buffer((64, 300), "float32"), C: T.Buffer((64, 300), "float32")):
    for j, i in T.grid(300, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = C[vi, T.max(vj - 1, 0)] + A[vi, vj]
''',
    "not_a_combiner": '''
@T.prim_func
def f(A: T.Buffer((64, 300), "float32"), C: T.Buffer((300,), "float32")):
    for j, k in T.grid(300, 64):
        with T.block("C"):
            vj, vk = T.axis.remap("SR", [j, k])
            with T.init():
                C[vj] = T.float32(0)
            C[vj] = C[vj] * T.float32(0.5) + A[vk, vj]
''',
    "user_scheduled": '''
@T.prim_func
def f(A: T.Buffer((64, 300), "float32"), C: T.Buffer((300,), "float32")):
    for j in T.parallel(300):
        for k in range(64):
            with T.block("C"):
                vj, vk = T.axis.remap("SR", [j, k])
                with T.init():
                    C[vj] = T.float32(0)
                C[vj] = C[vj] + A[vk, vj]
''',
    "extern_call": '''
@T.prim_func
def f(A: T.Buffer((64, 3000), "int32")):
    for j, i in T.grid(3000, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.call_extern("int32", "rand")
''',
}


@pytest.mark.parametrize("name", sorted(NOT_SCHEDULED))
def test_schedule_leaves_nests_it_cannot_prove_legal(name):
    func = tvms.parse(NOT_SCHEDULED[name])
    scheduled = default_schedule(func)
    assert tvms.ir.structural_equal(scheduled.body, func.body)


def test_scan_result_is_sequential():
    func_src = NOT_SCHEDULED["scan"]
    a = RNG.standard_normal((64, 300)).astype("float32")
    c = np.zeros((64, 300), "float32")
    out = _run(func_src, [a], [c], True)[0]
    np.testing.assert_allclose(out, np.cumsum(a, axis=1), rtol=1e-4, atol=1e-4)


def test_empty_symbolic_reduction_keeps_the_output_untouched():
    src = '''
@T.prim_func
def f(a: T.handle, s: T.handle):
    T.func_attr({"tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n, 300))
    S = T.match_buffer(s, (300,))
    for k, j in T.grid(n, 300):
        with T.block("S"):
            vk, vj = T.axis.remap("RS", [k, j])
            with T.init():
                S[vj] = T.float32(0)
            S[vj] = S[vj] + A[vk, vj]
'''
    for schedule in (True, False):
        k = build_cpu({"f": tvms.parse(src)}, schedule=schedule)["f"]
        s = np.full(300, 7, "float32")
        k(np.zeros((0, 300), "float32"), s)
        np.testing.assert_array_equal(s, 7)
        a = RNG.standard_normal((5, 300)).astype("float32")
        k(a, s)
        np.testing.assert_allclose(s, a.sum(axis=0), rtol=1e-5, atol=1e-5)
