"""Tensor cores as CUDA C: ``wmma.*`` fragments and TVM's tensor-core intrinsics (mma.h).

``wmma.matrix_a`` / ``wmma.matrix_b`` / ``wmma.accumulator`` buffers become arrays of
``nvcuda::wmma::fragment``, whose shape (m, n, k) and layout come from the intrinsics that use
them (`fragment_declaration`); ``tvm_fill_fragment``, ``tvm_load_matrix_sync``,
``tvm_mma_sync`` and ``tvm_store_matrix_sync`` (with ``tvm_access_ptr`` pointers) become the
wmma calls they name, indexing fragments, not elements (`WmmaGen.wmma`).

In trace mode (`trace`), each tile load and store reports the tile it reads or writes and each
``mma_sync`` one tensor-core operation of its shape.

`WmmaGen` is mixed into `kernel.KernelGen`; it uses ``self.expr``, the fragments the kernel
allocated (``self.fragments``) and the trace mode's ``traced_tile``/``traced_mma`` from there.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ..lower_gpu import GPULoweringError
from .literals import ctype

WMMA_OPS = ("tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_mma_sync", "tir.tvm_store_matrix_sync")
_FRAGMENT_USES = {"wmma.matrix_a": "matrix_a", "wmma.matrix_b": "matrix_b", "wmma.accumulator": "accumulator"}


class WmmaGen:
    """The tensor-core intrinsics of a kernel being printed (mixed into `kernel.KernelGen`)."""

    def wmma(self, op: str, args: list) -> str:
        """A tensor-core intrinsic: the fragments are named by their data variables, indexed
        by fragment (not element)."""
        def frag(data, index) -> str:
            return f"{self.expr(data)}[{self.expr(index)}]"

        if op == "tir.tvm_fill_fragment":           # (frag, m, n, k, index, value)
            return f"nvcuda::wmma::fill_fragment({frag(args[0], args[4])}, {self.expr(args[5])})"
        if op == "tir.tvm_mma_sync":                 # (d, di, a, ai, b, bi, c, ci)
            d, a, b, c = (frag(args[i], args[i + 1]) for i in (0, 2, 4, 6))
            call = f"nvcuda::wmma::mma_sync({d}, {a}, {b}, {c})"
            if not self.trace:
                return call
            shape = fragment_shape(self.fragments[args[0]], self.kernel.body)
            return self.traced_mma(call, shape, self.fragments[args[2]].dtype)
        # (frag, m, n, k, index, pointer, stride, layout)
        layout = _string(args[7])
        ptr, stride, f = self.expr(args[5]), self.expr(args[6]), frag(args[0], args[4])
        load = op == "tir.tvm_load_matrix_sync"
        ptr = self._traced_tile(args, ptr, stride, layout, store=not load)
        if load:
            mem = f", nvcuda::wmma::mem_{layout}" if self._fragment_scope(args[0]) == "wmma.accumulator" else ""
            return f"nvcuda::wmma::load_matrix_sync({f}, {ptr}, {stride}{mem})"
        return f"nvcuda::wmma::store_matrix_sync({ptr}, {f}, {stride}, nvcuda::wmma::mem_{layout})"

    def _traced_tile(self, args: list, ptr: str, stride: str, layout: str, store: bool) -> str:
        """The pointer of a tile load or store, reporting its tile in trace mode: the fragment's
        rows x columns (m x k for matrix_a, k x n for matrix_b, m x n for an accumulator) at
        the memory the pointer points into."""
        if not self.trace:
            return ptr
        m, n, k = (_const(a, "a fragment's m, n and k") for a in args[1:4])
        use = _FRAGMENT_USES[self._fragment_scope(args[0])]
        rows, cols = {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[use]
        target = args[5]
        if isinstance(target, tir.Call) and target.op == "tir.tvm_access_ptr":
            target = target.args[1]
        space = self.data_space(target) if isinstance(target, tir.Var) else None
        return self.traced_tile(ptr, space, stride, rows, cols, layout == "col_major", store)

    def _fragment_scope(self, data) -> str:
        buf = self.fragments.get(data)
        if buf is None:
            raise GPULoweringError(f"'{getattr(data, 'name', data)}' is used as a tensor-core fragment but is not "
                                   "a wmma.* buffer allocated in the kernel")
        return buf.scope


class _FragmentUses(TIRVisitor):
    """How the wmma intrinsics use one fragment buffer: its (m, n, k) shapes and the layouts
    it is loaded with."""

    def __init__(self, data: tir.Var) -> None:
        self.data = data
        self.shapes: set = set()
        self.layouts: set = set()

    def visit_Call(self, node) -> None:
        if node.op in ("tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_store_matrix_sync") \
                and node.args[0] is self.data:
            self.shapes.add(tuple(_const(a, "a fragment's m, n and k") for a in node.args[1:4]))
            if node.op == "tir.tvm_load_matrix_sync":
                self.layouts.add(_string(node.args[7]))
        self.generic_visit(node)


def fragment_declaration(buf: tir.Buffer, body) -> tuple:
    """(``nvcuda::wmma::fragment<use, m, n, k, T[, layout]>``, how many whole fragments the
    flat buffer holds), from the wmma intrinsics that use it in ``body``: matrix_a and
    matrix_b take the layout they are loaded with; an accumulator has none."""
    uses = _uses(buf, body)
    (m, n, k), = uses.shapes
    use = _FRAGMENT_USES[buf.scope]
    args = f"nvcuda::wmma::{use}, {m}, {n}, {k}, {ctype(buf.dtype)}"
    if use != "accumulator":
        if len(uses.layouts) != 1:
            raise GPULoweringError(f"fragment '{buf.name}' ({buf.scope}) must be loaded with one layout (row_major "
                                   f"or col_major), found {sorted(uses.layouts) or 'none'}")
        args += f", nvcuda::wmma::{uses.layouts.pop()}"
    tile = {"matrix_a": m * k, "matrix_b": k * n, "accumulator": m * n}[use]
    size = _const(buf.shape[0], f"the size of fragment '{buf.name}'")
    if size % tile:
        raise GPULoweringError(f"fragment '{buf.name}' holds {size} elements, not a whole number of {m}x{n}x{k} "
                               f"tiles of {tile}")
    return f"nvcuda::wmma::fragment<{args}>", size // tile


def fragment_shape(buf: tir.Buffer, body) -> tuple:
    """The (m, n, k) of the fragment buffer ``buf``, from the wmma intrinsics that use it."""
    (shape,) = _uses(buf, body).shapes
    return shape


def _uses(buf: tir.Buffer, body) -> "_FragmentUses":
    """How ``body``'s wmma intrinsics use ``buf``; an error unless they give it one shape."""
    uses = _FragmentUses(buf.data)
    uses.visit(body)
    if len(uses.shapes) != 1:
        found = ", ".join(f"{m}x{n}x{k}" for m, n, k in sorted(uses.shapes)) or "none"
        raise GPULoweringError(f"fragment '{buf.name}' needs one m x n x k shape from the wmma intrinsics that use it "
                               f"(found {found})")
    return uses


def _const(e, what: str) -> int:
    if not isinstance(e, tir.IntImm):
        raise GPULoweringError(f"{what} must be constants")
    return e.value


def _string(e) -> str:
    if not isinstance(e, tir.StringImm) or e.value not in ("row_major", "col_major"):
        raise GPULoweringError(f"a wmma layout must be \"row_major\" or \"col_major\", not {e}")
    return e.value
