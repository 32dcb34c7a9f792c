"""Relax module passes, with TVM's names (``tvms.relax.transform.FuseOps()``).

Each pass is an ``IRModule -> IRModule`` callable that returns a new module (the input is not
changed) and is idempotent. `get_pipeline("zero")` chains them as TVM's zero pipeline does.
"""

from __future__ import annotations

from .annotate_tir_op_pattern import AnnotateTIROpPattern, analyze_op_pattern
from .dead_code_elimination import DeadCodeElimination
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .pipeline import Sequential, get_pipeline

__all__ = ["AnnotateTIROpPattern", "analyze_op_pattern", "DeadCodeElimination", "FoldConstant",
           "FuseOps", "FuseTIR", "Sequential", "get_pipeline"]


def __getattr__(name: str):
    if name == "LegalizeOps":
        from .pipeline import _legalize_ops

        p = _legalize_ops()
        if p is None:
            raise AttributeError("LegalizeOps is not available (compiler/transform/legalize_ops.py missing)")
        return type(p)
    raise AttributeError(f"module 'tvmscript.compiler.transform' has no attribute '{name}'")
