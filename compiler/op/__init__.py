"""Relax operators: the registry (`registry.py`) and the declarations of every op."""

from .registry import Attr, OpDef, OpError, all_ops, find_op, get_op, register_op  # noqa: F401
from . import tensor_ops  # noqa: F401  (registers the ops)
