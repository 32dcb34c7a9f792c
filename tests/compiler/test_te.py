"""Tensor expressions: `tvms.te` builds TensorIR with TVM's `te.create_prim_func` conventions
(seed 002, section 5.3.1, printed as today's TVM prints it), and the functions run."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.printer import to_script

te = tvms.te


def te_matmul(A, B):
    assert A.shape[1] == B.shape[0]
    n = A.shape[0]
    m = B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A):
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


def check_text(func, expected: str) -> None:
    text = to_script(func)
    assert text.strip() == expected.strip()
    # The printed text reads back to the same function.
    parsed = tvms.parse(text)
    assert to_script(parsed) == text
    parsed.attrs.pop("global_symbol", None)
    tvms.ir.assert_structural_equal(parsed, func)


def build(func):
    from tvmscript.compiler.build_cpu import build_cpu

    return build_cpu({"f": func})["f"]


def rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype("float32")


MATMUL = '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), matmul: T.Buffer((128, 128), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i, j, k in T.grid(128, 128, 128):
        with T.block("matmul"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(matmul[v_i, v_j])
            with T.init():
                matmul[v_i, v_j] = T.float32(0.0)
            matmul[v_i, v_j] = matmul[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
'''

MATMUL_STAGE = '''
    for i, j, k in T.grid(128, 128, 128):
        with T.block("matmul"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(matmul[v_i, v_j])
            with T.init():
                matmul[v_i, v_j] = T.float32(0.0)
            matmul[v_i, v_j] = matmul[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for i0, i1 in T.grid(128, 128):
        with T.block("relu"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(matmul[v_i0, v_i1])
            T.writes(relu[v_i0, v_i1])
            relu[v_i0, v_i1] = T.max(matmul[v_i0, v_i1], T.float32(0.0))
'''


def test_placeholder_and_shape():
    A = te.placeholder((128, 128), name="A", dtype="float32")
    assert isinstance(A, te.Tensor)
    assert A.shape == [128, 128]
    assert all(isinstance(d, tir.IntImm) and d.dtype == "int32" for d in A.shape)
    assert A.dtype == "float32" and A.name == "A"
    assert isinstance(A.op, te.PlaceholderOp)
    load = A[1, 2]
    assert isinstance(load, tir.BufferLoad) and load.dtype == "float32"
    assert isinstance(A(1, 2), tir.BufferLoad)
    B = te.placeholder((tir.IntImm("int64", 4),), name="B")
    assert B.shape[0].dtype == "int64"


def test_expression_operators():
    i = te.var("i")
    x = te.placeholder((8,), name="x")
    e = x[i] * 2 + 1
    assert isinstance(e, tir.Add) and e.dtype == "float32"
    assert isinstance(e.b, tir.FloatImm) and e.b.dtype == "float32"
    assert isinstance(i // 2, tir.FloorDiv) and isinstance(i % 2, tir.FloorMod)
    assert isinstance(x[i] / 2, tir.Div)
    assert isinstance(i < 3, tir.LT) and (i < 3).dtype == "bool"
    assert isinstance(1 - i, tir.Sub) and isinstance((1 - i).a, tir.IntImm)
    assert isinstance(i.equal(3), tir.EQ)
    assert (i == i) is True and (i == te.var("i")) is False  # identity, as everywhere
    assert to_script(te.max(x[i], 0)) == "T.max(x[i], T.float32(0.0))"
    assert to_script(te.exp(x[i])) == "T.exp(x[i])"
    assert to_script(te.if_then_else(i < 4, x[i], 0.0)) == "T.if_then_else(i < 4, x[i], T.float32(0.0))"
    assert te.const(1, "float32").dtype == "float32"


def test_matmul():
    A = te.placeholder((128, 128), name="A", dtype="float32")
    B = te.placeholder((128, 128), name="B", dtype="float32")
    C = te_matmul(A, B)
    func = te.create_prim_func([A, B, C])
    check_text(func, MATMUL)
    a, b, c = rand(128, 128), rand(128, 128) * 0.5, np.zeros((128, 128), "float32")
    build(func)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_relu_1d():
    X1 = te.placeholder((10,), name="X1", dtype="float32")
    func = te.create_prim_func([X1, te_relu(X1)])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(X1: T.Buffer((10,), "float32"), relu: T.Buffer((10,), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i0 in range(10):
        with T.block("relu"):
            v_i0 = T.axis.spatial(10, i0)
            T.reads(X1[v_i0])
            T.writes(relu[v_i0])
            relu[v_i0] = T.max(X1[v_i0], T.float32(0.0))
''')
    x, y = rand(10), np.zeros(10, "float32")
    build(func)(x, y)
    np.testing.assert_allclose(y, np.maximum(x, 0))


def test_relu_2d():
    X2 = te.placeholder((10, 20), name="X1", dtype="float32")
    func = te.create_prim_func([X2, te_relu(X2)])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(X1: T.Buffer((10, 20), "float32"), relu: T.Buffer((10, 20), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i0, i1 in T.grid(10, 20):
        with T.block("relu"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(X1[v_i0, v_i1])
            T.writes(relu[v_i0, v_i1])
            relu[v_i0, v_i1] = T.max(X1[v_i0, v_i1], T.float32(0.0))
''')
    x, y = rand(10, 20), np.zeros((10, 20), "float32")
    build(func)(x, y)
    np.testing.assert_allclose(y, np.maximum(x, 0))


def test_matmul_relu_fused():
    A = te.placeholder((128, 128), name="A", dtype="float32")
    B = te.placeholder((128, 128), name="B", dtype="float32")
    D = te_relu(te_matmul(A, B))
    func = te.create_prim_func([A, B, D])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), relu: T.Buffer((128, 128), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    matmul = T.alloc_buffer((128, 128))''' + MATMUL_STAGE)
    a, b, d = rand(128, 128), rand(128, 128), np.zeros((128, 128), "float32")
    build(func)(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_matmul_relu_4args():
    A = te.placeholder((128, 128), name="A", dtype="float32")
    B = te.placeholder((128, 128), name="B", dtype="float32")
    C = te_matmul(A, B)
    D = te_relu(C)
    func = te.create_prim_func([A, B, C, D])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), matmul: T.Buffer((128, 128), "float32"), relu: T.Buffer((128, 128), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):''' + MATMUL_STAGE)
    a, b = rand(128, 128), rand(128, 128)
    c, d = np.zeros((128, 128), "float32"), np.zeros((128, 128), "float32")
    build(func)(a, b, c, d)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_reference_matmul_relu_64():
    """tools/tvm_reference_out/a_te_create_prim_func.txt, in the classic dialect."""
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((64, 64), lambda i, j: te.max(C[i, j], 0.0), name="D")
    check_text(te.create_prim_func([A, B, D]), '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), D: T.Buffer((64, 64), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    C = T.alloc_buffer((64, 64))
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for i, j in T.grid(64, 64):
        with T.block("D"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(C[v_i, v_j])
            T.writes(D[v_i, v_j])
            D[v_i, v_j] = T.max(C[v_i, v_j], T.float32(0.0))
''')


def test_int64_shapes():
    n = tir.IntImm("int64", 8)
    A = te.placeholder((n, tir.IntImm("int64", 4)), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0 + 1, name="B")
    func = te.create_prim_func([A, B])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((T.int64(8), T.int64(4)), "float32"), B: T.Buffer((T.int64(8), T.int64(4)), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i, j in T.grid(T.int64(8), T.int64(4)):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0) + T.float32(1.0)
''')
    a, b = rand(8, 4), np.zeros((8, 4), "float32")
    build(func)(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_index_dtype_override_int64():
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((8, 4), name="B")
    func = te.create_prim_func([A, B, te_matmul(A, B)], index_dtype_override="int64")
    text = to_script(func)
    assert 'A: T.Buffer((T.int64(16), T.int64(8)), "float32")' in text
    assert "for i, j, k in T.grid(T.int64(16), T.int64(4), T.int64(8)):" in text
    assert to_script(tvms.parse(text)) == text
    a, b, c = rand(16, 8), rand(8, 4), np.zeros((16, 4), "float32")
    build(func)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_symbolic_shape():
    n = te.var("n")
    X = te.placeholder((n, 4), name="X")
    func = te.create_prim_func([X, te_relu(X)])
    check_text(func, '''
# from tvm.script import tir as T

@T.prim_func
def main(X_handle: T.handle, relu_handle: T.handle):
    T.func_attr({"tir.noalias": True})
    n = T.int32()
    X = T.match_buffer(X_handle, (n, 4))
    relu = T.match_buffer(relu_handle, (n, 4))
    # with T.block("root"):
    for i0, i1 in T.grid(n, 4):
        with T.block("relu"):
            v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
            T.reads(X[v_i0, v_i1])
            T.writes(relu[v_i0, v_i1])
            relu[v_i0, v_i1] = T.max(X[v_i0, v_i1], T.float32(0.0))
''')
    kernel = build(func)
    for rows in (3, 7):
        x, y = rand(rows, 4), np.zeros((rows, 4), "float32")
        kernel(x, y)
        np.testing.assert_allclose(y, np.maximum(x, 0))


def test_max_reduction_and_offsets():
    A = te.placeholder((6, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k), name="M")
    S = te.compute((6, 8), lambda i, j: A[i, j] + A[i, j + 1] - M[i], name="S")
    func = te.create_prim_func([A, S])
    text = to_script(func)
    # TVM prints float literals with integral values in fixed notation (tools/tvm_reference_out/c_literals.txt)
    assert "M[v_i] = T.float32(-340282346638528859811704183484516925440.0)" in text
    assert "M[v_i] = T.max(M[v_i], A[v_i, v_k])" in text
    assert "T.reads(A[v_i, v_j:v_j + 2], M[v_i])" in text
    assert to_script(tvms.parse(text)) == text
    a, s = rand(6, 9), np.zeros((6, 8), "float32")
    build(func)(a, s)
    np.testing.assert_allclose(s, a[:, :8] + a[:, 1:] - a.max(axis=1, keepdims=True), rtol=1e-5)


def test_errors():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError):
        te.create_prim_func([B])  # A is used but not a parameter
    with pytest.raises(ValueError):
        te.compute((4, 4), lambda i: A[i])
    with pytest.raises(IndexError):
        A[1, 2]
