"""`BuildError`, the error of a module that cannot be compiled as it is, and how its messages
name the place in the program they are about. Every part of the build raises it (the driver,
the VM's code generator, the CUDA build), so it lives apart from all of them.
"""

from __future__ import annotations

from tvmscript.diagnostics import TVMScriptError

__all__ = ["BuildError", "NotLoweredError", "where"]


class BuildError(TVMScriptError, ValueError):
    """A module that cannot be compiled as it is (an op that is not lowered, a call_tir whose
    arguments do not fit its prim_func, ...); ``span`` points at the offending call when known."""


class NotLoweredError(BuildError):
    """A high-level op left in a module being built that LegalizeOps would lower: the module
    did not go through it (`tvms run --pipeline none`, say), which the CLI's note points out."""


def where(name: str, binding_var=None) -> str:
    """The place an error names: the Relax function, and the binding when it has a name."""
    if binding_var is not None and binding_var.name_hint != "_":
        return f"in function '{name}', binding '{binding_var.name_hint}'"
    return f"in function '{name}'"

