"""Cumulative sums and products (TVM's ``topi.cumsum``/``topi.cumprod``), written as TensorIR
directly.

Why not TE: a prefix sum reads its own previous output, which ``te.compute`` cannot express
(TVM's TOPI builds these with its IR builder for the same reason). A quadratic masked reduction
would be expressible but useless on long axes. The PrimFunc here is one block per element,
its scanned axis a *scan* iterator (``T.axis.scan``), so that the CPU default schedule (which
takes only spatial/reduce blocks) leaves the loop order alone and the GPU fallback keeps the
scanned loop serial inside each thread:

    out[..., k, ...] = data[..., k, ...]                     if k == 0
                     = out[..., k - 1, ...] + data[..., k, ...]   otherwise

(``T.if_then_else`` evaluates only the branch taken, so ``out[-1]`` is never read.) FuseOps
must not fuse a scan: AnnotateTIROpPattern finds it opaque (kOpaque) from its scan iterator,
as the block's loads alone would look elementwise.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.shape_arith import product, sub, unravel

__all__ = ["cumulative"]


def _dims(shape) -> list:
    return [tir.IntImm("int64", int(d.value)) if isinstance(d, tir.IntImm) else d for d in shape]


def _handle(buf: tir.Buffer) -> tir.Var:
    handle = tir.Var("handle", buf.name)  # named as create_prim_func names it (compiler/te.py)
    buf.data = handle
    return handle


def cumulative(shape, dtype: str, axis, out_dtype: str, exclusive: bool, kind: str = "sum",
               data_name: str = "data") -> tir.PrimFunc:
    """The PrimFunc ``(data, out)`` computing the cumulative sum (``kind="sum"``) or product
    (``"prod"``) of a ``shape``/``dtype`` tensor along ``axis`` in ``out_dtype``; ``axis`` None
    scans the flattened tensor (row-major; the output is 1-D). ``exclusive`` leaves each
    element out of its own prefix (the first output is 0, or 1 for a product). Block
    ``T_cumsum``/``T_cumprod``, loops ``ax0, ax1...``."""
    if kind not in ("sum", "prod"):
        raise ValueError(f"cumulative: kind must be 'sum' or 'prod', not {kind!r}")
    shape = _dims(shape)
    flat = axis is None
    out_shape = [product(shape)] if flat else list(shape)
    axis = 0 if flat else (axis + len(shape) if axis < 0 else axis)
    data = tir.Buffer(data_name, shape, dtype)
    out = tir.Buffer(f"T_cum{kind}", out_shape, out_dtype)
    loops = [tir.Var("int64", f"ax{i}") for i in range(len(out_shape))]
    ivars = [tir.Var("int64", f"v_ax{i}") for i in range(len(out_shape))]
    iters = [tir.IterVar(v, tir.Range(tir.IntImm("int64", 0), d), "C" if i == axis else "S")
             for i, (v, d) in enumerate(zip(ivars, out_shape))]

    def load(idx):
        src = unravel(idx[0], shape) if flat else idx
        value = tir.BufferLoad(dtype, data, list(src))
        return value if dtype == out_dtype else tir.Cast(out_dtype, value)

    k = ivars[axis]
    before = list(ivars)
    before[axis] = sub(k, 1)
    prev = tir.BufferLoad(out_dtype, out, before)
    combine = (lambda a, b: a + b) if kind == "sum" else (lambda a, b: a * b)
    if exclusive:
        first, rest = tir.const(0 if kind == "sum" else 1, out_dtype), combine(prev, load(before))
    else:
        first, rest = load(ivars), combine(prev, load(ivars))
    is_first = tir.EQ("bool", k, tir.IntImm("int64", 0))
    value = tir.Call(out_dtype, "tir.if_then_else", [is_first, first, rest])
    store = tir.BufferStore(out, value, list(ivars))
    from tvmscript.ir.tir_analysis import infer_access_regions

    reads, writes = infer_access_regions(store, None, [])
    block = tir.Block(f"T_cum{kind}", iters, reads, writes, store)
    stmt: tir.Stmt = tir.BlockRealize(list(loops), tir.IntImm("bool", 1), block)
    for lv, extent in reversed(list(zip(loops, out_shape))):
        stmt = tir.For(lv, tir.IntImm("int64", 0), extent, "serial", stmt)
    root = tir.Block("root", [], [], [], stmt)
    body = tir.BlockRealize([], tir.IntImm("bool", 1), root)
    params = [_handle(data), _handle(out)]
    return tir.PrimFunc(params, {params[0]: data, params[1]: out}, body,
                        attrs={"tir.noalias": True})
