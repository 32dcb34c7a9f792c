"""Neural-network operators (TVM's ``topi.nn``): softmax and normalization (`norm`), padding
and convolution (`conv`), pooling (`pool`), dense products and attention (`dense`), losses
(`loss`), and the layout conversions around them (`layout`). This package is the namespace
``topi.nn.*`` that legalizations and users call, as TVM's.

Stage (block) and loop names follow TVM's TOPI so legalized modules read like TVM's. Convolution
and pooling in other layouts (``NHWC``, ``HWIO`` kernels, packed ``NCHW16c``) bring their
operands to the canonical order with `to_primal` (``T_layout_trans``), compute there, and write
the result in the output layout with `from_primal`. Where TVM's own TE is an elaborate
composition (adaptive pooling's variable-extent loops,
avg-pool's divisor, attention's transposes and reshapes to 3-D batch matmuls, group norm's
reshapes) the stages here are fewer but compute the same values. The shapes they compute with
(window extents, layouts) are `tvmscript.ir.op.nn_shapes`, shared with the ops' inference.
"""

from .conv import (conv1d, conv1d_ncw, conv1d_transpose, conv2d, conv2d_nchw, conv2d_nhwc, conv2d_transpose, conv3d,
                   conv3d_transpose, conv_transpose, edge_pad, group_conv1d_ncw, group_conv2d_nchw, pad, reflect_pad)
from .dense import attention, dense, dropout
from .layout import from_primal, in_layouts, to_primal
from .loss import batch_flatten, cross_entropy_with_logits, nll_loss
from .norm import batch_norm, group_norm, layer_norm, log_softmax, rms_norm, softmax
from .pool import adaptive_pool2d, avg_pool_divisor, pool, pool1d, pool2d

__all__ = [
    "softmax", "log_softmax", "layer_norm", "batch_norm", "rms_norm", "group_norm", "pad", "reflect_pad", "edge_pad",
    "conv1d", "conv1d_ncw", "group_conv1d_ncw", "conv2d", "conv2d_nchw", "conv2d_nhwc", "group_conv2d_nchw", "conv3d",
    "conv_transpose", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose", "pool", "pool1d", "pool2d",
    "adaptive_pool2d", "avg_pool_divisor", "dropout", "dense", "attention", "nll_loss", "cross_entropy_with_logits",
    "batch_flatten", "to_primal", "from_primal", "in_layouts",
]
