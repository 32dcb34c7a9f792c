"""The layers: PyTorch's names and constructor arguments, TVM's parameter names and ops.

Each layer creates its `Parameter`s in ``__init__`` (so they are numbered in the exported
functions in that order: ``weight`` before ``bias``) and writes ``forward`` with ``nn.op``.
Shapes follow PyTorch's (``Linear``'s weight is [out, in], a convolution's [out, in/groups,
*kernel]), so a PyTorch state dict loads as it is.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from .... import relax, tir
from . import op
from .core import Effect, Module, Parameter, Tensor, make_dim

__all__ = ["IOEffect", "ReLU", "SiLU", "GELU", "Identity", "Dropout", "Linear", "Conv1D", "Conv2D",
           "LayerNorm", "RMSNorm", "GroupNorm", "Embedding"]


class IOEffect(Effect):
    """The effect ``export_tvm(debug=True)`` threads through every method: an opaque object
    (``_io: R.Object``, made by ``R.null_value()`` in ``_initialize_effect``) that orders side
    effects such as printing between calls."""

    def __init__(self) -> None:
        self.effect = None

    def emit_init(self, name_hint: str, builder) -> list:
        null = relax.Call(relax.Op("relax.null_value"), [], {}, [], relax.ObjectStructInfo())
        return [builder.emit(null, f"{name_hint}_io")]

    def create(self, name_hint: str) -> list:
        return [relax.Var(f"{name_hint}_io", relax.ObjectStructInfo())]

    def set_state(self, state_vars: list) -> None:
        (self.effect,) = state_vars

    def finalize(self) -> list:
        result, self.effect = self.effect, None
        return [result]


class ReLU(Module):
    """``max(x, 0)``."""

    def forward(self, x: Tensor) -> Tensor:
        return op.relu(x)


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return op.silu(x)


class GELU(Module):
    """GELU with the exact (erf) formula."""

    def forward(self, x: Tensor) -> Tensor:
        return op.gelu(x)


class Identity(Module):
    """Returns its input: a placeholder that keeps a model's structure (and names)."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Dropout(Module):
    """PyTorch's ``nn.Dropout(p)``. An exported model runs inference, where dropout passes its
    input through unchanged (PyTorch's eval mode), so it emits nothing; ``p`` is kept for
    reference. (TVM's nn frontend has no Dropout; models ported from PyTorch have one.)"""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], not {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return x


class Linear(Module):
    """``y = x @ weight.T + bias``; weight [out_features, in_features]. ``out_dtype`` makes the
    matmul produce that dtype (the bias is then created in it)."""

    def __init__(self, in_features: Union[int, str, tir.PrimExpr], out_features: Union[int, str, tir.PrimExpr],
                 bias: bool = True, dtype: Optional[str] = None, out_dtype: Optional[str] = None) -> None:
        self.in_features = in_features
        self.out_features = out_features
        self.out_dtype = out_dtype
        self.weight = Parameter((out_features, in_features), dtype)
        self.bias = Parameter((out_features,), dtype if out_dtype is None else out_dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        w = op.permute_dims(self.weight)
        x = op.matmul(x, w, out_dtype=self.out_dtype)
        if self.bias is not None:
            x = x + self.bias
        return x

    def to(self, dtype: Optional[str] = None) -> None:
        """The bias keeps ``out_dtype`` when there is one: it is added to the matmul's result."""
        self.weight.to(dtype=dtype)
        if self.bias is not None and self.out_dtype is None:
            self.bias.to(dtype=dtype)


class Conv1D(Module):
    """1-D convolution over [N, C, W]; weight [out, in/groups, kernel_size]."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
                 dtype: Optional[str] = None) -> None:
        _check_groups(in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Parameter((out_channels, in_channels // groups, kernel_size), dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2D(Module):
    """2-D convolution over [N, C, H, W] (or NHWC); weight [out, in/groups, kH, kW]."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, Sequence[int]],
                 stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
                 dtype: Optional[str] = None, data_layout: str = "NCHW") -> None:
        _check_groups(in_channels, out_channels, groups)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.data_layout = data_layout
        self.kernel_size = [kernel_size] * 2 if isinstance(kernel_size, int) else list(kernel_size)
        # A symbolic number of input channels stays symbolic: in_channels // groups.
        in_per_group = in_channels // groups if isinstance(in_channels, int) else tir.FloorDiv(
            "int64", make_dim(in_channels), tir.IntImm("int64", groups))
        self.weight = Parameter([out_channels, in_per_group, *self.kernel_size], dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                         self.data_layout)


def _check_groups(in_channels, out_channels, groups: int) -> None:
    for what, n in (("in_channels", in_channels), ("out_channels", out_channels)):
        if isinstance(n, int) and n % groups:
            raise ValueError(f"{what} ({n}) must be divisible by groups ({groups})")


class LayerNorm(Module):
    """Normalize over the last axis, then ``* weight + bias`` (when ``elementwise_affine``)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 dtype: Optional[str] = None) -> None:
        self.normalized_shape = normalized_shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter((normalized_shape,), dtype) if elementwise_affine else None
        self.bias = Parameter((normalized_shape,), dtype) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return op.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """``x / rms(x over axes) * weight (+ bias)``. TVM's signature: ``axes`` is required and a
    bias is added by default; ``RMSNorm(d, axes=-1, bias=False)`` is the LLaMA layer."""

    def __init__(self, hidden_size: int, axes: Union[int, Sequence[int]], epsilon: float = 1e-5,
                 bias: bool = True, dtype: Optional[str] = None) -> None:
        self.epsilon = epsilon
        self.axes = axes
        self.weight = Parameter((hidden_size,), dtype)
        self.bias = Parameter((hidden_size,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        out = op.rms_norm(x, self.weight, self.axes, self.epsilon)
        if self.bias is not None:
            out = op.add(out, self.bias)
        return out


class GroupNorm(Module):
    """Normalize each of ``num_groups`` channel groups, then scale and shift per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype: Optional[str] = None) -> None:
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.weight = Parameter((num_channels,), dtype) if affine else None
        self.bias = Parameter((num_channels,), dtype) if affine else None

    def forward(self, x: Tensor, channel_axis: int = 1, axes: Optional[Sequence[int]] = None) -> Tensor:
        return op.group_norm(x, self.num_groups, self.weight, self.bias, self.eps, channel_axis, axes)


class Embedding(Module):
    """Rows of ``weight`` [num, dim] picked by integer indices of any rank."""

    def __init__(self, num: Union[int, str, tir.PrimExpr], dim: Union[int, str, tir.PrimExpr],
                 dtype: Optional[str] = None) -> None:
        self.num = num
        self.dim = dim
        self.weight = Parameter((num, dim), dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 1:
            return op.take(self.weight, x, axis=0)
        flat = op.take(self.weight, op.reshape(x, [-1]), axis=0)
        return op.reshape(flat, [*x.shape, self.weight.shape[1]])
