"""Tensor-core tiles done with ``ldmatrix`` and ``mma.sync``: the GPU lowering's `tensorize_mma`.

On sm_80 and later, `dlight.gpu.MatmulTensorCore` declares its fragments in the scopes
`tensor_cores.MMA_SCOPES` and leaves each 16x16 (or 16x16x16) piece of work a block annotated
``tvms.mma``, as it does for wmma (`tensor_cores`). Unlike wmma's opaque fragments, the PTX
instructions say which lane holds which element, so this pass gives each lane its registers:

* a fragment buffer (a warp's tiles after `compact_buffers`) becomes a "local" array of its
  32nd part, 8 elements per 16x16 tile, tiles in row-major order over the buffer;
* ``"fill"``      each lane zeroes its 8 elements of the tile;
* ``"load_a"``,   one ``ldmatrix.x4`` (``.trans`` when the shared tile's contiguous index
  ``"load_b"``    follows the fragment's rows): the lanes 8j..8j+7 give the row addresses of
                  the 8x8 matrix j, ordered so that register j is the ``mma`` operand's
                  register j: for A (rows i, columns k) the matrices (i0-7, k0-7), (i8-15,
                  k0-7), (i0-7, k8-15), (i8-15, k8-15); for B (rows j, columns k) the two
                  m16n8k16 operands of columns j0-7 then j8-15, k0-7 before k8-15;
* ``"mma"``       two ``mma.sync.m16n8k16`` (columns 0-7, then 8-15 of the tile), A and B
                  float16 or bfloat16, accumulating in the accumulator's type (fp32 or fp16);
* ``"store"``     each lane writes its 8 elements where the PTX ISA puts them (rows
                  ``lane / 4`` and ``+ 8``, columns ``2 * (lane % 4)``, ``+ 1`` and ``+ 8``),
                  with whatever the block computes from them (the epilogue).

With float32 operands (TF32, which the target allows with ``-allow_tf32=1``) the operand tiles
are 16x8 (``m16n8k8``: 4 elements per lane) and each lane loads its own elements of them
from shared memory (``ldmatrix`` moves 16-bit elements); the ``mma`` tile is 16x16x8, two
``mma.sync.m16n8k8.tf32``, the operands rounded to TF32 (``cvt.rna``) as they go in.

Loops whose variable indexes those arrays are unrolled, so that the arrays stay in registers.
Why after compaction: before it the fragments have the whole matrix's shape (see
`tensor_cores`).
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import make_add, make_floordiv, make_floormod, make_mul
from tvmscript.ir.tir_visitor import vars_in

from .lower_gpu.common import THREAD_VARS, GPULoweringError, buffer_accesses
from .tensor_cores import (MMA_ANN, MMA_SCOPES, TF32_K, TILE, WMMAError, _fragment_index, _load, _mma_operands,
                           _tile_nest)

__all__ = ["tensorize_mma"]

WARP = 32
_PTX_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def tensorize_mma(body: tir.Stmt, extents: dict) -> tir.Stmt:
    """``body`` (one kernel, compacted) with its ``tvms.mma`` tiles made PTX tensor-core
    instructions and its `MMA_SCOPES` fragments per-lane register arrays."""
    fragments = fragments_of(body)
    if not fragments:
        return body
    lanes = extents.get("threadIdx.x")
    if not (isinstance(lanes, tir.IntImm) and lanes.value == WARP):
        raise GPULoweringError("mma.sync fragments need warps of 32 lanes on threadIdx.x")
    lane = THREAD_VARS["threadIdx.x"]
    registers = {data: _registers(buf) for data, buf in fragments.items()}

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.AttrStmt) and s.attr_key == MMA_ANN:
                kind = s.value.value if isinstance(s.value, tir.StringImm) else str(s.value)
                try:
                    return _TileOp(kind, s.body, registers, lane).lower()
                except WMMAError as err:
                    raise GPULoweringError(f"tensor-core tile ({kind}): {err}") from None
            s = super().visit_stmt(s)
            if isinstance(s, Allocate) and s.buffer.data in registers:
                return Allocate(registers[s.buffer.data], s.body, s.storage)
            return s

    out = M().visit_stmt(body)
    check_no_fragment_left(out, fragments)
    return unroll_register_loops(out, set(registers))


def fragments_of(body, scopes: tuple = MMA_SCOPES) -> dict:
    """data Var -> buffer of each allocation of ``body`` in one of the fragment ``scopes``."""
    found = {}

    class F(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, Allocate) and s.buffer.scope in scopes:
                found[s.buffer.data] = s.buffer
            return super().visit_stmt(s)

    F().visit_stmt(body)
    return found


def _registers(buf: tir.Buffer) -> tir.Buffer:
    """A fragment's per-lane array: 8 elements per 16x16 tile of the warp's buffer."""
    size = 1
    for d in buf.shape:
        if not isinstance(d, tir.IntImm):
            raise GPULoweringError(f"fragment '{buf.name}' has no constant shape")
        size *= d.value
    rows, cols = _tile_of(buf)
    if len(buf.shape) < 2 or buf.shape[-1].value % cols or buf.shape[-2].value % rows:
        raise GPULoweringError(f"fragment '{buf.name}' is not made of {rows}x{cols} tiles")
    return dataclasses.replace(buf, shape=[tir.IntImm("int32", size // WARP)], strides=[], scope="local")


def _tile_of(buf: tir.Buffer) -> tuple:
    """(rows, columns) of one tile of a fragment: 16x8 for a TF32 operand, else 16x16."""
    if buf.dtype == "float32" and buf.scope in MMA_SCOPES[:2]:
        return TILE, TF32_K
    return TILE, TILE


def _per_lane(buf: tir.Buffer) -> int:
    rows, cols = _tile_of(buf)
    return rows * cols // WARP


def _innermost_store(nest):
    while isinstance(nest, tir.For):
        nest = nest.body
    return nest


class _TileOp:
    """One ``tvms.mma`` tile operation, lowered for the lanes of a warp."""

    def __init__(self, kind: str, nest, registers: dict, lane) -> None:
        self.kind, self.registers, self.lane = kind, registers, lane
        extents = ()
        store = _innermost_store(nest)
        if kind in ("load_a", "load_b") and isinstance(store, tir.BufferStore):
            extents = _tile_of(store.buffer)
        elif kind == "mma" and isinstance(store, tir.BufferStore) and store.buffer.dtype == "float32":
            loaded = buffer_accesses(store.value).loaded
            tf32 = [b for b in loaded if b.scope == MMA_SCOPES[0] and b.dtype == "float32"]
            extents = (TILE, TILE, TF32_K) if tf32 else ()
        self.loops, self.store = _tile_nest(nest, 3 if kind == "mma" else 2, extents)
        self.at_origin = {lp.loop_var: tir.IntImm(lp.loop_var.dtype, 0) for lp in self.loops}

    def lower(self) -> tir.Stmt:
        if self.kind == "fill":
            return self._per_element(lambda offset: tir.BufferStore(
                self._regs(self.store.buffer), self.store.value, [offset]))
        if self.kind in ("load_a", "load_b"):
            return self._ldmatrix()
        if self.kind == "mma":
            return self._mma()
        if self.kind == "store":
            return self._store()
        raise WMMAError(f"unknown tensor-core operation {self.kind!r}")

    def _regs(self, buf: tir.Buffer) -> tir.Buffer:
        if buf.data not in self.registers:
            raise WMMAError(f"'{buf.name}' is not an mma fragment ({', '.join(MMA_SCOPES)})")
        return self.registers[buf.data]

    def _offset(self, access):
        """Where the lane's elements of the tile ``access`` start in its register array."""
        tile = _tile_of(access.buffer)
        return simplify(make_mul(_fragment_index(access, self.at_origin, tile),
                                 tir.IntImm("int32", _per_lane(access.buffer))))

    def _per_element(self, make) -> tir.Stmt:
        """``make(offset)`` for each of the lane's 8 elements of the tile (the ``fill``)."""
        e = tir.Var("int32", "e")
        base = self._offset(self.store)
        return tir.For(e, tir.IntImm("int32", 0), tir.IntImm("int32", _per_lane(self.store.buffer)), "unrolled",
                       make(make_add(base, e)))

    def _ldmatrix(self) -> tir.Stmt:
        dst, src = self.store, _load(self.store.value)
        row_var, col_var = self._tile_vars(dst)
        if dst.buffer.dtype == "float32":
            return self._tf32_load(dst, src, row_var, col_var)
        trans = _follows(src.indices[-1], row_var)
        if not trans and not _follows(src.indices[-1], col_var):
            raise WMMAError("the shared tile's contiguous index must follow a row or a column of the fragment")
        c = lambda v: tir.IntImm("int32", v)  # noqa: E731
        matrix, q = make_floordiv(self.lane, c(8)), make_floormod(self.lane, c(8))
        if self.kind == "load_a":   # matrices (i0, k0), (i8, k0), (i0, k8), (i8, k8)
            rho, kappa = make_floormod(matrix, c(2)), make_floordiv(matrix, c(2))
        else:                       # (j0, k0), (j0, k8), (j8, k0), (j8, k8)
            rho, kappa = make_floordiv(matrix, c(2)), make_floormod(matrix, c(2))
        row, col = make_mul(rho, c(8)), make_mul(kappa, c(8))
        if trans:
            col = make_add(col, q)
        else:
            row = make_add(row, q)
        at_lane = {row_var: row, col_var: col}
        address = tir.BufferLoad(src.dtype, src.buffer, [simplify(substitute(i, at_lane)) for i in src.indices])
        regs = self._regs(dst.buffer)
        return _evaluate("tir.ptx_ldmatrix", src.dtype, [
            tir.IntImm("bool", int(trans)), c(4), tir.StringImm("handle", ".b16"), regs.data, self._offset(dst),
            tir.Call("handle", "tir.address_of", [address]), c(0)])

    def _tf32_load(self, dst, src, row_var, col_var) -> tir.Stmt:
        """Each lane reads its 4 elements of a 16x8 operand tile: for A (rows i, columns k)
        element ``i`` is row ``lane / 4 + 8 (i % 2)``, column ``lane % 4 + 4 (i / 2)``; for B
        (rows j, columns k), the operand of columns j0-7 then j8-15, each element ``e`` at row
        ``lane / 4 (+ 8)``, column ``lane % 4 + 4e``."""
        c = lambda v: tir.IntImm("int32", v)  # noqa: E731
        i = tir.Var("int32", "i")
        group, thread = make_floordiv(self.lane, c(4)), make_floormod(self.lane, c(4))
        if self.kind == "load_a":
            row = make_add(group, make_mul(make_floormod(i, c(2)), c(8)))
        else:
            row = make_add(group, make_mul(make_floordiv(i, c(2)), c(8)))
        col_step = make_floordiv(i, c(2)) if self.kind == "load_a" else make_floormod(i, c(2))
        col = make_add(thread, make_mul(col_step, c(4)))
        at_lane = {row_var: row, col_var: col}
        value = tir.BufferLoad(src.dtype, src.buffer, [simplify(substitute(x, at_lane)) for x in src.indices])
        regs = self._regs(dst.buffer)
        store = tir.BufferStore(regs, value, [simplify(make_add(self._offset(dst), i))])
        return tir.For(i, c(0), c(4), "unrolled", store)

    def _tile_vars(self, fragment) -> tuple:
        """The tile loops the row and the column index of the ``fragment`` access follow (a
        load's target; a store's source: its target, an epilogue's output, may be indexed
        any way)."""
        row = [lp.loop_var for lp in self.loops if _follows(fragment.indices[-2], lp.loop_var)]
        col = [lp.loop_var for lp in self.loops if _follows(fragment.indices[-1], lp.loop_var)]
        if len(row) != 1 or len(col) != 1 or row[0] is col[0]:
            raise WMMAError("a fragment load or store must copy a tile, each index of the fragment following one loop")
        return row[0], col[0]

    def _mma(self) -> tir.Stmt:
        acc, a, b = _mma_operands(self.store, MMA_SCOPES)
        types = [_PTX_TYPES.get(x.buffer.dtype) for x in (a, b, acc)]
        tf32 = types[:2] == ["fp32", "fp32"]
        if tf32 and types[2] == "fp32":
            shape, types, b_step = "m16n8k8", ["tf32", "tf32", "fp32"], 2
        elif types[0] in ("fp16", "bf16") and types[1] == types[0] and types[2] in ("fp32", "fp16"):
            shape, b_step = "m16n8k16", 4
        else:
            raise WMMAError(f"mma.sync takes float16 or bfloat16 operands and a float32 or float16 accumulator, "
                            f"or float32 (TF32) operands and accumulator, not {a.buffer.dtype}, {b.buffer.dtype}, "
                            f"{acc.buffer.dtype}")
        ra, rb, rc = self._regs(a.buffer), self._regs(b.buffer), self._regs(acc.buffer)
        a_off, b_off, c_off = self._offset(a), self._offset(b), self._offset(self.store)
        calls = []
        for half in range(2):  # the tile's columns 0-7, then 8-15: B's first registers, then the rest
            calls.append(_evaluate("tir.ptx_mma", acc.buffer.dtype, [
                tir.StringImm("handle", shape), tir.StringImm("handle", "row"), tir.StringImm("handle", "col"),
                *[tir.StringImm("handle", t) for t in types], ra.data, a_off, rb.data,
                simplify(make_add(b_off, tir.IntImm("int32", b_step * half))),
                rc.data, simplify(make_add(c_off, tir.IntImm("int32", 4 * half))), tir.IntImm("bool", 0)]))
        return tir.seq(calls)

    def _store(self) -> tir.Stmt:
        """The tile's copy (and epilogue) at each of the lane's elements (`store_accumulators`)."""
        src = fragment_load(self.store.value, self.registers)
        if src is None:
            raise WMMAError("a fragment store must read one accumulator element")
        row_var, col_var = self._tile_vars(src)
        return store_accumulators(self.store, src, self._regs(src.buffer), self._offset(src), (row_var, col_var),
                                  self.lane, tir.IntImm("int32", 0), 2)


def store_accumulators(store: tir.BufferStore, src: tir.BufferLoad, regs: tir.Buffer, base, tile_vars: tuple, lane,
                       first_row, column_blocks: int) -> tir.Stmt:
    """``store`` (a copy of the accumulator element ``src`` reads, at the tile loops
    ``tile_vars`` (row, column), with whatever it computes from it: the epilogue) at each of a
    lane's elements of mma.sync's m16n8 accumulator layout, ``column_blocks`` blocks of 8
    columns wide, in the register array ``regs`` from ``base``: element ``4h + 2r + e`` is row
    ``first_row + lane / 4 + 8r``, column ``8h + 2 (lane % 4) + e``. The pair ``e`` is one
    vectorized loop (an 8-byte store of float32s where the printer can prove it aligned): a
    warp's store then fills each 32-byte sector it touches. (wgmma's accumulators are that
    layout over a warpgroup's 4 warps, ``first_row`` 16 rows a warp.)"""
    c = lambda v: tir.IntImm("int32", v)  # noqa: E731
    h, r, e = tir.Var("int32", "h"), tir.Var("int32", "r"), tir.Var("int32", "e")
    row = make_add(make_add(first_row, make_floordiv(lane, c(4))), make_mul(r, c(8)))
    col = make_add(make_add(make_mul(h, c(8)), make_mul(make_floormod(lane, c(4)), c(2))), e)
    offset = make_add(make_add(make_mul(h, c(4)), make_mul(r, c(2))), e)
    element = tir.BufferLoad(regs.dtype, regs, [simplify(make_add(base, offset))])
    value = _replace_load(store.value, src.buffer, element)
    stmt = tir.BufferStore(store.buffer, value, store.indices, store.span)
    stmt = substitute(stmt, {tile_vars[0]: simplify(row), tile_vars[1]: col})
    pair = tir.For(e, c(0), c(2), "vectorized", stmt)
    return tir.For(h, c(0), c(column_blocks), "unrolled", tir.For(r, c(0), c(2), "unrolled", pair))


def _follows(index, var) -> bool:
    return var in vars_in([index])


def fragment_load(e, registers: dict):
    """The load of a fragment element in ``e`` (an epilogue may read it more than once, as a
    GELU does: every read must then be of the same element); None if there is none, or reads
    of different elements or fragments."""
    from tvmscript.ir import structural_equal

    found = []

    class F(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.BufferLoad) and x.buffer.data in registers:
                found.append(x)
            return super().visit_expr(x)

    F().visit_expr(e)
    if not found or any(x.buffer.data is not found[0].buffer.data or
                        not all(structural_equal(a, b) for a, b in zip(x.indices, found[0].indices))
                        for x in found[1:]):
        return None
    return found[0]


def _replace_load(e, buf: tir.Buffer, new):
    class R(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.BufferLoad) and x.buffer.data is buf.data:
                return new
            return super().visit_expr(x)

    return R().visit_expr(e)


def _evaluate(op: str, dtype: str, args: list) -> tir.Evaluate:
    """``T.<op>(dtype, *args)``: TVM's PTX builtins carry their dtype first."""
    return tir.Evaluate(tir.Call(dtype, op, args))


def check_no_fragment_left(body, fragments: dict, scopes: tuple = MMA_SCOPES, annotation: str = MMA_ANN) -> None:
    """An error if ``body`` still reads or writes one of the ``fragments`` (of ``scopes``)
    element by element: outside the tile operations (annotated ``annotation``) that give the
    lanes their registers, an access would index a buffer that no longer exists."""
    def check(buf, verb: str) -> None:
        if buf.data in fragments and buf.scope in scopes:
            raise GPULoweringError(f"fragment '{buf.name}' is {verb} outside a {annotation} tile operation")

    class C(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.BufferLoad):
                check(x.buffer, "read")
            return super().visit_expr(x)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                check(s.buffer, "written")
            return super().visit_stmt(s)

    C().visit_stmt(body)


def unroll_register_loops(body, register_data: set) -> tir.Stmt:
    """Unroll every loop whose variable takes part in an index of a register array (or the
    offset an intrinsic is given into one): registers cannot be indexed at run time."""
    indexing: set = set()

    class Find(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.BufferLoad) and x.buffer.data in register_data:
                indexing.update(vars_in(list(x.indices)))
            if isinstance(x, tir.Call) and x.op in ("tir.ptx_ldmatrix", "tir.ptx_mma", "tir.ptx_wgmma"):
                args = list(x.args)
                for i, a in enumerate(args[:-1]):
                    if isinstance(a, tir.Var) and a in register_data:
                        indexing.update(vars_in([args[i + 1]]))
            return super().visit_expr(x)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore) and s.buffer.data in register_data:
                indexing.update(vars_in(list(s.indices)))
            return super().visit_stmt(s)

    Find().visit_stmt(body)

    class U(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.For) and s.loop_var in indexing and s.kind == "serial":
                return dataclasses.replace(s, kind="unrolled")
            return s

    return U().visit_stmt(body)
