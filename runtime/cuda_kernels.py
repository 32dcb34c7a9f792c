"""CUDA kernels on a GPU: a `compiler.cuda_spec.CUDACode` loaded onto one device
(`load_module`, a `CUDAModule`), each prim_func's ``__global__`` functions a `CUDAKernel`.

A `CUDAKernel` runs a prim_func compiled by `compiler.codegen_cuda`: the launch dimensions of
each of its kernels are evaluated from the symbolic variables (once per distinct set of
values), and each launch is a prepared pycuda call on the current stream. The VM calls its
unchecked `CUDAKernel.launch` with the flat arguments of the CPU kernels' ABI; called
directly, it checks its arguments first, as a CPU `runtime.kernel.Kernel` does.
"""

from __future__ import annotations

import operator
import re
from typing import Optional

from tvmscript.diagnostics import TVMScriptError

from . import cuda
from .cuda import (DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceError, DeviceRuntime, _one_line, as_tensor_on, check_arch,
                   is_sticky, runtime)
from .cuda_tensor import _type_name
from .kernel import BoundsCheckError, bind_scalars, bounds_error, check_arity, eval_dim_text, place_in

__all__ = ["load_module", "CUDAModule", "CUDAKernel", "LaunchConfigError", "failed_host_check",
           "raise_bounds_failure"]


def load_module(code, dev) -> "CUDAModule":
    """Load a `compiler.cuda_spec.CUDACode` onto GPU ``dev``."""
    return CUDAModule(code, runtime(dev))


class CUDAModule:
    """A `CUDACode` loaded onto one GPU: ``kernels`` maps each prim_func's name to its
    `CUDAKernel`. CUBIN must suit the GPU (`check_arch`); PTX, when that is all the code has,
    is compiled by the driver for it."""

    def __init__(self, code, rt: DeviceRuntime) -> None:
        if code.cubin is not None:
            check_arch(code.arch, rt.compute_capability, rt.device)
            image = code.cubin
        elif code.ptx:
            image = code.ptx.encode() + b"\0"
        else:
            raise ValueError("the CUDA code holds neither CUBIN nor PTX: it was built with kind='source'")
        rt.activate()
        self.runtime = rt
        self.generation = rt.generation  # the context it is loaded in (`DeviceRuntime.recreate`)
        try:
            self.module = module = rt.drv.module_from_buffer(image)
        except rt.drv.Error as err:
            raise RuntimeError(f"cannot load the CUDA code ({code.arch}) on {rt.device} ({rt.name}, {rt.arch}): "
                               f"{_one_line(err)}") from None

        def get_function(symbol: str):
            try:
                return module.get_function(symbol)
            except rt.drv.Error as err:
                raise RuntimeError(f"the CUDA code has no kernel '{symbol}': {_one_line(err)}") from None

        self.kernels = {name: CUDAKernel(func, get_function, rt, code.ptxas) for name, func in code.functions.items()}


class LaunchConfigError(TVMScriptError, ValueError):
    """A kernel's launch does not fit the device (too many threads per block, blocks, shared
    memory or registers): raised before launching, naming the device's limit; its span is
    the kernel's PrimFunc."""


def raise_bounds_failure(rt, kernels, record=None) -> None:
    """Raise the bounds check that failed on ``rt``'s device since it was last read (in error
    ``record``, the thread's by default: `compiler.codegen_cuda.checks`), as the
    `BoundsCheckError` of the one of ``kernels`` (`CUDAKernel`s, of one module) whose check it
    is; nothing if none failed. Waits for the current stream."""
    found = rt.take_bounds_failure(record)
    if found is None:
        return
    site, lowest, highest, size = found
    for kernel in kernels:
        local = site - kernel.first_site
        if 0 <= local < len(kernel.check_messages):
            raise kernel.bounds_error(local, lowest, highest, size)
    found = f"index {lowest}" if lowest == highest else f"indices {lowest} to {highest}"
    raise BoundsCheckError(f"an out-of-bounds access on {rt.device} ({found}, size {size}; check {site} of a "
                           "module whose kernels are not the ones just run)")


def failed_host_check(specs, value) -> Optional[tuple]:
    """``(site, lowest, highest, size)`` of the first of the host's bounds checks ``specs``
    (`compiler.cuda_spec.HostCheckSpec`) that fails, ``value(text)`` evaluating a dimension
    text for the call's sizes; None when they all hold. A check whose loops do not run (its
    ``runs_if`` not positive) holds."""
    for spec in specs:
        if spec.runs_if is not None and value(spec.runs_if) <= 0:
            continue
        lo, hi, n = value(spec.lowest), value(spec.highest), value(spec.size)
        if lo < 0 or hi >= n:
            return spec.site, lo, hi, n
    return None


def _picker(positions: list):
    """A function taking the flat argument tuple to a kernel's arguments, in its order."""
    if not positions:
        return lambda args: ()
    if len(positions) == 1:
        i = positions[0]
        return lambda args: (args[i],)
    return operator.itemgetter(*positions)


def _literal(text):
    """A dimension text as an int when it is a literal, else the text (evaluated per call)."""
    if isinstance(text, int):
        return text
    s = str(text).strip()
    return int(s) if re.fullmatch(r"-?\d+", s) else s


class _Launch:
    """One ``__global__`` function of a `CUDAKernel`, prepared: the pycuda function (its
    argument format given), its launch dimensions (ints where they are literals) and where
    each of its arguments is in the flat argument tuple."""

    __slots__ = ("symbol", "func", "grid", "block", "shared", "pick", "shared_allowed")

    def __init__(self, spec, func, position) -> None:
        self.symbol = spec.kernel
        self.func = func
        func.prepare("".join(a.ctype for a in spec.args))
        self.grid = tuple(_literal(t) for t in spec.grid)
        self.block = tuple(_literal(t) for t in spec.block)
        self.shared = _literal(spec.dyn_shared_bytes)
        self.pick = _picker([position(a) for a in spec.args])
        self.shared_allowed = DEFAULT_DYNAMIC_SHARED_LIMIT


class CUDAKernel:
    """A prim_func compiled for CUDA, loaded on one GPU: its ``__global__`` functions,
    launched in order on the current stream.

    Called like a CPU `runtime.kernel.Kernel`, destination-passing style: ``kernel(a, b, out)``
    with tensors on this GPU (or PyTorch/CuPy GPU tensors, used without a copy) and numbers,
    checked (count, device, dtype, rank, static dims, symbolic dims binding) before launching.
    `launch` is the unchecked entry the VM calls, with the flat arguments of the CPU kernels'
    ABI: buffer data addresses, scalar arguments, symbolic dim values. The launch dimensions
    and workspace sizes for one set of symbolic values are evaluated once and kept."""

    _MAX_PLANS = 256

    def __init__(self, func, get_function, rt, ptxas=None) -> None:
        self.name = func.name
        self.span = getattr(func, "span", None)
        self._ptxas = dict(ptxas or {})  # kernel symbol -> what ptxas reported (registers, shared memory)
        self.params = list(func.params)
        self.sym_vars = list(func.sym_vars)
        self.device = rt.device
        self._rt = rt
        self.generation = rt.generation  # the context it was loaded in (`DeviceRuntime.recreate`)
        self._buffer_idx = [i for i, p in enumerate(self.params) if p.kind == "buffer"]
        self._scalar_idx = [i for i, p in enumerate(self.params) if p.kind != "buffer"]
        nb, ns = len(self._buffer_idx), len(self._scalar_idx)
        self._sym_start = nb + ns
        ws_start = nb + ns + len(self.sym_vars)
        sym_pos = {name: nb + ns + k for k, name in enumerate(self.sym_vars)}
        # Bounds checks the compiler left to run time (`compiler.cuda_spec.BoundsChecks`), and
        # where their failures are in the PrimFunc (`compiler.kernel_places`).
        checks = getattr(func, "checks", None)
        self.check_messages = list(checks.messages) if checks is not None else []
        self.first_site = checks.first_site if checks is not None else 0
        self.checks_on_device = bool(checks is not None and checks.device)
        self.host_checks = list(checks.host) if checks is not None else []
        self.places = getattr(func, "places", None)

        def position(arg) -> int:
            if arg.kind == "buffer":
                return arg.index
            if arg.kind == "scalar":
                return nb + arg.index
            if arg.kind == "sym" and arg.name in sym_pos:
                return sym_pos[arg.name]
            if arg.kind == "workspace":
                return ws_start + arg.index
            if arg.kind == "errors":  # after the workspaces: the device's error record
                return ws_start + len(func.workspaces)
            raise ValueError(f"{self.name}: a kernel argument the runtime cannot supply: {arg}")

        self._launches = [_Launch(spec, get_function(spec.kernel), position) for spec in func.launches]
        self._workspaces = [_literal(t) for t in func.workspaces]
        self._plans: dict = {}
        # Integer scalar parameters the launch dimensions use (a fused kernel may take a
        # symbolic size as an argument rather than from a buffer shape): (position, name).
        texts = [t for ln in self._launches for t in (*ln.grid, *ln.block, ln.shared)] + self._workspaces
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(t for t in texts if isinstance(t, str))))
        self._dim_scalars = [(nb + k, self.params[i].name) for k, i in enumerate(self._scalar_idx)
                             if self.params[i].name in used and self.params[i].name not in sym_pos
                             and self.params[i].dtype.startswith(("int", "uint"))]

    def __repr__(self) -> str:
        return f"CUDAKernel({self.name}({', '.join(p.describe() for p in self.params)}) on {self.device})"

    # ---- unchecked
    def launch(self, *args) -> None:
        """Launch with buffer data addresses (parameter order), then the scalar arguments,
        then the values of `sym_vars`: no checks."""
        rt = self._rt
        if cuda._thread.runtime is not rt:  # the state `runtime.cuda` keeps per thread
            rt.activate()
        syms = args[self._sym_start:]
        if self._dim_scalars:
            syms += tuple(args[i] for i, _ in self._dim_scalars)
        plan = self._plans.get(syms)
        if plan is None:
            plan = self._plan(syms)
        steps, workspace_sizes = plan
        stream = rt.current_stream()
        if workspace_sizes:
            scratch = [rt.pool.malloc(n, stream) for n in workspace_sizes]  # back to the pool on return
            args += tuple(b.ptr for b in scratch)
        if self.checks_on_device:
            args += (rt.error_record,)
        raw = stream.raw
        rt.launched.append(self.name)
        try:
            for call, grid, block, shared, pick in steps:
                call(grid, block, raw, *pick(args), shared_size=shared)
        except Exception as err:
            raise self._launch_error(err) from err
        if self.checks_on_device:
            raise_bounds_failure(rt, (self,))

    def launch_on(self, stream, malloc, args: tuple, errors: int = 0) -> int:
        """`launch` on driver stream ``stream``, its workspaces from ``malloc(nbytes)`` (a pool
        block), a failed bounds check noted in error record ``errors``; the number of
        ``__global__`` launches made. What a CUDA graph's capture runs (`runtime.vm_cuda_graph`):
        there the stream is capturing, and the memory and the error record are the graph's.
        Kept apart from `launch`, which the VM calls on every kernel of every call."""
        rt = self._rt
        if cuda._thread.runtime is not rt:
            rt.activate()
        syms = args[self._sym_start:]
        if self._dim_scalars:
            syms += tuple(args[i] for i, _ in self._dim_scalars)
        steps, workspace_sizes = self._plans.get(syms) or self._plan(syms)
        scratch = [malloc(n) for n in workspace_sizes]
        args += tuple(b.ptr for b in scratch)
        if self.checks_on_device:  # the graph's replay reads the record (`runtime.vm_cuda_graph`)
            args += (errors,)
        try:
            for call, grid, block, shared, pick in steps:
                call(grid, block, stream, *pick(args), shared_size=shared)
        except Exception as err:
            raise self._launch_error(err) from err
        return len(steps)

    def _launch_error(self, err: Exception) -> DeviceError:
        """A launch the driver refused (or a fault an earlier kernel left it), as a `DeviceError`
        naming this kernel, placed at its prim_func."""
        sticky = is_sticky(str(err))
        if sticky:
            self._rt.lost = _one_line(err)
        return DeviceError(f"{self.name}: launching a kernel on {self.device} failed: {_one_line(err)}", self.span,
                           sticky=sticky)

    def call_raw(self, pointers, syms=(), scalars=()) -> None:
        """`launch` with the buffers' addresses, the values of `sym_vars` and the scalar
        arguments given apart."""
        self.launch(*pointers, *scalars, *syms)

    def _plan(self, syms: tuple) -> tuple:
        """The launches for these values of the symbolic variables (then of `_dim_scalars`):
        (pycuda call, grid, block, shared bytes, argument picker) each, empty grids left out;
        and the workspace sizes."""
        env = dict(zip([*self.sym_vars, *(name for _, name in self._dim_scalars)], syms))
        self._run_host_checks(env)  # a failing one raises: no plan is kept, nothing is launched
        steps = []
        for ln in self._launches:
            grid = tuple(self._dim(d, env, ln, "grid") for d in ln.grid)
            block = tuple(self._dim(d, env, ln, "block") for d in ln.block)
            shared = self._dim(ln.shared, env, ln, "dynamic shared memory")
            if 0 in grid or 0 in block:
                continue  # nothing to run (a dimension of extent 0)
            self._check_fits(ln, grid, block, shared)
            if shared > ln.shared_allowed:
                ln.func.set_attribute(self._rt.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
                ln.shared_allowed = shared
            steps.append((ln.func.prepared_async_call, grid, block, shared, ln.pick))
        sizes = tuple(self._dim(w, env, None, "workspace") for w in self._workspaces)
        if len(self._plans) >= self._MAX_PLANS:
            self._plans.clear()
        plan = self._plans[syms] = (steps, sizes)
        return plan

    def _check_fits(self, ln, grid: tuple, block: tuple, shared: int) -> None:
        """A `LaunchConfigError` naming the limit when launch ``ln`` with these dimensions
        cannot run on this device, read from its attributes (`DeviceRuntime.limits`): threads
        per block, block and grid dimensions, shared memory (the kernel's static, by ptxas, plus
        the launch's dynamic) and registers (ptxas's per thread, times the threads: the driver
        rounds up, so a launch over the limit here is certain to fail there). What the driver
        would refuse with a bare "too many resources requested for launch"."""
        limits = self._rt.limits
        where = f"{self.name}: kernel '{ln.symbol}'"
        device = f"{self.device} ({self._rt.name})"

        def over(what: str, needed: int, limit: str, unit: str) -> None:
            most = limits.get(limit)
            if most is not None and needed > most:
                raise LaunchConfigError(f"{where} {what} {needed} {unit}; {device} allows at most {most} ({limit})",
                                        self.span)

        threads = block[0] * block[1] * block[2]
        over("needs", threads, "MAX_THREADS_PER_BLOCK", "threads per block")
        for axis, n in zip("XYZ", block):
            over(f"has a block dimension {axis.lower()} of", n, f"MAX_BLOCK_DIM_{axis}", "threads")
        for axis, n in zip("XYZ", grid):
            over(f"has a grid dimension {axis.lower()} of", n, f"MAX_GRID_DIM_{axis}", "blocks")
        info = self._ptxas.get(ln.symbol)
        static = getattr(info, "shared_bytes", 0)
        over(f"needs ({static} static + {shared} dynamic =)", static + shared, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
             "bytes of shared memory per block")
        registers = getattr(info, "registers", 0)
        over(f"needs ({registers} per thread x {threads} threads =)", registers * threads, "MAX_REGISTERS_PER_BLOCK",
             "registers per block")

    def _run_host_checks(self, env: dict) -> None:
        """The bounds checks hoisted out of every kernel (`compiler.cuda_spec.HostCheckSpec`),
        for these sizes: a `BoundsCheckError` for the first that fails."""
        found = failed_host_check(self.host_checks, lambda text: self._dim(text, env, None, "bounds check", signed=True))
        if found is not None:
            raise self.bounds_error(*found)

    def place(self, error) -> None:
        """Give a failure of this kernel (a `KernelAssertionError`) its span in the PrimFunc,
        as a CPU `runtime.kernel.Kernel` does (the VM asks, `runtime.sites`)."""
        place_in(error, self.places)

    def bounds_error(self, site: int, lowest: int, highest: int, size: int) -> BoundsCheckError:
        """The error of this function's check ``site`` (a place in `check_messages`), placed
        in its PrimFunc."""
        error = bounds_error(self.check_messages[site], lowest, highest, size)
        self.place(error)
        return error

    def _dim(self, dim, env: dict, ln, what: str, signed: bool = False) -> int:
        value = dim if isinstance(dim, int) else eval_dim_text(dim, env)
        where = f"kernel '{ln.symbol}'" if ln is not None else "a workspace"
        if value is None:
            raise ValueError(f"{self.name}: the {what} size of {where}, {dim!r}, uses a symbol that is not one of "
                             f"the kernel's symbolic variables ({', '.join(self.sym_vars) or 'none'})")
        if value < 0 and not signed:
            raise ValueError(f"{self.name}: the {what} size of {where}, {dim}, is {value} for "
                             f"{', '.join(f'{k} = {v}' for k, v in env.items())}")
        return value

    # ---- checked
    def __call__(self, *args) -> None:
        if self._rt.lost is not None:  # a sticky error lost the context: recreated first
            self._rt.recreate()
        if self.generation != self._rt.generation:
            raise DeviceError(f"{self.name}: this kernel was loaded in a CUDA context since lost to an error and "
                              "recreated; take it from the executable again (ex[name])", self.span)
        params = self.params
        check_arity(self.name, params, args)
        env: dict = {}
        origin: dict = {}
        deferred = []
        tensors = []
        for i in self._buffer_idx:
            spec = params[i]
            label = f"{self.name}: parameter '{spec.name}'"
            t = as_tensor_on(args[i], self.device, label, spec.name)
            if t is None:
                raise TypeError(f"{label} is a buffer ({spec.describe()}); got {_type_name(args[i])}, expected a "
                                f"tensor on {self.device}")
            if t._dtype != spec.dtype:
                raise TypeError(f"{label} expects dtype {spec.dtype}, got {t._dtype}")
            if len(t._shape) != len(spec.shape):
                raise ValueError(f"{label} expects a {len(spec.shape)}-d tensor (shape "
                                 f"({', '.join(map(str, spec.shape))})), got shape {t._shape}")
            dims = [(f"dimension {d}", want, got) for d, (want, got) in enumerate(zip(spec.shape, t._shape))]
            if spec.strides is not None:  # the tensor is compact: its strides must be what is declared
                dims += [(f"stride {d}", want, got) for d, (want, got) in enumerate(zip(spec.strides, t.strides))
                         if t._shape[d] > 1]
            for where, want, got in dims:
                if isinstance(want, int):
                    if want != got:
                        raise ValueError(f"{label} expects {where} to be {want}, got {got} (shape {t._shape})")
                elif not want.isidentifier():
                    deferred.append((want, got, f"{where} of '{spec.name}'"))
                elif want not in env:
                    env[want] = got
                    origin[want] = f"{where} of '{spec.name}'"
                elif env[want] != got:
                    raise ValueError(f"{label}: {where} is {got}, but symbol '{want}' is {env[want]} "
                                     f"(from {origin[want]})")
            tensors.append(t)
        scalars, syms = bind_scalars(self.name, params, self._scalar_idx, self.sym_vars, args, env, origin,
                                     deferred)
        self._rt.order_after(tensors, self._rt.current_stream())
        self.launch(*(t._ptr for t in tensors), *scalars, *syms)
