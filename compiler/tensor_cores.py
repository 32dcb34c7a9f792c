"""Tensor-core operations from blockized 16x16 tiles: the GPU lowering's `tensorize_wmma`.

The `dlight.gpu.MatmulTensorCore` rule leaves each piece of work a wmma intrinsic does as a
block annotated ``tvms.wmma`` holding plain loops over one 16x16 (or 16x16x16) tile:

* ``"fill"``   ``C_frag[tile] = 0``                         -> ``T.tvm_fill_fragment``
* ``"load_a"`` ``A_frag[tile] = A_shared[tile]``             -> ``T.tvm_load_matrix_sync``
* ``"load_b"`` ``B_frag[tile] = B_shared[tile]``             -> ``T.tvm_load_matrix_sync``
* ``"mma"``    ``C_frag[i, j] += A_frag[i, k] * B_frag[j, k]`` -> ``T.tvm_mma_sync``
* ``"store"``  ``C_shared[tile] = C_frag[tile]``             -> ``T.tvm_store_matrix_sync``

`convert_blocks_to_loops` keeps the annotation as an ``AttrStmt``; this pass runs after
`lower_gpu.compact_buffers`, when the fragments have the shape of one warp's tiles and the
shared buffers that of one block's, and replaces each annotated loop nest by its intrinsic:
fragment indices count whole 16x16 tiles of the fragment buffer in row-major order, and
memory is passed as ``T.tvm_access_ptr`` to the tile's first element with the stride of the
buffer's rows (its row length, or the padded stride `storage_align` gave it) as the leading
dimension.

Why at this point: before compaction the buffers have the shape of the whole matrix, so a
tile's position in them says nothing about where it is in the warp's fragments; after
flattening the tile structure is gone.
"""

from __future__ import annotations

from tvmscript.ir import tir

from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import make_add, make_cast, make_mul

from .lower_tir import _row_major_strides

__all__ = ["WMMA_ANN", "WMMA_SCOPES", "MMA_ANN", "MMA_SCOPES", "TF32_K", "tensorize_wmma"]

WMMA_ANN = "tvms.wmma"
WMMA_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
# The same tile operations done with mma.sync / ldmatrix (`compiler.mma_tiles`): the
# fragments become each lane's registers.
MMA_ANN = "tvms.mma"
MMA_SCOPES = ("warp.mma_a", "warp.mma_b", "warp.mma_acc")
TF32_K = 8          # the k of mma.sync m16n8k8 (TF32 operands): their tiles are 16x8
TILE = 16


class WMMAError(ValueError):
    """A ``tvms.wmma`` loop nest that is not the tile operation its annotation names."""


def tensorize_wmma(body: tir.Stmt) -> tir.Stmt:
    """``body`` with every ``tvms.wmma`` loop nest replaced by its intrinsic call."""

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.AttrStmt) and s.attr_key == WMMA_ANN:
                kind = s.value.value if isinstance(s.value, tir.StringImm) else str(s.value)
                return tir.Evaluate(_intrinsic(kind, s.body))
            return super().visit_stmt(s)

    return M().visit_stmt(body)


def _intrinsic(kind: str, nest) -> tir.Call:
    loops, store = _tile_nest(nest, 3 if kind == "mma" else 2)
    at_origin = {lp.loop_var: tir.IntImm(lp.loop_var.dtype, 0) for lp in loops}
    if kind == "fill":
        value = store.value
        return _call("tir.tvm_fill_fragment", [store.buffer.data, *_mnk(), _fragment_index(store, at_origin), value])
    if kind in ("load_a", "load_b"):
        src = _load(store.value)
        layout = _layout(src, store, loops, kind)
        ptr = _pointer(src.buffer, src.indices, at_origin, 1)
        return _call("tir.tvm_load_matrix_sync", [store.buffer.data, *_mnk(), _fragment_index(store, at_origin), ptr,
                                                  _row_length(src.buffer), tir.StringImm("handle", layout)])
    if kind == "store":
        src = _load(store.value)
        ptr = _pointer(store.buffer, store.indices, at_origin, 2)
        return _call("tir.tvm_store_matrix_sync", [src.buffer.data, *_mnk(), _fragment_index(src, at_origin), ptr,
                                                   _row_length(store.buffer), tir.StringImm("handle", "row_major")])
    if kind == "mma":
        acc, a, b = _mma_operands(store)
        c = (store.buffer.data, _fragment_index(store, at_origin))
        return _call("tir.tvm_mma_sync", [*c, a.buffer.data, _fragment_index(a, at_origin), b.buffer.data,
                                          _fragment_index(b, at_origin), *c])
    raise WMMAError(f"unknown tensor-core operation {kind!r}")


def _tile_nest(nest, depth: int, extents: tuple = ()) -> tuple:
    """The ``depth`` loops around one store, of ``extents`` iterations (16 each unless given):
    (loops, store)."""
    extents = extents or (TILE,) * depth
    loops = []
    s = nest
    while isinstance(s, tir.For):
        loops.append(s)
        s = s.body
    if len(loops) != depth or not all(isinstance(lp.extent, tir.IntImm) and lp.extent.value == n and
                                      isinstance(lp.min, tir.IntImm) and lp.min.value == 0
                                      for lp, n in zip(loops, extents)):
        shape = "x".join(str(n) for n in extents)
        raise WMMAError(f"a tensor-core operation must be {depth} loops ({shape}) around one store")
    if not isinstance(s, tir.BufferStore):
        raise WMMAError("a tensor-core operation must be one store")
    return loops, s


def _mnk() -> list:
    return [tir.IntImm("int32", TILE)] * 3


def _call(op: str, args: list) -> tir.Call:
    return tir.Call("handle", op, args)


def _load(e) -> tir.BufferLoad:
    while isinstance(e, tir.Cast):
        e = e.value
    if not isinstance(e, tir.BufferLoad):
        raise WMMAError("a tensor-core copy must read one buffer element")
    return e


def _origin(indices: list, at_origin: dict) -> list:
    return [simplify(substitute(i, at_origin)) for i in indices]


def _fragment_index(access, at_origin: dict, tile: tuple = (TILE, TILE)):
    """Which tile (``tile`` rows x columns, 16x16 unless given) of its fragment buffer
    ``access`` (a load or store of one element of the tile, at the loops' origin) starts: tiles
    counted row-major over the buffer's shape, the last two dimensions holding the tile."""
    buf, idx = access.buffer, _origin(access.indices, at_origin)
    shape = [_const(d, f"the shape of fragment '{buf.name}'") for d in buf.shape]
    rows, cols = tile
    if len(shape) < 2 or shape[-1] % cols or shape[-2] % rows:
        raise WMMAError(f"fragment '{buf.name}' of shape {tuple(shape)} is not made of {rows}x{cols} tiles")
    dtype = idx[-1].dtype
    tiles = [tir.IntImm(dtype, d) for d in shape[:-2]] + [tir.IntImm(dtype, shape[-2] // rows),
                                                          tir.IntImm(dtype, shape[-1] // cols)]
    coords = list(idx[:-2]) + [tir.FloorDiv(dtype, idx[-2], tir.IntImm(dtype, rows)),
                               tir.FloorDiv(dtype, idx[-1], tir.IntImm(dtype, cols))]
    flat = coords[0]
    for c, n in zip(coords[1:], tiles[1:]):
        flat = make_add(make_mul(flat, n), c)
    return simplify(flat)


def _row_length(buf: tir.Buffer):
    """The leading dimension wmma is given: the rows' stride, padded when `storage_align` asked."""
    return buf.strides[-2] if buf.strides else buf.shape[-1]


def _pointer(buf: tir.Buffer, indices: list, at_origin: dict, access: int, extent: int = TILE * TILE) -> tir.Call:
    """``T.tvm_access_ptr`` to the tile's first element, ``access`` 1 (read) or 2 (write),
    ``extent`` elements from there."""
    idx = _origin(indices, at_origin)
    dtype = idx[-1].dtype
    # The strides `lower_tir.flatten_buffers` addresses the buffer with: explicit, or row-major.
    strides = [make_cast(s, dtype) for s in buf.strides] if buf.strides else _row_major_strides(buf.shape, dtype)
    offset = tir.IntImm(dtype, 0)
    for i, stride in zip(idx, strides):
        offset = make_add(offset, make_mul(i, stride))
    annotation = tir.Call(buf.dtype, "tir.type_annotation", [])
    return tir.Call("handle", "tir.tvm_access_ptr",
                    [annotation, buf.data, simplify(offset), tir.IntImm(dtype, extent), tir.IntImm("int32", access)])


def _layout(src: tir.BufferLoad, dst: tir.BufferStore, loops: list, kind: str) -> str:
    """How a fragment loads from ``src``: matrix_a is (m x k) and matrix_b (k x n); the
    fragment buffers are indexed [i, k] and [j, k] (`MatmulTensorCore`'s canonical form).
    Row-major when the memory's rows follow the operand's rows."""
    row_var = _var_of(dst.indices[-2], loops)        # i for A, j for B
    mem_row_var = _var_of(src.indices[-2], loops)
    if kind == "load_a":
        return "row_major" if mem_row_var is row_var else "col_major"
    # matrix_b's rows are k: memory whose rows follow j holds it column-major.
    return "col_major" if mem_row_var is row_var else "row_major"


def _var_of(index, loops: list):
    used = [lp.loop_var for lp in loops if _uses(index, lp.loop_var)]
    if len(used) != 1:
        raise WMMAError("each index of a tensor-core copy must follow one loop of the tile")
    return used[0]


def _uses(e, v) -> bool:
    from tvmscript.ir.tir_visitor import vars_in

    return v in vars_in([e])


def _multiply_accumulate(store: tir.BufferStore) -> tuple:
    """(accumulator, x, y) loads of ``C = C + x * y`` (the operands possibly cast), in the
    order the product names them."""
    value = store.value
    if not isinstance(value, tir.Add):
        raise WMMAError("a tensor-core multiply must be C = C + A * B")
    acc, prod = (value.a, value.b) if isinstance(value.a, tir.BufferLoad) else (value.b, value.a)
    while isinstance(prod, tir.Cast):
        prod = prod.value
    if not isinstance(acc, tir.BufferLoad) or acc.buffer is not store.buffer or not isinstance(prod, tir.Mul):
        raise WMMAError("a tensor-core multiply must be C = C + A * B")
    return acc, _load(prod.a), _load(prod.b)


def _mma_operands(store: tir.BufferStore, scopes: tuple = WMMA_SCOPES) -> tuple:
    """(accumulator, A, B) loads of ``C = C + A * B`` (operands possibly cast); A and B in the
    fragment ``scopes`` (matrix_a, matrix_b, accumulator)."""
    acc, a, b = _multiply_accumulate(store)
    if a.buffer.scope == scopes[1]:
        a, b = b, a
    if (a.buffer.scope, b.buffer.scope) != tuple(scopes[:2]):
        raise WMMAError("a tensor-core multiply must read a matrix_a and a matrix_b fragment")
    return acc, a, b


def _const(e, what: str) -> int:
    if not isinstance(e, tir.IntImm):
        raise WMMAError(f"{what} must be constants")
    return e.value
