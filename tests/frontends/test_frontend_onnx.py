"""The ONNX importer (``tvms.relax.frontend.onnx.from_onnx``), checked against onnxruntime.

Every numeric check imports a model, compiles it for the CPU (the zero pipeline, then
``tvms.compile(mod, "llvm")``), runs it in the VM and compares with onnxruntime on the same
inputs: the largest error relative to the reference's largest magnitude must stay within 1e-4.

- whole models exported with ``torch.onnx.export`` (both exporters where torch can): torchvision's
  resnet18 and mobilenet_v2, ``nn.TransformerEncoderLayer``, a small GPT block whose sequence
  length is symbolic (a ``dim_param``), run at two lengths;
- small ``onnx.helper`` graphs for each supported op, several ops per graph (one compile each),
  and for the ops whose meaning changed between opsets 13 and 21;
- the importer's API (params kept as inputs, names, shape_dict, progress) and its errors.

Torch models are exported once per module (fixtures), at a small image size, to stay fast.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tvmscript as tvms  # noqa: E402
from tvmscript import relax, tir  # noqa: E402
from tvmscript.relax.frontend import detach_params  # noqa: E402
from tvmscript.relax.frontend.common import FrontendError, OpUse, UnsupportedOpError, UnsupportedOpsError  # noqa: E402
from tvmscript.relax.frontend.onnx import from_onnx, supported_ops  # noqa: E402
from tvmscript.relax.frontend.onnx.registry import (NEWEST_OPSET, OLDEST_OPSET, find_converter,  # noqa: E402
                                                     schema_version)

MAX_REL_ERROR = 1e-4
RNG = np.random.default_rng(0)
# The op types of every graph built below (for test_every_supported_op_is_tested).
TESTED_OPS: set = set()

# ----------------------------------------------------------------------------- helpers


def compile_module(mod):
    ex = tvms.compile(tvms.relax.get_pipeline("zero")(mod), "llvm")
    return tvms.relax.VirtualMachine(ex, tvms.cpu())


def run_vm(vm, args) -> list:
    out = vm["main"](*[tvms.nd.array(a if a.flags.c_contiguous else a.copy()) for a in args])
    if isinstance(out, (list, tuple)):
        return [o.numpy() for o in out]
    return [out.numpy()]


def run_ort(model, feeds: dict) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rel_error(actual, expected) -> float:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != onnxruntime's {expected.shape}"
    if expected.dtype == bool or np.issubdtype(expected.dtype, np.integer):
        return 0.0 if np.array_equal(actual, expected) else float("inf")
    scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-6)
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale if expected.size else 0.0


def check_outputs(actual: list, expected: list, names=None) -> list:
    assert len(actual) == len(expected)
    errors = []
    for k, (a, e) in enumerate(zip(actual, expected)):
        err = rel_error(a, e)
        label = names[k] if names else k
        assert a.dtype == e.dtype, f"output {label}: dtype {a.dtype} != onnxruntime's {e.dtype}"
        assert err <= MAX_REL_ERROR, f"output {label}: relative error {err:.3g}"
        errors.append(err)
    return errors


def check_model(model, feeds: dict, **kwargs) -> list:
    """Import, compile and run `model` on `feeds`; compare with onnxruntime. The errors."""
    mod = from_onnx(model, **kwargs)
    vm = compile_module(mod)
    expected = run_ort(model, feeds)
    names = [o.name for o in model.graph.output]
    return check_outputs(run_vm(vm, list(feeds.values())), expected, names)


def make_model(nodes, inputs: dict, opset: int = 17, initializers: dict | None = None, outputs=None,
               output_types: dict | None = None):
    """A model of `nodes`; `inputs` maps names to (elem type, shape); the outputs are every
    node output not consumed (or `outputs`), their types inferred (or given in `output_types`,
    for ops ONNX's shape inference does not follow)."""
    output_types = output_types or {}
    initializers = initializers or {}
    consumed = {i for n in nodes for i in n.input}
    if outputs is None:
        outputs = [o for n in nodes for o in n.output if o and o not in consumed]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, t, s) for k, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(o, *output_types[o]) if o in output_types
         else helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    TESTED_OPS.update(n.op_type for n in model.graph.node)
    return model


def node(op_type: str, inputs, outputs, **attrs):
    return helper.make_node(op_type, list(inputs), list(outputs), **attrs)


def const(name: str, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def rand(*shape, low=-2.0, high=2.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype("float32")


F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

# ----------------------------------------------------------------------------- torch models


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def torchvision(torch):
    from support.torch_models import import_torchvision  # PyPI's torchvision on a CPU torch, see there

    try:
        return import_torchvision()
    except ImportError as err:
        pytest.skip(str(err))


def export(torch, model, args, dynamo: bool, **kwargs):
    """``torch.onnx.export`` of `model` as an onnx.ModelProto (with the dynamo exporter or the
    legacy TorchScript one)."""
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if dynamo:
            import contextlib
            import os

            with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                program = torch.onnx.export(model, args, dynamo=True, verbose=False, **kwargs)
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(model, args, buffer, dynamo=False, **kwargs)
        return onnx.load_from_string(buffer.getvalue())


IMAGE = (1, 3, 64, 64)


@pytest.fixture(scope="module")
def resnet18(torch, torchvision):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(*IMAGE)
    return {"legacy": export(torch, model, (x,), False, input_names=["image"]),
            "dynamo": export(torch, model, (x,), True)}


@pytest.fixture(scope="module")
def mobilenet_v2(torch, torchvision):
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    return export(torch, model, (torch.randn(*IMAGE),), False, input_names=["image"])


def _image_feeds(model) -> dict:
    return {model.graph.input[0].name: rand(*IMAGE, low=0.0, high=1.0)}


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_resnet18(resnet18, exporter):
    model = resnet18[exporter]
    errors = check_model(model, _image_feeds(model))
    assert max(errors) <= MAX_REL_ERROR


def test_mobilenet_v2_with_params_as_inputs(mobilenet_v2):
    """Legacy export (Constant, Identity and Clip-with-inputs nodes); weights kept as
    parameters, detached and passed at run time."""
    model = mobilenet_v2
    mod = from_onnx(model, keep_params_in_input=True)
    func = mod["main"]
    assert func.attrs["num_input"] == 1
    mod, params = detach_params(mod)
    assert "params" not in mod["main"].attrs
    assert len(params["main"]) == len(func.params) - 1 > 50
    feeds = _image_feeds(model)
    vm = compile_module(mod)
    weights = [p.numpy() for p in params["main"]]
    check_outputs(run_vm(vm, list(feeds.values()) + weights), run_ort(model, feeds))


def test_static_models_fold_their_shape_computations(resnet18, mobilenet_v2):
    """Shape/Gather/Concat/Constant nodes of static models leave no int64 work behind."""
    for model in (resnet18["legacy"], resnet18["dynamo"], mobilenet_v2):
        for binding in _bindings(from_onnx(model)):
            sinfo = binding.var.struct_info
            assert not (isinstance(sinfo, relax.TensorStructInfo) and sinfo.dtype == "int64"), binding


def _bindings(mod):
    return [b for block in mod["main"].body.blocks for b in block.bindings]


@pytest.fixture(scope="module")
def transformer_layer(torch):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                             batch_first=True).eval()
    # The legacy exporter fails on this module in torch 2.x (is_causal becomes a tensor).
    return export(torch, layer, (torch.randn(2, 10, 32),), True)


def test_transformer_encoder_layer(transformer_layer):
    model = transformer_layer
    check_model(model, {model.graph.input[0].name: rand(2, 10, 32)})


def _gpt_block(torch):
    import math

    class Block(torch.nn.Module):
        """Token + position embedding, pre-norm causal self-attention and a GELU MLP."""

        def __init__(self, vocab=50, dim=32, heads=4, max_len=64):
            super().__init__()
            self.tok, self.pos = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(max_len, dim)
            self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
            self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
            self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
            self.head, self.heads = torch.nn.Linear(dim, vocab), heads

        def forward(self, ids):
            b, t = ids.shape
            x = self.tok(ids) + self.pos(torch.arange(t))
            h = self.ln1(x)
            q, k, v = self.qkv(h).split(h.shape[-1], dim=-1)
            hd = h.shape[-1] // self.heads
            q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            causal = torch.arange(t)[:, None] >= torch.arange(t)[None, :]
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, -1))
            return self.head(x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)))))

    torch.manual_seed(0)
    return Block().eval()


@pytest.fixture(scope="module")
def gpt_models(torch):
    block = _gpt_block(torch)
    ids = torch.randint(0, 50, (1, 8))
    # legacy at opset 17: GELU as Erf, shapes through Shape/Gather/Unsqueeze/Concat;
    # dynamo (opset 18+): the Gelu op, Range of a symbolic length.
    legacy = export(torch, block, (ids,), False, input_names=["ids"], dynamic_axes={"ids": {1: "seq"}},
                    opset_version=17)
    dynamo = export(torch, block, (ids,), True, dynamic_shapes=({1: torch.export.Dim("seq", max=64)},))
    return {"legacy": legacy, "dynamo": dynamo}


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_gpt_block_with_symbolic_length(gpt_models, exporter):
    model = gpt_models[exporter]
    mod = from_onnx(model)
    (param,) = mod["main"].params
    seq = param.struct_info.shape[1]
    assert isinstance(seq, tir.Var) and seq.name == "seq"
    ops = {b.value.op.name for b in _bindings(mod) if isinstance(b.value, relax.Call)}
    assert not ops & {"relax.concat", "relax.full"}, "the shape arithmetic should fold away"
    vm = compile_module(mod)
    for length in (8, 13):
        feeds = {"ids": RNG.integers(0, 50, size=(1, length)).astype("int64")}
        check_outputs(run_vm(vm, [feeds["ids"]]), run_ort(model, feeds))


# ----------------------------------------------------------------------------- ops, several per graph


def _unary_ops():
    x, p = rand(2, 3, 4), rand(2, 3, 4, low=0.1, high=3.0)
    plain = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Floor", "Ceil", "Round", "Sin", "Cos",
             "Reciprocal", "Identity", "Softplus", "Softsign", "Mish", "Sign", "HardSwish"]
    nodes = [node(op, ["x"], [f"{op}_out"]) for op in plain]
    nodes += [node("Log", ["p"], ["log"]), node("Sqrt", ["p"], ["sqrt"]),
              node("Elu", ["x"], ["elu"], alpha=0.7), node("Selu", ["x"], ["selu"]),
              node("LeakyRelu", ["x"], ["leaky"], alpha=0.2), node("HardSigmoid", ["x"], ["hsig"], alpha=0.3, beta=0.4),
              node("ThresholdedRelu", ["x"], ["thr"], alpha=0.5)]
    return make_model(nodes, {"x": (F32, [2, 3, 4]), "p": (F32, [2, 3, 4])}, opset=18), {"x": x, "p": p}


def _gelu_ops():
    nodes = [node("Gelu", ["x"], ["exact"]), node("Gelu", ["x"], ["tanh"], approximate="tanh")]
    return make_model(nodes, {"x": (F32, [3, 5])}, opset=20), {"x": rand(3, 5)}


def _binary_ops():
    a, b, c = rand(2, 3, 4), rand(3, 4), rand(1, 4)
    base = rand(2, 3, 4, low=0.2, high=2.0)
    nodes = [node(op, ["a", "b"], [f"{op}_out"]) for op in ("Add", "Sub", "Mul", "Div")]
    nodes += [node(op, ["a", "b", "c"], [f"{op}_out"]) for op in ("Max", "Min", "Sum", "Mean")]
    nodes += [node("Pow", ["base", "b"], ["pow"]), node("PRelu", ["a", "c"], ["prelu"])]
    nodes += [node(op, ["a", "b"], [f"{op}_out"]) for op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual")]
    nodes += [node("Greater", ["a", "c"], ["gt"]), node("Less", ["a", "c"], ["lt"]),
              node("And", ["gt", "lt"], ["and"]), node("Or", ["gt", "lt"], ["or"]), node("Xor", ["gt", "lt"], ["xor"]),
              node("Not", ["gt"], ["not"]), node("Where", ["gt", "a", "b"], ["where"]),
              node("Cast", ["a"], ["to_int"], to=TensorProto.INT32), node("CastLike", ["to_int", "b"], ["back"])]
    inputs = {"a": (F32, [2, 3, 4]), "b": (F32, [3, 4]), "c": (F32, [1, 4]), "base": (F32, [2, 3, 4])}
    return make_model(nodes, inputs), {"a": a, "b": b, "c": c, "base": base}


def _integer_ops():
    a = RNG.integers(-20, 20, size=(3, 4)).astype("int64")
    b = RNG.integers(1, 6, size=(3, 4)).astype("int64") * np.where(RNG.random((3, 4)) < 0.5, -1, 1)
    nodes = [node("Mod", ["a", "b"], ["mod"]), node("Div", ["a", "b"], ["div"]), node("Equal", ["a", "b"], ["eq"]),
             node("Abs", ["a"], ["abs"]), node("Mul", ["a", "b"], ["mul"])]
    return make_model(nodes, {"a": (I64, [3, 4]), "b": (I64, [3, 4])}), {"a": a, "b": b}


def _clip_ops():
    """Clip-13: min/max are optional inputs (constants here, or graph inputs)."""
    nodes = [const("lo", np.float32(-0.5)), const("hi", np.float32(0.75)),
             node("Clip", ["x", "lo", "hi"], ["both"]), node("Clip", ["x", "", "hi"], ["max_only"]),
             node("Clip", ["x", "lo"], ["min_only"]), node("Clip", ["x"], ["neither"]),
             node("Clip", ["x", "rlo", "rhi"], ["runtime"])]
    inputs = {"x": (F32, [4, 5]), "rlo": (F32, []), "rhi": (F32, [])}
    return make_model(nodes, inputs, opset=13), {"x": rand(4, 5), "rlo": np.array(-1.0, "float32"),
                                               "rhi": np.array(0.2, "float32")}


def _conv_ops():
    w = rand(6, 4, 3, 3) / 4
    wg = rand(6, 2, 3, 3) / 4
    w1 = rand(5, 4, 3) / 4
    nodes = [node("Conv", ["x", "w", "b"], ["plain"], pads=[1, 1, 1, 1]),
             node("Conv", ["x", "w"], ["strided"], strides=[2, 2], dilations=[2, 1], pads=[0, 1, 2, 1]),
             node("Conv", ["x", "wg"], ["grouped"], group=2, auto_pad="SAME_UPPER", strides=[2, 2]),
             node("Conv", ["x", "w"], ["same_lower"], auto_pad="SAME_LOWER"),
             node("Conv", ["s", "w1", "b1"], ["conv1d"], pads=[2, 1], strides=[2])]
    inits = {"w": w, "b": rand(6), "wg": wg, "w1": w1, "b1": rand(5)}
    inputs = {"x": (F32, [1, 4, 9, 8]), "s": (F32, [2, 4, 11])}
    return make_model(nodes, inputs, initializers=inits), {"x": rand(1, 4, 9, 8), "s": rand(2, 4, 11)}


def _conv_transpose_ops():
    nodes = [node("ConvTranspose", ["x", "w", "b"], ["plain"]),
             node("ConvTranspose", ["x", "w"], ["strided"], strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0]),
             node("ConvTranspose", ["x", "wg"], ["grouped"], group=2, dilations=[2, 1]),
             node("ConvTranspose", ["x", "w"], ["shaped"], strides=[2, 2], output_shape=[10, 7]),
             node("ConvTranspose", ["x", "w"], ["same"], strides=[2, 2], auto_pad="SAME_UPPER"),
             node("ConvTranspose", ["s", "w1"], ["conv1d"], strides=[3], pads=[1, 2])]
    inits = {"w": rand(4, 3, 3, 2) / 4, "b": rand(3), "wg": rand(4, 2, 2, 3) / 4, "w1": rand(4, 2, 3) / 4}
    inputs = {"x": (F32, [1, 4, 5, 4]), "s": (F32, [2, 4, 6])}
    return make_model(nodes, inputs, initializers=inits), {"x": rand(1, 4, 5, 4), "s": rand(2, 4, 6)}


def _index_ops():
    nodes = [node("GatherElements", ["x", "idx"], ["gathered"], axis=1),
             node("GatherElements", ["x", "ridx"], ["gathered_rt"], axis=0),
             node("ScatterElements", ["x", "idx", "upd"], ["scattered"], axis=1),
             node("ScatterElements", ["x", "idx", "upd"], ["scatter_add"], axis=1, reduction="add"),
             node("OneHot", ["classes", "depth", "values"], ["onehot"], axis=0),
             node("CumSum", ["x", "axis"], ["cumsum"]),
             node("CumSum", ["x", "axis"], ["cumsum_rev"], exclusive=1, reverse=1),
             node("Einsum", ["x", "y"], ["einsum"], equation="ij,kj->ik")]
    inits = {"idx": np.array([[0, -1], [2, 1], [3, 0]], "int64"), "upd": rand(3, 2),
             "depth": np.array(5, "int64"), "values": np.array([-1.0, 3.0], "float32"), "axis": np.array(1, "int32")}
    inputs = {"x": (F32, [3, 4]), "ridx": (I64, [2, 4]), "classes": (I64, [4]), "y": (F32, [5, 4])}
    feeds = {"x": rand(3, 4), "ridx": np.array([[0, -1, 2, 1], [-3, 0, 1, 2]], "int64"),
             "classes": np.array([0, 4, -1, 2], "int64"), "y": rand(5, 4)}
    return make_model(nodes, inputs, opset=18, initializers=inits), feeds


def _pool_ops():
    nodes = [node("MaxPool", ["x"], ["max"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             node("MaxPool", ["x"], ["max_ceil"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
             node("MaxPool", ["x"], ["max_dilated"], kernel_shape=[2, 2], dilations=[2, 2]),
             node("AveragePool", ["x"], ["avg"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             node("AveragePool", ["x"], ["avg_incl"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
             node("AveragePool", ["x"], ["avg_same"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
             node("MaxPool", ["s"], ["max1d"], kernel_shape=[3], strides=[2]),
             node("GlobalAveragePool", ["x"], ["gap"]), node("GlobalMaxPool", ["x"], ["gmp"])]
    inputs = {"x": (F32, [1, 3, 9, 7]), "s": (F32, [1, 3, 10])}
    return make_model(nodes, inputs), {"x": rand(1, 3, 9, 7), "s": rand(1, 3, 10)}


def _norm_ops():
    c = 6
    nodes = [node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-3),
             node("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["ln"], axis=-2),
             node("LayerNormalization", ["x", "ln_scale"], ["ln_no_bias"], axis=-2, epsilon=1e-3),
             node("InstanceNormalization", ["x", "scale", "bias"], ["inorm"]),
             node("GroupNormalization", ["x", "scale", "bias"], ["gnorm"], num_groups=3),
             node("Softmax", ["x"], ["softmax"], axis=1), node("LogSoftmax", ["x"], ["log_softmax"]),
             node("Dropout", ["x"], ["dropout"])]
    inits = {"scale": rand(c), "bias": rand(c), "mean": rand(c), "var": rand(c, low=0.5, high=2.0),
             "ln_scale": rand(5, 4), "ln_bias": rand(5, 4)}
    model = make_model(nodes, {"x": (F32, [2, c, 5, 4])}, opset=21, initializers=inits,
                       output_types={"gnorm": (F32, [2, c, 5, 4])})
    return model, {"x": rand(2, c, 5, 4)}


def _matmul_ops():
    nodes = [node("MatMul", ["a", "b"], ["mm"]), node("MatMul", ["a3", "b"], ["batched"]),
             node("Gemm", ["a", "b", "c"], ["gemm"]),
             node("Gemm", ["bt", "at", "c2"], ["gemm_t"], transA=1, transB=1, alpha=0.5, beta=2.0)]
    inits = {"b": rand(5, 6), "c": rand(6), "c2": rand(6, 4)}
    inputs = {"a": (F32, [4, 5]), "a3": (F32, [2, 4, 5]), "bt": (F32, [5, 6]), "at": (F32, [4, 5])}
    feeds = {"a": rand(4, 5), "a3": rand(2, 4, 5), "bt": rand(5, 6), "at": rand(4, 5)}
    return make_model(nodes, inputs, initializers=inits), feeds


def _pad_ops():
    nodes = [const("pads", np.array([0, 1, 2, 0, 2, 1], "int64")), const("value", np.float32(1.5)),
             node("Pad", ["x", "pads", "value"], ["constant"]), node("Pad", ["x", "pads"], ["reflect"], mode="reflect"),
             node("Pad", ["x", "pads"], ["edge"], mode="edge"),
             const("axes", np.array([-1], "int64")), const("pads2", np.array([3, 1], "int64")),
             node("Pad", ["x", "pads2", "", "axes"], ["axes_pad"])]
    return make_model(nodes, {"x": (F32, [2, 3, 4])}, opset=18), {"x": rand(2, 3, 4)}


def _reduce_ops(opset: int):
    """Reduce*: axes an attribute before opset 18 (an input for ReduceSum from 13), an input after."""
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSumExp"]
    nodes = [const("axes", np.array([1, -1], "int64")), node("ReduceLogSum", ["p"], ["logsum"], keepdims=0)]
    for op in ops:
        if opset >= 18 or op == "ReduceSum":
            nodes.append(node(op, ["x", "axes"], [f"{op}_axes"], keepdims=0))
        else:
            nodes.append(node(op, ["x"], [f"{op}_axes"], axes=[1, -1], keepdims=0))
        nodes.append(node(op, ["x"], [f"{op}_all"]))
    if opset >= 18:
        nodes.append(node("ReduceMean", ["x"], ["noop"], noop_with_empty_axes=1))
    nodes += [node("ArgMax", ["x"], ["argmax"], axis=1), node("ArgMin", ["x"], ["argmin"], axis=-1, keepdims=0)]
    inputs = {"x": (F32, [2, 3, 4]), "p": (F32, [2, 3])}
    return make_model(nodes, inputs, opset=opset), {"x": rand(2, 3, 4, low=0.5, high=1.5),
                                                     "p": rand(2, 3, low=0.5, high=2.0)}


def _split_ops(opset: int):
    """Split-13: sizes as an optional input; Split-18 adds num_outputs (uneven last part)."""
    nodes = [const("sizes", np.array([1, 4, 2], "int64")),
             node("Split", ["x", "sizes"], ["s0", "s1", "s2"], axis=1)]
    if opset >= 18:
        nodes += [node("Split", ["x"], ["e0", "e1"], axis=0, num_outputs=2),
                  node("Split", ["x"], ["n0", "n1", "n2"], axis=1, num_outputs=3)]
    else:
        nodes.append(node("Split", ["x"], ["e0", "e1"], axis=0))
    return make_model(nodes, {"x": (F32, [4, 7])}, opset=opset), {"x": rand(4, 7)}


def _squeeze_ops(opset: int):
    """Squeeze/Unsqueeze-13 take their axes as an input (Squeeze with none drops every unit dim)."""
    nodes = [const("axes", np.array([0, -1], "int64")), node("Squeeze", ["x", "axes"], ["sq"]),
             node("Squeeze", ["x"], ["sq_all"]), const("uaxes", np.array([0, 3], "int64")),
             node("Unsqueeze", ["sq_all", "uaxes"], ["unsq"])]
    return make_model(nodes, {"x": (F32, [1, 3, 2, 1])}, opset=opset), {"x": rand(1, 3, 2, 1)}


def _layout_ops():
    nodes = [const("shape", np.array([0, -1, 2], "int64")), node("Reshape", ["x", "shape"], ["reshaped"]),
             node("Flatten", ["x"], ["flat"], axis=2), node("Transpose", ["x"], ["transposed"], perm=[2, 0, 3, 1]),
             node("Concat", ["x", "x"], ["joined"], axis=-1),
             const("starts", np.array([1, -1], "int64")), const("ends", np.array([2**63 - 1, -(2**63)], "int64")),
             const("slice_axes", np.array([1, 3], "int64")), const("steps", np.array([1, -2], "int64")),
             node("Slice", ["x", "starts", "ends", "slice_axes", "steps"], ["sliced"]),
             const("idx", np.array([[0, -1], [1, 1]], "int64")), node("Gather", ["x", "idx"], ["gathered"], axis=1),
             node("Gather", ["x", "ridx"], ["gathered_rt"], axis=3),
             const("eshape", np.array([3, 1, 1, 1, 1], "int64")), node("Expand", ["x", "eshape"], ["expanded"]),
             const("reps", np.array([1, 2, 1, 3], "int64")), node("Tile", ["x", "reps"], ["tiled"]),
             node("Trilu", ["m"], ["upper"]), const("k", np.array(-1, "int64")),
             node("Trilu", ["m", "k"], ["lower"], upper=0),
             node("DepthToSpace", ["d"], ["dcr"], blocksize=2),
             node("DepthToSpace", ["d"], ["crd"], blocksize=2, mode="CRD"),
             node("SpaceToDepth", ["x"], ["s2d"], blocksize=2)]
    inputs = {"x": (F32, [2, 3, 4, 6]), "ridx": (I64, [2]), "m": (F32, [2, 4, 5]), "d": (F32, [1, 8, 2, 3])}
    feeds = {"x": rand(2, 3, 4, 6), "ridx": np.array([5, -2], "int64"), "m": rand(2, 4, 5), "d": rand(1, 8, 2, 3)}
    return make_model(nodes, inputs), feeds


def _shape_ops():
    """Shape arithmetic on a static input folds to constants; the results feed real ops."""
    nodes = [node("Shape", ["x"], ["shape"]), node("Shape", ["x"], ["tail"], start=1),
             node("Size", ["x"], ["size"]), node("ConstantOfShape", ["tail"], ["filled"],
                                                 value=numpy_helper.from_array(np.array([2.5], "float32"))),
             const("zero", np.array(0, "int64")), const("one", np.array(1, "int64")),
             node("Gather", ["shape", "one"], ["dim1"]), node("Range", ["zero", "dim1", "one"], ["range"]),
             node("Cast", ["range"], ["range_f"], to=TensorProto.FLOAT), node("Add", ["filled", "range_f"], ["sum"]),
             helper.make_node("Constant", [], ["cf"], value_floats=[1.0, 2.0]),
             helper.make_node("Constant", [], ["ci"], value_int=3),
             # rank-0 results feed ops (a rank-0 constant output comes back with shape (1,): see the report)
             node("Cast", ["size"], ["size_f"], to=TensorProto.FLOAT), node("Mul", ["x", "size_f"], ["scaled"]),
             node("Cast", ["ci"], ["ci_f"], to=TensorProto.FLOAT), node("Add", ["cf", "ci_f"], ["shifted"])]
    return make_model(nodes, {"x": (F32, [2, 3])}, opset=15), {"x": rand(2, 3)}


OP_GRAPHS = {
    "unary": _unary_ops, "gelu-20": _gelu_ops, "binary": _binary_ops, "integer": _integer_ops,
    "clip-13": _clip_ops, "conv": _conv_ops, "conv-transpose": _conv_transpose_ops, "index": _index_ops, "pool": _pool_ops, "norm-21": _norm_ops,
"matmul": _matmul_ops, "pad-18": _pad_ops,
    "reduce-13": lambda: _reduce_ops(13), "reduce-18": lambda: _reduce_ops(18),
    "split-13": lambda: _split_ops(13), "split-18": lambda: _split_ops(18),
    "squeeze-13": lambda: _squeeze_ops(13), "squeeze-21": lambda: _squeeze_ops(21),
    "layout": _layout_ops, "shape": _shape_ops,
}


@pytest.mark.parametrize("name", list(OP_GRAPHS))
def test_ops_match_onnxruntime(name):
    model, feeds = OP_GRAPHS[name]()
    check_model(model, feeds)


def test_symbolic_shape_arithmetic_folds():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Expand and Slice on a dim_param input
    import to ops on shapes in ``n``, and run at two sizes."""
    nodes = [node("Shape", ["x"], ["shape"]), const("i0", np.array(0, "int64")),
             node("Gather", ["shape", "i0"], ["n"]), const("ax", np.array([0], "int64")),
             node("Unsqueeze", ["n", "ax"], ["n1"]), const("rest", np.array([3, 2], "int64")),
             node("Concat", ["n1", "rest"], ["target"], axis=0), node("Reshape", ["x", "target"], ["reshaped"]),
             const("one", np.array([1], "int64")), node("Slice", ["x", "one", "n1", "ax"], ["tail"]),
             node("Slice", ["table", "ax", "n1", "ax"], ["rows"]),
             const("ones", np.array([1, 1], "int64")), node("Concat", ["n1", "ones"], ["eshape"], axis=0),
             node("Expand", ["col", "eshape"], ["expanded"])]
    model = make_model(nodes, {"x": (F32, ["n", 6]), "col": (F32, [1, 6]), "table": (F32, [10, 6])})
    mod = from_onnx(model)
    ops = {b.value.op.name for b in _bindings(mod) if isinstance(b.value, relax.Call)}
    assert ops == {"relax.reshape", "relax.strided_slice", "relax.take", "relax.arange", "relax.broadcast_to"}, ops
    vm = compile_module(mod)
    for n in (4, 7):
        feeds = {"x": rand(n, 6), "col": rand(1, 6), "table": rand(10, 6)}
        check_outputs(run_vm(vm, list(feeds.values())), run_ort(model, feeds))


# ----------------------------------------------------------------------------- the op table


def test_every_supported_op_is_tested():
    for build in OP_GRAPHS.values():
        build()
    missing = set(supported_ops()) - TESTED_OPS
    assert not missing, f"ops with a converter but no test graph: {sorted(missing)}"


@pytest.mark.parametrize("opset", range(OLDEST_OPSET, NEWEST_OPSET + 1))
def test_converters_cover_opsets_13_to_21(opset):
    for op_type in supported_ops():
        version = schema_version(op_type, opset)
        if version is None or onnx.defs.get_schema(op_type, opset).deprecated:
            continue  # not defined yet at this opset (Gelu before 20), or invalid (GroupNormalization-18)
        conv, why = find_converter(op_type, opset)
        assert conv is not None, why


def test_op_versions_newer_than_opset_21_are_refused():
    """Squeeze-24 (opset 24) may mean something this importer has not checked: refused."""
    model = make_model([node("Relu", ["x"], ["y"]), node("Squeeze", ["y", "a"], ["z"])], {"x": (F32, [1, 3])},
                       opset=24, initializers={"a": np.array([0], "int64")})
    with pytest.raises(UnsupportedOpError, match="Squeeze-2[0-9].*newer than the versions"):
        from_onnx(model)
    relu_only = make_model([node("Relu", ["x"], ["y"])], {"x": (F32, [1, 3])}, opset=24)
    check_model(relu_only, {"x": rand(1, 3)})  # Relu-14 is still current at opset 24


# ----------------------------------------------------------------------------- the API


def _linear_model(input_name="input.1", dims=("batch", 4)):
    nodes = [node("MatMul", [input_name, "fc.weight"], ["t"]), node("Add", ["t", "fc/bias:0"], ["u"]),
             node("Relu", ["u"], ["out"])]
    inits = {"fc.weight": rand(4, 3), "fc/bias:0": rand(3), "unused": rand(2)}
    return make_model(nodes, {input_name: (F32, list(dims))}, initializers=inits)


def test_constants_and_symbolic_inputs():
    model = _linear_model()
    mod = from_onnx(model)
    func = mod["main"]
    (x,) = func.params
    assert x.name_hint == "input_1"
    batch = x.struct_info.shape[0]
    assert isinstance(batch, tir.Var) and batch.name == "batch"
    assert func.attrs["num_input"] == 1 and "params" not in func.attrs
    assert "R.nn.relu" in mod.script()
    feeds = {"input.1": rand(5, 4)}
    check_outputs(run_vm(compile_module(mod), [feeds["input.1"]]), run_ort(model, feeds))


def test_keep_params_in_input():
    model = _linear_model()
    mod = from_onnx(model, keep_params_in_input=True)
    func = mod["main"]
    assert [p.name_hint for p in func.params] == ["input_1", "fc_weight", "fc_bias_0"]  # "unused" is not read
    assert func.attrs["num_input"] == 1
    arrays = [a.numpy() for a in func.attrs["params"]]
    np.testing.assert_array_equal(arrays[0], numpy_helper.to_array(model.graph.initializer[0]))
    feeds = {"input.1": rand(2, 4)}
    check_outputs(run_vm(compile_module(mod), [feeds["input.1"]] + arrays), run_ort(model, feeds))


def test_input_names_shape_dict_and_dtype_dict():
    model = _linear_model("1x")
    assert from_onnx(model)["main"].params[0].name_hint == "input_1x"
    assert from_onnx(model, sanitize_input_names=False)["main"].params[0].name_hint == "1x"
    (x,) = from_onnx(model, shape_dict={"1x": [6, 4]})["main"].params
    assert [d.value for d in x.struct_info.shape] == [6, 4]
    n = tir.Var("int64", "n")
    (x,) = from_onnx(model, shape_dict={"1x": [n, 4]})["main"].params
    assert x.struct_info.shape[0] is n
    cast = make_model([node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], {"x": (TensorProto.DOUBLE, [2])})
    assert from_onnx(cast, dtype_dict={"x": "float16"})["main"].params[0].struct_info.dtype == "float16"


def test_symbolic_dims_are_shared_between_inputs():
    model = make_model([node("Add", ["a", "b"], ["c"])], {"a": (F32, ["n", 3]), "b": (F32, ["n", 3])})
    a, b = from_onnx(model)["main"].params
    assert a.struct_info.shape[0] is b.struct_info.shape[0]


def test_progress_is_reported():
    calls = []
    model = _linear_model()
    from_onnx(model, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (3, 3)


def test_opset_argument_overrides_the_model():
    model, _ = _split_ops(13)
    with pytest.raises(FrontendError, match="opset 11"):
        from_onnx(model, opset=11)


# ----------------------------------------------------------------------------- errors


def test_unsupported_op_names_the_op_and_node():
    named = make_model([node("Relu", ["x"], ["r"]), helper.make_node("TopK", ["r", "k"], ["v", "i"], name="top")],
                       {"x": (F32, [5]), "k": (I64, [1])})
    with pytest.raises(UnsupportedOpError, match="TopK, used by 1 node:\n    'top'") as info:
        from_onnx(named)
    assert info.value.op == "TopK" and info.value.node == "top"
    unnamed = make_model([node("Relu", ["x"], ["r"]), node("NonZero", ["r"], ["nz"])], {"x": (F32, [5])})
    with pytest.raises(UnsupportedOpError, match="NonZero, used by 1 node:\n    '#1'"):
        from_onnx(unnamed)


def test_every_unsupported_op_is_reported_at_once():
    """Two ops without a translation (one used twice) and one from another domain: one error
    lists them all with their nodes, before anything is converted. A node whose inputs are all
    constants is computed at import instead, so it is not listed."""
    nodes = [node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"], name="nz1"),
             helper.make_node("TopK", ["r", "k"], ["v", "i"], name="top"),
             helper.make_node("NonZero", ["x"], ["nz2"], name="nz2"),
             helper.make_node("Gelu", ["r"], ["g"], domain="com.microsoft", name="ms"),
             helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", F32, [2], [1.0, 0.0])),
             helper.make_node("NonZero", ["c"], ["folded"], name="folded")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [5]),
                                           helper.make_tensor_value_info("k", I64, [1])],
                              [helper.make_tensor_value_info("v", F32, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOpsError) as info:
        from_onnx(model)
    assert info.value.missing == {"NonZero": [OpUse("nz1"), OpUse("nz2")], "TopK": [OpUse("top")],
                                  "com.microsoft.Gelu": [OpUse("ms")]}
    assert str(info.value).startswith("3 ONNX operators have no translation in tvms (nothing was imported):\n"
                                      "  NonZero, used by 2 nodes:\n    'nz1'\n    'nz2'\n")


def test_op_from_another_domain_is_unsupported():
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft", name="ms")], "g",
                              [helper.make_tensor_value_info("x", F32, [2])],
                              [helper.make_tensor_value_info("y", F32, [2])])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(UnsupportedOpError, match="com.microsoft.Gelu"):
        from_onnx(model)


def test_invalid_models_are_frontend_errors():
    graph = helper.make_graph([node("Relu", ["missing"], ["y"])], "g", [helper.make_tensor_value_info("x", F32, [2])],
                              [helper.make_tensor_value_info("y", F32, [2])])
    with pytest.raises(FrontendError, match="invalid ONNX model"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(FrontendError, match="onnx.ModelProto"):
        from_onnx("model.onnx")
    old = make_model([node("Relu", ["x"], ["y"])], {"x": (F32, [2])}, opset=11)
    with pytest.raises(FrontendError, match="opsets 13 to 21"):
        from_onnx(old)


def test_missing_input_shape_is_a_frontend_error():
    graph = helper.make_graph([node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", F32, None)],
                              [helper.make_tensor_value_info("y", F32, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FrontendError, match="'x' has no shape.*shape_dict"):
        from_onnx(model)
    from_onnx(model, shape_dict={"x": [2]})  # given, it imports


def test_shape_dict_must_name_an_input_and_keep_its_rank():
    model = _linear_model("1x")  # input '1x' (batch, 4)
    with pytest.raises(FrontendError, match=r"given for 'input_1x', which is not an input of the model "
                                            r"\(its inputs: '1x' \(batch, 4\)\)"):
        from_onnx(model, shape_dict={"input_1x": [2, 4]})  # the sanitized name is not the model's
    with pytest.raises(FrontendError, match=r"\(2, 4, 1\), is 3-D, but input '1x' is 2-D \(batch, 4\) in the model"):
        from_onnx(model, shape_dict={"1x": [2, 4, 1]})
    with pytest.raises(FrontendError, match="must be a list of dimensions, not 8"):
        from_onnx(model, shape_dict={"1x": 8})


def test_run_time_shape_is_a_frontend_error():
    model = make_model([node("Reshape", ["x", "s"], ["y"])], {"x": (F32, [6]), "s": (I64, [2])})
    with pytest.raises(FrontendError, match="Reshape node '#0'.*must be known"):
        from_onnx(model)
