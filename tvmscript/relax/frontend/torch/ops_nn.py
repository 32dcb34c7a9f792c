"""Converters of linear algebra and neural-network layers: linear, matmul, convolutions,
norms, pooling, dropout, embedding, attention (a mixin of `base.BaseTranslator`)."""

from __future__ import annotations

import math

import numpy as np

from .... import relax
from ....ir.op import api as _op


# F.interpolate's modes tvms resizes with: (method, coordinate transformation, rounding) of
# R.image.resize2d; align_corners=True turns bilinear's coordinates to "align_corners".
_RESIZE_MODES = {
    "nearest": ("nearest_neighbor", "asymmetric", "floor"),
    "nearest-exact": ("nearest_neighbor", "half_pixel", "round_prefer_ceil"),
    "bilinear": ("linear", "half_pixel", "round"),
}


def _scale_is_size_ratio(extent, out, scale) -> bool:
    """Whether torch's coordinate step for a scale factor, float32 ``1 / scale``, is the
    size ratio ``in / out`` R.image.resize2d steps by (both in float32)."""
    if not (isinstance(extent, int) and isinstance(out, int)):
        return float(scale).is_integer()
    return out > 0 and np.float32(1.0 / scale) == np.float32(extent) / np.float32(out)


class NNOps:
    """Linear-algebra and layer converters."""

    # ------------------------------------------------------------------ linear algebra
    @staticmethod
    def product_dtype(x) -> str:
        """The ``out_dtype`` of a matmul or convolution of ``x``: its own dtype, as in PyTorch
        (float32 for a float32 model, as TVM's importers write it; a float16 model's products
        are float16, and the ops it feeds, a bias add among them, stay in float16)."""
        return relax.struct_info_of(x).dtype

    def linear(self, x, weight, bias):
        """``x @ weight.T + bias`` as TVM's importers write it."""
        wt = self.emit(_op.permute_dims(weight, axes=None))
        y = self.emit(_op.matmul(x, wt, out_dtype=self.product_dtype(x)))
        if bias is not None:
            y = self.emit(_op.add(y, bias))
        return y

    def _linear(self, node):
        return self.linear(self.arg(node, 0, "input"), self.arg(node, 1, "weight"), self.arg(node, 2, "bias"))

    def _matmul(self, node):
        a = self.arg(node, 0, "input")
        b = self.arg(node, 1, "other")
        return self.emit(_op.matmul(a, b, out_dtype=self.product_dtype(a)))

    def _addmm(self, node):
        bias = self.arg(node, 0, "input")
        a = self.arg(node, 1, "mat1")
        b = self.arg(node, 2, "mat2")
        beta = self.arg(node, 3, "beta", 1)
        alpha = self.arg(node, 4, "alpha", 1)
        y = self.emit(_op.matmul(a, b, out_dtype=self.product_dtype(a)))
        dtype = self.dtype_of(y)
        if alpha != 1:
            y = self.emit(_op.multiply(y, self.const(alpha, dtype)))
        if beta == 0:
            return y
        if beta != 1:
            bias = self.emit(_op.multiply(bias, self.const(beta, dtype)))
        return self.emit(_op.add(bias, y))

    # ------------------------------------------------------------------ nn
    def conv(self, node, x, weight, bias, stride, padding, dilation, groups):
        """``R.nn.conv1d``/``conv2d`` (then the bias, reshaped to broadcast over channels)."""
        nd = self.ndim(weight) - 2
        if nd not in (1, 2):
            raise self.unsupported(node, f"a {nd}-d convolution")
        kernel = self.shape_of(weight)[2:]
        stride = self.int_list(stride, nd)
        dilation = self.int_list(dilation, nd)
        if isinstance(padding, str):
            padding = self._string_padding(node, padding, kernel, stride, dilation)
        else:
            padding = self.int_list(padding, nd)
            padding = padding + padding
        fn = self.require_op(node, f"nn.conv{nd}d")
        layouts = ({"data_layout": "NCW", "kernel_layout": "OIW"} if nd == 1
                   else {"data_layout": "NCHW", "kernel_layout": "OIHW"})
        y = self.emit(fn(x, weight, strides=stride, padding=padding, dilation=dilation, groups=groups,
                         out_dtype=self.product_dtype(x), **layouts))
        if bias is None:
            return y
        shape = [1, self.shape_of(bias)[0]] + [1] * nd
        b = self.emit(_op.reshape(bias, shape))
        return self.emit(_op.add(y, b))

    def _string_padding(self, node, padding: str, kernel, stride, dilation) -> list:
        if padding == "valid":
            return [0] * (2 * len(kernel))
        if padding == "same" and all(s == 1 for s in stride):
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return [t // 2 for t in total] + [t - t // 2 for t in total]
        raise self.unsupported(node, f"padding={padding!r} with strides {stride}")

    def _conv(self, node):
        x = self.arg(node, 0, "input")
        weight = self.arg(node, 1, "weight")
        bias = self.arg(node, 2, "bias")
        stride = self.arg(node, 3, "stride", 1)
        padding = self.arg(node, 4, "padding", 0)
        dilation = self.arg(node, 5, "dilation", 1)
        groups = self.arg(node, 6, "groups", 1)
        return self.conv(node, x, weight, bias, stride, padding, dilation, groups)

    def _convolution(self, node):
        # aten.convolution(input, weight, bias, stride, padding, dilation, transposed,
        #                  output_padding, groups)
        if self.arg(node, 6, "transposed", False):
            raise self.unsupported(node, "transposed convolution")
        return self.conv(node, self.arg(node, 0, "input"), self.arg(node, 1, "weight"),
                         self.arg(node, 2, "bias"), self.arg(node, 3, "stride", 1),
                         self.arg(node, 4, "padding", 0), self.arg(node, 5, "dilation", 1),
                         self.arg(node, 8, "groups", 1))

    def batch_norm(self, x, weight, bias, mean, var, eps: float, momentum: float = 0.1):
        """Inference batch norm with the running statistics: ``R.nn.batch_norm`` (training
        off) and its first field."""
        channels = self.shape_of(x)[1]
        dtype = self.dtype_of(x)
        if weight is None:
            weight = self.const(np.ones([channels]), dtype)
        if bias is None:
            bias = self.const(np.zeros([channels]), dtype)
        bn = self.emit(_op.nn.batch_norm(x, weight, bias, mean, var, axis=1, epsilon=eps,
                                         momentum=momentum, training=False))
        return self.emit(relax.TupleGetItem(bn, 0))

    def _batch_norm(self, node):
        # aten.batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
        #                 eps, cudnn_enabled); F.batch_norm has the same order.
        training = self.arg(node, 5, "training", False)
        mean = self.arg(node, 3, "running_mean")
        if training or mean is None:
            raise self.unsupported(node, "batch norm with batch statistics (training mode)")
        return self.batch_norm(self.arg(node, 0, "input"), self.arg(node, 1, "weight"),
                               self.arg(node, 2, "bias"), mean, self.arg(node, 4, "running_var"),
                               float(self.arg(node, 7, "eps", 1e-5)), float(self.arg(node, 6, "momentum", 0.1)))

    def _native_batch_norm_no_training(self, node):
        # aten._native_batch_norm_legit_no_training(input, weight, bias, running_mean,
        #     running_var, momentum, eps) -> (out, save_mean, save_rstd); only out is used.
        out = self.batch_norm(self.arg(node, 0, "input"), self.arg(node, 1, "weight"),
                              self.arg(node, 2, "bias"), self.arg(node, 3, "running_mean"),
                              self.arg(node, 4, "running_var"), float(self.arg(node, 6, "eps", 1e-5)),
                              float(self.arg(node, 5, "momentum", 0.1)))
        return (out, None, None)

    def layer_norm(self, x, normalized_shape, weight, bias, eps: float):
        axes = list(range(-len(normalized_shape), 0))
        dtype = self.dtype_of(x)
        if weight is None:
            weight = self.const(np.ones(normalized_shape), dtype)
        if bias is None:
            bias = self.const(np.zeros(normalized_shape), dtype)
        return self.emit(_op.nn.layer_norm(x, weight, bias, axes=axes, epsilon=eps))

    def _layer_norm(self, node):
        shape = self.int_list(self.arg(node, 1, "normalized_shape"))
        return self.layer_norm(self.arg(node, 0, "input"), shape, self.arg(node, 2, "weight"),
                               self.arg(node, 3, "bias"), float(self.arg(node, 4, "eps", 1e-5)))

    def _native_layer_norm(self, node):
        out = self._layer_norm(node)
        return (out, None, None)

    def group_norm(self, node, x, groups: int, weight, bias, eps: float):
        channels = self.shape_of(x)[1]
        dtype = self.dtype_of(x)
        if weight is None:
            weight = self.const(np.ones([channels]), dtype)
        if bias is None:
            bias = self.const(np.zeros([channels]), dtype)
        fn = self.require_op(node, "nn.group_norm")
        return self.emit(fn(x, weight, bias, num_groups=groups, channel_axis=1,
                            axes=list(range(2, self.ndim(x))), epsilon=eps))

    def _group_norm(self, node):
        return self.group_norm(node, self.arg(node, 0, "input"), self.arg(node, 1, "num_groups"),
                               self.arg(node, 2, "weight"), self.arg(node, 3, "bias"),
                               float(self.arg(node, 4, "eps", 1e-5)))

    def rms_norm(self, node, x, normalized_shape, weight, eps):
        dtype = self.dtype_of(x)
        if weight is None:
            weight = self.const(np.ones(normalized_shape), dtype)
        if eps is None:  # torch's default: the machine epsilon of the input's dtype
            import torch

            eps = float(torch.finfo(getattr(torch, dtype)).eps)
        fn = self.require_op(node, "nn.rms_norm")
        return self.emit(fn(x, weight, axes=list(range(-len(normalized_shape), 0)), epsilon=eps))

    def _rms_norm(self, node):
        shape = self.int_list(self.arg(node, 1, "normalized_shape"))
        return self.rms_norm(node, self.arg(node, 0, "input"), shape, self.arg(node, 2, "weight"),
                             self.arg(node, 3, "eps"))

    def pool2d(self, node, fn, x, kernel, stride, padding, dilation, ceil_mode, count_include_pad=False):
        kernel = self.int_list(kernel, 2)
        stride = self.int_list(stride, 2) if stride not in (None, [], ()) else kernel
        padding = self.int_list(padding, 2)
        dilation = self.int_list(dilation, 2)
        if self.ndim(x) != 4:
            raise self.unsupported(node, f"a {self.ndim(x)}-d input (only NCHW batches)")
        return self.emit(fn(x, pool_size=kernel, strides=stride, dilation=dilation,
                            padding=padding + padding, ceil_mode=bool(ceil_mode),
                            count_include_pad=bool(count_include_pad), layout="NCHW", out_layout="NCHW"))

    def _max_pool2d(self, node):
        return self.pool2d(node, _op.nn.max_pool2d, self.arg(node, 0, "input"), self.arg(node, 1, "kernel_size"),
                           self.arg(node, 2, "stride"), self.arg(node, 3, "padding", 0),
                           self.arg(node, 4, "dilation", 1), self.arg(node, 5, "ceil_mode", False))

    def _max_pool2d_with_indices(self, node):
        """The decomposed form's max pool; its indices (for a backward pass) are not made."""
        return (self._max_pool2d(node), None)

    def _avg_pool2d(self, node):
        if self.arg(node, 6, "divisor_override") is not None:
            raise self.unsupported(node, "divisor_override")
        return self.pool2d(node, _op.nn.avg_pool2d, self.arg(node, 0, "input"), self.arg(node, 1, "kernel_size"),
                           self.arg(node, 2, "stride"), self.arg(node, 3, "padding", 0), 1,
                           self.arg(node, 4, "ceil_mode", False), self.arg(node, 5, "count_include_pad", True))

    def adaptive_avg_pool2d(self, x, output_size):
        size = self.int_list(output_size, 2)
        size = [self.shape_of(x)[2 + i] if s is None else s for i, s in enumerate(size)]
        return self.emit(_op.nn.adaptive_avg_pool2d(x, output_size=size, layout="NCHW", out_layout="NCHW"))

    def _adaptive_avg_pool2d(self, node):
        return self.adaptive_avg_pool2d(self.arg(node, 0, "input"), self.arg(node, 1, "output_size"))

    # ------------------------------------------------------------------ resizing
    def _upsample_nearest2d(self, node):
        # aten.upsample_nearest2d.vec(input, output_size, scale_factors) or
        # .default(input, output_size, scales_h, scales_w)
        return self.upsample(node, "nearest", None, 2)

    def _upsample_nearest_exact2d(self, node):
        return self.upsample(node, "nearest-exact", None, 2)

    def _upsample_bilinear2d(self, node):
        # aten.upsample_bilinear2d.vec(input, output_size, align_corners, scale_factors) or
        # .default(input, output_size, align_corners, scales_h, scales_w)
        return self.upsample(node, "bilinear", bool(self.arg(node, 2, "align_corners", False)), 3)

    def upsample(self, node, mode: str, align_corners, scales_at: int):
        """An ATen upsample op: its size, or its scale factors (a list in the ``.vec``
        overloads, ``scales_h``/``scales_w`` in ``.default``), as `resize`. torch.export records
        the output's shape on the node, so a size computed from scale factors is torch's own."""
        x = self.arg(node, 0, "input")
        size = self.arg(node, 1, "output_size")
        scales = self.arg(node, scales_at, "scale_factors")
        if not isinstance(scales, (list, tuple)):  # .default: scales_h, scales_w
            scales = [self.arg(node, scales_at, "scales_h"), self.arg(node, scales_at + 1, "scales_w")]
            scales = None if scales == [None, None] else scales  # None: the axis' size ratio
        if size is None and scales is not None:
            size = [self.node_dim(node, 2), self.node_dim(node, 3)]
            size = None if None in size else size
        return self.resize(node, x, size, scales, mode, align_corners)

    def _interpolate(self, node):
        """``F.interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor,
        antialias)`` in an fx graph."""
        mode = self.arg(node, 3, "mode", "nearest")
        if self.arg(node, 6, "antialias", False):
            raise self.unsupported(node, "antialias=True")
        return self.interpolate(node, self.arg(node, 0, "input"), self.arg(node, 1, "size"),
                                self.arg(node, 2, "scale_factor"), mode, self.arg(node, 4, "align_corners"),
                                self.arg(node, 5, "recompute_scale_factor"))

    def interpolate(self, node, x, size, scale_factor, mode: str, align_corners, recompute_scale_factor):
        """F.interpolate's and nn.Upsample's arguments as `resize` takes them (a scale factor
        whose size is recomputed only gives the size)."""
        if mode not in _RESIZE_MODES:
            raise self.unsupported(node, f"mode={mode!r} (tvms resizes with {', '.join(sorted(_RESIZE_MODES))})")
        scales = None if scale_factor is None else self.int_list(scale_factor, 2)
        if size is not None:
            size, scales = self.int_list(size, 2), None
        elif recompute_scale_factor:
            size, scales = self.scaled_size(node, x, scales), None
        return self.resize(node, x, size, scales, mode, bool(align_corners) if mode == "bilinear" else None)

    def scaled_size(self, node, x, scales) -> list:
        """The output size torch computes from scale factors: ``floor(in * scale)``."""
        out = []
        for extent, scale in zip(self.shape_of(x)[2:], scales):
            if isinstance(extent, int):
                out.append(math.floor(extent * scale))
            elif float(scale).is_integer():
                out.append(extent * int(scale))
            else:
                raise self.unsupported(node, f"scale factor {scale} of a symbolic size")
        return out

    def resize(self, node, x, size, scales, mode: str, align_corners):
        """Resize the H and W axes of an NCHW tensor as PyTorch does, with ``R.image.resize2d``:
        "nearest" floors the asymmetric coordinate ``out * in / out_size``, "nearest-exact" rounds
        the half-pixel one half up, "bilinear" blends at half-pixel coordinates or, with
        ``align_corners``, at ``out * (in - 1) / (out_size - 1)``.

        Given scale factors, torch maps coordinates by ``1 / scale`` rather than
        ``in / out_size``; the two differ where ``in * scale`` is not whole (a scale of 1.7 on
        4 rows gives 6 rows, read at 1 / 1.7 apart, not 4 / 6). Then each axis is resized by
        gathering its source rows at the coordinates torch computes (`resize_axis_as_torch`)."""
        if self.ndim(x) != 4:
            raise self.unsupported(node, f"resizing a {self.ndim(x)}-d tensor (only NCHW images)")
        if size is None:
            size = self.scaled_size(node, x, scales)
        in_hw = self.shape_of(x)[2:]
        own_scales = scales is not None and not align_corners and any(
            s is not None and not _scale_is_size_ratio(i, o, s) for i, o, s in zip(in_hw, size, scales))
        if not own_scales:
            method, coords, rounding = _RESIZE_MODES[mode]
            if align_corners:
                coords = "align_corners"
            return self.emit(_op.image.resize2d(x, list(size), layout="NCHW", method=method,
                                                coordinate_transformation_mode=coords, rounding_method=rounding))
        for axis, (extent, out, scale) in enumerate(zip(in_hw, size, scales), 2):
            x = self.resize_axis_as_torch(node, x, axis, extent, out, scale, mode)
        return x

    def resize_axis_as_torch(self, node, x, axis: int, extent, out, scale: float, mode: str):
        """Axis ``axis`` of ``x`` resized from ``extent`` to ``out`` rows with torch's source
        coordinates for ``scale`` (None: the size ratio), in its float32 arithmetic: a take of
        the nearest rows, or two takes blended by the rows' constant weights."""
        if not (isinstance(extent, int) and isinstance(out, int)):
            raise self.unsupported(node, f"scale factor {scale} of a symbolic size")
        step = np.float32(extent) / np.float32(out) if scale is None else np.float32(1.0 / scale)
        dst = np.arange(out, dtype=np.float32)
        if mode != "bilinear":
            src = dst * step if mode == "nearest" else (dst + np.float32(0.5)) * step
            rows = np.minimum(np.floor(src).astype("int64"), extent - 1)
            return self.emit(_op.take(x, self.const(rows, "int64"), axis=axis))
        src = np.maximum((dst + np.float32(0.5)) * step - np.float32(0.5), np.float32(0))
        low = np.minimum(src.astype("int64"), extent - 1)
        high = np.minimum(low + 1, extent - 1)
        weight = np.clip(src - low, 0, 1).astype(np.float32)
        dtype = self.dtype_of(x)
        weight = weight.reshape([out] + [1] * (3 - axis))
        a = self.emit(_op.take(x, self.const(low, "int64"), axis=axis))
        b = self.emit(_op.take(x, self.const(high, "int64"), axis=axis))
        diff = self.emit(_op.subtract(b, a))
        return self.emit(_op.add(a, self.emit(_op.multiply(diff, self.const(weight, dtype)))))

    def _dropout(self, node):
        """Inference: dropout is the identity. ``aten.dropout(x, p, train)`` records whether
        the model was training; ``F.dropout`` drops by default, so a call that would drop
        elements (training, p > 0) has no deterministic translation."""
        p = self.arg(node, 1, "p", 0.5)
        training = node.kwargs.get("training", node.kwargs.get("train"))
        if training is None:
            training = self.retrieve(node.args[2]) if len(node.args) > 2 else True
        if training and p:
            raise self.unsupported(node, "dropout in training mode")
        return self.arg(node, 0, "input")

    def _native_dropout(self, node):
        if self.arg(node, 2, "train", False):
            raise self.unsupported(node, "dropout in training mode")
        x = self.arg(node, 0, "input")
        return (x, None)

    def _embedding(self, node):
        weight = self.arg(node, 0, "weight")
        indices = self.arg(node, 1, "indices")
        return self.embedding(weight, indices)

    def embedding(self, weight, indices):
        return self.emit(_op.take(weight, indices, axis=0))

    def _scaled_dot_product_attention(self, node):
        """``R.nn.attention`` takes BSNH tensors (batch, sequence, heads, head dim) where
        PyTorch's are BNSH, so the inputs and the output are transposed around it."""
        q = self.arg(node, 0, "query")
        k = self.arg(node, 1, "key")
        v = self.arg(node, 2, "value")
        mask = self.arg(node, 3, "attn_mask")
        dropout = self.arg(node, 4, "dropout_p", 0.0)
        causal = self.arg(node, 5, "is_causal", False)
        scale = node.kwargs.get("scale")
        if dropout not in (0, 0.0):
            raise self.unsupported(node, f"dropout_p={dropout}")
        if node.kwargs.get("enable_gqa"):
            raise self.unsupported(node, "enable_gqa=True")
        if self.ndim(q) != 4:
            raise self.unsupported(node, f"{self.ndim(q)}-d queries (only 4-d BNSH)")
        attention = self.require_op(node, "nn.attention")
        if mask is not None and causal:
            raise self.unsupported(node, "both attn_mask and is_causal")
        if mask is not None and self.dtype_of(mask) == "bool":
            # A boolean mask keeps the positions where it is True: an additive 0 / -inf bias.
            dtype = self.dtype_of(q)
            mask = self.emit(_op.where(mask, self.const(0.0, dtype), self.const(-math.inf, dtype)))
        qt, kt, vt = (self.emit(_op.permute_dims(t, axes=[0, 2, 1, 3])) for t in (q, k, v))
        kwargs = {"scale": scale}
        if causal:
            kwargs["causal_mask"] = "TopLeft"
        if mask is not None:
            mask = self._broadcast_attention_bias(mask, q, k)
        out = self.emit(attention(qt, kt, vt, mask, **kwargs))
        return self.emit(_op.permute_dims(out, axes=[0, 2, 1, 3]))

    def _broadcast_attention_bias(self, mask, q, k):
        """R.nn.attention's bias is (batch, heads, seq_q, seq_k); torch broadcasts it."""
        b, n, sq, _ = self.shape_of(q)
        sk = self.shape_of(k)[2]
        target = [b, n, sq, sk]
        if self.shape_of(mask) == target:
            return mask
        return self.emit(_op.broadcast_to(mask, target))

