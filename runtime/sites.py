"""Where in the user's program an error raised while a Relax function runs comes from.

The build records, for each line of the Python it writes for a Relax function, the binding
that line computes: a `Site` (`compiler.build`). When an error of the program (a
`TVMScriptError`: a kernel's failed check, a call_tir argument or a value that does not fit its
annotation, a failed ``R.assert_op``) leaves a Relax function, the VM finds the innermost line
of generated code in its traceback and `locate` gives the error that binding's place:

* an error a kernel found at an access or a statement of the user's own TIR keeps that place
  (numbered in the machine code, found in the PrimFunc the executable was built from), and a
  note says where the call is;
* in a fused kernel (the call's span is a `FusedSpan`), an error in TIR that LegalizeOps made
  points at the op it came from, and an error about one of the kernel's tensors at the binding
  that uses it; a note says which bindings run as that kernel;
* anything else points at the binding's call.

Nothing here runs unless an error is raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tvmscript.diagnostics import FusedSpan, Span, TVMScriptError, plain_span

__all__ = ["Site", "locate", "site_of"]


@dataclass(frozen=True)
class Site:
    """A binding of a Relax function, as the VM's code for it runs: ``span`` is its value's
    (a call's, a `FusedSpan` for a fused one), ``kernel`` the kernel its ``R.call_tir`` runs."""

    function: str
    binding: str
    span: Optional[Span] = None
    kernel: Optional[str] = None

    def where(self) -> str:
        binding = f", binding '{self.binding}'" if self.binding and self.binding != "_" else ""
        return f"in function '{self.function}'{binding}"

    def param_name(self, index: int, name: str) -> str:
        """How an error names the kernel's tensor parameter ``index`` (``name`` in the
        PrimFunc): a fused kernel's invented names are replaced by the Relax values they are."""
        fused = self.span.param(index) if isinstance(self.span, FusedSpan) else None
        return fused[1] if fused is not None else f"parameter '{name}'"

    def call_text(self) -> str:
        """What an error about an argument of the call starts with: the kernel, for a call
        the user wrote (a fused kernel's name is not theirs)."""
        return "" if isinstance(self.span, FusedSpan) else f"R.call_tir to '{self.kernel}': "


def site_of(traceback, sites_by_code: dict) -> Optional[Site]:
    """The `Site` of the innermost generated line in ``traceback`` (``sites_by_code``: the
    code object of each VM function -> its {line: Site})."""
    found = None
    tb = traceback
    while tb is not None:
        sites = sites_by_code.get(tb.tb_frame.f_code)
        if sites is not None:
            found = sites.get(tb.tb_lineno, found)
        tb = tb.tb_next
    return found


def locate(err: TVMScriptError, site: Site, kernels: dict) -> None:
    """Give ``err``, raised at ``site``, its place in the user's program (see the module
    docstring); ``kernels`` are the executable's, by name."""
    from .kernel import KernelAssertionError

    kernel = kernels.get(site.kernel) if site.kernel is not None else None
    if isinstance(err, KernelAssertionError) and kernel is not None:
        kernel.place(err)
    if site.kernel is not None and err.message.startswith(f"{site.kernel}: "):
        err.message = err.message[len(site.kernel) + 2:]  # the kernel's name: told by where it runs
    fused = site.span if isinstance(site.span, FusedSpan) else None
    span, call, where, notes = err.span, plain_span(site.span), site.where(), []
    if fused is not None:
        where = fused.where()
        found = fused.place_in_kernel(span)
        if found is None and getattr(err, "param", None) is not None:
            part = fused.param(err.param)
            found = (part[0], None) if part is not None else None
        if found is not None:  # the part of the fused kernel the error is in, or about
            part, span = found
            where, call = part.where(), part.span
        notes.append(fused.note(site.kernel))
    if span is not None and call is not None and span != call:
        notes.insert(0, f"called at {call}")
    err.message = f"{err.message} ({where})"
    err.span = span or call
    err.notes = list(err.notes) + notes
    err.site = site
