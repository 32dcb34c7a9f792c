"""TVM's ``relax.op``: one Python function per registered op, generated from the registry.

``relax.op.add(x, y)``, ``relax.op.matmul(a, b, out_dtype="void")``,
``relax.op.permute_dims(x, axes=None)``, ``relax.op.nn.relu(x)``, ``relax.op.nn.dense(x, w)``...
Each builds a `relax.Call` of the op with its attributes defaulted and validated (the op's
`Attr.convert`) and the call's struct info inferred (the op's ``infer``); a call that cannot be
right raises ``ValueError`` with the op's message. Ops registered as ``nn.X`` live in the ``nn``
namespace; older Relax (seed 002 section 5.6) also spelled them ``relax.op.relu`` /
``relax.op.dense``, kept as aliases where the short name is free.

Arguments may be Relax expressions or plain Python/NumPy values (turned into constants).
"""

from __future__ import annotations

import inspect
import types

from tvmscript.ir import relax, tir

from .registry import OpError, all_ops, get_op

_MISSING = inspect.Parameter.empty


class DynTensorType:
    """Older Relax's tensor type annotation: ``relax.DynTensorType(ndim, dtype)``; accepted where
    a struct info or dtype is expected (``relax.Var``, ``relax.const``)."""

    __slots__ = ("ndim", "dtype")

    def __init__(self, ndim: int = -1, dtype: str = "float32") -> None:
        self.ndim = ndim
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"DynTensorType(ndim={self.ndim}, dtype={self.dtype!r})"


def _dims(shape) -> list:
    out = []
    for d in shape:
        if isinstance(d, bool):
            raise ValueError(f"a shape dimension must be an integer or a tir expression, not {d!r}")
        if isinstance(d, int):
            out.append(tir.IntImm("int64", d))
        elif isinstance(d, tir.IntImm):  # constant dims are int64 IntImms in Relax (TE's may not be)
            out.append(d if type(d) is tir.IntImm and d.dtype == "int64" else tir.IntImm("int64", int(d.value)))
        elif hasattr(d, "item") and not isinstance(d, tir.PrimExpr):  # numpy integer
            out.append(tir.IntImm("int64", int(d)))
        elif isinstance(d, tir.PrimExpr):
            out.append(d)
        else:
            raise ValueError(f"a shape dimension must be an integer or a tir expression, not {d!r}")
    return out


def canonical_sinfo(sinfo):
    """Struct info with Python ints in tensor/shape dims turned into int64 `tir.IntImm`s, and
    ``DynTensorType`` turned into a shapeless `TensorStructInfo`."""
    if sinfo is None:
        return None
    if isinstance(sinfo, DynTensorType):
        return relax.TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    if isinstance(sinfo, relax.TensorStructInfo):
        if sinfo.shape is not None and any(not isinstance(d, tir.PrimExpr) for d in sinfo.shape):
            return relax.TensorStructInfo(_dims(sinfo.shape), sinfo.dtype, vdevice=sinfo.vdevice)
        if sinfo.shape is not None and not isinstance(sinfo.shape, list):
            return relax.TensorStructInfo(list(sinfo.shape), sinfo.dtype, vdevice=sinfo.vdevice)
        return sinfo
    if isinstance(sinfo, relax.ShapeStructInfo) and sinfo.values is not None:
        if any(not isinstance(d, tir.PrimExpr) for d in sinfo.values):
            return relax.ShapeStructInfo(_dims(sinfo.values))
        return sinfo
    if isinstance(sinfo, relax.TupleStructInfo):
        return relax.TupleStructInfo([canonical_sinfo(f) for f in sinfo.fields])
    if isinstance(sinfo, relax.StructInfo):
        return sinfo
    raise ValueError(f"expected a struct info, got {sinfo!r}")


def legacy_var_sinfo(shape, type_annotation):
    """The struct info of older Relax's ``relax.Var(name, shape, DynTensorType(ndim, dtype))``
    (seed 002): a shape tuple (or None) plus a DynTensorType, into a `TensorStructInfo`."""
    if isinstance(shape, relax.StructInfo) and type_annotation is None:
        return canonical_sinfo(shape)
    dtype = ""
    ndim = -1
    if isinstance(type_annotation, DynTensorType):
        dtype, ndim = type_annotation.dtype, type_annotation.ndim
    elif isinstance(type_annotation, str):
        dtype = type_annotation
    elif type_annotation is not None:
        raise ValueError(f"expected a DynTensorType, got {type_annotation!r}")
    if shape is None:
        return relax.TensorStructInfo(None, dtype, ndim)
    if isinstance(shape, relax.ShapeExpr):
        shape = shape.values
    dims = _dims(shape)
    if ndim >= 0 and ndim != len(dims):
        raise ValueError(f"shape {tuple(shape)} has rank {len(dims)} but the type says ndim={ndim}")
    return relax.TensorStructInfo(dims, dtype)


def fix_legacy_var(var) -> None:
    """A `relax.Var` made as ``relax.Var("A", (128, 128), DynTensorType(2, "float32"))`` holds the
    shape in ``struct_info`` and the type in ``span``; put a `TensorStructInfo` there instead."""
    si = var.struct_info
    if si is not None and not isinstance(si, relax.StructInfo):
        var.struct_info = legacy_var_sinfo(si, var.span if isinstance(var.span, (DynTensorType, str)) else None)
        var.span = None
    elif isinstance(si, relax.TensorStructInfo) and si.shape is not None and any(
            not isinstance(d, tir.PrimExpr) for d in si.shape):
        var.struct_info = canonical_sinfo(si)


def make_var(name_hint: str, struct_info=None, type_annotation=None, *, dataflow: bool = False):
    """``relax.Var(name, struct_info)``, also in older Relax's ``(name, shape, DynTensorType)``
    form; ``dataflow=True`` makes a `DataflowVar`."""
    if type_annotation is not None or (struct_info is not None and not isinstance(struct_info, relax.StructInfo)):
        sinfo = legacy_var_sinfo(struct_info, type_annotation)
    else:
        sinfo = canonical_sinfo(struct_info)
    cls = relax.DataflowVar if dataflow else relax.Var
    return cls(name_hint, sinfo)


def const(value, dtype=None) -> relax.Constant:
    """``relax.const(value, dtype=None)``: a `relax.Constant` holding a NumPy array. Python floats
    default to float32, ints to int32, bools to bool (as in TVM); ``dtype`` may be a string or an
    older ``DynTensorType``."""
    import numpy as np

    if isinstance(dtype, DynTensorType):
        dtype = dtype.dtype
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    if dtype is None:
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            data = np.asarray(value)
        elif isinstance(value, bool):
            data = np.asarray(value, dtype="bool")
        elif isinstance(value, int):
            data = np.asarray(value, dtype="int32")
        elif isinstance(value, float):
            data = np.asarray(value, dtype="float32")
        else:
            data = relax.default_const_array(value)
    else:
        if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
            raise ValueError(f"relax.const: unknown dtype {dtype!r}")
        data = np.asarray(value).astype(_np_dtype(dtype))
    return relax.Constant(data, relax.tensor_sinfo(list(data.shape), str(data.dtype)))


def _np_dtype(dtype: str):
    """NumPy's dtype for a dtype name; bfloat16, which NumPy lacks, is ml_dtypes' (what tvms'
    tensors hold)."""
    from tvmscript.runtime.ndarray import _np_dtype as np_dtype

    return np_dtype(dtype)


def to_expr(value, what: str = "argument"):
    """A Relax expression for an op argument: expressions as they are, tuples/lists of
    expressions as a `relax.Tuple`, numbers and arrays as constants."""
    from tvmscript.ir import GlobalVar

    if isinstance(value, relax.Var):
        fix_legacy_var(value)
        return value
    if isinstance(value, (relax.Expr, GlobalVar)):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, relax.Expr) for v in value):
        fields = list(value)
        return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    if isinstance(value, (bool, int, float)) or hasattr(value, "dtype") or isinstance(value, (list, tuple)):
        return const(value)
    raise ValueError(f"{what} must be a Relax expression, not {type(value).__name__}")


def coerce_arg(spec, value, what: str):
    """The Relax expression for an op argument declared as ``spec`` (an `Arg`): plain Python
    values become what the argument's kind holds (a shape, prim values, constants); Relax
    expressions stay as they are. Shared by the parser and ``relax.op.*``; raises ``OpError``."""
    kind = spec.kind
    if isinstance(value, (relax.Expr,)) and not (kind == "shape" and isinstance(value, relax.Tuple)) \
            and not (kind == "prim" and isinstance(value, relax.Constant)):
        if isinstance(value, relax.Var):
            fix_legacy_var(value)
        return value
    if kind == "shape":
        if isinstance(value, relax.Tuple):  # (2, 3) as written in the text: prim values
            if not all(isinstance(f, relax.PrimValue) for f in value.fields):
                raise OpError(f"{what} must be a shape such as R.shape([2, 3])", spec.name)
            value = [f.value for f in value.fields]
        if isinstance(value, (int, tir.PrimExpr)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise OpError(f"{what} must be a shape such as R.shape([2, 3]), not {type(value).__name__}", spec.name)
        try:
            vals = _dims(value)
        except ValueError as err:
            raise OpError(f"{what}: {err}", spec.name) from None
        return relax.ShapeExpr(vals, relax.ShapeStructInfo(vals))
    if kind == "prim":
        return _prim_value(spec, value, what)
    if kind == "prims":
        if isinstance(value, (int, float, tir.PrimExpr)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise OpError(f"{what} must be a tuple of prim values, not {type(value).__name__}", spec.name)
        fields = [_prim_value(spec, v, what) for v in value]
        return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    try:
        return to_expr(value, what)
    except ValueError as err:
        raise OpError(str(err), spec.name) from None


def _prim_value(spec, value, what: str) -> relax.PrimValue:
    if isinstance(value, relax.PrimValue):
        return value
    if isinstance(value, relax.Constant) and value.data.ndim == 0:
        value = value.data.item()
    if hasattr(value, "item") and not isinstance(value, tir.PrimExpr):  # numpy scalar
        value = value.item()
    if isinstance(value, bool):
        value = tir.IntImm("bool", int(value))
    elif isinstance(value, int):
        value = tir.IntImm("int64", value)
    elif isinstance(value, float):
        value = tir.FloatImm("float64", value)
    if not isinstance(value, tir.PrimExpr):
        raise OpError(f"{what} must be a prim value (a number), not {type(value).__name__}", spec.name)
    return relax.PrimValue(value, relax.PrimStructInfo(value.dtype, value))


def make_op_call(op, args: list, attrs: dict) -> relax.Call:
    """A call of the registered ``op`` (an `OpDef`), attrs validated, struct info inferred.
    ``args`` has one entry per declared argument; an optional one left out is ``None``."""
    short = op.name[len("relax."):]
    exprs = []
    try:
        for spec, value in zip(op.params, args):
            if value is None and spec.optional:
                continue
            exprs.append(coerce_arg(spec, value, f"relax.op.{short}: {spec.name}"))
    except OpError as err:
        raise ValueError(err.message if err.message.startswith("relax.op.") else f"relax.op.{short}: {err.message}") from None
    values = {}
    for a in op.attrs:
        value = attrs.get(a.name, a.default)
        if a.convert is not None:
            try:
                value = a.convert(value)
            except OpError as err:
                raise ValueError(f"relax.op.{short}: {err.message}") from None
        values[a.name] = value
    try:
        exprs, values = canonicalize_call(op, exprs, values)
        sinfo = op.infer(arg_sinfos(op, exprs), values)
    except OpError as err:
        raise ValueError(f"relax.op.{short}: {err.message}") from None
    return relax.Call(relax.Op(op.name), exprs, values, [], sinfo)


def canonicalize_call(op, exprs: list, attrs: dict):
    """The op's canonical (args, attrs) (its ``canonicalize`` hook; as given when it has none).
    ``exprs`` holds the call's coerced arguments, the optional ones left out missing."""
    if op.canonicalize is None:
        return exprs, attrs
    full = list(exprs) + [None] * (len(op.params) - len(exprs))
    full, attrs = op.canonicalize(full, dict(attrs))
    return [e for e in full if e is not None], attrs


def arg_sinfos(op, exprs: list) -> list:
    """The struct infos ``op.infer`` receives: one per declared argument, None for an optional
    argument the call leaves out. A ``R.dtype(...)`` argument is passed as itself: its struct
    info (an object) would not say which dtype (``R.memory.alloc_tensor`` needs it)."""
    sinfos = [x if isinstance(x, relax.DataTypeImm) else relax.struct_info_of(x) for x in exprs]
    return sinfos + [None] * (len(op.params) - len(sinfos))


def _make_function(op):
    short = op.name[len("relax."):]
    leaf = short.rsplit(".", 1)[-1]
    kinds = {a.name: a for a in op.params}
    defaults = {a.name: a.default for a in op.attrs}
    order = op.py_signature or tuple(kinds) + tuple(defaults)
    params = []
    for name in order:
        if name in kinds:
            default = None if kinds[name].optional else inspect.Parameter.empty
        else:
            default = defaults[name]
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    sig = inspect.Signature(params)

    def fn(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"relax.op.{short}: {err}") from None
        bound.apply_defaults()
        values = bound.arguments
        target = op
        if op.dispatch is not None:
            other = op.dispatch(values)
            if other is not None:
                target = get_op(other)
        return make_op_call(target, [values.get(a.name) for a in target.params],
                            {a.name: values[a.name] for a in target.attrs})

    fn.__name__ = leaf
    fn.__qualname__ = short
    fn.__signature__ = sig
    fn.__doc__ = f"``R.{short}``: a call of the Relax op ``{op.name}`` (struct info inferred)."
    return fn


def call_tir(gvar, args, out_sinfo, tir_vars=None) -> relax.Call:
    """``relax.op.call_tir(gvar, args, out_sinfo, tir_vars=None)``: destination-passing call of a
    prim_func; ``out_sinfo`` is a TensorStructInfo or a list of them (the result is then a
    tuple)."""
    if isinstance(args, relax.Expr) and not isinstance(args, relax.Tuple):
        args = [args]
    if not isinstance(args, relax.Tuple):
        fields = [to_expr(a) for a in args]
        args = relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    multi = isinstance(out_sinfo, (list, tuple))
    sinfos = [canonical_sinfo(s) for s in (out_sinfo if multi else [out_sinfo])]
    for s in sinfos:
        if not isinstance(s, relax.TensorStructInfo):
            raise ValueError("relax.op.call_tir: out_sinfo must be a TensorStructInfo or a list of them")
    call_args = [gvar, args]
    if tir_vars is not None:
        if isinstance(tir_vars, relax.ShapeExpr):
            call_args.append(tir_vars)
        else:
            vals = _dims(tir_vars)
            call_args.append(relax.ShapeExpr(vals, relax.ShapeStructInfo(vals)))
    ret = relax.TupleStructInfo(list(sinfos)) if multi else sinfos[0]
    return relax.Call(relax.Op("relax.call_tir"), call_args, {}, list(sinfos), ret)


# ----------------------------------------------------------------------------- the namespace

nn = types.ModuleType(__name__ + ".nn", "TVM's relax.op.nn: the ops registered as nn.*.")
__all__ = ["nn", "call_tir", "const"]


def _install() -> None:
    aliases = {}
    for name, op in sorted(all_ops().items()):
        short = name[len("relax."):]
        fn = _make_function(op)
        parts = short.split(".")
        if len(parts) == 1:
            globals()[short] = fn
            __all__.append(short)
        else:
            ns_name, leaf = parts[0], parts[-1]
            ns = globals().get(ns_name)
            if not isinstance(ns, types.ModuleType):
                ns = types.ModuleType(f"{__name__}.{ns_name}")
                globals()[ns_name] = ns
                __all__.append(ns_name)
            setattr(ns, leaf, fn)
            aliases.setdefault(leaf, fn)
    for leaf, fn in aliases.items():  # older Relax: relax.op.relu, relax.op.dense
        if leaf not in globals():
            globals()[leaf] = fn


_install()


# ----------------------------------------------------------------------------- Python-level helpers


def _relu6(data):
    """``relax.op.nn.relu6(data)``: ``R.clip(data, 0, 6)``. TVM has no relu6 op; its Python
    helper builds this clip, and its parser reads ``R.nn.relu6(x)`` in text the same way."""
    return globals()["clip"](data, 0, 6)


_relu6.__name__ = "relu6"
_relu6.__qualname__ = "nn.relu6"


def _linear(data, weight, bias=None, out_dtype=None):
    """``relax.op.linear(data, weight, bias=None, out_dtype=None)``: ``data @ weight.T (+ bias)``
    as TVM's helper builds it, ``R.add(R.matmul(data, R.permute_dims(weight)), bias)``. The
    parser and the BlockBuilder bind the nested calls (``lv``, ``lv1``), so ``R.linear`` reads,
    prints and legalizes as in TVM (FoldConstant folds the transpose of a constant weight;
    ``R.nn.dense`` is the one-kernel ``x @ W.T``)."""
    g = globals()
    out = g["matmul"](data, g["permute_dims"](weight), out_dtype="void" if out_dtype is None else out_dtype)
    return out if bias is None else g["add"](out, bias)


_linear.__name__ = "linear"
_linear.__qualname__ = "linear"

# name -> function: ops that exist only as Python helpers building other ops' calls, as in TVM.
# The parser reads ``R.<name>(...)`` through them (tvmscript/parser/relax_calls.py).
HELPERS = {"nn.relu6": _relu6, "linear": _linear}
for _name, _fn in HELPERS.items():
    _family, _, _leaf = _name.rpartition(".")
    if _family:
        setattr(globals()[_family], _leaf, _fn)
    else:
        globals()[_leaf] = _fn
        __all__.append(_leaf)
