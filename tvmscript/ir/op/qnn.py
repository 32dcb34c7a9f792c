"""Quantization ops: ``R.quantize(data, scale, zero_point, axis=-1, out_dtype="int8")`` and
``R.dequantize(data, scale, zero_point, axis=-1, out_dtype="float32")`` (TVM's ``relax.op``
ones; they print ``out_dtype`` before ``axis``, as TVM does).

``scale`` (float) and ``zero_point`` (integer) are scalars or 1-D tensors with one value per
element of ``data``'s ``axis``. Both legalize to one elementwise-style PrimFunc (``quantize``,
``dequantize``; ``compiler/op/qnn.py``, TOPI in ``compiler/topi/qnn.py``).
"""

from __future__ import annotations

from tvmscript.ir import relax

from .common import int_attr, normalize_axis, static_dim, tensor_arg
from .registry import Attr, OpError, register_op

_QUANTIZED = ("int8", "uint8", "int16", "uint16", "int32")
_FLOATS = ("float16", "float32", "bfloat16")


def _dtype_in(allowed, what: str):
    def convert(value):
        if value not in allowed:
            raise OpError(f"{what} must be one of {', '.join(allowed)}, not {value!r}", "out_dtype")
        return value

    return convert


def _check_params(args, attrs, data_kinds: tuple, what: str):
    """The data, checked with its scale and zero point; returns the data's struct info."""
    x = tensor_arg(args[0], "data")
    scale, zp = tensor_arg(args[1], "scale"), tensor_arg(args[2], "zero_point")
    if x.dtype and x.dtype not in data_kinds:
        raise OpError(f"{what} expects data of dtype {', '.join(data_kinds)}, not {x.dtype}", "data")
    if scale.dtype and scale.dtype not in _FLOATS:
        raise OpError(f"scale must be a float tensor, not {scale.dtype}", "scale")
    if zp.dtype and not zp.dtype.startswith(("int", "uint")):
        raise OpError(f"zero_point must be an integer tensor, not {zp.dtype}", "zero_point")
    axis = normalize_axis(attrs["axis"], x.ndim, "axis") if x.ndim > 0 else None
    for sinfo, name in ((scale, "scale"), (zp, "zero_point")):
        if sinfo.ndim > 1:
            raise OpError(f"{name} must be a scalar or 1-D (one value per channel), got rank {sinfo.ndim}", name)
        if sinfo.ndim == 1 and sinfo.shape is not None and x.shape is not None and axis is not None:
            n, c = static_dim(sinfo.shape[0]), static_dim(x.shape[axis])
            if n is not None and c is not None and n != c:
                raise OpError(f"{name} has {n} values but data's axis {axis} has {c} elements", name)
    return x


def _same_shape(x: relax.TensorStructInfo, dtype: str) -> relax.TensorStructInfo:
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, dtype,
                                  x.ndim if x.shape is None else -1)


def infer_quantize(args, attrs):
    """The data's shape in ``out_dtype``."""
    return _same_shape(_check_params(args, attrs, _FLOATS, "quantize"), attrs["out_dtype"])


def infer_dequantize(args, attrs):
    """The data's shape in ``out_dtype``."""
    return _same_shape(_check_params(args, attrs, _QUANTIZED, "dequantize"), attrs["out_dtype"])


_SIG = ("data", "scale", "zero_point", "axis", "out_dtype")
register_op("quantize", ("data", "scale", "zero_point"), infer_quantize,
            attrs=(Attr("out_dtype", "int8", _dtype_in(_QUANTIZED, "out_dtype")), Attr("axis", -1, int_attr("axis"))),
            py_signature=_SIG, pattern="broadcast")
register_op("dequantize", ("data", "scale", "zero_point"), infer_dequantize,
            attrs=(Attr("out_dtype", "float32", _dtype_in(_FLOATS, "out_dtype")), Attr("axis", -1, int_attr("axis"))),
            py_signature=_SIG, pattern="broadcast")
