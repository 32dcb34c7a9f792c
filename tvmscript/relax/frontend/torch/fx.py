"""``from_fx``: a ``torch.fx.GraphModule`` into a Relax IRModule.

``torch.fx.symbolic_trace`` records a model as calls of its submodules (``call_module``:
``nn.Linear``, ``nn.Conv2d``...), of functions (``call_function``: ``torch.flatten``,
``F.relu``, ``operator.add``) and of tensor methods (``call_method``: ``x.view(...)``). The
graph carries no shapes, so the caller gives each input's shape and dtype
(``input_info = [((1, 784), "float32")]``; a dim may be a name or a ``tir.Var`` to make it
symbolic); the struct info Relax infers carries them through.

Inputs are named ``inp_0``, ``inp_1``, ...; with ``keep_params_as_input`` the parameters
follow them sorted by name (``fc1.bias`` as ``fc1_bias``), as TVM's importer orders them.
"""

from __future__ import annotations

import builtins
import collections


from .... import relax, tir
from ....ir.op import api as _op
from ..common import FrontendError, ProgressCallback
from .base import BaseTranslator, common_converters
from .graph import attach_params, convert_dtype, emit_outputs, tensor_to_numpy, valid_name


# What torch.max(x, dim) returns: ``.values``/``.indices`` or ``[0]``/``[1]``.
ValuesIndices = collections.namedtuple("ValuesIndices", ["values", "indices"])


class FXImporter(BaseTranslator):
    """Converts one traced GraphModule; see `from_fx`."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model
        self.modules = dict(model.named_modules())
        self.params: dict[int, relax.Expr] = {}  # id(parameter) -> its Var or Constant
        self.functions = common_converters(self)
        self.functions.update({
            "getattr": self._getattr, "max": self._max, "min": self._min, "neg": self.functions["neg"],
            "iadd": self.functions["add"], "isub": self.functions["sub"], "imul": self.functions["mul"],
            "itruediv": self.functions["div"], "dim": self._dim, "numel": self._numel,
        })
        self.methods = dict(self.functions)
        self.methods.update({
            "float": self.cast_method("float32"), "half": self.cast_method("float16"),
            "double": self.cast_method("float64"), "int": self.cast_method("int32"),
            "long": self.cast_method("int64"), "bool": self.cast_method("bool"),
            "type": self._to,
        })
        self.module_converters = _module_converters(self)

    # ------------------------------------------------------------------ ops
    def converter_for(self, node):
        if node.op == "call_module":
            module = self.modules.get(node.target)
            return self.module_converters.get(type(module).__name__)
        if node.op == "call_method":
            return self.methods.get(node.target)
        name = getattr(node.target, "__name__", None)
        if name is None:
            return None
        return self.functions.get(name)

    def op_name(self, node) -> str:
        if node.op == "call_module":
            module = self.modules.get(node.target)
            return f"{type(module).__module__}.{type(module).__name__}"
        if node.op == "call_method":
            return f"Tensor.{node.target}"
        target = node.target
        return f"{getattr(target, '__module__', None) or 'builtins'}.{getattr(target, '__name__', target)}"

    def _getattr(self, node):
        value = self.arg(node, 0, "input")
        attr = node.args[1]
        if isinstance(value, relax.Expr):
            if attr == "shape":
                return tuple(self.shape_of(value))
            if attr == "ndim":
                return self.ndim(value)
            if attr == "dtype":
                import torch

                return getattr(torch, self.dtype_of(value))
            raise self.unsupported(node, f"the tensor attribute {attr!r}")
        return getattr(value, attr)

    def _max(self, node):
        return self._max_min(node, _op.max, _op.argmax, _op.maximum)

    def _min(self, node):
        return self._max_min(node, _op.min, _op.argmin, _op.minimum)

    def _max_min(self, node, reduce_fn, arg_fn, binary_fn):
        """``torch.max(x)``, ``torch.max(x, dim)`` (values and indices) or ``torch.max(x, y)``."""
        x = self.arg(node, 0, "input")
        other = self.arg(node, 1, "dim", node.kwargs.get("other"))
        if isinstance(other, relax.Expr):
            return self.binary_values(binary_fn, max, x, other)
        if not isinstance(x, relax.Expr):
            return builtins.max(x, other) if reduce_fn is _op.max else builtins.min(x, other)
        if other is None:
            return self.emit(reduce_fn(x))
        keepdim = bool(self.arg(node, 2, "keepdim", False))
        return ValuesIndices(self.emit(reduce_fn(x, axis=[other], keepdims=keepdim)),
                             self.emit(arg_fn(x, axis=other, keepdims=keepdim)))

    def _dim(self, node):
        return self.ndim(self.arg(node, 0, "input"))

    def _numel(self, node):
        n = 1
        for d in self.shape_of(self.arg(node, 0, "input")):
            n = n * d
        return n

    # ------------------------------------------------------------------ parameters
    def param(self, tensor):
        """The Relax value of a module's parameter or buffer (None for None)."""
        if tensor is None:
            return None
        value = self.params.get(id(tensor))
        if value is None:
            value = self.params[id(tensor)] = _op.const(tensor_to_numpy(tensor))
        return value

    def get_attr(self, node):
        value = self.model
        for part in node.target.split("."):
            value = getattr(value, part)
        import torch

        if isinstance(value, torch.Tensor):
            return self.param(value)
        return value

    # ------------------------------------------------------------------ the graph
    def input_vars(self, input_info) -> list:
        sym: dict[str, tir.Var] = {}
        out = []
        for i, entry in enumerate(input_info):
            try:
                shape, dtype = entry
            except (TypeError, ValueError):
                raise FrontendError(f"input_info[{i}] must be a (shape, dtype) pair, not {entry!r}") from None
            dims = []
            for d in shape:
                if isinstance(d, str):
                    d = sym.setdefault(d, tir.Var("int64", d))
                elif isinstance(d, tir.Var):
                    sym.setdefault(d.name, d)
                dims.append(d)
            out.append(relax.Var(f"inp_{i}", relax.TensorStructInfo(_op._dims(dims), convert_dtype(dtype))))
        return out

    def import_graph(self, input_info, keep_params_as_input: bool, unwrap_unit_return_tuple: bool,
                     no_bind_return_tuple: bool, progress: ProgressCallback):
        graph = self.model.graph
        nodes = list(graph.nodes)
        self.check_supported(nodes)
        inputs = self.input_vars(input_info)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise FrontendError(f"the graph has {len(placeholders)} inputs but input_info describes {len(inputs)}")
        params, arrays = [], []
        if keep_params_as_input:
            for name, p in sorted(self.model.named_parameters(), key=lambda kv: kv[0]):
                var = relax.Var(valid_name(name), relax.TensorStructInfo(list(p.shape), convert_dtype(p.dtype)))
                var.struct_info = _op.canonical_sinfo(var.struct_info)
                self.params[id(p)] = var
                params.append(var)
                arrays.append(tensor_to_numpy(p))
        for node, var in zip(placeholders, inputs):
            self.env[node] = var
        attrs = {"num_input": len(inputs)} if keep_params_as_input else None
        with self.bb.function("main", params=inputs + params, attrs=attrs):
            with self.bb.dataflow():
                result = self.convert_nodes(nodes, progress)
                if isinstance(result, (list, tuple)):
                    output = emit_outputs(self.bb, list(result), unwrap_unit_return_tuple, no_bind_return_tuple)
                else:
                    output = emit_outputs(self.bb, [result], True, False)
            self.bb.emit_func_output(output)
        mod = self.bb.get()
        if keep_params_as_input:
            attach_params(mod, arrays)
        return mod


# ----------------------------------------------------------------------------- nn.Modules


def _module_converters(t: FXImporter) -> dict:
    """Converters of ``call_module`` nodes, keyed by the module's class name."""
    def module_of(node):
        return t.modules[node.target]

    def first(node):
        return t.retrieve(node.args[0])

    def linear(node):
        m = module_of(node)
        return t.linear(first(node), t.param(m.weight), t.param(m.bias))

    def conv(node):
        m = module_of(node)
        if m.padding_mode != "zeros":
            raise t.unsupported(node, f"padding_mode={m.padding_mode!r}")
        return t.conv(node, first(node), t.param(m.weight), t.param(m.bias), list(m.stride),
                      m.padding if isinstance(m.padding, str) else list(m.padding), list(m.dilation), m.groups)

    def batch_norm(node):
        m = module_of(node)
        if m.training or not m.track_running_stats:
            raise t.unsupported(node, "batch norm with batch statistics (training mode)")
        return t.batch_norm(first(node), t.param(m.weight), t.param(m.bias), t.param(m.running_mean),
                            t.param(m.running_var), float(m.eps), float(m.momentum or 0.1))

    def layer_norm(node):
        m = module_of(node)
        return t.layer_norm(first(node), list(m.normalized_shape), t.param(m.weight), t.param(m.bias), float(m.eps))

    def group_norm(node):
        m = module_of(node)
        return t.group_norm(node, first(node), m.num_groups, t.param(m.weight), t.param(m.bias), float(m.eps))

    def rms_norm(node):
        m = module_of(node)
        return t.rms_norm(node, first(node), list(m.normalized_shape), t.param(m.weight), m.eps)

    def embedding(node):
        m = module_of(node)
        return t.embedding(t.param(m.weight), first(node))

    def max_pool(node):
        m = module_of(node)
        if m.return_indices:
            raise t.unsupported(node, "return_indices=True")
        return t.pool2d(node, _op.nn.max_pool2d, first(node), m.kernel_size, m.stride, m.padding,
                        m.dilation, m.ceil_mode)

    def avg_pool(node):
        m = module_of(node)
        if m.divisor_override is not None:
            raise t.unsupported(node, "divisor_override")
        return t.pool2d(node, _op.nn.avg_pool2d, first(node), m.kernel_size, m.stride, m.padding, 1,
                        m.ceil_mode, m.count_include_pad)

    def adaptive_avg_pool(node):
        return t.adaptive_avg_pool2d(first(node), module_of(node).output_size)

    def flatten(node):
        m = module_of(node)
        node_args = _ModuleCall(node, (node.args[0], m.start_dim, m.end_dim))
        return t._flatten(node_args)

    def softmax(node):
        m = module_of(node)
        return t.emit(_op.nn.softmax(first(node), axis=-1 if m.dim is None else m.dim))

    def log_softmax(node):
        m = module_of(node)
        return t.emit(_op.nn.log_softmax(first(node), axis=-1 if m.dim is None else m.dim))

    def gelu(node):
        return t._gelu(_ModuleCall(node, (node.args[0], module_of(node).approximate)))

    def hardtanh(node):
        m = module_of(node)
        return t._hardtanh(_ModuleCall(node, (node.args[0], m.min_val, m.max_val)))

    def leaky_relu(node):
        return t._leaky_relu(_ModuleCall(node, (node.args[0], module_of(node).negative_slope)))

    def upsample(node):
        m = module_of(node)
        return t.interpolate(node, first(node), m.size, m.scale_factor, m.mode, m.align_corners,
                             m.recompute_scale_factor)

    def lstm(node):
        """nn.LSTM's call: ``(output, (h_n, c_n))`` from ``lstm(x)`` or ``lstm(x, (h_0, c_0))``."""
        m = module_of(node)
        hx = t.retrieve(node.args[1]) if len(node.args) > 1 else node.kwargs.get("hx")
        hx = list(t.retrieve(hx)) if hx is not None else None
        output, h_n, c_n = t.lstm(node, first(node), hx, [t.param(w) for w in m._flat_weights], m.bias,
                                  m.num_layers, m.bidirectional, m.batch_first)
        return output, (h_n, c_n)

    def identity(node):
        return first(node)

    def unary(name):
        return lambda node: t.emit(t.require_op(node, name)(first(node)))

    def fn_of(method):
        return lambda node: method(_ModuleCall(node, (node.args[0],)))

    return {
        "Linear": linear, "Conv1d": conv, "Conv2d": conv, "BatchNorm1d": batch_norm,
        "BatchNorm2d": batch_norm, "LayerNorm": layer_norm, "GroupNorm": group_norm, "RMSNorm": rms_norm,
        "Embedding": embedding, "MaxPool2d": max_pool, "AvgPool2d": avg_pool,
        "AdaptiveAvgPool2d": adaptive_avg_pool, "Flatten": flatten, "Softmax": softmax,
        "LogSoftmax": log_softmax, "GELU": gelu, "Hardtanh": hardtanh, "ReLU6": hardtanh,
        "LeakyReLU": leaky_relu, "Dropout": identity, "Identity": identity, "Upsample": upsample, "LSTM": lstm,
        "ReLU": unary("nn.relu"), "SiLU": unary("nn.silu"), "Sigmoid": unary("sigmoid"), "Tanh": unary("tanh"),
        "Hardswish": fn_of(t._hardswish), "Hardsigmoid": fn_of(t._hardsigmoid),
    }


class _ModuleCall:
    """A stand-in node: the module's node with its arguments replaced (the module's
    attributes given as the functional form's arguments)."""

    def __init__(self, node, args: tuple) -> None:
        self.node = node
        self.args = args
        self.kwargs = {}
        self.name = node.name
        self.op = "call_function"
        self.target = node.target
        self.meta = node.meta


def from_fx(model, input_info, keep_params_as_input: bool = False, unwrap_unit_return_tuple: bool = False,
            no_bind_return_tuple: bool = False, progress: ProgressCallback = None):
    """Import a traced ``torch.fx.GraphModule`` as an IRModule whose ``main`` computes it.

    ``input_info`` lists each input's ``(shape, dtype)``. The flags mean what they mean for
    `from_exported_program`; with ``keep_params_as_input`` the parameters (sorted by name)
    follow the inputs and their arrays are main's ``"params"`` attribute.

    Raises `UnsupportedOpsError` listing every module, function or method with no translation
    (with the nodes using them) before converting anything, `UnsupportedOpError` for an
    argument a converter cannot translate, `FrontendError` for anything else."""
    if not hasattr(model, "graph"):
        raise FrontendError("from_fx takes a torch.fx.GraphModule (torch.fx.symbolic_trace(model))")
    return FXImporter(model).import_graph(input_info, keep_params_as_input, unwrap_unit_return_tuple,
                                          no_bind_return_tuple, progress)
