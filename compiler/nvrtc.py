"""NVRTC, CUDA's runtime compiler: CUDA C to CUBIN (or PTX), with an on-disk cache.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel (CUDA 13) and the headers kernels include
(``cuda_fp16.h``, ``cuda_bf16.h``) from ``nvidia-cuda-runtime``; both are pip packages, so no
CUDA toolkit is needed to compile, and compiling needs no GPU. NVRTC is called through ctypes:
its C API is eight functions, and ctypes keeps tvms free of a binding package pinned to one
CUDA release (``cuda-bindings``).

Why CUBIN for the exact architecture: the driver loads CUBIN made by any NVRTC of its CUDA
major version, while PTX from an NVRTC newer than the driver cannot be JIT-compiled by it
(the test GPUs run driver 580, CUDA 13.0). PTX is produced on request, to read.

A CUBIN compile asks ptxas for its verbose report (``--ptxas-options=-v``): NVRTC's log then
says, per kernel, the registers, spills and shared memory it uses (`compiler.kernel_resources`
reads it), so ``CompileResult.log`` is kept on success too.

The cache (`tvmscript.cache`, subfolder ``cuda``) holds one file per (source, architecture,
options, NVRTC version): the log's length, the log, then the binary; an entry whose checksum
does not match is compiled again.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import struct
import threading
import time
from typing import Optional

from tvmscript import cache as disk_cache

__all__ = ["NVRTCError", "NVRTCUnavailable", "compile_cuda", "nvrtc_version", "include_dirs", "cache_dir",
           "CompileResult"]

_CACHE_MAGIC = b"TVMSCUDA3"  # 3: the log is stored before the binary
_DEFAULT_OPTIONS = ("--std=c++17",)
_CUBIN_OPTIONS = ("--ptxas-options=-v",)  # ptxas's per-kernel resource report, into the log


class NVRTCUnavailable(RuntimeError):
    """NVRTC (the ``nvidia-cuda-nvrtc`` wheel) or the CUDA headers cannot be found."""


class NVRTCError(RuntimeError):
    """NVRTC rejected the source; ``log`` holds its messages."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


class CompileResult:
    """The output of one compile: ``binary`` (CUBIN bytes, or PTX text encoded), where it came
    from (``cached``), how long NVRTC took (``seconds``, 0 for a cache hit) and NVRTC's log
    (``log``: for CUBIN, ptxas's report of each kernel's registers, spills and shared memory;
    kept in the cache with the binary)."""

    __slots__ = ("binary", "cached", "seconds", "kind", "log")

    def __init__(self, binary: bytes, cached: bool, seconds: float, kind: str, log: str = "") -> None:
        self.binary = binary
        self.cached = cached
        self.seconds = seconds
        self.kind = kind
        self.log = log


# ----------------------------------------------------------------------------- the library


_lock = threading.Lock()
_lib = None


def _nvidia_roots() -> list:
    try:
        import nvidia  # the namespace package of NVIDIA's wheels
    except ImportError:
        return []
    return list(getattr(nvidia, "__path__", []))


def _load():
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _library_candidates():
            try:
                _preload_builtins(path)
                lib = ctypes.CDLL(path)
            except OSError as err:
                errors.append(str(err))
                continue
            _declare(lib)
            _lib = lib
            return lib
        raise NVRTCUnavailable(
            "NVRTC is not installed: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime (or pip install -e \".[test]\")")


def _library_candidates() -> list:
    """libnvrtc.so.N of the pip wheels (newest first), then whatever the dynamic linker finds."""
    candidates = []
    for root in _nvidia_roots():
        for sub in ("cu*", "cuda_nvrtc"):
            candidates += sorted(glob.glob(os.path.join(root, sub, "lib", "libnvrtc.so.*")), reverse=True)
    return candidates + ["libnvrtc.so.13", "libnvrtc.so"]


def _preload_builtins(nvrtc_path: str) -> None:
    """Load the ``libnvrtc-builtins.so.X.Y`` lying beside ``nvrtc_path``, before NVRTC itself.

    NVRTC opens its builtins library by soname when it compiles. Some wheels (nvidia-cuda-nvrtc
    13.0.88, the one PyPI's CUDA build of PyTorch pins) ship a ``libnvrtc.so.13`` without an
    ``$ORIGIN`` RPATH, so that lookup misses the file next to it and every compile fails with
    "failed to open libnvrtc-builtins.so.13.0". Once the builtins are loaded, the dynamic linker
    finds them by soname whatever the RPATH says -- CuPy and Numba work around the same wheels
    this way. A library found by name alone (no folder) is left to the dynamic linker.
    """
    folder = os.path.dirname(nvrtc_path)
    if not folder:
        return
    for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so.*")), reverse=True):
        if ".alt." not in os.path.basename(builtins):
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            return


def _declare(lib) -> None:
    c = ctypes
    lib.nvrtcCreateProgram.argtypes = [c.POINTER(c.c_void_p), c.c_char_p, c.c_char_p, c.c_int,
                                       c.POINTER(c.c_char_p), c.POINTER(c.c_char_p)]
    lib.nvrtcCompileProgram.argtypes = [c.c_void_p, c.c_int, c.POINTER(c.c_char_p)]
    lib.nvrtcDestroyProgram.argtypes = [c.POINTER(c.c_void_p)]
    for name in ("nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize"):
        getattr(lib, name).argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
    for name in ("nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN"):
        getattr(lib, name).argtypes = [c.c_void_p, c.c_char_p]
    lib.nvrtcGetErrorString.restype = c.c_char_p
    lib.nvrtcVersion.argtypes = [c.POINTER(c.c_int), c.POINTER(c.c_int)]


def nvrtc_version() -> tuple:
    """(major, minor) of the NVRTC in use."""
    lib = _load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return (major.value, minor.value)


def include_dirs() -> list:
    """Folders holding cuda_fp16.h and friends: the ``nvidia-cuda-runtime`` wheel's, else a
    CUDA toolkit's (``$CUDA_HOME``, /usr/local/cuda)."""
    found = []
    for root in _nvidia_roots():
        for d in sorted(glob.glob(os.path.join(root, "cu*", "include"))) + [os.path.join(root, "cuda_runtime", "include")]:
            if os.path.exists(os.path.join(d, "cuda_fp16.h")):
                found.append(d)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "include", "cuda_fp16.h")):
            found.append(os.path.join(home, "include"))
    if not found:
        raise NVRTCUnavailable(
            "the CUDA headers (cuda_fp16.h) are not installed: pip install nvidia-cuda-runtime "
            "(or pip install -e \".[test]\")")
    return found[:1]


def _check(lib, status: int, what: str) -> None:
    if status != 0:
        msg = lib.nvrtcGetErrorString(status)
        raise RuntimeError(f"{what} failed: {msg.decode() if msg else status}")


# ----------------------------------------------------------------------------- the cache


def cache_dir() -> Optional[str]:
    """The private folder compiled kernels are kept in (`tvmscript.cache`), or None when there
    is none to be had: then every compile runs NVRTC."""
    return disk_cache.folder("cuda")


# ----------------------------------------------------------------------------- compiling


def compile_cuda(source: str, arch: str = "sm_90", kind: str = "cubin", options=(), use_cache: bool = True,
                 name: str = "tvms.cu") -> CompileResult:
    """Compile ``source`` for ``arch`` (``"sm_90"``): ``kind="cubin"`` gives machine code,
    ``kind="ptx"`` PTX for the virtual architecture ``compute_90``. NVRTCError with NVRTC's
    log when the source does not compile."""
    if kind not in ("cubin", "ptx"):
        raise ValueError(f"kind must be 'cubin' or 'ptx', not {kind!r}")
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"bad CUDA architecture {arch!r}: expected e.g. 'sm_90'")
    lib = _load()
    version = nvrtc_version()
    gpu = arch if kind == "cubin" else "compute_" + arch[3:]
    extra = _CUBIN_OPTIONS if kind == "cubin" else ()
    opts = [f"--gpu-architecture={gpu}", *_DEFAULT_OPTIONS, *extra, *options] + [f"-I{d}" for d in include_dirs()]
    key = hashlib.sha256("\0".join([source, kind, *opts, f"nvrtc {version}"]).encode()).hexdigest()
    folder = cache_dir() if use_cache else None
    path = os.path.join(folder, f"{key}.{kind}") if folder else None
    if path is not None:
        hit = _unpack(disk_cache.read(path, _CACHE_MAGIC))
        if hit is not None:
            return CompileResult(hit[0], True, 0.0, kind, hit[1])
    t0 = time.perf_counter()
    try:
        binary, log = _nvrtc(lib, source, name, opts, kind)
    except NVRTCError as err:
        if extra:
            _explain_ptxas_failure(err, lib, source, name, [o for o in opts if o not in extra])
        raise
    seconds = time.perf_counter() - t0
    if path is not None:
        disk_cache.write(path, _CACHE_MAGIC, _pack(binary, log))
    return CompileResult(binary, False, seconds, kind, log)


def _explain_ptxas_failure(err: NVRTCError, lib, source: str, name: str, plain_opts: list) -> None:
    """NVRTC's log of a compile with ptxas's ``-v`` leaves out ptxas's own errors ("uses too
    much shared data"): when the log names no error, compile again without ``-v``, whose
    NVRTCError says what failed."""
    if "error" in err.log:
        return
    try:
        _nvrtc(lib, source, name, plain_opts, "cubin")
    except NVRTCError as plain:
        raise plain from None


def _pack(binary: bytes, log: str) -> bytes:
    """A cache entry's payload: the log's length (4 bytes), the log, the binary."""
    text = log.encode("utf-8")
    return struct.pack("<I", len(text)) + text + binary


def _unpack(payload: Optional[bytes]) -> Optional[tuple]:
    """(binary, log) of a payload `_pack` made; None for none, or one too short to be one."""
    if payload is None or len(payload) < 4:
        return None
    (size,) = struct.unpack_from("<I", payload)
    if 4 + size > len(payload):
        return None
    return payload[4 + size:], payload[4:4 + size].decode("utf-8", "replace")


def _program_log(lib, prog) -> str:
    size = ctypes.c_size_t()
    _check(lib, lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
    buf = ctypes.create_string_buffer(size.value)
    _check(lib, lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.value.decode("utf-8", "replace")


def _nvrtc(lib, source: str, name: str, opts: list, kind: str) -> tuple:
    """(the binary, NVRTC's log) of one compile; NVRTCError with the log when it fails."""
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        log = _program_log(lib, prog)
        if status != 0:
            raise NVRTCError(f"NVRTC could not compile {name}", log)
        size = ctypes.c_size_t()
        get_size, get = (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if kind == "cubin" else (
            lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
        _check(lib, get_size(prog, ctypes.byref(size)), "nvrtcGet" + kind.upper() + "Size")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, get(prog, buf), "nvrtcGet" + kind.upper())
        data = buf.raw
        return (data.rstrip(b"\0") if kind == "ptx" else data), log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
