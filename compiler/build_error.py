"""`BuildError`, the error of a module that cannot be compiled as it is, and how its messages
name the place in the program they are about. Every part of the build raises it (the driver,
the VM's code generator, the CUDA build), so it lives apart from all of them.
"""

from __future__ import annotations

from tvmscript.diagnostics import TVMScriptError

__all__ = ["BuildError", "where"]


class BuildError(TVMScriptError, ValueError):
    """A module that cannot be compiled as it is (an op that is not lowered, a call_tir whose
    arguments do not fit its prim_func, ...); ``span`` points at the offending call when known."""


def where(name: str, binding_var=None) -> str:
    """The place an error names: the Relax function, and the binding when it has a name."""
    if binding_var is not None and binding_var.name_hint != "_":
        return f"in function '{name}', binding '{binding_var.name_hint}'"
    return f"in function '{name}'"

