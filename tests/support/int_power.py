"""An integer power kernel and its exact reference, shared by the CPU and CUDA code generators'
tests: both must wrap on overflow as NumPy's integer power does, and agree on negative exponents."""

from __future__ import annotations

import numpy as np

DTYPES = ["int8", "uint8", "int32", "int64"]


def source(dtype: str, n: int) -> str:
    return f'''
@T.prim_func
def ipow(A: T.Buffer(({n},), "{dtype}"), B: T.Buffer(({n},), "{dtype}"), C: T.Buffer(({n},), "{dtype}")):
    T.func_attr({{"tir.noalias": True}})
    for i in range({n}):
        with T.block("C"):
            vi = T.axis.spatial({n}, i)
            C[vi] = T.pow(A[vi], B[vi])
'''


def operands(dtype: str):
    """Every base in -5..5 (0..10 unsigned) with exponents up to 45, negative ones where the type
    is signed: results that are exact, that overflow, and 3 ** 1 (an H200's double pow gave 2)."""
    signed = np.dtype(dtype).kind == "i"
    bases = range(-5, 6) if signed else range(0, 11)
    exps = list(range(-3 if signed else 0, 12)) + [31, 32, 45]
    pairs = [(b, e) for b in bases for e in exps]
    return np.array([b for b, _ in pairs], dtype), np.array([e for _, e in pairs], dtype)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a ** b`` in Python's integers, wrapped to the dtype; a negative exponent truncates
    ``1 / a ** -b`` toward zero."""
    bits = a.dtype.itemsize * 8
    out = []
    for x, e in zip(a.tolist(), b.tolist()):
        if e < 0:
            r = 1 if x == 1 else (-1 if e % 2 else 1) if x == -1 else 0
        else:
            r = pow(x, e, 1 << bits)
        out.append(r)
    return np.array([r % (1 << bits) for r in out], dtype=np.uint64).astype(a.dtype)
