"""What the two PyTorch importers share: the walk over an FX graph and the op converters.

`from_exported_program` (ATen graphs from ``torch.export``) and `from_fx` (``torch.fx``
graphs of ``nn.Module`` calls, ``torch.*`` functions and tensor methods) read the same kind of
graph, ``torch.fx.Graph``, whose nodes call operators with arguments that are other nodes,
Python numbers and lists. Most operators mean the same in both (``aten.conv2d`` and
``F.conv2d``, ``aten.view`` and ``Tensor.view``), so one converter serves both: each converter
is a method of `BaseTranslator` taking the node and emitting Relax through the BlockBuilder,
and each importer only keeps its table from its own operator names to these methods.

Conventions follow TVM's importers (``tvm.relax.frontend.torch``), so the modules print alike:
one binding per Relax op (``lv``, ``lv1``, ...), ``nn.Linear`` as ``R.permute_dims`` +
``R.matmul(out_dtype="float32")`` + ``R.add``, a conv bias as ``R.reshape`` + ``R.add``,
``select`` as ``R.take`` of an int64 constant, ``scaled_dot_product_attention`` as
``R.nn.attention`` in the BSNH layout, Python scalars as constants of the tensor's dtype.
Unlike TVM's, a product's ``out_dtype`` is the model's dtype, not always float32, so float16
and bfloat16 models import with their own dtypes throughout.

Where things live: `graph` walks the graph (arguments, emitting, errors); `ops_math`,
`ops_nn`, `ops_rnn` and `ops_shape` hold the converters as mixins; this module combines them
into `BaseTranslator` and names them (`common_converters`).

A converter that meets something it cannot translate faithfully raises
`UnsupportedOpError` (an argument value it does not handle) or `FrontendError`; the importer
adds the node's name, so the user learns which node of the graph is at fault, and no module is
returned.
"""

from __future__ import annotations

import operator
from typing import Callable

from .... import tir
from ....ir.op import api as _op
from .graph import GraphTranslator, _is_expr, _prim_extreme
from .ops_math import MathOps
from .ops_nn import NNOps
from .ops_rnn import RNNOps
from .ops_shape import ShapeOps


class BaseTranslator(GraphTranslator, MathOps, NNOps, RNNOps, ShapeOps):
    """The graph walk and every shared converter; each importer subclasses it with its own
    table from operator names to converters (`common_converters` holds the shared entries)."""


# Elementwise ops of one tensor: PyTorch's name -> Relax op (relax.op.<name>).
UNARY_OPS = {
    "abs": "abs", "ceil": "ceil", "cos": "cos", "erf": "erf", "exp": "exp", "floor": "floor",
    "log": "log", "neg": "negative", "negative": "negative", "relu": "nn.relu", "round": "round",
    "rsqrt": "rsqrt", "sigmoid": "sigmoid", "sin": "sin", "sqrt": "sqrt", "square": "square",
    "tanh": "tanh", "silu": "nn.silu", "logical_not": "logical_not", "sign": "sign",
    "bitwise_not": "logical_not",
}

# Binary ops: PyTorch's name -> (Relax op, the same on Python/symbolic scalars).
BINARY_OPS = {
    "mul": (_op.multiply, operator.mul), "multiply": (_op.multiply, operator.mul),
    "floor_divide": (_op.floor_divide, operator.floordiv), "floordiv": (_op.floor_divide, operator.floordiv),
    "maximum": (_op.maximum, lambda a, b: _prim_extreme(tir.Max, max, a, b)),
    "minimum": (_op.minimum, lambda a, b: _prim_extreme(tir.Min, min, a, b)),
    "eq": (_op.equal, operator.eq), "ne": (_op.not_equal, operator.ne), "lt": (_op.less, operator.lt),
    "le": (_op.less_equal, operator.le), "gt": (_op.greater, operator.gt),
    "ge": (_op.greater_equal, operator.ge),
    "logical_and": (_op.logical_and, operator.and_), "logical_or": (_op.logical_or, operator.or_),
    "mod": (None, operator.mod),
}

# Reductions taking (input, dim, keepdim): PyTorch's name -> Relax op.
REDUCE_OPS = {"sum": _op.sum, "mean": _op.mean, "prod": _op.prod, "amax": _op.max, "amin": _op.min}


def common_converters(t: BaseTranslator) -> dict:
    """The converters both importers use, keyed by PyTorch's op name (an ATen op's name
    without its overload, a ``torch``/``torch.nn.functional`` function's, a tensor method's).
    Each importer maps its own spellings onto these."""
    table = {name: t.unary(op) for name, op in UNARY_OPS.items()}
    for name, (relax_fn, py_fn) in BINARY_OPS.items():
        if relax_fn is None:
            table[name] = _scalar_only(t, py_fn)
        else:
            table[name] = t.binary(relax_fn, py_fn)
    for name, fn in REDUCE_OPS.items():
        table[name] = t.reduce(fn)
    table.update({
        "add": t._add, "sub": t._sub, "subtract": t._sub, "rsub": t._rsub, "div": t._div,
        "divide": t._div, "true_divide": t._div, "truediv": t._div, "pow": t._pow,
        "where": t._where, "masked_fill": t._masked_fill,
        "gelu": t._gelu, "hardtanh": t._hardtanh, "relu6": t._relu6, "clamp": t._clamp,
        "clip": t._clamp, "clamp_min": t._clamp_min, "clamp_max": t._clamp_max,
        "hardsigmoid": t._hardsigmoid, "hardswish": t._hardswish, "leaky_relu": t._leaky_relu,
        "softmax": t._softmax, "_softmax": t._softmax, "log_softmax": t._log_softmax,
        "_log_softmax": t._log_softmax,
        "linear": t._linear, "matmul": t._matmul, "mm": t._matmul, "bmm": t._matmul, "addmm": t._addmm,
        "conv1d": t._conv, "conv2d": t._conv, "convolution": t._convolution,
        "batch_norm": t._batch_norm, "_native_batch_norm_legit_no_training": t._native_batch_norm_no_training,
        "layer_norm": t._layer_norm, "native_layer_norm": t._native_layer_norm,
        "group_norm": t._group_norm, "rms_norm": t._rms_norm,
        "max_pool2d": t._max_pool2d, "max_pool2d_with_indices": t._max_pool2d_with_indices,
        "avg_pool2d": t._avg_pool2d,
        "adaptive_avg_pool2d": t._adaptive_avg_pool2d, "_adaptive_avg_pool2d": t._adaptive_avg_pool2d,
        "upsample_nearest2d": t._upsample_nearest2d, "_upsample_nearest_exact2d": t._upsample_nearest_exact2d,
        "upsample_bilinear2d": t._upsample_bilinear2d, "interpolate": t._interpolate,
        "lstm": t._lstm, "dropout": t._dropout, "native_dropout": t._native_dropout, "embedding": t._embedding,
        "scaled_dot_product_attention": t._scaled_dot_product_attention,
        "var": t._var, "std": t._std, "argmax": t._argmax, "argmin": t._argmin, "cumsum": t._cumsum,
        "view": t._view, "reshape": t._view, "_unsafe_view": t._view, "flatten": t._flatten,
        "unflatten": t._unflatten, "transpose": t._transpose, "t": t._t, "permute": t._permute,
        "unsqueeze": t._unsqueeze, "squeeze": t._squeeze, "expand": t._expand, "expand_as": t._expand_as,
        "repeat": t._repeat, "cat": t._cat, "concat": t._cat, "concatenate": t._cat, "stack": t._stack,
        "split": t._split, "split_with_sizes": t._split, "chunk": t._chunk, "unbind": t._unbind,
        "select": t._select, "slice": t._slice, "getitem": t._getitem, "index_select": t._index_select,
        "index": t._index, "slice_scatter": t._slice_scatter, "select_scatter": t._select_scatter,
        "roll": t._roll, "copy": t._copy,
        "tril": t._tril, "triu": t._triu, "pad": t._pad, "constant_pad_nd": t._constant_pad_nd,
        "contiguous": t._identity, "clone": t._identity, "detach": t._identity, "alias": t._identity,
        "lift_fresh_copy": t._identity,
        "to": t._to, "_to_copy": t._to, "type_as": t._type_as,
        "arange": t._arange, "full": t._full, "zeros": t.creation(0), "ones": t.creation(1),
        "zeros_like": t.creation_like(0), "ones_like": t.creation_like(1), "full_like": t.creation_like(None),
        "new_zeros": t.new_creation(0), "new_ones": t.new_creation(1), "new_full": t.new_creation(None),
        "fill": t._fill,
        "sym_size": t._sym_size, "size": t._size,
    })
    return table


def _scalar_only(t: BaseTranslator, py_fn) -> Callable:
    """An operator that only appears on sizes (``operator.mod`` of SymInts)."""
    def convert(node):
        lhs = t.arg(node, 0, "input")
        rhs = t.arg(node, 1, "other")
        if _is_expr(lhs) or _is_expr(rhs):
            raise t.unsupported(node, "tensor operands")
        return py_fn(lhs, rhs)

    return convert
