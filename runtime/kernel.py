"""A compiled CPU kernel and its argument checking.

A `Kernel` is called destination-passing style, as TVM's ``PackedFunc``s of prim_funcs are:
``kernel(a, b, out)`` with one argument per parameter of the prim_func, in its order; buffer
arguments are NumPy arrays (or objects exposing ``__array_interface__``, ``__dlpack__`` or a
``numpy()`` method) and outputs are written in place; scalar arguments are Python numbers.

Before calling the machine code, ``__call__`` checks the argument count, each buffer's dtype,
rank, static dimensions and layout (C-contiguous unless the buffer declares strides), binds
every symbolic dimension (the same symbol must get the same value everywhere, and agree with
a scalar parameter of that name) and converts scalars; any mismatch raises a `TypeError` or
`ValueError` naming the parameter. `call_raw` skips all checks (for the VM, which has
validated shapes already).

The machine-code ABI (see `compiler.codegen_llvm`): buffer data pointers in parameter order,
then the scalar parameters, then one int64 per symbolic variable of ``sym_vars``; the
parameters' descriptions and the way a kernel reports a failed check are `runtime.kernel_abi`'s.
A failed check reaches the callbacks defined here, and is raised after the call as a
`KernelAssertionError` or `BoundsCheckError`.
"""

from __future__ import annotations

import ast
import copy
import ctypes
import threading
from typing import Any, Optional

import numpy as np

from tvmscript.diagnostics import TVMScriptError

from .kernel_abi import INDEX_MARK, SIZE_MARK, ParamSpec, PlaceTable, split_place
from .ndarray import _np_dtype

__all__ = ["Kernel", "ctype_of", "KernelAssertionError", "BoundsCheckError", "raise_pending", "pending_failures"]

_CTYPES = {
    "bool": ctypes.c_uint8,
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float16": ctypes.c_float, "bfloat16": ctypes.c_float, "float32": ctypes.c_float, "float64": ctypes.c_double,
    "handle": ctypes.c_void_p,
}


def ctype_of(dtype: str):
    """The C type a scalar of ``dtype`` is passed as (``float16`` and ``bfloat16`` travel as a float)."""
    try:
        return _CTYPES[dtype]
    except KeyError:
        raise TypeError(f"no C type for dtype '{dtype}'") from None


# ----------------------------------------------------------------------------- failed checks
#
# A kernel reports a failed check by calling back into the process (`runtime.kernel_abi`:
# `ASSERT_FAIL_SYMBOL`, `BOUNDS_FAIL_SYMBOL`), with a message the compiler baked into its
# machine code; the failure is raised after the call, placed in the kernel's PrimFunc.

class KernelAssertionError(TVMScriptError, RuntimeError):
    """A check inside a kernel failed: a ``T.Assert``/``assert``, a division by zero, an
    allocation. ``place`` numbers its place in the PrimFunc the kernel was compiled from
    (`compiler.kernel_places`); the kernel called directly, or the VM, makes it the ``span``."""

    def __init__(self, message: str, span=None, notes=None, place: Optional[int] = None) -> None:
        super().__init__(message, span, notes)
        self.place = place


class BoundsCheckError(KernelAssertionError, IndexError):
    """A kernel's buffer access fell outside its buffer (`compiler.bounds_check`); the call
    stopped before it read or wrote there. Its span is the access."""


# Assertion failures reported by generated code (possibly from a worker thread).
_errors_lock = threading.Lock()
_errors: list = []


def _failure(cls, text: str) -> KernelAssertionError:
    message, place = split_place(text)
    return cls(message, place=place)


@ctypes.CFUNCTYPE(None, ctypes.c_char_p)
def _assert_fail(msg):
    error = _failure(KernelAssertionError, msg.decode("utf-8", "replace") if msg else "assertion failed")
    with _errors_lock:
        _errors.append(error)


def bounds_error(message: str, lowest: int, highest: int, size: int) -> BoundsCheckError:
    """The error of a failed bounds check: its baked-in ``message`` (`compiler.bounds_check`)
    completed with the index (or range of indices) found and the axis's size."""
    found = f"index {lowest} is" if lowest == highest else f"indices {lowest} to {highest} reach"
    return _failure(BoundsCheckError, message.replace(INDEX_MARK, found).replace(SIZE_MARK, str(size)))


@ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
def _bounds_fail(msg, lowest, highest, size):
    error = bounds_error(msg.decode("utf-8", "replace") if msg else "out-of-bounds access", lowest, highest, size)
    with _errors_lock:
        _errors.append(error)


def bounds_callback_address() -> int:
    """Address of ``tvms_bounds_fail(const char*, i64, i64, i64)``, a failed bounds check."""
    return ctypes.cast(_bounds_fail, ctypes.c_void_p).value


def assert_callback_address() -> int:
    """Address of the ``tvms_assert_fail(const char*)`` function kernels call on a failed assert."""
    return ctypes.cast(_assert_fail, ctypes.c_void_p).value


def pending_failures() -> list:
    """The failures kernels reported and nobody raised yet: the VM's generated code tests this
    list after each kernel call (`raise_pending` raises the first)."""
    return _errors


def raise_pending(kernel: Optional["Kernel"] = None) -> None:
    """Raise the first failure a kernel reported (placed by ``kernel``, when given)."""
    with _errors_lock:
        if not _errors:
            return
        error = _errors[0]
        _errors.clear()
    if kernel is not None:
        kernel.place(error)
    raise error


def place_in(error: KernelAssertionError, places: Optional[PlaceTable]) -> None:
    """Give ``error`` the span its place number has in ``places`` (those of the PrimFunc its
    kernel was compiled from), if it has none yet."""
    if error.span is None and error.place is not None and places is not None:
        error.span = places.span(error.place)


def eval_dim_text(text: str, env: dict) -> Optional[int]:
    """Value of a dimension expression over bound symbols; None if a symbol is unbound."""

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise KeyError(node.id)
            return env[node.id]
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}
            return ops[type(node.op)]()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            vals = [ev(a) for a in node.args]
            return min(vals) if node.func.id == "min" else max(vals)
        raise ValueError(f"unsupported dimension expression {text!r}")

    try:
        return ev(ast.parse(text, mode="eval"))
    except KeyError:
        return None


def _as_array(arg, spec: ParamSpec, kname: str) -> np.ndarray:
    if isinstance(arg, np.ndarray):
        return arg
    if isinstance(arg, (int, float, complex, bool, str, bytes, np.generic)) or arg is None:
        raise TypeError(f"{kname}: parameter '{spec.name}' is a buffer ({spec.describe()}); "
                        f"got {type(arg).__name__}, expected a numpy.ndarray")
    if hasattr(arg, "__array_interface__"):
        return np.asarray(arg)
    if hasattr(arg, "__dlpack__"):
        try:
            return np.from_dlpack(arg)
        except (TypeError, RuntimeError, BufferError):
            pass
    if hasattr(arg, "numpy"):
        out = arg.numpy()
        if isinstance(out, np.ndarray):
            return out
    raise TypeError(f"{kname}: parameter '{spec.name}' expects an array (numpy.ndarray or an object with "
                    f"__array_interface__, __dlpack__ or numpy()), got {type(arg).__name__}")


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}


def _scalar(arg, spec: ParamSpec, kname: str):
    dt = spec.dtype
    where = f"{kname}: parameter '{spec.name}' ({dt})"
    if dt == "bool":
        if isinstance(arg, (bool, np.bool_)) or (isinstance(arg, (int, np.integer)) and int(arg) in (0, 1)):
            return int(bool(arg))
        raise TypeError(f"{where} expects a bool, got {type(arg).__name__}")
    if dt in _INT_RANGES:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, np.integer)):
            raise TypeError(f"{where} expects an integer, got {type(arg).__name__}")
        v = int(arg)
        lo, hi = _INT_RANGES[dt]
        if not lo <= v <= hi:
            raise ValueError(f"{where}: {v} is out of range [{lo}, {hi}]")
        return v
    if dt.startswith(("float", "bfloat")):
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, float, np.integer, np.floating)):
            raise TypeError(f"{where} expects a number, got {type(arg).__name__}")
        return float(arg)
    if dt == "handle":
        if arg is None:
            return None
        if isinstance(arg, int):
            return arg
        if isinstance(arg, np.ndarray):
            return arg.__array_interface__["data"][0]
        raise TypeError(f"{where} expects an address (int) or an array, got {type(arg).__name__}")
    raise TypeError(f"{where}: unsupported scalar dtype")


def check_arity(kname: str, params: list, args) -> None:
    """A TypeError naming every parameter when ``args`` is not one argument per parameter."""
    if len(args) != len(params):
        expected = ", ".join(p.name for p in params)
        raise TypeError(f"{kname}() takes {len(params)} argument{'s' if len(params) != 1 else ''} "
                        f"({expected}) but {len(args)} were given")


def bind_scalars(kname: str, params: list, scalar_idx: list, sym_vars: list, args, env: dict, origin: dict,
                 deferred: list) -> tuple:
    """The checked scalar arguments and the values of ``sym_vars``, once the buffers have bound
    what they can into ``env`` (``origin`` says where each came from; ``deferred`` holds the
    dimensions that are expressions, checked now that every symbol is known)."""
    scalars = []
    for i in scalar_idx:
        spec = params[i]
        v = _scalar(args[i], spec, kname)
        if spec.name in env and v != env[spec.name]:
            raise ValueError(f"{kname}: parameter '{spec.name}' is {v}, but the buffer shapes "
                             f"say {env[spec.name]} ({origin[spec.name]})")
        env.setdefault(spec.name, v)
        scalars.append(v)
    for text, got, where in deferred:
        want = eval_dim_text(text, env)
        if want is None:
            raise ValueError(f"{kname}: cannot determine {where} ({text}): a symbol in it is not "
                             "bound by any other dimension")
        if want != got:
            raise ValueError(f"{kname}: {where} is {got}, expected {text} = {want}")
    syms = []
    for name in sym_vars:
        if name not in env:
            raise ValueError(f"{kname}: symbolic variable '{name}' appears in no dimension that binds it")
        syms.append(env[name])
    return scalars, syms


class Kernel:
    """A JIT-compiled prim_func. Keep the `runtime.cpu.CPUModule` it came from alive while
    calling it (the module holds the machine code); a Kernel holds a reference to it."""

    def __init__(self, name: str, params: list, sym_vars: list, address: int, symbol: str = "",
                 owner: Any = None) -> None:
        self.name = name
        self.params = list(params)
        self.sym_vars = list(sym_vars)
        self.symbol = symbol or name
        self.address = address
        self._owner = owner  # keeps the execution engine alive
        self._buffer_idx = [i for i, p in enumerate(self.params) if p.kind == "buffer"]
        self._scalar_idx = [i for i, p in enumerate(self.params) if p.kind == "scalar"]
        argtypes = [ctypes.c_void_p] * len(self._buffer_idx)
        argtypes += [ctype_of(self.params[i].dtype) for i in self._scalar_idx]
        argtypes += [ctypes.c_int64] * len(self.sym_vars)
        self.argtypes = argtypes
        self.cfunc = ctypes.CFUNCTYPE(None, *argtypes)(address)
        self._np_dtypes = {i: _np_dtype(self.params[i].dtype) for i in self._buffer_idx}
        self._scalar_names = {self.params[i].name: i for i in self._scalar_idx}
        self.places: Optional[PlaceTable] = None  # where its failures are (`compiled_from`)

    def compiled_from(self, places: PlaceTable) -> "Kernel":
        """This kernel (sharing its machine code) with ``places``, those of the PrimFunc of the
        module being built, as the places of its failures: the machine code may come from the
        build cache, compiled from an equal PrimFunc elsewhere in the file, or in another file."""
        kernel = copy.copy(self)
        kernel.places = places
        return kernel

    def place(self, error: KernelAssertionError) -> None:
        place_in(error, self.places)

    @property
    def module(self):
        """The compiled module holding this kernel (`runtime.cpu.CPUModule`): its
        ``get_source("llvm")`` shows the code."""
        return self._owner

    def __repr__(self) -> str:
        return f"Kernel({self.name}({', '.join(p.describe() for p in self.params)}))"

    def _bind(self, env: dict, origin: dict, name: str, value: int, where: str) -> None:
        old = env.get(name)
        if old is None:
            env[name] = value
            origin[name] = where
        elif old != value:
            raise ValueError(f"{self.name}: {where} is {value}, but symbol '{name}' is {old} "
                             f"(from {origin[name]})")

    def __call__(self, *args):
        params = self.params
        check_arity(self.name, params, args)
        env: dict = {}
        origin: dict = {}
        arrays: list = []
        pointers: list = []
        deferred: list = []
        for i in self._buffer_idx:
            spec = params[i]
            arr = _as_array(args[i], spec, self.name)
            want = self._np_dtypes[i]
            if arr.dtype != want:
                raise TypeError(f"{self.name}: parameter '{spec.name}' expects dtype {spec.dtype}, got {arr.dtype}")
            if arr.ndim != len(spec.shape):
                raise ValueError(f"{self.name}: parameter '{spec.name}' expects a {len(spec.shape)}-d array "
                                 f"(shape ({', '.join(map(str, spec.shape))})), got shape {arr.shape}")
            for d, (dim, got) in enumerate(zip(spec.shape, arr.shape)):
                if isinstance(dim, int):
                    if dim != got:
                        raise ValueError(f"{self.name}: parameter '{spec.name}' expects shape "
                                         f"({', '.join(map(str, spec.shape))}), got {arr.shape} "
                                         f"(dimension {d} is {got}, not {dim})")
                elif dim.isidentifier():
                    self._bind(env, origin, dim, got, f"dimension {d} of '{spec.name}'")
                else:
                    deferred.append((dim, got, f"dimension {d} of '{spec.name}'"))
            if spec.strides is None:
                if not arr.flags.c_contiguous:
                    raise ValueError(f"{self.name}: parameter '{spec.name}' must be C-contiguous "
                                     "(use numpy.ascontiguousarray)")
            else:
                item = arr.itemsize
                for d, (st, got) in enumerate(zip(spec.strides, arr.strides)):
                    if got % item:
                        raise ValueError(f"{self.name}: parameter '{spec.name}' has a stride not a multiple of its item size")
                    got //= item
                    if arr.shape[d] <= 1 and isinstance(st, int):
                        continue  # a stride of a dimension of extent 1 is irrelevant
                    if isinstance(st, int):
                        if st != got:
                            raise ValueError(f"{self.name}: parameter '{spec.name}' expects strides "
                                             f"{spec.strides} (elements), got {tuple(s // item for s in arr.strides)}")
                    elif st.isidentifier():
                        self._bind(env, origin, st, got, f"stride {d} of '{spec.name}'")
                    else:
                        deferred.append((st, got, f"stride {d} of '{spec.name}'"))
            if spec.written and not arr.flags.writeable:
                raise ValueError(f"{self.name}: parameter '{spec.name}' is written by the kernel but the array is read-only")
            arrays.append(arr)
            pointers.append(arr.__array_interface__["data"][0])
        scalars, syms = bind_scalars(self.name, params, self._scalar_idx, self.sym_vars, args, env, origin,
                                     deferred)
        self.cfunc(*pointers, *scalars, *syms)
        if _errors:
            raise_pending(self)
        del arrays

    def call_raw(self, pointers, syms=(), scalars=()) -> None:
        """Call without any check: ``pointers`` are the buffers' data addresses (ints) in
        parameter order, ``scalars`` the scalar arguments, ``syms`` the values of `sym_vars`."""
        self.cfunc(*pointers, *scalars, *syms)
        if _errors:
            raise_pending(self)
