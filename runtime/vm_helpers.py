"""The helpers the VM's generated code calls, and the names it calls them by.

`compiler.vm_codegen` writes each Relax function as Python that calls a few globals of the
VM's namespace: ``_coerce`` an argument into a tensor, ``_bad`` to explain one that does not
fit its annotation, ``_empty`` for a new tensor, ``_kraise`` for a failure a kernel reported...
Their names are the constants below, which the code generator writes and `cpu_helpers` /
`cuda_helpers` bind, so the two sides cannot drift apart. The slow helpers (``_bad``,
``_arity``, ``_match``) only run to explain an error, or for struct infos the generated code
does not check inline (tuples, shapes, match_cast).

The ops the VM runs on the host (sort, argsort, topk, dynamic_strided_slice,
shape_to_tensor) and the impure builtins (R.print, R.assert_op) are helpers too, and the
runtime functions TVM's legalizations call by name (``relax.run.nonzero``,
``relax.run.unique``) are registered here.
"""

from __future__ import annotations

from tvmscript.diagnostics import TVMScriptError

from .devices import Device
from .executable import FuncSig
from .kernel import pending_failures, raise_pending
from .value_checks import VMValueError, check_kernel_args, match_value, to_tensor, type_name

__all__ = ["NAMES", "cpu_helpers", "cuda_helpers", "SizeOutOfRangeError", "VMAssertionError"]

# ----------------------------------------------------------------------------- the names

TENSOR = "_Tensor"                  # the class of the VM's tensors (an argument of another class is coerced)
COERCE = "_coerce"                  # (value, sig, i): argument i as a tensor of the VM's device
ARITY = "_arity"                    # (sig, args): the error for a call with a wrong number of arguments
BAD = "_bad"                        # (sig, i, value, env): the error saying how argument i fails its annotation
OUT_OF_RANGE = "_out_of_range"      # (sig, name, value): the error for a symbolic dim outside its bounds
MATCH = "_match"                    # (value, spec, env, what): a value checked against any annotation
TRUTH = "_truth"                    # (value): an if's condition as a bool
EMPTY = "_empty"                    # (shape, dtype): a new tensor
RESHAPE = "_reshape"                # (tensor, shape): R.reshape, a view of the tensor's memory
EXTERN = "_extern"                  # (name): the function registered under that name
KCHECK = "_kcheck"                  # (kernel, tensors, site, scalars): a call's tensors checked against a kernel
STRIDE = "_stride"                  # (tensor, d): the stride of dimension d of a compact tensor
KERR = "_kerr"                      # the failures kernels reported (a list, tested after each kernel call)
KRAISE = "_kraise"                  # (): raise the first of them
TRUNCDIV = "_truncdiv"              # (a, b): TIR's integer Div
TRUNCMOD = "_truncmod"              # (a, b): TIR's integer Mod
SHAPE_TENSOR = "_shape_tensor"      # R.shape_to_tensor
SORT = "_sort"                      # R.sort
ARGSORT = "_argsort"                # R.argsort
TOPK = "_topk"                      # R.topk
DYNAMIC_STRIDED_SLICE = "_dynamic_strided_slice"  # R.dynamic_strided_slice
PRINT = "_vm_print"                 # R.print
ASSERT = "_vm_assert"               # R.assert_op

NAMES = frozenset((TENSOR, COERCE, ARITY, BAD, OUT_OF_RANGE, MATCH, TRUTH, EMPTY, RESHAPE, EXTERN, KCHECK, STRIDE,
                   KERR, KRAISE, TRUNCDIV, TRUNCMOD, SHAPE_TENSOR, SORT, ARGSORT, TOPK, DYNAMIC_STRIDED_SLICE, PRINT, ASSERT))


# ----------------------------------------------------------------------------- the helpers


_CPU_HELPERS = None


def cpu_helpers() -> dict:
    """The helpers of a VM on the CPU, by the names the generated code calls (made once)."""
    global _CPU_HELPERS
    if _CPU_HELPERS is None:
        _CPU_HELPERS = _make_cpu_helpers()
    return _CPU_HELPERS


def _make_cpu_helpers() -> dict:
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

    def _reshape(x, shape):
        return wrap(x._array.reshape(shape), x._device)

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
            raise TypeError(f"{what}: expected a tensor ({sig.param_specs[i].text}), got {type_name(value)}")
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

    def _match(value, spec, env, what):
        return match_value(value, spec, env, what, {})

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

    def _truncdiv(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    def _truncmod(a, b):
        return a - b * _truncdiv(a, b)

    return {
        TENSOR: Tensor, EMPTY: _empty, RESHAPE: _reshape, EXTERN: _extern, COERCE: _coerce, BAD: _bad, ARITY: _arity,
        MATCH: _match, TRUTH: _truth, KCHECK: _kcheck, TRUNCDIV: _truncdiv, TRUNCMOD: _truncmod, STRIDE: _stride,
        OUT_OF_RANGE: _out_of_range, KERR: pending_failures(), KRAISE: raise_pending,
        **_host_op_helpers(lambda t: t._array, wrap),
        **_effect_helpers(lambda v: isinstance(v, Tensor), lambda t: t._array),
    }


def cuda_helpers(dev: Device) -> dict:
    """The helpers of a VM on GPU ``dev``: the CPU's, with that GPU's tensor class, allocation
    and argument checks. Kernels there report no assertion failures (`KERR` stays empty)."""
    from . import cuda
    from .ndarray import Tensor

    rt = cuda.runtime(dev)
    cls = rt.tensor_class

    def _coerce(value, sig: FuncSig, i: int):
        name = sig.param_names[i]
        what = f"{sig.name}() argument '{name}'"
        t = cuda.as_tensor_on(value, dev, what, name)
        if t is None:
            raise TypeError(f"{what}: expected a tensor on {dev} ({sig.param_specs[i].text}), "
                            f"got {type_name(value)}")
        return t

    def _bad(sig: FuncSig, i: int, value, env: dict):
        _explain_mismatch(sig, i, value, env, dev)

    def _match(value, spec, env, what):
        return match_value(value, spec, env, what, {}, dev)

    def _truth(v):
        if isinstance(v, Tensor):
            arr = v.numpy()
            if arr.size != 1:
                raise VMValueError(f"the condition of an if must be a scalar, got a tensor of shape {v._shape}")
            return bool(arr.reshape(()))
        return bool(v)

    def _kcheck(kernel, tensors, site, scalars=()):
        check_kernel_args(kernel, tensors, site, cls, scalars)

    def _reshape(x, shape):
        n = old = 1
        for d in shape:
            n *= d
        for d in x._shape:
            old *= d
        if n != old:
            raise VMValueError(f"R.reshape: a tensor of shape {x._shape} cannot be viewed as {shape}")
        return rt.view(x._mem, x._ptr, shape, x._dtype)

    from .ndarray import array

    g = dict(cpu_helpers())
    g.update(_host_op_helpers(lambda t: t.numpy(), lambda a: array(a, device=dev)))
    g.update(_effect_helpers(lambda v: isinstance(v, Tensor), lambda t: t.numpy()))
    g.update({TENSOR: cls, EMPTY: rt.empty, RESHAPE: _reshape, COERCE: _coerce, BAD: _bad, MATCH: _match,
              TRUTH: _truth, KCHECK: _kcheck, KERR: []})
    return g


# ----------------------------------------------------------------------------- argument errors


def _explain_mismatch(sig: FuncSig, i: int, value, env: dict, device: Device | None = None):
    """Raise the error saying how argument ``i`` fails its annotation (the generated code found
    that it does)."""
    what = f"{sig.name}() argument '{sig.param_names[i]}'"
    origin = {k: _origin_text(sig, v) for k, v in sig.sym_origin.items()}
    match_value(value, sig.param_specs[i], dict(env), what, origin, device)
    raise RuntimeError(f"{what}: does not match {sig.param_specs[i].text}")  # pragma: no cover


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


def _origin_text(sig: FuncSig, origin) -> str:
    i, d = origin
    where = f"argument '{sig.param_names[i]}'"
    return f"{where}, dimension {d}" if d is not None else where


# ----------------------------------------------------------------------------- ops run on the host


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

    return {SORT: _sort, ARGSORT: _argsort, TOPK: _topk, SHAPE_TENSOR: _shape_tensor,
            DYNAMIC_STRIDED_SLICE: _dynamic_strided_slice}


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


# ----------------------------------------------------------------------------- R.print, R.assert_op


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

    return {PRINT: _vm_print, ASSERT: _vm_assert}


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


# ----------------------------------------------------------------------------- runtime functions


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
