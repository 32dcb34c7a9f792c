"""Elementwise ops: math functions, arithmetic, comparisons, logic, casts and activations.

Arithmetic, Equal, Where and Cast also compute on values known at import time that depend on
symbolic dims (see values.py): that is how an exporter's shape arithmetic folds away. An
activation with no Relax op of its own is written with the ops that exist (Elu as
``where(x > 0, x, alpha * (exp(x) - 1))``), as ONNX's function definitions of them do.
"""

from __future__ import annotations

import numpy as np

from .....ir.op import api as op
from ..context import onnx_dtype
from ..registry import converter
from ..values import ARITHMETIC, as_object_array, elementwise, known_value, same_element
from .common import dtype_limits, scalar

# ----------------------------------------------------------------------------- unary

_UNARY = {
    "Relu": op.nn.relu, "Sigmoid": op.sigmoid, "Tanh": op.tanh, "Exp": op.exp, "Log": op.log,
    "Sqrt": op.sqrt, "Abs": op.abs, "Neg": op.negative, "Erf": op.erf, "Floor": op.floor,
    "Ceil": op.ceil, "Round": op.round, "Sin": op.sin, "Cos": op.cos, "Not": op.logical_not,
}


def _unary(fn):
    def convert(ctx):
        return fn(ctx.tensor(0))
    convert.__name__ = f"convert_{fn.__name__}"
    return convert


for _op_type, _fn in _UNARY.items():
    converter(_op_type)(_unary(_fn))


@converter("Identity")
def identity(ctx):
    if ctx.symbolic():
        return known_value(ctx.known(0), ctx.dtype(0))
    return ctx.tensor(0)


@converter("Reciprocal")
def reciprocal(ctx):
    x = ctx.tensor(0)
    return op.divide(scalar(1, ctx.dtype(0)), x)


# ----------------------------------------------------------------------------- binary

_BINARY = {
    "Add": op.add, "Sub": op.subtract, "Mul": op.multiply, "Div": op.divide,
    "Equal": op.equal, "Less": op.less, "LessOrEqual": op.less_equal, "Greater": op.greater,
    "GreaterOrEqual": op.greater_equal, "And": op.logical_and, "Or": op.logical_or, "Xor": op.not_equal,
}


def _binary(op_type: str, fn):
    def convert(ctx):
        if ctx.symbolic():
            return _fold_symbolic(ctx, op_type)
        return fn(ctx.tensor(0), ctx.tensor(1))
    convert.__name__ = f"convert_{op_type}"
    return convert


def _fold_symbolic(ctx, op_type: str):
    """Arithmetic or Equal on shape values that depend on symbolic dims."""
    a, b = ctx.known(0), ctx.known(1)
    if a is None or b is None:
        raise ctx.error("one operand depends on symbolic dims and the other is computed at run time")
    if op_type in ARITHMETIC:
        return known_value(elementwise(ARITHMETIC[op_type], a, b), ctx.dtype(0))
    if op_type == "Equal":
        decided = elementwise(same_element, a, b)
        if any(v is None for v in decided.flat):
            raise ctx.error("the comparison depends on the value of a symbolic dim")
        return np.asarray(decided.tolist(), dtype=bool)
    raise ctx.error("this op cannot compute on values that depend on symbolic dims")


for _op_type, _fn in _BINARY.items():
    converter(_op_type)(_binary(_op_type, _fn))


@converter("Pow")
def power(ctx):
    x, y = ctx.tensor(0), ctx.tensor(1)
    if ctx.dtype(1) != ctx.dtype(0):  # ONNX lets the exponent have its own type
        y = ctx.emit(op.astype(y, ctx.dtype(0)))
    return op.power(x, y)


@converter("Mod")
def mod(ctx):
    """``fmod=0`` is Python's modulo (the result has the divisor's sign): ``a - floor(a/b)*b``."""
    if ctx.attr("fmod", 0):
        raise ctx.error("Mod with fmod=1 (C's fmod) is not supported")
    a, b = ctx.tensor(0), ctx.tensor(1)
    quotient = ctx.emit(op.floor_divide(a, b))
    return op.subtract(a, ctx.emit(op.multiply(quotient, b)))


def _variadic(fn, mean: bool = False):
    def convert(ctx):
        args = [ctx.tensor(i) for i in range(ctx.num_inputs) if ctx.has(i)]
        out = args[0]
        for arg in args[1:]:
            out = ctx.emit(fn(out, arg))
        if mean:
            out = ctx.emit(op.divide(out, scalar(len(args), ctx.dtype(0))))
        return out
    return convert


converter("Max")(_variadic(op.maximum))
converter("Min")(_variadic(op.minimum))
converter("Sum")(_variadic(op.add))
converter("Mean")(_variadic(op.add, mean=True))


@converter("Where")
def where(ctx):
    if ctx.symbolic():
        cond = ctx.const(0)
        a, b = ctx.known(1), ctx.known(2)
        if cond is None or a is None or b is None:
            raise ctx.error("the condition must be known when the branches depend on symbolic dims")
        picked = np.where(cond, as_object_array(a), as_object_array(b))
        return known_value(picked, ctx.dtype(1))
    return op.where(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2))


# ----------------------------------------------------------------------------- casts


@converter("Cast")
def cast(ctx):
    dtype = onnx_dtype(ctx.attr("to"))
    if ctx.symbolic():
        if not dtype.startswith(("int", "uint")):
            raise ctx.error(f"cannot cast values depending on symbolic dims to {dtype}")
        return known_value(ctx.known(0), dtype)
    return _astype(ctx, ctx.tensor(0), dtype)


@converter("CastLike")
def cast_like(ctx):
    if ctx.symbolic():
        return known_value(ctx.known(0), ctx.dtype(1))
    return _astype(ctx, ctx.tensor(0), ctx.dtype(1))


def _astype(ctx, x, dtype: str):
    if ctx.dtype(0) == dtype:
        return x
    return op.astype(x, dtype)


# ----------------------------------------------------------------------------- clip


@converter("Clip")
def clip(ctx):
    """Clip-11 and later: ``min`` and ``max`` are optional scalar inputs. Known bounds make
    ``R.clip`` (a missing one is the dtype's extreme); run-time ones ``maximum``/``minimum``."""
    x = ctx.tensor(0)
    bounds = [ctx.const(i) if ctx.has(i) else None for i in (1, 2)]
    if all(b is not None or not ctx.has(i) for i, b in zip((1, 2), bounds)):
        lowest, highest = dtype_limits(ctx.dtype(0))
        low = bounds[0].item() if bounds[0] is not None else lowest
        high = bounds[1].item() if bounds[1] is not None else highest
        return _clamp(ctx, x, low, high)
    if ctx.has(1):
        x = ctx.emit(op.maximum(x, ctx.tensor(1)))
    if ctx.has(2):
        x = ctx.emit(op.minimum(x, ctx.tensor(2)))
    return x


def _clamp(ctx, x, low, high):
    return ctx.emit(op.clip(x, low, high))


# ----------------------------------------------------------------------------- activations


def _where_positive(ctx, x, positive, negative, strict: bool = True):
    zero = scalar(0, ctx.dtype(0))
    cond = ctx.emit((op.greater if strict else op.greater_equal)(x, zero))
    return ctx.emit(op.where(cond, positive, negative))


@converter("LeakyRelu")
def leaky_relu(ctx):
    return op.nn.leakyrelu(ctx.tensor(0), ctx.attr("alpha", 0.01))


@converter("PRelu")
def prelu(ctx):
    x, slope = ctx.tensor(0), ctx.tensor(1)
    return _where_positive(ctx, x, x, ctx.emit(op.multiply(x, slope)), strict=False)


@converter("ThresholdedRelu")
def thresholded_relu(ctx):
    x = ctx.tensor(0)
    dtype = ctx.dtype(0)
    cond = ctx.emit(op.greater(x, scalar(ctx.attr("alpha", 1.0), dtype)))
    return op.where(cond, x, scalar(0, dtype))


def _elu(ctx, x, alpha: float):
    dtype = ctx.dtype(0)
    expm1 = ctx.emit(op.subtract(ctx.emit(op.exp(x)), scalar(1, dtype)))
    return _where_positive(ctx, x, x, ctx.emit(op.multiply(expm1, scalar(alpha, dtype))))


@converter("Elu")
def elu(ctx):
    return _elu(ctx, ctx.tensor(0), ctx.attr("alpha", 1.0))


@converter("Selu")
def selu(ctx):
    out = _elu(ctx, ctx.tensor(0), ctx.attr("alpha", 1.67326319217681884765625))
    return op.multiply(out, scalar(ctx.attr("gamma", 1.05070102214813232421875), ctx.dtype(0)))


@converter("HardSigmoid")
def hard_sigmoid(ctx):
    return _hard_sigmoid(ctx, ctx.tensor(0), ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5))


def _hard_sigmoid(ctx, x, alpha: float, beta: float):
    dtype = ctx.dtype(0)
    y = ctx.emit(op.add(ctx.emit(op.multiply(x, scalar(alpha, dtype))), scalar(beta, dtype)))
    return _clamp(ctx, y, 0.0, 1.0)


@converter("HardSwish")
def hard_swish(ctx):
    x = ctx.tensor(0)
    return op.multiply(x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5))


def _softplus(ctx, x):
    """``log(1 + exp(x))`` written ``max(x, 0) + log(1 + exp(-|x|))``, which does not overflow."""
    dtype = ctx.dtype(0)
    tail = ctx.emit(op.exp(ctx.emit(op.negative(ctx.emit(op.abs(x))))))
    log1p = ctx.emit(op.log(ctx.emit(op.add(tail, scalar(1, dtype)))))
    return ctx.emit(op.add(ctx.emit(op.maximum(x, scalar(0, dtype))), log1p))


@converter("Softplus")
def softplus(ctx):
    return _softplus(ctx, ctx.tensor(0))


@converter("Softsign")
def softsign(ctx):
    x = ctx.tensor(0)
    denominator = ctx.emit(op.add(ctx.emit(op.abs(x)), scalar(1, ctx.dtype(0))))
    return op.divide(x, denominator)


@converter("Mish")
def mish(ctx):
    x = ctx.tensor(0)
    return op.multiply(x, ctx.emit(op.tanh(_softplus(ctx, x))))


@converter("Sign")
def sign(ctx):
    return op.sign(ctx.tensor(0))


@converter("Gelu", since=20)
def gelu(ctx):
    x = ctx.tensor(0)
    approximate = ctx.attr("approximate", "none")
    if approximate == "none":
        return op.nn.gelu(x)
    if approximate != "tanh":
        raise ctx.error(f"unknown approximate={approximate!r} (expected 'none' or 'tanh')")
    return op.nn.gelu_tanh(x)
