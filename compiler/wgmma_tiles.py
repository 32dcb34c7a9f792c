"""Warpgroup MMA tiles (Hopper's ``wgmma``): the GPU lowering's `tensorize_wgmma`.

`dlight.gpu.matmul_wgmma` leaves a warpgroup's accumulators in scope ``warpgroup.wgmma_acc``
and each piece of work a block annotated ``tvms.wgmma`` holding plain loops over one tile; a
step's loop over K is annotated ``tvms.wgmma_step``. After compaction (the accumulator then has
the shape of one warpgroup's tiles, [tiles x 64, n]) this pass makes them instructions:

* the accumulator becomes each thread's registers: n / 2 elements per 64 x n tile, tiles in
  row-major order; thread t of the warpgroup (warp w = t / 32, lane l) holds in element i row
  ``16 w + l / 4 + 8 ((i / 2) % 2)``, column ``8 (i / 4) + 2 (l % 4) + i % 2`` (the PTX ISA's
  layout of wgmma's D, which is mma.sync's m16n8 accumulator repeated over 4 warps and n / 8
  column blocks);
* ``"fill"``  each thread zeroes its elements of the tile;
* ``"mma"``   ``C[i, j] += A[i, k] * B[j, k]`` over 64 x n x k (k: 32 bytes of operands, 16
              halves or 8 floats) becomes one ``T.ptx_wgmma("m64n{n}k{k}", ...)`` whose
              operands are descriptors (``T.ptx_wgmma_desc``) of the shared tiles at the loops'
              origin: a K-major tile ([rows][128 bytes]: 8 rows an atom, the next 8 rows 1024
              bytes on) or an N-major one, 16-bit types only ([n / 64][K][64]: 8 K-rows of 128
              bytes an atom, the next 64 columns a block further, the leading byte offset);
              both 128-byte swizzled, as the ``permuted_layout`` the schedule asked for lays
              them out. float32 operands are TF32 (the target allowed it, as for mma.sync);
* ``"store"`` the tile's copy to C (with whatever the block computes from it: the epilogue) at
              each of the thread's elements, pairs of columns as 2-wide vectors;
* a ``tvms.wgmma_step`` loop is wrapped as one batch of asynchronous MMAs: first
  ``fence.proxy.async`` and a barrier (what every thread copied into shared memory is visible
  to the tensor cores' reads), ``wgmma.fence`` (the accumulator registers are ready), the loop,
  then ``wgmma.commit_group`` and ``wgmma.wait_group N``, N the annotation's value: the batches
  left running (the schedule's copies into the tiles a batch reads come after the wait that
  finishes it; ``"store"`` waits for all first).

The descriptors point at the tiles' unswizzled addresses: the tensor cores swizzle the
addresses they compute themselves, so this pass runs before `permute_layouts`, which rewrites
element accesses only.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import const_int, make_add, make_floordiv, make_floormod, make_mul
from tvmscript.ir.tir_visitor import vars_in

from .lower_gpu.common import SYNC_OP, THREAD_VARS, WGMMA_ACC_SCOPE, GPULoweringError
from .lower_tir import dtype_bytes
from .mma_tiles import (_PTX_TYPES, check_no_fragment_left, fragment_load, fragments_of, store_accumulators,
                        unroll_register_loops)
from .tensor_cores import WMMAError, _fragment_index, _multiply_accumulate, _pointer, _tile_nest

__all__ = ["tensorize_wgmma", "WGMMA_ANN", "WGMMA_STEP_ANN"]

WGMMA_ANN = "tvms.wgmma"
WGMMA_STEP_ANN = "tvms.wgmma_step"
WARPGROUP = 128
M = 64
K_BYTES = 32                     # of each operand row per instruction: k16 of halves, k8 of floats
ROW_BYTES = 128                  # a 128-byte swizzle's row
ATOM_BYTES = 8 * ROW_BYTES       # its 8 rows: the stride byte offset of both majornesses


def tensorize_wgmma(body: tir.Stmt, extents: dict) -> tir.Stmt:
    """``body`` (one kernel, compacted) with its ``tvms.wgmma`` tiles made wgmma instructions
    and its accumulators per-thread register arrays."""
    accumulators = fragments_of(body, (WGMMA_ACC_SCOPE,))
    if not accumulators:
        return body
    threads = extents.get("threadIdx.x")
    if not (isinstance(threads, tir.IntImm) and threads.value == WARPGROUP):
        raise GPULoweringError("wgmma accumulators need warpgroups of 128 threads on threadIdx.x")
    registers = {data: _registers(buf) for data, buf in accumulators.items()}
    thread = THREAD_VARS["threadIdx.x"]

    class Mut(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.AttrStmt) and s.attr_key == WGMMA_ANN:
                kind = s.value.value if isinstance(s.value, tir.StringImm) else str(s.value)
                try:
                    return _TileOp(kind, s.body, registers, thread).lower()
                except WMMAError as err:
                    raise GPULoweringError(f"wgmma tile ({kind}): {err}") from None
            s = super().visit_stmt(s)
            if isinstance(s, tir.For) and WGMMA_STEP_ANN in (s.annotations or {}):
                in_flight = s.annotations[WGMMA_STEP_ANN]
                in_flight = int(getattr(in_flight, "value", in_flight))
                return _batch(dataclasses.replace(s, annotations={k: v for k, v in s.annotations.items()
                                                                  if k != WGMMA_STEP_ANN}), in_flight)
            if isinstance(s, Allocate) and s.buffer.data in registers:
                return Allocate(registers[s.buffer.data], s.body, s.storage)
            return s

    out = Mut().visit_stmt(body)
    check_no_fragment_left(out, accumulators, (WGMMA_ACC_SCOPE,), WGMMA_ANN)
    return unroll_register_loops(out, set(registers))


def _call(op: str, *args) -> tir.Evaluate:
    return tir.Evaluate(tir.Call("handle", op, list(args)))


def _batch(loop: tir.For, in_flight: int) -> tir.Stmt:
    """One step's wgmmas between their fences and their commit and the wait that leaves
    ``in_flight`` batches running (module docstring)."""
    return tir.seq([_call("tir.ptx_fence_proxy_async"), _call(SYNC_OP, tir.StringImm("handle", "shared")),
                    _call("tir.ptx_wgmma_fence"), loop, _call("tir.ptx_wgmma_commit_group"),
                    _call("tir.ptx_wgmma_wait_group", tir.IntImm("int32", in_flight))])


def _registers(buf: tir.Buffer) -> tir.Buffer:
    """An accumulator's per-thread array: n / 2 elements per 64 x n tile."""
    shape = [d.value if isinstance(d, tir.IntImm) else None for d in buf.shape]
    if None in shape or len(shape) < 2 or shape[-2] % M:
        raise GPULoweringError(f"wgmma accumulator '{buf.name}' is not made of 64-row tiles")
    size = 1
    for d in shape:
        size *= d
    return dataclasses.replace(buf, shape=[tir.IntImm("int32", size // WARPGROUP)], strides=[], scope="local")


class _TileOp:
    """One ``tvms.wgmma`` tile operation, lowered for the threads of a warpgroup."""

    def __init__(self, kind: str, nest, registers: dict, thread) -> None:
        self.kind, self.registers, self.thread = kind, registers, thread
        columns = nest.body if isinstance(nest, tir.For) else None   # the tile's n: its second loop
        if not isinstance(columns, tir.For):
            raise WMMAError("a wgmma operation must be loops around one store")
        self.n = _extent(columns)
        depth = 3 if kind == "mma" else 2
        self.loops, self.store = _tile_nest(nest, depth, (M, self.n))   # k: checked by `_mma`
        if self.n % 8:
            raise WMMAError(f"a wgmma tile's n must be a multiple of 8, not {self.n}")
        self.at_origin = {lp.loop_var: tir.IntImm(lp.loop_var.dtype, 0) for lp in self.loops}

    def lower(self) -> tir.Stmt:
        if self.kind == "fill":
            return self._fill()
        if self.kind == "mma":
            return self._mma()
        if self.kind == "store":
            return self._store()
        raise WMMAError(f"unknown wgmma operation {self.kind!r}")

    def _regs(self, buf: tir.Buffer) -> tir.Buffer:
        if buf.data not in self.registers:
            raise WMMAError(f"'{buf.name}' is not a wgmma accumulator ({WGMMA_ACC_SCOPE})")
        return self.registers[buf.data]

    def _offset(self, access):
        """Where the thread's elements of the tile ``access`` starts begin in its registers:
        tiles of 64 x n in row-major order over the accumulator's shape, n / 2 elements each."""
        tile = _fragment_index(access, self.at_origin, (M, self.n))
        return simplify(make_mul(tile, tir.IntImm(tile.dtype, self.n // 2)))

    def _fill(self) -> tir.Stmt:
        e = tir.Var("int32", "e")
        regs = self._regs(self.store.buffer)
        store = tir.BufferStore(regs, self.store.value, [make_add(self._offset(self.store), e)])
        return tir.For(e, tir.IntImm("int32", 0), tir.IntImm("int32", self.n // 2), "unrolled", store)

    def _mma(self) -> tir.Stmt:
        acc, a, b = self._operands()
        i_var, j_var, k_var = (lp.loop_var for lp in self.loops)
        types = [_PTX_TYPES.get(x.buffer.dtype) for x in (a, b, acc)]
        if types == ["fp32"] * 3:
            types[:2] = ["tf32", "tf32"]
        if types[0] not in ("fp16", "bf16", "tf32") or types[1] != types[0] or types[2] not in ("fp32", "fp16") \
                or (types[2] == "fp16" and types[0] != "fp16"):
            raise WMMAError(f"wgmma takes float16, bfloat16 or (TF32) float32 operands and a float32 (or, for "
                            f"float16, float16) accumulator, not {a.buffer.dtype}, {b.buffer.dtype}, "
                            f"{acc.buffer.dtype}")
        k = K_BYTES // dtype_bytes(a.buffer.dtype)
        if const_int(self.loops[2].extent) != k:
            raise WMMAError(f"a wgmma of {a.buffer.dtype} operands takes k {k}, not {self.loops[2].extent}")
        desc_a, trans_a = self._descriptor(a, i_var, k_var, "A")
        desc_b, trans_b = self._descriptor(b, j_var, k_var, "B")
        if trans_a:
            raise WMMAError("wgmma here takes A K-major (its contiguous index K's)")
        if trans_b and types[0] == "tf32":
            raise WMMAError("wgmma takes TF32 operands K-major only: B's contiguous index must be K's")
        regs = self._regs(acc.buffer)
        return tir.Evaluate(tir.Call(acc.buffer.dtype, "tir.ptx_wgmma", [
            tir.StringImm("handle", f"m64n{self.n}k{k}"), *[tir.StringImm("handle", t) for t in types],
            tir.IntImm("int32", trans_a), tir.IntImm("int32", trans_b), regs.data, self._offset(self.store),
            desc_a, desc_b]))

    def _operands(self) -> tuple:
        """(accumulator, A, B) loads of ``C = C + A * B`` (operands possibly cast): A indexed by
        the tile's rows, B by its columns."""
        acc, x, y = _multiply_accumulate(self.store)
        i_var = self.loops[0].loop_var
        a, b = (x, y) if any(i_var in vars_in([i]) for i in x.indices) else (y, x)
        for name, op in (("A", a), ("B", b)):
            if op.buffer.scope not in ("shared", "shared.dyn"):
                raise WMMAError(f"wgmma reads {name} from shared memory, not '{op.buffer.name}' ({op.buffer.scope})")
        return acc, a, b

    def _descriptor(self, load: tir.BufferLoad, mn_var, k_var, name: str) -> tuple:
        """(``T.ptx_wgmma_desc`` of the operand tile ``load`` reads at the loops' origin, its
        transpose flag: 0 K-major, 1 M/N-major)."""
        buf, idx = load.buffer, load.indices
        shape = [d.value if isinstance(d, tir.IntImm) else None for d in buf.shape]
        follows = lambda e, v: v in vars_in([e])  # noqa: E731
        if None in shape or len(shape) < 2 or shape[-1] * dtype_bytes(buf.dtype) != ROW_BYTES or buf.strides:
            raise WMMAError(f"wgmma's {name} tile '{buf.name}' must have rows of {ROW_BYTES} bytes, unpadded")
        if follows(idx[-1], k_var) and not follows(idx[-1], mn_var) and follows(idx[-2], mn_var):
            trans, lbo = 0, 16   # the leading byte offset is unused by a K-major swizzled tile
        elif follows(idx[-1], mn_var) and follows(idx[-2], k_var):
            trans = 1
            if self.n * dtype_bytes(buf.dtype) > ROW_BYTES and name == "B":
                if len(idx) < 3 or not follows(idx[-3], mn_var):
                    raise WMMAError(f"wgmma's N-major {name} tile '{buf.name}' must be [{name} / 64][K][64]")
                lbo = shape[-1] * shape[-2] * dtype_bytes(buf.dtype)
            else:
                lbo = 16
        else:
            raise WMMAError(f"wgmma's {name} tile '{buf.name}' must be K-major or M/N-major")
        size = 1
        for d in shape:
            size *= d
        ptr = _pointer(buf, idx, self.at_origin, 1, extent=size)   # the whole tile: what the wgmma may read
        desc = tir.Call("uint64", "tir.ptx_wgmma_desc", [ptr, tir.IntImm("int32", lbo),
                                                         tir.IntImm("int32", ATOM_BYTES)])
        return desc, trans

    def _store(self) -> tir.Stmt:
        """The tile's copy (and epilogue) at each of the thread's elements: mma.sync's
        accumulator layout (`mma_tiles.store_accumulators`) over n / 8 column blocks, 16 rows a
        warp; first a wait for every batch (a step's wait leaves the last one running)."""
        src = fragment_load(self.store.value, self.registers)
        if src is None:
            raise WMMAError("a wgmma store must read one accumulator element")
        row_var, col_var = self.loops[0].loop_var, self.loops[1].loop_var
        if not (row_var in vars_in([src.indices[-2]]) and col_var in vars_in([src.indices[-1]])):
            raise WMMAError("a wgmma store must copy the accumulator's tile, rows then columns")
        c = lambda v: tir.IntImm("int32", v)  # noqa: E731
        warp, lane = make_floordiv(self.thread, c(32)), make_floormod(self.thread, c(32))
        copy = store_accumulators(self.store, src, self._regs(src.buffer), self._offset(src), (row_var, col_var),
                                  lane, make_mul(warp, c(16)), self.n // 8)
        return tir.seq([_call("tir.ptx_wgmma_wait_group", c(0)), copy])


def _extent(loop: tir.For) -> int:
    if not isinstance(loop.extent, tir.IntImm):
        raise WMMAError("a wgmma tile's loops must have constant extents")
    return loop.extent.value
