"""The VM's checks of values against what the program declares of them: arguments against
their parameters' annotations, ``R.match_cast`` and ``R.call_packed`` results against theirs
(`match_value`, over the specs of `runtime.value_specs`), a call_tir's tensors against its
kernel's parameters where the build could not prove they fit (`check_kernel_args`).

The generated code checks the common cases inline; these run for the rest, and to explain a
failed inline check. A mismatch is a `VMTypeError` or `VMValueError` whose message starts with
the value it is about.
"""

from __future__ import annotations

from tvmscript.diagnostics import TVMScriptError

from .devices import Device, kDLCPU, kDLCUDA
from .value_specs import AnySpec, FuncSpec, PrimSpec, ShapeSpec, TensorSpec, TupleSpec, dim_text, eval_dim, free_names

__all__ = ["VMTypeError", "VMValueError", "to_tensor", "match_value", "check_kernel_args", "type_name"]


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
            raise TypeError(f"{what}: expected a tensor on the CPU, got a {type_name(value)} on DLPack device "
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


def type_name(value) -> str:
    t = type(value)
    mod = t.__module__
    return t.__name__ if mod in ("builtins", None) else f"{mod}.{t.__name__}"


def _bind_dims(dims, values, env: dict, origin: dict, what: str, label: str, spec) -> None:
    """Bind the symbols first seen in ``dims`` to ``values``, then check every dim."""
    ann = spec.text
    for d, (e, v) in enumerate(zip(dims, values)):
        if isinstance(e, str) and e not in env:
            env[e] = v
            origin.setdefault(e, f"{what}, {label} {d}")
    for d, (e, v) in enumerate(zip(dims, values)):
        try:
            want = eval_dim(e, env)
        except KeyError as err:
            raise VMValueError(f"{what}: {label} {d} is {dim_text(e)}, whose symbol {err.args[0]!r} has no value "
                               f"yet; annotation {ann}") from None
        if v != want:
            if isinstance(e, int):
                raise VMValueError(f"{what}: {label} {d} is {v}, expected {want}; shape {tuple(values)} does not "
                                   f"match {ann}")
            if isinstance(e, str):
                raise VMValueError(f"{what}: {label} {d} is {v}, but {e} = {want} "
                                   f"(from {origin.get(e, 'an earlier value')}); annotation {ann}")
            names = sorted(free_names(e) & set(env))
            bound = ", ".join(f"{n} = {env[n]} from {origin.get(n, 'an earlier value')}" for n in names)
            raise VMValueError(f"{what}: {label} {d} is {v}, but {dim_text(e)} = {want} ({bound}); "
                               f"annotation {ann}")


def match_value(value, spec, env: dict, what: str, origin: dict | None = None, device: Device | None = None):
    """Check ``value`` against ``spec`` (`runtime.value_specs`), binding the symbolic dims not
    yet in ``env``. Returns the value, with NumPy arrays (also inside tuples) wrapped as
    tensors. Raises a `VMTypeError` (wrong kind of value, dtype; a TypeError for a tensor not
    on ``device``: the CPU when None) or `VMValueError` (rank, shape), starting with ``what``."""
    origin = {} if origin is None else origin
    if spec is None or isinstance(spec, AnySpec):
        return value
    if isinstance(spec, TensorSpec):
        t = to_tensor(value, device, what)
        if t is None:
            raise VMTypeError(f"{what}: expected a tensor ({spec.text}), got {type_name(value)}")
        ann = spec.text
        if spec.dtype and t._dtype != spec.dtype:
            raise VMTypeError(f"{what}: expected dtype {spec.dtype}, got {t._dtype} (annotation {ann})")
        if spec.ndim >= 0 and len(t._shape) != spec.ndim:
            raise VMValueError(f"{what}: expected a {spec.ndim}-d tensor, got a {len(t._shape)}-d tensor of shape "
                               f"{t._shape} (annotation {ann})")
        if spec.shape is not None:
            _bind_dims(spec.shape, t._shape, env, origin, what, "dimension", spec)
        return t
    if isinstance(spec, TupleSpec):
        if not isinstance(value, (tuple, list)):
            raise VMTypeError(f"{what}: expected a tuple of {len(spec.fields)} ({spec.text}), "
                              f"got {type_name(value)}")
        if len(value) != len(spec.fields):
            raise VMValueError(f"{what}: expected a tuple of {len(spec.fields)}, got {len(value)} items")
        return tuple(match_value(v, s, env, f"{what}[{k}]", origin, device)
                     for k, (v, s) in enumerate(zip(value, spec.fields)))
    if isinstance(spec, ShapeSpec):
        if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value):
            raise VMTypeError(f"{what}: expected a shape (a tuple of ints) ({spec.text}), got {value!r}")
        value = tuple(int(v) for v in value)
        if spec.ndim >= 0 and len(value) != spec.ndim:
            raise VMValueError(f"{what}: expected a shape of {spec.ndim} dims, got {value}")
        if spec.values is not None:
            _bind_dims(spec.values, value, env, origin, what, "shape value", spec)
        return value
    if isinstance(spec, PrimSpec):
        import numpy as np

        if isinstance(value, np.generic):
            value = value.item()
        from . import ndarray as nd

        if isinstance(value, nd.Tensor) and value._shape == ():
            value = value.numpy().item()
        dt = spec.dtype
        ok = (isinstance(value, bool) if dt == "bool" else
              isinstance(value, (int, float)) and not isinstance(value, bool) if dt.startswith("float") else
              isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise VMTypeError(f"{what}: expected a {dt} value ({spec.text}), got {type_name(value)} "
                              f"{value!r}")
        if dt.startswith("float"):
            value = float(value)
        if spec.value is not None:
            _bind_dims([spec.value], [value], env, origin, what, "value", spec)
        return value
    if isinstance(spec, FuncSpec):
        if not callable(value):
            raise VMTypeError(f"{what}: expected a function, got {type_name(value)}")
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
            raise _param_error(VMTypeError, f"{label} expects a tensor on the VM's device, got {type_name(t)}{where}",
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
