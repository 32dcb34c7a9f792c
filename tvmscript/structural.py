"""Structural equality of IR: same program, up to the identity (and names) of variables.

Variables (`tir.Var`, `relax.Var`) and buffers are matched at their definitions (function
parameters and the symbolic dims in their annotations, loop and block variables, bindings,
allocations): there a pair is bound to each other, and every later use must agree with that
binding. A variable used without a definition in the compared objects is *free*: free
variables are equal only to themselves, unless ``map_free_vars`` is set, in which case they
bind on first use too (TVM's semantics). Everything else is compared field by field.
"""

from __future__ import annotations

import dataclasses
import sys

from . import ir, relax, tir

# Fields that are bookkeeping, not program: they never take part in equality.
_IGNORED_FIELDS = frozenset(("span", "comments", "name", "name_hint"))
_BINDABLE = (tir.Var, tir.Buffer, relax.Var)

# The fields where variables are defined, per node class.
_DEFINING_FIELDS = {
    tir.PrimFunc: ("params", "buffer_map"),
    tir.For: ("loop_var",),
    tir.IterVar: ("var",),
    tir.LetStmt: ("var",),
    tir.Let: ("var",),
    tir.Block: ("alloc_buffers", "match_buffers"),
    relax.Function: ("params",),
    relax.VarBinding: ("var",),
    relax.MatchCast: ("var", "struct_info"),
}


def _is_ndarray(x) -> bool:
    # numpy is imported lazily (start-up time); an ndarray can only exist once it is.
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


class StructuralEqual:
    def __init__(self, map_free_vars: bool = False) -> None:
        self.map_free_vars = map_free_vars
        self.mapping: dict[int, object] = {}
        self.reverse: dict[int, object] = {}
        self.mismatch_path: str | None = None
        self._defining = 0  # > 0 while comparing a definition site

    def equal(self, a, b) -> bool:
        self.mapping.clear()
        self.reverse.clear()
        self._defining = 0
        return self._eq(a, b, "")

    def _fail(self, path: str) -> bool:
        if self.mismatch_path is None:
            self.mismatch_path = path or "<root>"
        return False

    def _eq(self, a, b, path: str) -> bool:
        if a is b:
            return True
        if isinstance(a, ir.IRModule) or isinstance(b, ir.IRModule):
            if not (isinstance(a, ir.IRModule) and isinstance(b, ir.IRModule)):
                return self._fail(path)
            names_a = sorted(gv.name_hint for gv in a.functions)
            names_b = sorted(gv.name_hint for gv in b.functions)
            if names_a != names_b:
                return self._fail(path + ".functions")
            for gv in a.functions:
                gb = b.get_global_var(gv.name_hint)
                self.mapping[id(gv)] = gb
                self.reverse[id(gb)] = gv
            if not self._eq(a.attrs, b.attrs, path + ".attrs"):
                return False
            return all(self._eq(a[n], b[n], f"{path}[{n!r}]") for n in names_a)
        if type(a) is not type(b):
            # Python bool vs int etc.
            return self._fail(path)
        if isinstance(a, (list, tuple)):
            if len(a) != len(b):
                return self._fail(path)
            return all(self._eq(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
        if isinstance(a, dict):
            if len(a) != len(b):
                return self._fail(path)
            keys_b = list(b.keys())
            for i, (ka, va) in enumerate(a.items()):
                if isinstance(ka, (str, int, float, bool)):
                    if ka not in b or not self._eq(va, b[ka], f"{path}[{ka!r}]"):
                        return self._fail(path)
                else:
                    # Keys already bound (e.g. a buffer_map's parameters) are looked up by their
                    # binding; others pair up in order.
                    kb = self.mapping.get(id(ka), keys_b[i])
                    if kb not in b:
                        return self._fail(path)
                    if not self._eq(ka, kb, path) or not self._eq(va, b[kb], f"{path}[{i}]"):
                        return False
            return True
        if _is_ndarray(a):
            np = sys.modules["numpy"]
            if a.dtype != b.dtype or a.shape != b.shape:
                return self._fail(path)
            same_nan = a.dtype.kind in "fc"  # a constant holding NaN equals its own copy
            return bool(np.array_equal(a, b, equal_nan=same_nan)) or self._fail(path)
        if isinstance(a, ir.GlobalVar):
            bound = self.mapping.get(id(a))
            if bound is not None:
                return bound is b or self._fail(path)
            return a.name_hint == b.name_hint or self._fail(path)
        if isinstance(a, _BINDABLE):
            bound = self.mapping.get(id(a))
            if bound is not None:
                return bound is b or self._fail(path)
            if id(b) in self.reverse:
                return self._fail(path)
            if not (self._defining or self.map_free_vars):
                return self._fail(path)  # two different free variables
            self.mapping[id(a)] = b
            self.reverse[id(b)] = a
            # Compare the definition itself (dtype, shape, struct info), names aside.
            return self._fields(a, b, path)
        if dataclasses.is_dataclass(a):
            return self._fields(a, b, path)
        if isinstance(a, float) and isinstance(b, float):
            return (a == b or (a != a and b != b)) or self._fail(path)
        return a == b or self._fail(path)

    def _fields(self, a, b, path: str) -> bool:
        defining = _DEFINING_FIELDS.get(type(a), ())
        # Definitions first: a block's allocations are used by its reads, writes and body.
        fields = sorted(dataclasses.fields(a), key=lambda f: f.name not in defining)
        for f in fields:
            if f.name in _IGNORED_FIELDS:
                continue
            is_def = f.name in defining
            self._defining += is_def
            try:
                same = self._eq(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            finally:
                self._defining -= is_def
            if not same:
                return False
        return True
