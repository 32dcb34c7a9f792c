"""Each op's mixed-precision policy, TVM's ``TMixedPrecisionPolicy`` attribute: how
``relax.transform.ToMixedPrecision`` treats a call of the op. All the policies are in this
one table.

- ``ALWAYS``: the op is worth running in half precision (TVM's ``kAlways``: the tensor-core
  products). Its float operands are cast to the half dtype and it accumulates in the pass's
  ``out_dtype``. Every op here has an ``out_dtype`` attribute.
- ``FOLLOW``: the op computes in the dtype its inputs arrive in (TVM's ``kFollow``). It runs in
  half when all its float operands are half (a float32 constant counts when its values fit),
  and in float32 otherwise.
- ``NEVER``: the op keeps float32 (TVM's ``kNever``). A half operand is cast back up. This is
  the default for an op the table does not name, as in TVM.

Why a table and not an `OpDef` field: the policy matters to one pass only. One list is easier
to check against TVM's registrations than a keyword spread over a dozen declaration files.
`tests/compiler/test_to_mixed_precision.py` checks that every name here is a registered op.

Where tvms differs from TVM's registrations, on purpose:

- ``nn.layer_norm``, ``nn.group_norm`` and ``nn.rms_norm`` are ``FOLLOW`` in TVM, whose kernels
  sum a float16 input's statistics in float32. tvms's kernels (``compiler/topi/nn/norm.py``)
  sum in the data's own dtype. A float16 sum of squares over a 768-wide row overflows once
  the values pass about 9, so these ops are ``NEVER`` here.
- ``nn.attention`` and ``nn.attention_bias`` are ``ALWAYS`` in TVM, which runs them in the half
  dtype throughout (there is no ``out_dtype`` to set). tvms's attention kernel sums the scores
  and the softmax in its input dtype, so it stays ``NEVER``.
- ``nn.dense`` (older Relax, gone from TVM) is ``ALWAYS``, like ``matmul``.
- Ops that only move or select values round nothing in half, so they are ``FOLLOW`` here
  (TVM leaves them ``kNever``): ``take``, ``gather_elements``, ``gather_nd``, ``flip``,
  ``tile``, ``repeat``, ``nn.pad``, ``where``, ``clip``. The piecewise-linear ``nn.leakyrelu``
  and ``nn.prelu`` are ``FOLLOW`` as well.
"""

from __future__ import annotations

ALWAYS = "always"
FOLLOW = "follow"
NEVER = "never"

_ALWAYS_OPS = (
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose", "nn.conv2d_transpose", "nn.conv3d_transpose",
    "matmul", "nn.dense",
)

_FOLLOW_OPS = (
    # unary elementwise (TVM's RELAX_REGISTER_UNARY_OP) and the activations
    "abs", "ceil", "cos", "erf", "exp", "floor", "log", "negative", "round", "rsqrt", "sigmoid", "sign", "sin",
    "sqrt", "square", "tanh", "trunc", "logical_not", "isfinite", "isinf", "isnan",
    "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu",
    # binary broadcasting ops, comparisons, logical ops
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "atan2", "maximum", "minimum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "ewise_fma",
    # layout and shape
    "reshape", "permute_dims", "expand_dims", "squeeze", "flatten", "concat", "split", "broadcast_to",
    "layout_transform", "strided_slice", "dynamic_strided_slice", "nn.batch_flatten", "nn.dropout",
    # pooling and resampling
    "nn.max_pool1d", "nn.max_pool2d", "nn.avg_pool1d", "nn.avg_pool2d", "nn.adaptive_avg_pool2d",
    "image.resize2d", "image.resize3d", "image.affine_grid", "vision.roi_align", "vision.roi_pool",
    # creation and casts
    "full", "full_like", "ones", "zeros", "arange", "astype",
    # tvms: what only moves or selects values, and the piecewise-linear activations (see above)
    "take", "gather_elements", "gather_nd", "flip", "tile", "repeat", "nn.pad", "where", "clip",
    "nn.leakyrelu", "nn.prelu",
)

MIXED_PRECISION_POLICY: dict[str, str] = {
    **{"relax." + name: ALWAYS for name in _ALWAYS_OPS},
    **{"relax." + name: FOLLOW for name in _FOLLOW_OPS},
}


def mixed_precision_policy(op_name: str) -> str:
    """The policy of the op ``relax.<name>``: `ALWAYS`, `FOLLOW`, or `NEVER` when the table
    does not name it."""
    return MIXED_PRECISION_POLICY.get(op_name, NEVER)
