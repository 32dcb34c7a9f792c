"""CUDA graphs on the driver: a stream's work captured into a graph, instantiated once and
launched again with one call.

Why here and through ctypes: pycuda (2026.1, the newest release) wraps no stream capture nor
graphs, so the driver's own entry points (``cuStreamBeginCapture_v2``, ``cuStreamEndCapture``,
``cuGraphInstantiateWithFlags``, ``cuGraphLaunch``, ...) are called in ``libcuda``, the library
pycuda itself loaded: the handles are the same objects (a pycuda ``Stream.handle`` is the
``CUstream``), and the primary context pycuda made current on the thread is the one these
calls see. A driver module that offers pycuda-style capture itself, ``Stream.begin_capture(mode)``
and ``Stream.end_capture()`` giving a graph whose ``instance()`` has ``launch(stream)`` (the
test suite's stand-in driver does), is used as it is instead.

`graph_api` gives either behind one interface: ``begin(stream)``, ``end(stream)`` (a `Graph`:
``node_count()``, ``instance()``), ``abort(stream)``, and the instance's ``launch(stream)``.
The VM's use of it (what is captured, when, the memory it keeps) is `runtime.vm_cuda_graph`'s.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["CUDAGraphError", "graph_api", "THREAD_LOCAL"]

# CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only the capturing thread is kept from calls that are
# unsafe during a capture (an allocation, a synchronization); other threads go on using the GPU.
THREAD_LOCAL = 1
_NON_BLOCKING = 1      # CU_STREAM_NON_BLOCKING: see `capture_stream`


class CUDAGraphError(RuntimeError):
    """The driver refused a step of capturing or launching a graph; the message names it."""


def graph_api(drv):
    """The graph operations for pycuda-like driver module ``drv``: its own, when its streams
    can capture; else the driver library's, through ctypes (`_Libcuda`)."""
    if hasattr(drv.Stream, "begin_capture"):
        return _DriverModuleGraphs()
    return _libcuda()


def capture_stream(drv):
    """A stream to capture on, created non-blocking: a capture on a stream that synchronizes
    with the legacy default stream is invalidated by anything another library does there."""
    return drv.Stream(_NON_BLOCKING)


class _DriverModuleGraphs:
    """Graphs through the driver module's own pycuda-style methods."""

    def begin(self, stream) -> None:
        stream.begin_capture(THREAD_LOCAL)

    def end(self, stream):
        return stream.end_capture()

    def abort(self, stream) -> None:
        stream.end_capture()


# ----------------------------------------------------------------------------- libcuda


@functools.lru_cache(maxsize=None)
def _libcuda() -> "_Libcuda":
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        return _Libcuda(ctypes.CDLL(name))
    except (OSError, AttributeError) as err:
        raise CUDAGraphError(f"the CUDA driver library has no graph entry points: {err}") from None


class _Libcuda:
    """The driver's graph entry points (CUDA 11.4 or newer), declared once."""

    def __init__(self, lib) -> None:
        vp, u64 = ctypes.c_void_p, ctypes.c_ulonglong
        self._lib = lib
        self._sigs = {
            "cuStreamBeginCapture_v2": (vp, ctypes.c_int),
            "cuStreamEndCapture": (vp, ctypes.POINTER(vp)),
            "cuGraphInstantiateWithFlags": (ctypes.POINTER(vp), vp, u64),
            "cuGraphLaunch": (vp, vp),
            "cuGraphGetNodes": (vp, vp, ctypes.POINTER(ctypes.c_size_t)),
            "cuGraphExecDestroy": (vp,),
            "cuGraphDestroy": (vp,),
        }
        for symbol, argtypes in self._sigs.items():
            fn = getattr(lib, symbol)
            fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuGetErrorName.restype = ctypes.c_int

    def call(self, symbol: str, *args) -> None:
        self.check(symbol, getattr(self._lib, symbol)(*args))

    def check(self, symbol: str, status: int) -> None:
        """Raise `CUDAGraphError` naming the driver's error when ``status`` is not CUDA_SUCCESS."""
        if status != 0:
            name = ctypes.c_char_p()
            self._lib.cuGetErrorName(status, ctypes.byref(name))
            text = name.value.decode() if name.value else f"error {status}"
            raise CUDAGraphError(f"{symbol} failed: {text}")

    def release(self, symbol: str, handle) -> None:
        """Destroy ``handle`` with ``symbol`` (``cuGraphDestroy``...), if there is one, quietly:
        at exit the library may be gone already."""
        if handle:
            try:
                getattr(self._lib, symbol)(handle)
            except Exception:  # noqa: BLE001 - at exit, the library may be gone already
                pass

    # ---- the interface of graph_api
    def begin(self, stream) -> None:
        self.call("cuStreamBeginCapture_v2", stream.handle, THREAD_LOCAL)

    def end(self, stream) -> "Graph":
        handle = ctypes.c_void_p()
        self.call("cuStreamEndCapture", stream.handle, ctypes.byref(handle))
        if not handle.value:
            raise CUDAGraphError("cuStreamEndCapture gave no graph: the capture was invalidated")
        return Graph(self, handle.value)

    def abort(self, stream) -> None:
        """End a capture that went wrong, dropping whatever it holds (an invalidated capture
        ends with an error, and no graph, which is fine here)."""
        handle = ctypes.c_void_p()
        if self._lib.cuStreamEndCapture(stream.handle, ctypes.byref(handle)) == 0 and handle.value:
            self._lib.cuGraphDestroy(handle.value)


class Graph:
    """A captured graph (``CUgraph``), destroyed with this object."""

    def __init__(self, api: _Libcuda, handle: int) -> None:
        self._api, self.handle = api, handle

    def node_count(self) -> int:
        count = ctypes.c_size_t(0)
        self._api.call("cuGraphGetNodes", self.handle, None, ctypes.byref(count))
        return count.value

    def instance(self) -> "GraphExec":
        handle = ctypes.c_void_p()
        self._api.call("cuGraphInstantiateWithFlags", ctypes.byref(handle), self.handle, 0)
        return GraphExec(self._api, handle.value)

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        self._api.release("cuGraphDestroy", handle)


class GraphExec:
    """An instantiated graph (``CUgraphExec``): `launch` runs all of it on a stream."""

    def __init__(self, api: _Libcuda, handle: int) -> None:
        self._api, self.handle = api, handle
        self._launch = api._lib.cuGraphLaunch

    def launch(self, stream) -> None:
        status = self._launch(self.handle, stream.handle)
        if status != 0:
            self._api.check("cuGraphLaunch", status)

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        self._api.release("cuGraphExecDestroy", handle)
