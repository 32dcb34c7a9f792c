"""The Relax virtual machine: ``tvms.relax.VirtualMachine(ex, tvms.cpu())``.

``vm["main"]`` is a plain Python function made from the code `compiler.build` generated for the
Relax function (see ``ex.as_python()``): it checks its arguments against the parameters'
annotations, binds the symbolic dims, then runs one line per binding, calling kernels through
their raw entry points with data pointers read from the tensors' slots. The helpers that code
calls live here; the slow ones (``_bad``, ``_arity``, ``match_value``) only run to explain an
error, or for struct infos the generated code does not check inline (tuples, shapes, match_cast).

Intermediate tensors that never leave a function live in its *arena*: one aligned block per
frame, reused by every call; a frame in use is taken out of the pool, so recursion and threads
each get their own. Tensors that do leave (returned, passed to an extern function) are fresh.

On a CUDA device (``VirtualMachine(ex, tvms.cuda(0))``, for an executable compiled with
``target="cuda"``) the same generated code runs with the helpers of `_cuda_helpers`: tensors
are `runtime.cuda` tensors of that GPU, ``_empty`` takes memory from its pool, constants and
arena frames live in its memory, and kernels are `runtime.cuda.CUDAKernel`s launched on its
stream. Arguments must already be on that GPU: the VM copies nothing behind the caller's back.

An error of the program that a function raises (a `TVMScriptError`: `VMTypeError`,
`VMValueError`, a kernel's failed check, a failed ``R.assert_op``) leaves it placed at the
binding that raised it, in the user's source (`runtime.sites`).

NumPy is imported when the first VM is made, not when tvmscript is imported.
"""

from __future__ import annotations

import time as _time

from tvmscript.diagnostics import TVMScriptError

from .devices import Device, device as _as_device, kDLCPU, kDLCUDA
from .executable import Executable, FuncSig

__all__ = ["VirtualMachine", "BenchmarkResult", "ProfileReport", "SizeOutOfRangeError", "match_value",
           "VMTypeError", "VMValueError"]


class CallDepthError(RuntimeError):
    """Relax functions called each other deeper than Python's stack allows: a recursion with
    no end, most likely (a program error, reported as such rather than as a crash)."""


class VMTypeError(TVMScriptError, TypeError):
    """A value does not fit what the program declares of it (its kind, its dtype, its
    device): an argument, a call_tir operand, a match_cast, a result."""


class VMValueError(TVMScriptError, ValueError):
    """A value's shape (or another number) does not fit what the program declares or needs."""


def _param_error(cls, message: str, param: int):
    """A `VMTypeError`/`VMValueError` about a kernel's tensor parameter ``param`` (its index
    among the kernel's buffers), which `runtime.sites.locate` places at what it stands for."""
    err = cls(message)
    err.param = param
    return err


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
        self._kernels = rt_mod.kernels_on(self.device)
        self._globals = _instantiate(rt_mod, self.device, self._kernels)
        self._funcs = {name: _entry(name, self._globals, rt_mod, self._kernels) for name in rt_mod.functions}
        self._inputs: dict = {}
        self._outputs: dict = {}

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
        time is the GPU's: CUDA events recorded on the device's stream around the calls."""
        f = self[func_name]
        if number < 1 or repeat < 1:
            raise ValueError("time_evaluator: number and repeat must be at least 1")
        if self.device.device_type == kDLCUDA:
            from .cuda import runtime

            measure = runtime(self.device).time_calls
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
        (argument checks, allocation, extern functions).

        Why a second instance of the functions: the generated code calls each kernel through a
        global of its namespace, so a namespace whose kernel globals are timing wrappers
        profiles the same code with nothing added to ordinary calls. On a GPU each launch is
        followed by a device synchronization, so a kernel's time is its own."""
        if func_name not in self._funcs:
            raise KeyError(f"no function named {func_name!r} in this executable (it has {', '.join(self._funcs)})")
        if repeat < 1:
            raise ValueError("profile: repeat must be at least 1")
        records: dict = {}
        sync = self.device.sync if self.device.device_type == kDLCUDA else None

        def timed(kname: str, entry):
            clock = _time.perf_counter_ns
            record = records.setdefault(kname, [0, 0])

            def call(*a):
                t0 = clock()
                entry(*a)
                if sync is not None:
                    sync()
                record[0] += 1
                record[1] += clock() - t0

            return call

        g = _instantiate(self.executable, self.device, self._kernels, wrap=timed)
        f = _entry(func_name, g, self.executable, self._kernels)
        f(*args)  # warm-up, and bad arguments fail here
        for record in records.values():
            record[0] = record[1] = 0
        t0 = _time.perf_counter_ns()
        for _ in range(repeat):
            f(*args)
        if sync is not None:
            sync()
        total = _time.perf_counter_ns() - t0
        return ProfileReport(func_name, {k: (n // repeat, t / repeat / 1e9) for k, (n, t) in records.items()},
                             total / repeat / 1e9, str(self.device))

    def __repr__(self) -> str:
        return f"<tvms VirtualMachine on {self.device}: {', '.join(self._funcs)}>"


def _wall_time(f, args: tuple, number: int) -> float:
    """Seconds that ``number`` calls of ``f(*args)`` take (CPU work is synchronous)."""
    t0 = _time.perf_counter()
    for _ in range(number):
        f(*args)
    return _time.perf_counter() - t0


class ProfileReport:
    """`VirtualMachine.profile`'s result: ``rows`` are ``(kernel, calls, seconds)`` per call of
    the function, heaviest first; ``total`` is the whole call's seconds."""

    def __init__(self, func_name: str, kernels: dict, total: float, device: str) -> None:
        self.func_name, self.total, self.device = func_name, total, device
        self.rows = sorted(((k, n, t) for k, (n, t) in kernels.items()), key=lambda r: -r[2])

    @property
    def vm_time(self) -> float:
        """Seconds of the call spent outside kernels: the VM's checks and allocations, externs."""
        return max(0.0, self.total - sum(t for _, _, t in self.rows))

    def table(self) -> list:
        """The report as rows of text: name, calls, total, mean, percent of the call."""
        def us(t: float) -> str:
            return f"{t * 1e6:,.1f}"

        rows = [(k, str(n), us(t), us(t / n) if n else "-", f"{100 * t / self.total:.1f}" if self.total else "-")
                for k, n, t in self.rows]
        rows.append(("(VM: checks, allocation, externs)", "", us(self.vm_time), "",
                     f"{100 * self.vm_time / self.total:.1f}" if self.total else "-"))
        rows.append((f"total: {self.func_name}", "1", us(self.total), us(self.total), "100.0"))
        return rows

    def __str__(self) -> str:
        header = ("Name", "Calls", "Total (us)", "Mean (us)", "Percent")
        rows = self.table()
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

        def line(r) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

        return "\n".join([f"profile of '{self.func_name}' on {self.device}", line(header)] + [line(r) for r in rows])

    def __repr__(self) -> str:
        return str(self)


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


def _instantiate(ex: Executable, dev: Device, kernels: dict, wrap=None) -> dict:
    """The globals the generated code runs in: helpers, kernels (``kernels``: loaded for
    ``dev``), constants, arenas; then the functions themselves (all in one namespace, so
    Relax functions can call each other). ``wrap(kernel name, entry)``, when given, replaces
    each kernel's entry (`VirtualMachine.profile` times them)."""
    from . import ndarray as nd

    if dev.device_type == kDLCUDA:
        from .cuda import frame_factory

        g = _cuda_helpers(dev)
    else:
        g = dict(_helpers())
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
    wrapper over ``call_raw``. After each call the generated code tests ``_kerr`` (assertion
    failures the kernel reported) and raises them."""
    cfunc = getattr(kernel, "cfunc", None)
    if cfunc is not None and _kernel_errors()[0] is not None:
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


def _kernel_errors():
    """The CPU backend's list of pending kernel assertion failures and the function raising
    them; (None, None) if the backend does not expose them (call_raw then raises itself)."""
    try:
        from . import kernel as kmod
    except ImportError:  # pragma: no cover
        return None, None
    errors = getattr(kmod, "_errors", None)
    raise_pending = getattr(kmod, "_raise_pending", None)
    if isinstance(errors, list) and callable(raise_pending):
        return errors, raise_pending
    return None, None  # pragma: no cover


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


_HELPERS = None


def _np_argsort(a, axis: int, descending: bool):
    """Stable argsort along ``axis``; descending keeps equal elements in their order too (the
    ascending sort of the reversed array, reversed back)."""
    import numpy as np

    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    rev = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(rev, axis)


def _np_topk(a, k: int, axis: int, ret_type: str, largest: bool, dtype: str):
    """TVM's topk: the ``k`` largest (smallest) elements along ``axis`` in that order, all when
    ``k < 1``; values, indices or both."""
    import numpy as np

    idx = _np_argsort(a, axis, largest)
    if k >= 1:
        idx = np.take(idx, np.arange(k), axis=axis)
    values = np.take_along_axis(a, idx, axis=axis)
    indices = idx.astype(dtype)
    return {"values": values, "indices": indices}.get(ret_type, (values, indices))


class VMAssertionError(TVMScriptError, AssertionError):
    """``R.assert_op`` failed at run time; the message is the op's format filled with its values."""


def _render(value, is_tensor, host) -> str:
    """A run-time value as R.print / R.assert_op show it: a tensor as its NumPy values, a tuple
    field by field, a string quoted, anything else (a shape's ints, a scalar) as Python does."""
    if is_tensor(value):
        return str(host(value))
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_render(v, is_tensor, host) for v in value) + ")"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _fill_format(fmt: str, values, is_tensor, host) -> str:
    """The format with ``{}`` filled by the rendered values; the values joined by ", " when the
    format is empty (as TVM's runtime does)."""
    texts = [_render(v, is_tensor, host) for v in values]
    if not fmt:
        return ", ".join(texts)
    try:
        return fmt.format(*texts)
    except (IndexError, KeyError, ValueError) as err:
        raise VMValueError(f"R.print/R.assert_op: format {fmt!r} does not fit {len(texts)} value(s): {err}") from err


def _effect_helpers(is_tensor, host) -> dict:
    """The VM helpers of the impure builtins: ``_vm_print`` (R.print, to stdout) and
    ``_vm_assert`` (R.assert_op, a VMAssertionError with the formatted message when the
    condition, a bool scalar tensor or a bool/int prim value, is false)."""

    def _vm_print(fmt, *values):
        print(_fill_format(fmt, values, is_tensor, host))
        return ()

    def _vm_assert(cond, fmt, *values):
        ok = host(cond) if is_tensor(cond) else cond
        if getattr(ok, "size", 1) != 1:
            raise VMValueError(f"R.assert_op: the condition must be a scalar, got shape {ok.shape}")
        if not bool(ok.reshape(()) if hasattr(ok, "reshape") else ok):
            raise VMAssertionError(_fill_format(fmt, values, is_tensor, host) or "R.assert_op failed")
        return ()

    return {"_vm_print": _vm_print, "_vm_assert": _vm_assert}


def _host_op_helpers(host, back) -> dict:
    """The VM helpers of the ops it runs on the host: ``host(t)`` is a tensor's NumPy array,
    ``back(arr)`` a NumPy result as a tensor of the VM's device."""
    import numpy as np

    def out(r):
        return tuple(back(np.ascontiguousarray(x)) for x in r) if isinstance(r, tuple) else back(np.ascontiguousarray(r))

    def _sort(x, axis, descending):
        a = host(x)
        return out(np.take_along_axis(a, _np_argsort(a, axis, descending), axis=axis))

    def _argsort(x, axis, descending, dtype):
        return out(_np_argsort(host(x), axis, descending).astype(dtype))

    def _topk(x, k, axis, ret_type, largest, dtype):
        return out(_np_topk(host(x), k, axis, ret_type, largest, dtype))

    def _shape_tensor(shape):
        """``R.shape_to_tensor``: a Shape value (a tuple of ints) as a 1-D int64 tensor."""
        return back(np.array(shape, dtype="int64").reshape(len(shape)))

    def _dynamic_strided_slice(x, begin, end, strides):
        """``R.dynamic_strided_slice``: NumPy slicing, one (begin, end, stride) per axis."""
        bounds = list(zip(host(begin).tolist(), host(end).tolist(), host(strides).tolist()))
        if any(s == 0 for _, _, s in bounds):
            raise VMValueError(f"R.dynamic_strided_slice: a stride is 0 (strides {host(strides).tolist()})")
        return out(host(x)[tuple(slice(b, e, s) for b, e, s in bounds)])

    return {"_sort": _sort, "_argsort": _argsort, "_topk": _topk, "_shape_tensor": _shape_tensor,
            "_dynamic_strided_slice": _dynamic_strided_slice}


def _run_nonzero(x):
    """``relax.run.nonzero`` (TVM's name; LegalizeOps calls it for ``R.nonzero``): the int64
    coordinates of ``x``'s nonzero elements, one row per dim, on ``x``'s device."""
    import numpy as np

    from .ndarray import array

    coords = np.ascontiguousarray(np.stack(np.nonzero(x.numpy())).astype("int64"))
    return array(coords, device=x.device)


def _run_unique(x, sorted_, return_index, return_inverse, return_counts, axis=None):
    """``relax.run.unique`` (TVM's name; LegalizeOps calls it for ``R.unique``): NumPy's unique
    values (slices along ``axis`` when given), in first-occurrence order unless ``sorted_``,
    then the int64 indices/inverse/counts asked for, on ``x``'s device."""
    import numpy as np

    from .ndarray import array

    values, index, inverse, counts = np.unique(x.numpy(), return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:  # renumber the unique values by where each first occurs
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if axis is None else axis)
        index, counts, inverse = index[order], counts[order], rank[inverse]
    outs = [values] + [a.astype("int64") for a, f in ((index, return_index), (inverse, return_inverse),
                                                     (counts, return_counts)) if f]
    tensors = [array(np.ascontiguousarray(a), device=x.device) for a in outs]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _register_runtime_functions() -> None:
    """The runtime functions TVM's legalizations call by name (``R.call_pure_packed``)."""
    from .registry import REGISTRY

    REGISTRY.setdefault("relax.run.nonzero", _run_nonzero)
    REGISTRY.setdefault("relax.run.unique", _run_unique)


_register_runtime_functions()


def _helpers() -> dict:
    global _HELPERS
    if _HELPERS is None:
        _HELPERS = _make_helpers()
    return _HELPERS


def _explain_mismatch(sig: FuncSig, i: int, value, env: dict, device: Device | None = None):
    """Raise the error saying how argument ``i`` fails its annotation (the generated code found
    that it does)."""
    what = f"{sig.name}() argument '{sig.param_names[i]}'"
    origin = {k: _origin_text(sig, v) for k, v in sig.sym_origin.items()}
    match_value(value, sig.param_sinfos[i], dict(env), what, origin, device)
    raise RuntimeError(f"{what}: does not match {_sinfo_text(sig.param_sinfos[i])}")  # pragma: no cover


class SizeOutOfRangeError(ValueError):
    """A symbolic dimension of a call's arguments lies outside the range the function allows
    it (its ``tir_var_lower_bound``/``tir_var_upper_bound``: a ``torch.export.Dim``'s min and
    max). The function was compiled for that range; PyTorch refuses such a call too."""


def _out_of_range(sig: FuncSig, name: str, value) -> None:
    """Raise the error for symbol ``name`` given ``value`` outside ``sig.sym_bounds[name]``."""
    lo, hi = sig.sym_bounds[name]
    allowed = (f"between {lo} and {hi}" if lo is not None and hi is not None else
               f"at least {lo}" if lo is not None else f"at most {hi}")
    origin = sig.sym_origin.get(name)
    where = f" (from {_origin_text(sig, origin)})" if origin is not None else ""
    raise SizeOutOfRangeError(f"{sig.name}(): size '{name}' is {value}{where}, but {name} must be {allowed} "
                              f"(the function's tir_var_lower_bound/tir_var_upper_bound)")


def _cuda_helpers(dev: Device) -> dict:
    """The helpers of a VM on GPU ``dev``: the CPU's, with that GPU's tensor class, allocation
    and argument checks. Kernels there report no assertion failures (``_kerr`` stays empty)."""
    from . import cuda
    from .ndarray import Tensor

    rt = cuda.runtime(dev)
    cls = rt.tensor_class

    def _coerce(value, sig: FuncSig, i: int):
        name = sig.param_names[i]
        what = f"{sig.name}() argument '{name}'"
        t = cuda.as_tensor_on(value, dev, what, name)
        if t is None:
            raise TypeError(f"{what}: expected a tensor on {dev} ({_sinfo_text(sig.param_sinfos[i])}), "
                            f"got {_type_name(value)}")
        return t

    def _bad(sig: FuncSig, i: int, value, env: dict):
        _explain_mismatch(sig, i, value, env, dev)

    def _match(value, sinfo, env, what):
        return match_value(value, sinfo, env, what, {}, dev)

    def _truth(v):
        if isinstance(v, Tensor):
            arr = v.numpy()
            if arr.size != 1:
                raise VMValueError(f"the condition of an if must be a scalar, got a tensor of shape {v._shape}")
            return bool(arr.reshape(()))
        return bool(v)

    def _kcheck(kernel, tensors, site, scalars=()):
        check_kernel_args(kernel, tensors, site, cls, scalars)

    from .ndarray import array

    g = dict(_helpers())
    g.update(_host_op_helpers(lambda t: t.numpy(), lambda a: array(a, device=dev)))
    g.update(_effect_helpers(lambda v: isinstance(v, Tensor), lambda t: t.numpy()))
    g.update({"_Tensor": cls, "_empty": rt.empty, "_coerce": _coerce, "_bad": _bad, "_match": _match,
              "_truth": _truth, "_kcheck": _kcheck, "_kerr": []})
    return g


def _make_helpers() -> dict:
    import numpy as np

    from . import ndarray as nd
    from .registry import REGISTRY

    Tensor = nd.Tensor
    new = object.__new__
    np_empty = np.empty
    data_ptr = nd.data_ptr
    cpu0 = nd._CPU0
    get = REGISTRY.get

    def _empty(shape, dtype):
        try:
            a = np_empty(shape, dtype)
        except TypeError:
            a = np_empty(shape, nd._np_dtype(dtype))
        t = new(Tensor)
        t._array = a
        t._ptr = data_ptr(a)
        t._shape = a.shape
        t._dtype = dtype
        t._device = cpu0
        return t

    def _extern(name):
        f = get(name)
        if f is None:
            raise VMValueError(
                f"extern function {name!r} is not registered: define it with @tvms.register_func({name!r})")
        return f

    ndarray = np.ndarray
    wrap = nd._wrap

    def _coerce(value, sig: FuncSig, i: int):
        if value.__class__ is ndarray and value.flags.c_contiguous and not value.dtype.hasobject:
            return wrap(value)  # a NumPy argument: no copy
        name = sig.param_names[i]
        what = f"{sig.name}() argument '{name}'"
        t = to_tensor(value, None, what, name)
        if t is None:
            raise TypeError(f"{what}: expected a tensor ({_sinfo_text(sig.param_sinfos[i])}), "
                            f"got {_type_name(value)}")
        return t

    def _bad(sig: FuncSig, i: int, value, env: dict):
        _explain_mismatch(sig, i, value, env)

    def _arity(sig: FuncSig, args):
        n = len(sig.param_names)
        given = len(args)
        names = ", ".join(sig.param_names)
        if given < n:
            missing = ", ".join(f"'{p}'" for p in sig.param_names[given:])
            raise TypeError(f"{sig.name}() takes {n} argument{'s' if n != 1 else ''} ({names}) but {given} "
                            f"{'was' if given == 1 else 'were'} given: missing {missing}")
        raise TypeError(f"{sig.name}() takes {n} argument{'s' if n != 1 else ''} ({names}) but {given} were given")

    def _match(value, sinfo, env, what):
        return match_value(value, sinfo, env, what, {})

    def _truth(v):
        if isinstance(v, Tensor):
            if v._array.size != 1:
                raise VMValueError(f"the condition of an if must be a scalar, got a tensor of shape {v._shape}")
            return bool(v._array.reshape(()))
        return bool(v)

    def _kcheck(kernel, tensors, site, scalars=()):
        check_kernel_args(kernel, tensors, site, scalars=scalars)

    def _stride(t, d):
        n = 1
        for x in t._shape[d + 1:]:
            n *= x
        return n

    kerr, kraise = _kernel_errors()

    def _truncdiv(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    def _truncmod(a, b):
        return a - b * _truncdiv(a, b)

    return {
        "_Tensor": Tensor, "_empty": _empty, "_extern": _extern, "_coerce": _coerce, "_bad": _bad,
        "_arity": _arity, "_match": _match, "_truth": _truth, "_kcheck": _kcheck, "_truncdiv": _truncdiv,
        "_truncmod": _truncmod, "_stride": _stride, "_out_of_range": _out_of_range,
        "_kerr": kerr if kerr is not None else [],
        "_kraise": kraise, **_host_op_helpers(lambda t: t._array, wrap),
        **_effect_helpers(lambda v: isinstance(v, Tensor), lambda t: t._array),
    }


# ----------------------------------------------------------------------------- values and checks


def to_tensor(value, device: Device | None = None, what: str = "the value", name: str = "x"):
    """A tvms Tensor on ``device`` (the CPU when None) for a Tensor, a NumPy array (no copy
    when C-contiguous) or a DLPack exporter; None for anything else. A tensor on another
    device is a TypeError starting with ``what``, with the copy that fixes it (``name``
    standing for the value)."""
    if device is not None and device.device_type == kDLCUDA:
        from .cuda import as_tensor_on

        return as_tensor_on(value, device, what, name)
    nd = _nd()
    if isinstance(value, nd.Tensor):
        if value._device.device_type != kDLCPU:
            raise TypeError(f"{what}: expected a tensor on the CPU, got a tensor on {value._device} "
                            f"(copy it with {name}.copyto(tvms.cpu()))")
        return value
    np = nd.np
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return None
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return nd._wrap(value)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        try:
            dev = value.__dlpack_device__()
        except Exception:
            return None
        if dev[0] != kDLCPU:
            raise TypeError(f"{what}: expected a tensor on the CPU, got a {_type_name(value)} on DLPack device "
                            f"{tuple(dev)} (copy it to the host first)")
        arr = np.from_dlpack(value)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return nd._wrap(arr)
    return None


def _nd():
    global _ND
    if _ND is None:
        from . import ndarray

        _ND = ndarray
    return _ND


_ND = None


def _type_name(value) -> str:
    t = type(value)
    mod = t.__module__
    return t.__name__ if mod in ("builtins", None) else f"{mod}.{t.__name__}"


def _sinfo_text(sinfo) -> str:
    from tvmscript.printer import sinfo_text

    try:
        return sinfo_text(sinfo)
    except Exception:  # pragma: no cover
        return type(sinfo).__name__


def _origin_text(sig: FuncSig, origin) -> str:
    i, d = origin
    where = f"argument '{sig.param_names[i]}'"
    return f"{where}, dimension {d}" if d is not None else where


def eval_dim(e, env: dict):
    """The value of a TIR expression over the symbolic dims in ``env`` (KeyError if one is
    missing)."""
    from tvmscript.ir import tir

    if isinstance(e, tir.IntImm):
        return bool(e.value) if e.dtype == "bool" else int(e.value)
    if isinstance(e, tir.FloatImm):
        return float(e.value)
    if isinstance(e, tir.Var):
        return env[e.name]
    ops = {
        tir.Add: lambda a, b: a + b, tir.Sub: lambda a, b: a - b, tir.Mul: lambda a, b: a * b,
        tir.FloorDiv: lambda a, b: a // b, tir.FloorMod: lambda a, b: a % b,
        tir.Min: min, tir.Max: max,
        tir.EQ: lambda a, b: a == b, tir.NE: lambda a, b: a != b, tir.LT: lambda a, b: a < b,
        tir.LE: lambda a, b: a <= b, tir.GT: lambda a, b: a > b, tir.GE: lambda a, b: a >= b,
        tir.And: lambda a, b: a and b, tir.Or: lambda a, b: a or b,
    }
    f = ops.get(type(e))
    if f is not None:
        return f(eval_dim(e.a, env), eval_dim(e.b, env))
    if isinstance(e, tir.Div):
        a, b = eval_dim(e.a, env), eval_dim(e.b, env)
        if isinstance(a, int) and isinstance(b, int):
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    if isinstance(e, tir.Not):
        return not eval_dim(e.a, env)
    if isinstance(e, tir.Cast):
        v = eval_dim(e.value, env)
        return float(v) if tir.is_float(e.dtype) else (bool(v) if e.dtype == "bool" else int(v))
    if isinstance(e, tir.Select):
        return eval_dim(e.true_value, env) if eval_dim(e.condition, env) else eval_dim(e.false_value, env)
    raise ValueError(f"cannot evaluate {type(e).__name__} in a shape")


def _dim_text(e) -> str:
    from tvmscript.ir import tir

    if isinstance(e, tir.IntImm):
        return str(e.value)
    if isinstance(e, tir.Var):
        return e.name
    try:
        from tvmscript.printer import to_script

        return to_script(e)
    except Exception:  # pragma: no cover
        return type(e).__name__


def _bind_dims(dims, values, env: dict, origin: dict, what: str, label: str, sinfo) -> None:
    """Bind the symbols first seen in ``dims`` to ``values``, then check every dim."""
    from tvmscript.ir import tir

    ann = _sinfo_text(sinfo)
    for d, (e, v) in enumerate(zip(dims, values)):
        if isinstance(e, tir.Var) and e.name not in env:
            env[e.name] = v
            origin.setdefault(e.name, f"{what}, {label} {d}")
    for d, (e, v) in enumerate(zip(dims, values)):
        try:
            want = eval_dim(e, env)
        except KeyError as err:
            raise VMValueError(f"{what}: {label} {d} is {_dim_text(e)}, whose symbol {err.args[0]!r} has no value "
                               f"yet; annotation {ann}") from None
        if v != want:
            if isinstance(e, tir.IntImm):
                raise VMValueError(f"{what}: {label} {d} is {v}, expected {want}; shape {tuple(values)} does not "
                                   f"match {ann}")
            if isinstance(e, tir.Var):
                raise VMValueError(f"{what}: {label} {d} is {v}, but {e.name} = {want} "
                                   f"(from {origin.get(e.name, 'an earlier value')}); annotation {ann}")
            names = sorted(_free_names(e) & set(env))
            bound = ", ".join(f"{n} = {env[n]} from {origin.get(n, 'an earlier value')}" for n in names)
            raise VMValueError(f"{what}: {label} {d} is {v}, but {_dim_text(e)} = {want} ({bound}); "
                               f"annotation {ann}")


def _free_names(e) -> set:
    from tvmscript.ir import tir

    if isinstance(e, tir.Var):
        return {e.name}
    out = set()
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, field, None)
        if isinstance(sub, tir.PrimExpr):
            out |= _free_names(sub)
    return out


def match_value(value, sinfo, env: dict, what: str, origin: dict | None = None, device: Device | None = None):
    """Check ``value`` against ``sinfo``, binding the symbolic dims not yet in ``env``.
    Returns the value, with NumPy arrays (also inside tuples) wrapped as tensors. Raises a
    `VMTypeError` (wrong kind of value, dtype; a TypeError for a tensor not on ``device``: the
    CPU when None) or `VMValueError` (rank, shape), starting with ``what``."""
    from tvmscript.ir import relax

    origin = {} if origin is None else origin
    if sinfo is None or isinstance(sinfo, relax.ObjectStructInfo):
        return value
    if isinstance(sinfo, relax.TensorStructInfo):
        t = to_tensor(value, device, what)
        if t is None:
            raise VMTypeError(f"{what}: expected a tensor ({_sinfo_text(sinfo)}), got {_type_name(value)}")
        ann = _sinfo_text(sinfo)
        if sinfo.dtype and t._dtype != sinfo.dtype:
            raise VMTypeError(f"{what}: expected dtype {sinfo.dtype}, got {t._dtype} (annotation {ann})")
        if sinfo.ndim >= 0 and len(t._shape) != sinfo.ndim:
            raise VMValueError(f"{what}: expected a {sinfo.ndim}-d tensor, got a {len(t._shape)}-d tensor of shape "
                               f"{t._shape} (annotation {ann})")
        if sinfo.shape is not None:
            _bind_dims(sinfo.shape, t._shape, env, origin, what, "dimension", sinfo)
        return t
    if isinstance(sinfo, relax.TupleStructInfo):
        if not isinstance(value, (tuple, list)):
            raise VMTypeError(f"{what}: expected a tuple of {len(sinfo.fields)} ({_sinfo_text(sinfo)}), "
                              f"got {_type_name(value)}")
        if len(value) != len(sinfo.fields):
            raise VMValueError(f"{what}: expected a tuple of {len(sinfo.fields)}, got {len(value)} items")
        return tuple(match_value(v, s, env, f"{what}[{k}]", origin, device)
                     for k, (v, s) in enumerate(zip(value, sinfo.fields)))
    if isinstance(sinfo, relax.ShapeStructInfo):
        if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value):
            raise VMTypeError(f"{what}: expected a shape (a tuple of ints) ({_sinfo_text(sinfo)}), got {value!r}")
        value = tuple(int(v) for v in value)
        if sinfo.ndim >= 0 and len(value) != sinfo.ndim:
            raise VMValueError(f"{what}: expected a shape of {sinfo.ndim} dims, got {value}")
        if sinfo.values is not None:
            _bind_dims(sinfo.values, value, env, origin, what, "shape value", sinfo)
        return value
    if isinstance(sinfo, relax.PrimStructInfo):
        import numpy as np

        if isinstance(value, np.generic):
            value = value.item()
        from . import ndarray as nd

        if isinstance(value, nd.Tensor) and value._shape == ():
            value = value.numpy().item()
        dt = sinfo.dtype
        ok = (isinstance(value, bool) if dt == "bool" else
              isinstance(value, (int, float)) and not isinstance(value, bool) if dt.startswith("float") else
              isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise VMTypeError(f"{what}: expected a {dt} value ({_sinfo_text(sinfo)}), got {_type_name(value)} "
                              f"{value!r}")
        if dt.startswith("float"):
            value = float(value)
        if sinfo.value is not None:
            _bind_dims([sinfo.value], [value], env, origin, what, "value", sinfo)
        return value
    if isinstance(sinfo, relax.FuncStructInfo):
        if not callable(value):
            raise VMTypeError(f"{what}: expected a function, got {_type_name(value)}")
        return value
    return value


def check_kernel_args(kernel, tensors, site, tensor_class=None, scalars=()) -> None:
    """Check tensors against a kernel's buffer parameters (dtype, rank, dims, symbolic dims
    agreeing, declared strides); used where the build could not prove a call_tir's arguments
    fit, so a mismatch is an error here rather than memory the kernel should not touch.
    ``site``: the call (`runtime.sites.Site`), which names the parameters in its messages;
    ``tensor_class``: the class of the tensors on the VM's device (CPU tensors when None);
    ``scalars``: the values of the kernel's scalar parameters (a call's ``tir_vars``), which
    dims such as ``n - 1`` may use. A mismatch is a `VMTypeError`/`VMValueError` that knows
    the parameter (``param``)."""
    tensor_class = tensor_class or _tensor_class()
    buffers = [p for p in kernel.params if p.kind == "buffer"]
    env: dict = {p.name: v for p, v in zip([p for p in kernel.params if p.kind == "scalar"], scalars)}
    origin: dict = {name: "tir_vars" for name in env}
    later = []
    for i, (p, t) in enumerate(zip(buffers, tensors)):
        name = site.param_name(i, p.name)
        label = f"{site.call_text()}{name}"
        if t.__class__ is not tensor_class:
            where = f" on {t._device}" if isinstance(t, _tensor_class()) else ""
            raise _param_error(VMTypeError, f"{label} expects a tensor on the VM's device, got {_type_name(t)}{where}",
                               i)
        if t._dtype != p.dtype:
            raise _param_error(VMTypeError, f"{label} expects dtype {p.dtype}, got {t._dtype}", i)
        if len(t._shape) != len(p.shape):
            raise _param_error(VMValueError, f"{label} expects a {len(p.shape)}-d tensor, got shape {t._shape}", i)
        compact = []
        n = 1
        for x in reversed(t._shape):
            compact.append(n)
            n *= x
        compact.reverse()
        dims = [(f"dimension {d}", want, got) for d, (want, got) in enumerate(zip(p.shape, t._shape))]
        if p.strides is not None:
            dims += [(f"stride {d}", want, got) for d, (want, got) in enumerate(zip(p.strides, compact))
                     if t._shape[d] > 1]
        for where, want, got in dims:
            if isinstance(want, str):
                if not want.isidentifier():
                    later.append((i, label, where, want, got))
                elif want not in env:
                    env[want] = got
                    origin[want] = f"{name} {where}"
                elif env[want] != got:
                    raise _param_error(VMValueError, f"{label} {where} is {got}, but {want} = {env[want]} "
                                       f"(from {origin[want]})", i)
            elif got != want:
                raise _param_error(VMValueError, f"{label} expects {where} to be {want}, got {got} "
                                   f"(shape {t._shape})", i)
    for i, label, where, text, got in later:
        from .kernel import eval_dim_text

        want = eval_dim_text(text, env)
        if want != got:
            raise _param_error(VMValueError, f"{label} {where} is {got}, expected {text} = {want}", i)


def _tensor_class():
    from .ndarray import Tensor

    return Tensor
