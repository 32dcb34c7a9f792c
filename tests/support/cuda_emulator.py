"""A CPU emulator of the CUDA C that `compiler.codegen_cuda` prints, for tests without a GPU.

The translation unit of a `cuda_spec.CUDACode` is compiled with g++ against
``tests/support/cuda_emulator_shim.h`` (CUDA's qualifiers, built-in variables, ``half``,
``nv_bfloat16``, vector types, math functions, ``__syncthreads`` and ``__shfl_xor_sync``, and in
``cuda_emulator_ptx.h`` the helpers of PTX's ldmatrix, mma.sync and cp.async), and each
``extern "C" __global__`` kernel gets a launcher ``tvms_emu_<kernel>(gx, gy, gz, bx, by, bz,
void** args)`` (``args`` as ``cuLaunchKernel``'s ``kernelParams``: one pointer per kernel
argument, to its value). The threads of a block run as fibers on one OS thread, blocks one
after another (see the shim for the checks this makes possible: divergent barriers,
deadlocks, shuffles with lanes missing, reads of shared memory nothing wrote, indices past
fixed-size arrays, misaligned vector accesses).

`EmulatedModule.run` calls a prim_func destination-passing style, as the GPU runtime will: the
symbolic dimensions bind from the arrays' shapes (per the `ParamSpec`s), the workspaces are
allocated (filled with 0xff bytes, as device memory is not zeroed), and the launches run in
order, each with its grid, block and dynamic shared memory evaluated from its texts and its
arguments built from its `KernelArg`s. Each buffer is copied into a 256-byte aligned staging
allocation between two guard zones of 0xff bytes (NaN as a float), so that a kernel that reads
outside a buffer gets NaN and one that writes outside it is reported; the results are copied
back into the arrays::

    code = build_cuda({"matmul": func}, kind="source")
    mod = EmulatedModule(code)
    mod.run("matmul", a, b, c)          # c is written in place

    compare_with_cpu({"matmul": func})  # random inputs, emulator against the CPU backend

Hand-written CUDA C works too: ``EmulatedModule(source_text).launch(kernel, grid, block, *args)``.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

__all__ = ["EmulatedModule", "EmulationError", "EmulatorCompileError", "KernelInfo", "compare_with_cpu",
           "Comparison", "random_arguments", "bfloat16_bits", "bfloat16_to_float32", "SHIM"]

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_emulator_shim.h")
COUNTERS = os.path.join(os.path.dirname(SHIM), "cuda_emulator_counters.h")  # included by the shim
PTX = os.path.join(os.path.dirname(SHIM), "cuda_emulator_ptx.h")            # included by the shim

GUARD_BYTES = 4096            # each side of a staged buffer
ALIGNMENT = 256               # cudaMalloc's
STATIC_SHARED_LIMIT = 48 * 1024
# The most shared memory one block may use (static + dynamic, after cudaFuncSetAttribute).
SHARED_LIMITS = {"sm_70": 98304, "sm_75": 65536, "sm_80": 166912, "sm_86": 101376, "sm_87": 166912,
                 "sm_89": 101376, "sm_90": 232448, "sm_100": 232448, "sm_120": 101376}
EMULATOR_DYN_SMEM = 256 * 1024

# Compiled to an object first, then linked without -fsanitize: the shim defines the UBSan
# handlers itself, so no sanitizer runtime is loaded into the process. -fwrapv: signed
# overflow wraps, as on the GPU; -ftrivial-auto-var-init=pattern (GCC 12+, left out when g++
# lacks it): a local read before it is written holds 0xfe bytes, not whatever was there.
CXX_FLAGS = ["-std=c++20", "-O1", "-fPIC", "-pthread", "-fwrapv", "-fno-strict-aliasing", "-U_FORTIFY_SOURCE",
             "-ftrivial-auto-var-init=pattern", "-fsanitize=bounds,alignment"]
LINK_FLAGS = ["-shared", "-pthread"]
_OPTIONAL_FLAGS = ("-ftrivial-auto-var-init=pattern",)

_LETTERS = {"P": ctypes.c_void_p, "i": ctypes.c_int32, "q": ctypes.c_int64, "f": ctypes.c_float,
            "d": ctypes.c_double, "b": ctypes.c_int8, "B": ctypes.c_uint8, "h": ctypes.c_int16,
            "H": ctypes.c_uint16, "I": ctypes.c_uint32, "Q": ctypes.c_uint64}
# C parameter type -> the KernelArg letter that passes it.
_C_LETTERS = {"float": "f", "double": "d", "int": "i", "signed int": "i", "long long": "q", "long long int": "q",
              "long": "q", "unsigned int": "I", "unsigned": "I", "unsigned long long": "Q", "unsigned long": "Q",
              "signed char": "b", "char": "b", "unsigned char": "B", "short": "h", "unsigned short": "H",
              "bool": "B"}
_C_SIZES = {"float": 4, "double": 8, "int": 4, "long long": 8, "unsigned int": 4, "unsigned": 4,
            "unsigned long long": 8, "signed char": 1, "char": 1, "unsigned char": 1, "short": 2,
            "unsigned short": 2, "bool": 1, "half": 2, "__half": 2, "nv_bfloat16": 2, "__nv_bfloat16": 2,
            "float2": 8, "float4": 16, "double2": 16, "int2": 8, "int4": 16, "longlong2": 16, "half2": 4,
            "nv_bfloat162": 4, "char4": 4, "uchar4": 4}

_HEADER = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\(\s*(\d+)[^)]*\)\s+)?'
                     r'([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{')
_EXTERN_SHARED = re.compile(r'^(\s*)extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?(.+?)\s+([A-Za-z_]\w*)\s*'
                            r'\[\s*\]\s*;\s*$')
_SHARED_DECL = re.compile(r'__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([A-Za-z_][\w ]*?)\s+([A-Za-z_]\w*)\s*'
                          r'\[\s*(\d+)\s*\]\s*;')
_CUDA_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](cuda_fp16\.h|cuda_bf16\.h|cuda_runtime\.h|cuda\.h|'
                           r'cuda_fp8\.h|mma\.h)[>"]\s*$')


class EmulatorCompileError(RuntimeError):
    """g++ rejected the source (with the shim); ``log`` holds its messages."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


class EmulationError(RuntimeError):
    """A launch that a GPU would refuse, or that the emulator saw go wrong (a divergent barrier,
    a deadlock, an out-of-bounds write...). ``kernel`` names the kernel, ``messages`` the
    emulator's reports."""

    def __init__(self, message: str, kernel: str = "", messages: Optional[list] = None) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.messages = list(messages or [])


@dataclass
class KernelInfo:
    """A ``__global__`` function of the source: its parameters (C type, name), its
    ``__launch_bounds__`` (None if absent), the static shared memory it declares (bytes) and
    its lines in the source (1-based, inclusive)."""

    name: str
    params: list
    launch_bounds: Optional[int]
    static_shared_bytes: int
    lines: tuple


# ----------------------------------------------------------------------------- compiling

_cache_lock = threading.Lock()
_cache: dict = {}          # sha256 of the emulated source -> ctypes.CDLL
_cache_dir: Optional[str] = None

# The fibers' stacks, shared by every module of the process (one at a time): 1024 stacks of
# STACK_BYTES, reserved, not committed; the module that last launched holds them.
STACK_BYTES = 256 * 1024
MAX_THREADS = 1024
_launch_lock = threading.RLock()
_stacks: Optional[int] = None
_stacks_holder = None


def _workdir() -> str:
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = tempfile.mkdtemp(prefix="tvms_cuda_emu_")
        atexit.register(shutil.rmtree, _cache_dir, True)
    return _cache_dir


def _split_params(text: str) -> list:
    text = text.strip()
    if not text or text == "void":
        return []
    out = []
    for part in text.split(","):
        part = " ".join(part.replace("__restrict__", " ").split())
        m = re.match(r"^(.*?)\s*\b([A-Za-z_]\w*)$", part)
        if not m or not m.group(1):
            raise ValueError(f"cannot read the kernel parameter {part!r}")
        ctype = re.sub(r"\s*\*\s*", "*", m.group(1)).strip()
        out.append((ctype, m.group(2)))
    return out


def _type_size(ctype: str) -> int:
    """Bytes of a C type the code generator prints; 0 for one it does not (not counted)."""
    t = ctype.replace("const ", "").strip()
    if t.endswith("*"):
        return 8
    return _C_SIZES.get(t, 0)


def parse_kernels(source: str) -> dict:
    """name -> `KernelInfo` for each ``extern "C" __global__`` function of ``source`` (a
    header on one line or several; none inside a macro)."""
    out = {}
    for m in _HEADER.finditer(source):
        line_start = source.rfind("\n", 0, m.start()) + 1
        if source[line_start:m.start()].lstrip().startswith("#"):
            continue
        depth, i = 0, m.end() - 1
        while i < len(source):
            c = source[i]
            depth += c == "{"
            depth -= c == "}"
            if depth == 0:
                break
            i += 1
        body = source[m.end():i]
        shared = 0
        for sm in _SHARED_DECL.finditer(body):
            item = _type_size(sm.group(1).strip())
            shared += -(-item * int(sm.group(3)) // 16) * 16
        bounds = int(m.group(1)) if m.group(1) else None
        first = source.count("\n", 0, m.start()) + 1
        last = source.count("\n", 0, i) + 1
        out[m.group(2)] = KernelInfo(m.group(2), _split_params(m.group(3)), bounds, shared, (first, last))
    return out


def emulated_source(source: str, kernels: dict) -> str:
    """``source`` as g++ compiles it with the shim: the CUDA headers' includes and the
    ``extern __shared__`` declarations blanked or rewritten line for line (line numbers stay
    those of ``source``), and one launcher appended per kernel."""
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if _CUDA_INCLUDE.match(line):
            lines[i] = ""
            continue
        m = _EXTERN_SHARED.match(line)
        if m:
            indent, ctype, name = m.groups()
            lines[i] = f"{indent}{ctype}* const {name} = ({ctype}*)tvms_emu__dynamic_smem;"
    lines.append("// ---- launchers (tests/support/cuda_emulator.py)")
    for k in kernels.values():
        call = ", ".join(f"*({ctype}*)a[{n}]" for n, (ctype, _) in enumerate(k.params))
        lines.append(f"static void tvms_emu_body_{k.name}(void** a) {{ (void)a; {k.name}({call}); }}")
        lines.append(f'extern "C" __attribute__((visibility("default"))) void tvms_emu_{k.name}(unsigned gx, '
                     "unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, void** args) {")
        lines.append(f"  tvms_emu::launch(gx, gy, gz, bx, by, bz, args, &tvms_emu_body_{k.name});")
        lines.append("}")
    return "\n".join(lines) + "\n"


_flags: Optional[list] = None


def _cxx_flags() -> list:
    """CXX_FLAGS without the optional ones this g++ does not know."""
    global _flags
    if _flags is None:
        flags = list(CXX_FLAGS)
        for opt in _OPTIONAL_FLAGS:
            probe = subprocess.run(["g++", opt, "-x", "c++", "-fsyntax-only", "-"], input="", capture_output=True,
                                   text=True)
            if probe.returncode != 0:
                flags.remove(opt)
        _flags = flags
    return _flags


_pch_header: Optional[str] = None


def _copied_shim() -> str:
    """The shim's copy in the work folder (with the headers it includes)."""
    header = os.path.join(_workdir(), "cuda_emulator_shim.h")
    if not os.path.exists(header):
        for included in (COUNTERS, PTX, SHIM):
            shutil.copyfile(included, os.path.join(_workdir(), os.path.basename(included)))
    return header


def _precompiled_shim() -> str:
    """The shim to ``-include``: a copy in the work folder with its precompiled header beside it
    (built once per process; g++ then skips parsing the shim, half of a kernel's compile), or
    the shim itself where precompiling fails (g++ parses it each time, as it does when a
    compile's flags differ from the header's)."""
    global _pch_header
    if _pch_header is None:
        header = _copied_shim()
        proc = subprocess.run(["g++", *_cxx_flags(), "-x", "c++-header", header, "-o", header + ".gch"],
                              capture_output=True, text=True)
        _pch_header = header if proc.returncode == 0 else SHIM
    return _pch_header


_split: dict = {}          # extra flags -> (kernels' header, runtime object), or None: one unit


def _split_build(extra_flags: tuple):
    """The split build for ``extra_flags`` (see the shim's head): a header that -includes the
    shim with TVMS_EMU_KERNELS, precompiled, and the runtime (TVMS_EMU_RUNTIME) compiled once
    to an object every module links; None where g++ cannot, and each module is then one unit.
    The runtime's functions are then compiled once per process instead of once per module,
    two thirds of the g++ time of a small kernel."""
    if extra_flags not in _split:
        included = _copied_shim()
        d = _workdir()
        tag = hashlib.sha256(" ".join(extra_flags).encode()).hexdigest()[:12]
        header = os.path.join(d, f"cuda_emulator_kernels_{tag}.h")
        runtime_src = os.path.join(d, f"cuda_emulator_runtime_{tag}.cc")
        runtime_obj = os.path.join(d, f"cuda_emulator_runtime_{tag}.o")
        with open(header, "w") as f:
            f.write(f'#define TVMS_EMU_KERNELS 1\n#include "{included}"\n')
        with open(runtime_src, "w") as f:
            f.write(f'#define TVMS_EMU_RUNTIME 1\n#include "{included}"\n')
        ok = subprocess.run(["g++", *_cxx_flags(), *extra_flags, "-c", runtime_src, "-o", runtime_obj],
                            capture_output=True, text=True).returncode == 0
        if ok:  # a precompiled header is only a speed-up: g++ reads the header itself without it
            subprocess.run(["g++", *_cxx_flags(), *extra_flags, "-x", "c++-header", header, "-o", header + ".gch"],
                           capture_output=True, text=True)
        _split[extra_flags] = (header, runtime_obj) if ok else None
    return _split[extra_flags]


def _compile(text: str, extra_flags=()) -> ctypes.CDLL:
    shim = "".join(open(path).read() for path in (SHIM, COUNTERS, PTX))
    key = hashlib.sha256((text + "\0" + " ".join(extra_flags) + "\0" + shim).encode()).hexdigest()[:24]
    with _cache_lock:
        lib = _cache.get(key)
        if lib is not None:
            return lib
        d = _workdir()
        src = os.path.join(d, f"{key}.cu")
        so = os.path.join(d, f"{key}.so")
        with open(src, "w") as f:
            f.write(text)
        obj = os.path.join(d, f"{key}.o")
        split = _split_build(tuple(extra_flags))
        include, objects = (split[0], [obj, split[1]]) if split else (_precompiled_shim(), [obj])
        cmd = ["g++", *_cxx_flags(), *extra_flags, "-include", include, "-x", "c++", "-c", src, "-o", obj]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            proc = subprocess.run(["g++", *LINK_FLAGS, *objects, "-o", so], capture_output=True, text=True)
        if proc.returncode != 0:
            log = proc.stderr
            raise EmulatorCompileError(f"g++ could not compile the CUDA C for the emulator:\n{log[:6000]}", log)
        lib = ctypes.CDLL(so)
        lib.tvms_emu__errors.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.tvms_emu__errors.restype = ctypes.c_int
        lib.tvms_emu__configure.argtypes = [ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.tvms_emu__configure.restype = None
        lib.tvms_emu__alloc_stacks.argtypes = [ctypes.c_uint, ctypes.c_ulonglong]
        lib.tvms_emu__alloc_stacks.restype = ctypes.c_void_p
        lib.tvms_emu__use_stacks.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
        lib.tvms_emu__use_stacks.restype = None
        _cache[key] = lib
        return lib


# ----------------------------------------------------------------------------- staging


class _Staged:
    """A copy of ``nbytes`` bytes at a 256-byte aligned address between two guard zones of
    0xff bytes."""

    def __init__(self, nbytes: int, init: Optional[np.ndarray] = None) -> None:
        self.nbytes = nbytes
        self.raw = np.full(nbytes + 2 * GUARD_BYTES + ALIGNMENT, 0xFF, dtype=np.uint8)
        off = (-self.raw.ctypes.data) % ALIGNMENT
        self.start = off + GUARD_BYTES
        self.data = self.raw[self.start:self.start + nbytes]
        if init is not None and nbytes:
            self.data[:] = init.reshape(-1).view(np.uint8)
        self.address = self.raw.ctypes.data + self.start

    def guard_damage(self):
        """(byte offset relative to the data, count) of the first damaged guard byte, or None."""
        before = self.raw[self.start - GUARD_BYTES:self.start]
        after = self.raw[self.start + self.nbytes:self.start + self.nbytes + GUARD_BYTES]
        bad_before = np.nonzero(before != 0xFF)[0]
        bad_after = np.nonzero(after != 0xFF)[0]
        if len(bad_before):
            return int(bad_before[0]) - GUARD_BYTES, len(bad_before) + len(bad_after)
        if len(bad_after):
            return self.nbytes + int(bad_after[0]), len(bad_after)
        return None


# ----------------------------------------------------------------------------- the module


class EmulatedModule:
    """A `cuda_spec.CUDACode` (or a CUDA C text) compiled for the CPU.

    ``reverse_odd_blocks``: run the threads of odd blocks from the last to the first (so that a
    missing barrier shows whichever thread runs first); ``poison_shared``: fill shared memory
    with 0xff bytes before each block; ``strict``: refuse launches a GPU would refuse (more
    threads than ``__launch_bounds__``, too much shared memory, grid limits); ``eager_copies``:
    perform each ``cp.async`` when issued rather than at the wait that covers it (the other
    extreme a GPU may take: see cuda_emulator_ptx.h)."""

    def __init__(self, code, *, reverse_odd_blocks: bool = True, poison_shared: bool = True, strict: bool = True,
                 extra_flags=(), eager_copies: bool = False) -> None:
        if isinstance(code, str):
            self.code = None
            self.source = code
            self.arch = "sm_90"
        else:
            self.code = code
            self.source = code.source
            self.arch = getattr(code, "arch", "sm_90") or "sm_90"
        self.kernels = parse_kernels(self.source)
        self.emulated_source = emulated_source(self.source, self.kernels)
        self.lib = _compile(self.emulated_source, tuple(extra_flags))
        self.reverse_odd_blocks = reverse_odd_blocks
        self.poison_shared = poison_shared
        self.eager_copies = eager_copies
        self.strict = strict
        self.timings: list = []     # (kernel, grid, block, seconds) of the last run()/launch()
        self._fns = {}
        self._source_lines = self.source.split("\n")
        for name in self.kernels:
            fn = getattr(self.lib, f"tvms_emu_{name}")
            fn.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]
            fn.restype = None
            self._fns[name] = fn

    # ---- one kernel
    def launch(self, kernel: str, grid, block, *args, dyn_shared_bytes: int = 0) -> None:
        """Launch ``kernel`` once: ``grid``/``block`` are 1 to 3 ints; ``args`` one per kernel
        parameter, NumPy arrays for pointers (used in place, not staged) and numbers or ctypes
        values for scalars (converted to the parameter's C type)."""
        info = self._info(kernel)
        if len(args) != len(info.params):
            raise TypeError(f"kernel '{kernel}' takes {len(info.params)} arguments, got {len(args)}")
        values = []
        for (ctype, pname), a in zip(info.params, args):
            if ctype.endswith("*"):
                if isinstance(a, np.ndarray):
                    values.append(ctypes.c_void_p(a.ctypes.data))
                elif isinstance(a, int):
                    values.append(ctypes.c_void_p(a))
                else:
                    raise TypeError(f"kernel '{kernel}': parameter '{pname}' ({ctype}) expects an array")
            elif isinstance(a, ctypes._SimpleCData):
                values.append(a)
            else:
                letter = _C_LETTERS.get(ctype.replace("const ", ""))
                if letter is None:
                    raise TypeError(f"kernel '{kernel}': pass parameter '{pname}' ({ctype}) as a ctypes value")
                values.append(_LETTERS[letter](a))
        self._launch(kernel, _dims(grid), _dims(block), values, dyn_shared_bytes)

    def _info(self, kernel: str) -> KernelInfo:
        try:
            return self.kernels[kernel]
        except KeyError:
            raise KeyError(f"no kernel '{kernel}' in the source (kernels: {', '.join(self.kernels)})") from None

    def _launch(self, kernel: str, grid: tuple, block: tuple, values: list, dyn: int) -> None:
        info = self._info(kernel)
        threads = block[0] * block[1] * block[2]
        if self.strict:
            problems = []
            if threads > 1024 or block[0] > 1024 or block[1] > 1024 or block[2] > 64:
                problems.append(f"block {block} exceeds CUDA's limits (1024 threads, z at most 64)")
            if info.launch_bounds is not None and threads > info.launch_bounds:
                problems.append(f"block {block} has {threads} threads, more than "
                                f"__launch_bounds__({info.launch_bounds})")
            if grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
                problems.append(f"grid {grid} exceeds CUDA's limits (x < 2^31, y and z at most 65535)")
            if info.static_shared_bytes > STATIC_SHARED_LIMIT:
                problems.append(f"{info.static_shared_bytes} bytes of static shared memory "
                                f"(at most {STATIC_SHARED_LIMIT})")
            limit = SHARED_LIMITS.get(self.arch, 232448)
            if info.static_shared_bytes + dyn > limit:
                problems.append(f"{info.static_shared_bytes} + {dyn} bytes of shared memory exceed {limit}, the most a "
                                f"block may use on {self.arch}")
            if problems:
                raise EmulationError(f"kernel '{kernel}': a GPU would refuse this launch: " + "; ".join(problems),
                                     kernel, problems)
        if dyn > EMULATOR_DYN_SMEM:
            raise EmulationError(f"kernel '{kernel}': {dyn} bytes of dynamic shared memory exceed the emulator's "
                                 f"{EMULATOR_DYN_SMEM}", kernel)
        if min(grid) <= 0 or min(block) <= 0:
            raise EmulationError(f"kernel '{kernel}': invalid launch configuration grid {grid}, block {block}", kernel)
        argv = (ctypes.c_void_p * max(1, len(values)))()
        for i, v in enumerate(values):
            argv[i] = ctypes.addressof(v)
        global _stacks, _stacks_holder
        with _launch_lock:
            if _stacks is None:
                _stacks = self.lib.tvms_emu__alloc_stacks(MAX_THREADS, STACK_BYTES)
                if not _stacks:
                    raise MemoryError("cannot reserve the emulator's fiber stacks")
            if _stacks_holder is not self.lib:
                self.lib.tvms_emu__use_stacks(_stacks, STACK_BYTES)
                _stacks_holder = self.lib
            self.lib.tvms_emu__configure(dyn, int(self.reverse_odd_blocks), int(self.poison_shared),
                                         int(self.eager_copies))
            t0 = time.perf_counter()
            self._fns[kernel](*grid, *block, argv)
            self.timings.append((kernel, grid, block, time.perf_counter() - t0))
            buf = ctypes.create_string_buffer(8192)
            total = self.lib.tvms_emu__errors(buf, len(buf))
        if total:
            messages = [m for m in buf.value.decode("utf-8", "replace").split("\n") if m]
            raise EmulationError(self._describe(kernel, messages, total), kernel, messages)

    def _describe(self, kernel: str, messages: list, total: int) -> str:
        out = [f"kernel '{kernel}': {total} problem{'s' if total != 1 else ''} found by the emulator"]
        quoted = set()
        for m in messages:
            out.append("  " + m)
            for ln in re.findall(r"\bline (\d+)", m):
                n = int(ln)
                if n not in quoted and 1 <= n <= len(self._source_lines):
                    quoted.add(n)
                    out.append(f"    {n}: {self._source_lines[n - 1].strip()}")
        return "\n".join(out)

    # ---- a prim_func
    def run(self, func_name: str, *args) -> None:
        """Run the prim_func ``func_name`` of the `CUDACode` destination-passing style: one
        argument per parameter (NumPy arrays for buffers, numbers for scalars); the arrays are
        updated in place."""
        if self.code is None:
            raise TypeError("run() needs a CUDACode; use launch() for a hand-written source")
        try:
            fn = self.code.functions[func_name]
        except KeyError:
            raise KeyError(f"no function '{func_name}' (functions: {', '.join(self.code.functions)})") from None
        params = fn.params
        if len(args) != len(params):
            raise TypeError(f"{func_name}() takes {len(params)} arguments "
                            f"({', '.join(p.name for p in params)}), got {len(args)}")
        env: dict = {}
        buffers: list = []      # (spec, array) of the buffer parameters, in order
        scalars: list = []
        deferred = []
        for spec, arg in zip(params, args):
            if spec.kind == "scalar":
                v = _scalar_value(arg, spec)
                if spec.name in env and env[spec.name] != v:
                    raise ValueError(f"{func_name}: scalar '{spec.name}' is {v}, the shapes say {env[spec.name]}")
                env.setdefault(spec.name, v)
                scalars.append(v)
                continue
            if not isinstance(arg, np.ndarray):
                raise TypeError(f"{func_name}: parameter '{spec.name}' expects a numpy.ndarray, got "
                                f"{type(arg).__name__}")
            if not _dtype_fits(arg.dtype, spec.dtype):
                raise TypeError(f"{func_name}: parameter '{spec.name}' expects dtype {spec.dtype}, got {arg.dtype}")
            if arg.ndim != len(spec.shape):
                raise ValueError(f"{func_name}: parameter '{spec.name}' expects {len(spec.shape)} dimensions, got "
                                 f"shape {arg.shape}")
            for d, (dim, got) in enumerate(zip(spec.shape, arg.shape)):
                if isinstance(dim, int):
                    if dim != got:
                        raise ValueError(f"{func_name}: parameter '{spec.name}' expects shape {tuple(spec.shape)}, "
                                         f"got {arg.shape}")
                elif dim.isidentifier():
                    if env.setdefault(dim, got) != got:
                        raise ValueError(f"{func_name}: dimension {d} of '{spec.name}' is {got}, but '{dim}' is "
                                         f"{env[dim]}")
                else:
                    deferred.append((dim, got, spec.name))
            if not arg.flags.c_contiguous:  # device tensors are compact, as runtime.cuda's
                raise ValueError(f"{func_name}: parameter '{spec.name}' must be C-contiguous")
            if spec.strides is not None:
                for st, got in zip(spec.strides, arg.strides):
                    if isinstance(st, str) and st.isidentifier():
                        env.setdefault(st, got // arg.itemsize)
            buffers.append((spec, arg))
        from tvmscript.runtime.cuda_kernels import failed_host_check
        from tvmscript.runtime.kernel import bounds_error, eval_dim_text

        for text, got, pname in deferred:
            want = eval_dim_text(text, env)
            if want is not None and want != got:
                raise ValueError(f"{func_name}: a dimension of '{pname}' is {got}, expected {text} = {want}")
        for s in fn.sym_vars:
            if s not in env:
                raise ValueError(f"{func_name}: symbolic variable '{s}' is bound by no dimension")

        def dim(text, what):
            v = eval_dim_text(str(text), env)
            if v is None:
                raise EmulationError(f"{func_name}: cannot evaluate {what} {text!r} (symbols: {env})")
            return int(v)

        # Stage the buffers (the same array twice shares one staging copy).
        staged: dict = {}
        buffer_staged = []
        for spec, arr in buffers:
            key = (arr.__array_interface__["data"][0], arr.nbytes)
            st = staged.get(key)
            if st is None:
                for (addr, nb), other in staged.items():
                    lo, hi = key[0], key[0] + key[1]
                    if nb and key[1] and lo < addr + nb and addr < hi:
                        raise ValueError(f"{func_name}: parameter '{spec.name}' partly overlaps another buffer")
                st = _Staged(arr.nbytes, np.ascontiguousarray(arr))
                staged[key] = st
            buffer_staged.append((spec, arr, st))
        workspaces = [_Staged(dim(w, "workspace size")) for w in fn.workspaces]
        # Bounds checks (compiler/codegen_cuda/checks.py): the host's before any launch, the
        # kernels' in an error record read after each launch; a failure is the runtime's error.
        checks = getattr(fn, "checks", None)
        failed = failed_host_check(checks.host if checks is not None else (), lambda text: dim(text, "bounds check"))
        if failed is not None:
            raise bounds_error(checks.messages[failed[0]], *failed[1:])
        errors = np.zeros(4, np.int64)
        self.timings = []
        for launch in fn.launches:
            grid = tuple(dim(t, "grid dimension") for t in launch.grid)
            block = tuple(dim(t, "block dimension") for t in launch.block)
            dyn = dim(launch.dyn_shared_bytes or "0", "dynamic shared memory")
            if min(grid + block + (dyn,)) < 0:
                raise EmulationError(f"{func_name}: kernel '{launch.kernel}' gets a negative dimension: grid {grid}, "
                                     f"block {block}, dynamic shared memory {dyn} ({env})", launch.kernel)
            if 0 in grid or 0 in block:
                continue  # nothing to run (a dimension of extent 0), as runtime.cuda does
            info = self._info(launch.kernel)
            if len(launch.args) != len(info.params):
                raise EmulationError(f"{func_name}: the launch of '{launch.kernel}' passes {len(launch.args)} "
                                     f"arguments; the kernel has {len(info.params)} parameters", launch.kernel)
            values = []
            for a, (ctype, pname) in zip(launch.args, info.params):
                want = "P" if ctype.endswith("*") else _C_LETTERS.get(ctype.replace("const ", ""))
                if want is not None and a.ctype != want:
                    raise EmulationError(f"{func_name}: the launch of '{launch.kernel}' passes parameter '{pname}' "
                                         f"({ctype}) as {a.ctype!r}, which is not its C type (expected {want!r})",
                                         launch.kernel)
                if a.kind == "buffer":
                    values.append(ctypes.c_void_p(buffer_staged[a.index][2].address))
                elif a.kind == "workspace":
                    values.append(ctypes.c_void_p(workspaces[a.index].address))
                elif a.kind == "scalar":
                    values.append(_LETTERS[a.ctype](scalars[a.index]))
                elif a.kind == "sym":
                    if a.name not in env:
                        raise EmulationError(f"{func_name}: symbol '{a.name}' is unbound", launch.kernel)
                    values.append(_LETTERS[a.ctype](env[a.name]))
                elif a.kind == "errors":
                    values.append(ctypes.c_void_p(errors.ctypes.data))
                else:
                    raise EmulationError(f"{func_name}: unknown kernel argument kind {a.kind!r}", launch.kernel)
            self._launch(launch.kernel, grid, block, values, dyn)
            if errors[0]:
                site = int(errors[0]) - 1 - checks.first_site
                raise bounds_error(checks.messages[site], int(errors[1]), int(errors[2]), int(errors[3]))
            damage = []
            for spec, arr, st in buffer_staged:
                bad = st.guard_damage()
                if bad is not None:
                    damage.append(f"buffer '{spec.name}' ({arr.nbytes} bytes): {bad[1]} byte(s) written outside it, "
                                  f"the first at byte offset {bad[0]} (element {bad[0] // arr.itemsize})")
            for i, st in enumerate(workspaces):
                bad = st.guard_damage()
                if bad is not None:
                    damage.append(f"workspace {i} ({st.nbytes} bytes): written outside, first at byte offset {bad[0]}")
            if damage:
                raise EmulationError(f"{func_name}: kernel '{launch.kernel}' wrote out of bounds: " + "; ".join(damage),
                                     launch.kernel, damage)
        for spec, arr, st in buffer_staged:
            if not arr.nbytes:
                continue
            new = st.data.view(arr.dtype).reshape(arr.shape)
            if arr.flags.writeable:
                arr[...] = new
            elif not np.array_equal(new.view(np.uint8), np.ascontiguousarray(arr).view(np.uint8)):
                raise EmulationError(f"{func_name}: parameter '{spec.name}' is read-only but the kernels wrote it")


def _dims(d) -> tuple:
    if isinstance(d, int):
        d = (d,)
    d = tuple(int(x) for x in d)
    return d + (1,) * (3 - len(d))


def _np_dtype(dtype: str):
    """The NumPy dtype of a buffer: bfloat16 is ml_dtypes' when installed, else uint16 (the bit
    patterns)."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return np.dtype(np.uint16)
    return np.dtype({"bool": np.bool_}.get(dtype, dtype))


def _dtype_fits(have: np.dtype, dtype: str) -> bool:
    if dtype == "bfloat16":
        return have.name == "bfloat16" or have == np.uint16
    return have == _np_dtype(dtype)


def bfloat16_bits(x) -> np.ndarray:
    """float32 values as bfloat16 bit patterns (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (u >> 16).astype(np.uint16) | 0x40, r).astype(np.uint16)


def bfloat16_to_float32(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _scalar_value(arg, spec):
    if spec.dtype.startswith("float"):
        return float(arg)
    if spec.dtype == "bool":
        return int(bool(arg))
    return int(arg)


# ----------------------------------------------------------------------------- comparing with the CPU


def random_arguments(params: list, sym_values: Optional[dict] = None, seed: int = 0, given: Optional[dict] = None,
                     int_range: tuple = (-8, 8)):
    """One argument per `ParamSpec`: random arrays (floats in [-1, 1), integers in
    ``int_range``, unsigned ones from 0), scalars from ``sym_values`` (or 1); ``given``
    overrides by name."""
    rng = np.random.default_rng(seed)
    sym_values = dict(sym_values or {})
    given = dict(given or {})
    from tvmscript.runtime.kernel import eval_dim_text

    out = []
    for p in params:
        if p.name in given:
            out.append(given[p.name])
            continue
        if p.kind == "scalar":
            v = sym_values.get(p.name, 1)
            out.append(float(v) if p.dtype.startswith("float") else int(v))
            continue
        shape = []
        for d in p.shape:
            if isinstance(d, int):
                shape.append(d)
            else:
                v = sym_values.get(d) if d.isidentifier() else eval_dim_text(d, sym_values)
                if v is None:
                    raise ValueError(f"give a value for symbol(s) of {d!r} in sym_values")
                shape.append(int(v))
        dt = _np_dtype(p.dtype)
        if p.dtype == "bfloat16":
            a = rng.uniform(-1, 1, size=shape).astype(np.float32)
            a = bfloat16_bits(a) if dt == np.uint16 else a.astype(dt)
        elif dt.kind == "f":
            a = rng.uniform(-1, 1, size=shape).astype(dt)
        elif dt.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(dt)
        elif dt.kind == "u":
            a = rng.integers(max(0, int_range[0]), max(1, int_range[1]), size=shape).astype(dt)
        else:
            a = rng.integers(int_range[0], int_range[1], size=shape).astype(dt)
        out.append(a)
    return out


@dataclass
class Comparison:
    """The emulator against the CPU backend for one prim_func: ``ok``; per written buffer that
    differs, ``mismatches[name] = (count, first indices, max abs error)``; ``error`` the
    exception of the emulator (text), if any; ``seconds`` the emulation's time."""

    name: str
    ok: bool
    mismatches: dict = field(default_factory=dict)
    error: Optional[str] = None
    seconds: float = 0.0
    gpu: dict = field(default_factory=dict)
    cpu: dict = field(default_factory=dict)
    counters: list = field(default_factory=list)

    def __str__(self) -> str:
        if self.ok:
            return f"{self.name}: ok ({self.seconds:.2f} s)"
        if self.error:
            return f"{self.name}: ERROR {self.error}"
        parts = [f"{n}: {c} elements differ (first at {idx}, max abs error {err:.3g})"
                 for n, (c, idx, err) in self.mismatches.items()]
        return f"{self.name}: MISMATCH " + "; ".join(parts)


def compare_with_cpu(prim_funcs: dict, *, code=None, target: str = "cuda", sym_values: Optional[dict] = None,
                     seed: int = 0, rtol: float = 1e-4, atol: float = 1e-5, given: Optional[dict] = None,
                     names=None, int_range: tuple = (-8, 8), trace: bool = False, eager_copies: bool = False) -> dict:
    """Run each prim_func of ``prim_funcs`` on the CPU backend and on the emulator (the CUDA C
    of ``code``, or of `build_cuda` on ``prim_funcs``) with the same random arguments; name ->
    `Comparison`. Every buffer starts with the same random contents on both sides, outputs
    included, so an output element the GPU code never writes shows up as a mismatch.
    ``given``: prim_func name -> {parameter name: argument} for inputs that must not be random
    (indices). ``trace``: run the printer's trace mode under the counters
    (`cuda_counters.CountingModule`); each `Comparison` then holds its launches' ``counters``.
    ``eager_copies``: `EmulatedModule`'s."""
    from tvmscript.compiler.build_cuda import build_cuda
    from tvmscript.compiler.build_cpu import build_cpu

    if code is None:
        code = build_cuda(dict(prim_funcs), target, kind="source", trace=trace)
    if trace:
        from .cuda_counters import CountingModule

        mod = CountingModule(code)
    else:
        mod = EmulatedModule(code, eager_copies=eager_copies)
    results = {}
    names = names or list(prim_funcs)
    cpu = build_cpu({name: prim_funcs[name] for name in names})   # one LLVM module for them all
    for name in names:
        fn = code.functions[name]
        args = random_arguments(fn.params, sym_values, seed, (given or {}).get(name), int_range)
        gpu_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        cpu_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        cpu[name](*cpu_args)
        t0 = time.perf_counter()
        try:
            mod.run(name, *gpu_args)
        except EmulationError as err:
            results[name] = Comparison(name, False, error=str(err), seconds=time.perf_counter() - t0)
            continue
        seconds = time.perf_counter() - t0
        mismatches = {}
        gpu_out, cpu_out = {}, {}
        for p, g, c in zip(fn.params, gpu_args, cpu_args):
            if p.kind != "buffer":
                continue
            gpu_out[p.name], cpu_out[p.name] = g, c
            if g.dtype.kind == "f":
                close = np.isclose(g, c, rtol=rtol, atol=atol, equal_nan=True)
            else:
                close = g == c
            if not close.all():
                bad = np.argwhere(~close)
                err = float(np.nanmax(np.abs(g.astype(np.float64) - c.astype(np.float64))[~close])) \
                    if g.dtype.kind in "fiu" else float("nan")
                mismatches[p.name] = (int((~close).sum()), [tuple(int(x) for x in b) for b in bad[:8]], err)
        results[name] = Comparison(name, not mismatches, mismatches, None, seconds, gpu_out, cpu_out,
                                   list(getattr(mod, "counters", [])))
    return results
