"""What several primitive families share: loop ranges in scope, substituting loop variables
into block bindings and simplifying them, block iterator kinds, and access-region inference."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import Canonical
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_visitor import vars_in

from .tree import FuncIndex, stmt_children

__all__ = ["loop_ranges_above", "rewrite_bindings", "iter_kinds_of_loop", "int_imm", "const_value",
           "blocks_under", "quoted_name", "record_call", "LoopRangeMutator"]


def int_imm(value: int, dtype: str) -> tir.IntImm:
    return tir.IntImm(dtype, int(value))


def const_value(e):
    """The Python int of an IntImm (or int), else None."""
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if isinstance(e, tir.IntImm):
        return e.value
    return None


def quoted_name(realize) -> str:
    """The name of ``realize``'s block in quotes, as the error messages name a block."""
    return f"'{realize.block.name}'"


def record_call(sch, name: str, items: list, result=None) -> None:
    """Trace a primitive call as TVM prints it, for the primitives the decorator does not record
    (so that the trace shows TVM's normalized arguments); nested calls are not traced."""
    if sch._depth == 1:
        sch.trace.append(name, items, result)


def loop_ranges_above(index: FuncIndex, s) -> dict:
    """Var -> (min, extent) of the loops around ``s`` (and ``s`` itself when it is a loop)."""
    out = {}
    chain = [s] + index.ancestors(s)
    for a in chain:
        if isinstance(a, tir.For):
            out[a.loop_var] = (a.min, a.extent)
    return out


class LoopRangeMutator(IRMutator):
    """An IRMutator that keeps ``self.ranges`` (Var -> (min, extent), set by the subclass) up
    to date with the loops it is inside: each For's range is added while its body is visited,
    then what the loop variable had before is put back."""

    ranges: dict

    def visit_stmt(self, s):
        if isinstance(s, tir.For):
            saved = self.ranges.get(s.loop_var)
            self.ranges[s.loop_var] = (s.min, s.extent)
            out = super().visit_stmt(s)
            self._restore(s.loop_var, saved)
            return out
        return super().visit_stmt(s)

    def _restore(self, var, saved) -> None:
        if saved is None:
            self.ranges.pop(var, None)
        else:
            self.ranges[var] = saved


class _BindingRewriter(LoopRangeMutator):
    """Substitutes loop variables in block bindings and predicates, then simplifies them with
    the ranges of the loops enclosing each block."""

    def __init__(self, mapping: dict, ranges: dict, extra_predicate=None) -> None:
        self.mapping = mapping
        self.ranges = dict(ranges)
        self.extra_predicate = extra_predicate

    def visit_stmt(self, s):
        if isinstance(s, tir.BlockRealize):
            values = [self.binding(v) for v in s.iter_values]
            pred = substitute(s.predicate, self.mapping)
            if self.extra_predicate is not None:
                pred = self.extra_predicate if tir.is_const_int(pred, 1) else tir.And("bool", pred, self.extra_predicate)
            # Predicates are substituted, not simplified: TVM prints them as they come out.
            return tir.BlockRealize(values, pred, s.block)
        if isinstance(s, tir.Block):
            return s  # bindings of nested blocks refer to this block's iterators, not the loops
        return super().visit_stmt(s)

    def visit_expr(self, e):
        if isinstance(e, tir.Var):
            return self.mapping.get(e, e)
        return super().visit_expr(e)

    def binding(self, value):
        """``value`` with the mapping applied, in TVM's IterMapSimplify form: the whole is
        flattened when it is one fused iterator (``j_0 * 4 + j_1_0 * 2 + j_1_1``); otherwise a
        loop replaced by several (a split) stays a parenthesized group
        (``i_0 * 128 + (ax0_0 * 128 + ax0_1)``)."""
        flat = Canonical(self.ranges, keep_marks=True)
        out = flat.simplify(substitute(value, self.mapping))
        groups = {v: e for v, e in self.mapping.items() if isinstance(e, (tir.Add, tir.Sub)) and v in vars_in([value])}
        if not groups or not tir.is_int(value.dtype) or isinstance(value, tir.Var):
            return out
        if flat.is_fused_chain(flat.to_sum(out)):
            return out
        holes = {v: tir.Var(v.dtype, v.name) for v in groups}
        outer = flat.simplify(substitute(value, holes))
        return substitute(outer, {holes[v]: flat.simplify(e) for v, e in groups.items()})


def rewrite_bindings(stmt, mapping: dict, ranges: dict, extra_predicate=None):
    """``stmt`` with the Vars of ``mapping`` replaced in the bindings (and predicates) of the
    blocks it contains, and in loop bounds and non-block statements; each binding is simplified
    with ``ranges`` (the loops above ``stmt``) plus the loops inside it. ``extra_predicate``
    is and-ed onto every block's predicate (a split that does not divide)."""
    return _BindingRewriter(mapping, ranges, extra_predicate).visit_stmt(stmt)


def iter_kinds_of_loop(realize: tir.BlockRealize, loop_var: tir.Var) -> set:
    """Kinds ("S", "R", ...) of the block iterators whose binding uses ``loop_var``."""
    kinds = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if loop_var in vars_in([value]):
            kinds.add(iv.kind)
    return kinds


def blocks_under(s) -> list:
    """Every BlockRealize below ``s`` (nested ones included), in program order."""
    out = []

    def walk(x):
        if isinstance(x, tir.BlockRealize):
            out.append(x)
        for c in stmt_children(x):
            walk(c)

    for c in stmt_children(s):
        walk(c)
    return out


def with_unique_block_names(body):
    """``body`` with repeated block names made unique (``base_1``, ``base_2``, ... by
    `tree.fresh_name`, inner blocks first); ``body`` itself when its names are unique.

    Why: schedules find blocks by name (a `BlockRV` holds one), so two blocks of one name, as
    hand-written TIR or two modules merged may have, would be one block to them."""
    from .tree import fresh_name

    realizes = ([body] if isinstance(body, tir.BlockRealize) else []) + blocks_under(body)
    names = [r.block.name for r in realizes]
    if len(set(names)) == len(names):
        return body
    used: set = set()

    class R(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.BlockRealize):
                name = fresh_name(s.block.name, used)
                if name != s.block.name:
                    s = dataclasses.replace(s, block=dataclasses.replace(s.block, name=name))
            return s

    return R().visit_stmt(body)
