"""Apache TVM's Python names for compiling and running, wired onto tvmscript's namespaces::

    ex = tvms.compile(mod, target="llvm")           # also tvms.relax.build / tvms.relax.vm.build
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    out = vm["main"](tvms.nd.array(x), *params)     # NumPy arrays are accepted too
    out.numpy()

    @tvms.register_func("env.linear", override=True)
    def linear(x, w, b, out): ...

``tvms.nd`` (TVM before 0.21) and ``tvms.runtime.tensor`` / ``tvms.runtime.Tensor`` (0.21+)
import NumPy when first used, so ``import tvmscript`` stays fast for the CLI.
"""

from __future__ import annotations

import types

from .runtime.devices import Device, cpu, cuda, device, gpu
from .runtime.registry import get_global_func, list_global_func_names, register_func, remove_global_func
from .runtime.vm import VirtualMachine
from .runtime.executable import Executable

__all__ = ["compile", "build", "VirtualMachine", "Executable", "Device", "cpu", "cuda", "gpu", "device",
           "register_func", "get_global_func", "list_global_func_names", "remove_global_func"]


def build(mod, target="llvm", params=None, exec_mode: str = "bytecode", system_lib=None, **kwargs) -> Executable:
    """Compile a lowered IRModule (``R.call_tir`` + prim_funcs) into an `Executable`."""
    from .compiler.build import build as _build

    return _build(mod, target, params=params, exec_mode=exec_mode, system_lib=system_lib, **kwargs)


def compile(mod, target="llvm", **kwargs) -> Executable:  # noqa: A001 - TVM's name
    """``tvms.compile(mod, target="llvm")``: TVM's newer spelling of ``relax.build``."""
    return build(mod, target, **kwargs)


# ---- TVM's older tvms.relax.vm namespace: build and VirtualMachine (tvms.relax.vm, served by tvms.relax)
vm_namespace = types.ModuleType("tvmscript.relax.vm", "TVM's relax.vm: build and VirtualMachine.")
vm_namespace.build = build
vm_namespace.VirtualMachine = VirtualMachine
vm_namespace.Executable = Executable


def __getattr__(name: str):
    """Lazy attributes of the tvmscript package (re-exported there): ``nd``, ``Tensor``."""
    from .runtime import ndarray  # NumPy, loaded on first use

    if name == "nd":
        return ndarray
    if name in ("Tensor", "NDArray"):
        return ndarray.Tensor
    raise AttributeError(f"module 'tvmscript' has no attribute '{name}'")
