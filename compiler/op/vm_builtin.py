"""Ops the VM runs itself rather than through a legalized PrimFunc: ``R.shape_of`` (a tensor's
runtime shape as a Shape value) and ``R.shape_to_tensor`` (a Shape value as a 1-D int64 tensor).

TVM lowers ``shape_of`` to its VM builtin ``vm.builtin.shape_of``; it legalizes
``shape_to_tensor`` into a PrimFunc taking the shape's symbolic dims as scalars, which our
``call_tir`` cannot pass yet, so here the VM makes that tensor too (compiler/build.py emits both;
runtime/vm.py holds the ``_shape_tensor`` helper). Their struct info follows TVM's: the shape of
the tensor, symbolic dims included; a tensor of the shape's rank.
"""

from __future__ import annotations

from tvmscript import relax, tir

from .common import tensor_arg
from .registry import Arg, OpError, register_op


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


register_op("shape_of", (Arg("expr", "tensor"),), infer_shape_of)
register_op("shape_to_tensor", (Arg("expr", "expr"),), infer_shape_to_tensor)
