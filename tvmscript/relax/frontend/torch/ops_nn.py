"""Converters of linear algebra and neural-network layers: linear, matmul, convolutions,
norms, pooling, dropout, embedding, attention (a mixin of `base.BaseTranslator`)."""

from __future__ import annotations

import math

import numpy as np

from .... import relax
from ....compiler.op import api as _op


class NNOps:
    """Linear-algebra and layer converters."""

    # ------------------------------------------------------------------ linear algebra
    def linear(self, x, weight, bias):
        """``x @ weight.T + bias`` as TVM's importers write it."""
        wt = self.emit(_op.permute_dims(weight, axes=None))
        y = self.emit(_op.matmul(x, wt, out_dtype="float32"))
        if bias is not None:
            y = self.emit(_op.add(y, bias))
        return y

    def _linear(self, node):
        return self.linear(self.arg(node, 0, "input"), self.arg(node, 1, "weight"), self.arg(node, 2, "bias"))

    def _matmul(self, node):
        a = self.arg(node, 0, "input")
        b = self.arg(node, 1, "other")
        return self.emit(_op.matmul(a, b, out_dtype="float32"))

    def _addmm(self, node):
        bias = self.arg(node, 0, "input")
        a = self.arg(node, 1, "mat1")
        b = self.arg(node, 2, "mat2")
        beta = self.arg(node, 3, "beta", 1)
        alpha = self.arg(node, 4, "alpha", 1)
        y = self.emit(_op.matmul(a, b, out_dtype="float32"))
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
                         out_dtype="float32", **layouts))
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
            weight = self.const(np.ones([channels], dtype), dtype)
        if bias is None:
            bias = self.const(np.zeros([channels], dtype), dtype)
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
            weight = self.const(np.ones(normalized_shape, dtype), dtype)
        if bias is None:
            bias = self.const(np.zeros(normalized_shape, dtype), dtype)
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
            weight = self.const(np.ones([channels], dtype), dtype)
        if bias is None:
            bias = self.const(np.zeros([channels], dtype), dtype)
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
            weight = self.const(np.ones(normalized_shape, dtype), dtype)
        if eps is None:
            eps = float(np.finfo(dtype).eps)
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

