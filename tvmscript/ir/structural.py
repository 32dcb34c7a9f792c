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
import hashlib
import struct
import sys

from ..runtime.tensor_base import TensorBase
from . import relax, tir
from .module import GlobalVar, IRModule

# Fields that are bookkeeping, not program: they never take part in equality.
_IGNORED_FIELDS = frozenset(("span", "comments", "name", "name_hint"))
_BINDABLE = (tir.Var, tir.Buffer, relax.Var)

# The fields where variables are defined, per node class.
_DEFINING_FIELDS = {
    tir.PrimFunc: ("params", "buffer_map"),
    tir.For: ("loop_var",),
    tir.IterVar: ("var",),
    tir.LetStmt: ("var",),
    tir.DeclBuffer: ("buffer",),
    tir.CommReducer: ("lhs", "rhs"),
    tir.Let: ("var",),
    tir.Block: ("alloc_buffers", "match_buffers"),
    relax.Function: ("params",),
    relax.VarBinding: ("var",),
    relax.MatchCast: ("var", "struct_info"),
}


def _as_array(x):
    """A tvms tensor's NumPy array (importers keep weights as tensors in function attributes),
    else `x` itself."""
    return x.numpy() if isinstance(x, TensorBase) else x


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
        if isinstance(a, IRModule) or isinstance(b, IRModule):
            if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
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
        a, b = _as_array(a), _as_array(b)
        if _is_ndarray(a):
            np = sys.modules["numpy"]
            if a.dtype != b.dtype or a.shape != b.shape:
                return self._fail(path)
            same_nan = a.dtype.kind in "fc"  # a constant holding NaN equals its own copy
            return bool(np.array_equal(a, b, equal_nan=same_nan)) or self._fail(path)
        if isinstance(a, GlobalVar):
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


# ----------------------------------------------------------------------------- hashing

_IGNORED_FIELDS = frozenset(("span", "comments", "name", "name_hint"))
_BINDABLE = (tir.Var, tir.Buffer, relax.Var)


def structural_hash(obj) -> str:
    """A SHA-256 hex digest of ``obj``'s structure, consistent with
    `tvmscript.ir.structural_equal`: structurally equal objects get equal hashes. Variables
    and buffers are numbered in the order they are first met, so their names and identities do
    not matter, only where each is defined and used."""
    h = hashlib.sha256()
    ids: dict = {}
    put = h.update

    def tok(s: str) -> None:
        put(s.encode("utf-8", "surrogatepass"))
        put(b"\x00")

    def visit(x) -> None:
        if x is None:
            tok("N")
        elif isinstance(x, bool):
            tok("T" if x else "F")
        elif isinstance(x, int):
            tok(f"i{x}")
        elif isinstance(x, float):
            tok("f" + (struct.pack("<d", x).hex() if x == x else "nan"))
        elif isinstance(x, str):
            tok("s" + x)
        elif isinstance(x, (list, tuple)):
            tok(f"L{len(x)}")
            for y in x:
                visit(y)
        elif isinstance(x, dict):
            tok(f"D{len(x)}")
            prim = [(k, v) for k, v in x.items() if isinstance(k, (str, int, float, bool))]
            other = [(k, v) for k, v in x.items() if not isinstance(k, (str, int, float, bool))]
            for k, v in sorted(prim, key=lambda kv: (type(kv[0]).__name__, repr(kv[0]))):
                visit(k)
                visit(v)
            for k, v in other:
                visit(k)
                visit(v)
        elif isinstance(x, IRModule):
            names = sorted(gv.name_hint for gv in x.functions)
            tok("M")
            visit(names)
            visit(x.attrs)
            for n in names:
                visit(x[n])
        elif isinstance(x, GlobalVar):
            tok("G" + x.name_hint)
        elif isinstance(x, _BINDABLE):
            key = id(x)
            if key in ids:
                tok(f"R{ids[key]}")
            else:
                ids[key] = len(ids)
                tok("V" + type(x).__name__)
                fields(x)
        elif dataclasses.is_dataclass(x):
            tok("C" + type(x).__name__)
            fields(x)
        elif (array := _as_array(x)) is not x:
            visit(array)
        elif type(x).__module__ == "numpy" and hasattr(x, "tobytes"):
            tok(f"A{x.dtype}{x.shape}")
            put(x.tobytes())
        else:
            tok("O" + type(x).__name__ + repr(x))

    def fields(x) -> None:
        for f in dataclasses.fields(x):
            if f.name in _IGNORED_FIELDS:
                continue
            visit(getattr(x, f.name))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        visit(obj)
    finally:
        sys.setrecursionlimit(old)
    return h.hexdigest()


def structural_equal(a, b, map_free_vars: bool = False) -> bool:
    """Whether two IR objects are the same program up to the names of variables."""
    return StructuralEqual(map_free_vars).equal(a, b)


def assert_structural_equal(a, b, map_free_vars: bool = False) -> None:
    checker = StructuralEqual(map_free_vars)
    if not checker.equal(a, b):
        raise AssertionError(f"structural mismatch at {checker.mismatch_path or '<root>'}")
