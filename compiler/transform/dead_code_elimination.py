"""DeadCodeElimination: drop dataflow bindings nobody uses and functions nobody reaches.

Why: fusion and constant folding leave behind bindings whose values are no longer read and
PrimFuncs no call refers to; removing them keeps the printed module and the compiled
executable to what the program needs. Only dataflow blocks are pruned (they are pure by
construction); entry functions are the public ones (no ``private``) or those named in
``entry_functions``. Running it again finds nothing more to remove.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax

from ._common import copy_module, global_vars_used, replace_fields, var_use_counts


def _prune_block(block: relax.DataflowBlock, live_after: dict) -> relax.DataflowBlock:
    bindings = list(block.bindings)
    live = dict(live_after)
    for v in block.outputs:
        live[v] = live.get(v, 0) + 1
    kept = []
    for b in reversed(bindings):
        if live.get(b.var, 0) == 0 and b.var not in block.outputs and isinstance(b.var, relax.DataflowVar):
            continue
        kept.append(b)
        for v, n in var_use_counts(b).items():
            live[v] = live.get(v, 0) + n
    kept.reverse()
    if len(kept) == len(bindings):
        return block
    return replace_fields(block, bindings=kept)


def remove_unused_bindings(func: relax.Function) -> relax.Function:
    body = func.body
    changed = True
    blocks = list(body.blocks)
    while changed:
        changed = False
        for i, block in enumerate(blocks):
            if not isinstance(block, relax.DataflowBlock):
                continue
            rest = relax.SeqExpr(blocks[:i] + blocks[i + 1:], body.body)
            new = _prune_block(block, var_use_counts(rest))
            if new is not block:
                blocks[i] = new
                changed = True
    if all(a is b for a, b in zip(blocks, body.blocks)):
        return func
    return replace_fields(func, body=replace_fields(body, blocks=blocks))


def _is_entry(gv, func, entries) -> bool:
    if entries is not None:
        return gv.name_hint in entries
    return not getattr(func, "private", False)


class DeadCodeElimination:
    """``IRModule -> IRModule``: unused dataflow bindings and unreachable functions removed."""

    def __init__(self, entry_functions=None, bindings: bool = True):
        self.entry_functions = entry_functions
        self.bindings = bindings  # False: only remove unreachable functions

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        new = copy_module(mod)
        for gv, func in list(new.functions.items()):
            if self.bindings and isinstance(func, relax.Function):
                new[gv] = remove_unused_bindings(func)
        # reachability from the entry functions
        work = [gv for gv, f in new.functions.items() if _is_entry(gv, f, self.entry_functions)]
        reached = set(work)
        while work:
            gv = work.pop()
            func = new.functions[gv]
            if not isinstance(func, relax.Function):
                continue
            for g in global_vars_used(func):
                if g in new.functions and g not in reached:
                    reached.add(g)
                    work.append(g)
        if not reached:  # nothing is an entry: leave the module as it is
            return new
        for gv in list(new.functions):
            if gv not in reached:
                del new[gv]
        return new
