"""`Node`, the base of every IR node, and how nodes print.

Every node has TVM's ``script()`` and ``show()``. The printer sits above the IR
(tvmscript/printer/), so the IR does not import it: ``import tvmscript`` registers here, with
`register_printer`, a function that loads the printer on the first print (so that reading a
program does not load the printer's tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = ["Node", "Comments", "register_printer", "printer"]

_LOAD_PRINTER = None


def register_printer(load) -> None:
    """``load()`` returns the printer: an object with ``to_script(node, show_meta, name)``,
    ``show(node, file, show_meta, name)`` and ``to_html(node)`` (the module tvmscript.printer)."""
    global _LOAD_PRINTER
    _LOAD_PRINTER = load


def printer():
    """The registered printer (tvmscript.printer): what IR code that writes TVMScript text into a
    message or a ``repr`` calls, as the IR does not import the printer."""
    if _LOAD_PRINTER is None:
        raise RuntimeError("no TVMScript printer is registered: import tvmscript, which registers it")
    return _LOAD_PRINTER()


class Node:
    """Base of every IR node. Nodes print as TVMScript."""

    __slots__ = ()

    def script(self, *, show_meta: bool = False, name: str | None = None) -> str:
        """The TVMScript text, as TVM's ``script()``: the metadata section (the values of large
        constants) only with ``show_meta=True``, which text written to a file needs to keep its
        constants; ``name`` is the class name a module prints with (default ``Module``)."""
        return printer().to_script(self, show_meta=show_meta, name=name)

    def show(self, file=None, *, show_meta: bool = False, name: str | None = None) -> None:
        """Print as TVMScript: highlighted on a terminal, plain otherwise (or into ``file``);
        the metadata section only with ``show_meta=True``, as TVM's ``show``."""
        printer().show(self, file=file, show_meta=show_meta, name=name)

    def _repr_html_(self) -> str:
        """In a notebook: the TVMScript, highlighted (`tvmscript.printer.to_html`)."""
        return printer().to_html(self)

    def __str__(self) -> str:
        return self.script()


@dataclass(slots=True)
class Comments:
    """Comments the user wrote around a statement: lines before it, one at the end of its first
    line, and lines after it (comments at the end of a block). Kept so `tvms fmt` loses none."""

    before: list = field(default_factory=list)
    trailing: Optional[str] = None
    after: list = field(default_factory=list)
