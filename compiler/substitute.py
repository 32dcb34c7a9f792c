"""Substitution of variables in TIR expressions (used by analyses and passes)."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir


def substitute_expr(e, mapping: dict):
    """``e`` with every Var in ``mapping`` replaced; shares unchanged subtrees."""
    if not mapping:
        return e
    if isinstance(e, tir.Var):
        return mapping.get(e, e)
    if isinstance(e, (tir.IntImm, tir.FloatImm, tir.StringImm)):
        return e
    if isinstance(e, tir.BufferLoad):
        new = [substitute_expr(i, mapping) for i in e.indices]
        if all(x is y for x, y in zip(new, e.indices)):
            return e
        return tir.BufferLoad(e.dtype, e.buffer, new, e.span)
    if dataclasses.is_dataclass(e):
        changes = {}
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, tir.PrimExpr):
                nv = substitute_expr(v, mapping)
                if nv is not v:
                    changes[f.name] = nv
            elif isinstance(v, list) and v and isinstance(v[0], tir.PrimExpr):
                nv = [substitute_expr(x, mapping) for x in v]
                if any(x is not y for x, y in zip(nv, v)):
                    changes[f.name] = nv
        if changes:
            return dataclasses.replace(e, **changes)
    return e
