"""Build results kept by what they were built from, in memory and on disk.

A build of prim_funcs (the CPU kernels' machine code, the CUDA backend's CUDA C and CUBIN) is
a pure function of the functions, the build's options and the compiler itself. `BuildCache`
keeps each result under a key made of the options and the functions' structural hashes:

* in memory, for the rest of the process (a second ``tvms.compile`` of the same module);
* on disk, in a private folder of `tvmscript.cache`, for the next process (a second
  ``tvms run``), named by the key and `compiler_fingerprint`, so that an edited tvms, another
  llvmlite or another LLVM never reuses old code.

A hash collision can only cost a build: each entry keeps the functions it was built from
(pickled, so later changes to the caller's objects cannot reach them), and a result is
returned only when they are structurally equal to the ones asked for. What a result is, and
how it is written to disk, is the caller's: ``encode(result)`` gives the picklable dict
stored beside the functions (None: keep it in memory only), ``decode(entry)`` the result back
(None when the entry does not suit this process).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import pickle
import threading
from typing import Callable, Optional

from tvmscript import cache as disk_cache
from tvmscript import ir
from tvmscript.ir.structural import structural_hash

__all__ = ["BuildCache", "compiler_fingerprint"]


@functools.lru_cache(maxsize=None)
def compiler_fingerprint() -> str:
    """A hash of what decides generated code: tvms's source files (paths, sizes and
    modification times, so an edited checkout never reuses old code), the tvms, llvmlite and
    LLVM versions."""
    import llvmlite
    import llvmlite.binding as llvm

    from tvmscript import runtime, version

    llvm_version = f"{llvmlite.__version__}/{'.'.join(map(str, llvm.llvm_version_info))}"
    digest = hashlib.sha256(f"tvms {version.__version__}; llvmlite {llvm_version}".encode())
    roots = [os.path.dirname(os.path.abspath(m.__file__)) for m in (version, runtime)]
    roots.append(os.path.dirname(os.path.abspath(__file__)))
    for top in sorted(set(roots)):
        stack = [top]
        while stack:
            with os.scandir(stack.pop()) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != "__pycache__":
                            stack.append(entry.path)
                    elif entry.name.endswith((".py", ".lark")):
                        st = entry.stat()
                        digest.update(f"{entry.path}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


def _private_copy(funcs: dict):
    """A copy of ``funcs`` that later changes to them cannot reach: their pickle (bytes), or a
    deep copy if something in them cannot be pickled."""
    try:
        return pickle.dumps(funcs, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable attribute value: fall back
        return copy.deepcopy(funcs)


def _restore(saved) -> dict:
    return pickle.loads(saved) if isinstance(saved, bytes) else saved


def _same_funcs(saved: dict, funcs: dict) -> bool:
    return saved.keys() == funcs.keys() and all(ir.structural_equal(saved[n], funcs[n]) for n in funcs)


class BuildCache:
    """Results by (options, functions); ``kind`` names the disk subfolder and ``magic`` the
    entries' format (`tvmscript.cache`)."""

    def __init__(self, kind: str, magic: bytes) -> None:
        self.kind, self.magic = kind, magic
        self._lock = threading.Lock()
        self._memory: dict = {}     # key -> [(saved funcs, result)]

    def clear(self) -> None:
        """Forget the in-memory results (the disk entries stay)."""
        with self._lock:
            self._memory.clear()

    def build(self, funcs: dict, options, make: Callable, encode: Callable, decode: Callable):
        """The result for ``funcs`` and ``options`` (anything with a stable ``repr``): from
        memory, else from disk, else ``make()``'s, which is then kept in both."""
        parts = [repr(options)] + [f"{n}:{structural_hash(funcs[n])}" for n in sorted(funcs)]
        key = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        with self._lock:
            candidates = list(self._memory.get(key, ()))
        for saved, result in candidates:
            if _same_funcs(_restore(saved), funcs):
                return result
        saved = _private_copy(funcs)
        path = self._path(key)
        result = self._load(path, funcs, decode) if path else None
        if result is None:
            result = make()
            if path and isinstance(saved, bytes):
                self._store(path, saved, result, encode)
        with self._lock:
            self._memory.setdefault(key, []).append((saved, result))
        return result

    def _path(self, key: str) -> Optional[str]:
        folder = disk_cache.folder(self.kind)
        if folder is None:
            return None
        name = hashlib.sha256(f"{key};{compiler_fingerprint()}".encode()).hexdigest()
        return os.path.join(folder, name + ".build")

    def _store(self, path: str, saved_funcs: bytes, result, encode: Callable) -> None:
        entry = encode(result)
        if entry is None:
            return
        try:
            payload = pickle.dumps({"funcs": saved_funcs, "result": entry}, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - something in the result does not pickle: memory only
            return
        disk_cache.write(path, self.magic, payload)

    def _load(self, path: str, funcs: dict, decode: Callable):
        """The result stored at ``path`` if the entry is whole, was built from ``funcs`` and
        suits this process; else None."""
        payload = disk_cache.read(path, self.magic)
        if payload is None:
            return None
        try:
            entry = pickle.loads(payload)
            if not _same_funcs(pickle.loads(entry["funcs"]), funcs):
                return None
            return decode(entry["result"])
        except Exception:  # noqa: BLE001 - an entry we cannot use is only a build
            return None
