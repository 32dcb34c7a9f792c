"""The IR layer: the nodes of both dialects and what works on them without compiling.

- `node`: `Node`, the base of every node, and how nodes print;
- `module`: `IRModule`, `GlobalVar`, virtual devices (TVM's ``tvm.ir.module``);
- `tir`: TensorIR's expressions, statements, buffers and `PrimFunc`;
- `relax`: Relax's expressions, bindings, struct info and `Function`;
- `tir_visitor`: walking and rewriting TensorIR;
- `structural`: structural equality and hashing;
- `index_map`: `IndexMap`, a function from index variables to index expressions.

The layer sits on the runtime and below the parser, the printer and the compiler: nothing here
imports them (docs/architecture.md). ``tvms.ir`` is TVM's ``tvm.ir``: these names are its API.
"""

from __future__ import annotations

from ..diagnostics import Span
from .module import DummyGlobalInfo, GlobalVar, GlobalVarList, IRModule, VDevice, vdevice_kind, vdevice_name
from .node import Comments, Node, register_printer

__all__ = ["Node", "Span", "GlobalVar", "GlobalVarList", "IRModule", "structural_equal", "assert_structural_equal",
           "Comments", "register_printer", "VDevice", "DummyGlobalInfo", "vdevice_kind", "vdevice_name"]


def __getattr__(name: str):
    """``structural_equal`` and ``assert_structural_equal`` (`structural`), loaded on first use:
    reading, printing and running a program do not need them (a few ms of every start-up)."""
    if name in ("structural_equal", "assert_structural_equal"):
        from . import structural

        return getattr(structural, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
