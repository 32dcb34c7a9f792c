"""Quantization ops (tvmscript/ir/op/qnn.py, compiler/op/qnn.py): quantize/dequantize per tensor and per channel,
legalized, compiled for the CPU and compared with NumPy through tests/support/op_check.py; TVM's
printed forms; located diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax

from support.op_check import assert_located, check_op

RNG = np.random.default_rng(5)


def _per_axis(v, ndim, axis):
    """``v`` shaped to broadcast along ``axis`` (a scalar stays one)."""
    if v.ndim == 0:
        return v
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def np_quantize(x, scale, zp, axis, out_dtype):
    info = np.iinfo(out_dtype)
    q = np.round(x / _per_axis(scale, x.ndim, axis)) + _per_axis(zp, x.ndim, axis).astype(x.dtype)
    return np.clip(q, info.min, info.max).astype(out_dtype)


def np_dequantize(q, scale, zp, axis, out_dtype):
    diff = q.astype(np.int32) - _per_axis(zp, q.ndim, axis).astype(np.int32)
    return (diff.astype(scale.dtype) * _per_axis(scale, q.ndim, axis)).astype(out_dtype)


@pytest.mark.parametrize("shape,axis,per_channel,out_dtype", [
    ((4, 3), -1, True, "int8"), ((4, 3), 0, True, "uint8"), ((2, 3, 5), 1, False, "int8"), ((6,), 0, False, "int32"),
], ids=str)
def test_quantize(shape, axis, per_channel, out_dtype):
    x = (RNG.standard_normal(shape) * 40).astype("float32")
    x.flat[0] = 2.5  # a tie: rounds to even
    n = shape[axis]
    scale = RNG.uniform(0.2, 1.0, (n,) if per_channel else ()).astype("float32")
    zp = RNG.integers(-3, 4, (n,) if per_channel else ()).astype("int8" if out_dtype != "uint8" else "uint8")
    if per_channel:
        scale[0] = 1.0
    legal = check_op(relax.op.quantize, [x, scale, zp], np_quantize(x, scale, zp, axis, out_dtype),
                     axis=axis, out_dtype=out_dtype)
    assert "def quantize(" in legal.script() and 'T.block("quantized")' in legal.script()


@pytest.mark.parametrize("shape,axis,per_channel,in_dtype,out_dtype", [
    ((4, 3), -1, True, "int8", "float32"), ((2, 3, 5), 1, True, "uint8", "float32"), ((7,), 0, False, "int8", "float16"),
], ids=str)
def test_dequantize(shape, axis, per_channel, in_dtype, out_dtype):
    info = np.iinfo(in_dtype)
    q = RNG.integers(info.min, info.max + 1, shape).astype(in_dtype)
    n = shape[axis]
    scale = RNG.uniform(0.1, 1.0, (n,) if per_channel else ()).astype("float32")
    zp = RNG.integers(0, 5, (n,) if per_channel else ()).astype(in_dtype)
    expected = np_dequantize(q, scale, zp, axis, out_dtype)
    tol = 1e-2 if out_dtype == "float16" else 1e-6
    legal = check_op(relax.op.dequantize, [q, scale, zp], expected, rtol=tol, atol=tol, axis=axis, out_dtype=out_dtype)
    assert "def dequantize(" in legal.script() and 'T.block("dequantized")' in legal.script()


def test_quantize_prints_like_tvm():
    src = ('@R.function\ndef main(x: R.Tensor(("n", 3), dtype="float32")):\n'
           '    b = R.quantize(x, R.const(0.5, "float32"), R.const(1, "int8"), axis=-1, out_dtype="int8")\n'
           '    c = R.dequantize(b, R.const(0.5, "float32"), R.const(1, "int8"))\n    return c\n')
    text = tvms.parse(src).script()
    assert ('b: R.Tensor((n, 3), dtype="int8") = R.quantize(x, R.const(0.5, "float32"), R.const(1, "int8"), '
            'out_dtype="int8", axis=-1)') in text
    assert ('c: R.Tensor((n, 3), dtype="float32") = R.dequantize(b, R.const(0.5, "float32"), R.const(1, "int8"), '
            'out_dtype="float32", axis=-1)') in text
    assert tvms.parse(text).script() == text


def test_quantize_python_signature_orders_axis_first():
    x = relax.Var("x", relax.TensorStructInfo([4, 3], "float32"))
    call = relax.op.quantize(x, relax.const(0.5, "float32"), relax.const(1, "int8"), 0, "uint8")
    assert call.attrs["axis"] == 0 and call.attrs["out_dtype"] == "uint8"


@pytest.mark.parametrize("call,message,at", [
    ('R.quantize(x, s, R.const(1, "int8"), axis=0)', "scale has 3 values but data's axis 0 has 4 elements", "s,"),
    ('R.quantize(x, s, R.const(1, "int8"), axis=1, out_dtype="float64")', "out_dtype must be one of int8",
     '"float64"'),
    ('R.dequantize(x, R.const(0.5, "float32"), R.const(1, "int8"))', "dequantize expects data of dtype int8", "x,"),
], ids=str)
def test_quantize_errors_are_located(call, message, at):
    src = ('@R.function\ndef main(x: R.Tensor((4, 3), dtype="float32"), s: R.Tensor((3,), dtype="float32")):\n'
           f'    b = {call}\n    return b\n')
    assert_located(src, message, at)
