"""Relax operators: the registry (`registry.py`) and the declarations of every op, one module per
family. Each op is one `register_op` call: its arguments and attributes, struct-info inference,
fusion pattern, and legalization to TensorIR (written with TE through ``compiler/topi``)."""

from .registry import Arg, Attr, OpDef, OpError, all_ops, find_op, get_op, register_op  # noqa: F401
from . import ccl, create, elementwise, grad, image, linalg, manipulate, nn, qnn, reduction, sort, vision, vm_builtin  # noqa: F401,E402  (register the ops)
