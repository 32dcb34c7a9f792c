"""Every ``T.*``, ``R.*`` and ``I.*`` name the language knows, read from the tables the parser
and compiler dispatch on, so completion, hover and signature help never keep a second list:

- Relax ops: the op registry (`tvmscript/ir/op/registry.py`: arguments, attributes with defaults);
- ``R.*`` calls that are not ops: `relax_calls.RELAX_CALLS`, the struct-info constructors
  (`relax_sinfo.SINFO_NAMES`) and TVM's Python helpers (`tvmscript/ir/op/api.HELPERS`);
- ``T.*``: the intrinsics (`tvmscript.ir.tir.INTRINSICS`), expression calls (`tir_calls.EXPR_CALLS`),
  scalar types (`tir_names.DTYPE_NAMES`), loop kinds and block axes (`LOOP_KINDS`,
  `AXIS_KINDS`);
- the statement forms the builders recognise by name (``T.grid``, ``T.block``,
  ``R.dataflow``, ``I.ir_module``...): the dialect-name strings in the builders' own code.
"""

from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass, field
from functools import lru_cache

_DIALECT_NAME = re.compile(r"^[TRI]\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


@dataclass
class Entry:
    """One known name: ``kind`` is "function", "type" or "module" (a namespace such as
    ``R.nn``); ``params`` the parameters as a signature shows them (``out_dtype="void"``)."""

    name: str
    kind: str
    params: list[str] | None = None
    doc: str = ""
    source: str = ""  # which table it comes from, for hover

    @property
    def signature(self) -> str:
        if self.params is None:
            return self.name
        return f"{self.name}({', '.join(self.params)})"


@dataclass
class NameTable:
    entries: dict[str, Entry] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)

    def add(self, entry: Entry, replace: bool = False) -> None:
        if entry.name in self.entries and not replace:
            old = self.entries[entry.name]
            if old.params is None and entry.params is not None:
                old.params = entry.params
            if not old.doc:
                old.doc = entry.doc
            return
        self.entries[entry.name] = entry
        parts = entry.name.split(".")
        for i in range(1, len(parts)):
            parent, child = ".".join(parts[:i]), ".".join(parts[: i + 1])
            kids = self.children.setdefault(parent, [])
            if child not in kids:
                kids.append(child)
            if i < len(parts) - 1 and child not in self.entries:
                self.entries[child] = Entry(child, "module", doc=f"namespace `{child}`")

    def get(self, name: str) -> Entry | None:
        return self.entries.get(name)

    def members(self, prefix: str) -> list[Entry]:
        """The names directly below ``prefix`` (``R.nn`` and ``R.add`` below ``R``)."""
        return [self.entries[n] for n in self.children.get(prefix, ())]


def format_default(value) -> str:
    """A default as TVMScript writes it: strings in double quotes."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


@lru_cache(maxsize=1)
def name_table() -> NameTable:
    table = NameTable()
    for root, doc in (("T", "TensorIR (`tvm.script.tir`)"), ("R", "Relax (`tvm.script.relax`)"), ("I", "IRModule (`tvm.script.ir`)")):
        table.entries[root] = Entry(root, "module", doc=doc)
    _relax_ops(table)
    _relax_calls(table)
    _tir_names(table)
    _builder_names(table)
    return table


def op_entry(op) -> Entry:
    params = [a.name + ("=None" if a.optional else "") for a in op.params]
    params += [f"{a.name}={format_default(a.default)}" for a in op.attrs]
    doc = f"Relax op `{op.name}` (fusion pattern: {op.pattern})"
    result = _first_paragraph(op.infer.__doc__)
    if result:
        doc += f"\n\nResult: {result}"
    return Entry(op.script_name, "function", params, doc, "op")


def _relax_ops(table: NameTable) -> None:
    from ..ir.op import all_ops

    for op in all_ops().values():
        table.add(op_entry(op))


def _relax_calls(table: NameTable) -> None:
    from ..ir.op.api import HELPERS
    from ..parser.relax_sinfo import SINFO_NAMES
    from ..parser.relax_calls import RELAX_CALLS

    for name, handler in RELAX_CALLS.items():
        table.add(Entry(name, "function", handler_params(name, handler), _first_paragraph(handler.__doc__), "call"))
    for name in SINFO_NAMES:
        table.add(Entry(name, "type", None, "Relax struct info", "sinfo"))
    for name, fn in HELPERS.items():
        try:
            params = [str(p) for p in inspect.signature(fn).parameters.values()]
        except (TypeError, ValueError):
            params = None
        table.add(Entry("R." + name, "function", params, _first_paragraph(fn.__doc__), "helper"))


def _tir_names(table: NameTable) -> None:
    from ..ir.tir import INTRINSICS
    from ..parser.tir_names import AXIS_KINDS, DTYPE_NAMES, LOOP_KINDS
    from ..parser.tir_calls import EXPR_CALLS

    for name, (op, nargs) in INTRINSICS.items():
        params = ["x"] if nargs == 1 else ["a", "b"] if nargs == 2 else ["*args"]
        table.add(Entry("T." + name, "function", params, f"TIR intrinsic `{op}`", "intrinsic"))
    for name, handler in EXPR_CALLS.items():
        if _DIALECT_NAME.match(name):
            table.add(Entry(name, "function", handler_params(name, handler), _first_paragraph(handler.__doc__), "call"))
    for dtype in sorted(DTYPE_NAMES):
        table.add(Entry("T." + dtype, "type", ["value"], f"the scalar type `{dtype}`", "dtype"))
    for name, kind in LOOP_KINDS.items():
        if name.startswith("T."):
            table.add(Entry(name, "function", None, f"a {kind} loop", "loop"))
    for name, kind in AXIS_KINDS.items():
        table.add(Entry(name, "function", ["dom", "binding"], f"a block iterator of kind {kind}", "axis"))


def _builder_names(table: NameTable) -> None:
    """The dialect names the builders test for in their code (statement forms, decorators)."""
    from ..parser import (arguments, builder, comments, context, relax_bindings, relax_builder, relax_expressions,
                          relax_sinfo, tir_attrs, tir_blocks, tir_buffers, tir_builder, tir_expressions, tir_frames,
                          tir_names, tir_statements)

    # Each builder with the modules it is split into; a name is documented as read by the first.
    tir = (tir_builder, tir_statements, tir_blocks, tir_buffers, tir_attrs, tir_expressions, tir_names, tir_frames)
    relax = (relax_builder, relax_bindings, relax_sinfo, relax_expressions)
    for family in ((builder, arguments, comments, context), tir, relax):
        names = set().union(*(_code_names(module) for module in family))
        for name in sorted(names):
            table.add(Entry(name, "function", None, f"read by `{family[0].__name__}`", "builder"))


def _code_names(module) -> set[str]:
    names: set[str] = set()
    seen: set[int] = set()

    def scan(code: types.CodeType) -> None:
        if id(code) in seen:
            return
        seen.add(id(code))
        for c in code.co_consts:
            if isinstance(c, str) and _DIALECT_NAME.match(c):
                names.add(c)
            elif isinstance(c, (tuple, frozenset)):
                for x in c:
                    if isinstance(x, str) and _DIALECT_NAME.match(x):
                        names.add(x)
            elif isinstance(c, types.CodeType):
                scan(c)

    for value in vars(module).values():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            scan(value.__code__)
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr in vars(value).values():
                fn = getattr(attr, "__func__", attr)
                if isinstance(fn, types.FunctionType):
                    scan(fn.__code__)
        elif isinstance(value, dict):
            for k in value:
                if isinstance(k, str) and _DIALECT_NAME.match(k):
                    names.add(k)
    return names


def handler_params(name: str, handler) -> list[str] | None:
    """A call handler's parameters: the names it binds its arguments to (the tuple of names
    it passes `bind_arguments`), else the signature its docstring writes (``T.Ramp(base,
    stride, lanes)``)."""
    code = getattr(handler, "__code__", None)
    if code is not None:
        for c in code.co_consts:
            if isinstance(c, tuple) and len(c) > 1 and all(isinstance(s, str) and s.isidentifier() for s in c):
                return list(c)
    found = _doc_params(name, handler.__doc__ or "")
    if found is None and code is not None:
        found = _bound_names(code)
    return found


_PARAM_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def _bound_names(code) -> list[str] | None:
    """The names a two-argument handler binds (``["a", "b"]`` compiles to separate constants):
    the run of plain lower-case identifiers among its constants."""
    names: list[str] = []
    for c in code.co_consts:
        if isinstance(c, str) and _PARAM_NAME.match(c):
            names.append(c)
        elif isinstance(c, str) and names:
            break
    return names or None


def _doc_params(name: str, doc: str) -> list[str] | None:
    short = name.rsplit(".", 1)[-1]
    m = re.search(rf"``(?:[\w.]*\.)?{re.escape(short)}\(", doc)
    if not m:
        return None
    depth, start, parts = 0, m.end(), []
    i = start
    while i < len(doc):
        ch = doc[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                parts.append(doc[start:i])
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(doc[start:i])
            start = i + 1
        i += 1
    else:
        return None
    params = [p.strip() for p in parts if p.strip()]
    return params


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    para = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return " ".join(para.split())


def signature_of(name: str) -> Entry | None:
    return name_table().get(_canonical(name))


def _canonical(name: str) -> str:
    from ..parser.arguments import CALLEE_ALIASES

    alias = CALLEE_ALIASES.get(name)
    return alias if alias and alias in name_table().entries else name
