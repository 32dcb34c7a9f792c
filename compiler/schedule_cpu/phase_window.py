"""The phase-split window: a strided window over one padded plane (a depthwise convolution or
a pooling of stride 2, one channel per block of `row_fusion`) computed as a single vector loop
over the whole plane of outputs, every tap a contiguous load (`phase_split`).

Why: read in place, a stride-``s`` window loads ``s`` times the lanes it uses and shuffles
them apart (`strided_window`), and a row of outputs rarely fills whole vectors (28, 14 and 7
outputs: scalar remainders, or no vectors at all), so mobilenet_v2's four depthwise
convolutions of stride 2 ran at 8 to 28 GFLOP/s where the stride-1 ones reach 80.

How: the padded plane is stored split into its ``sy * sx`` phases, phase ``(py, px)`` holding
the padded elements ``(r * sy + py, q * sx + px)`` at ``r * P + q``, ``P`` (the pitch) the
phase's row length. Output ``(y, x)``'s tap at padded ``(y * sy + a, x * sx + b)`` is then
phase ``(a % sy, b % sx)``'s element ``o + (a // sy) * P + b // sx``, with ``o = y * P + x``:
for every output the same offset, so a vector of consecutive ``o`` loads each tap as one
contiguous vector. The outputs are computed at the pitch, ``P - OW`` of every row's slots
past its end (they read padding or the next row, and nothing reads them), rounded up to whole
vectors; the stages after the window read output ``(y, x)`` at ``y * P + x``::

    phases[p, k] = <padding value>                          # every element
    phases[py * sx + px, r * P + q] = X[r * sy + py - top, q * sx + px - left]
                                                           # the interior, phase by phase
    acc[o] = init <op> tap(0) <op> tap(1) ...              # o < N, vectorized; taps unrolled
    out[y, x] = f(acc[y * P + x], ...)                      # the epilogue stages, as they were

Each output combines its taps in the window's loop order, the same terms as before: results
are the same bits. Built directly, like `strided_window`, from the stages `row_fusion` made for
one channel (its padding stage and the window that reads it)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_analysis import infer_access_regions
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import VECTORIZE_ANN
from .analysis import affine, buffer_loads, constant_bounds, reduction_rhs
from .dot_product import loop_from_zero
from .host import vector_bytes
from .nest import Nest, match_nest, perfect_nest
from .symbolic import shifted_start

MAX_TAPS = 49  # window taps unrolled into the vector loop's body (a 7 x 7 window)
MAX_STRIDE = 4  # phases per dimension: a plane split in more is mostly copies


@dataclasses.dataclass
class _Window:
    """The window stage's shape: its output plane, the loops over it, its taps (one dict of
    reduce-iterator values per tap, in loop order) and the strides of its padded reads."""

    nest: Nest
    y: object  # the NestLoop over output rows, and over columns
    x: object
    taps: list
    sy: int
    sx: int


def phase_split(stages: list, pad_at: int, local: list) -> Optional[tuple]:
    """``(stages, allocs)``: ``stages`` (one block's, `row_fusion._Fusion`) with the padding
    stage at ``pad_at`` and the window that reads it made a phase-split window (see the module
    docstring), and the block's buffers ``local`` with the two replaced; None where the
    stages are not a padding, one window reading it and stages that read the window's output
    element by element."""
    pad = match_nest(stages[pad_at])
    if pad is None:
        return None
    plane = _padded_plane(pad)
    if plane is None:
        return None
    padded = pad.out_buf
    readers = [i for i, st in enumerate(stages) if i != pad_at and _loads_of(st, padded)]
    if len(readers) != 1 or readers[0] < pad_at:
        return None
    at = readers[0]
    win = match_nest(stages[at])
    window = _window(win, padded) if win is not None else None
    if window is None or win.out_buf is padded:
        return None
    later = stages[at + 1:]
    if any(_stores_to(st, win.out_buf) for st in later) or any(_stores_to(st, padded) for st in stages[at:]):
        return None
    if win.out_buf in local and not all(_plane_reads(st, win.out_buf) for st in later):
        return None
    if win.out_buf not in local and any(_loads_of(st, win.out_buf) for st in later):
        return None
    built = _Split(pad, plane, window).build()
    if built is None:
        return None
    copy, compute, phases, flat, pitch = built
    if win.out_buf in local:
        rest = [_by_vectors(_ReadAtPitch(win.out_buf, flat, pitch).visit_stmt(st)) for st in later]
    else:  # (the window is the last stage, a pooling storing the function's output)
        rest = [_stored_at_pitch(window, flat, pitch)] + later
    new_stages = stages[:pad_at] + [copy] + stages[pad_at + 1:at] + [compute] + rest
    allocs = [phases if b is padded else flat if b is win.out_buf else b for b in local]
    if win.out_buf not in local:
        allocs.append(flat)
    return new_stages, allocs


# ----------------------------------------------------------------------------- when


def _padded_plane(pad: Nest) -> Optional[tuple]:
    """``(i, j, bounds)`` for a padding stage storing a plane ``P[0.., i, j]`` (leading
    dimensions of one element): the block iterators ``i``, ``j`` of its two loops, of the
    plane's constant extents, and the interior its condition names
    (`analysis.constant_bounds`); else None."""
    store = pad.store
    value = store.value
    if not (isinstance(value, tir.Call) and value.op == "tir.if_then_else"):
        return None
    shape = store.buffer.shape
    if len(shape) < 2 or not all(isinstance(s, tir.IntImm) for s in shape):
        return None
    if any(s.value != 1 for s in shape[:-2]) or any(not tir.is_const_int(i, 0) for i in store.indices[:-2]):
        return None
    i, j = store.indices[-2:]
    ivs = {lp.iv.var: lp for lp in pad.info if lp.iv is not None}
    if not (isinstance(i, tir.Var) and isinstance(j, tir.Var) and i in ivs and j in ivs and i is not j):
        return None
    h, w = shape[-2].value, shape[-1].value
    if any(not tir.is_const_int(ivs[v].min, 0) or ivs[v].const_extent != n for v, n in ((i, h), (j, w))):
        return None
    bounds = constant_bounds(value.args[0])
    if bounds is None or set(bounds) - {i, j}:
        return None
    return i, j, bounds


def _window(nest: Nest, padded: tir.Buffer) -> Optional[_Window]:
    """The window reading ``padded`` (`_Window`), or None: a reduction (``+``, ``max``,
    ``min``, with an init) storing a plane ``out[.., y, x]`` over two spatial loops of
    constant extent, whose reduce loops have constant extents (at most `MAX_TAPS` taps in
    all), that reads ``padded`` at ``[0.., sy * y + <taps>, sx * x + <taps>]`` and nothing else
    that varies along ``y`` or ``x``."""
    store, init = nest.store, nest.init
    if not isinstance(store.value, (tir.Add, tir.Max, tir.Min)) or not isinstance(init, tir.BufferStore):
        return None
    rhs = reduction_rhs(store)
    if rhs is None or vars_in([init.value]):
        return None
    spatial = [lp for lp in nest.nontrivial if lp.kind == "S"]
    if len(spatial) != 2 or any(lp.iv is None or lp.const_extent is None for lp in spatial):
        return None
    y, x = spatial
    reduce_loops = [lp for lp in nest.info if lp.kind == "R"]
    window_vars = {y.iv.var, x.iv.var} | {lp.iv.var for lp in reduce_loops if lp.iv is not None}
    if [*store.indices[-2:]] != [y.iv.var, x.iv.var] or window_vars & set(vars_in(list(store.indices[:-2]))):
        return None
    if any(lp.iv is None or lp.const_extent is None for lp in reduce_loops):
        return None
    taps = [dict(zip([lp.iv.var for lp in reduce_loops], values)) for values in itertools.product(
        *[range(lp.min.value, lp.min.value + lp.const_extent) for lp in reduce_loops])]
    if not 1 < len(taps) <= MAX_TAPS or any(not isinstance(lp.min, tir.IntImm) for lp in reduce_loops):
        return None
    strides = set()
    for load in buffer_loads(rhs, []):
        if load.buffer is not padded:
            if {y.iv.var, x.iv.var} & set(vars_in(list(load.indices))):
                return None
            continue
        if any(not tir.is_const_int(i, 0) for i in load.indices[:-2]):
            return None
        rows, cols = (affine(i) for i in load.indices[-2:])
        if rows is None or cols is None or rows.get(x.iv.var, 0) or cols.get(y.iv.var, 0):
            return None
        strides.add((rows.get(y.iv.var, 0), cols.get(x.iv.var, 0)))
    if len(strides) != 1:
        return None
    ((sy, sx),) = strides
    if not (1 <= sy <= MAX_STRIDE and 1 <= sx <= MAX_STRIDE) or sy * sx == 1:
        return None
    return _Window(nest, y, x, taps, sy, sx)


def _loads_of(stmt, buf: tir.Buffer) -> bool:
    return bool(_Accesses(buf, stmt).loads)


def _stores_to(stmt, buf: tir.Buffer) -> bool:
    return bool(_Accesses(buf, stmt).stores)


def _plane_reads(stmt, buf: tir.Buffer) -> bool:
    """Whether every load of ``buf`` in ``stmt`` is at ``[0.., i, j]``."""
    return all(all(tir.is_const_int(i, 0) for i in ld.indices[:-2]) for ld in _Accesses(buf, stmt).loads)


class _Accesses(IRMutator):
    """The loads of one buffer in a statement, and its stores."""

    def __init__(self, buf: tir.Buffer, stmt) -> None:
        super().__init__()
        self.buf, self.loads, self.stores = buf, [], []
        self.visit_stmt(stmt)

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.buf:
            self.loads.append(e)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer is self.buf:
            self.stores.append(s)
        return super().visit_stmt(s)


# ----------------------------------------------------------------------------- how


class _Split:
    """Builds the phases' fill and copy, and the window's vector loop (the module docstring)."""

    def __init__(self, pad: Nest, plane: tuple, window: _Window) -> None:
        self.pad, self.window = pad, window
        self.i, self.j, bounds = plane
        self.h, self.w = (s.value for s in pad.out_buf.shape[-2:])
        # The interior the padding's condition names, within the plane: rows, then columns.
        lo_i, hi_i = bounds.get(self.i, (0, self.h))
        lo_j, hi_j = bounds.get(self.j, (0, self.w))
        self.rows_in, self.cols_in = (max(lo_i, 0), min(hi_i, self.h)), (max(lo_j, 0), min(hi_j, self.w))

    def build(self) -> Optional[tuple]:
        win = self.window
        sy, sx = win.sy, win.sx
        dtype = win.nest.store.buffer.dtype
        lanes = max(1, vector_bytes() // win.nest.ebytes)
        oh, ow = win.y.const_extent, win.x.const_extent
        pitch = -(-self.w // sx)
        rows = -(-self.h // sy)
        if ow > pitch:
            return None
        taps = [self._tap(t, pitch) for t in win.taps]
        if any(t is None for t in taps):
            return None
        outputs = -(-((oh - 1) * pitch + ow) // lanes) * lanes
        length = max(rows * pitch, outputs + max(shift for loads in taps for _, shift in loads.values()))
        phases = _buffer(f"{self.pad.out_buf.name}_phases", [sy * sx, length], self.pad.out_buf.dtype)
        flat = _buffer(f"{win.nest.out_buf.name}_flat", [outputs], dtype)
        copy = tir.seq(self._fill(phases, pitch, length) + self._copies(phases, pitch, lanes))
        return copy, self._compute(flat, phases, taps, outputs, lanes), phases, flat, pitch

    def _tap(self, values: dict, pitch: int) -> Optional[dict]:
        """``{load: (phase, shift)}`` for every padded read of one tap (reduce iterators at
        ``values``): the read of output 0 is at padded ``(a, b)``, phase ``(a % sy, b % sx)``
        at ``(a // sy) * P + b // sx``."""
        win = self.window
        out = {}
        for load in buffer_loads(reduction_rhs(win.nest.store), []):
            if load.buffer is not self.pad.out_buf:
                continue
            at = {win.y.iv.var: tir.IntImm(win.y.iv.var.dtype, 0), win.x.iv.var: tir.IntImm(win.x.iv.var.dtype, 0)}
            at.update({v: tir.IntImm(v.dtype, k) for v, k in values.items()})
            a, b = (affine(substitute(i, at)) for i in load.indices[-2:])
            if a is None or b is None or len(a) != 1 or len(b) != 1:
                return None
            a, b = a[None], b[None]
            if a < 0 or b < 0:
                return None
            out[id(load)] = ((a % win.sy) * win.sx + b % win.sx, (a // win.sy) * pitch + b // win.sx)
        return out

    def _interior(self, py: int, px: int) -> tuple:
        """``(r0, r1, q0, q1)``: the rows and columns of phase ``(py, px)`` whose padded
        element ``(r * sy + py, q * sx + px)`` is in the interior the padding's condition
        names (empty ranges where none is)."""
        sy, sx = self.window.sy, self.window.sx
        (lo_i, hi_i), (lo_j, hi_j) = self.rows_in, self.cols_in
        return -(-(lo_i - py) // sy), -(-(hi_i - py) // sy), -(-(lo_j - px) // sx), -(-(hi_j - px) // sx)

    def _fill(self, phases: tir.Buffer, pitch: int, length: int) -> list:
        """The padding value wherever the copies do not write: in phase order, the elements
        before the interior's first row, the run from each interior row's end to the next
        one's start, and everything after the last (the rows past the plane that the outputs
        rounded up to whole vectors read)."""
        other = self.pad.store.value.args[2]
        out = []

        def run(phase: int, start, count: int) -> Optional[tir.Stmt]:
            k = tir.Var("int64", "k")
            at = tir.Add("int64", start, k) if not tir.is_const_int(start, 0) else k
            store = tir.BufferStore(phases, other, [tir.IntImm("int64", phase), at])
            return loop_from_zero(k, count, store) if count > 0 else None

        for py, px in itertools.product(range(self.window.sy), range(self.window.sx)):
            phase = py * self.window.sx + px
            r0, r1, q0, q1 = self._interior(py, px)
            if r1 <= r0 or q1 <= q0:
                out.append(run(phase, tir.IntImm("int64", 0), length))
                continue
            out.append(run(phase, tir.IntImm("int64", 0), r0 * pitch + q0))
            r = tir.Var("int64", "r")
            between = run(phase, tir.Add("int64", tir.Mul("int64", r, tir.IntImm("int64", pitch)),
                                         tir.IntImm("int64", q1)), pitch - q1 + q0)
            if between is not None and r1 - r0 > 1:
                out.append(tir.For(r, tir.IntImm("int64", r0), tir.IntImm("int64", r1 - 1 - r0), "serial", between))
            end = (r1 - 1) * pitch + q1
            out.append(run(phase, tir.IntImm("int64", end), length - end))
        return [st for st in out if st is not None]

    def _copies(self, phases: tir.Buffer, pitch: int, lanes: int) -> list:
        """The interior, by rows of each row phase ``py``: the padded element
        ``(r * sy + py, c)`` to phase ``(py, c % sx)`` at ``r * P + c // sx``. Its columns go
        by groups of ``sx`` (``c = lo + m * sx + t``, ``t`` unrolled): the group's reads are
        contiguous, one interleaved access LLVM loads as whole vectors and shuffles apart into
        the ``sx`` phases; the columns no group covers follow, one loop each."""
        sy, sx = self.window.sy, self.window.sx
        then = self.pad.store.value.args[1]
        lo_j, hi_j = self.cols_in
        groups, left = divmod(max(hi_j - lo_j, 0), sx)
        nests = []
        for py in range(sy):
            r0, r1, _, _ = self._interior(py, 0)
            if r1 <= r0:
                continue
            r, m = tir.Var("int64", "r"), tir.Var("int64", "m")

            def store(t: int, group) -> tir.Stmt:
                """Column ``lo + group * sx + t`` of the rows ``r`` of phase ``py``."""
                col = tir.Add("int64", tir.Mul("int64", group, tir.IntImm("int64", sx)), tir.IntImm("int64", lo_j + t))
                row = tir.Add("int64", tir.Mul("int64", r, tir.IntImm("int64", sy)), tir.IntImm("int64", py))
                at = {self.i: make_cast(row, self.i.dtype), self.j: make_cast(col, self.j.dtype)}
                phase, shift = py * sx + (lo_j + t) % sx, (lo_j + t) // sx
                flat = tir.Add("int64", tir.Mul("int64", r, tir.IntImm("int64", pitch)),
                               tir.Add("int64", group, tir.IntImm("int64", shift)) if shift else group)
                return tir.BufferStore(phases, substitute(then, at), [tir.IntImm("int64", phase), flat])

            columns = []
            if groups:
                columns.append(vector_row(m, groups, lanes, lambda col: tir.seq([store(t, col) for t in range(sx)])))
            columns += [store(t, tir.IntImm("int64", groups)) for t in range(left)]
            rows = tir.For(r, tir.IntImm("int64", r0), tir.IntImm("int64", r1 - r0), "serial", tir.seq(columns))
            nests.append(rows)
        return nests

    def _compute(self, flat: tir.Buffer, phases: tir.Buffer, taps: list, outputs: int, lanes: int) -> tir.Stmt:
        """``flat[o] = init <op> tap(0) <op> ...`` for every ``o``, as one vector loop."""
        nest = self.window.nest
        store = nest.store
        o = tir.Var("int64", "o")
        rhs = reduction_rhs(store)
        value = nest.init.value
        for values, loads in zip(self.window.taps, taps):
            at = {v: tir.IntImm(v.dtype, k) for v, k in values.items()}
            term = _PhaseLoads(loads, phases, o).visit_expr(rhs)
            value = type(store.value)(store.value.dtype, value, substitute(term, at))
        body = tir.BufferStore(flat, value, [o], store.span)
        return loop_from_zero(o, outputs, body, annotations={VECTORIZE_ANN: lanes})


def _by_vectors(stage: tir.Stmt) -> tir.Stmt:
    """An elementwise stage after the window (the convolution's epilogue) with its innermost
    loop by whole vectors (`vector_row`): its rows are the output's, 28 or 14 elements, which
    LLVM would leave a scalar remainder of."""
    nest = match_nest(stage)
    if nest is None or nest.reduce_loops or any(ld.buffer is nest.out_buf for ld in nest.rhs_loads):
        return stage
    loops, _ = perfect_nest(stage)
    last = loops[-1]
    if not tir.is_const_int(last.min, 0) or not isinstance(last.extent, tir.IntImm) or last.extent.value < 4:
        return stage
    lanes = max(4, vector_bytes() // nest.ebytes)
    row = vector_row(last.loop_var, last.extent.value, lanes, lambda x: substitute(last.body, {last.loop_var: x}))
    for lp in reversed(loops[:-1]):
        row = dataclasses.replace(lp, body=row)
    return row


def _stored_at_pitch(window: _Window, flat: tir.Buffer, pitch: int) -> tir.Stmt:
    """The window's own store, of output ``(y, x)`` from ``flat[y * P + x]``, by rows of
    whole vectors (`vector_row`)."""
    store = window.nest.store
    y, x = (tir.Var(lp.iv.var.dtype, lp.iv.var.name) for lp in (window.y, window.x))
    others = {lp.iv.var: lp.min for lp in window.nest.info if lp.iv is not None and lp not in (window.y, window.x)}

    def element(col) -> tir.Stmt:
        at = {**others, window.y.iv.var: y, window.x.iv.var: col}
        row = tir.Mul("int64", make_cast(y, "int64"), tir.IntImm("int64", pitch))
        index = tir.Add("int64", row, make_cast(col, "int64"))
        value = tir.BufferLoad(store.buffer.dtype, flat, [index])
        return tir.BufferStore(store.buffer, value, [substitute(i, at) for i in store.indices], store.span)

    lanes = max(4, vector_bytes() // window.nest.ebytes)
    return loop_from_zero(y, window.y.const_extent, vector_row(x, window.x.const_extent, lanes, element))


class _PhaseLoads(IRMutator):
    """The window's padded reads, each at its phase and ``o`` plus its shift."""

    def __init__(self, loads: dict, phases: tir.Buffer, o: tir.Var) -> None:
        super().__init__()
        self.loads, self.phases, self.o = loads, phases, o

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and id(e) in self.loads:
            phase, shift = self.loads[id(e)]
            at = tir.Add("int64", self.o, tir.IntImm("int64", shift)) if shift else self.o
            return tir.BufferLoad(e.dtype, self.phases, [tir.IntImm("int64", phase), at], e.span)
        return super().visit_expr(e)


class _ReadAtPitch(IRMutator):
    """The stages after the window: its output ``(y, x)`` read at ``y * P + x`` of the flat
    buffer, each block's read regions recomputed."""

    def __init__(self, plane: tir.Buffer, flat: tir.Buffer, pitch: int) -> None:
        super().__init__()
        self.plane, self.flat, self.pitch = plane, flat, pitch

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.plane:
            y, x = (make_cast(self.visit_expr(i), "int64") for i in e.indices[-2:])
            at = tir.Add("int64", tir.Mul("int64", y, tir.IntImm("int64", self.pitch)), x)
            return tir.BufferLoad(e.dtype, self.flat, [at], e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        s = super().visit_stmt(s)
        if isinstance(s, tir.Block):
            reads, writes = infer_access_regions(s.body, s.init, s.alloc_buffers)
            s = dataclasses.replace(s, reads=reads, writes=writes)
        return s


def vector_row(var: tir.Var, extent: int, lanes: int, body) -> tir.Stmt:
    """``body(x)`` for every ``x < extent``, by vectors of ``lanes`` (halved down to the
    extent, at least 4), the last one shifted back to end at ``extent``: whole vectors, no
    scalar remainder, the elements the last vector shares with the one before done twice. For
    stores whose values do not read what they store (a copy, an elementwise stage)."""
    while lanes > 4 and lanes > extent:
        lanes //= 2
    if extent < lanes:
        return loop_from_zero(var, extent, body(var))
    count = -(-extent // lanes)
    outer, inner = tir.Var(var.dtype, f"{var.name}_0"), tir.Var(var.dtype, f"{var.name}_1")
    start = tir.Mul(var.dtype, outer, tir.IntImm(var.dtype, lanes))
    if extent % lanes:
        start = shifted_start(start, tir.IntImm(var.dtype, extent), lanes)
    row = loop_from_zero(inner, lanes, body(tir.Add(var.dtype, start, inner)), annotations={VECTORIZE_ANN: lanes})
    return loop_from_zero(outer, count, row) if count > 1 else substitute(row, {outer: tir.IntImm(var.dtype, 0)})


def _buffer(name: str, shape: list, dtype: str) -> tir.Buffer:
    buf = tir.Buffer(name, [tir.IntImm("int64", n) for n in shape], dtype)
    buf.data = tir.Var("handle", name)
    return buf


