"""Ops the VM runs itself rather than through a legalized PrimFunc: ``R.shape_of`` (a tensor's
runtime shape as a Shape value) and ``R.shape_to_tensor`` (a Shape value as a 1-D int64 tensor).

TVM lowers ``shape_of`` to its VM builtin ``vm.builtin.shape_of``; it legalizes
``shape_to_tensor`` into a PrimFunc taking the shape's symbolic dims as scalars, which our
``call_tir`` cannot pass yet, so here the VM makes that tensor too (compiler/vm_codegen.py emits
both; runtime/vm_helpers.py holds the ``_shape_tensor`` helper). Their struct info follows TVM's: the shape of
the tensor, symbolic dims included; a tensor of the shape's rank.

The memory ops of lowered Relax (``R.memory.alloc_storage``/``alloc_tensor``/``kill_*``, the
VM's ``R.vm.alloc_storage``/``alloc_tensor``/``kill_object``/``call_tir_dyn``) and
``R.builtin.stop_lift_params`` are declared with TVM's arguments and struct info so that the
programs TVM's passes produce read and print; every argument is an expression (TVM prints them
positionally: ``R.vm.alloc_storage(R.shape([n]), 0, R.dtype("uint8"), R.str("global"))``).
"""

from __future__ import annotations


from tvmscript import ir
from tvmscript.ir import relax, tir

from .common import int_attr, tensor_arg
from .registry import Arg, Attr, OpError, register_op


def infer_shape_of(args, attrs):
    """The tensor's shape (its symbolic dims as they are), or a shape of its rank when unknown."""
    x = tensor_arg(args[0], "expr")
    if x.shape is not None:
        return relax.ShapeStructInfo(list(x.shape))
    return relax.ShapeStructInfo(None, x.ndim)


def infer_shape_to_tensor(args, attrs):
    """A 1-D int64 tensor with one element per dim of the shape."""
    s = args[0]
    if not isinstance(s, relax.ShapeStructInfo):
        raise OpError("expr must be a shape (R.shape([...]) or R.shape_of(x)), not "
                      f"{type(s).__name__.replace('StructInfo', '').lower() or 'an object'}", "expr")
    if s.ndim < 0:
        return relax.TensorStructInfo(None, "int64", 1)
    return relax.TensorStructInfo([tir.IntImm("int64", s.ndim)], "int64")


def _void(args, attrs):
    """Nothing: the empty tuple, as TVM types its effect-only ops."""
    return relax.TupleStructInfo([])


def _shape_values(sinfo, what: str):
    if not isinstance(sinfo, relax.ShapeStructInfo):
        raise OpError(f"{what} must be a shape such as R.shape([2, 3])", what)
    return sinfo


def _dtype_of(expr, what: str) -> str:
    """The dtype a ``R.dtype("float32")`` argument names."""
    if not isinstance(expr, relax.DataTypeImm):
        raise OpError(f'{what} must be a dtype such as "float32" or R.dtype("float32")', what)
    return expr.value


def _as_dtype(expr, what: str):
    """A dtype written as a plain string (read as ``R.str``) is a ``R.dtype``, as TVM converts it."""
    if isinstance(expr, relax.StringImm):
        if not tir.is_valid_dtype(expr.value):
            raise OpError(f"unknown dtype {expr.value!r}", what)
        return relax.DataTypeImm(expr.value, relax.ObjectStructInfo())
    return expr


def _default_prim(expr, value: int = 0):
    if expr is not None:
        return expr
    e = tir.IntImm("int64", value)
    return relax.PrimValue(e, relax.PrimStructInfo("int64", e))


def _check_str(expr, what: str):
    if not isinstance(expr, relax.StringImm):
        raise OpError(f'{what} must be a string such as "global"', what)
    return expr


def canonicalize_memory_alloc_storage(args, attrs):
    size, device, scope, dtype = args
    dtype = _as_dtype(dtype, "dtype")
    _dtype_of(dtype, "dtype")
    return [size, device, _check_str(scope, "storage_scope"), dtype], attrs


def canonicalize_vm_alloc_storage(args, attrs):
    """``storage_scope`` defaults to "global", as in TVM's Python function."""
    size, device, dtype, scope = args
    scope = relax.StringImm("global", relax.ObjectStructInfo()) if scope is None else _check_str(scope, "storage_scope")
    dtype = _as_dtype(dtype, "dtype")
    _dtype_of(dtype, "dtype")
    return [size, device, dtype, scope], attrs


def infer_storage(args, attrs):
    """A storage: an opaque object (``R.Object``) of the given size."""
    _shape_values(args[0], "size")
    return relax.ObjectStructInfo()


def canonicalize_alloc_tensor(args, attrs):
    """``runtime_device_ind`` defaults to 0, as in TVM's Python function; a dtype written as a
    string is a ``R.dtype``."""
    storage, offset, shape, dtype, device = args
    dtype = _as_dtype(dtype, "dtype")
    _dtype_of(dtype, "dtype")
    return [storage, offset, shape, dtype, _default_prim(device)], attrs


def infer_alloc_tensor(args, attrs):
    """A tensor of the given shape (its dims when known) and dtype, placed in the storage."""
    shape = _shape_values(args[2], "shape")
    dtype = args[3].value if isinstance(args[3], relax.DataTypeImm) else ""  # see op/api.py: arg_sinfos
    if shape.values is None:
        return relax.TensorStructInfo(None, dtype, shape.ndim)
    return relax.TensorStructInfo(list(shape.values), dtype)


def infer_stop_lift_params(args, attrs):
    """The value itself: a marker LiftTransformParams stops at."""
    return args[0]


register_op("shape_of", (Arg("expr", "tensor"),), infer_shape_of)
register_op("shape_to_tensor", (Arg("expr", "expr"),), infer_shape_to_tensor)


def _vdevice_attr(value):
    """``"llvm"``, ``"cuda:1"``, ``"cuda:1:global"``: kept in TVM's printed form "kind:index:scope"."""
    if isinstance(value, str) and value.startswith("vdevice:"):
        raise OpError(f"dst_vdevice {value!r}: name the device by its kind here, such as \"cuda:0\"", "dst_vdevice")
    try:
        return ir.vdevice_name(value)
    except ValueError as err:
        raise OpError(str(err).replace("vdevice", "dst_vdevice", 1), "dst_vdevice") from None


def infer_to_vdevice(args, attrs):
    """The tensor, now on ``dst_vdevice``."""
    x = tensor_arg(args[0], "data")
    shape = list(x.shape) if x.shape is not None else None
    return relax.TensorStructInfo(shape, x.dtype, x.ndim if shape is None else len(shape), attrs["dst_vdevice"])


# Argument names as in TVM's Python functions (``memory.alloc_storage(size, ...)`` but
# ``vm.alloc_storage(shape, ...)``; ``runtime_device_ind`` of alloc_tensor), which keywords name.
register_op("memory.alloc_storage", (Arg("size", "shape"), Arg("virtual_device_index", "prim"),
                                     Arg("storage_scope", "expr"), Arg("dtype", "expr")),
            infer_storage, canonicalize=canonicalize_memory_alloc_storage)
register_op("vm.alloc_storage", (Arg("shape", "shape"), Arg("runtime_device_index", "prim"), Arg("dtype", "expr"),
                                 Arg("storage_scope", "expr", optional=True)),
            infer_storage, canonicalize=canonicalize_vm_alloc_storage)
_ALLOC_TENSOR = (Arg("storage", "expr"), Arg("offset", "prim"), Arg("shape", "shape"), Arg("dtype", "expr"),
                 Arg("runtime_device_ind", "prim", optional=True))
register_op("memory.alloc_tensor", _ALLOC_TENSOR, infer_alloc_tensor, canonicalize=canonicalize_alloc_tensor)
register_op("vm.alloc_tensor", _ALLOC_TENSOR, infer_alloc_tensor, canonicalize=canonicalize_alloc_tensor)
register_op("memory.kill_storage", (Arg("storage", "expr"),), _void)
register_op("memory.kill_tensor", (Arg("tensor", "expr"),), _void)
register_op("vm.kill_object", (Arg("obj", "expr"),), _void)
register_op("vm.call_tir_dyn", (Arg("func", "expr"), Arg("args", "expr")), _void)
register_op("builtin.stop_lift_params", (Arg("x", "expr"),), infer_stop_lift_params)
register_op("to_vdevice", ("data",), infer_to_vdevice, attrs=(Attr("dst_vdevice", None, _vdevice_attr),))


def _scope_attr(value):
    if not isinstance(value, str):
        raise OpError(f"memory_scope must be a string such as \"global\", not {value!r}", "memory_scope")
    return value


def infer_hint_on_device(args, attrs):
    """The value itself: the hint only says where it should live (TVM's RealizeVDevice reads it)."""
    return args[0]


# ``R.hint_on_device(x, R.device(device_type, index), memory_scope)``: the parser reads the
# R.device(...) form into the two integer attributes (tvmscript/parser/relax_calls.py).
register_op("hint_on_device", ("data",), infer_hint_on_device,
            attrs=(Attr("device_type", 1, int_attr("device_type", 0)), Attr("index", 0, int_attr("index", 0)),
                   Attr("memory_scope", "global", _scope_attr)))
