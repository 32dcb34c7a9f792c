"""Pass 5c: shared tiles whose copy block is annotated ``permuted_layout`` are XOR-swizzled
(TVM's InjectPermutedLayout).

Why: the tensor-core operand loads (``ldmatrix``) read one 16-byte piece from each of 8 rows
of a shared tile at once. With rows of 64 bytes, rows ``r`` and ``r + 2`` start in the same
banks, and with rows of 256 bytes (a transposed tile) all 8 rows do: the reads serialize.
Padding every row (`storage_align`) spreads them, at the cost of the padding's shared
memory. Permuting the 16-byte chunks of each row instead costs nothing: chunk ``c`` of row
``r`` is stored at chunk ``c ^ x(r)``, with ``x(r)`` chosen so that the 8 rows a load reads
land in 8 different 16-byte bank groups, and so do the 8 chunks of any 128 bytes a copy
writes:

* a row of ``L`` chunks (``L`` a power of two, 2 to 16 and more) shares a 128-byte line
  with ``8 / L`` neighbours when ``L < 8``: ``x(r) = (r // (8 / L)) % L``;
* a row of 8 chunks or more fills its own lines: ``x(r) = r % 8``.

The permutation only moves whole 16-byte chunks, so a thread's 16-byte copy into the tile
(``cp.async``) and the row addresses ``ldmatrix`` takes stay contiguous and aligned. Every
access of the buffer follows, whatever reads or writes it: the permutation is a layout, not
an optimisation of one access. A tile whose rows are not a power-of-two number of whole
chunks, or that is padded, keeps its layout.

Why after tensorization: `mma_tiles` tells an ``ldmatrix.trans`` from a plain one by which
fragment index the tile's contiguous index follows; it must see the tile's own indices.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_arith import const_int, make_add, make_cast, make_floordiv, make_floormod, make_mul
from tvmscript.ir.tir_visitor import TIRVisitor

from ..lower_tir import dtype_bytes

__all__ = ["PERMUTED_LAYOUT", "collect_permuted_layouts", "permute_layouts"]

PERMUTED_LAYOUT = "permuted_layout"   # TVM's block annotation
CHUNK_BYTES = 16                      # what ldmatrix reads per row and cp.async copies per thread
LINE_CHUNKS = 8                       # 16-byte chunks in the 128 bytes of the 32 banks


def collect_permuted_layouts(func: tir.PrimFunc) -> set:
    """The data Vars of the buffers written by blocks annotated ``permuted_layout`` (a true
    value), gathered before the blocks are gone."""
    found: set = set()

    class V(TIRVisitor):
        def visit_Block(self, node) -> None:
            value = node.annotations.get(PERMUTED_LAYOUT)
            if value is not None and _truthy(value):
                found.update(w.buffer.data for w in node.writes)
            self.generic_visit(node)

    V().visit(func.body)
    return found


def permute_layouts(body: tir.Stmt, buffers: set) -> tir.Stmt:
    """``body`` with every access of the shared tiles ``buffers`` (data Vars) swizzled."""
    if not buffers:
        return body

    def swizzled(node, kind):
        if isinstance(node, kind) and node.buffer.data in buffers:
            indices = _permuted(node.buffer, node.indices)
            if indices is not None:
                return dataclasses.replace(node, indices=indices)
        return node

    class M(IRMutator):
        def visit_expr(self, e):
            return swizzled(super().visit_expr(e), tir.BufferLoad)

        def visit_stmt(self, s):
            return swizzled(super().visit_stmt(s), tir.BufferStore)

    return M().visit_stmt(body)


def _permuted(buf: tir.Buffer, indices: list):
    """``indices`` with the last one's 16-byte chunk XORed by the row's key; None when the
    buffer's rows cannot be permuted (see the module docstring)."""
    if len(indices) < 2 or buf.strides:
        return None
    width = const_int(buf.shape[-1])
    row_bytes = None if width is None else width * dtype_bytes(buf.dtype)
    if row_bytes is None or row_bytes % CHUNK_BYTES:
        return None
    chunks = row_bytes // CHUNK_BYTES
    if chunks < 2 or chunks & (chunks - 1):
        return None
    per_chunk = CHUNK_BYTES // dtype_bytes(buf.dtype)
    row, col = indices[-2], indices[-1]
    dt = col.dtype
    c = lambda v: tir.IntImm(dt, v)  # noqa: E731
    rows_per_line = max(1, LINE_CHUNKS // chunks)
    key = make_floormod(make_floordiv(make_cast(row, dt), c(rows_per_line)), c(min(chunks, LINE_CHUNKS)))
    chunk = tir.Call(dt, "tir.bitwise_xor", [make_floordiv(col, c(per_chunk)), key])
    col = make_add(make_mul(chunk, c(per_chunk)), make_floormod(col, c(per_chunk)))
    return list(indices[:-1]) + [simplify(col)]


def _truthy(value) -> bool:
    v = getattr(value, "value", value)
    return bool(v) and v not in ("0", "false", "False")
