"""Bounds safety of buffer accesses: proved at compile time where possible, checked at run time
everywhere else.

Every index of every ``A[i, j]`` load and store must lie in ``[0, extent)`` of its axis. For each
one, `instrument_bounds_checks` (a lowering step, after blocks become loops and before buffers
are flattened, so that each axis is still known) does the first that applies:

1. **Proves it.** The index's range over the loops around it (`arith.eval_range`, innermost
   loop first) lies in the axis, with shape variables taken as non-negative; or the index is
   guarded by a condition that implies it (``if i * 32 + j < n`` before ``A[i * 32 + j]`` on an
   axis of size ``n``; ``T.if_then_else(1 <= h, A[h - 1], 0)``). Nothing is emitted. This is
   the common case: the kernels LegalizeOps and the default schedule produce are affine over
   loops whose ranges match the shapes.
2. **Hoists it.** Where the access happens on every iteration of the loops around it (no
   ``if``, ``while`` or ``T.if_then_else`` in between), its whole index range over those loops
   is checked once before the outermost of them: a `CHECK_RANGE` statement. Loops stay free of
   branches, so LLVM still vectorizes them, and a bad kernel stops before writing anything.
3. **Checks it in place**: the index becomes ``CHECK_INDEX(index, extent, message)``, which
   the code generator evaluates to the index after stopping the kernel if it is outside.
   Gathers (``A[B[i]]``) and guarded accesses that could not be proved end up here.

A failing check leaves the kernel through the runtime's bounds callback; the call then raises
`runtime.kernel.BoundsCheckError`, whose message names the access as written (buffer and index
expressions), the offending index (or index range), the axis and the shape, and whose span is
the access in the source (found by number: `compiler.kernel_places`). `bounds_problems` is the
same analysis for ``tvms check``: it reports the accesses that are out of bounds on some
iteration for certain (affine indices over loops that run), so ``B[i + 1000000]`` over
``range(4)`` is a located diagnostic before anything runs.

What it guarantees: a kernel compiled with checks (the default of ``tvms run`` and
``tvms.compile`` for the CPU) never reads or writes outside the buffers it declares, where
each buffer is what its declaration says (a ``T.decl_buffer``/``T.Buffer(data=...)`` view of
other memory is checked against its own declared shape; arrays passed in are checked against
the parameters' shapes by the kernel's caller).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

from tvmscript.ir import tir
from tvmscript.diagnostics import TVMScriptError
from tvmscript.runtime.kernel_abi import INDEX_MARK, SIZE_MARK  # where the runtime writes the index and the size
from tvmscript.ir.tir_visitor import reads_memory, vars_in

from tvmscript.ir.arith.bound import const_int_bound
from tvmscript.ir.arith.canonical import INT_OPS, Canonical, widen
from tvmscript.ir.arith.int_set import eval_range
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate

from .kernel_places import with_place

__all__ = ["instrument_bounds_checks", "bounds_problems", "CHECK_INDEX", "CHECK_RANGE"]

CHECK_INDEX = "tvms.check_index"  # (index, extent, message) -> index
CHECK_RANGE = "tvms.check_range"  # (lowest, highest, extent, message), evaluated as a statement


MAX_FACT_MULTIPLE = 64  # of a fact subtracted to prove an expression non-negative (`_Analysis.nonnegative`)


@dataclasses.dataclass
class _Loop:
    var: tir.Var
    min: tir.PrimExpr
    extent: tir.PrimExpr
    exact: bool  # a unit-step loop: every value of [min, min + extent) is taken
    hoisted: list = dataclasses.field(default_factory=list)  # checks to run before it


@dataclasses.dataclass
class _Access:
    buffer: tir.Buffer
    indices: list
    span: object
    write: bool


class _Analysis:
    """The loops, conditions and let bindings around the statement being visited, and the
    proofs asked of them."""

    def __init__(self, func: tir.PrimFunc) -> None:
        self.func = func
        self.loops: list[_Loop] = []
        self.facts: list = []  # integer expressions known to be >= 0 here
        self.lets: dict = {}  # Var -> its value, for load-free integer lets
        self.opaque_depth: dict = {}  # Var (a let that cannot be substituted) -> loop depth
        self.barrier = 0  # loops at or above this depth may run an access conditionally
        self.conditional = False  # under an if, while, assert or T.if_then_else branch
        self.nonneg: dict = {}
        for buf in func.buffer_map.values():
            self.note_shape(buf)

    def note_shape(self, buf: tir.Buffer) -> None:
        """A buffer's symbolic dimensions are sizes: non-negative."""
        for v in vars_in(list(buf.shape) + list(buf.strides or [])):
            self.nonneg.setdefault(v, (tir.IntImm(v.dtype, 0), None))

    # ---- ranges
    def bound_ranges(self) -> dict:
        ranges = dict(self.nonneg)
        for loop in self.loops:
            ranges[loop.var] = (loop.min, loop.extent)
        return ranges

    def expand(self, e):
        """``e`` with load-free lets replaced by their values (stored expanded already, so one
        substitution leaves no let)."""
        used = {v: self.lets[v] for v in vars_in([e]) if v in self.lets}
        return substitute(e, used) if used else e

    def interval(self, e, loops: list) -> Optional[tuple]:
        """Inclusive ``(lo, hi)`` of ``e`` while ``loops`` (innermost last) sweep their ranges;
        None where it cannot be bounded."""
        lo = hi = e
        ranges = self.bound_ranges()
        for loop in reversed(loops):
            if loop.var not in vars_in([lo, hi]):
                continue
            dom = {loop.var: tir.Range(loop.min, loop.extent)}
            r_lo = eval_range(lo, dom, ranges)
            r_hi = eval_range(hi, dom, ranges) if hi is not lo else r_lo
            if r_lo is None or r_hi is None:
                return None
            lo = r_lo[0]
            hi = tir.Add(hi.dtype, r_hi[0], tir.Sub(hi.dtype, r_hi[1], tir.IntImm(hi.dtype, 1)))
        c = Canonical(ranges)
        return c.simplify(lo), c.simplify(hi)

    def lower_bound(self, e) -> float:
        """The least value ``e`` can take as every loop in scope sweeps its range."""
        iv = self.interval(e, self.loops)
        if iv is None:
            return float("-inf")
        return const_int_bound(iv[0], self.bound_ranges())[0]

    def nonnegative(self, e) -> bool:
        """Whether ``e >= 0`` wherever this point of the program runs: its lower bound over the
        loops, or that of ``e - k * fact`` for a fact known here (``fact >= 0``) and a ``k``
        that cancels one of the fact's terms where ``e`` has it scaled (`_multiples`): a GPU
        thread's two elements ``2 * t + j`` (j < 2) of 198 under its guard ``t < 99``."""
        if self.lower_bound(e) >= 0:
            return True
        return any(self.lower_bound(_sub(e, f if k == 1 else tir.Mul("int64", tir.IntImm("int64", k), f))) >= 0
                   for f in self.facts for k in self._multiples(e, f))

    def _multiples(self, e, fact) -> list:
        """1, then each ``k > 1`` (at most `MAX_FACT_MULTIPLE`) by which a term of ``e`` is
        ``-k`` times the same term of ``fact``: the multiples of the fact worth subtracting."""
        canonical = Canonical(self.bound_ranges())
        found = {1}
        e_terms, f_terms = canonical.to_sum(e).terms, canonical.to_sum(fact).terms
        for t in f_terms:
            for u in e_terms:
                if t.scale and u.same_shape(t) and u.scale % t.scale == 0 and 1 < u.scale // t.scale <= MAX_FACT_MULTIPLE:
                    found.add(u.scale // t.scale)
        return sorted(found)

    def in_bounds(self, index, extent) -> bool:
        index, extent = widen(self.expand(index)), widen(self.expand(extent))
        # Fast path, enough for most kernels: constant bounds of the index over the loops.
        lo, hi = const_int_bound(index, self.bound_ranges())
        if lo >= 0 and isinstance(extent, tir.IntImm) and hi < extent.value:
            return True
        if (lo >= 0 or self.nonnegative(index)) and self.nonnegative(_sub(_sub(extent, index), _one())):
            return True
        return self.in_bounds_by_quotients(index, extent)

    def in_bounds_by_quotients(self, index, extent) -> bool:
        """Whether ``index`` is in ``[0, extent)`` once each quotient ``x // c`` in it (c > 0)
        whose dividend a fact bounds (``x <= u``, `fact_upper_bound`) is taken to range over
        ``[0, u // c]``: a GPU tile's pixel row ``(t * 32 + p) // 28 * 2`` (a stride-2
        convolution over 28 x 28 outputs) under its guard ``t * 32 + p < 784``."""
        quotients: dict = {}

        def replace(e):
            if isinstance(e, tir.FloorDiv) and isinstance(e.b, tir.IntImm) and e.b.value > 0:
                top = self.fact_upper_bound(e.a)
                if top is not None and self.nonnegative(e.a):
                    q = tir.Var(f"quotient{len(quotients)}", e.dtype)
                    quotients[q] = (tir.IntImm(e.dtype, 0), tir.IntImm(e.dtype, top // e.b.value + 1))
                    return q
            if isinstance(e, (tir.Add, tir.Sub, tir.Mul, tir.FloorMod, tir.FloorDiv)):
                return type(e)(e.dtype, replace(e.a), replace(e.b))
            return e

        if not self.facts or not isinstance(extent, tir.IntImm):
            return False
        bounded = replace(index)
        if not quotients:
            return False
        lo, hi = const_int_bound(bounded, {**self.bound_ranges(), **quotients})
        return lo >= 0 and hi < extent.value

    def fact_upper_bound(self, x) -> Optional[int]:
        """The least constant ``u`` with ``x <= u`` by a fact known here (a fact ``f >= 0``
        with ``f + x`` constant), or None."""
        canonical = Canonical(self.bound_ranges())
        best = None
        for f in self.facts:
            total = canonical.simplify(tir.Add("int64", f, x))
            if isinstance(total, tir.IntImm) and (best is None or total.value < best):
                best = total.value
        return best

    # ---- conditions
    def facts_of(self, cond, holds: bool) -> list:
        """``cond`` (or its negation) as expressions known to be >= 0."""
        if isinstance(cond, tir.Call) and cond.op == "tir.likely":
            return self.facts_of(cond.args[0], holds)
        if isinstance(cond, tir.Not):
            return self.facts_of(cond.a, not holds)
        if isinstance(cond, tir.And) and holds or isinstance(cond, tir.Or) and not holds:
            return self.facts_of(cond.a, holds) + self.facts_of(cond.b, holds)
        if not isinstance(cond, (tir.LT, tir.LE, tir.GT, tir.GE, tir.EQ)):
            return []
        if not (tir.is_int(cond.a.dtype) and tir.is_int(cond.b.dtype)):
            return []
        a, b = widen(self.expand(cond.a)), widen(self.expand(cond.b))
        kind = type(cond)
        if isinstance(cond, tir.EQ):
            return [_sub(a, b), _sub(b, a)] if holds else []
        if not holds:  # not (a < b) is a >= b, ...
            kind = {tir.LT: tir.GE, tir.LE: tir.GT, tir.GT: tir.LE, tir.GE: tir.LT}[kind]
        if kind is tir.LT:
            return [_sub(_sub(b, a), _one())]
        if kind is tir.LE:
            return [_sub(b, a)]
        if kind is tir.GT:
            return [_sub(_sub(a, b), _one())]
        return [_sub(a, b)]


def _typed64(e):
    """An int64 expression whose every operand is int64 too (`widen`'s output is not)."""
    if isinstance(e, INT_OPS):
        return type(e)("int64", _typed64(e.a), _typed64(e.b))
    if isinstance(e, tir.IntImm):
        return e if e.dtype == "int64" else tir.IntImm("int64", e.value)
    return _as(e, "int64")


def _as(e, dtype: str):
    if e.dtype == dtype:
        return e
    if isinstance(e, tir.IntImm):
        return tir.IntImm(dtype, e.value)
    return tir.Cast(dtype, e)


def _sub(a, b):
    """``a - b`` for the analyses (operands as `widen` leaves them: no casts added)."""
    return tir.Sub("int64", a, b)


def _one():
    return tir.IntImm("int64", 1)


# ----------------------------------------------------------------------------- the walk


class _Walker(IRMutator):
    """Visits a block-free function with `_Analysis` kept current; `on_access` is called for
    each load and store, with the analysis describing its surroundings, and may return new
    indices. Every other node is rebuilt as `IRMutator` rebuilds it."""

    def __init__(self, func: tir.PrimFunc) -> None:
        self.a = _Analysis(func)

    def on_access(self, access: _Access) -> Optional[list]:
        raise NotImplementedError

    def on_loop_done(self, loop: _Loop, stmt):
        return stmt

    # ---- statements
    def visit_stmt(self, s):
        a = self.a
        if isinstance(s, tir.BufferStore):
            value = self.visit_expr(s.value)
            indices = [self.visit_expr(i) for i in s.indices]
            new = self.on_access(_Access(s.buffer, indices, s.span, True))
            indices = new if new is not None else indices
            if value is s.value and all(x is y for x, y in zip(indices, s.indices)):
                return s
            return tir.BufferStore(s.buffer, value, indices, s.span)
        if isinstance(s, tir.For):
            # The bounds are evaluated before the loop runs: outside its scope.
            lo, ext = self.visit_expr(s.min), self.visit_expr(s.extent)
            unit = s.step is None or (isinstance(s.step, tir.IntImm) and s.step.value == 1)
            loop = _Loop(s.loop_var, a.expand(lo), a.expand(ext), unit)
            a.loops.append(loop)
            try:
                body = self.visit_stmt(s.body)
            finally:
                a.loops.pop()
            new = s if body is s.body and lo is s.min and ext is s.extent else dataclasses.replace(
                s, min=lo, extent=ext, body=body)
            return self.on_loop_done(loop, new)
        if isinstance(s, tir.IfThenElse):
            cond = self.visit_expr(s.condition)
            then = self.guarded(lambda: self.visit_stmt(s.then_case), a.facts_of(cond, True))
            other = self.guarded(lambda: self.visit_stmt(s.else_case), a.facts_of(cond, False)) \
                if s.else_case is not None else None
            if cond is s.condition and then is s.then_case and other is s.else_case:
                return s
            return tir.IfThenElse(cond, then, other)
        if isinstance(s, tir.LetStmt):
            if tir.is_int(s.var.dtype) and not reads_memory(s.value):
                a.lets[s.var] = a.expand(s.value)
            else:
                a.opaque_depth[s.var] = len(a.loops)
            return super().visit_stmt(s)
        if isinstance(s, tir.AssertStmt):
            cond = self.visit_expr(s.condition)
            body = self.guarded(lambda: self.visit_stmt(s.body), a.facts_of(cond, True), barrier=False)
            return s if cond is s.condition and body is s.body else tir.AssertStmt(cond, s.message, body)
        if isinstance(s, tir.While):
            cond = self.visit_expr(s.condition)  # evaluated at least once, unconditionally
            body = self.guarded(lambda: self.visit_stmt(s.body), [])
            return s if cond is s.condition and body is s.body else tir.While(cond, body)
        if isinstance(s, (tir.DeclBuffer, Allocate)):
            a.note_shape(s.buffer)  # its symbolic dimensions are sizes
        return super().visit_stmt(s)

    def guarded(self, visit, facts: list, barrier: bool = True):
        """Run ``visit`` with ``facts`` known and, for a ``barrier``, no check hoisted out."""
        a = self.a
        saved = (len(a.facts), a.barrier, a.conditional)
        a.facts.extend(facts)
        if barrier:
            a.barrier = len(a.loops)
        a.conditional = True
        try:
            return visit()
        finally:
            del a.facts[saved[0]:]
            a.barrier, a.conditional = saved[1], saved[2]

    # ---- expressions
    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad):
            indices = [self.visit_expr(i) for i in e.indices]
            new = self.on_access(_Access(e.buffer, indices, e.span, False))
            indices = new if new is not None else indices
            if all(x is y for x, y in zip(indices, e.indices)):
                return e
            return tir.BufferLoad(e.dtype, e.buffer, indices, e.span)
        if isinstance(e, tir.Call) and e.op == "tir.if_then_else" and len(e.args) == 3:
            cond = self.visit_expr(e.args[0])
            then = self.guarded(lambda: self.visit_expr(e.args[1]), self.a.facts_of(cond, True))
            other = self.guarded(lambda: self.visit_expr(e.args[2]), self.a.facts_of(cond, False))
            if cond is e.args[0] and then is e.args[1] and other is e.args[2]:
                return e
            return tir.Call(e.dtype, e.op, [cond, then, other])
        if isinstance(e, tir.Let):
            self.a.opaque_depth[e.var] = len(self.a.loops)
        if isinstance(e, (tir.And, tir.Or)):
            # The right operand runs only when the left one did not decide (as in C and Python).
            left = self.visit_expr(e.a)
            right = self.guarded(lambda: self.visit_expr(e.b), self.a.facts_of(left, isinstance(e, tir.And)))
            return e if left is e.a and right is e.b else type(e)(e.dtype, left, right)
        return super().visit_expr(e)


# ----------------------------------------------------------------------------- messages


def _text(e) -> str:
    """``e`` as TVMScript, with integer constants bare (``1000``, not ``T.int64(1000)``)."""
    from tvmscript.printer.tir_printer import TIRPrinter

    try:
        text = TIRPrinter().expr(e)
    except Exception:  # a form the printer does not print alone: say what it is
        return type(e).__name__
    return re.sub(r"T\.u?int(?:8|16|32|64)\((-?\d+)\)", r"\1", text)


def _access_text(access: _Access) -> str:
    indices = ", ".join(_text(i) for i in access.indices)
    return f"{access.buffer.name}[{indices}]"


def _shape_text(buf: tir.Buffer) -> str:
    dims = [_text(d) for d in buf.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _message(access: _Access, axis: int, places: dict | None) -> str:
    """The failure message of a check of ``access``; where it is in the source goes by number
    (`kernel_places`), and whose kernel it is the runtime adds."""
    kind = "write to" if access.write else "read of"
    return with_place(f"out-of-bounds {kind} {_access_text(access)}: {INDEX_MARK} outside axis {axis} of "
                      f"{access.buffer.name} (size {SIZE_MARK}, shape {_shape_text(access.buffer)})",
                      places, access.span)


# ----------------------------------------------------------------------------- instrumenting


class _Instrumenter(_Walker):
    def __init__(self, func: tir.PrimFunc, places: dict | None, checked=None) -> None:
        super().__init__(func)
        self.places = places
        self.checked = checked

    def on_access(self, access: _Access) -> Optional[list]:
        a = self.a
        if self.checked is not None and not self.checked(access.buffer):
            return None
        changed = False
        indices = list(access.indices)
        for axis, (index, extent) in enumerate(zip(access.indices, access.buffer.shape)):
            if not tir.is_int(index.dtype) or tir.lanes_of(index.dtype) != 1:
                continue  # vector indices (T.ramp): the CPU code generator refuses them
            if a.in_bounds(index, extent):
                continue
            message = _message(access, axis, self.places)
            if self.hoist(index, extent, message):
                continue
            extent_at = _as(extent, index.dtype)
            indices[axis] = tir.Call(index.dtype, CHECK_INDEX, [index, extent_at, tir.StringImm("handle", message)])
            changed = True
        return indices if changed else None

    def hoist(self, index, extent, message: str) -> bool:
        """Check ``index``'s whole range over the loops it runs in on every iteration, once,
        before the outermost of them; False where it cannot be.

        Only where that range is exact (`_affine_in`: an affine index over unit-step loops that
        do not depend on one another), so that a hoisted check fails only if some iteration
        really goes outside: an over-approximated range could stop a correct kernel."""
        a = self.a
        index, extent = widen(a.expand(index)), widen(a.expand(extent))
        used = set(vars_in([index, extent]))
        floor = a.barrier
        for v, depth in a.opaque_depth.items():
            if v in used:
                floor = max(floor, depth)
        best = None
        relaxed: list = []
        for depth in range(len(a.loops) - 1, floor - 1, -1):
            loop = a.loops[depth]
            if not loop.exact or any(loop.var in vars_in([inner.min, inner.extent]) for inner in relaxed):
                break  # a stepped loop, or an inner loop's range depends on this one
            candidate = [loop] + relaxed
            if not _affine_in(index, {x.var for x in candidate}, a):
                break
            iv = a.interval(index, candidate)
            if iv is None:
                break
            relaxed, best = candidate, (depth, iv)
        if best is None:
            return False
        depth, (lo, hi) = best
        check = tir.Evaluate(tir.Call("int32", CHECK_RANGE, [_typed64(lo), _typed64(hi), _typed64(extent),
                                                             tir.StringImm("handle", message)]))
        runs = [loop for loop in relaxed if const_int_bound(loop.extent, a.bound_ranges())[0] < 1]
        if runs:
            cond = None
            for loop in runs:
                term = tir.GT("bool", _typed64(loop.extent), tir.IntImm("int64", 0))
                cond = term if cond is None else tir.And("bool", cond, term)
            check = tir.IfThenElse(cond, check)
        a.loops[depth].hoisted.append(check)
        return True

    def on_loop_done(self, loop: _Loop, stmt):
        if not loop.hoisted:
            return stmt
        unique, seen = [], set()
        for check in loop.hoisted:
            key = _text(check.value) if isinstance(check, tir.Evaluate) else id(check)
            if key not in seen:
                seen.add(key)
                unique.append(check)
        return tir.seq(unique + [stmt])


def instrument_bounds_checks(func: tir.PrimFunc, places: dict | None = None, checked=None) -> tir.PrimFunc:
    """``func`` (blocks already converted to loops, buffers not yet flattened) with a run-time
    check for every access not proven in bounds (see the module docstring). ``places``
    numbers the accesses' spans (`kernel_places.numbered_spans` of the PrimFunc before any
    schedule), so a failed check says where the access is. ``checked(buffer)``, when given,
    says which buffers' accesses are checked (the GPU's: global memory, `lower_gpu`)."""
    body = _Instrumenter(func, places, checked).visit_stmt(func.body)
    if body is func.body:
        return func
    return dataclasses.replace(func, body=body)


# ----------------------------------------------------------------------------- tvms check


class _Finder(_Walker):
    """Collects the accesses that are outside their buffer on some iteration for certain."""

    def __init__(self, func: tir.PrimFunc, func_name: str) -> None:
        super().__init__(func)
        self.func_name = func_name
        self.problems: list = []

    def on_access(self, access: _Access) -> None:
        a = self.a
        if a.conditional or not all(loop.exact for loop in a.loops):
            return None
        runs = _when_loops_run(a)
        if runs is None:
            return None
        saved = len(a.facts)
        a.facts.extend(runs)
        try:
            self.check(access)
        finally:
            del a.facts[saved:]
        return None

    def check(self, access: _Access) -> None:
        """Report the first axis of ``access`` whose index leaves the axis on some iteration
        whenever the loops around it run (their extents at least 1, in `_Analysis.facts`)."""
        a = self.a
        ranges = a.bound_ranges()
        for axis, (index, extent) in enumerate(zip(access.indices, access.buffer.shape)):
            if not tir.is_int(index.dtype) or tir.lanes_of(index.dtype) != 1:
                continue
            index = widen(a.expand(index))
            if any(v in a.opaque_depth for v in vars_in([index])) or not _affine_in_loops(index, a):
                continue
            iv = a.interval(index, a.loops)
            if iv is None:
                continue
            lo, hi = iv
            extent = widen(a.expand(extent))
            below = a.nonnegative(_sub(tir.IntImm("int64", -1), lo))  # lo <= -1
            above = a.nonnegative(_sub(hi, extent))  # hi >= extent
            if below or above:
                kind = "write to" if access.write else "read of"
                self.problems.append(TVMScriptError(
                    f"in '{self.func_name}': out-of-bounds {kind} {_access_text(access)}: the index "
                    f"takes the values {_text(lo)} to {_text(hi)}, outside axis {axis} of "
                    f"{access.buffer.name} (0 to {_text(Canonical(ranges).simplify(_sub(extent, _one())))}), "
                    f"shape {_shape_text(access.buffer)}",
                    access.span or self.a.func.span))
                return


def _when_loops_run(a: _Analysis) -> Optional[list]:
    """What an access inside the loops ``a`` is in may assume, since it runs only when they
    do: each symbolic extent is at least 1, as facts (``n - 1 >= 0``) for `_Analysis.nonnegative`.
    With them an access wrong for every size is reported, as TVM's OOBChecker does, while one
    wrong only for a size that runs nothing (``n = 0``) is not. None where no such facts hold:
    a loop that never runs, or one whose extent depends on an enclosing loop (the access then
    runs on some of that loop's iterations only)."""
    ranges = a.bound_ranges()
    loop_vars = {loop.var for loop in a.loops}
    facts = []
    for loop in a.loops:
        lo, hi = const_int_bound(loop.extent, ranges)
        if lo >= 1:
            continue
        if hi < 1 or any(v in loop_vars for v in vars_in([loop.extent])):
            return None
        facts.append(_sub(widen(loop.extent), _one()))
    return facts


def _affine_in_loops(index, a: _Analysis) -> bool:
    return _affine_in(index, {loop.var for loop in a.loops}, a)


def _affine_in(index, loop_vars: set, a: _Analysis) -> bool:
    """Whether ``index`` is a sum of ``loop_vars``, each once with a constant factor, plus
    terms free of them: then its range over their loops is attained exactly."""
    s = Canonical(a.bound_ranges()).to_sum(index)
    seen = set()
    for t in s.terms:
        used = [v for v in vars_in([t.index]) if v in loop_vars]
        if not used:
            continue
        if not isinstance(t.index, tir.Var) or t.lower != 1 or t.upper is not None or t.index in seen:
            return False
        seen.add(t.index)
    return True


def bounds_problems(func: tir.PrimFunc, name: str) -> list:
    """Located diagnostics for the accesses of ``func`` that are out of bounds for certain."""
    from .lower_tir import convert_blocks_to_loops, lower_init

    try:
        lowered = convert_blocks_to_loops(lower_init(func))
    except (ValueError, NotImplementedError):
        return []  # forms the CPU lowering does not take: other checks report them
    finder = _Finder(lowered, name)
    finder.visit_stmt(lowered.body)
    return finder.problems


def count_checks(lowered: tir.PrimFunc) -> dict:
    """``{"in place": n, "hoisted": m}``: the run-time checks a lowered function keeps (for
    tests and benchmarks/cpu.py, which report how many accesses were not proven)."""
    found = {"in place": 0, "hoisted": 0}

    def walk(x):
        if isinstance(x, tir.Call) and x.op in (CHECK_INDEX, CHECK_RANGE):
            found["in place" if x.op == CHECK_INDEX else "hoisted"] += 1
        if dataclasses.is_dataclass(x) and not isinstance(x, tir.Buffer):
            for f in dataclasses.fields(x):
                v = getattr(x, f.name)
                for y in v if isinstance(v, list) else [v]:
                    if dataclasses.is_dataclass(y):
                        walk(y)

    walk(lowered.body)
    return found
