"""What a converter sees of the node it translates: `NodeContext`.

A converter reads its inputs through the context — as Relax expressions (`tensor`), as values
known at import time (`known`, `ints`, `const`), or just their struct info (`shape`, `dtype`) —
its attributes (`attr`), and emits Relax through `emit`. It returns the node's outputs: Relax
expressions, or NumPy arrays / `SymbolicInts` for values it computed at import time (the
importer turns those into constants).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .... import relax, tir
from ..common import FrontendError
from .values import SymbolicInts, as_dim, as_object_array

# onnx.AttributeProto.AttributeType values -> how to read them
_ATTR_READERS = {
    1: lambda a: float(a.f),                               # FLOAT
    2: lambda a: int(a.i),                                 # INT
    3: lambda a: a.s.decode("utf-8", errors="replace"),    # STRING
    4: lambda a: _tensor_array(a.t),                       # TENSOR
    5: lambda a: a.g,                                      # GRAPH
    6: lambda a: [float(v) for v in a.floats],             # FLOATS
    7: lambda a: [int(v) for v in a.ints],                 # INTS
    8: lambda a: [s.decode("utf-8", errors="replace") for s in a.strings],  # STRINGS
}


def _tensor_array(tensor) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)


def parse_attributes(node) -> dict:
    """The node's attributes as Python values (ints, floats, strings, lists, arrays)."""
    out = {}
    for a in node.attribute:
        reader = _ATTR_READERS.get(a.type)
        out[a.name] = reader(a) if reader is not None else a
    return out


def onnx_dtype(elem_type: int) -> str:
    """The dtype name of an ONNX ``TensorProto`` element type."""
    from onnx import helper

    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError, ValueError):
        raise FrontendError(f"ONNX element type {elem_type} has no NumPy equivalent") from None


class NodeContext:
    """One node being converted: see the module docstring."""

    def __init__(self, importer, node, index: int, opset: int) -> None:
        self._importer = importer
        self.node = node
        self.index = index
        self.opset = opset
        self.bb = importer.bb
        self.attrs = parse_attributes(node)

    # ------------------------------------------------------------------ the node
    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def name(self) -> str:
        """The node's name, or ``#index`` for an unnamed node."""
        return self.node.name or f"#{self.index}"

    def error(self, message: str) -> FrontendError:
        """A `FrontendError` about this node (raise it)."""
        return FrontendError(f"ONNX {self.op_type} node {self.name!r}: {message}")

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def output_used(self, i: int) -> bool:
        """Whether output `i` exists and is named (an optional output may be left blank)."""
        return i < len(self.node.output) and self.node.output[i] != ""

    # ------------------------------------------------------------------ inputs
    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    def has(self, i: int) -> bool:
        """Whether optional input `i` is given."""
        return i < len(self.node.input) and self.node.input[i] != ""

    def _value(self, i: int):
        if not self.has(i):
            raise self.error(f"input {i} is required")
        return self._importer.lookup(self.node.input[i])

    def is_symbolic(self, i: int) -> bool:
        """Whether input `i` holds values computed from symbolic dims."""
        return self.has(i) and isinstance(self._value(i), SymbolicInts)

    def symbolic(self) -> bool:
        """Whether some input holds values computed from symbolic dims (a `SymbolicInts`): the
        shape ops then compute their result at import time too."""
        return any(self.is_symbolic(i) for i in range(self.num_inputs))

    def tensor(self, i: int) -> relax.Expr:
        """Input `i` as a Relax expression (a value known at import time becomes a constant)."""
        value = self._value(i)
        if isinstance(value, SymbolicInts):
            raise self.error(f"input {i} ({self.node.input[i]!r}) holds values computed from symbolic "
                             "dimensions, which this op cannot take as a tensor")
        self._importer.mark_used(value)
        return value

    def known(self, i: int) -> Optional[np.ndarray]:
        """Input `i`'s value when known at import time: a NumPy array (of objects — ints and
        ``tir.PrimExpr`` — when it depends on symbolic dims), else None. An initializer kept
        as a parameter counts as known: its value is in the model."""
        if not self.has(i):
            return None
        name = self.node.input[i]
        value = self._importer.lookup(name)
        if isinstance(value, SymbolicInts):
            return value.array
        if isinstance(value, relax.Constant):
            return value.data
        return self._importer.initializer_value(name)

    def const(self, i: int) -> Optional[np.ndarray]:
        """Input `i` as a NumPy array of numbers when it is a constant, else None."""
        value = self.known(i)
        return value if value is not None and value.dtype != object else None

    def ints(self, i: int) -> Optional[list]:
        """Input `i` flattened to a list of ints/``tir.PrimExpr`` when known, else None."""
        value = self.known(i)
        if value is None:
            return None
        if value.dtype != object and not np.issubdtype(value.dtype, np.integer):
            raise self.error(f"input {i} must hold integers, not {value.dtype}")
        return [v if isinstance(v, tir.PrimExpr) else int(v) for v in as_object_array(value).flat]

    def static_ints(self, i: int, what: str) -> list[int]:
        """Input `i` as a list of Python ints; a `FrontendError` saying `what` it is when the
        values are computed at run time or depend on a symbolic dim."""
        values = self.ints(i)
        if values is None or any(not isinstance(v, int) for v in values):
            raise self.error(f"the {what} (input {i}, {self.node.input[i]!r}) must be known when the model "
                             "is imported; this importer does not translate run-time ones")
        return values

    def shape_input(self, i: int, what: str = "shape") -> list:
        """Input `i` as a list of int64 dims (``tir.PrimExpr``), known at import time."""
        values = self.ints(i)
        if values is None:
            raise self.error(f"the {what} (input {i}, {self.node.input[i]!r}) must be known when the model "
                             "is imported; this importer does not translate run-time shapes")
        return [as_dim(v) for v in values]

    def sinfo(self, i: int) -> relax.TensorStructInfo:
        value = self._value(i)
        if isinstance(value, SymbolicInts):
            return relax.TensorStructInfo([tir.IntImm("int64", d) for d in value.shape], value.dtype)
        sinfo = relax.struct_info_of(value)
        if not isinstance(sinfo, relax.TensorStructInfo):
            raise self.error(f"input {i} ({self.node.input[i]!r}) is not a tensor")
        return sinfo

    def dtype(self, i: int) -> str:
        return self.sinfo(i).dtype

    def ndim(self, i: int) -> int:
        ndim = self.sinfo(i).ndim
        if ndim < 0:
            raise self.error(f"the rank of input {i} ({self.node.input[i]!r}) is unknown")
        return ndim

    def shape(self, i: int) -> list:
        """Input `i`'s dims (``tir.PrimExpr``); a `FrontendError` when unknown."""
        sinfo = self.sinfo(i)
        if sinfo.shape is None:
            raise self.error(f"the shape of input {i} ({self.node.input[i]!r}) is unknown")
        return list(sinfo.shape)

    # ------------------------------------------------------------------ emitting
    def emit(self, expr) -> relax.Var:
        """Bind `expr` (a Relax call) in the function being built."""
        return self.bb.emit(expr)
