"""Unary elementwise operators (TVM's ``topi/elemwise.h``, ``topi.nn.relu``/``gelu``/``silu``,
``leaky_relu``/``softplus``/``prelu``, Relax's ``gelu_tanh``).

The math functions are Python-style TE computes: one block ``compute`` with loops ``i0, i1...``,
as TVM's ``topi.exp`` etc. print. ``square`` and ``logical_not`` are C++-style (``T_multiply``,
``T_logical_not``, loops ``ax0...``); ``gelu``/``silu`` chain several stages exactly as Relax's
legalization composes them, so the printed PrimFuncs read like TVM's.
"""

from __future__ import annotations

import math

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import is_one

from .. import te
from ._util import compute
from .broadcast import add, multiply

__all__ = [
    "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "negative", "abs", "floor", "ceil",
    "round", "sin", "cos", "erf", "square", "logical_not", "gelu", "silu", "cast", "clip", "scalar_as",
    "trunc", "isnan", "isinf", "isfinite", "sign", "leaky_relu", "gelu_tanh", "softplus", "prelu",
]


def _map(x: te.Tensor, fn) -> te.Tensor:
    """``compute[i] = fn(x[i])``: block ``compute``, loops ``i0, i1...``."""
    return te.compute(x.shape, lambda *i: fn(x(*i)))


def _float_intrinsic(name: str, result: str = ""):
    """A math function applied elementwise (``T.exp(x[i])``); ``result`` says what the output
    holds when it is not the input's kind of value."""
    intrinsic = getattr(te, name)

    def fn(x: te.Tensor) -> te.Tensor:
        return _map(x, intrinsic)

    fn.__name__ = name
    fn.__doc__ = f"``{name}(x)`` elementwise{result}: block ``compute``, loops ``i0...``."
    return fn


exp = _float_intrinsic("exp")
log = _float_intrinsic("log")
sqrt = _float_intrinsic("sqrt")
rsqrt = _float_intrinsic("rsqrt")
tanh = _float_intrinsic("tanh")
sigmoid = _float_intrinsic("sigmoid")
sin = _float_intrinsic("sin")
cos = _float_intrinsic("cos")
erf = _float_intrinsic("erf")


def _rounding(name: str, intrinsic: str):
    """floor/ceil/round: the intrinsic on floats; integers are already whole, so they are
    copied (as TVM's ``tir.floor`` etc. return an integer operand unchanged)."""
    call = getattr(te, intrinsic)

    def fn(x: te.Tensor) -> te.Tensor:
        return _map(x, call if tir.is_float(x.dtype) else (lambda v: v))

    fn.__name__ = name
    fn.__doc__ = f"``{name}(x)`` elementwise (``T.{intrinsic}`` on floats, a copy on integers)."
    return fn


floor = _rounding("floor", "floor")
ceil = _rounding("ceil", "ceil")
round = _rounding("round", "nearbyint")  # TVM's topi.round is nearbyint: ties to even, like NumPy
trunc = _rounding("trunc", "trunc")


# isnan/isinf/isfinite: a bool ``compute`` stage (``T.isnan(x[i])``); an integer is never NaN
# nor infinite (the code generators fold the intrinsic to a constant for it).
isnan = _float_intrinsic("isnan", ", a bool tensor")
isinf = _float_intrinsic("isinf", ", a bool tensor")
isfinite = _float_intrinsic("isfinite", ", a bool tensor")


def sign(x: te.Tensor) -> te.Tensor:
    """-1, 0 or 1 by the sign of ``x`` (NaN gives 0): TVM's C++ ``topi.sign``, block ``T_sign``,
    loops ``ax0...``."""
    zero, one = tir.const(0, x.dtype), tir.const(1, x.dtype)
    minus = tir.const(-1 if not x.dtype.startswith("uint") else 0, x.dtype)

    def f(idx):
        v = x[tuple(idx)]
        return tir.Select(x.dtype, zero < v, one, tir.Select(x.dtype, v < zero, minus, zero))

    return compute(x.shape, f, name="T_sign")


def negative(x: te.Tensor) -> te.Tensor:
    """``x * -1`` (TVM writes negation as a multiplication by -1)."""
    return _map(x, lambda v: v * tir.const(-1, x.dtype))


def abs(x: te.Tensor) -> te.Tensor:
    """``|x|``: ``T.fabs`` on floats, ``T.abs`` on signed integers, a copy on unsigned ones."""
    if x.dtype.startswith("uint") or x.dtype == "bool":
        return _map(x, lambda v: v)
    return _map(x, te.abs)


def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)``: TVM's Python ``topi.nn.relu`` (block ``compute``, loops ``i0, i1...``)."""
    return te.compute(x.shape, lambda *i: te.max(x(*i), tir.const(0, x.dtype)))


def square(x: te.Tensor) -> te.Tensor:
    """``x * x``: Relax legalizes square as ``topi.multiply(x, x)`` (block ``T_multiply``)."""
    return multiply(x, x)


def logical_not(x: te.Tensor) -> te.Tensor:
    """``not x`` on a bool tensor: block ``T_logical_not``, loops ``ax0...``."""
    return compute(x.shape, lambda idx: tir.Not("bool", x[tuple(idx)]), name="T_logical_not")


def gelu(x: te.Tensor) -> te.Tensor:
    """``x * (0.5 + erf(x / sqrt(2)) * 0.5)``: the erf form, in the five stages Relax's
    legalization builds (``T_multiply``, ``compute``, ``T_multiply_1``, ``T_add``,
    ``T_multiply_2``)."""
    scaled = multiply(x, tir.const(math.sqrt(0.5), x.dtype))  # 1/sqrt(2), as TVM spells it
    e = erf(scaled)
    half = multiply(e, tir.const(0.5, x.dtype))
    return multiply(x, add(tir.const(0.5, x.dtype), half))


def silu(x: te.Tensor) -> te.Tensor:
    """``x * sigmoid(x)``: a ``compute`` stage, then ``T_multiply``."""
    return multiply(x, sigmoid(x))


def cast(x: te.Tensor, dtype: str) -> te.Tensor:
    """``x`` converted to ``dtype`` elementwise (block ``compute``, as TVM's ``topi.cast``)."""
    return _map(x, lambda v: te.cast(v, dtype))


def scalar_as(value, dtype: str) -> tir.PrimExpr:
    """A scalar operand (a number or PrimExpr) in ``dtype``: constants are folded (``0`` for a
    float32 tensor is ``T.float32(0.0)``, as TVM's simplifier prints the cast), others cast."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        value = value.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return tir.const(value if tir.is_float(dtype) else int(value), dtype)
    return te.cast(value, dtype)


def clip(x: te.Tensor, a_min, a_max) -> te.Tensor:
    """``max(min(x, a_max), a_min)`` elementwise (block ``compute``, as TVM's ``topi.clip``); the
    bounds are scalars (numbers or PrimExprs) converted to ``x``'s dtype."""
    lo, hi = scalar_as(a_min, x.dtype), scalar_as(a_max, x.dtype)
    return _map(x, lambda v: te.max(te.min(v, hi), lo))


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    """``x if x > 0 else x * alpha``: TVM's ``topi.nn.leaky_relu`` (block ``compute``)."""
    a = tir.const(alpha, x.dtype)
    zero = tir.const(0, x.dtype)
    return _map(x, lambda v: tir.Select(x.dtype, zero < v, v, v * a))


def gelu_tanh(x: te.Tensor) -> te.Tensor:
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, in the stages Relax's legalization
    builds (``T_multiply`` .. ``T_multiply_5``, ``T_add``, ``compute`` (tanh), ``T_add_1``)."""
    c = lambda v: tir.const(v, x.dtype)  # noqa: E731
    half = multiply(c(0.5), x)
    scaled = multiply(c(math.sqrt(2 / math.pi)), x)
    square_term = multiply(multiply(c(0.044715), x), x)
    inner = multiply(scaled, add(c(1.0), square_term))
    return multiply(half, add(c(1.0), tanh(inner)))


def softplus(x: te.Tensor, beta: float = 1.0, threshold: float = 20.0) -> te.Tensor:
    """``log(1 + exp(beta x)) / beta``, or ``x`` itself where ``beta x > threshold`` (PyTorch's
    ``Softplus``; the exponential would overflow there): block ``compute``, as TVM's."""
    b, t = tir.const(beta, x.dtype), tir.const(threshold, x.dtype)
    inv, one = tir.const(1.0 / beta, x.dtype), tir.const(1.0, x.dtype)
    return _map(x, lambda v: tir.Select(x.dtype, t < b * v, v, inv * te.log(one + te.exp(b * v))))


def prelu(x: te.Tensor, alpha: te.Tensor, axis: int = 1) -> te.Tensor:
    """``x if x > 0 else x * alpha[i_axis]``: one slope per element of ``x``'s ``axis``
    (TVM's ``topi.nn.prelu``, block ``compute``). A single slope for a longer axis is first
    broadcast to one per element, in a stage ``slope_broadcasted`` (TVM's form)."""
    zero = tir.const(0, x.dtype)
    channels, slopes = x.shape[axis], alpha.shape[0]
    if is_one(slopes) and not is_one(channels):
        single = alpha
        alpha = te.compute([channels], lambda c: single[tir.IntImm(c.dtype, 0)], name="slope_broadcasted")

    def f(*i):
        v = x(*i)
        return tir.Select(x.dtype, zero < v, v, v * alpha[i[axis]])

    return te.compute(x.shape, f)
