"""Stand-ins for ``pycuda.driver``, so that runtime/cuda.py and the VM's GPU path run without a GPU.

* `FakeDriver`: "device memory" is host memory, and a loaded image's kernels are whatever
  Python callables the test gives (the CPU backend's kernels, usually). It tests the runtime's
  bookkeeping: the pool, copies, contexts, events, argument assembly, and CUDA graphs: streams
  capture pycuda-style (``begin_capture``/``end_capture`` give a graph of the launches made
  meanwhile, whose instance replays them), and it counts kernels launched one by one
  (``launches``), graphs captured and graph launches.
* `EmulatedDriver`: the same memory model, but an image loads as the CUDA C it was compiled
  from, run by `cuda_emulator` (g++ with the shim, the threads of a block as fibers). The
  kernels tvms generates then run for real, launched by the real runtime with the grids,
  blocks, shared memory and argument formats it computed, so a test can take a module from
  ``tvms.compile(mod, target="cuda")`` through ``relax.VirtualMachine(ex, tvms.cuda())`` and
  compare with the CPU backend. Fresh allocations hold 0xff bytes (NaN as floats) between guard
  zones, which are checked after every launch: a kernel that writes outside its buffers fails
  there, naming the kernel.

Either runs each operation when it is issued, unless made ``asynchronous=DELAY``: then each
stream runs its work in order on a thread of its own (`_StreamWorker`), after random pauses,
events mark points in that order and ``wait_for_event`` orders two streams, as on a GPU. Tests
of concurrency use it: work the runtime forgot to order across streams then reads stale or
half-written memory, and gives wrong results.

`install_driver` puts either in place of pycuda for one test (through ``monkeypatch``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.machinery
import queue
import random
import sys
import threading
import time
import types
import weakref

from tvmscript.runtime import cuda

_REAL_DETECTION = cuda._driver_or_reason

class FakeDriver(types.ModuleType):
    """The part of ``pycuda.driver`` that runtime/cuda.py uses, over host memory: device
    pointers are host addresses, a CUBIN loads as the CPU kernels given in ``kernels``
    (symbol -> callable taking the launch's arguments), events read the wall clock."""

    def __init__(self, count=1, capability=(9, 0), init_error=None, kernels=None, memory_limit=None,
                 attributes=None, asynchronous=None) -> None:
        super().__init__("pycuda.driver")
        driver = self
        # ``asynchronous``: the most seconds a stream's worker waits before each operation (see
        # `_StreamWorker`); None runs every operation at once, on the calling thread.
        self.asynchronous = asynchronous
        self.lock = threading.RLock()   # one kernel runs at a time, whichever thread launched it

        class Error(Exception):
            pass

        class MemoryError(Error):  # noqa: A001 - pycuda's name
            pass

        class Context:
            def push(self):
                driver.context_stack.append(self)

            @staticmethod
            def pop():
                driver.context_stack.pop()

            @staticmethod
            def synchronize():
                for stream in list(driver.streams):
                    stream.synchronize()

        class Device:
            def __init__(self, index):
                self.index = index

            @staticmethod
            def count():
                return count

            def name(self):
                return "Fake GPU"

            def compute_capability(self):
                return capability

            @staticmethod
            def get_attribute(attr):
                return driver.attributes[attr]

            def retain_primary_context(self):
                # pycuda frees a context's objects at exit only from this thread (it warns "in
                # out-of-thread context could not be cleaned up" from any other)
                driver.context_threads.append(threading.get_ident())
                return Context()

        class Stream:
            handle = 0x5EED

            def __init__(self, flags=0):
                self.flags = flags
                self.captured = None        # the launches recorded while capturing, else None
                self.worker = None          # asynchronous: the `_StreamWorker` running its work
                self.context = driver.context_id
                driver.streams.append(self)

            def wait_for_event(self, event):
                driver.waits.append((self, event))
                done = getattr(event, "done", None)
                if done is not None:
                    driver.on_stream(self, done.wait)

            def synchronize(self):
                driver.refuse_while_capturing("cuStreamSynchronize")
                driver.syncs += 1
                if self.worker is not None:
                    self.worker.drain()
                if driver.fault is not None:   # a fault a kernel left, found here (a test sets it)
                    fault, driver.fault = driver.fault, None
                    if cuda.is_sticky(fault):  # the context is lost: every later call fails the same way
                        driver.lost = fault
                    raise Error(fault)

            # Stream capture, pycuda-style (pycuda itself has none: runtime/cuda_graph.py
            # calls libcuda for it, and uses these methods where a driver module has them).
            def begin_capture(self, mode=0):
                if self.captured is not None:
                    raise Error("cuStreamBeginCapture failed: the stream is already capturing")
                self.captured = []
                driver.capturing[threading.get_ident()] = self

            def end_capture(self):
                if self.captured is None:
                    raise Error("cuStreamEndCapture failed: the stream is not capturing")
                ops, self.captured = self.captured, None
                del driver.capturing[threading.get_ident()]
                driver.captures += 1
                return Graph(ops)

        class Graph:
            """A captured graph: the launches recorded, replayed in order by its instance."""

            def __init__(self, ops):
                self.ops = list(ops)

            def node_count(self):
                return len(self.ops)

            def instance(self):
                return GraphExec(self.ops)

        class GraphExec:
            def __init__(self, ops):
                self.ops = ops
                self.context = driver.context_id

            def launch(self, stream):
                assert stream.captured is None, "a graph launched on a capturing stream"
                driver.check_alive("cuGraphLaunch")
                driver.check_context(self.context, "cuGraphLaunch")
                driver.graph_launches += 1

                def replay():
                    for function, grid, block, args, shared_size in self.ops:
                        driver.replayed += 1
                        driver.run_kernel(function, grid, block, args, shared_size)

                driver.on_stream(stream, replay)

        class Event:
            done = None   # asynchronous: set once the stream reaches the event

            def record(self, stream=None):
                driver.events.append(stream)
                self.t = time.perf_counter()
                if driver.asynchronous is not None and stream is not None:
                    self.done = threading.Event()

                    def reached():
                        self.t = time.perf_counter()
                        self.done.set()

                    driver.on_stream(stream, reached)
                return self

            def synchronize(self):
                if self.done is not None:
                    self.done.wait()
                return self

            def query(self):
                return self.done is None or self.done.is_set()

            def time_till(self, end):
                return (end.t - self.t) * 1000.0

        class Allocation:
            def __init__(self, nbytes):
                self.buf = ctypes.create_string_buffer(nbytes + 256)
                self.ptr = (ctypes.addressof(self.buf) + 255) & ~255
                self.nbytes = nbytes

            def __int__(self):
                return self.ptr

            def poison(self):
                if self.buf is not None:
                    ctypes.memset(self.ptr, 0xFF, self.nbytes)

            def free(self):
                driver.freed += 1
                self.buf = None

        class Function:
            def __init__(self, symbol, run):
                self.symbol, self.run, self.attributes = symbol, run, {}
                self.context = driver.context_id

            def prepare(self, arg_format):
                self.arg_format = "".join(arg_format)
                return self

            def set_attribute(self, attribute, value):
                self.attributes[attribute] = value

            def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
                assert isinstance(grid, tuple) and isinstance(block, tuple) and stream is not None
                assert len(args) == len(self.arg_format)
                if stream.captured is not None:  # recorded into the graph, not run
                    stream.captured.append((self, grid, block, args, shared_size))
                    return
                driver.check_alive("cuLaunchKernel")
                driver.check_context(self.context, "cuLaunchKernel")
                driver.launches.append((self.symbol, grid, block, args, shared_size))
                driver.on_stream(stream, lambda: driver.run_kernel(self, grid, block, args, shared_size))

        class Module:
            def __init__(self, kernels):
                self.kernels = kernels

            def get_function(self, symbol):
                if symbol not in self.kernels:
                    raise Error(f"cuModuleGetFunction failed: named symbol not found ({symbol})")
                return Function(symbol, self.kernels[symbol])

        self.Error, self.MemoryError, self.Device, self.Stream, self.Event = Error, MemoryError, Device, Stream, Event
        self.Graph, self.Context = Graph, Context
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=8)
        # An H100's launch limits (`runtime.cuda.LAUNCH_LIMITS`), by name; ``attributes`` changes them.
        self.attributes = {"MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
                           "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
                           "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
                           "MAX_REGISTERS_PER_BLOCK": 65536, **(attributes or {})}
        self.device_attribute = types.SimpleNamespace(**{name: name for name in self.attributes})
        self.kernels = dict(kernels or {})
        self.context_stack, self.launches, self.events, self.context_threads = [], [], [], []
        self.streams, self.waits = [], []  # every stream made; (stream, event) of each wait_for_event
        self.syncs = self.freed = self.allocations = 0
        self.live_bytes = 0          # device memory allocated and not freed (`memory_limit` bounds it)
        self.fault = None            # the next synchronization's error, when a test sets one
        self.lost = None             # the sticky error that lost the context, until it is reset
        self.resets = 0              # primary context resets
        # Each reset starts a new context: objects of an older one (functions, streams, graphs)
        # are refused, and its memory is overwritten with 0xff bytes, as it is gone on a GPU.
        self.context_id = 0
        self.allocated = weakref.WeakSet()
        self.loaded = []
        # Stream capture: the stream capturing on each thread; graphs captured, graph launches and
        # the kernels they ran (`launches` holds only the kernels launched one by one).
        self.capturing = {}
        self.captures = self.graph_launches = self.replayed = 0

        def init():
            if init_error is not None:
                raise Error(init_error)

        def mem_alloc(nbytes):
            driver.refuse_while_capturing("cuMemAlloc")
            if memory_limit is not None and driver.live_bytes + nbytes > memory_limit:
                raise MemoryError("cuMemAlloc failed: out of memory")
            driver.allocations += 1
            alloc = driver.allocate(Allocation, nbytes)
            driver.live_bytes += nbytes
            free = alloc.free

            def freeing():
                driver.drain()   # as cuMemFree waits for the device
                driver.live_bytes -= nbytes
                free()

            alloc.free = freeing
            return alloc

        def mem_get_info():
            total = memory_limit if memory_limit is not None else 80 << 30
            return total - driver.live_bytes, total

        def memcpy_htod_async(dst, src, stream=None):
            driver.refuse_while_capturing("cuMemcpyHtoDAsync")
            staged = bytes(src)  # from pageable memory the driver stages the data at once
            driver.on_stream(stream, lambda: ctypes.memmove(dst, staged, len(staged)))

        def memcpy_dtoh_async(dst, src, stream=None):
            driver.refuse_while_capturing("cuMemcpyDtoHAsync")
            driver.on_stream(stream, lambda: ctypes.memmove(dst.ctypes.data, src, dst.nbytes))

        def memcpy_dtod_async(dst, src, nbytes, stream=None):
            driver.check_alive("cuMemcpyDtoDAsync")
            driver.on_stream(stream, lambda: ctypes.memmove(dst, src, nbytes))

        def module_from_buffer(image):
            driver.check_alive("cuModuleLoadData")
            driver.loaded.append(bytes(image))
            return Module(driver.kernels_of(bytes(image)))

        self.init, self.mem_alloc, self.module_from_buffer = init, mem_alloc, module_from_buffer
        self.mem_get_info = mem_get_info
        self.memcpy_htod_async, self.memcpy_dtoh_async = memcpy_htod_async, memcpy_dtoh_async
        self.memcpy_dtod_async = memcpy_dtod_async

    def refuse_while_capturing(self, call: str) -> None:
        """What a capture in thread-local mode refuses on its thread: an allocation, a
        synchronization. Stricter than CUDA for copies (one on another stream would run at once
        rather than be captured): tvms must make none while capturing. And what a lost context
        refuses: everything (`check_alive`)."""
        self.check_alive(call)
        if threading.get_ident() in self.capturing:
            raise self.Error(f"{call} failed: operation not permitted when stream is capturing")

    def check_alive(self, call: str) -> None:
        """After a sticky fault (``fault`` set to one, found at a synchronization), every call
        fails with it until the context is reset, as on a GPU."""
        if self.lost is not None:
            raise self.Error(f"{call} failed: {self.lost}")

    def reset_primary_context(self, index: int) -> None:
        """``cuDevicePrimaryCtxReset`` (`runtime.cuda.reset_primary_context`): a new context,
        usable again; the old one's memory holds 0xff bytes and its objects are refused."""
        self.drain()
        self.lost = None
        self.resets += 1
        self.context_id += 1
        for alloc in list(self.allocated):
            alloc.poison()

    def check_context(self, context: int, call: str) -> None:
        """Refuse an object (a function, stream or graph) of a context reset since it was made."""
        if context != self.context_id:
            raise self.Error(f"{call} failed: invalid resource handle (an object of a context that was reset)")

    def on_stream(self, stream, work) -> None:
        """Run ``work`` as operation of ``stream``: at once, or (asynchronous) queued on the
        stream's worker thread, after the stream's earlier work."""
        if stream is not None:
            self.check_context(stream.context, "a call on a stream")
        if self.asynchronous is None or stream is None:
            work()
            return
        if stream.worker is None:
            stream.worker = _StreamWorker(self.asynchronous, seed=len(self.streams) * 7919 + id(stream) % 7919)
        stream.worker.submit(work)

    def drain(self) -> None:
        """Wait until every stream's queued work is done (asynchronous), its errors kept."""
        for stream in list(self.streams):
            if stream.worker is not None:
                stream.worker.drain(raising=False)

    # What the emulated GPU below replaces.
    def allocate(self, allocation_class, nbytes):
        with self.lock:
            alloc = allocation_class(nbytes)
            self.allocated.add(alloc)
            return alloc

    def kernels_of(self, image: bytes) -> dict:
        """The kernels (symbol -> what `run_kernel` runs) of a loaded image."""
        return self.kernels

    def run_kernel(self, function, grid, block, args, shared_size) -> None:
        with self.lock:
            function.run(*args)


class _StreamWorker:
    """A stream of the asynchronous fake GPU: its operations run in order on a thread of its
    own, each after a random pause of up to ``delay`` seconds, so work on two streams
    interleaves at random, as on a GPU, and work the runtime failed to order across streams
    shows as wrong results. The first operation that raises keeps its error for the next
    `drain` (a synchronization) and the stream's later work is skipped, as after a fault."""

    def __init__(self, delay: float, seed: int) -> None:
        self.delay = delay
        self.rng = random.Random(seed)
        self.queue: queue.Queue = queue.Queue()
        self.pending = 0
        self.idle = threading.Condition()
        self.error = None
        threading.Thread(target=self._run, daemon=True, name="fake-gpu-stream").start()

    def submit(self, work) -> None:
        with self.idle:
            self.pending += 1
        self.queue.put(work)

    def _run(self) -> None:
        while True:
            work = self.queue.get()
            time.sleep(self.rng.uniform(0, self.delay))
            try:
                if self.error is None:
                    work()
            except Exception as err:  # noqa: BLE001 - kept for the next synchronization
                self.error = err
            finally:
                with self.idle:
                    self.pending -= 1
                    self.idle.notify_all()

    def drain(self, raising: bool = True) -> None:
        with self.idle:
            self.idle.wait_for(lambda: self.pending == 0)
        if raising and self.error is not None:
            error, self.error = self.error, None
            raise error


def install_driver(monkeypatch, driver) -> None:
    """Make ``import pycuda.driver`` give ``driver`` (None: pycuda not installed), with the
    runtime's per-process state reset for the test."""
    if driver is None:
        monkeypatch.setitem(sys.modules, "pycuda", None)
    else:
        pkg = types.ModuleType("pycuda")
        pkg.__spec__ = importlib.machinery.ModuleSpec("pycuda", None, is_package=True)
        pkg.__path__ = []
        pkg.driver = driver
        monkeypatch.setitem(sys.modules, "pycuda", pkg)
        monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
        if isinstance(driver, EmulatedDriver):
            driver.record_sources(monkeypatch)
    monkeypatch.setattr(cuda, "_RUNTIMES", {})
    monkeypatch.setattr(cuda, "_thread", cuda._ThreadState())
    # A detection of its own, so that the process's (of the real pycuda) is back afterwards.
    monkeypatch.setattr(cuda, "_driver_or_reason", functools.lru_cache(maxsize=None)(_REAL_DETECTION.__wrapped__))


class EmulatedDriver(FakeDriver):
    """A GPU of compute capability 9.0 whose kernels run in the CUDA emulator.

    A CUBIN carries no source, so the driver learns each one's CUDA C as it is built
    (`record_sources` wraps ``compiler.build.build_cuda`` while the driver is installed); an
    image built some other way is refused with an error saying so (`sources` can be given it)."""

    def __init__(self, count: int = 1, capability=(9, 0), **kwargs) -> None:
        super().__init__(count=count, capability=capability, **kwargs)
        self.sources: dict = {}          # CUBIN or PTX bytes -> the CUDA C they came from
        self._modules: dict = {}         # the CUDA C -> its EmulatedModule
        self._live = weakref.WeakValueDictionary()   # address -> _GuardedAllocation
        self.kernel_seconds = 0.0

    def record_sources(self, monkeypatch) -> None:
        build = importlib.import_module("tvmscript.compiler.build")   # the module, not tvms.compiler.build()
        build_cuda = build.build_cuda

        def recording(*args, **kwargs):
            code = build_cuda(*args, **kwargs)
            for image in (code.cubin, code.ptx.encode() if code.ptx else None):
                if image:
                    self.sources[bytes(image)] = code.source
            return code

        monkeypatch.setattr(build, "build_cuda", recording)

    def allocate(self, allocation_class, nbytes):
        with self.lock:
            alloc = _GuardedAllocation(self, nbytes)
            self._live[alloc.ptr] = alloc
            self.allocated.add(alloc)
            return alloc

    def kernels_of(self, image: bytes) -> dict:
        from .cuda_emulator import EmulatedModule

        source = self.sources.get(image.rstrip(b"\0")) or self.sources.get(image)
        if source is None:
            raise self.Error("cuModuleLoadData failed: the emulated GPU has no CUDA source for this image (it was "
                             "not built by build_cuda while the emulated driver was installed)")
        module = self._modules.get(source)
        if module is None:
            module = self._modules[source] = EmulatedModule(source)
        return {name: module for name in module.kernels}

    def run_kernel(self, function, grid, block, args, shared_size) -> None:
        with self.lock:
            self._run_emulated(function, grid, block, args, shared_size)

    def _run_emulated(self, function, grid, block, args, shared_size) -> None:
        from .cuda_emulator import _LETTERS

        values = [_LETTERS[letter](a) for letter, a in zip(function.arg_format, args)]
        t0 = time.perf_counter()
        function.run._launch(function.symbol, grid, block, values, shared_size)
        self.kernel_seconds += time.perf_counter() - t0
        damaged = []
        for alloc in list(self._live.values()):
            bad = alloc.guard_damage()
            if bad is not None:
                damaged.append(f"the {alloc.nbytes}-byte allocation at {alloc.ptr:#x}: {bad[1]} byte(s) written "
                               f"outside it, the first at byte offset {bad[0]}")
        if damaged:
            raise self.Error(f"kernel '{function.symbol}' wrote outside device memory: " + "; ".join(damaged))


class _GuardedAllocation:
    """Device memory of the emulated GPU: host bytes holding 0xff, as uninitialized memory
    might, between guard zones `EmulatedDriver.run_kernel` checks."""

    def __init__(self, driver, nbytes: int) -> None:
        from .cuda_emulator import _Staged

        self.driver, self.nbytes = driver, nbytes
        self.buffer = _Staged(nbytes)
        self.ptr = self.buffer.address

    def __int__(self) -> int:
        return self.ptr

    def guard_damage(self):
        return None if self.buffer is None else self.buffer.guard_damage()

    def poison(self) -> None:
        if self.buffer is not None:
            self.buffer.data[:] = 0xFF

    def free(self) -> None:
        self.driver.freed += 1
        self.buffer = None
