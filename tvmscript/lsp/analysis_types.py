"""Types for the language server, from the IR the parser builds: a Relax variable's struct
info, a TensorIR buffer's shape/dtype/scope, a block's iterators.

The IR keeps the source position of what it declares (``relax.Var.span`` at the variable's
definition, ``tir.Buffer.span`` at its annotation or allocation call, ``tir.Block.span`` at
``T.block(...)``), so a definition found on the syntax tree finds its IR object by position.

When the text does not build, the last analysis of the same file that did is kept
(`remember` / `recall`): a definition then finds its type by (function, name, how many
definitions of that name came before it), which survives lines moving above it.
"""

from __future__ import annotations

import gc
from collections import OrderedDict

from .. import relax, tir


class TypeIndex:
    """IR objects by the (0-based line, character) of their source span."""

    def __init__(self) -> None:
        self.relax_vars: dict[tuple[int, int], relax.Var] = {}
        self.buffers: dict[tuple[int, int], tir.Buffer] = {}
        self.blocks: dict[tuple[int, int], tir.Block] = {}
        self.functions: dict[str, object] = {}
        self.node = None  # the IR itself (the language server formats from it)

    def add_function(self, name: str, func) -> None:
        self.functions[name] = func
        if isinstance(func, relax.Function):
            self._relax_function(func)
        elif isinstance(func, tir.PrimFunc):
            self._prim_func(func)

    # ---- Relax

    def _relax_var(self, var) -> None:
        span = getattr(var, "span", None)
        if span is not None:
            self.relax_vars[(span.line - 1, span.col - 1)] = var

    def _relax_function(self, func: relax.Function) -> None:
        for p in func.params:
            self._relax_var(p)
        self._seq(func.body)

    def _seq(self, seq) -> None:
        if not isinstance(seq, relax.SeqExpr):
            self._value(seq)
            return
        for block in seq.blocks:
            for binding in block.bindings:
                self._relax_var(binding.var)
                self._value(binding.value)

    def _value(self, value) -> None:
        if isinstance(value, relax.Function):
            self._relax_function(value)
        elif isinstance(value, relax.If):
            self._seq(value.true_branch)
            self._seq(value.false_branch)
        elif isinstance(value, relax.SeqExpr):
            self._seq(value)

    # ---- TensorIR

    def _buffer(self, buf) -> None:
        span = getattr(buf, "span", None)
        if span is not None:
            self.buffers.setdefault((span.line - 1, span.col - 1), buf)

    def _prim_func(self, func: tir.PrimFunc) -> None:
        for buf in func.buffer_map.values():
            self._buffer(buf)
        stack = [func.body]
        while stack:
            s = stack.pop()
            if s is None:
                continue
            if isinstance(s, tir.Block):
                span = getattr(s, "span", None)
                if span is not None:
                    self.blocks[(span.line - 1, span.col - 1)] = s
                for buf in s.alloc_buffers:
                    self._buffer(buf)
                for m in s.match_buffers:
                    self._buffer(m.buffer)
            elif isinstance(s, tir.DeclBuffer):
                self._buffer(s.buffer)
            for attr in ("body", "then_case", "else_case", "block", "init"):
                child = getattr(s, attr, None)
                if isinstance(child, tir.Stmt):
                    stack.append(child)
            seq = getattr(s, "seq", None)
            if isinstance(seq, list):
                stack.extend(seq)


def build_types(stmts, comments, text: str, filename: str) -> tuple[TypeIndex | None, Exception | None]:
    """The IR of a parsed file, indexed; (None, the error) when it does not build."""
    from ..parser.builder import build
    from .. import ir

    enabled = gc.isenabled()
    gc.disable()
    try:
        result = build(stmts, comments, text, filename)
    except Exception as err:  # noqa: BLE001 - any failure means: no types from this text
        return None, err
    finally:
        if enabled:
            gc.enable()
    index = TypeIndex()
    index.node = result
    if isinstance(result, ir.IRModule):
        for gv, func in result.functions.items():
            index.add_function(gv.name_hint, func)
    elif isinstance(result, (relax.Function, tir.PrimFunc)):
        index.add_function(_single_name(stmts), result)
    return index, None


def _single_name(stmts) -> str:
    for s in stmts:
        name = getattr(s, "name", None)
        if name:
            return name
    return "main"


# ----------------------------------------------------------------------------- last good build

_LAST_GOOD: "OrderedDict[str, tuple]" = OrderedDict()
_MAX_FILES = 16


def remember(filename: str, symbols, types: TypeIndex) -> None:
    _LAST_GOOD[filename] = (symbols, types)
    _LAST_GOOD.move_to_end(filename)
    while len(_LAST_GOOD) > _MAX_FILES:
        _LAST_GOOD.popitem(last=False)


def recall(filename: str):
    """(symbols, types) of the last text of ``filename`` that built, or None."""
    return _LAST_GOOD.get(filename)


def definition_key(d) -> tuple:
    """What identifies a definition across edits: its function, name, and how many
    definitions of that name precede it in its scope chain's function."""
    same = [x for x in d.scope.defs.get(d.name, ()) if x.kind == d.kind]
    nth = next((i for i, x in enumerate(same) if x is d), 0)
    return d.function, d.name, d.kind, _scope_path(d.scope), nth


def _scope_path(scope) -> tuple:
    path = []
    while scope is not None:
        path.append(scope.kind)
        scope = scope.parent
    return tuple(path)
