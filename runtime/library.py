"""Compiled modules as shared libraries: ``ex.export_library("model.so")`` and
``load_module("model.so")``.

A model is compiled once and then loaded by any process on a machine with the same CPU
features, with no parsing, no pipeline, no schedule and no LLVM::

    ex = tvms.compile(mod, target="llvm")
    ex.export_library("model.so")
    ...
    loaded = tvms.runtime.load_module("model.so")
    vm = tvms.relax.VirtualMachine(loaded, tvms.cpu())

What the library holds:

* the kernels' machine code: the very object code the JIT loaded (`runtime.cpu.CPUModule.
  object_code`; position-independent, see `runtime.host_cpu.HostTarget.target_machine`);
* the VM's program, in a read-only data section between the symbols
  ``tvms_library_program`` and ``tvms_library_program_end``: a pickle of each Relax
  function's Python code and what it refers to (signatures, constants, the kernels by name),
  the places of the kernels' failures, the lowered module (to inspect: the loader does not
  need it), and the host the code was built for;
* two small C functions, ``tvms_assert_fail`` and ``tvms_bounds_fail``, that forward a failed
  check to the function pointers ``load_module`` sets: in the JIT those symbols are Python
  callbacks LLVM resolves, which a library loaded by the dynamic linker cannot see; and the
  thread count the parallel loops read (``tvms_num_threads``), which ``load_module`` sets to
  the runtime's (`runtime.cpu.num_threads`), and the library's budget of scratch blocks kept
  between calls (``tvms_scratch_budget``, `runtime.cpu.scratch_budget`).

Linking needs a C compiler (``$CC``, else ``cc``), as TVM's ``export_library`` does; loading
needs only the dynamic linker. A library is code: load only libraries you trust, as with any
``.so`` (and the program is a pickle).
"""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import shutil
import subprocess
import tempfile
from typing import Optional

from . import host_cpu

__all__ = ["export_library", "load_module", "LibraryError", "LibraryModule"]

PROGRAM_FORMAT = "tvms-library-3"  # 3: the kernels read tvms_num_threads
_PROGRAM_START = "tvms_library_program"
_PROGRAM_END = "tvms_library_program_end"

# The callbacks kernels call on a failed check, forwarding to pointers the loader sets, and
# the VM program (assembled from a file with .incbin: no size limit, no escaping).
_GLUE_C = r"""
#include <stdint.h>
int32_t tvms_num_threads = 1;
int64_t tvms_scratch_budget = 0;
void (*tvms_assert_fail_ptr)(const char *) = 0;
void (*tvms_bounds_fail_ptr)(const char *, int64_t, int64_t, int64_t) = 0;
void tvms_assert_fail(const char *message) { tvms_assert_fail_ptr(message); }
void tvms_bounds_fail(const char *message, int64_t lowest, int64_t highest, int64_t size) {
    tvms_bounds_fail_ptr(message, lowest, highest, size);
}
__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl tvms_library_program\n"
        "tvms_library_program:\n"
        ".incbin \"%(program)s\"\n"
        ".globl tvms_library_program_end\n"
        "tvms_library_program_end:\n"
        ".byte 0\n"
        ".previous\n");
"""


class LibraryError(RuntimeError):
    """A library cannot be written (no C compiler, a target without one) or loaded (not a tvms
    library, built for another CPU or another tvms)."""


# ----------------------------------------------------------------------------- export


def export_library(ex, path: str, cc: Optional[str] = None) -> str:
    """Write ``ex`` (an `Executable` for the CPU) to the shared library ``path``; returns the
    path. The file appears whole or not at all."""
    from .cpu import CPUModule

    if ex.device_type != 1:
        raise LibraryError(f"export_library writes CPU executables; this one was compiled for '{ex.target}'")
    owners = _kernel_modules(ex, CPUModule)
    compiler = cc or os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise LibraryError(f"export_library links with a C compiler, and '{compiler}' was not found "
                           "(install gcc or clang, or set CC)")
    program = _program_bytes(ex, owners)
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory(prefix="tvms-export-") as work:
        objects = []
        for i, module in enumerate(owners):
            obj = os.path.join(work, f"kernels{i}.o")
            with open(obj, "wb") as f:
                f.write(module.object_code)
            objects.append(obj)
        program_file = os.path.join(work, "program.bin")
        with open(program_file, "wb") as f:
            f.write(program)
        glue = os.path.join(work, "glue.c")
        with open(glue, "w", encoding="utf-8") as f:
            f.write(_GLUE_C % {"program": program_file.replace("\\", "\\\\").replace('"', '\\"')})
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tvms-", suffix=".so")
        os.close(fd)
        libs = ["-lgomp"] if any(m.parallel_runtime == "gomp" for m in owners) else []
        cmd = [compiler, "-shared", "-fPIC", "-O2", "-o", tmp, glue, *objects, *libs, "-lm"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise LibraryError(f"linking {path} failed ({' '.join(cmd[:2])} ...):\n{proc.stderr.strip()}")
            os.chmod(tmp, 0o755 & ~_umask())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _kernel_modules(ex, module_type) -> list:
    """The `CPUModule`s that hold ``ex``'s kernels (usually one), each with its object code."""
    owners: list = []
    for name, kernel in ex.kernels.items():
        owner = getattr(kernel, "_owner", None)
        if not isinstance(owner, module_type) or not owner.object_code:
            raise LibraryError(f"kernel '{name}' has no machine code to export (it was not built by build_cpu)")
        if all(owner is not o for o in owners):
            owners.append(owner)
    symbols = [info.symbol for m in owners for info in m.infos]
    if len(symbols) != len(set(symbols)):
        raise LibraryError("the executable's kernels come from modules with clashing symbol names")
    return owners


class _ProgramPickler(pickle.Pickler):
    """Pickles the VM's program, writing each kernel as a reference by name (the loader binds
    it to the library's code)."""

    def __init__(self, file, kernel_type) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.kernel_type = kernel_type

    def persistent_id(self, obj):
        if isinstance(obj, self.kernel_type):
            return ("kernel", obj.name)
        return None


def _program_bytes(ex, owners: list) -> bytes:
    """The program: a plain pickle of the header and the kernels' descriptions, holding the
    pickle of the functions and the lowered module (whose kernel references the loader can
    resolve only once the kernels are bound)."""
    from .kernel import Kernel

    kernels = {info.name: info for m in owners for info in m.infos}
    functions = {name: _function_state(f) for name, f in ex.functions.items()}
    places = {name: k.places for name, k in ex.kernels.items() if k.places is not None}
    try:
        body = _pickled({"functions": functions, "places": places, "mod": ex.mod}, Kernel)
    except (pickle.PicklingError, TypeError, AttributeError):
        try:  # the lowered module is there to be inspected: the program runs without it
            body = _pickled({"functions": functions, "places": places, "mod": None}, Kernel)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise LibraryError(f"the executable's VM program cannot be saved: {err}") from None
    built_for = {m.target for m in owners} or {host_cpu.host_target()}
    if len(built_for) > 1:
        raise LibraryError("the executable's kernels were compiled for different CPUs: "
                           f"{', '.join(sorted(t.cpu for t in built_for))}")
    header = {
        "format": PROGRAM_FORMAT,
        "host": built_for.pop(),  # the CPU the kernels were generated for, which the loader checks
        "target": ex.target,
        "parallel": sorted({m.parallel_runtime for m in owners}),
        "kernels": [kernels[k.name] for k in ex.kernels.values()],
        "body": body,
    }
    return pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)


def _pickled(value, kernel_type) -> bytes:
    buffer = io.BytesIO()
    _ProgramPickler(buffer, kernel_type).dump(value)
    return buffer.getvalue()


def _function_state(f) -> dict:
    """A `VMFunction` without its code object (compiled again from ``source`` on loading)."""
    state = dict(vars(f))
    state.pop("code")
    return state


# ----------------------------------------------------------------------------- load


class LibraryModule:
    """A loaded library's kernels, by prim_func name; holds the library open."""

    def __init__(self, path: str, handle: ctypes.CDLL, infos: list) -> None:
        self.path = path
        self._handle = handle
        self.infos = list(infos)  # runtime.kernel_abi.KernelInfo of each kernel
        self.kernels: dict = {}

    def get_source(self, fmt: str = "llvm") -> str:
        raise LibraryError(f"{self.path} holds machine code only; compile the .tvms file to see its {fmt}")

    def __repr__(self) -> str:
        return f"LibraryModule({self.path}: {', '.join(self.kernels)})"


class _ProgramUnpickler(pickle.Unpickler):
    def __init__(self, file, kernels: dict) -> None:
        super().__init__(file)
        self.kernels = kernels

    def persistent_load(self, pid):
        kind, name = pid
        if kind != "kernel" or name not in self.kernels:
            raise pickle.UnpicklingError(f"the program refers to an unknown kernel {name!r}")
        return self.kernels[name]


def load_module(path: str):
    """The `Executable` saved in the shared library ``path`` by ``export_library``."""
    from . import kernel as kernel_mod
    from .cpu import bind_kernels, num_threads, parallel_runtime, scratch_budget
    from .kernel_abi import SCRATCH_BUDGET_SYMBOL, THREADS_SYMBOL
    from .executable import Executable, VMFunction, compile_source

    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise LibraryError(f"{path}: no such file")
    runtime = parallel_runtime()  # libgomp first, with tvms's wait policy
    try:
        handle = ctypes.CDLL(path)
    except OSError as err:
        raise LibraryError(f"cannot load {path}: {err}") from None
    program = _read_program(handle, path)
    _check_host(program["host"], host_cpu.host_target(), path)
    if "gomp" in program["parallel"] and runtime != "gomp":
        raise LibraryError(f"{path} runs parallel loops on libgomp, which this process cannot load")
    # The kernels' check callbacks (the glue's forwarding functions call through these).
    callbacks = {"tvms_assert_fail_ptr": kernel_mod.assert_callback_address(),
                 "tvms_bounds_fail_ptr": kernel_mod.bounds_callback_address()}
    for pointer, address in callbacks.items():
        ctypes.c_void_p.in_dll(handle, pointer).value = address
    ctypes.c_int32.in_dll(handle, THREADS_SYMBOL).value = num_threads()
    try:  # (a library exported before kernels kept scratch blocks has no budget)
        ctypes.c_int64.in_dll(handle, SCRATCH_BUDGET_SYMBOL).value = scratch_budget()
    except ValueError:
        pass

    def address_of(symbol: str) -> int:
        try:
            return ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
        except AttributeError:
            raise LibraryError(f"{path} has no code for kernel symbol {symbol}") from None

    holder = LibraryModule(path, handle, program["kernels"])
    bind_kernels(holder, address_of)
    try:
        body = _ProgramUnpickler(io.BytesIO(program["body"]), holder.kernels).load()
    except Exception as err:  # noqa: BLE001 - a damaged program
        raise LibraryError(f"{path}: its VM program cannot be read ({type(err).__name__}: {err})") from None
    functions = {}
    for name, state in body["functions"].items():
        state = dict(state)
        state["code"] = compile_source(state["source"], f"<tvms {os.path.basename(path)}:{name}>")
        functions[name] = VMFunction(**state)
    places = body["places"]
    kernels = {name: k.compiled_from(places[name]) if name in places else k  # places its failures
               for name, k in holder.kernels.items()}
    return Executable(body["mod"], program["target"], kernels, functions)


def _read_program(handle, path: str) -> dict:
    try:
        start = ctypes.addressof(ctypes.c_char.in_dll(handle, _PROGRAM_START))
        end = ctypes.addressof(ctypes.c_char.in_dll(handle, _PROGRAM_END))
    except ValueError:
        raise LibraryError(f"{path} is a shared library, but not one tvms wrote (export_library)") from None
    try:
        program = pickle.loads(ctypes.string_at(start, end - start))
    except Exception as err:  # noqa: BLE001 - a damaged or foreign program
        raise LibraryError(f"{path}: its VM program cannot be read ({type(err).__name__}: {err})") from None
    if not isinstance(program, dict) or program.get("format") != PROGRAM_FORMAT:
        found = program.get("format") if isinstance(program, dict) else type(program).__name__
        raise LibraryError(f"{path} was written by another version of tvms (format {found!r}, this one reads "
                           f"{PROGRAM_FORMAT!r}): export it again")
    return program


def _check_host(built_for, host, path: str) -> None:
    """Refuse a library whose code uses instructions this CPU lacks (it would crash with an
    illegal instruction, not an error)."""
    reason = built_for.unrunnable_on(host)
    if reason:
        raise LibraryError(f"{path} cannot run here: {reason}; compile it again for this machine")
