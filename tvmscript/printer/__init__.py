"""IR to canonical TVMScript text.

`to_script` prints a module, a function, or a single node; `show` prints it to the terminal with
syntax highlighting. A module prints as TVM prints one: header comments for the dialects used,
``@I.ir_module class Module:``, the prim_funcs sorted by name, then the Relax functions sorted by
name, one blank line between functions. Dialect details are in `tir_printer` and
`relax_printer`; layout in `doc`.
"""

from __future__ import annotations

import sys

from .. import ir
from ..ir import relax, tir
from ..metadata import Tables
from .doc import Doc
from .relax_printer import RelaxPrinter
from .tir_printer import TIRPrinter, format_string, print_name

HEADER_LINES = {
    "ir": "# from tvm.script import ir as I",
    "tir": "# from tvm.script import tir as T",
    "relax": "# from tvm.script import relax as R",
}


# What TVM prints at the end of a module whose metadata section it leaves out.
METADATA_OMITTED = "# Metadata omitted. Use show_meta=True in script() method to show it."


def to_script(node, show_meta: bool = True, name: str | None = None) -> str:
    """The canonical text of ``node``.

    ``show_meta`` writes the metadata section (the values of the constants printed as
    ``metadata[...][i]``): text that is written to a file must keep it or the file loses its
    constants, so this defaults to True here; `Node.script` and `show`, which display, default to
    False as TVM's do. ``name`` is a module's class name (TVM prints ``Module`` whatever the
    source said; `tvms fmt` passes the source's name so a file keeps it)."""
    if isinstance(node, ir.IRModule):
        return print_module(node, show_meta=show_meta, name=name)
    if isinstance(node, (tir.PrimFunc, relax.Function)):
        return print_function(node, name or print_name(node), show_meta=show_meta)
    if isinstance(node, relax.StructInfo):
        return sinfo_text(node)
    if isinstance(node, tir.PrimExpr):
        return TIRPrinter().expr(node)
    if isinstance(node, relax.Expr):
        return RelaxPrinter().expr(node)
    return repr(node)


def sinfo_text(sinfo) -> str:
    return RelaxPrinter().sinfo(sinfo)


def dim_text(d) -> str:
    """A Relax shape dimension as it prints (``n``, ``n * 2``, ``64``)."""
    return RelaxPrinter().dim(d)


def shape_text(shape) -> str:
    """A Relax shape as it prints, a tuple of its dims (``(n, 64)``, ``(8,)``)."""
    return RelaxPrinter().shape_tuple(shape)


def index_map_text(params, outputs) -> str:
    """An index map as TVM prints one in an attribute: ``T.index_map(lambda i: (i // 4, i % 4))``."""
    printer = TIRPrinter()
    printer.default_int = "int64"  # the map's variables are int64: ``i // 4``, not ``T.int64(4)``
    outs = [printer.expr(e) for e in outputs]
    body = "(" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")"
    return f"T.index_map(lambda {', '.join(v.name for v in params)}: {body})"


def function_order(mod: ir.IRModule) -> list:
    """TVM's order: prim_funcs by name, then extern functions, then Relax functions by name, and
    ``main`` last whatever it is."""
    def rank(kv) -> tuple:
        gv, func = kv
        if gv.name_hint == "main":
            return (3, gv.name_hint)
        kind = 2 if isinstance(func, relax.Function) else 1 if type(func).__name__ == "ExternFunc" else 0
        return (kind, gv.name_hint)

    return sorted(mod.functions.items(), key=rank)


def print_module(mod: ir.IRModule, show_meta: bool = True, name: str | None = None) -> str:
    body = Doc()
    mc = mod.comments.get(mod)
    if mc is not None:
        for c in mc.before:
            body.comment(c)
    body.line("@I.ir_module")
    # TVM prints every module as `class Module`, whatever the source called it, unless asked
    # for another name.
    class_name = name or "Module"
    body.line(f"class {class_name}:", _trailing(mc))
    used = {"ir"}
    names = {gv.name_hint for gv in mod.functions}
    metadata = Tables()
    with body.indent():
        if mod.attrs:
            body.line(f"I.module_attrs({TIRPrinter().attr_dict(mod.attrs)})")
        if mod.global_infos:
            body.line(f"I.module_global_infos({_global_infos_text(mod.global_infos)})")
        first = True
        for gv, func in function_order(mod):
            if isinstance(func, relax.ExternFunc):  # TVM writes these with no blank line after
                used.add("relax")
                body.line(f"{gv.name_hint} = R.ExternFunc({format_string(func.global_symbol)})")
                continue
            if not first:
                body.blank()
            first = False
            if isinstance(func, tir.PrimFunc):
                used.add("tir")
                tir_printer = TIRPrinter(comments=func.comments)
                tir_printer.class_name = class_name  # what `Module.sub(...)` calls name
                tir_printer.prim_func(body, func, gv.name_hint)
            else:
                used.add("relax")
                printer = RelaxPrinter(names, func.comments, metadata)
                printer.class_name = class_name  # what `cls = ...` names
                printer.function(body, func, gv.name_hint)
                if printer.uses_tir:
                    used.add("tir")
    if mc is not None:
        body.after(mc)
    _file_end(body, mod.comments.get(("end", mod)))
    _metadata_section(body, metadata, show_meta)
    return _with_header(body, used)


def _metadata_section(doc: Doc, metadata: Tables, show_meta: bool) -> None:
    """The arrays printed by reference, at the end of the file (see tvmscript/metadata.py), or,
    when they are not to be shown, TVM's note that they were left out."""
    if not metadata:
        return
    doc.blank()
    if not show_meta:
        doc.comment(METADATA_OMITTED)
        return
    for line in metadata.section():
        doc.comment(line)


def _file_end(doc: Doc, comments) -> None:
    """Comments at the end of the file, after everything, at the left margin."""
    for c in comments.after if comments is not None else ():
        doc.comment(c)


def print_function(func, name: str, show_meta: bool = True) -> str:
    doc = Doc()
    if isinstance(func, tir.PrimFunc):
        TIRPrinter(comments=func.comments).prim_func(doc, func, name)
        used = {"tir"}
    else:
        metadata = Tables()
        printer = RelaxPrinter(None, func.comments, metadata)
        printer.function(doc, func, name)
        used = {"relax"} | ({"tir"} if printer.uses_tir else set())
    _file_end(doc, (func.comments or {}).get(("end", func)))
    if isinstance(func, relax.Function):
        _metadata_section(doc, metadata, show_meta)
    return _with_header(doc, used)


def module_header(used: set) -> list[str]:
    """The ``# from tvm.script import ...`` lines, as TVM's printer writes them: one per dialect
    the text uses, in the order ir, tir, relax. A header the source had is regenerated, not kept
    (a partial one, without ``ir as I``, gets it back), as the README promises of every comment
    TVM's printer generates."""
    return [HEADER_LINES[d] for d in ("ir", "tir", "relax") if d in used]


def _with_header(doc: Doc, used: set) -> str:
    header = module_header(used)
    return "\n".join(header) + "\n\n" + doc.text()


def _trailing(comments):
    if comments is None or not comments.trailing:
        return None
    return ir.Comments([], comments.trailing)


def show(node, file=None, color: bool | None = None, show_meta: bool = False, name: str | None = None) -> None:
    """Print canonical TVMScript, syntax-highlighted when writing to a terminal or, in a Jupyter
    notebook, to the cell's output (as TVM's ``show`` does there). The metadata section is left
    out unless ``show_meta`` (as TVM's ``show``): it is for display."""
    text = to_script(node, show_meta=show_meta, name=name)
    notebook = file is None and _in_notebook()
    out = file or sys.stdout
    if color is None:
        color = notebook or getattr(out, "isatty", lambda: False)()
    if color:
        from rich.console import Console
        from rich.syntax import Syntax

        from ..highlight import TVMScriptLexer, TVMScriptStyle

        console = Console(force_jupyter=True) if notebook else Console(file=out, force_terminal=True)
        console.print(Syntax(text.rstrip("\n"), TVMScriptLexer(), theme=TVMScriptStyle, background_color="default"))
    else:
        out.write(text)


def to_html(node, show_meta: bool = False, name: str | None = None) -> str:
    """``node``'s TVMScript as highlighted HTML with inline styles (`highlight.TVMScriptLexer`,
    through Pygments): what a notebook shows for an IRModule, a PrimFunc or a Relax function
    (`ir.Node._repr_html_`)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from ..highlight import TVMScriptLexer, TVMScriptStyle

    text = to_script(node, show_meta=show_meta, name=name)
    return highlight(text, TVMScriptLexer(), HtmlFormatter(noclasses=True, style=TVMScriptStyle, nowrap=False))


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython is never imported here: only looked at
    when something else already did)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _global_infos_text(infos: dict) -> str:
    """``{"vdevice": [I.vdevice(...), ...]}`` as TVM prints I.module_global_infos' argument."""
    attrs = TIRPrinter().attr_dict

    def one(v) -> str:
        if isinstance(v, ir.VDevice):
            target = attrs(v.target) if isinstance(v.target, dict) else TIRPrinter().attr_value(v.target)
            return f"I.vdevice({target}, {v.vdevice_id}, {TIRPrinter().attr_value(v.memory_scope)})"
        if isinstance(v, ir.DummyGlobalInfo):
            return "I.dummy_global_info()"
        raise TypeError(f"cannot print global info {v!r}")

    return "{" + ", ".join(f"{TIRPrinter().attr_value(k)}: [{', '.join(one(v) for v in vs)}]"
                           for k, vs in infos.items()) + "}"
