"""Hover texts: what the language server shows over a name. A ``T.``/``R.``/``I.`` name shows its
signature and documentation from the name table; a block its iterators; a definition its
declaration and what the built IR knows of it (a Relax variable's struct info, a buffer's shape,
dtype and scope, a loop's range and kind), from the syntax alone when the text did not build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..parser import ast
from . import analysis_tables as tables
from .symbols import callee_name

if TYPE_CHECKING:
    from .analysis import Analysis


def hover(a: Analysis, line: int, char: int) -> str | None:
    """The hover text (Markdown) of what is at ``line:char``: a dialect name, a block, a keyword
    argument, or a name with its definition; None over anything else."""
    occ = a.symbols.at(line, char)
    if occ is None:
        return None
    if occ.role == "dotted":
        return _dialect_hover(occ.full)
    if occ.role == "block":
        return _block_hover(a, occ.node)
    if occ.role == "kwarg":
        return _kwarg_hover(occ)
    if occ.definition is not None:
        return _definition_hover(a, occ.definition)
    return None


def _code(text: str) -> str:
    return f"```python\n{text}\n```"


def _dialect_hover(full: str) -> str | None:
    entry = tables.signature_of(full)
    if entry is None:
        return None
    if entry.kind == "module":
        return _code(entry.name) + (f"\n\n{entry.doc}" if entry.doc else "")
    return _code(entry.signature) + (f"\n\n{entry.doc}" if entry.doc else "")


def _kwarg_hover(occ) -> str | None:
    entry = tables.signature_of(occ.full) if occ.full else None
    if entry is None or not entry.params:
        return None
    for p in entry.params:
        if param_name(p) == occ.name:
            return _code(p) + f"\n\nparameter of `{entry.name}`"
    return None


def _definition_hover(a: Analysis, d) -> str | None:
    kind = d.kind
    if kind == "module":
        return _module_hover(a, d)
    if kind == "function":
        info = a.symbols.function_named(d.name)
        if info is None:
            return None
        return _code(function_header(a, info)) + f"\n\n{dialect_label(info.dialect)} function"
    if kind == "buffer":
        return _buffer_hover(a, d)
    if kind == "loop_var":
        return _loop_hover(a, d)
    if kind == "block_iter":
        return _block_iter_hover(a, d)
    if d.dialect == "relax":
        return _relax_var_hover(a, d)
    return _plain_hover(a, d)


def dialect_label(dialect: str) -> str:
    return {"relax": "Relax", "tir": "TensorIR"}.get(dialect, "Python")


def _module_hover(a: Analysis, d) -> str:
    names = ", ".join(f"`{f.name}`" for f in a.symbols.functions if f.scope.parent and f.scope.parent.kind == "class")
    count = sum(1 for f in a.symbols.functions if f.scope.parent and f.scope.parent.kind == "class")
    return _code(f"class {d.name}") + f"\n\nIRModule with {count} function{'s' if count != 1 else ''}: {names}"


def function_header(a: Analysis, info) -> str:
    node = info.node
    params = []
    for arg in node.args:
        text = arg.name
        if arg.annotation is not None:
            text += ": " + a.source(arg.annotation)
        if arg.default is not None:
            text += " = " + a.source(arg.default)
        params.append(text)
    ret = f" -> {a.source(node.returns)}" if node.returns is not None else ""
    decorators = "".join(f"@{a.source(dec)}\n" for dec in node.decorators)
    return f"{decorators}def {node.name}({', '.join(params)}){ret}"


def _relax_var_hover(a: Analysis, d) -> str:
    from ..printer import sinfo_text
    from .. import relax

    var = a.relax_var(d)
    role = "parameter" if d.kind == "parameter" else "variable"
    if var is not None:
        if isinstance(var, relax.DataflowVar):
            role = "dataflow variable"
        return _code(f"{d.name}: {sinfo_text(var.struct_info)}") + f"\n\nRelax {role}"
    if d.kind == "parameter" and d.value is not None:
        return _code(f"{d.name}: {a.source(d.value)}") + f"\n\nRelax {role}"
    return _plain_hover(a, d)


def _plain_hover(a: Analysis, d) -> str:
    node = d.node
    if isinstance(node, ast.Arg):
        text = d.name + (f": {a.source(node.annotation)}" if node.annotation is not None else "")
        return _code(text) + f"\n\n{dialect_label(d.dialect)} parameter"
    if isinstance(node, ast.AnnAssign):
        return _code(f"{d.name}: {a.source(node.annotation)}") + f"\n\n{dialect_label(d.dialect)} variable"
    if d.value is not None and d.count == 1:
        value = a.source(d.value)
        if len(value) > 80:
            value = value[:77] + "..."
        return _code(f"{d.name} = {value}") + f"\n\n{dialect_label(d.dialect)} variable"
    return _code(d.name) + f"\n\n{dialect_label(d.dialect)} variable"


def _buffer_hover(a: Analysis, d) -> str:
    from ..printer.tir_printer import TIRPrinter

    buf = a.buffer(d)
    if buf is None:
        decl = a.source(d.value) if d.value is not None else "T.Buffer(...)"
        return _code(f"{d.name}: {decl}") + "\n\nbuffer"
    p = TIRPrinter()
    return (_code(f"{d.name}: {p.buffer_decl(buf, 'T.Buffer', True)}")
            + f"\n\nbuffer: shape `{p.shape(buf.shape)}`, dtype `{buf.dtype}`, scope `{buf.scope}`")


def _loop_hover(a: Analysis, d) -> str:
    from ..parser.tir_names import LOOP_KINDS

    call = d.value
    name = callee_name(call) or ""
    kind = "serial" if name == "T.grid" else LOOP_KINDS.get(name, name or "loop")
    lo, hi, tag = "0", "?", None
    if isinstance(call, ast.Call):
        args = call.args
        if name == "T.grid":
            if d.index < len(args):
                hi = a.source(args[d.index])
        else:
            exprs = [x for x in args if not (isinstance(x, ast.Constant) and isinstance(x.value, str))]
            if len(exprs) == 1:
                hi = a.source(exprs[0])
            elif len(exprs) >= 2:
                lo, hi = a.source(exprs[0]), a.source(exprs[1])
            strings = [x.value for x in args if isinstance(x, ast.Constant) and isinstance(x.value, str)]
            strings += [kw.value.value for kw in call.keywords
                        if kw.arg == "thread" and isinstance(kw.value, ast.Constant)]
            tag = strings[0] if strings else None
    detail = f"kind: {kind}" + (f", thread `{tag}`" if tag else "")
    return _code(f"(loop variable) {d.name}: range({lo}, {hi})") + f"\n\n{detail}"


def _enclosing_block(a: Analysis, d):
    for info in _all_blocks(a.symbols.blocks):
        if info.kind == "block" and info.scope is d.scope:
            return info
    return None


def _all_blocks(blocks):
    for b in blocks:
        yield b
        yield from _all_blocks(b.children)


def _ir_block(a: Analysis, info):
    item = info.node.item
    pos = (item.line - 1, item.col - 1)
    if a.types is not None:
        return a.types.blocks.get(pos)
    return None


def _iter_rows(a: Analysis, info) -> list[tuple[str, str, str]]:
    """(name, kind letter, range) of a block's iterators: from the IR when it built, else from
    the ``T.axis`` declarations as written."""
    from ..printer.tir_printer import TIRPrinter

    block = _ir_block(a, info)
    if block is not None:
        p = TIRPrinter()
        rows = []
        for iv in block.iter_vars:
            lo = p.expr(iv.dom.min)
            hi = p.expr(iv.dom.min + iv.dom.extent) if not _is_zero(iv.dom.min) else p.expr(iv.dom.extent)
            rows.append((iv.var.name, iv.kind, f"range({lo}, {hi})"))
        return rows
    rows = []
    for defs in info.scope.defs.values() if info.scope is not None else ():
        for d in defs:
            if d.kind == "block_iter":
                letter, rng = _syntax_iter(a, d)
                rows.append((d.name, letter, rng))
    rows.sort(key=lambda r: r[0])
    return rows


def _is_zero(e) -> bool:
    return getattr(e, "value", None) == 0


def _syntax_iter(a: Analysis, d) -> tuple[str, str]:
    from ..parser.tir_names import AXIS_KINDS

    call = d.value
    name = callee_name(call) or ""
    if name == "T.axis.remap" and call.args and isinstance(call.args[0], ast.Constant):
        kinds = str(call.args[0].value)
        return (kinds[d.index] if d.index < len(kinds) else "?"), "range(?)"
    letter = AXIS_KINDS.get(name, "?")
    if isinstance(call, ast.Call) and call.args:
        return letter, f"range(0, {a.source(call.args[0])})"
    return letter, "range(?)"


_ITER_KIND_NAMES = {"S": "spatial", "R": "reduce", "C": "scan", "O": "opaque"}


def _block_iter_hover(a: Analysis, d) -> str:
    info = _enclosing_block(a, d)
    row = None
    if info is not None:
        row = next((r for r in _iter_rows(a, info) if r[0] == d.name), None)
    if row is None:
        letter, rng = _syntax_iter(a, d)
        row = (d.name, letter, rng)
    where = f', block "{info.name}"' if info is not None else ""
    kind = _ITER_KIND_NAMES.get(row[1], row[1])
    return _code(f"(block iterator) {d.name}: {row[2]}") + f"\n\nkind: {row[1]} ({kind}){where}"


def _block_hover(a: Analysis, info) -> str:
    rows = _iter_rows(a, info)
    text = _code(f'with T.block("{info.name}")')
    if not rows:
        return text + "\n\nblock without iterators"
    table = ["| iterator | kind | range |", "|---|---|---|"]
    table += [f"| {n} | {k} | {r} |" for n, k, r in rows]
    return text + "\n\n" + "\n".join(table)


def param_name(param: str) -> str:
    return param.split("=", 1)[0].split(":", 1)[0].strip().lstrip("*")
