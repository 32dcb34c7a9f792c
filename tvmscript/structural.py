"""Structural equality of IR: same program, up to the identity (and names) of variables.

Variables (`tir.Var`, `relax.Var`), buffers and global vars are matched by position of
definition: the first time a pair is compared they are bound to each other, and every later
comparison must agree with that binding. Everything else is compared field by field.
"""

from __future__ import annotations

import dataclasses
import sys

from . import ir, relax, tir

# Fields that are bookkeeping, not program: they never take part in equality.
_IGNORED_FIELDS = frozenset(("span", "comments", "name", "name_hint"))
_BINDABLE = (tir.Var, tir.Buffer, relax.Var)


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

    def equal(self, a, b) -> bool:
        self.mapping.clear()
        self.reverse.clear()
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
                    kb = keys_b[i]
                    if not self._eq(ka, kb, path) or not self._eq(va, b[kb], f"{path}[{i}]"):
                        return False
            return True
        if _is_ndarray(a):
            np = sys.modules["numpy"]
            return (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)) or self._fail(path)
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
        for f in dataclasses.fields(a):
            if f.name in _IGNORED_FIELDS:
                continue
            if not self._eq(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}"):
                return False
        return True
