"""What the TIR builder keeps while it builds a body: the declarations of the block being built
(`BlockFrame`), a statement whose body is the rest of the enclosing body (`Scoped`: a let, an
assert, a buffer declaration, a thread launch), and a nested ``@T.inline`` function (`Macro`).
"""

from __future__ import annotations

from ..ir import tir
from .context import Scope


class BlockFrame:
    """Declarations collected while building one ``with T.block(...)`` body."""

    def __init__(self, name: str, node) -> None:
        self.name = name
        self.node = node
        self.iter_vars: list[tir.IterVar] = []
        self.iter_values: list = []
        self.reads: list | None = None
        self.writes: list | None = None
        self.predicate = None
        self.annotations: dict = {}
        self.alloc_buffers: list[tir.Buffer] = []
        self.match_buffers: list = []
        self.init = None


class Scoped:
    """A statement whose body is the rest of the enclosing body (LetStmt, AssertStmt)."""

    def __init__(self, scope: Scope, make, push: bool = True) -> None:
        if push:
            scope.push()
        self.make = make


class Macro:
    """A nested ``@T.inline`` function of a prim_func, expanded where it is called."""

    def __init__(self, fdef) -> None:
        self.fdef = fdef
