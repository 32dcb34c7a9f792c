"""Where in the source a kernel's run-time error happened, told by number.

A compiled kernel reports a failed check (an access out of bounds, a division by zero, a
``T.Assert``) with a message baked into its machine code. The place in the file cannot be
baked in as text: compiled kernels are cached by the structure of their PrimFunc
(`compiler.build_cache`), and two structurally equal PrimFuncs may sit at different lines (a
file edited above the function, or the same kernel fused for two calls). So a message ends
with `PLACE_MARK` and a number instead: the index of the access's (or statement's) span among
the distinct spans of the PrimFunc's loads and stores, in program order (`numbered_spans`).
Structurally equal PrimFuncs number their accesses alike, so the runtime finds the place in the
PrimFunc the executable was built from when an error is raised, and only then: the build gives
each kernel the `place_table` of that PrimFunc (`runtime.kernel_abi.PlaceTable`), which lists
its spans on first use. The marks and the parsing of a message are the runtime's
(`runtime.kernel_abi.PLACE_MARK`, `split_place`).

An error compiling a kernel is told its place directly (`at_span`): the build reports it there.
"""

from __future__ import annotations

import functools

from tvmscript.ir import tir
from tvmscript.runtime.kernel_abi import PLACE_MARK, PlaceTable
from tvmscript.ir.tir_visitor import TIRVisitor

__all__ = ["numbered_spans", "place_table", "with_place", "at_span"]


def _spans_in_order(func: tir.PrimFunc) -> list:
    """The distinct spans of ``func``'s loads and stores, in program order."""
    seen: dict = {}

    class _Spans(TIRVisitor):
        def visit_BufferLoad(self, node) -> None:
            if node.span is not None:
                seen.setdefault(node.span, len(seen))
            self.generic_visit(node)

        visit_BufferStore = visit_BufferLoad

    _Spans().visit(func.body)
    return list(seen)


def numbered_spans(func: tir.PrimFunc) -> dict:
    """``{span: number}`` for the spans of ``func``'s loads and stores (before any schedule:
    the numbers must be those `place_table` lists for the PrimFunc the runtime has)."""
    return {span: k for k, span in enumerate(_spans_in_order(func))}


def place_table(func) -> PlaceTable:
    """The places of ``func`` (the PrimFunc a kernel was built from, as the module being built
    has it), numbered as its kernel's failures number them; listed when one is placed."""
    if not isinstance(func, tir.PrimFunc):
        return PlaceTable(spans=())
    return PlaceTable(functools.partial(_spans_in_order, func))


def with_place(message: str, places: dict | None, span) -> str:
    """``message`` ending with the number of ``span`` in ``places`` (`numbered_spans`), when
    it has one."""
    number = places.get(span) if places and span is not None else None
    return message if number is None else f"{message}{PLACE_MARK}{number}"


def at_span(err: Exception, span) -> Exception:
    """``err``, an error compiling a kernel, told the place (``span``) of the statement or
    load it is about, unless it knows a closer one (the build reports it there)."""
    if span is not None and getattr(err, "span", None) is None:
        err.span = span
    return err
