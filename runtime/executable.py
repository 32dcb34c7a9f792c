"""The executable: what `tvms.compile` produces and `VirtualMachine` runs.

It holds the compiled kernels (one per ``T.prim_func``: CPU machine code, or for a ``cuda``
target the `compiler.cuda_spec.CUDAFunction`s of ``cuda_code``, loaded onto a GPU only when
something runs there) and, for each Relax function, the Python code the VM runs for it:
`compiler.vm_codegen` translates the function once into straight-line Python (validation of
the arguments, then one line per binding, with the kernels, output shapes and allocations
resolved at build time), so a call does no IR walking at all. ``ex.as_python()`` shows that
code. Everything the VM reads here is plain data (or code) the compiler made: the runtime
never looks at the IR (``mod`` is kept for inspection only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .devices import Device, cuda, device as as_device, kDLCPU, kDLCUDA

__all__ = ["Executable", "VMFunction", "FuncSig", "compile_source"]


@dataclass(eq=False)
class FuncSig:
    """What the VM needs to explain a bad call of a Relax function: its name, its parameters
    (name, and struct info as a `runtime.value_specs` spec), where each symbolic dimension
    gets its value and the range it must lie in."""

    name: str
    param_names: list
    param_specs: list
    # symbolic dim name -> (parameter index, path inside it such as "dimension 0")
    sym_origin: dict = field(default_factory=dict)
    # symbolic dim name -> (lowest, highest) allowed value, None where unbounded: the function's
    # tir_var_lower_bound / tir_var_upper_bound, checked at entry
    sym_bounds: dict = field(default_factory=dict)

    def describe_params(self) -> str:
        return ", ".join(self.param_names)


def compile_source(source: str, filename: str):
    """The code object of a VM function's Python ``source`` (``filename`` names it in
    tracebacks): the build compiles what it generates, a loaded library what it kept."""
    return compile(source, filename, "exec")


@dataclass(eq=False)
class VMFunction:
    """A Relax function compiled for the VM.

    ``code`` is a code object that, executed in the VM's globals, defines ``pyname``. The VM
    supplies the names it refers to: ``kernels`` (global name -> kernel name in the
    executable), ``constants`` (global name -> NumPy array, wrapped as tensors once per VM),
    ``objects`` (global name -> any Python object: signatures, value specs, kernels, sites)
    and, when the function has an arena, ``arena`` (list of (byte offset, shape, dtype)) with
    ``arena_bytes`` in total: intermediate tensors that never leave the function live there and
    are reused from call to call. ``sites`` say which binding each line computes, so an error
    raised there is told at its place in the source (`runtime.sites`). ``cuda_graph``: the
    compiler found the function capturable as a CUDA graph, and the VM on a GPU replays it."""

    name: str
    pyname: str
    sig: FuncSig
    source: str
    code: Any
    kernels: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)
    objects: dict = field(default_factory=dict)
    arena: list = field(default_factory=list)
    arena_bytes: int = 0
    arena_names: tuple = ("", "")  # global names of the frame pool and the frame factory
    num_kernel_calls: int = 0
    sites: dict = field(default_factory=dict)  # line of ``source`` -> the runtime.sites.Site it computes
    # On a GPU, calls replay a CUDA graph captured on the first call with those arguments
    # (`runtime.vm_cuda_graph`); else ``cuda_graph_note`` says why not (the build's RewriteCUDAGraph).
    cuda_graph: bool = False
    cuda_graph_note: str = ""


class Executable:
    """A compiled module: ``ex["linear0"]`` is the kernel of prim_func ``linear0`` (callable
    destination-passing style, ``ex["linear0"](x, w, b, out)``; for a ``cuda`` target, loaded
    on ``cuda:0``); Relax functions run through ``tvms.relax.VirtualMachine(ex, tvms.cpu())``
    (``tvms.cuda()`` for a ``cuda`` target)."""

    def __init__(self, mod, target: str, kernels: dict, functions: dict, *, cuda_code=None) -> None:
        self.mod = mod
        self.target = target
        self.kernels = dict(kernels)          # prim_func name -> runtime.kernel.Kernel / cuda_spec.CUDAFunction
        self.functions = dict(functions)      # Relax function name -> VMFunction
        self.cuda_code = cuda_code            # compiler.cuda_spec.CUDACode, for a cuda target
        self._loaded: dict = {}               # Device -> runtime.cuda_kernels.CUDAModule
        self._runnable = False                # the CPU kernels' modules said they run here

    @property
    def device_type(self) -> int:
        """The DLPack code of the devices the code runs on: 2 (CUDA) for a ``cuda`` target,
        1 (the CPU) otherwise."""
        return kDLCUDA if self.target.split()[:1] == ["cuda"] else kDLCPU

    def kernels_on(self, dev) -> dict:
        """The kernels, ready to run on ``dev``: the CPU kernels as they are; for a ``cuda``
        target, ``cuda_code`` loaded onto that GPU (once per device, and again after its context
        was recreated)."""
        dev = dev if isinstance(dev, Device) else as_device(dev)
        if dev.device_type != self.device_type:
            raise ValueError(f"the executable was compiled for target '{self.target}'; its kernels do not run on {dev}")
        if self.device_type != kDLCUDA or not self.kernels:
            self._check_runnable()
            return self.kernels
        module = self._loaded.get(dev)
        if module is None or module.generation != module.runtime.generation:  # none yet, or lost with a context
            if self.cuda_code is None:
                raise ValueError("the executable has CUDA kernels but no CUDA code (cuda_code) to load")
            from .cuda_kernels import load_module

            module = self._loaded[dev] = load_module(self.cuda_code, dev)
        return module.kernels

    def _check_runnable(self) -> None:
        """A RuntimeError when the CPU kernels were generated for a CPU this machine may not
        be (``llvm -mcpu=...``; `runtime.cpu.CPUModule.check_runnable`)."""
        if not self._runnable:
            for kernel in self.kernels.values():
                check = getattr(getattr(kernel, "module", None), "check_runnable", None)
                if check is not None:
                    check()
            self._runnable = True

    # ---- lookup
    def __getitem__(self, name: str):
        if name in self.kernels:
            if self.device_type == kDLCUDA:
                return self.kernels_on(cuda(0))[name]
            self._check_runnable()
            return self.kernels[name]
        if name in self.functions:
            dev = "tvms.cuda()" if self.device_type == kDLCUDA else "tvms.cpu()"
            raise KeyError(f"'{name}' is a Relax function: run it with tvms.relax.VirtualMachine(ex, {dev})['{name}']")
        raise KeyError(f"the executable has no function named '{name}' (it has: {', '.join(self.keys()) or 'none'})")

    def __contains__(self, name) -> bool:
        return name in self.kernels or name in self.functions

    def keys(self) -> list:
        return list(self.functions) + list(self.kernels)

    def get_function(self, name: str, query_imports: bool = False):
        return self[name]

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return name in self

    # ---- deployment
    def export_library(self, path, cc=None) -> str:
        """Save the executable as a shared library (`runtime.library`): kernels and VM program,
        loaded later with ``tvms.runtime.load_module(path)`` without compiling."""
        from .library import export_library

        return export_library(self, os.fspath(path), cc=cc)

    # ---- inspection, with TVM's names
    def as_python(self) -> str:
        """The Python code the VM runs for each Relax function."""
        return "\n\n".join(f.source for f in self.functions.values())

    def as_text(self) -> str:
        return self.as_python()

    def kernel_resources(self) -> dict:
        """For a ``cuda`` target, what each CUDA kernel uses of the GPU as ptxas reported it when
        compiling (registers, spills, shared memory) and the occupancy that gives on the code's
        architecture: kernel name -> `compiler.kernel_resources.KernelResources` (``.func``
        names the prim_func launching it). Empty for the CPU. Known without a GPU."""
        code = self.cuda_code
        return dict(code.resources) if code is not None else {}

    def stats(self) -> str:
        lines = [f"target: {self.target}", f"kernels: {len(self.kernels)} ({', '.join(self.kernels)})"]
        code = self.cuda_code
        if code is not None:
            image = f"CUBIN, {len(code.cubin)} bytes" if code.cubin is not None else "PTX" if code.ptx else "no code"
            lines.append(f"cuda: {code.arch}, {image}")
        for f in self.functions.values():
            lines.append(
                f"function {f.name}({f.sig.describe_params()}): {f.num_kernel_calls} kernel call site(s), "
                f"{len(f.constants)} constant(s), arena {f.arena_bytes} bytes in {len(f.arena)} tensor(s)"
            )
            if code is not None:
                lines.append(f"  CUDA graph: {'yes' if f.cuda_graph else 'no, ' + (f.cuda_graph_note or 'not marked')}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<tvms Executable target={self.target!r} functions={list(self.functions)} "
                f"kernels={list(self.kernels)}>")
