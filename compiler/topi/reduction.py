"""Reductions over axes (TVM's ``topi/reduction.h``): ``sum``, ``prod``, ``max``, ``min``,
``mean``, ``variance``, ``argmax``, ``argmin``; and ``collapse_sum`` (a sum down to a shape
that broadcasts back, Relax's ``collapse_sum_like``/``collapse_sum_to``) and ``median``.

A reduction of tensor ``x`` is one stage named ``<x>_red`` (``x0_red``), as TVM's; its spatial
loops ``ax0, ax1...`` run over the output (a kept reduced dimension is a loop of extent 1) and
its reduce loops are named ``k<axis>`` after the input axis they cover. ``axis`` is None (all
axes), an int, or a list of ints, negative ones counting from the end.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.shape_arith import floordiv, product, sub
from tvmscript.ir.tir_arith import is_one

from .. import te
from ._util import axis_names
from .broadcast import divide, multiply, subtract
from .transform import _cast_index

__all__ = ["sum", "prod", "max", "min", "mean", "variance", "std", "argmax", "argmin", "collapse_sum", "median"]

_builtin_sorted = sorted


def real_axes(ndim: int, axis) -> list:
    """The reduced axes as sorted non-negative ints (every axis when ``axis`` is None)."""
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor of rank {ndim}")
        a = a + ndim if a < 0 else a
        if a in out:
            raise ValueError(f"axis {a} is repeated")
        out.append(a)
    return _builtin_sorted(out)


def _reduce_loops(x: te.Tensor, axes: list, keepdims: bool):
    """(output shape, reduce IterVars keyed by input axis, fn mapping output indices to the
    input's indices)."""
    shape = list(x.shape)
    red = {a: te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes}
    oshape = []
    for i, d in enumerate(shape):
        if i not in red:
            oshape.append(d)
        elif keepdims:
            oshape.append(tir.IntImm(d.dtype, 1))

    def source_index(idx: list) -> tuple:
        out, pos = [], 0
        for i in range(len(shape)):
            if i in red:
                out.append(red[i])
                pos += keepdims
            else:
                out.append(idx[pos])
                pos += 1
        return tuple(out)

    return oshape, red, source_index


def _comm_reduce(x: te.Tensor, axis, keepdims: bool, reducer, name: str | None = None) -> te.Tensor:
    axes = real_axes(len(x.shape), axis)
    oshape, red, source_index = _reduce_loops(x, axes, keepdims)
    ks = [red[a] for a in axes]
    return te.compute(oshape, lambda *idx: reducer(x[source_index(list(idx))], axis=ks),
                      name=name or f"{x.name}_red", varargs_names=axis_names(len(oshape)))


def sum(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _comm_reduce(x, axis, keepdims, te.sum)


def prod(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _comm_reduce(x, axis, keepdims, te.prod)


def max(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _comm_reduce(x, axis, keepdims, te.max)


def min(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _comm_reduce(x, axis, keepdims, te.min)


def _count(x: te.Tensor, axis):
    """How many elements each output of a reduction over ``axis`` combines, in ``x``'s dtype:
    a constant for static extents, ``T.Cast(dtype, n * m)`` for symbolic ones."""
    n = None
    for a in real_axes(len(x.shape), axis):
        d = x.shape[a]
        d = tir.IntImm(d.dtype, d.value) if isinstance(d, tir.IntImm) else d
        n = d if n is None else (tir.IntImm(n.dtype, n.value * d.value)
                                 if isinstance(n, tir.IntImm) and isinstance(d, tir.IntImm) else n * d)
    if n is None:
        return tir.const(1, x.dtype)
    if isinstance(n, tir.IntImm):
        return tir.const(n.value, x.dtype)
    return te.cast(n, x.dtype)


def mean(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """``sum / count``: the stages ``<x>_red`` and ``T_divide``, as Relax legalizes mean."""
    return divide(sum(x, axis, keepdims), _count(x, axis))


def variance(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """``mean((x - mean(x))**2)`` (the population variance, NumPy's ``ddof=0``), in Relax's six
    stages: ``<x>_red``, ``T_divide``, ``T_subtract``, ``T_multiply``, ``T_multiply_red``,
    ``T_divide_1``. The inner mean keeps the reduced dimensions so it broadcasts against x."""
    dev = subtract(x, mean(x, axis, keepdims=True))
    return mean(multiply(dev, dev), axis, keepdims)


def std(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """``sqrt(variance)`` (NumPy's ``ddof=0``): variance's six stages, then a ``compute`` stage
    taking the square root, as Relax legalizes ``std``."""
    var = variance(x, axis, keepdims)
    return te.compute(var.shape, lambda *i: te.sqrt(var(*i)))


def _arg_reduce(x: te.Tensor, axis, keepdims: bool, select_max: bool) -> te.Tensor:
    """The index (int64, row-major over the reduced axes) of the first extreme element.

    TVM computes value and index together with a tuple reducer in one block; TE here has
    single-output reductions, so it takes two: ``<x>_red_temp`` is the extreme value, then
    ``<x>_red`` the smallest flat index holding it (``min`` over ``k`` of ``idx if x == extreme
    else INT64_MAX``), which is the same first-occurrence index."""
    axes = real_axes(len(x.shape), None if axis is None else [axis])
    best = _comm_reduce(x, axes, keepdims, te.max if select_max else te.min, name=f"{x.name}_red_temp")
    oshape, red, source_index = _reduce_loops(x, axes, keepdims)
    ks = [red[a] for a in axes]

    def flat_index():
        flat = None
        for a in axes:
            k = te.cast(red[a].var, "int64")
            flat = k if flat is None else flat * te.cast(x.shape[a], "int64") + k
        return flat if flat is not None else tir.IntImm("int64", 0)

    def f(*idx):
        hit = tir.EQ("bool", x[source_index(list(idx))], best[tuple(idx)])
        none = tir.IntImm("int64", 2**63 - 1)
        return te.min(tir.Select("int64", hit, flat_index(), none), axis=ks)

    return te.compute(oshape, f, name=f"{x.name}_red", varargs_names=axis_names(len(oshape)))


def argmax(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _arg_reduce(x, axis, keepdims, select_max=True)


def argmin(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    return _arg_reduce(x, axis, keepdims, select_max=False)


def collapse_sum(x: te.Tensor, target_shape) -> te.Tensor:
    """The sum of ``x`` down to ``target_shape``, which broadcasts to ``x``'s shape: the
    gradient of a broadcast. Leading axes ``target_shape`` lacks are summed away, axes where it
    is 1 (and ``x`` is not) are summed and kept as 1; one stage ``<x>_red`` whose spatial loops
    ``ax0...`` run over the target and reduce loops ``k<axis>`` over the summed input axes."""
    shape, target = list(x.shape), list(target_shape)
    lead = len(shape) - len(target)
    red = {}
    for a, d in enumerate(shape):
        t = target[a - lead] if a >= lead else None
        if t is None or (is_one(t) and not is_one(d)):
            red[a] = te.reduce_axis((0, d), name=f"k{a}")

    def f(*idx):
        src = [red[a] if a in red else idx[a - lead] for a in range(len(shape))]
        return te.sum(x[tuple(src)], axis=[red[a] for a in sorted(red)])

    if not red:
        return te.compute(target, lambda *idx: x[tuple(idx)], name=f"{x.name}_red",
                          varargs_names=axis_names(len(target)))
    return te.compute(target, f, name=f"{x.name}_red", varargs_names=axis_names(len(target)))


def median(x: te.Tensor, axis=None, keepdims: bool = False, with_indices: bool = False):
    """The lower median over ``axis`` (element ``(n - 1) // 2`` of the sorted ``n`` reduced
    elements, NumPy's ``np.sort(...)[..., (n - 1) // 2]``), and with ``with_indices`` its
    position along the (single) axis as int64, the one a stable argsort puts there.

    TVM sorts through a packed argsort call; TE has no sort, so this ranks instead:
    ``T_rank`` gives each element its position in the stable sort of its group (how many
    elements are smaller, plus how many equal ones come before it), then ``T_median`` picks
    the element of rank ``(n - 1) // 2`` (a sum with exactly one nonzero term), and
    ``T_median_index`` its index. Quadratic in the reduced extent, exact for ties."""
    axes = real_axes(len(x.shape), axis)
    shape = list(x.shape)
    _, red, source_index = _reduce_loops(x, axes, keepdims)

    def flat(ix: list):
        out = None
        for a in axes:
            k = te.cast(ix[a], "int64")
            out = k if out is None else out * te.cast(shape[a], "int64") + k
        return out if out is not None else tir.IntImm("int64", 0)

    def rank(*idx):
        idx = list(idx)
        other = [red[a] if a in red else idx[a] for a in range(len(shape))]
        a, b = x[tuple(other)], x[tuple(idx)]
        before = tir.Or("bool", tir.LT("bool", a, b),
                        tir.And("bool", tir.EQ("bool", a, b), tir.LT("bool", flat(other), flat(idx))))
        one, zero = tir.IntImm("int64", 1), tir.IntImm("int64", 0)
        return te.sum(tir.Select("int64", before, one, zero), axis=[red[a] for a in axes])

    ranks = te.compute(shape, rank, name="T_rank", varargs_names=axis_names(len(shape)))
    count = product([_cast_index(shape[a], "int64") for a in axes]) if axes else tir.IntImm("int64", 1)
    target = floordiv(sub(count, 1), 2)
    oshape, red, source_index = _reduce_loops(x, axes, keepdims)
    ks = [red[a] for a in axes]

    def pick(value):
        def f(*idx):
            src = source_index(list(idx))
            hit = tir.EQ("bool", ranks[src], target)
            v = value(src)
            return te.sum(tir.Select(v.dtype, hit, v, tir.const(0, v.dtype)), axis=ks)
        return f

    values = te.compute(oshape, pick(lambda src: x[src]), name="T_median", varargs_names=axis_names(len(oshape)))
    if not with_indices:
        return values
    indices = te.compute(oshape, pick(lambda src: te.cast(src[axes[0]], "int64")), name="T_median_index",
                         varargs_names=axis_names(len(oshape)))
    return [values, indices]
