"""The parameters of generated functions, shared by the CPU and CUDA code generators.

`kernel_signature` is a kernel's ABI as the runtime sees it: a `runtime.kernel_abi.ParamSpec` per
parameter (buffer shapes as texts over the symbolic sizes, `dim_text`; whether the kernel
writes the buffer, `written_data_vars`) and the symbolic shape/stride variables passed after
them. `collect_free` finds the values an outlined statement takes: a parallel loop's body on
the CPU (`codegen_llvm.parallel`), a kernel's body on the GPU (`codegen_cuda`).

Why a module of its own: both backends, and `tvms check` (`tvmscript.well_formed`), must agree
on what a kernel takes and in which order; one definition keeps them so.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from tvmscript.ir.tir import Allocate
from tvmscript.runtime.kernel_abi import ParamSpec

__all__ = ["kernel_signature", "collect_free", "written_data_vars", "dim_text", "NameOf"]


def kernel_signature(name: str, func: tir.PrimFunc):
    """The kernel's ABI: ParamSpecs, symbolic variable list and the Vars behind each argument."""

    buffers, scalars = [], []
    for p in func.params:
        if p in func.buffer_map:
            buffers.append((p, func.buffer_map[p]))
        else:
            scalars.append(p)
    scalar_set = set(scalars)
    sym_vars: list = []
    for _, buf in buffers:
        for v in vars_in(list(buf.shape) + list(buf.strides or [])):
            if v not in scalar_set and v not in sym_vars:
                sym_vars.append(v)
    names: dict = {}
    taken: set = set()
    for v in scalars + sym_vars:
        base = v.name or "v"
        n, i = base, 1
        while n in taken:
            n, i = f"{base}_{i}", i + 1
        taken.add(n)
        names[v] = n
    written = written_data_vars(func.body)
    specs = []
    for p in func.params:  # in the function's own parameter order: how callers pass them
        buf = func.buffer_map.get(p)
        if buf is None:
            specs.append(ParamSpec("scalar", names[p], p.dtype))
            continue
        shape = [d.value if isinstance(d, tir.IntImm) else dim_text(d, names) for d in buf.shape]
        strides = None
        if buf.strides:
            strides = [d.value if isinstance(d, tir.IntImm) else dim_text(d, names) for d in buf.strides]
        specs.append(ParamSpec("buffer", p.name, buf.dtype, shape, strides=strides,
                               written=buf.data in written, buffer_name=buf.name))
    return specs, [names[v] for v in sym_vars], buffers, scalars, sym_vars


def dim_text(e, names: dict) -> str:
    """A shape dimension as text over symbol names, for `ParamSpec` (``"n"``, ``"n * 2"``)."""
    if isinstance(e, tir.IntImm):
        return str(e.value)
    if isinstance(e, tir.Var):
        return names[e]
    if isinstance(e, tir.Cast):
        return dim_text(e.value, names)
    ops = {tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.FloorDiv: "//", tir.FloorMod: "%"}
    if type(e) in ops:
        return f"({dim_text(e.a, names)} {ops[type(e)]} {dim_text(e.b, names)})"
    if isinstance(e, (tir.Min, tir.Max)):
        return f"{type(e).__name__.lower()}({dim_text(e.a, names)}, {dim_text(e.b, names)})"
    raise NotImplementedError(f"unsupported shape expression {type(e).__name__}")


class NameOf(dict):
    """`dim_text`'s names for a message: each variable by its own name."""

    def __missing__(self, v):
        return v.name


def written_data_vars(stmt) -> set:
    """The data variables of the buffers a statement stores into: the kernel's outputs."""
    out: set = set()

    def st(s):
        if isinstance(s, tir.BufferStore):
            out.add(s.buffer.data)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                st(x)
        elif isinstance(s, (tir.For, tir.LetStmt, tir.AssertStmt, tir.While, Allocate)):
            st(s.body)
        elif isinstance(s, tir.IfThenElse):
            st(s.then_case)
            if s.else_case is not None:
                st(s.else_case)
        elif isinstance(s, tir.Evaluate):
            pass

    st(stmt)
    return out


def collect_free(stmt) -> list:
    """Variables a statement uses but does not define, in first-use order: scalars, loop
    variables of enclosing loops, and the data variables of the buffers it accesses."""
    used: dict = {}
    defined: set = set()

    def ex(e):
        if isinstance(e, tir.Var):
            if e not in defined:
                used.setdefault(e, None)
        elif isinstance(e, tir.BinaryOp):
            ex(e.a)
            ex(e.b)
        elif isinstance(e, tir.BufferLoad):
            if e.buffer.data not in defined:
                used.setdefault(e.buffer.data, None)
            for i in e.indices:
                ex(i)
        elif isinstance(e, tir.Cast):
            ex(e.value)
        elif isinstance(e, tir.Not):
            ex(e.a)
        elif isinstance(e, tir.Select):
            ex(e.condition)
            ex(e.true_value)
            ex(e.false_value)
        elif isinstance(e, tir.Call):
            for a in e.args:
                ex(a)
        elif isinstance(e, tir.Let):
            ex(e.value)
            defined.add(e.var)
            ex(e.body)

    def st(s):
        if isinstance(s, tir.BufferStore):
            if s.buffer.data not in defined:
                used.setdefault(s.buffer.data, None)
            ex(s.value)
            for i in s.indices:
                ex(i)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                st(x)
        elif isinstance(s, tir.For):
            ex(s.min)
            ex(s.extent)
            defined.add(s.loop_var)
            st(s.body)
        elif isinstance(s, tir.IfThenElse):
            ex(s.condition)
            st(s.then_case)
            if s.else_case is not None:
                st(s.else_case)
        elif isinstance(s, tir.LetStmt):
            ex(s.value)
            defined.add(s.var)
            st(s.body)
        elif isinstance(s, tir.AssertStmt):
            ex(s.condition)
            st(s.body)
        elif isinstance(s, tir.While):
            ex(s.condition)
            st(s.body)
        elif isinstance(s, tir.Evaluate):
            ex(s.value)
        elif isinstance(s, Allocate):
            ex(s.buffer.shape[0])
            defined.add(s.buffer.data)
            st(s.body)

    st(stmt)
    return list(used)
