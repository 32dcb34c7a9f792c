"""Pass 1: reductions across threads (TVM's LowerCrossThreadReduction).

A reduction block whose reduce loop is bound to ``threadIdx`` becomes a per-thread partial
result, a ``tvm_thread_allreduce`` over those threads (`common.ALLREDUCE_OP`, which the CUDA
code generator prints as warp shuffles), and one thread's write-back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import all_of, conjuncts, is_one
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import _with_body

from .common import ALLREDUCE_OP, THREAD_VARS, GPULoweringError, is_thread_loop, same_expr, thread_value


_COMBINERS = {tir.Add: "sum", tir.Mul: "prod", tir.Max: "max", tir.Min: "min"}


def reduction_identity(combiner: str, dtype: str):
    """The value that changes nothing under ``combiner`` (the start of each thread's partial)."""
    if combiner == "sum":
        return tir.FloatImm(dtype, 0.0) if tir.is_float(dtype) else tir.IntImm(dtype, 0)
    if combiner == "prod":
        return tir.FloatImm(dtype, 1.0) if tir.is_float(dtype) else tir.IntImm(dtype, 1)
    lowest = combiner == "max"
    return tir.Call(dtype, "tir.min_value" if lowest else "tir.max_value", [])


def combine(combiner: str, a, b):
    """``a`` and ``b`` combined by ``combiner`` (``"sum"``: ``a + b``...)."""
    cls = {"sum": tir.Add, "prod": tir.Mul, "max": tir.Max, "min": tir.Min}[combiner]
    return cls(a.dtype, a, b)


def _match_reduction(block: tir.Block):
    """``(buffer, indices, combiner, rhs)`` for a block whose body is
    ``buf[idx] = buf[idx] <op> rhs`` (or ``rhs <op> buf[idx]``); None otherwise."""
    st = block.body
    if not isinstance(st, tir.BufferStore):
        return None
    v = st.value
    combiner = _COMBINERS.get(type(v))
    if combiner is None:
        return None

    def is_self(e):
        return (isinstance(e, tir.BufferLoad) and e.buffer is st.buffer and len(e.indices) == len(st.indices)
                and all(same_expr(a, b) for a, b in zip(e.indices, st.indices)))

    if is_self(v.a):
        return st.buffer, st.indices, combiner, v.b
    if is_self(v.b):
        return st.buffer, st.indices, combiner, v.a
    return None


def lower_cross_thread_reduction(func: tir.PrimFunc) -> tir.PrimFunc:
    """Rewrite each reduction block with a reduce loop bound to ``threadIdx``:

    ``for k in thread_binding(T, "threadIdx.x"): block(init=C[i] = 0; C[i] += f(k))`` becomes
    (every thread) ``red[0] = identity; for k ...: red[0] += f(k)``, then
    ``tvm_thread_allreduce("sum", red[0], "threadIdx.x")`` and ``if threadIdx.x == 0:
    C[i] = init + red[0]`` (just ``red[0]`` when the init is the identity).

    Why: the threads of a bound reduce loop run at once, each holding part of the sum; the
    block's sequential meaning (accumulate into ``C[i]`` in order) would be a race."""
    counter = [0]

    def rewrite(path: list, br: tir.BlockRealize):
        """``path``: the For loops above ``br`` (outermost first). Returns (index in path of
        the loop to replace, new statement) or None when ``br`` is not a cross-thread reduction."""
        block = br.block
        reduce_vars = set()
        for iv, value in zip(block.iter_vars, br.iter_values):
            if iv.kind == "R":
                reduce_vars.update(vars_in([value]))
        if not reduce_vars:
            return None
        reduce_idx = [i for i, loop in enumerate(path) if loop.loop_var in reduce_vars]
        cross = [path[i] for i in reduce_idx if is_thread_loop(path[i]) and path[i].thread_tag.startswith("threadIdx")]
        if not cross:
            return None
        where = f"block '{block.name}'"
        match = _match_reduction(block)
        if match is None or block.init is None:
            raise GPULoweringError(
                f"{where}: a reduction across threads must have an init and a body 'buf[i] = buf[i] + value' "
                "(or *, T.max, T.min)")
        buf, indices, combiner, rhs = match
        top = reduce_idx[0]
        inner = path[top:]
        for loop in inner:
            if loop.loop_var not in reduce_vars and not is_thread_loop(loop) and not is_one(loop.extent):
                raise GPULoweringError(
                    f"{where}: loop '{loop.loop_var.name}' lies between the reduction's loops but does not reduce")
        for outer, nxt in zip(inner, inner[1:] + [br]):
            if outer.body is not nxt:
                raise GPULoweringError(
                    f"{where}: the loops of a reduction across threads must hold only that block")
        counter[0] += 1
        dtype = buf.dtype
        red = tir.Buffer(f"{block.name}_red", [tir.IntImm("int32", 1)], dtype, scope="local",
                         data=tir.Var("handle", f"{block.name}_red"))
        zero = [tir.IntImm("int32", 0)]
        red_load = tir.BufferLoad(dtype, red, zero)
        identity = reduction_identity(combiner, dtype)
        # Each thread's partial result: the block with its init dropped, accumulating into red.
        partial = dataclasses.replace(block, body=tir.BufferStore(red, combine(combiner, red_load, rhs), zero),
                                      init=None, reads=[], writes=[], name=block.name + "_in_thread")
        nest = tir.BlockRealize(br.iter_values, br.predicate, partial)
        for loop in reversed(inner):
            nest = dataclasses.replace(loop, body=nest)
        # The write-back: the spatial indices, with loops inside `top` replaced by thread indices.
        binding = {iv.var: v for iv, v in zip(block.iter_vars, br.iter_values)}
        inner_threads = {loop.loop_var: thread_value(loop) for loop in inner if is_thread_loop(loop)}
        inner_vars = {loop.loop_var for loop in inner}

        def outer_value(e, what):
            e = substitute(substitute(e, binding), inner_threads)
            if any(v in inner_vars for v in vars_in([e])):
                raise GPULoweringError(f"{where}: the {what} depends on a reduce loop")
            return e

        out_idx = [outer_value(i, "written index") for i in indices]
        init_value = block.init.value if isinstance(block.init, tir.BufferStore) else None
        if init_value is None:
            raise GPULoweringError(f"{where}: the init must store one value")
        init_value = outer_value(init_value, "init value")
        result = red_load if same_expr(init_value, identity) else combine(combiner, init_value, red_load)
        # Every reducing thread holds the result: one of them writes a buffer the threads
        # share; a thread's own (local) buffer is written by each, for the code after it.
        guard = [] if buf.scope in ("local", "warp") else [
            tir.EQ("bool", THREAD_VARS[loop.thread_tag], tir.IntImm("int32", 0)) for loop in cross]
        for c in conjuncts(br.predicate):  # spatial conditions (a tail of the output)
            c2 = substitute(substitute(c, binding), inner_threads)
            if not any(v in inner_vars for v in vars_in([c2])):
                guard.append(c2)
        tags = sorted({loop.thread_tag for loop in cross})
        allreduce = tir.Evaluate(tir.Call("handle", ALLREDUCE_OP,
                                          [tir.StringImm("handle", combiner), red_load]
                                          + [tir.StringImm("handle", t) for t in tags]))
        write_back = tir.IfThenElse(all_of(guard), tir.BufferStore(buf, result, out_idx))
        body = tir.seq([tir.BufferStore(red, identity, zero), nest, allreduce, write_back])
        return top, Allocate(red, body)

    class M(IRMutator):
        def __init__(self):
            self.path: list = []

        def visit_stmt(self, s):
            if isinstance(s, tir.For):
                self.path.append(s)
                try:
                    body = self.visit_stmt(s.body)
                finally:
                    self.path.pop()
                if isinstance(body, _Replace):
                    if body.depth == len(self.path):
                        return body.stmt
                    return body
                return s if body is s.body else dataclasses.replace(s, body=body)
            if isinstance(s, tir.BlockRealize) and s.block.init is not None:
                found = rewrite(list(self.path), s)
                if found is not None:
                    top, stmt = found
                    if top == len(self.path):  # pragma: no cover - a reduce loop always exists
                        return stmt
                    return _Replace(top, stmt)
            if isinstance(s, tir.SeqStmt):
                seq = [self.visit_stmt(x) for x in s.seq]
                for x in seq:
                    if isinstance(x, _Replace):
                        raise GPULoweringError("a reduction across threads must be the only statement of its loops")
                return s if all(x is y for x, y in zip(seq, s.seq)) else tir.seq(seq)
            if isinstance(s, tir.Block):
                body = self.visit_stmt(s.body)
                if isinstance(body, _Replace):
                    raise GPULoweringError(f"block '{s.name}': unexpected reduction structure")
                return s if body is s.body else dataclasses.replace(s, body=body)
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


@dataclass(eq=False)
class _Replace(tir.Stmt):
    """A rewritten subtree travelling up to the loop at ``depth`` it replaces."""

    depth: int
    stmt: tir.Stmt
