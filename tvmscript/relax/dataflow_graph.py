"""Pictures of Relax dataflow: ``tvms.relax.visualize(mod)`` and ``tvms show FILE --graph out.svg``.

A Relax function becomes a Graphviz graph (`to_dot`), as Netron draws an ONNX model or TVM's
relay_viz a Relay one:

* a node per parameter, per binding and for the result, labelled with the variable, what
  computes it (``R.matmul``, ``R.call_tir: add``, ``fused_matmul_add_relu``) and its shape and
  dtype; an edge per variable a binding reads;
* a call of one of the module's fused functions (a Relax function marked ``Primitive``, what
  FuseOps makes) is drawn as a cluster holding that function's own bindings, fed by the call's
  arguments;
* constants are small nodes of their own, one per use.

`Graph` holds the DOT text; ``Graph.render("svg")`` runs Graphviz's ``dot`` (Debian's
``graphviz`` package: tvms does not depend on it), and a notebook shows a `Graph` as SVG.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..ir import IRModule, relax as rx, tir
from ..ir.relax import DPS_CALL_OPS

__all__ = ["visualize", "to_dot", "format_of", "Graph", "GraphvizMissing"]

FORMATS = ("dot", "svg", "png", "pdf")


class GraphvizMissing(RuntimeError):
    """Graphviz's ``dot`` is not on PATH; the message says how to install it."""


def visualize(mod, func_name: str = "main") -> "Graph":
    """The dataflow of Relax function ``func_name`` of ``mod`` (or of a `relax.Function`) as a `Graph`."""
    return Graph(to_dot(mod, func_name))


class Graph:
    """A Graphviz graph of a Relax function: ``dot`` is its DOT text; `render` draws it."""

    def __init__(self, dot: str) -> None:
        self.dot = dot

    def render(self, fmt: str = "svg") -> bytes:
        """The picture in ``fmt`` (svg, png or pdf), drawn by Graphviz's ``dot``."""
        if fmt == "dot":
            return self.dot.encode()
        if fmt not in FORMATS:
            raise ValueError(f"cannot draw a graph as '{fmt}': one of {', '.join(FORMATS)}")
        exe = shutil.which("dot")
        if exe is None:
            raise GraphvizMissing("drawing the graph needs Graphviz's 'dot' program: install Graphviz "
                                  "(apt install graphviz, brew install graphviz), or write the .dot text")
        proc = subprocess.run([exe, f"-T{fmt}"], input=self.dot.encode(), capture_output=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"Graphviz's dot failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def save(self, path: str) -> None:
        """Write the graph, in the format the file's extension names (.dot, .svg, .png, .pdf)."""
        data = self.render(format_of(path))
        with open(path, "wb") as f:
            f.write(data)

    def _repr_svg_(self) -> str:
        return self.render("svg").decode()

    def __str__(self) -> str:
        return self.dot


def format_of(path) -> str:
    """The format a picture's file name asks for, by its extension (one of `FORMATS`); a
    ValueError naming the file otherwise."""
    name = os.path.basename(str(path))
    fmt = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if fmt not in FORMATS:
        raise ValueError(f"{path}: the file must end in one of .{', .'.join(FORMATS)}")
    return fmt


def to_dot(mod, func_name: str = "main") -> str:
    """The DOT text of the dataflow of Relax function ``func_name`` of ``mod``."""
    if isinstance(mod, rx.Function):
        module, func, name = None, mod, func_name
    elif isinstance(mod, IRModule):
        gv = next((g for g in mod.get_global_vars() if g.name_hint == func_name), None)
        if gv is None or not isinstance(mod[gv], rx.Function):
            relax_names = [g.name_hint for g in mod.get_global_vars() if isinstance(mod[g], rx.Function)]
            raise KeyError(f"the module has no Relax function '{func_name}' (it has: {', '.join(relax_names) or 'none'})")
        module, func, name = mod, mod[gv], func_name
    else:
        raise TypeError(f"visualize expects an IRModule or a relax.Function, got {type(mod).__name__}")
    return _Drawing(module).function(func, name)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dim(d) -> str:
    if isinstance(d, tir.IntImm):
        return str(d.value)
    if isinstance(d, tir.Var):
        return d.name
    return str(d)


def sinfo_label(sinfo) -> str:
    """A short struct info: ``(1, 10) float32``, ``(n, 4) float16``, a tuple's fields in parentheses."""
    if isinstance(sinfo, rx.TensorStructInfo):
        shape = "(" + ", ".join(_dim(d) for d in sinfo.shape) + ("," if len(sinfo.shape) == 1 else "") + ")" \
            if sinfo.shape is not None else f"ndim={sinfo.ndim}"
        return f"{shape} {sinfo.dtype}".strip()
    if isinstance(sinfo, rx.TupleStructInfo):
        return "(" + ", ".join(sinfo_label(f) for f in sinfo.fields) + ")"
    if isinstance(sinfo, rx.ShapeStructInfo):
        return "shape" if sinfo.values is None else "shape (" + ", ".join(_dim(d) for d in sinfo.values) + ")"
    if isinstance(sinfo, rx.PrimStructInfo):
        return sinfo.dtype
    return type(sinfo).__name__.replace("StructInfo", "").lower() if sinfo is not None else ""


class _Drawing:
    """One DOT graph being written: nodes, edges and clusters, and which node defines each
    variable in scope."""

    def __init__(self, module) -> None:
        self.module = module
        self.lines: list = []
        self.count = 0
        self.clusters = 0

    def node(self, label: str, indent: str, **attrs) -> str:
        name = f"n{self.count}"
        self.count += 1
        extra = "".join(f", {k}={_quote(str(v))}" for k, v in attrs.items())
        self.lines.append(f"{indent}{name} [label={_quote(label)}{extra}];")
        return name

    def edge(self, src: str, dst: str, indent: str) -> None:
        self.lines.append(f"{indent}{src} -> {dst};")

    def function(self, func, name: str) -> str:
        self.lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;",
                      '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica", '
                      'fontsize=10];', '  edge [color="#555555"];']
        defined = {}
        for p in func.params:
            defined[p] = self.node(f"{p.name_hint}\n{sinfo_label(p.struct_info)}", "  ", shape="ellipse",
                                   fillcolor="#fdf1d6")
        result = self.body(func.body, defined, "  ")
        out = self.node(f"return\n{sinfo_label(func.ret_struct_info or getattr(func.body, 'struct_info', None))}",
                        "  ", shape="ellipse", fillcolor="#dff0d8")
        for src in result:
            self.edge(src, out, "  ")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def body(self, seq, defined: dict, indent: str) -> list:
        """Draw ``seq``'s bindings; the nodes its result reads."""
        for block in seq.blocks:
            for b in block.bindings:
                defined[b.var] = self.binding(b, defined, indent)
        return self.reads(seq.body, defined, indent)

    def binding(self, b, defined: dict, indent: str) -> str:
        value = b.value
        label = f"{b.var.name_hint} = {self.what(value)}\n{sinfo_label(b.var.struct_info)}"
        callee = self.fused_callee(value)
        if callee is not None:
            return self.cluster(b, value, callee, defined, indent)
        node = self.node(label, indent)
        for src in self.reads(value, defined, indent):
            self.edge(src, node, indent)
        return node

    def what(self, value) -> str:
        """What computes a binding's value, in a few words."""
        if isinstance(value, rx.Call):
            op = value.op
            if isinstance(op, rx.Op):
                short = "R." + op.name.removeprefix("relax.")
                if op.name in DPS_CALL_OPS and value.args:
                    target = value.args[0]
                    kernel = getattr(target, "name_hint", None) or getattr(target, "global_symbol", "?")
                    return f"{short}: {kernel}"
                return short
            if hasattr(op, "name_hint"):
                return f"{op.name_hint}(...)"
            if isinstance(op, rx.ExternFunc):
                return f"{op.global_symbol}(...)"
            return "call"
        if isinstance(value, rx.Tuple):
            return "tuple"
        if isinstance(value, rx.TupleGetItem):
            return f"[{value.index}]"
        if isinstance(value, rx.Var):
            return value.name_hint
        if isinstance(value, rx.Constant):
            return "constant"
        if isinstance(value, rx.If):
            return "if"
        return type(value).__name__

    def reads(self, value, defined: dict, indent: str) -> list:
        """The nodes ``value`` reads: those defining its variables, and a node per constant."""
        out: list = []

        def walk(e) -> None:
            if isinstance(e, rx.Var):
                if e in defined and defined[e] not in out:
                    out.append(defined[e])
            elif isinstance(e, rx.Constant):
                out.append(self.node(f"const {sinfo_label(e.struct_info)}", indent, shape="note",
                                     fillcolor="#f4f4f4"))
            elif isinstance(e, rx.Call):
                for a in e.args:
                    walk(a)
            elif isinstance(e, rx.Tuple):
                for f in e.fields:
                    walk(f)
            elif isinstance(e, rx.TupleGetItem):
                walk(e.tuple_value)
            elif isinstance(e, rx.If):
                walk(e.cond)

        walk(value)
        return out

    def fused_callee(self, value):
        """The fused Relax function a binding calls (``Primitive``: FuseOps made it), or None."""
        if self.module is None or not isinstance(value, rx.Call) or not hasattr(value.op, "name_hint"):
            return None
        try:
            callee = self.module[value.op]
        except (KeyError, TypeError):
            return None
        if isinstance(callee, rx.Function) and callee.attrs.get("Primitive"):
            return callee
        return None

    def cluster(self, b, call, callee, defined: dict, indent: str) -> str:
        """A fused function's bindings drawn in a cluster, its parameters fed by the call's
        arguments; the node of the binding's variable, the cluster's result."""
        self.clusters += 1
        inner = indent + "  "
        self.lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
        self.lines.append(f'{inner}label={_quote(call.op.name_hint)}; style="rounded,dashed"; color="#7a9cc6"; '
                          'fontname="Helvetica"; fontsize=10;')
        scope = {}
        for param, arg in zip(callee.params, call.args):
            sources = self.reads(arg, defined, indent)
            scope[param] = sources[0] if len(sources) == 1 else self.node(param.name_hint, inner)
            if len(sources) != 1:
                for src in sources:
                    self.edge(src, scope[param], indent)
        results = self.body(callee.body, scope, inner)
        node = self.node(f"{b.var.name_hint}\n{sinfo_label(b.var.struct_info)}", inner, fillcolor="#d9e7f7")
        self.lines.append(f"{indent}}}")
        for src in results:
            self.edge(src, node, indent)
        return node
