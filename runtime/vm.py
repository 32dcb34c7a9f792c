"""The Relax virtual machine: ``tvms.relax.VirtualMachine(ex, tvms.cpu())``.

``vm["main"]`` is a plain Python function made from the code `compiler.vm_codegen` generated
for the Relax function (see ``ex.as_python()``): it checks its arguments against the
parameters' annotations, binds the symbolic dims, then runs one line per binding, calling
kernels through their raw entry points with data pointers read from the tensors' slots. The
helpers that code calls are in `runtime.vm_helpers`, and the checks of values they make in
`runtime.value_checks`.

Intermediate tensors that never leave a function live in its *arena*: one aligned block per
frame, reused by every call; a frame in use is taken out of the pool, so recursion and threads
each get their own. Tensors that do leave (returned, passed to an extern function) are fresh.

On a CUDA device (``VirtualMachine(ex, tvms.cuda(0))``, for an executable compiled with
``target="cuda"``) the same generated code runs with the helpers of
`vm_helpers.cuda_helpers`: tensors are `runtime.cuda` tensors of that GPU, new tensors take
memory from its pool, constants and arena frames live in its memory, and kernels are
`runtime.cuda_kernels.CUDAKernel`s launched on the VM's own stream (``vm.stream``), so calls of
two VMs, on two threads, run side by side on the GPU. Arguments must already be on that
GPU: the VM copies nothing behind the caller's back. A function the compiler marked
(``VMFunction.cuda_graph``: it only launches kernels, on static shapes) replays them as one
CUDA graph after its first call (`runtime.vm_cuda_graph`; ``vm.cuda_graph_stats()``).

An error of the program that a function raises (a `TVMScriptError`: `VMTypeError`,
`VMValueError`, a kernel's failed check, a failed ``R.assert_op``) leaves it placed at the
binding that raised it, in the user's source (`runtime.sites`).

NumPy is imported when the first VM is made, not when tvmscript is imported.
"""

from __future__ import annotations

import time as _time

from tvmscript.diagnostics import TVMScriptError

from .devices import Device, device as _as_device, kDLCPU, kDLCUDA
from .executable import Executable
from .profiling import ProfileReport, resource_columns
from .vm_helpers import EMPTY, cpu_helpers, cuda_helpers

__all__ = ["VirtualMachine", "BenchmarkResult", "ProfileReport", "CallDepthError"]


class CallDepthError(RuntimeError):
    """Relax functions called each other deeper than Python's stack allows: a recursion with
    no end, most likely (a program error, reported as such rather than as a crash)."""


def _entry(name: str, g: dict, ex: Executable, kernels: dict):
    """Relax function ``name`` of ``ex`` (defined in the VM namespace ``g``) as called from
    outside the VM: a runaway recursion among the program's functions becomes a
    `CallDepthError` naming the entry function, and an error of the program is placed at the
    binding that raised it (`runtime.sites`)."""
    import functools

    fn = g[ex.functions[name].pyname]
    sites = {g[f.pyname].__code__: f.sites for f in ex.functions.values()}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            raise CallDepthError(f"'{name}': the Relax functions it calls call each other too deeply "
                                 "(a recursion that never ends?)") from None
        except TVMScriptError as err:
            if getattr(err, "site", None) is None:
                from .sites import locate, site_of

                site = site_of(err.__traceback__, sites)
                if site is not None:
                    locate(err, site, kernels)
            raise

    return call


def _on_stream(fn, stream, check_context):
    """``fn`` (a VM function on a GPU, plain or replayed as CUDA graphs) called on the VM's
    ``stream`` (`runtime.cuda.Stream`): ``check_context()`` first (the VM recreates a lost
    context there), then the stream is made current on the calling thread for the call, after
    waiting for the other streams that worked on the arguments' memory."""
    import functools

    from .cuda import _thread

    order_after = stream.rt.order_after

    @functools.wraps(fn, updated=())  # fn may be a CUDAGraphFunction: its attributes stay its own
    def call(*args):
        check_context()
        previous = _thread.stream
        _thread.stream = stream
        try:
            order_after(args, stream)
            return fn(*args)
        finally:
            _thread.stream = previous

    return call


class VirtualMachine:
    """Runs the Relax functions of an `Executable` on a device: the CPU, or a CUDA GPU for an
    executable compiled with ``target="cuda"``.

    ``vm["main"](*args)`` takes tvms tensors or NumPy arrays (wrapped without a copy when they
    are C-contiguous) and returns a tensor, or a tuple for a tuple result. On a GPU, it takes
    tensors on that GPU (tvms's, or PyTorch's and CuPy's through DLPack, without a copy)."""

    def __init__(self, rt_mod: Executable, device=None, memory_cfg=None, profile: bool = False) -> None:
        if not isinstance(rt_mod, Executable):
            raise TypeError(f"VirtualMachine expects an executable from tvms.compile, got {type(rt_mod).__name__}")
        self.executable = rt_mod
        self.device = _pick_device(device, rt_mod)
        self._profile = profile
        self._kernels = dict(rt_mod.kernels_on(self.device))  # updated in place when reloaded (`_GPUState`)
        self.stream = self._own_stream()
        self._globals = _instantiate(rt_mod, self.device, self._kernels, stream=self.stream)
        self._gpu = _GPUState(self) if self.stream is not None else None
        self._check_context = self._gpu.check if self._gpu is not None else None
        self._funcs = {name: self._entry(name, self._globals) for name in rt_mod.functions}
        self._graphs = self._cuda_graphs() if self.device.device_type == kDLCUDA else None
        self._inputs: dict = {}
        self._outputs: dict = {}

    def _own_stream(self):
        """On a GPU, the VM's own stream (`runtime.cuda.Stream`); None on the CPU. Calls of two
        VMs run side by side."""
        if self.device.device_type != kDLCUDA:
            return None
        from .cuda import runtime

        return runtime(self.device).acquire_stream()

    def _entry(self, name: str, g: dict):
        return self._on_stream(_entry(name, g, self.executable, self._kernels))

    def _on_stream(self, fn):
        """``fn`` called on this VM's stream (`_on_stream`); as it is on the CPU."""
        return fn if self.stream is None else _on_stream(fn, self.stream, self._check_context)

    def _cuda_graphs(self):
        """The functions the compiler found capturable (``VMFunction.cuda_graph``) replay CUDA
        graphs (`runtime.vm_cuda_graph`); None when there are none."""
        ex = self.executable
        names = [name for name, f in ex.functions.items() if f.cuda_graph]
        if not names:
            return None
        from .vm_cuda_graph import CUDAGraphs

        kernels = self._kernels
        # The graph functions and their capture instance run inside `_on_stream`'s wrapper.
        graphs = CUDAGraphs(ex, self._globals, kernels, self.device, lambda name, g: _entry(name, g, ex, kernels))
        self._gpu.graphs = graphs
        for name in names:
            self._funcs[name] = self._on_stream(graphs.wrap(name, _entry(name, self._globals, ex, kernels)))
        return graphs

    def cuda_graph_stats(self) -> dict:
        """Per Relax function, how CUDA graphs serve its calls on this GPU: ``enabled`` (the
        compiler marked it capturable), ``graphs`` kept, ``captures`` made, ``replays`` run,
        and ``fallback``, why its calls run kernel by kernel (the compiler's reason, or what
        stopped the runtime capturing it; None while graphs serve it)."""
        out = {}
        for name, f in self.executable.functions.items():
            fn = self._graphs.functions.get(name) if self._graphs is not None else None
            if fn is not None:
                out[name] = {"enabled": True, **fn.stats()}
            else:
                reason = f.cuda_graph_note or ("not on a GPU" if self.device.device_type != kDLCUDA else "not marked")
                out[name] = {"enabled": False, "graphs": 0, "captures": 0, "replays": 0, "fallback": reason}
        return out

    # ---- functions
    def __getitem__(self, name: str):
        try:
            return self._funcs[name]
        except KeyError:
            pass
        if name in self._kernels:
            return self._kernels[name]
        raise KeyError(f"the VM has no function named '{name}' (it has: {', '.join(self._funcs) or 'none'})")

    def __contains__(self, name: str) -> bool:
        return name in self._funcs or name in self._kernels

    def get_function(self, name: str):
        return self[name]

    def save_function(self, func_name: str, saved_name: str, *args, include_return: bool = True, **kwargs) -> None:
        """Bind ``args`` to ``func_name`` under a new name: ``vm[saved_name]()`` calls it (TVM's
        way to time a call without passing arguments through the FFI each time)."""
        if kwargs:
            raise TypeError("save_function: keyword arguments are not supported")
        f = self[func_name]
        if include_return:
            self._funcs[saved_name] = lambda: f(*args)
        else:
            def call():
                f(*args)
            self._funcs[saved_name] = call

    # ---- TVM's stateful interface
    def set_input(self, func_name: str, *args, **kwargs) -> None:
        if kwargs:
            raise TypeError("set_input: keyword arguments are not supported; pass the inputs in order")
        self[func_name]  # the name must exist
        self._inputs[func_name] = args

    def invoke_stateful(self, func_name: str) -> None:
        if func_name not in self._inputs:
            raise ValueError(f"invoke_stateful('{func_name}'): call set_input('{func_name}', ...) first")
        self._outputs[func_name] = self[func_name](*self._inputs[func_name])

    def get_outputs(self, func_name: str):
        if func_name not in self._outputs:
            raise ValueError(f"get_outputs('{func_name}'): call invoke_stateful('{func_name}') first")
        return self._outputs[func_name]

    # ---- timing
    def time_evaluator(self, func_name: str, dev=None, number: int = 10, repeat: int = 1, min_repeat_ms: int = 0,
                       cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1, f_preproc: str = ""):
        """A function that runs ``func_name`` ``number`` times per repeat, ``repeat`` times, and
        returns a `BenchmarkResult` (seconds per call, one entry per repeat). On a GPU the
        time is the GPU's: CUDA events recorded on the VM's stream around the calls."""
        f = self[func_name]
        if number < 1 or repeat < 1:
            raise ValueError("time_evaluator: number and repeat must be at least 1")
        if self.device.device_type == kDLCUDA:
            stream = self.stream

            def measure(f, args, number):
                return stream.rt.time_calls(f, args, number, stream)
        else:
            measure = _wall_time

        def evaluator(*args) -> BenchmarkResult:
            f(*args)  # warm up (and fail early on bad arguments)
            results = []
            for r in range(repeat):
                n = number
                while True:
                    elapsed = measure(f, args, n)
                    if elapsed * 1000 >= min_repeat_ms or n >= 1 << 30:
                        break
                    n *= 2
                results.append(elapsed / n)
                if cooldown_interval_ms and (r + 1) % repeats_to_cooldown == 0:
                    _time.sleep(cooldown_interval_ms / 1000)
            return BenchmarkResult(results)

        return evaluator

    def profile(self, func_name: str, *args, repeat: int = 1) -> "ProfileReport":
        """Run ``func_name(*args)`` ``repeat`` times (after one untimed call) with every kernel
        call timed, and return a `ProfileReport`: per kernel its calls, total and mean time and
        share of the whole call, heaviest first, as TVM's ``vm.profile`` reports them
        (``print(report)`` shows the table). The rest of the call's time is the VM's own
        (argument checks, allocation, extern functions). On a GPU each kernel also has the
        registers per thread and the occupancy ptxas's report gives it
        (`Executable.kernel_resources`), to tell a slow kernel that keeps few warps resident.

        Why a second instance of the functions: the generated code calls each kernel through a
        global of its namespace, so a namespace whose kernel globals are timing wrappers
        profiles the same code with nothing added to ordinary calls. On a GPU each launch is
        followed by a device synchronization, so a kernel's time is its own."""
        if func_name not in self._funcs:
            raise KeyError(f"no function named {func_name!r} in this executable (it has {', '.join(self._funcs)})")
        if repeat < 1:
            raise ValueError("profile: repeat must be at least 1")
        records: dict = {}
        events: list = []   # (track, name, start ns, duration ns, details), for `ProfileReport.chrome_trace`
        sync = self.device.sync if self.device.device_type == kDLCUDA else None
        clock = _time.perf_counter_ns

        def timed(kname: str, entry):
            record = records.setdefault(kname, [0, 0])

            def call(*a):
                t0 = clock()
                entry(*a)
                if sync is not None:
                    sync()
                t1 = clock()
                record[0] += 1
                record[1] += t1 - t0
                events.append(("device", kname, t0, t1 - t0, None))

            return call

        g = _instantiate(self.executable, self.device, self._kernels, wrap=timed, stream=self.stream)
        allocate = g[EMPTY]

        def allocation(shape, dtype):
            t0 = clock()
            t = allocate(shape, dtype)
            events.append(("vm", "allocate", t0, clock() - t0, {"shape": str(tuple(shape)), "dtype": dtype}))
            return t

        g[EMPTY] = allocation
        f = self._entry(func_name, g)
        f(*args)  # warm-up, and bad arguments fail here
        for record in records.values():
            record[0] = record[1] = 0
        events.clear()
        t0 = clock()
        for _ in range(repeat):
            start = clock()
            f(*args)
            if sync is not None:
                sync()
            events.append(("vm", func_name, start, clock() - start, None))
        total = clock() - t0
        return ProfileReport(func_name, {k: (n // repeat, t / repeat / 1e9) for k, (n, t) in records.items()},
                             total / repeat / 1e9, str(self.device),
                             resource_columns(self.executable) if sync is not None else None, events,
                             self._kernel_track())

    def _kernel_track(self) -> str:
        """Where this VM's kernels run, as a trace names the device's track."""
        if self.stream is not None:
            return f"{self.device} stream '{self.stream.name}': kernels"
        from .cpu import num_threads

        return f"{self.device} ({num_threads()} threads): kernels"

    def __repr__(self) -> str:
        return f"<tvms VirtualMachine on {self.device}: {', '.join(self._funcs)}>"


class _GPUState:
    """What the functions of a VM on a GPU share, and keep alive when the VM itself goes
    (``VirtualMachine(ex, dev)["main"]`` outlives its VM): its stream, given back for the next
    VM when this goes (`runtime.cuda.DeviceRuntime.release_stream`), and what `check` reloads
    when the device's context was lost to a sticky error, or recreated since the VM loaded its
    code (`runtime.cuda.DeviceRuntime.recreate`): its kernels and namespace, updated in place
    so the functions already handed out run on the new ones, and its CUDA graphs, captured
    again."""

    def __init__(self, vm: "VirtualMachine") -> None:
        import weakref

        self.executable, self.device, self.stream = vm.executable, vm.device, vm.stream
        self.kernels, self.namespace = vm._kernels, vm._globals
        self.graphs = None
        self.rt = vm.stream.rt
        self.generation = self.rt.generation
        weakref.finalize(self, self.rt.release_stream, self.stream)

    def check(self) -> None:
        """Run before each call: reload when the context is lost or was recreated."""
        rt = self.rt
        if rt.lost is not None or rt.generation != self.generation:
            self.recover()

    def recover(self) -> None:
        rt = self.rt
        rt.recreate()  # once, whichever VM comes first
        self.kernels.clear()
        self.kernels.update(self.executable.kernels_on(self.device))
        fresh = _instantiate(self.executable, self.device, self.kernels, stream=self.stream)
        self.namespace.clear()
        self.namespace.update(fresh)
        if self.graphs is not None:
            self.graphs.reset()
        self.generation = rt.generation


def _wall_time(f, args: tuple, number: int) -> float:
    """Seconds that ``number`` calls of ``f(*args)`` take (CPU work is synchronous)."""
    t0 = _time.perf_counter()
    for _ in range(number):
        f(*args)
    return _time.perf_counter() - t0


class BenchmarkResult:
    """Timing of a function: ``results`` are seconds per call, one per repeat."""

    def __init__(self, results) -> None:
        self.results = list(results)
        r = sorted(self.results)
        n = len(r)
        self.mean = sum(r) / n
        self.median = r[n // 2] if n % 2 else (r[n // 2 - 1] + r[n // 2]) / 2
        self.min = r[0]
        self.max = r[-1]
        self.std = (sum((x - self.mean) ** 2 for x in r) / n) ** 0.5

    def __repr__(self) -> str:
        ms = 1000.0
        return ("Execution time summary:\n"
                f" mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
                f" {self.mean * ms:10.4f}   {self.median * ms:10.4f}   {self.max * ms:10.4f}   "
                f"{self.min * ms:10.4f}   {self.std * ms:10.4f}")


def _pick_device(device, ex: Executable) -> Device:
    """The device to run ``ex`` on (its own kind's device 0 by default); an error when the
    executable's code is not for that kind of device, or the GPU cannot be used."""
    if device is None:
        device = Device(ex.device_type, 0)
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("VirtualMachine: the device list is empty")
        device = device[0]
    if not isinstance(device, Device):
        device = _as_device(device)
    if device.device_type not in (kDLCPU, kDLCUDA):
        raise NotImplementedError(f"the VM runs on the CPU and on CUDA GPUs, not on {device}")
    if device.device_type != ex.device_type:
        if ex.device_type == kDLCUDA:
            raise ValueError(f"the executable was compiled for CUDA (target '{ex.target}'): run it on a GPU, "
                             f"tvms.relax.VirtualMachine(ex, tvms.cuda(0)), or compile it with target=\"llvm\" "
                             f"to run it on {device}")
        raise ValueError(f"the executable was compiled for the CPU (target '{ex.target}'), not for {device}: "
                         f"compile it with tvms.compile(mod, target=\"cuda\") to run it on a GPU")
    if device.device_type == kDLCUDA:
        from .cuda import runtime

        runtime(device)  # CUDAUnavailableError, saying what is missing, when there is no such GPU
    return device


# ----------------------------------------------------------------------------- instantiation


def _instantiate(ex: Executable, dev: Device, kernels: dict, wrap=None, stream=None) -> dict:
    """The globals the generated code runs in: helpers, kernels (``kernels``: loaded for
    ``dev``), constants, arenas; then the functions themselves (all in one namespace, so
    Relax functions can call each other). ``wrap(kernel name, entry)``, when given, replaces
    each kernel's entry (`VirtualMachine.profile` times them). On a GPU the constants are
    copied over on the VM's ``stream``, so its calls find them there."""
    import contextlib

    copying = stream.rt.using(stream) if stream is not None else contextlib.nullcontext()
    with copying:
        return _fill_namespace(ex, dev, kernels, wrap)


def _fill_namespace(ex: Executable, dev: Device, kernels: dict, wrap) -> dict:
    from . import ndarray as nd

    if dev.device_type == kDLCUDA:
        from .cuda import frame_factory

        g = cuda_helpers(dev)
    else:
        g = dict(cpu_helpers())
        frame_factory = _frame_factory
    for f in ex.functions.values():
        for gname, kname in f.kernels.items():
            entry = raw_entry(kernels[kname])
            g[gname] = wrap(kname, entry) if wrap is not None else entry
        for gname, arr in f.constants.items():
            g[gname] = nd.array(arr, dev)  # the VM's own copy: nothing run here can change the IR
        g.update(f.objects)
        pool, factory = f.arena_names
        if f.arena:
            g[pool] = []
            g[factory] = frame_factory(f.arena, f.arena_bytes, dev)
    for f in ex.functions.values():
        exec(f.code, g)
    return g


def raw_entry(kernel):
    """``kernel``'s machine-code entry, called with buffer data pointers (parameter order), then
    scalar arguments, then symbolic dims, unchecked: the ctypes function itself when the kernel
    exposes it (``cfunc``), a GPU kernel's ``launch`` (which takes the same arguments), else a
    wrapper over ``call_raw``. After each call the generated code tests `vm_helpers.KERR`
    (assertion failures the kernel reported) and raises them."""
    cfunc = getattr(kernel, "cfunc", None)
    if cfunc is not None:
        return cfunc
    launch = getattr(kernel, "launch", None)
    if launch is not None:
        return launch
    nb = sum(1 for p in kernel.params if p.kind == "buffer")
    ns = len(kernel.params) - nb
    call_raw = kernel.call_raw

    def call(*a):
        call_raw(a[:nb], a[nb + ns:], a[nb:nb + ns])

    return call


def _frame_factory(layout: list, nbytes: int, dev: Device):
    from . import ndarray as nd
    import numpy as np

    def new_frame() -> tuple:
        raw = nd._aligned_empty((max(nbytes, 1),), np.uint8)
        out = []
        for offset, shape, dtype in layout:
            dt = nd._np_dtype(dtype)
            n = 1
            for d in shape:
                n *= d
            out.append(nd._wrap(raw[offset:offset + n * dt.itemsize].view(dt).reshape(shape), dev))
        return tuple(out)

    return new_frame

