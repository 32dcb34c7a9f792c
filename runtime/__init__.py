"""tvmscript.runtime: everything that executes — tensors and devices, the extern function
registry, compiled CPU kernels loaded into the process (`cpu.py`, `kernel.py`), the CUDA
runtime (`cuda.py`: GPU tensors and memory pool, through pycuda; `cuda_kernels.py`), the
executable and the Relax VM.

The runtime sits below the IR and the compiler and imports neither: what it needs of them
(kernels' signatures and failure places, the VM's program, the annotations it checks values
against, the text of its error messages) the compiler hands over as data in the `Executable`.

TVM's runtime names are served from here on first use (``tvms.runtime.tensor(x)``,
``tvms.runtime.Tensor``, ``tvms.runtime.VirtualMachine``...), so importing the package does not
load NumPy or LLVM. ``tvms.runtime.cuda`` is the CUDA runtime module, which can also be called
as TVM's ``tvm.runtime.cuda(0)`` is, to name a GPU.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Tensor": ("ndarray", "Tensor"), "NDArray": ("ndarray", "Tensor"), "tensor": ("ndarray", "tensor"),
    "array": ("ndarray", "array"), "empty": ("ndarray", "empty"), "from_dlpack": ("ndarray", "from_dlpack"),
    "Device": ("devices", "Device"), "cuda": ("cuda", None), "device": ("devices", "device"),
    "gpu": ("devices", "gpu"),
    "register_func": ("registry", "register_func"), "get_global_func": ("registry", "get_global_func"),
    "VirtualMachine": ("vm", "VirtualMachine"), "Executable": ("executable", "Executable"),
    "load_module": ("library", "load_module"),
}


def __getattr__(name: str):
    spec = _EXPORTS.get(name)
    if spec is None:
        raise AttributeError(f"module 'tvmscript.runtime' has no attribute '{name}'")
    module = importlib.import_module(f"{__name__}.{spec[0]}")
    value = module if spec[1] is None else getattr(module, spec[1])
    globals()[name] = value
    return value
