"""Values known while importing: what lets shape computations fold away.

ONNX exporters compute shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat ->
Reshape``). When the model's shapes are static those values are plain constants and fold as
any constant does. With a symbolic dimension (``seq``, a ``dim_param``) they are still known
at import time, as expressions of that dimension: a `SymbolicInts` holds them, a NumPy array
of objects whose elements are Python ints or ``tir.PrimExpr``. Converters of the shape ops
(Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Cast, arithmetic, Equal, Where...)
compute on it; ops that take a shape (Reshape, Expand, ConstantOfShape, Range) read it as
their target shape, so ``R.reshape(x, R.shape([1, seq, 4, 8]))`` comes out with no run-time
shape arithmetic, as TVM's importer produces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .... import relax, tir
from ....ir.op import shape_arith as _shape_arith


@dataclass(frozen=True)
class SymbolicInts:
    """An integer tensor (usually a 1-D shape) known as expressions of symbolic dims."""

    array: np.ndarray  # dtype object: int | tir.PrimExpr elements
    dtype: str = "int64"

    @property
    def shape(self) -> tuple:
        return self.array.shape


def is_static(element) -> bool:
    return _shape_arith.as_int(element) is not None


def known_value(array: np.ndarray, dtype: str):
    """`array` as an import-time value: a ``relax.Constant`` when every element is a number,
    else a `SymbolicInts`."""
    if not isinstance(array, np.ndarray):  # NumPy indexing gives an element, not a 0-d array
        element, array = array, np.empty((), dtype=object)
        array[()] = element
    if array.dtype != object:
        return relax.const(np.asarray(array, dtype=dtype))
    flat = [_shape_arith.as_int(e) for e in array.flat]
    if all(v is not None for v in flat):
        return relax.const(np.asarray(flat, dtype=dtype).reshape(array.shape))
    return SymbolicInts(array, dtype)


def object_array(values, shape=None) -> np.ndarray:
    """A NumPy object array of `values` (ints and PrimExprs; constant ones become ints),
    reshaped to `shape`."""
    flat = list(values)
    out = np.empty(len(flat), dtype=object)
    for i, v in enumerate(flat):
        static = _shape_arith.as_int(int(v) if isinstance(v, np.integer) else v)
        out[i] = static if static is not None else v
    return out.reshape(shape if shape is not None else (len(flat),))


def as_object_array(array: np.ndarray) -> np.ndarray:
    """An integer array (or an object array already) as an object array of ints."""
    if array.dtype == object:
        return array
    return object_array(array.reshape(-1).tolist(), array.shape)


def as_dim(element) -> tir.PrimExpr:
    """A shape element as an int64 dimension."""
    value = _shape_arith.as_int(element)
    if value is not None:
        return tir.IntImm("int64", value)
    if element.dtype != "int64":
        return tir.Cast("int64", element)
    return element


# Integer arithmetic on elements that may be symbolic, folding where both are numbers.
ARITHMETIC = {
    "Add": _shape_arith.add,
    "Sub": _shape_arith.sub,
    "Mul": _shape_arith.mul,
}


def truncating_div(a, b):
    """ONNX integer Div (C truncation); on symbolic dims the values are non-negative sizes, so
    it is the floor division the shape arithmetic folds."""
    ia, ib = _shape_arith.as_int(a), _shape_arith.as_int(b)
    if ia is not None and ib is not None:
        return int(ia / ib) if ib else 0
    return _shape_arith.floordiv(a, b)


ARITHMETIC["Div"] = truncating_div


def elementwise(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`fn` applied to broadcast object arrays `a` and `b`."""
    a, b = np.broadcast_arrays(as_object_array(a), as_object_array(b))
    return object_array([fn(x, y) for x, y in zip(a.flat, b.flat)], a.shape)


def same_element(a, b):
    """True/False when `a == b` is decided (equal numbers, structurally equal expressions, two
    different numbers), None when it depends on a symbolic dim's value."""
    ia, ib = _shape_arith.as_int(a), _shape_arith.as_int(b)
    if ia is not None and ib is not None:
        return ia == ib
    from ....ir import structural_equal

    if ia is None and ib is None and structural_equal(a, b):
        return True
    return None


def _factors(element) -> tuple:
    """``(coefficient, [symbolic factors])`` of a product of ints and symbolic dims."""
    value = _shape_arith.as_int(element)
    if value is not None:
        return value, []
    if isinstance(element, tir.Mul):
        ca, fa = _factors(element.a)
        cb, fb = _factors(element.b)
        return ca * cb, fa + fb
    return 1, [element]


def _product_factors(dims) -> tuple:
    coefficient, factors = 1, []
    for d in dims:
        c, f = _factors(d)
        coefficient, factors = coefficient * c, factors + f
    return coefficient, factors


def inferred_dim(input_dims: list, known_dims: list):
    """The extent a reshape's -1 stands for: the input's element count over the known target
    dims', with common symbolic factors cancelled (``seq*32 / seq`` is 32); None when it does
    not divide evenly that way."""
    from ....ir import structural_equal

    c_in, f_in = _product_factors(input_dims)
    c_known, f_known = _product_factors(known_dims)
    for f in f_known:
        match = next((k for k, g in enumerate(f_in) if g is f or structural_equal(g, f)), None)
        if match is None:
            return None
        f_in.pop(match)
    if c_known == 0 or c_in % c_known:
        return None
    out = tir.IntImm("int64", c_in // c_known)
    for f in f_in:
        out = _shape_arith.mul(out, f)
    return out
