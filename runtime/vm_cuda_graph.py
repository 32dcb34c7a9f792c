"""CUDA graphs in the VM: a Relax function whose every step is a kernel launch (the compiler's
RewriteCUDAGraph says so: ``VMFunction.cuda_graph``) replays its launches as one CUDA graph,
so a small batch pays the host's cost of a launch once per call instead of once per kernel.

How a call of such a function runs (`CUDAGraphFunction`):

* **Key.** A graph holds the device addresses its kernels were captured with, so graphs are
  kept per key: each argument's address, shape and dtype (and the value of an argument that is
  a number). Arguments are not copied into buffers of the graph's own: weights passed as
  parameters stay where they are, at no cost per call, and a caller passing the same tensors
  again (or new ones the memory pool puts at the same address, as it does for an input freed
  and made again) replays. Up to `MAX_GRAPHS` keys are kept per function, the least recently
  used dropped first; after `MAX_UNREPLAYED` captures in a row with no replay between them
  (arguments at new addresses on every call), the function stops capturing.
* **First call with a key.** The function runs as usual, but in a second instance of the VM's
  functions (`_Namespace`) whose helpers record the sizes of the memory it takes, in order, and
  notice host work. That memory is then taken again, before any capture (an allocation during a
  capture is not allowed), and the function runs a second time on a capture stream: its
  launches are recorded, not run, and each allocation gets the next block reserved. The graph
  keeps those blocks (arena frame, workspaces, outputs) for as long as it lives, so their
  addresses stay valid, as TVM's RewriteCUDAGraph lifts the static allocations out of the
  captured region. The graph is instantiated and replayed once, its outputs compared with the
  first run's, and the call returns the first run's result.
* **Later calls with that key.** One graph launch on the VM's stream, then one device to
  device copy per output into a fresh tensor. Outputs never alias those of an earlier call the
  caller still holds: TVM allocates a function's outputs outside the captured region for the
  same reason, so there too the last kernels (those writing the outputs) run outside the graph.

Whatever cannot be captured runs as before, and `CUDAGraphFunction.stats` says why: host work
the compiler did not see (an extern function, a host op, an ``R.If`` on a tensor's value,
found in the first run), an argument that is not a tensor or a number, a result that is not
memory of the graph's own (an argument or a constant returned), a capture the driver refused
or whose replay differed from the run. The compiler's checks come first (`VMFunction.cuda_graph`);
these are the runtime's defence, so a wrong guess costs speed, never a wrong result.
"""

from __future__ import annotations

import collections
import gc
import threading

import numpy as np

from . import cuda
from .cuda_graph import capture_stream, graph_api
from .cuda_kernels import raise_bounds_failure
from .ndarray import Tensor
from .vm_helpers import (ARGSORT, ASSERT, DYNAMIC_STRIDED_SLICE, EMPTY, EXTERN, PRINT, SHAPE_TENSOR, SORT, TOPK,
                         TRUTH)

__all__ = ["CUDAGraphs", "CUDAGraphFunction", "NotCapturable", "MAX_GRAPHS", "MAX_UNREPLAYED"]

MAX_GRAPHS = 4
MAX_UNREPLAYED = 8

# The VM helpers that do host work, and what the reason for not capturing says about each.
_HOST_HELPERS = {
    SORT: "R.sort runs on the host", ARGSORT: "R.argsort runs on the host", TOPK: "R.topk runs on the host",
    DYNAMIC_STRIDED_SLICE: "R.dynamic_strided_slice runs on the host",
    SHAPE_TENSOR: "R.shape_to_tensor copies from the host", PRINT: "R.print runs on the host",
    ASSERT: "R.assert_op reads a value on the host",
}


class NotCapturable(Exception):
    """A function cannot be captured as a CUDA graph; the message says why."""


# ----------------------------------------------------------------------------- one run


class _Session:
    """What the second instance's helpers do during one run: record (the first call's real
    run: allocation sizes, host work) or capture (allocations from the blocks reserved for it,
    launches on the capturing stream)."""

    def __init__(self, rt, stream, reserved=None, errors=None) -> None:
        self.rt = rt
        self.stream = stream               # the driver's stream the launches go to
        self.recording = reserved is None
        # The error record the checking kernels note a failure in: the thread's for the first
        # run, the graph's own (a block it keeps) for the capture.
        self.errors = errors
        self.sizes: list = []              # recording: nbytes of each allocation, in order
        self.reserved = reserved or []     # capture: (nbytes, block) each, handed out in order
        self.next = 0
        self.host_work = None              # recording: the first host work seen
        self.launches = 0                  # __global__ launches made
        self.checked: list = []            # the kernels launched that check bounds on the device
        self.outputs = None                # capture: the run's result, over the reserved memory

    def malloc(self, nbytes: int):
        if self.recording:
            self.sizes.append(nbytes)
            return self.rt.pool.malloc(nbytes, self.rt.current_stream())
        if self.next >= len(self.reserved) or self.reserved[self.next][0] != nbytes:
            raise NotCapturable("the capture allocated other sizes than the first run did")
        block = self.reserved[self.next][1]
        self.next += 1
        return block

    def host(self, what: str) -> None:
        if not self.recording:
            raise NotCapturable(what)
        if self.host_work is None:
            self.host_work = what


class _Namespace:
    """A second instance of the VM's functions, sharing its constants but not its arena frames
    or its helpers: allocations, launches and host work go through the current `_Session`.
    Ordinary calls never run here, so they pay nothing for it."""

    def __init__(self, ex, g: dict, kernels: dict, dev, make_entry) -> None:
        rt = cuda.runtime(dev)
        self.session = None
        self.pools: list = []
        ns = dict(g)

        def malloc(nbytes: int):
            return self.session.malloc(nbytes)

        ns[EMPTY] = lambda shape, dtype: rt.empty(shape, dtype, malloc)
        for f in ex.functions.values():
            for gname, kname in f.kernels.items():
                ns[gname] = self._launcher(kernels[kname])
            if f.arena:
                pool, factory = f.arena_names
                self.pools.append(pool)
                ns[factory] = cuda.frame_factory(f.arena, f.arena_bytes, dev, malloc)
        self._guard_host_helpers(ns, g)
        for f in ex.functions.values():
            exec(f.code, ns)
        self.ns = ns
        self.entries = {name: make_entry(name, ns) for name in ex.functions}

    def _launcher(self, kernel):
        launch_on = kernel.launch_on

        checked = kernel.checks_on_device

        def launch(*args) -> None:
            s = self.session
            errors = s.errors.ptr if s.errors is not None else s.rt.error_record
            s.launches += launch_on(s.stream, s.malloc, args, errors)
            if checked:
                if s.recording:   # a real run: its failed check is raised now, as `CUDAKernel.launch` does
                    raise_bounds_failure(s.rt, (kernel,))
                elif kernel not in s.checked:
                    s.checked.append(kernel)

        return launch

    def _guard_host_helpers(self, ns: dict, g: dict) -> None:
        """Each helper doing host work tells the session first (which refuses it in a capture)."""
        def guard(fn, what: str):
            def guarded(*args):
                self.session.host(what)
                return fn(*args)
            return guarded

        for name, what in _HOST_HELPERS.items():
            ns[name] = guard(g[name], what)
        truth, extern = g[TRUTH], g[EXTERN]

        def _truth(v):
            if isinstance(v, Tensor):
                self.session.host("an R.If on a tensor's value (control flow that depends on data)")
            return truth(v)

        ns[TRUTH] = _truth
        ns[EXTERN] = lambda name: guard(extern(name), f"it calls the host function {name!r}")

    def run(self, name: str, session: _Session, args: tuple):
        """Function ``name`` called with ``args`` in this instance, under ``session``; every
        run starts with empty frame pools, so the arena frames come from the session too."""
        self.session = session
        for pool in self.pools:
            self.ns[pool] = []
        try:
            return self.entries[name](*args)
        finally:
            self.session = None
            for pool in self.pools:
                self.ns[pool] = []


# ----------------------------------------------------------------------------- a captured graph


class _Replay:
    """An instantiated graph with the memory it keeps: `replay` launches it, then copies each
    output it wrote into a fresh tensor, rebuilt in the shape of the function's result."""

    def __init__(self, rt, graph, blocks: list, staged: list, template, checked: tuple = (), errors=None) -> None:
        self.rt = rt
        self.checked = tuple(checked)      # its kernels that check bounds: its error record is read after it
        self.errors = errors               # that record (a pool block), None when none checks
        self.graph = graph                 # the CUgraph, kept with its instance
        self.exec = graph.instance()
        self.blocks = blocks               # the memory the graph's kernels use
        self.staged = [(t._shape, t._dtype, t.nbytes, t._ptr) for t in staged]
        self.template = template

    def replay(self):
        """Launch the graph on the current stream (the VM's) and copy its outputs out. The
        caller holds the function's lock: replays of one graph share its memory, so they run
        one at a time, and on one stream, in order."""
        rt = self.rt
        if cuda._thread.runtime is not rt:
            rt.activate()
        stream = rt.current_stream()
        self.exec.launch(stream.raw)
        if self.checked:
            raise_bounds_failure(rt, self.checked, self.errors.ptr)
        outs = []
        for shape, dtype, nbytes, ptr in self.staged:
            t = rt.empty(shape, dtype)
            rt.copy_on_device(t._ptr, ptr, nbytes, stream)
            outs.append(t)
        return _build(self.template, outs)


def _flatten(value, owned: set, staged: list, seen: dict):
    """The template of a function's result: a tensor becomes ("t", its index in ``staged``)
    (the same tensor twice, the same index: the copies alias as the run's results did), a
    tuple ("tuple", fields), a number, string or None ("v", itself). A tensor over memory the
    graph does not own, or any other object, cannot be replayed."""
    if isinstance(value, Tensor):
        if id(value._mem) not in owned:
            raise NotCapturable("the result is not memory the graph owns (an argument or a constant is returned)")
        if id(value) not in seen:
            seen[id(value)] = len(staged)
            staged.append(value)
        return ("t", seen[id(value)])
    if isinstance(value, tuple):
        return ("tuple", [_flatten(v, owned, staged, seen) for v in value])
    if value is None or isinstance(value, (int, float, str)):
        return ("v", value)
    raise NotCapturable(f"the result holds a {type(value).__name__}, which a graph cannot give back")


def _build(template, outs: list):
    kind, item = template
    if kind == "t":
        return outs[item]
    if kind == "tuple":
        return tuple(_build(t, outs) for t in item)
    return item


def _leaves(value) -> list:
    """The tensors of a result, in order (as `_flatten` meets them)."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, tuple):
        return [t for v in value for t in _leaves(v)]
    return []


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a replay's output matches the run's: exactly for integers, within rounding
    (a kernel summing with atomics may add in another order) for floating point."""
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return bool(np.allclose(a64, b64, rtol=1e-3, atol=1e-5, equal_nan=True))


# ----------------------------------------------------------------------------- the VM's graphs


class CUDAGraphs:
    """A VM's CUDA graphs: the second instance of its functions captures run in (made at the
    first capture), the stream they capture on, and the lock that lets one capture run at a
    time (the instance's helpers serve one session)."""

    def __init__(self, ex, g: dict, kernels: dict, dev, make_entry) -> None:
        self.rt = cuda.runtime(dev)
        self._args = (ex, g, kernels, dev, make_entry)
        self._namespace = None
        self._stream = None
        self._api = None
        self.lock = threading.Lock()
        self.functions: dict = {}

    def wrap(self, name: str, plain) -> "CUDAGraphFunction":
        fn = self.functions[name] = CUDAGraphFunction(name, plain, self)
        return fn

    def record(self, name: str, args: tuple):
        """The first call's real run (under `lock`): its result and its `_Session`."""
        if self._namespace is None:
            self._namespace = _Namespace(*self._args)
        session = _Session(self.rt, self.rt.current_stream().raw)
        return self._namespace.run(name, session, args), session

    def capture(self, name: str, recording: _Session, args: tuple, result) -> _Replay:
        """The graph of function ``name`` with ``args`` (under `lock`, after `record`),
        replayed once and checked against ``result``; NotCapturable (or the driver's error)
        when it cannot be."""
        rt = self.rt
        rt.activate()  # the capture stream belongs to the context current when it is made
        if self._api is None:
            self._api = graph_api(rt.drv)
            self._stream = capture_stream(rt.drv)
        stream = rt.current_stream()
        reserved = [(n, rt.pool.malloc(n, stream)) for n in recording.sizes]
        session = _Session(rt, self._stream, reserved, rt.new_error_record())
        graph = self._captured(name, session, args)
        outputs = session.outputs
        if session.next != len(reserved):
            raise NotCapturable("the capture allocated less than the first run did")
        nodes = graph.node_count()
        if nodes != session.launches:
            raise NotCapturable(f"the captured graph holds {nodes} node(s) for {session.launches} kernel launch(es)")
        staged: list = []
        template = _flatten(outputs, {id(b) for _, b in reserved}, staged, {})
        replay = _Replay(rt, graph, [b for _, b in reserved], staged, template, session.checked,
                         session.errors if session.checked else None)
        for got, want in zip(_leaves(replay.replay()), _leaves(result)):
            if not _same(got.numpy(), want.numpy()):
                raise NotCapturable("the graph's first replay gave other values than the run")
        return replay

    def _captured(self, name: str, session: _Session, args: tuple):
        """The graph of one run of ``name`` under ``session`` (its result in
        ``session.outputs``). Python's cyclic garbage collector is paused meanwhile: a finalizer
        it ran here could call the driver (free memory, destroy an event), which a capture
        refuses on its thread."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._api.begin(self._stream)
            try:
                session.outputs = self._namespace.run(name, session, args)
            except BaseException:
                self._api.abort(self._stream)
                raise
            return self._api.end(self._stream)
        finally:
            if collecting:
                gc.enable()

    def reset(self) -> None:
        """Forget the graphs and the capture instance (after the context was recreated: their
        memory and code were the lost context's); the next calls capture again."""
        with self.lock:
            self._namespace = self._stream = self._api = None
            for fn in self.functions.values():
                with fn._lock:
                    fn._cache.clear()
                    fn._unreplayed = 0

    def stats(self) -> dict:
        return {name: fn.stats() for name, fn in self.functions.items()}


class CUDAGraphFunction:
    """``vm["main"]`` for a function the compiler marked capturable: a graph per key, replayed
    (see the module's docstring); ``plain`` (the VM's ordinary entry) for anything else."""

    def __init__(self, name: str, plain, graphs: CUDAGraphs) -> None:
        self.__name__ = self.__qualname__ = name
        self.__doc__ = getattr(plain, "__doc__", None)
        self._name = name
        self._plain = plain
        self._graphs = graphs
        self._cls = graphs.rt.tensor_class
        self._device = graphs.rt.device
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.RLock()   # held by a replay's launch and copies, which must not interleave
        self._unreplayed = 0
        self.captures = self.replays = 0
        self.disabled = None               # why the function stopped capturing, once it has

    def __call__(self, *args):
        """Called on the VM's stream (`runtime.vm._on_stream` makes it current): graphs replay
        there."""
        key = self._key(args)
        if key is not None:
            with self._lock:
                replay = self._cache.get(key)
                if replay is not None:
                    self._cache.move_to_end(key)
                    self.replays += 1
                    self._unreplayed = 0
                    return replay.replay()
        if key is None or self.disabled is not None:
            return self._plain(*args)
        return self._first_call(key, args)

    def _key(self, args: tuple):
        """The arguments' addresses, shapes and dtypes, and numbers' values; None when an
        argument is neither (the ordinary call handles it, or explains why it is wrong)."""
        key = []
        for a in args:
            if a.__class__ is self._cls:
                key.append((a._ptr, a._shape, a._dtype))
            elif a.__class__ in (int, float, bool):
                key.append((a.__class__, a))
            else:
                part = self._other_key(a)
                if part is None:
                    return None
                key.append(part)
        return tuple(key)

    def _other_key(self, a):
        if isinstance(a, tuple):
            fields = self._key(a)
            return None if fields is None else ("tuple", fields)
        try:  # a PyTorch or CuPy tensor on this GPU, through DLPack
            t = cuda.as_tensor_on(a, self._device, self._name)
        except (TypeError, ValueError, BufferError):
            return None
        return None if t is None else (t._ptr, t._shape, t._dtype)

    def _first_call(self, key, args: tuple):
        graphs = self._graphs
        with graphs.lock:
            result, recording = graphs.record(self._name, args)  # an error of the program raises here
            if recording.host_work is not None:
                self._disable(f"{recording.host_work}, found in its first run")
                return result
            try:
                replay = graphs.capture(self._name, recording, args, result)
            except Exception as err:  # noqa: BLE001 - whatever went wrong, the call runs as before
                self._disable(f"{type(err).__name__}: {err}" if not isinstance(err, NotCapturable) else str(err))
                return result
        with self._lock:
            self._cache[key] = replay
            while len(self._cache) > MAX_GRAPHS:
                self._cache.popitem(last=False)
            self.captures += 1
            self._unreplayed += 1
            if self._unreplayed >= MAX_UNREPLAYED:
                self._disable(f"{MAX_UNREPLAYED} captures in a row were never replayed (the arguments come at "
                              "new addresses on every call)")
        return result

    def _disable(self, reason: str) -> None:
        """Run ordinary calls from now on; the graphs' memory goes back to the pool (later work
        on the stream, which is all that can reuse it, runs after any replay in flight)."""
        with self._lock:
            self.disabled = reason
            self._cache.clear()

    def stats(self) -> dict:
        """``graphs`` kept, ``captures`` made, ``replays`` run, and ``fallback``: why the
        function stopped capturing (None while it does)."""
        return {"graphs": len(self._cache), "captures": self.captures, "replays": self.replays,
                "fallback": self.disabled}

    def __repr__(self) -> str:
        return f"<tvms VM function {self._name!r} replayed as CUDA graphs: {self.stats()}>"
