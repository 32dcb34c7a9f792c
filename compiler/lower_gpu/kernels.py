"""Pass 4: the function body becomes kernel launches (`split_kernels`).

Each outermost thread-bound loop nest is one kernel; thread loops inside it become
``threadIdx.x``... (`common.THREAD_VARS`), guarded when a loop is shorter than the launch;
``vthread`` loops stay serial. What lies outside every nest must be the host's: allocations
(global ones become scratch buffers the host allocates), lets and asserts; anything else is
code no thread runs, and an error. A bounds check hoisted above every thread loop
(`compiler.bounds_check`'s ``CHECK_RANGE``) is the host's too: a `HostCheck`.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import is_one, make_cast

from ..bounds_check import CHECK_RANGE
from ..lower_tir import _e

from .common import (ON_CHIP_SCOPES, THREAD_VARS, DeviceProgram, GPULoweringError, HostCheck, Kernel, all_loops,
                     buffer_accesses, is_thread_loop, same_expr, thread_value)


def _unbound_error(what: str) -> GPULoweringError:
    return GPULoweringError(
        f"{what} is not inside any loop bound to a GPU thread: did you forget to bind it? "
        "(schedule the function with tvms.dlight.ApplyDefaultSchedule or sch.bind)")


def split_kernels(func: tir.PrimFunc, name: str) -> DeviceProgram:
    """Cut the (loop-level) body into kernel launches; see `Kernel`."""
    program = DeviceProgram(func)
    params_data = {b.data for b in func.buffer_map.values()}
    host_allocs: list = []

    def host(s, lets: dict):
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                host(x, lets)
        elif isinstance(s, tir.LetStmt):
            host(s.body, {**lets, s.var: substitute(s.value, lets)})
        elif isinstance(s, Allocate):
            host_allocs.append(s.buffer)
            host(s.body, lets)
        elif isinstance(s, tir.Evaluate) and isinstance(s.value, tir.IntImm):
            return
        elif _is_range_check(s):  # hoisted out of every kernel: the host's (`HostCheck`)
            program.host_checks.append(HostCheck(len(program.kernels), substitute(s.value, lets)))
        elif isinstance(s, tir.IfThenElse) and s.else_case is None and _is_range_check(s.then_case):
            program.host_checks.append(HostCheck(len(program.kernels), substitute(s.then_case.value, lets),
                                                 substitute(s.condition, lets)))
        elif isinstance(s, tir.AssertStmt):
            host(s.body, lets)  # host-side checks are the VM's; device code has no asserts
        elif is_thread_loop(s):
            k = len(program.kernels)
            kname = f"{name}_kernel" if k == 0 else f"{name}_kernel_{k}"  # never a CUDA function's name
            program.kernels.append(_make_kernel(kname, substitute(s, lets)))
        elif isinstance(s, tir.For):
            raise _unbound_error(f"loop '{s.loop_var.name}' of '{name}'")
        else:
            raise _unbound_error(f"a {type(s).__name__} of '{name}'")

    host(func.body, {})
    # Buffers allocated outside the kernels: global ones are the host's scratch; an on-chip one
    # used by a single kernel moves into it; one shared by kernels cannot live on chip.
    accesses = [(k, buffer_accesses(k.body)) for k in program.kernels]
    for buf in host_allocs:
        users = [k for k, a in accesses if buf in a.loaded or buf in a.stored or buf.data in a.pointers]
        if buf.scope in ON_CHIP_SCOPES:
            if len(users) > 1:
                raise GPULoweringError(
                    f"buffer '{buf.name}' (scope {buf.scope!r}) is used by {len(users)} kernels of '{name}': "
                    "on-chip memory does not outlive a kernel")
            for k in users:
                k.body = Allocate(buf, k.body)
        elif buf.data not in params_data:
            program.workspaces.append(buf)
    return program


def _is_range_check(s) -> bool:
    return isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op == CHECK_RANGE


def _make_kernel(name: str, root: tir.For) -> Kernel:
    """The kernel of one outermost thread-bound loop nest: its launch extents, and its body
    with every thread-bound loop replaced by the hardware index (guarded where the loop is
    shorter than the launch)."""
    extents: dict = {}

    for loop in all_loops(root):
        if not is_thread_loop(loop):
            continue
        tag = loop.thread_tag
        if tag not in THREAD_VARS:
            raise GPULoweringError(f"unknown thread tag {tag!r} on loop '{loop.loop_var.name}'")
        old = extents.get(tag)
        if old is None:
            extents[tag] = loop.extent
        elif isinstance(old, tir.IntImm) and isinstance(loop.extent, tir.IntImm):
            if loop.extent.value > old.value:
                extents[tag] = loop.extent
        elif not same_expr(old, loop.extent):
            raise GPULoweringError(
                f"loops bound to {tag} in kernel '{name}' have different extents ({_text(old)} and "
                f"{_text(loop.extent)}) and one is not a constant")

    class Bind(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and is_thread_loop(s):
                body = substitute(s.body, {s.loop_var: thread_value(s)})
                body = self.visit_stmt(body)
                launch = extents[s.thread_tag]
                if not same_expr(launch, s.extent) and not (
                        isinstance(launch, tir.IntImm) and isinstance(s.extent, tir.IntImm)
                        and launch.value == s.extent.value):
                    cond = tir.LT("bool", THREAD_VARS[s.thread_tag], make_cast(s.extent, "int32"))
                    body = tir.IfThenElse(cond, body)
                return body
            if isinstance(s, tir.For) and is_one(s.extent):  # one iteration: no loop at all
                return self.visit_stmt(substitute(s.body, {s.loop_var: make_cast(s.min, s.loop_var.dtype)}))
            if isinstance(s, tir.For) and s.kind == "thread_binding":  # vthread: a serial loop
                return dataclasses.replace(s, kind="serial", thread_tag=None, body=self.visit_stmt(s.body))
            if isinstance(s, tir.AssertStmt):
                return self.visit_stmt(s.body)
            return super().visit_stmt(s)

    return Kernel(name, Bind().visit_stmt(root), extents)


def _text(e) -> str:
    """An expression as TVMScript text, for a message."""
    return _e(e)
