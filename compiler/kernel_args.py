"""How a call_tir's tensors and ``tir_vars`` meet its kernel's parameters (`plan_kernel_args`).

The VM calls a kernel through its raw entry point: data pointers, scalars, then the values of
its symbolic dims. The plan says, for one call, which tensor each buffer parameter gets,
where each symbolic dim's value comes from (a Relax dim, a tensor's shape or stride), and
whether the arguments must be checked at run time: what the build can see does not fit is a
`BuildError` (through ``error``), what it cannot prove is checked when the call runs.
``tvms check`` applies the same rules (`tvmscript.well_formed`).
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .vm_specs import annotation_text

__all__ = ["KernelPlan", "plan_kernel_args"]


class KernelPlan:
    """One call's arguments in the kernel's order, and whether they are checked when it runs."""

    __slots__ = ("scalars", "syms", "runtime_check", "buffer_atoms")

    def __init__(self) -> None:
        self.buffer_atoms = []  # per buffer parameter, in order: the Python expression of its tensor
        self.scalars = []       # per scalar parameter, in order: the tir_vars expression
        self.syms = []          # per kernel sym var: ("expr", relax dim) | ("shape"/"stride", (atom, dim))
        self.runtime_check = False


def plan_kernel_args(kname: str, kernel, tensors: list, tir_vars: list, error) -> KernelPlan:
    """Match a call_tir's tensors (inputs then outputs) and tir_vars against the kernel's
    parameters. Mismatches the build can see are errors; what it cannot prove (a dim that is
    symbolic on the Relax side, an unknown dtype) is checked at run time."""
    plan = KernelPlan()
    params = list(kernel.params)
    buffers = [p for p in params if p.kind == "buffer"]
    scalars = [p for p in params if p.kind != "buffer"]
    n_in = sum(1 for t in tensors if not t[2].startswith("output"))
    if len(buffers) != len(tensors):
        raise error(
            f"R.call_tir to '{kname}' passes {n_in} argument(s) and {len(tensors) - n_in} output(s), "
            f"but the prim_func has {len(buffers)} buffer parameter(s) ({', '.join(p.name for p in buffers)})")
    if len(scalars) != len(tir_vars):
        raise error(f"R.call_tir to '{kname}' passes {len(tir_vars)} tir_vars, but the prim_func has "
                    f"{len(scalars)} scalar parameter(s) ({', '.join(p.name for p in scalars) or 'none'})")
    sym_src: dict = {}   # kernel sym name -> ("expr", relax dim) | ("shape", (atom, d))
    stride_src: dict = {}
    it_t = iter(tensors)
    it_s = iter(tir_vars)
    scalar_values = {}
    for p in params:
        if p.kind != "buffer":
            e = next(it_s)
            plan.scalars.append(e)
            scalar_values[p.name] = e
            continue
        atom, sinfo, desc = next(it_t)
        plan.buffer_atoms.append(atom)
        if p.strides is not None:
            # Declared strides: VM tensors are compact, which the run-time check compares.
            plan.runtime_check = True
            for d, st in enumerate(p.strides):
                if isinstance(st, str) and st.isidentifier() and st not in stride_src:
                    stride_src[st] = ("stride", (atom, d))
        want = f'T.Buffer({_shape_text(p.shape)}, "{p.dtype}")'
        if sinfo is not None and not isinstance(sinfo, (relax.TensorStructInfo, relax.ObjectStructInfo)):
            raise error(f"R.call_tir to '{kname}': {desc} is {annotation_text(sinfo)}, "
                        f"but parameter '{p.name}' is a buffer")
        if not isinstance(sinfo, relax.TensorStructInfo):
            plan.runtime_check = True
            for d, kd in enumerate(p.shape):
                if isinstance(kd, str) and kd.isidentifier() and kd not in sym_src:
                    sym_src[kd] = ("shape", (atom, d))
            continue
        got = annotation_text(sinfo)
        if sinfo.dtype and sinfo.dtype != p.dtype:
            raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} (dtype differs)")
        if not sinfo.dtype:
            plan.runtime_check = True
        if sinfo.ndim >= 0 and sinfo.ndim != len(p.shape):
            raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                        f"({sinfo.ndim}-d vs {len(p.shape)}-d)")
        if sinfo.shape is None:
            plan.runtime_check = True
            for d, kd in enumerate(p.shape):
                if isinstance(kd, str) and kd.isidentifier() and kd not in sym_src:
                    sym_src[kd] = ("shape", (atom, d))
            continue
        for d, (kd, rd) in enumerate(zip(p.shape, sinfo.shape)):
            if isinstance(kd, int):
                if isinstance(rd, tir.IntImm):
                    if int(rd.value) != kd:
                        raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                                    f"(dimension {d}: {int(rd.value)} vs {kd})")
                else:
                    plan.runtime_check = True
                continue
            if not kd.isidentifier():  # an expression over the kernel's symbols, e.g. "(n * 2)"
                plan.runtime_check = True
                continue
            src = sym_src.get(kd)
            if src is None:
                sym_src[kd] = ("expr", rd)
            elif src[0] == "expr":
                a, b = src[1], rd
                if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
                    if a.value != b.value:
                        raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                                    f"and '{kd}' was already {int(a.value)} (dimension {d} is {int(b.value)})")
                elif not _same_dim(a, b):
                    plan.runtime_check = True
            else:
                plan.runtime_check = True
    for s in getattr(kernel, "sym_vars", ()):
        src = sym_src.get(s) or stride_src.get(s)
        if src is None:
            if s in scalar_values:
                plan.syms.append(("expr", scalar_values[s]))
                continue
            raise error(f"R.call_tir to '{kname}': the value of its symbolic dimension '{s}' cannot be found "
                        f"from the shapes of its arguments")
        plan.syms.append(src)
    return plan


def _same_dim(a, b) -> bool:
    from tvmscript.ir.structural import StructuralEqual

    if isinstance(a, tir.Var) and isinstance(b, tir.Var):
        return a.name == b.name
    return StructuralEqual(map_free_vars=False).equal(a, b)


def _shape_text(shape) -> str:
    items = [str(d) if isinstance(d, int) else d for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
