"""``nn.op``: operators on `Tensor`s, each emitting one Relax op call into the function being
exported, bound to a variable named after the op (the ``name`` argument, TVM's default for each:
``mul`` for `multiply`, ``neg`` for `negative`, ``unsqueeze`` for ``R.expand_dims``...).

Every function calls the Relax op of the same meaning from ``tvms.relax.op`` (so shapes and
dtypes are inferred, and checked, by the op registry); a call that cannot be right is an
`ExportError` naming the ``nn.op``, the binding and the model's line. An op whose Relax op this
build of tvms lacks says so when called, rather than at import.

Python numbers given where a tensor is expected become constants of the other operand's dtype
(``x * 0.5`` with a float16 ``x`` multiplies by a float16 constant), as TVM does; a fractional
number with an integer tensor is an error instead of a silent truncation.
"""

from __future__ import annotations

import builtins
from typing import Optional, Sequence, Union

import numpy as np

from .... import relax, tir
from .core import ExportError, Tensor, get_default_dtype, user_location, wrap_nested

# ----------------------------------------------------------------------------- plumbing


def _relax_op(name: str):
    """``tvms.relax.op.<name>`` (``"nn.rms_norm"``), or an ExportError saying it is missing."""
    from ....ir.op import api

    fn = api
    for part in name.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ExportError(f"the Relax op R.{name} is not available in this build of tvms "
                              f"(at {user_location()})")
    return fn


def _emit(relax_name: str, name: str, *args, **kwargs):
    """Call the Relax op ``relax_name`` on unwrapped arguments and bind the result as ``name``."""
    fn = _relax_op(relax_name)
    try:
        expr = fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
    except (ValueError, TypeError) as err:
        raise ExportError(f"nn.op binding {name!r} at {user_location()}: {err}") from None
    return _wrap(expr, name)


def _wrap(expr, name: str):
    try:
        return wrap_nested(expr, name)
    except ValueError as err:  # the builder refused the expression (struct info inference)
        if isinstance(err, ExportError):
            raise
        raise ExportError(f"nn.op binding {name!r} at {user_location()}: {err}") from None


def _unwrap(value):
    if isinstance(value, Tensor):
        return value._expr
    if isinstance(value, (list, tuple)) and value and builtins.all(isinstance(v, Tensor) for v in value):
        return [v._expr for v in value]
    return value


def _is_scalar(value) -> bool:
    return (isinstance(value, (int, float, np.generic, tir.IntImm, tir.FloatImm))
            and not isinstance(value, bool))


def _scalar(value, dtype: str) -> Tensor:
    """A Python (or NumPy, or tir constant) number as a 0-d constant of ``dtype``."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        value = value.value
    value = value.item() if isinstance(value, np.generic) else value
    if dtype.startswith(("int", "uint")):
        if isinstance(value, float) and not value.is_integer():
            raise ExportError(f"cannot combine the {dtype} tensor with the fractional number {value} "
                              f"(at {user_location()}): cast the tensor with astype first")
    return Tensor.from_scalar(value, dtype)


def _pair(a, b):
    """Both operands as tensors: a number takes the other operand's dtype."""
    if _is_scalar(a) and isinstance(b, Tensor):
        a = _scalar(a, b.dtype)
    if _is_scalar(b) and isinstance(a, Tensor):
        b = _scalar(b, a.dtype)
    for v in (a, b):
        if not isinstance(v, Tensor):
            raise ExportError(f"expected an nn.Tensor or a number, got {type(v).__name__} "
                              f"(at {user_location()})")
    return a, b


def _tensor(x, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise ExportError(f"{what} must be an nn.Tensor, not {type(x).__name__} (at {user_location()})")
    return x


def _axes_list(axes) -> Optional[list]:
    return [axes] if isinstance(axes, int) else (None if axes is None else list(axes))


# ----------------------------------------------------------------------------- elementwise


def add(a, b, name: str = "add") -> Tensor:
    """``a + b`` with broadcasting."""
    return _emit("add", name, *_pair(a, b))


def subtract(a, b, name: str = "subtract") -> Tensor:
    """``a - b`` with broadcasting."""
    return _emit("subtract", name, *_pair(a, b))


def multiply(a, b, name: str = "mul") -> Tensor:
    """``a * b`` with broadcasting."""
    return _emit("multiply", name, *_pair(a, b))


def divide(a, b, name: str = "divide") -> Tensor:
    """``a / b`` with broadcasting."""
    return _emit("divide", name, *_pair(a, b))


def maximum(x1, x2, name: str = "maximum") -> Tensor:
    return _emit("maximum", name, *_pair(x1, x2))


def minimum(x1, x2, name: str = "minimum") -> Tensor:
    return _emit("minimum", name, *_pair(x1, x2))


def power(x1, x2, name: str = "power") -> Tensor:
    return _emit("power", name, *_pair(x1, x2))


def less(a, b, name: str = "less") -> Tensor:
    return _emit("less", name, *_pair(a, b))


def less_equal(a, b, name: str = "less_equal") -> Tensor:
    return _emit("less_equal", name, *_pair(a, b))


def greater(a, b, name: str = "greater") -> Tensor:
    return _emit("greater", name, *_pair(a, b))


def greater_equal(a, b, name: str = "greater_equal") -> Tensor:
    return _emit("greater_equal", name, *_pair(a, b))


def equal(a, b, name: str = "equal") -> Tensor:
    return _emit("equal", name, *_pair(a, b))


def not_equal(a, b, name: str = "not_equal") -> Tensor:
    return _emit("not_equal", name, *_pair(a, b))


def where(condition: Tensor, x1, x2, name: str = "where") -> Tensor:
    """``x1`` where ``condition`` holds, else ``x2`` (numbers take the other branch's dtype)."""
    x1, x2 = _pair(x1, x2)
    return _emit("where", name, _tensor(condition, "where's condition"), x1, x2)


def _unary(relax_name: str, doc: str):
    leaf = relax_name.rsplit(".", 1)[-1]

    def op(x: Tensor, name: str = leaf) -> Tensor:
        return _emit(relax_name, name, _tensor(x, f"nn.op.{leaf}'s input"))

    op.__name__ = op.__qualname__ = leaf
    op.__doc__ = doc
    return op


relu = _unary("nn.relu", "``max(x, 0)``.")
silu = _unary("nn.silu", "``x * sigmoid(x)``.")
sigmoid = _unary("sigmoid", "``1 / (1 + exp(-x))``.")
tanh = _unary("tanh", "Hyperbolic tangent.")
exp = _unary("exp", "``e ** x``.")
log = _unary("log", "Natural logarithm.")
floor = _unary("floor", "Round down.")
ceil = _unary("ceil", "Round up.")
round = _unary("round", "Round to the nearest integer.")  # noqa: A001 - TVM's name
square = _unary("square", "``x * x``.")
sqrt = _unary("sqrt", "Square root.")
rsqrt = _unary("rsqrt", "``1 / sqrt(x)``.")
abs = _unary("abs", "Absolute value.")  # noqa: A001 - TVM's name
sin = _unary("sin", "Sine.")
cos = _unary("cos", "Cosine.")
erf = _unary("erf", "The error function.")
logical_not = _unary("logical_not", "Boolean negation.")


def negative(x: Tensor, name: str = "neg") -> Tensor:
    """``-x``."""
    return _emit("negative", name, _tensor(x, "nn.op.negative's input"))


def gelu(x: Tensor, approximate: Optional[str] = None, name: str = "gelu") -> Tensor:
    """GELU, ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``approximate="tanh"`` uses the tanh
    approximation (``R.nn.gelu_tanh``)."""
    if approximate not in (None, "none", "tanh"):
        raise ExportError(f"gelu: approximate must be None or 'tanh', not {approximate!r}")
    return _emit("nn.gelu_tanh" if approximate == "tanh" else "nn.gelu", name, _tensor(x, "gelu's input"))


def relu6(x: Tensor, name: str = "relu6") -> Tensor:
    """``min(max(x, 0), 6)``, as ``R.clip(x, 0, 6)``."""
    return _emit("clip", name, _tensor(x, "relu6's input"), 0, 6)


def clip(x: Tensor, min: float, max: float, name: str = "clip") -> Tensor:  # noqa: A002
    """``x`` limited to ``[min, max]``."""
    return _emit("clip", name, _tensor(x, "clip's input"), min, max)


def leaky_relu(x: Tensor, alpha: float = 0.01, name: str = "leakyrelu") -> Tensor:
    """``x`` where positive, ``alpha * x`` elsewhere (``R.nn.leakyrelu``)."""
    return _emit("nn.leakyrelu", name, _tensor(x, "leaky_relu's input"), alpha=alpha)


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    return _emit("nn.softmax", name, _tensor(x, "softmax's input"), axis=axis)


def log_softmax(x: Tensor, axis: int = -1, name: str = "log_softmax") -> Tensor:
    return _emit("nn.log_softmax", name, _tensor(x, "log_softmax's input"), axis=axis)


def astype(x: Tensor, dtype: str, name: str = "astype") -> Tensor:
    """``x`` converted to ``dtype``; ``x`` itself when it already has it (no binding, as TVM)."""
    if _tensor(x, "astype's input").dtype == dtype:
        return x
    return _emit("astype", name, x, dtype)


# ----------------------------------------------------------------------------- linear algebra


def matmul(a: Tensor, b: Tensor, out_dtype: Optional[str] = None, name: str = "matmul") -> Tensor:
    """Matrix product with broadcast batch dimensions; ``out_dtype`` None keeps the inputs'."""
    return _emit("matmul", name, _tensor(a, "matmul's a"), _tensor(b, "matmul's b"), out_dtype=out_dtype)


def _conv(relax_name: str, name: str, x, weight, bias, bias_shape, **attrs) -> Tensor:
    """A convolution, plus the bias reshaped to broadcast over the channel axis: TVM's
    ``conv = R.add(lv, lv1)`` (the convolution and the reshape bound first)."""
    conv = _relax_op(relax_name)
    try:
        out = conv(_tensor(x, f"{name}'s input")._expr, _tensor(weight, f"{name}'s weight")._expr, **attrs)
        if bias is not None:
            reshaped = _relax_op("reshape")(_tensor(bias, f"{name}'s bias")._expr, bias_shape)
            out = _relax_op("add")(out, reshaped)
    except (ValueError, TypeError) as err:
        raise ExportError(f"nn.op binding {name!r} at {user_location()}: {err}") from None
    return _wrap(out, name)


def conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0,
           dilation=1, groups: int = 1, name: str = "conv1d") -> Tensor:
    """1-D convolution of ``x`` [N, C, W] with ``weight`` [O, C/groups, K], plus ``bias`` [O]."""
    return _conv("nn.conv1d", name, x, weight, bias, [1, -1, 1], strides=stride, padding=padding,
                 dilation=dilation, groups=groups)


def conv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0,
           dilation=1, groups: int = 1, data_layout: str = "NCHW", name: str = "conv2d") -> Tensor:
    """2-D convolution of ``x`` [N, C, H, W] (or NHWC) with ``weight`` [O, C/groups, kH, kW],
    plus ``bias`` [O]."""
    bias_shapes = {"NCHW": [1, -1, 1, 1], "NHWC": [1, 1, 1, -1]}
    if bias is not None and data_layout not in bias_shapes:
        raise ExportError(f"conv2d: a bias with data_layout {data_layout!r} is not supported "
                          f"(NCHW or NHWC)")
    return _conv("nn.conv2d", name, x, weight, bias, bias_shapes.get(data_layout), strides=_pair_attr(stride),
                 padding=_pair_attr(padding), dilation=_pair_attr(dilation), groups=groups,
                 data_layout=data_layout)


def _pair_attr(value):
    return [value, value] if isinstance(value, int) else value


# ----------------------------------------------------------------------------- normalization


def layer_norm(x: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5, name: str = "layer_norm") -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` axes, then scale and shift (ones and
    zeros when ``weight``/``bias`` are None)."""
    x = _tensor(x, "layer_norm's input")
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    gamma = weight if weight is not None else Tensor.from_const(np.ones(shape, dtype=x.dtype))
    beta = bias if bias is not None else Tensor.from_const(np.zeros(shape, dtype=x.dtype))
    return _emit("nn.layer_norm", name, x, gamma, beta, axes=list(range(-len(shape), 0)), epsilon=eps)


def rms_norm(x: Tensor, weight: Tensor, axes: Union[int, Sequence[int]], epsilon: float = 1e-5,
             name: str = "rms_norm") -> Tensor:
    """``x / sqrt(mean(x**2 over axes) + epsilon) * weight``."""
    return _emit("nn.rms_norm", name, _tensor(x, "rms_norm's input"), _tensor(weight, "rms_norm's weight"),
                 axes=_axes_list(axes), epsilon=epsilon)


def group_norm(x: Tensor, num_groups: int, weight: Optional[Tensor], bias: Optional[Tensor],
               eps: float = 1e-5, channel_axis: int = 1, axes: Optional[Sequence[int]] = None,
               name: str = "group_norm") -> Tensor:
    """Normalize each group of ``num_groups`` channel groups over ``axes`` (by default every
    axis after the first two), then scale and shift per channel."""
    x = _tensor(x, "group_norm's input")
    axes = list(range(2, x.ndim)) if axes is None else list(axes)
    channels = x.shape[channel_axis]
    gamma = weight if weight is not None else Tensor.from_const(np.ones([channels], dtype=x.dtype))
    beta = bias if bias is not None else Tensor.from_const(np.zeros([channels], dtype=x.dtype))
    return _emit("nn.group_norm", name, x, gamma, beta, num_groups=num_groups,
                 channel_axis=channel_axis, axes=axes, epsilon=eps)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 name: str = "scaled_dot_product_attention") -> Tensor:
    """``softmax(q @ k.T * scale (+ mask)) @ v`` on [batch, seq, heads, head_dim] tensors
    (``R.nn.attention``); ``is_causal`` masks future positions (top-left aligned)."""
    kwargs = {"scale": scale, "causal_mask": "TopLeft" if is_causal else None}
    if attn_mask is not None:
        kwargs["bias"] = attn_mask
    return _emit("nn.attention", name, _tensor(query, "query"), _tensor(key, "key"), _tensor(value, "value"),
                 **kwargs)


# ----------------------------------------------------------------------------- shapes


def reshape(x: Tensor, shape: Sequence, name: str = "reshape") -> Tensor:
    """``x`` with a new shape (one ``-1`` is inferred; dims may be symbolic)."""
    return _emit("reshape", name, _tensor(x, "reshape's input"), list(shape))


def permute_dims(x: Tensor, axes: Optional[Sequence[int]] = None, name: Optional[str] = None) -> Tensor:
    """``x`` with its axes reordered (reversed when ``axes`` is None)."""
    x = _tensor(x, "permute_dims's input")
    if name is None:  # TVM names the transpose of a "linear..." value after the matmul it feeds
        source = getattr(x._expr, "name_hint", "")
        name = source.replace("linear", "matmul") if "linear" in source else "permute_dims"
    return _emit("permute_dims", name, x, axes=None if axes is None else list(axes))


def permute(x: Tensor, axes: Optional[Sequence[int]], name: str = "permute") -> Tensor:
    """`permute_dims` under PyTorch's name."""
    return _emit("permute_dims", name, _tensor(x, "permute's input"), axes=None if axes is None else list(axes))


def squeeze(x: Tensor, axis: Union[int, Sequence[int], None] = -1, name: str = "squeeze") -> Tensor:
    """``x`` without the size-1 axes ``axis`` (all of them when None)."""
    return _emit("squeeze", name, _tensor(x, "squeeze's input"), axis=_axes_list(axis))


def unsqueeze(x: Tensor, dim: int, name: str = "unsqueeze") -> Tensor:
    """``x`` with a new size-1 axis at ``dim``."""
    return _emit("expand_dims", name, _tensor(x, "unsqueeze's input"), dim)


def concat(x: Sequence[Tensor], dim: int, name: str = "concat") -> Tensor:
    """The tensors joined along ``dim``."""
    tensors = [_tensor(t, "concat's inputs") for t in x]
    return _emit("concat", name, tensors, axis=dim)


def split(ary: Tensor, indices_or_sections, axis: int = 0, name: str = "split") -> tuple:
    """``ary`` cut along ``axis`` into equal sections (an int) or at indices (a list); a tuple
    of tensors bound as ``split_0``, ``split_1``, ..."""
    return _emit("split", name, _tensor(ary, "split's input"), indices_or_sections, axis=axis)


def chunk(x: Tensor, chunks: int, dim: int = 0, name: str = "chunk") -> tuple:
    """`split` into ``chunks`` equal parts, PyTorch's spelling."""
    return _emit("split", name, _tensor(x, "chunk's input"), chunks, axis=dim)


def broadcast_to(x: Tensor, shape: Sequence, name: str = "broadcast_to") -> Tensor:
    return _emit("broadcast_to", name, _tensor(x, "broadcast_to's input"), list(shape))


def repeat(x: Tensor, repeats: int, axis: Optional[int] = None, name: str = "repeat") -> Tensor:
    """Each element repeated ``repeats`` times along ``axis`` (flattened when None)."""
    return _emit("repeat", name, _tensor(x, "repeat's input"), repeats, axis=axis)


def tile(x: Tensor, repeats: Sequence[int], name: str = "tile") -> Tensor:
    """``x`` tiled ``repeats[i]`` times along each axis."""
    return _emit("tile", name, _tensor(x, "tile's input"), list(repeats) if not isinstance(repeats, int) else repeats)


def take(x: Tensor, indices: Tensor, axis: Optional[int] = None, name: str = "take") -> Tensor:
    """Elements of ``x`` at integer ``indices`` along ``axis`` (of the flattened ``x`` when None)."""
    return _emit("take", name, _tensor(x, "take's input"), _tensor(indices, "take's indices"), axis=axis)


def strided_slice(x: Tensor, axes: Sequence[int], begin: Sequence, end: Sequence,
                  strides: Optional[Sequence] = None, name: str = "strided_slice") -> Tensor:
    """``x[begin:end:strides]`` along ``axes``."""
    return _emit("strided_slice", name, _tensor(x, "strided_slice's input"), list(axes), list(begin),
                 list(end), None if strides is None else list(strides))


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0, name: str = "pad") -> Tensor:
    """``x`` padded by ``pad`` (before and after, per axis, as ``R.nn.pad``'s pad_width)."""
    return _emit("nn.pad", name, _tensor(x, "pad's input"), list(pad), pad_mode=mode, pad_value=value)


def tril(x: Tensor, diagonal: int = 0, name: str = "tril") -> Tensor:
    """``x`` with the elements above diagonal ``diagonal`` set to zero."""
    return _emit("tril", name, _tensor(x, "tril's input"), diagonal)


def triu(x: Tensor, diagonal: int = 0, name: str = "triu") -> Tensor:
    """``x`` with the elements below diagonal ``diagonal`` set to zero."""
    return _emit("triu", name, _tensor(x, "triu's input"), diagonal)


# ----------------------------------------------------------------------------- reductions


def _reduction(relax_name: str):
    def op(x: Tensor, axis: Union[int, Sequence[int], None] = None, keepdims: bool = False,
           name: str = relax_name) -> Tensor:
        return _emit(relax_name, name, _tensor(x, f"{relax_name}'s input"), axis=_axes_list(axis), keepdims=keepdims)

    op.__name__ = op.__qualname__ = relax_name
    op.__doc__ = f"The {relax_name} of ``x`` over ``axis`` (every axis when None)."
    return op


sum = _reduction("sum")  # noqa: A001 - TVM's names
max = _reduction("max")  # noqa: A001
min = _reduction("min")  # noqa: A001
mean = _reduction("mean")
prod = _reduction("prod")
variance = _reduction("variance")
std = _reduction("std")


def argmax(x: Tensor, axis: Optional[int] = None, keepdims: bool = False, name: str = "argmax") -> Tensor:
    return _emit("argmax", name, _tensor(x, "argmax's input"), axis=axis, keepdims=keepdims)


def argmin(x: Tensor, axis: Optional[int] = None, keepdims: bool = False, name: str = "argmin") -> Tensor:
    return _emit("argmin", name, _tensor(x, "argmin's input"), axis=axis, keepdims=keepdims)


def cumsum(data: Tensor, axis: Optional[int] = None, dtype: Optional[str] = None, exclusive: bool = False,
           name: str = "cumsum") -> Tensor:
    """Running sum along ``axis`` (of the flattened tensor when None)."""
    return _emit("cumsum", name, _tensor(data, "cumsum's input"), axis=axis, dtype=dtype, exclusive=exclusive)


# ----------------------------------------------------------------------------- creation


def _fill_dtype(dtype: Optional[str]) -> str:
    return get_default_dtype() if dtype is None else dtype


def zeros(shape: Sequence, dtype: str = "float32", name: str = "zeros") -> Tensor:
    return _emit("zeros", name, list(shape), _fill_dtype(dtype))


def ones(shape: Sequence, dtype: str = "float32", name: str = "ones") -> Tensor:
    return _emit("ones", name, list(shape), _fill_dtype(dtype))


def full(shape: Sequence, fill_value, dtype: str = "float32", name: str = "full") -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (a number or a 0-d tensor)."""
    dtype = _fill_dtype(dtype)
    value = _scalar(fill_value, dtype) if _is_scalar(fill_value) else _tensor(fill_value, "full's fill_value")
    return _emit("full", name, list(shape), value, dtype)


def arange(start, end=None, step=1, dtype: str = "float32", name: str = "arange") -> Tensor:
    """``[start, end)`` in steps of ``step`` (``arange(n)`` counts from 0)."""
    if end is None:
        start, end = 0, start
    return _emit("arange", name, start, end, step, _fill_dtype(dtype))


# ----------------------------------------------------------------------------- TE and TIR


def tensor_expr_op(tensor_expr_func, name_hint: str, args: Sequence, attrs: Optional[dict] = None):
    """A TE computation as an op: ``tensor_expr_func(*args, **attrs)`` runs on placeholders for
    the tensor arguments, its prim_func is added to the module as ``name_hint`` and called with
    ``R.call_tir`` (``bb.emit_te``)."""
    from .core import current_builder

    bb = current_builder(f"nn.op.tensor_expr_op ({name_hint})")
    try:
        call = bb.call_te(tensor_expr_func, *[_unwrap(a) for a in args], primfunc_name_hint=name_hint,
                          **(attrs or {}))
    except (ValueError, TypeError) as err:
        raise ExportError(f"nn.op.tensor_expr_op {name_hint!r} at {user_location()}: {err}") from None
    return _wrap(call, name_hint)


def tensor_ir_op(func, name_hint: str, args: Sequence, out):
    """A TensorIR prim_func as an op: ``R.call_tir(func, tensors, out_sinfo, tir_vars)``.
    ``args`` holds tensors and integers/``tir`` expressions (passed as the prim_func's scalar
    parameters); ``out`` is a `Tensor` placeholder (or a list of them) giving the result's shape
    and dtype (``Tensor.placeholder((n, 4), "float32")``)."""
    from ....ir.op import api
    from .core import current_builder

    bb = current_builder(f"nn.op.tensor_ir_op ({name_hint})")
    tensors = [a._expr for a in args if isinstance(a, Tensor)]
    scalars = [a for a in args if not isinstance(a, Tensor)]
    outs = out if isinstance(out, (list, tuple)) else [out]
    sinfos = [relax.struct_info_of(_tensor(o, "tensor_ir_op's out")._expr) for o in outs]
    gv = bb.add_func(func, name_hint)
    try:
        call = api.call_tir(gv, tensors, sinfos if isinstance(out, (list, tuple)) else sinfos[0],
                            tir_vars=scalars or None)
    except (ValueError, TypeError) as err:
        raise ExportError(f"nn.op.tensor_ir_op {name_hint!r} at {user_location()}: {err}") from None
    return _wrap(call, name_hint)


__all__ = [n for n, v in dict(globals()).items()
           if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == __name__]
