"""Rewriting TensorIR: `IRMutator`, and `substitute` built on it.

`IRMutator` rebuilds a statement or an expression bottom-up and shares every subtree it leaves
unchanged, so a pass that rewrites a few nodes allocates only along their paths. The schedule
primitives, the lowering passes and the code generators all rewrite through it.
"""

from __future__ import annotations

import dataclasses

from . import tir
from .tir_arith import make_cast

__all__ = ["IRMutator", "substitute"]


class IRMutator:
    """Rebuilds a statement or an expression bottom-up, sharing unchanged subtrees.

    Override `visit_expr` / `visit_stmt` (call the ``super()`` version for the default) or
    `visit_buffer` (every buffer a load, a store or an `Allocate` mentions goes through it)."""

    # ---- expressions
    def visit_expr(self, e):
        if isinstance(e, (tir.Var, tir.IntImm, tir.FloatImm, tir.StringImm)):
            return e
        if isinstance(e, tir.BinaryOp):
            a, b = self.visit_expr(e.a), self.visit_expr(e.b)
            if a is e.a and b is e.b:
                return e
            return type(e)(e.dtype, a, b)
        if isinstance(e, tir.BufferLoad):
            buf = self.visit_buffer(e.buffer)
            idx = [self.visit_expr(i) for i in e.indices]
            if buf is e.buffer and all(x is y for x, y in zip(idx, e.indices)):
                return e
            return tir.BufferLoad(e.dtype, buf, idx, e.span)
        if isinstance(e, tir.Cast):
            v = self.visit_expr(e.value)
            return e if v is e.value else tir.Cast(e.dtype, v)
        if isinstance(e, tir.Not):
            a = self.visit_expr(e.a)
            return e if a is e.a else tir.Not(e.dtype, a)
        if isinstance(e, tir.Select):
            c, t, f = self.visit_expr(e.condition), self.visit_expr(e.true_value), self.visit_expr(e.false_value)
            if c is e.condition and t is e.true_value and f is e.false_value:
                return e
            return tir.Select(e.dtype, c, t, f)
        if isinstance(e, tir.Call):
            args = [self.visit_expr(a) if isinstance(a, tir.PrimExpr) else a for a in e.args]
            if all(x is y for x, y in zip(args, e.args)):
                return e
            return tir.Call(e.dtype, e.op, args)
        if isinstance(e, tir.Let):
            v, b = self.visit_expr(e.value), self.visit_expr(e.body)
            if v is e.value and b is e.body:
                return e
            return tir.Let(e.dtype, e.var, v, b)
        if isinstance(e, tir.Ramp):
            b, s = self.visit_expr(e.base), self.visit_expr(e.stride)
            return e if b is e.base and s is e.stride else tir.Ramp(e.dtype, b, s, e.lanes)
        if isinstance(e, tir.Broadcast):
            v = self.visit_expr(e.value)
            return e if v is e.value else tir.Broadcast(e.dtype, v, e.lanes)
        raise NotImplementedError(f"lowering: unsupported expression {type(e).__name__}")

    def visit_buffer(self, buf):
        return buf

    # ---- statements
    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore):
            buf = self.visit_buffer(s.buffer)
            v = self.visit_expr(s.value)
            idx = [self.visit_expr(i) for i in s.indices]
            if buf is s.buffer and v is s.value and all(x is y for x, y in zip(idx, s.indices)):
                return s
            return tir.BufferStore(buf, v, idx, s.span)
        if isinstance(s, tir.SeqStmt):
            seq = [self.visit_stmt(x) for x in s.seq]
            if all(x is y for x, y in zip(seq, s.seq)):
                return s
            return tir.seq(seq)
        if isinstance(s, tir.For):
            lo, ext, body = self.visit_expr(s.min), self.visit_expr(s.extent), self.visit_stmt(s.body)
            if lo is s.min and ext is s.extent and body is s.body:
                return s
            return dataclasses.replace(s, min=lo, extent=ext, body=body)
        if isinstance(s, tir.IfThenElse):
            c = self.visit_expr(s.condition)
            t = self.visit_stmt(s.then_case)
            f = self.visit_stmt(s.else_case) if s.else_case is not None else None
            if c is s.condition and t is s.then_case and f is s.else_case:
                return s
            return tir.IfThenElse(c, t, f)
        if isinstance(s, tir.LetStmt):
            v, b = self.visit_expr(s.value), self.visit_stmt(s.body)
            return s if v is s.value and b is s.body else tir.LetStmt(s.var, v, b)
        if isinstance(s, tir.AssertStmt):
            c, m, b = self.visit_expr(s.condition), s.message, self.visit_stmt(s.body)
            return s if c is s.condition and b is s.body else tir.AssertStmt(c, m, b)
        if isinstance(s, tir.While):
            c, b = self.visit_expr(s.condition), self.visit_stmt(s.body)
            return s if c is s.condition and b is s.body else tir.While(c, b)
        if isinstance(s, tir.Evaluate):
            v = self.visit_expr(s.value)
            return s if v is s.value else tir.Evaluate(v)
        if isinstance(s, tir.AttrStmt):
            v, b = self.visit_expr(s.value), self.visit_stmt(s.body)
            return s if v is s.value and b is s.body else tir.AttrStmt(s.node, s.attr_key, v, b)
        if isinstance(s, tir.DeclBuffer):
            buf, b = self.visit_buffer(s.buffer), self.visit_stmt(s.body)
            return s if buf is s.buffer and b is s.body else tir.DeclBuffer(buf, b)
        if isinstance(s, tir.Allocate):
            buf, b = self.visit_buffer(s.buffer), self.visit_stmt(s.body)
            return s if buf is s.buffer and b is s.body else tir.Allocate(buf, b, s.storage)
        if isinstance(s, tir.BlockRealize):
            vals = [self.visit_expr(v) for v in s.iter_values]
            pred = self.visit_expr(s.predicate)
            block = self.visit_stmt(s.block)
            if block is s.block and pred is s.predicate and all(x is y for x, y in zip(vals, s.iter_values)):
                return s
            return tir.BlockRealize(vals, pred, block)
        if isinstance(s, tir.Block):
            body = self.visit_stmt(s.body)
            init = self.visit_stmt(s.init) if s.init is not None else None
            if body is s.body and init is s.init:
                return s
            return dataclasses.replace(s, body=body, init=init)
        raise NotImplementedError(f"lowering: unsupported statement {type(s).__name__}")


class _Substituter(IRMutator):
    def __init__(self, mapping: dict) -> None:
        self.mapping = mapping

    def visit_expr(self, e):
        if isinstance(e, tir.Var):
            new = self.mapping.get(e, e)
            # An int32 loop variable standing for an int64 block variable (TE stages mixing index
            # types, inlined into each other) is cast, so the result stays well typed.
            if (new is not e and isinstance(new, tir.PrimExpr) and new.dtype != e.dtype
                    and tir.is_int(new.dtype) and tir.is_int(e.dtype)):
                return make_cast(new, e.dtype)
            return new
        return super().visit_expr(e)


def substitute(node, mapping: dict):
    """``node`` (a statement or an expression) with the Vars of ``mapping`` replaced."""
    if not mapping:
        return node
    sub = _Substituter(mapping)
    return sub.visit_expr(node) if isinstance(node, tir.PrimExpr) else sub.visit_stmt(node)
