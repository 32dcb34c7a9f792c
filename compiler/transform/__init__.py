"""Relax module passes, with TVM's names (``tvms.relax.transform.FuseOps()``).

Each pass is an ``IRModule -> IRModule`` callable that returns a new module (the input is not
changed) and is idempotent. `get_pipeline("zero")` chains them as TVM's zero pipeline does.
"""

from __future__ import annotations

from .annotate_tir_op_pattern import AnnotateTIROpPattern, analyze_op_pattern
from .bind_params import BindParams
from .canonicalize_bindings import CanonicalizeBindings
from .convert_layout import ConvertLayout
from .dead_code_elimination import DeadCodeElimination
from .decompose_ops import DecomposeOpsForInference
from .fold_batchnorm import FoldBatchnormToConv2D
from .fold_constant import FoldConstant
from .fuse_attention import ComposePermutes, RewriteAttention
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps
from .meta_schedule_apply_database import MetaScheduleApplyDatabase
from .pass_context import PassContext
from .pipeline import (ChannelsLastForTensorCores, Sequential, bound_inference_passes, channels_last_for_cpu,
                       get_pipeline)
from .rewrite_cuda_graph import RewriteCUDAGraph
from .split_attention import SplitAttention
from .to_mixed_precision import ToMixedPrecision

__all__ = ["AnnotateTIROpPattern", "analyze_op_pattern", "BindParams", "CanonicalizeBindings", "ComposePermutes",
           "ConvertLayout", "DeadCodeElimination", "DecomposeOpsForInference", "FoldBatchnormToConv2D",
           "FoldConstant", "FuseOps", "FuseTIR", "LegalizeOps", "MetaScheduleApplyDatabase", "PassContext",
           "RewriteAttention", "RewriteCUDAGraph", "Sequential", "SplitAttention", "ToMixedPrecision",
           "bound_inference_passes", "channels_last_for_cpu", "get_pipeline", "ChannelsLastForTensorCores"]
