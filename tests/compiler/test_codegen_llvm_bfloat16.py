"""bfloat16 in CPU kernels: a float rounded after each operation, its 16 bits in memory
(`compiler/codegen_llvm/dtypes.py`). Each result is checked bit for bit against ml_dtypes'
rounding of the float32 result (rounding a float32 sum, product or quotient of two bfloat16
values to bfloat16 is the same as rounding the exact one: float32 has more than 2 * 8 + 2
bits), or against an exact rounding where the source is wider than float32."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.codegen_llvm.dtypes import bf16_value

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(0)


def kernel(src: str):
    return build_cpu({"f": tvms.parse(src)})["f"]


def bf16(values) -> np.ndarray:
    """float32 values rounded to bfloat16 (ml_dtypes rounds float32 exactly, ties to even)."""
    return np.asarray(values, "float32").astype(BF16)


def same_bits(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    np.testing.assert_array_equal(actual.view(np.uint16), expected.astype(BF16).view(np.uint16), err_msg=what)


def test_arithmetic_rounds_each_result_to_bfloat16():
    f = kernel('''
@T.prim_func
def f(A: T.Buffer((64,), "bfloat16"), B: T.Buffer((64,), "bfloat16"), C: T.Buffer((5, 64), "bfloat16")):
    for i in range(64):
        C[0, i] = A[i] + B[i]
        C[1, i] = A[i] - B[i]
        C[2, i] = A[i] * B[i]
        C[3, i] = A[i] / B[i]
        C[4, i] = A[i] * B[i] + A[i]
''')
    a = bf16(RNG.uniform(-300, 300, 64))
    b = bf16(RNG.uniform(0.01, 3, 64) * RNG.choice([-1, 1], 64))
    a[:4] = bf16([1.0, 256.0, 3e38, 1e-39])  # 256 + 1.5: a tie; 3e38 * 3: overflow; a subnormal
    b[:4] = bf16([2 ** -8, 1.5, 2.5, 0.5])
    c = np.zeros((5, 64), BF16)
    f(a, b, c)
    x, y = a.astype("float32"), b.astype("float32")
    with np.errstate(over="ignore"):
        product = (x * y).astype(BF16).astype("float32")
        expected = [x + y, x - y, x * y, x / y, product + x]  # no fused multiply-add: two roundings
    for row, (want, op) in enumerate(zip(expected, ["+", "-", "*", "/", "* +"])):
        same_bits(c[row], want, op)


def test_math_functions_are_float32_ones_rounded():
    f = kernel('''
@T.prim_func
def f(A: T.Buffer((64,), "bfloat16"), C: T.Buffer((4, 64), "bfloat16")):
    for i in range(64):
        C[0, i] = T.exp(A[i])
        C[1, i] = T.sqrt(T.fabs(A[i]))
        C[2, i] = T.tanh(A[i])
        C[3, i] = T.erf(A[i])
''')
    a = bf16(RNG.uniform(-4, 4, 64))
    c = np.zeros((4, 64), BF16)
    f(a, c)
    x = a.astype("float64")
    from math import erf

    for row, want in enumerate([np.exp(x), np.sqrt(np.abs(x)), np.tanh(x), np.vectorize(erf)(x)]):
        np.testing.assert_allclose(c[row].astype("float64"), want, rtol=2 ** -8, atol=1e-6)  # half an ulp
        assert np.array_equal(c[row].astype(BF16), c[row])


def test_casts_round_once():
    f = kernel('''
@T.prim_func
def f(S: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float64"), I: T.Buffer((16,), "int32"),
      H: T.Buffer((16,), "float16"), C: T.Buffer((4, 16), "bfloat16"), F: T.Buffer((16,), "float32"),
      J: T.Buffer((16,), "int32"), G: T.Buffer((16,), "float16")):
    for i in range(16):
        C[0, i] = T.Cast("bfloat16", S[i])
        C[1, i] = T.Cast("bfloat16", D[i])
        C[2, i] = T.Cast("bfloat16", I[i])
        C[3, i] = T.Cast("bfloat16", H[i])
        F[i] = T.Cast("float32", C[0, i])
        J[i] = T.Cast("int32", C[0, i])
        G[i] = T.Cast("float16", C[0, i])
''')
    s = np.array([0.0, -0.0, 1.00390625, 1.01171875, 3.4e38, -3.4e38, np.inf, np.nan, 1e-40, -1e-45,
                  65504.0, 123.456, -7.9, 2.0 ** -126, 1.0 + 2 ** -9 + 2 ** -20, -0.5], "float32")
    d = np.array([4.671874831499922, 4.671875000000001, 1 + 2 ** -8 + 2 ** -40, 1e300, -1e-300, 0.1, 2.5, -3.25]
                 + list(RNG.uniform(-1e4, 1e4, 8)))
    i = np.array([0, 1, -1, 257, 259, 2 ** 24 + 1, -(2 ** 31), 2 ** 31 - 1] + list(RNG.integers(-9999, 9999, 8)),
                 "int32")
    h = RNG.uniform(-1000, 1000, 16).astype("float16")
    c = np.zeros((4, 16), BF16)
    out_f, out_i, out_h = np.zeros(16, "float32"), np.zeros(16, "int32"), np.zeros(16, "float16")
    f(s, d, i, h, c, out_f, out_i, out_h)
    same_bits(c[0], bf16(s), "float32 -> bfloat16")
    same_bits(c[1], np.array([bf16_value(float(v)) for v in d]), "float64 -> bfloat16")
    assert c[1, 0] == 4.65625  # below the tie: rounding through float32 first would give 4.6875
    same_bits(c[2], np.array([bf16_value(float(v)) for v in i]), "int32 -> bfloat16")
    same_bits(c[3], bf16(h.astype("float32")), "float16 -> bfloat16")
    np.testing.assert_array_equal(out_f, c[0].astype("float32"))
    finite = np.isfinite(out_f) & (np.abs(out_f) < 2 ** 31)
    np.testing.assert_array_equal(out_i[finite], np.trunc(out_f[finite]).astype("int32"))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out_h, c[0].astype("float32").astype("float16"))


def test_compile_time_rounding_matches_ml_dtypes():
    bits = np.arange(0, 2 ** 32, 65521, dtype=np.uint64).astype(np.uint32)
    values = bits.view("float32")
    mine = np.array([bf16_value(float(v)) for v in values], "float32")
    with np.errstate(invalid="ignore"):  # NaNs among the bit patterns
        same_bits(mine.astype(BF16), values.astype(BF16), "bf16_value")


def test_constants_scalars_limits_reinterpret_and_a_reduction():
    f = kernel('''
@T.prim_func
def f(A: T.Buffer((32,), "bfloat16"), s: T.bfloat16, C: T.Buffer((5,), "bfloat16"), R: T.Buffer((1,), "int16")):
    C[0] = T.bfloat16(0.1) + s
    C[1] = T.max_value("bfloat16")
    C[2] = T.reinterpret("bfloat16", T.int16(16256))
    R[0] = T.reinterpret("int16", A[0])
    C[3] = T.bfloat16(0)
    for i in range(32):
        C[3] = C[3] + A[i]
    C[4] = s
''')
    a = bf16(RNG.uniform(-10, 10, 32))
    c = np.zeros(5, BF16)
    r = np.zeros(1, "int16")
    f(a, 1.00390625, c, r)  # the scalar rounds to 1.0 (a tie, to even)
    total = np.float32(0)
    for v in a.astype("float32"):
        total = bf16(total + v).astype("float32")[()]
    same_bits(c, np.array([bf16_value(bf16_value(0.1) + 1.0), float.fromhex("0x1.fep127"), 1.0, total, 1.0]),
              "constants")
    assert r[0] == a[:1].view(np.int16)[0]
