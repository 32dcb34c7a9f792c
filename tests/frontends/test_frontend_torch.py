"""The PyTorch importers (``tvms.relax.frontend.torch``): from_exported_program and from_fx.

Printed form: the tutorials' MLP (seeds 000 and 001) prints byte for byte as TVM prints it
(tests/golden/frontend/torch_*.tvms). Numbers: every imported model is compiled for the CPU and
run against PyTorch on the same inputs (max |out - ref| / max |ref| <= 1e-4): torchvision's
resnet18 and mobilenet_v2, nn.TransformerEncoderLayer, a GPT block exported with a symbolic
sequence length and run at two lengths, and small models exercising the other converters.
Compiled models are module-scoped fixtures, so each is built once.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import fx, nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.export import Dim, export  # noqa: E402

import tvmscript as tvms  # noqa: E402
from tvmscript import relax  # noqa: E402
from tvmscript.relax.frontend import detach_params  # noqa: E402
from tvmscript.relax.frontend.common import FrontendError, UnsupportedOpError, UnsupportedOpsError  # noqa: E402
from tvmscript.relax.frontend.torch import from_exported_program, from_fx  # noqa: E402
from support.torch_models import GPT, ConvZoo, MaskedAttention, ShapeZoo, import_torchvision  # noqa: E402

GOLDEN = pathlib.Path(__file__).parents[1] / "golden" / "frontend"
TOLERANCE = 1e-4


# ----------------------------------------------------------------------------- helpers


def rel_err(out, ref) -> float:
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


class Compiled:
    """A module imported with its weights as parameters, compiled for the CPU once."""

    def __init__(self, mod) -> None:
        self.mod, params = detach_params(mod)
        self.params = params.get("main", [])
        ex = tvms.compile(relax.get_pipeline("zero")(self.mod), "llvm")
        self.vm = relax.VirtualMachine(ex, tvms.cpu())

    def __call__(self, *inputs):
        out = self.vm["main"](*[np.asarray(i) for i in inputs], *self.params)
        if isinstance(out, (list, tuple)):
            return [o.numpy() for o in out]
        return out.numpy()


def torch_out(model, *inputs):
    with torch.no_grad():
        out = model(*inputs)
    if isinstance(out, (list, tuple)):
        return [o.numpy() for o in out]
    return out.numpy()


def exported(model, *inputs, dynamic_shapes=None):
    with torch.no_grad():
        return export(model, inputs, dynamic_shapes=dynamic_shapes)


class TorchModel(nn.Module):
    """The tutorials' MLP (seeds 000 and 001)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


# ----------------------------------------------------------------------------- seeds 000 and 001


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return TorchModel().eval(), torch.randn(1, 784, dtype=torch.float32)


def test_seed000_exported_program_prints_as_tvm(mlp):
    model, x = mlp
    ep = exported(model, x)
    mod = from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)
    mod, params = detach_params(mod)
    assert mod.script() == (GOLDEN / "torch_seed000_exported_program.tvms").read_text()
    # The weights, in parameter order after the input.
    expected = [model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias]
    assert [p.numpy().tolist() for p in params["main"]] == [w.detach().numpy().tolist() for w in expected]


def test_seed001_fx_prints_as_tvm(mlp):
    model, _ = mlp
    mod = from_fx(fx.symbolic_trace(model), [((1, 784), "float32")], keep_params_as_input=True)
    mod, params = detach_params(mod)
    assert mod.script() == (GOLDEN / "torch_seed001_fx.tvms").read_text()
    names = ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]  # sorted by name, as TVM orders them
    state = dict(model.named_parameters())
    assert [p.numpy().tolist() for p in params["main"]] == [state[n].detach().numpy().tolist() for n in names]


def test_mlp_runs_with_params_as_inputs_and_as_constants(mlp):
    model, x = mlp
    ref = torch_out(model, x)
    ep = exported(model, x)
    as_input = Compiled(from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True))
    assert rel_err(as_input(x), ref) <= TOLERANCE
    bound = from_exported_program(ep)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    assert "params" not in bound["main"].attrs and "num_input" not in bound["main"].attrs
    out = Compiled(bound)(x)
    assert isinstance(out, list) and len(out) == 1  # not unwrapped: a 1-tuple, as the graph returns
    assert rel_err(out[0], ref) <= TOLERANCE
    fx_bound = Compiled(from_fx(fx.symbolic_trace(model), [((1, 784), "float32")]))
    assert rel_err(fx_bound(x), ref) <= TOLERANCE


def test_progress_reports_every_node(mlp):
    model, x = mlp
    calls = []
    from_exported_program(exported(model, x), progress=lambda done, total: calls.append((done, total)))
    total = calls[-1][1]
    assert calls[-1] == (total, total) and total >= 4
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    fx_calls = []
    from_fx(fx.symbolic_trace(model), [((1, 784), "float32")], progress=lambda d, t: fx_calls.append((d, t)))
    assert fx_calls[-1][0] == fx_calls[-1][1]


class TwoOutputs(nn.Module):
    def forward(self, x):
        return torch.relu(x), x * 2.0


def test_return_tuple_flags():
    x = torch.randn(2, 3)
    ep = exported(TwoOutputs(), x)
    tuple_out = from_exported_program(ep)
    text = tuple_out.script()
    assert "gv: R.Tuple(" in text and "return gv" in text
    separate = from_exported_program(ep, no_bind_return_tuple=True).script()
    assert "gv1: R.Tensor((2, 3)" in separate and "return (gv, gv1)" in separate
    ref = torch_out(TwoOutputs(), x)
    for out, r in zip(Compiled(from_exported_program(ep, no_bind_return_tuple=True))(x), ref):
        assert rel_err(out, r) <= TOLERANCE


# ----------------------------------------------------------------------------- unsupported ops


class ThreeUnsupportedOps(nn.Module):
    """Three operators tvms has no translation for, one of them used twice."""

    def forward(self, x):
        y = torch.cumprod(torch.relu(x), dim=0)
        z = torch.cumprod(y, dim=1)
        return torch.logcumsumexp(z, 0) + torch.special.i0(x)


def test_every_unsupported_op_is_reported_at_once_with_its_nodes():
    """One error lists each operator without a translation, with every node using it and the
    line of the model that made the node, before anything is converted."""
    x = torch.randn(4, 3)
    with pytest.raises(UnsupportedOpsError) as err:
        from_exported_program(exported(ThreeUnsupportedOps(), x))
    missing = err.value.missing
    assert list(missing) == ["aten.cumprod.default", "aten.logcumsumexp.default", "aten.special_i0.default"]
    assert [u.node for u in missing["aten.cumprod.default"]] == ["cumprod", "cumprod_1"]
    here = pathlib.Path(__file__).name
    assert missing["aten.cumprod.default"][1].source.endswith("z = torch.cumprod(y, dim=1)")
    assert f"{here}:" in missing["aten.special_i0.default"][0].source
    text = str(err.value)
    assert text.startswith("3 PyTorch operators have no translation")
    assert "'cumprod_1' at " in text and "torch.special.i0(x)" in text
    assert err.value.op == "aten.cumprod.default" and err.value.node == "cumprod"  # an UnsupportedOpError too
    assert isinstance(err.value, UnsupportedOpError)

    with pytest.raises(UnsupportedOpsError) as err:
        from_fx(fx.symbolic_trace(ThreeUnsupportedOps()), [((4, 3), "float32")])
    assert list(err.value.missing) == ["torch.cumprod", "torch.logcumsumexp", "torch._C._special.special_i0"]
    assert [u.node for u in err.value.missing["torch.cumprod"]] == ["cumprod", "cumprod_1"]


def test_many_uses_of_one_op_are_counted_not_all_listed():
    class ManyCumprods(nn.Module):
        def forward(self, x):
            for _ in range(5):
                x = torch.cumprod(x, 0)
            return x

    with pytest.raises(UnsupportedOpsError) as err:
        from_exported_program(exported(ManyCumprods(), torch.randn(3)))
    assert len(err.value.missing["aten.cumprod.default"]) == 5
    assert "used by 5 nodes" in str(err.value) and "and 2 more" in str(err.value)


class TrainingDropout(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5) + 1  # F.dropout drops by default: random, not importable


def test_unsupported_argument_is_an_unsupported_op_error():
    with pytest.raises(UnsupportedOpError, match="dropout in training mode"):
        from_fx(fx.symbolic_trace(TrainingDropout()), [((4, 3), "float32")])
    with pytest.raises(UnsupportedOpError, match="dropout in training mode") as err:
        from_exported_program(exported(TrainingDropout(), torch.randn(4, 3)))
    assert err.value.source.endswith("return F.dropout(x, 0.5) + 1  # F.dropout drops by default: random, "
                                     "not importable")
    assert f"\n  at {pathlib.Path(__file__)}:" in str(err.value)


def test_bad_input_info_is_a_frontend_error(mlp):
    model, _ = mlp
    with pytest.raises(FrontendError, match="input_info describes 2"):
        from_fx(fx.symbolic_trace(model), [((1, 784), "float32"), ((1, 784), "float32")])


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_batch_norm_statistics_are_parameters_that_can_be_replaced():
    """With keep_params_as_input, the buffers the graph reads (the running statistics) are
    parameters after the weights, with their values; num_batches_tracked, which only training
    reads, is not. New statistics passed in change the output as they change PyTorch's."""
    torch.manual_seed(0)
    model = ConvBN().eval()
    x = torch.randn(2, 3, 8, 8)
    mod = from_exported_program(exported(model, x), keep_params_as_input=True, unwrap_unit_return_tuple=True)
    names = [p.name_hint for p in mod["main"].params]
    assert names == ["x", "p_conv_weight", "p_conv_bias", "p_bn_weight", "p_bn_bias",
                     "b_bn_running_mean", "b_bn_running_var"]
    compiled = Compiled(mod)
    np.testing.assert_array_equal(compiled.params[4].numpy(), model.bn.running_mean.numpy())
    assert rel_err(compiled(x), torch_out(model, x)) <= TOLERANCE

    mean, var = torch.randn(4), torch.rand(4) + 0.5
    with torch.no_grad():
        model.bn.running_mean.copy_(mean)
        model.bn.running_var.copy_(var)
    params = compiled.params[:4] + [mean.numpy(), var.numpy()]
    out = compiled.vm["main"](x.numpy(), *params).numpy()
    assert rel_err(out, torch_out(model, x)) <= TOLERANCE

    bound = from_exported_program(exported(model, x))  # without: the statistics are constants
    assert [p.name_hint for p in bound["main"].params] == ["x"]


# ----------------------------------------------------------------------------- torchvision


@pytest.fixture(scope="module")
def vision_input():
    torch.manual_seed(0)
    return torch.randn(1, 3, 224, 224)


def _vision(name: str, frontend: str, x):
    try:
        tv = import_torchvision()
    except ImportError as err:
        pytest.skip(str(err))
    torch.manual_seed(0)
    model = getattr(tv.models, name)(weights=None).eval()
    start = time.perf_counter()
    if frontend == "exported_program":
        ep = exported(model, x)
        start = time.perf_counter()
        mod = from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)
    else:
        mod = from_fx(fx.symbolic_trace(model), [((1, 3, 224, 224), "float32")], keep_params_as_input=True)
    seconds = time.perf_counter() - start
    return model, mod, seconds


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
@pytest.mark.parametrize("frontend", ["exported_program", "fx"])
def test_torchvision_model(name, frontend, vision_input):
    model, mod, seconds = _vision(name, frontend, vision_input)
    if name == "resnet18" and frontend == "exported_program":
        assert seconds < 3.0, f"importing resnet18 took {seconds:.2f} s"
    compiled = Compiled(mod)
    assert rel_err(compiled(vision_input), torch_out(model, vision_input)) <= TOLERANCE


def test_resnet18_batch_norm_is_inference(vision_input):
    """aten.batch_norm's arguments are (..., training, momentum, eps): the running statistics
    are used (training=False) with the model's epsilon."""
    _, mod, _ = _vision("resnet18", "exported_program", vision_input)
    text = detach_params(mod)[0].script()
    assert text.count("R.nn.batch_norm(") == 20
    assert "training=True" not in text and "epsilon=1.0000000000000001e-05" in text


# ----------------------------------------------------------------------------- transformers


@pytest.fixture(scope="module", params=[True, False], ids=["batch_first", "seq_first"])
def encoder_layer(request):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=request.param).eval()
    x = torch.randn(2, 10, 64) if request.param else torch.randn(10, 2, 64)
    mod = from_exported_program(exported(layer, x), keep_params_as_input=True, unwrap_unit_return_tuple=True)
    return layer, x, mod


def test_transformer_encoder_layer(encoder_layer):
    layer, x, mod = encoder_layer
    assert "R.nn.attention(" in detach_params(mod)[0].script()
    assert rel_err(Compiled(mod)(x), torch_out(layer, x)) <= TOLERANCE


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    model = GPT().eval()
    # max 15: torch specializes a slice [:t] of the 16-row mask when t may be 16.
    ep = exported(model, torch.randint(0, 50, (1, 8)), dynamic_shapes={"idx": {1: Dim("seq", min=2, max=15)}})
    mod = from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)
    return model, ep, mod, Compiled(mod)


def test_gpt_symbolic_length_is_named_as_the_dim(gpt):
    """Dim("seq") is the dim "seq" (not torch's symbol, s27), with its range as attributes."""
    _, ep, mod, _ = gpt
    (symbol,) = [str(s) for s in ep.range_constraints]
    assert symbol != "seq"
    func = mod["main"]
    assert func.params[0].name_hint == "idx"
    assert str(func.params[0].struct_info.shape[1].name) == "seq"
    assert func.attrs["tir_var_lower_bound"] == {"seq": 2}
    assert func.attrs["tir_var_upper_bound"] == {"seq": 15}
    text = detach_params(mod)[0].script()
    assert 'def main(idx: R.Tensor((1, "seq"), dtype="int64")' in text
    assert 'R.Tensor((1, "seq", 50), dtype="float32")' in text
    assert ('R.func_attr({"num_input": 1, "tir_var_lower_bound": {"seq": 2}, '
            '"tir_var_upper_bound": {"seq": 15}})') in text
    assert symbol not in text
    assert 'causal_mask="TopLeft"' in text


def test_gpt_length_outside_the_dims_range_is_a_clear_error(gpt):
    from tvmscript.runtime.vm_helpers import SizeOutOfRangeError

    _, _, _, compiled = gpt
    with pytest.raises(SizeOutOfRangeError, match=r"size 'seq' is 16 \(from argument 'idx', dimension 1\), "
                       r"but seq must be between 2 and 15"):
        compiled(torch.randint(0, 50, (1, 16)))


class ConcatPair(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], dim=1)[:, 1:] * 2


def test_inputs_sharing_a_dim_share_its_var():
    """Two inputs given one Dim share one var; a size derived from it (2 * seq) is an
    expression of it; a Dim's default lower bound is torch's."""
    batch, seq = Dim("batch", max=8), Dim("seq", min=2, max=15)
    ep = exported(ConcatPair(), torch.randn(2, 8), torch.randn(2, 16),
                  dynamic_shapes={"x": {0: batch, 1: seq}, "y": {0: batch, 1: 2 * seq}})
    mod = from_exported_program(ep)
    x, y = mod["main"].params
    assert x.struct_info.shape[0] is y.struct_info.shape[0]
    assert x.struct_info.shape[1] is not y.struct_info.shape[1]
    assert [str(d) for d in x.struct_info.shape] == ["batch", "seq"]
    assert 'y: R.Tensor(("batch", "seq * 2"), dtype="float32")' in mod.script()
    assert mod["main"].attrs["tir_var_upper_bound"] == {"batch": 8, "seq": 15}
    compiled = Compiled(mod)
    for b, n in ((1, 3), (8, 15)):
        inputs = torch.randn(b, n), torch.randn(b, 2 * n)
        assert rel_err(compiled(*inputs)[0], torch_out(ConcatPair(), *inputs)) <= TOLERANCE


def test_loaded_program_keeps_torchs_symbols_and_their_ranges(tmp_path):
    """torch.export.save does not keep the Dim names: a program read back names its sizes as
    torch does (s27); their ranges are still recorded and checked."""
    ep = exported(ConcatPair(), torch.randn(2, 8), torch.randn(2, 8),
                  dynamic_shapes={"x": {1: Dim("seq", min=2, max=15)}, "y": {1: Dim("seq", min=2, max=15)}})
    torch.export.save(ep, tmp_path / "pair.pt2")
    mod = from_exported_program(torch.export.load(tmp_path / "pair.pt2"))
    (symbol,) = [str(s) for s in ep.range_constraints]
    assert mod["main"].attrs["tir_var_upper_bound"] == {symbol: 15}


@pytest.mark.parametrize("length", [5, 12])
def test_gpt_runs_at_two_lengths(gpt, length):
    model, _, _, compiled = gpt
    idx = torch.randint(0, 50, (1, length), generator=torch.Generator().manual_seed(length))
    assert rel_err(compiled(idx), torch_out(model, idx)) <= TOLERANCE


def test_attention_with_float_and_boolean_masks():
    """A mask is R.nn.attention_bias's additive bias, broadcast to (batch, heads, q, k); a
    boolean one keeps the positions where it is True (0 there, -inf elsewhere)."""
    torch.manual_seed(0)
    inputs = [torch.randn(2, 4, 6, 8) for _ in range(3)] + [torch.randn(6, 6)]
    mod = from_exported_program(exported(MaskedAttention(), *inputs))
    assert mod.script().count("R.nn.attention_bias(") == 2
    for out, ref in zip(Compiled(mod)(*inputs), torch_out(MaskedAttention(), *inputs)):
        assert rel_err(out, ref) <= TOLERANCE


# ----------------------------------------------------------------------------- other converters


@pytest.mark.parametrize("model_cls, shapes", [(ConvZoo, [(2, 4, 16)]), (ShapeZoo, [(2, 4), (2, 8)])],
                         ids=["conv", "shape"])
@pytest.mark.parametrize("frontend", ["exported_program", "fx"])
def test_converter_zoo(model_cls, shapes, frontend):
    torch.manual_seed(0)
    model = model_cls().eval()
    inputs = [torch.randn(*s) for s in shapes]
    if frontend == "exported_program":
        mod = from_exported_program(exported(model, *inputs), keep_params_as_input=True)
    else:
        mod = from_fx(fx.symbolic_trace(model), [(s, "float32") for s in shapes], keep_params_as_input=True)
    outs = Compiled(mod)(*inputs)
    refs = torch_out(model, *inputs)
    assert len(outs) == len(refs)
    for i, (out, ref) in enumerate(zip(outs, refs)):
        assert rel_err(out, ref) <= TOLERANCE, f"output {i}"


class OneOp(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# Converters whose Relax op is being added to the op registry: run once it is there.
PENDING_OPS = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), "relax.nn.leakyrelu"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "relax.nn.gelu_tanh"),
    "cumsum": (lambda x: torch.cumsum(x, 1), "relax.cumsum"),
    "sign": (lambda x: torch.sign(x) * x, "relax.sign"),
}


@pytest.mark.parametrize("name", sorted(PENDING_OPS))
def test_ops_needing_newer_relax_ops(name):
    from tvmscript.ir.op import find_op

    fn, relax_op = PENDING_OPS[name]
    x = torch.randn(3, 5)
    model = OneOp(fn)
    if find_op(relax_op) is None:
        with pytest.raises(UnsupportedOpError, match=relax_op.replace("relax.", "R.")):
            from_exported_program(exported(model, x))
        pytest.skip(f"{relax_op} is not registered yet")
    for mod in (from_exported_program(exported(model, x)), from_fx(fx.symbolic_trace(model), [((3, 5), "float32")])):
        out = Compiled(mod)(x)
        out = out[0] if isinstance(out, list) else out
        assert rel_err(out, torch_out(model, x)) <= TOLERANCE


class Indexed(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, i, j):
        return self.fn(x, i, j)


# x (4, 5, 6, 3); i (2, 3) and j (3,), both with negative entries.
ADVANCED_INDEXING = {
    "one_index": lambda x, i, j: x[i],
    "one_inner_index": lambda x, i, j: x[:, i],
    "two_leading": lambda x, i, j: x[i, j],
    "two_inner_adjacent": lambda x, i, j: x[:, i, j],
    "two_apart": lambda x, i, j: x[i, :, j],
    "three_broadcast": lambda x, i, j: x[i.view(-1, 1)[:4], j[:2], i[0, :2].int()],
    "constant_index": lambda x, i, j: x[:, :, torch.tensor([0, -1, 2])],
    "int32_indices": lambda x, i, j: x[:, i.int(), :, j.int()],
}


@pytest.mark.parametrize("case", sorted(ADVANCED_INDEXING))
def test_advanced_indexing(case):
    """aten.index.Tensor: index tensors broadcast together, None for axes taken whole, negative
    entries counting from the end; the result's axes where PyTorch puts them."""
    torch.manual_seed(0)
    model = Indexed(ADVANCED_INDEXING[case])
    inputs = (torch.randn(4, 5, 6, 3), torch.tensor([[0, -1, 3], [2, 1, -4]]), torch.tensor([1, 0, -2]))
    mod = from_exported_program(exported(model, *inputs), unwrap_unit_return_tuple=True)
    assert "aten" not in mod.script()
    ref = torch_out(model, *inputs)
    out = Compiled(mod)(*inputs)
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)


def test_fx_getitem_with_index_tensors():
    model = Indexed(lambda x, i, j: x[:, i] + x[j, :][:, :3].sum())
    inputs = (torch.randn(4, 5), torch.tensor([[0, -1, 3], [2, 1, -4]]), torch.tensor([1, 0, -2]))
    mod = from_fx(fx.symbolic_trace(model), [((4, 5), "float32"), ((2, 3), "int64"), ((3,), "int64")])
    assert rel_err(Compiled(mod)(*inputs), torch_out(model, *inputs)) <= TOLERANCE


class BoolMask(nn.Module):
    def forward(self, x, mask):
        return x[mask]


def test_boolean_mask_index_says_why_it_is_unsupported():
    with pytest.raises(UnsupportedOpError, match="a boolean mask as an index"):
        from_exported_program(exported(BoolMask(), torch.randn(4, 3), torch.tensor([True, False, True, True])))


class ShiftedWindowMask(nn.Module):
    """swin's attention mask, built as torchvision builds it: a new zero tensor whose slices are
    assigned in place (through views), a strided slice assignment, then a roll."""

    def forward(self, x):
        mask = x.new_zeros((9, 10))
        count = 0
        for h in ((0, -5), (-5, -2), (-2, None)):
            for w in ((0, -4), (-4, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask[1::3, ::4] = -1.0
        rolled = torch.roll(x, shifts=(-2, 3), dims=(0, 1)) + torch.roll(x, 7)
        return rolled * mask + x.new_ones(10) + x.new_full((1, 10), 2.5)


class AssignmentsThroughViews(nn.Module):
    def forward(self, x, y):
        z = x.clone()
        z[:, 0] = y[:, 1]             # select + copy_
        z[1:3] += 1                   # slice + add_
        z[..., :2].copy_(y[:, :2])
        z[-1].mul_(2)
        return z


@pytest.mark.parametrize("model_cls, shapes", [(ShiftedWindowMask, [(9, 10)]),
                                               (AssignmentsThroughViews, [(4, 5), (4, 5)])])
def test_writes_through_views_roll_and_new_tensors(model_cls, shapes):
    torch.manual_seed(0)
    inputs = [torch.randn(*s) for s in shapes]
    ep = exported(model_cls(), *inputs)
    assert any(str(n.target).endswith("_.Tensor") or "copy_" in str(n.target) for n in ep.graph.nodes)
    mod = from_exported_program(ep, unwrap_unit_return_tuple=True)
    assert rel_err(Compiled(mod)(*inputs), torch_out(model_cls(), *inputs)) <= TOLERANCE


class UnsupportedAndWritesThroughAView(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[0].fill_(1.0)
        return torch.special.i0(y)


def test_unsupported_ops_are_reported_before_functionalizing(monkeypatch):
    ep = exported(UnsupportedAndWritesThroughAView(), torch.randn(3, 4))

    def functionalize(*args, **kwargs):
        raise AssertionError("functionalized a program that cannot be imported")

    monkeypatch.setattr(type(ep), "run_decompositions", functionalize)
    with pytest.raises(UnsupportedOpsError, match="aten.special_i0.default"):
        from_exported_program(ep)


def test_swin_t_matches_pytorch():
    """torchvision's swin_t (random weights): relative position biases by aten.index.Tensor,
    shifted windows by roll, their masks written through views."""
    try:
        tv = import_torchvision()
    except ImportError as err:
        pytest.skip(str(err))
    torch.manual_seed(0)
    model = tv.models.swin_t(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)  # 16x16 patches: windows of 7 with shifts in the first stages
    mod = from_exported_program(exported(model, x), keep_params_as_input=True, unwrap_unit_return_tuple=True)
    assert rel_err(Compiled(mod)(x), torch_out(model, x)) <= TOLERANCE


class Resizes(nn.Module):
    """F.interpolate in one mode at sizes and at scale factors: integer ones, and ones whose
    product with the size is not whole (where PyTorch maps coordinates by 1 / scale, not by the
    ratio of the sizes)."""

    SPECS = [dict(scale_factor=2), dict(scale_factor=1.5), dict(scale_factor=(1.7, 0.6)), dict(scale_factor=2.3),
             dict(scale_factor=0.5), dict(size=(7, 9)), dict(size=(3, 2))]

    def __init__(self, mode, align_corners=None):
        super().__init__()
        self.kw = {"mode": mode} if align_corners is None else {"mode": mode, "align_corners": align_corners}

    def forward(self, x):
        return tuple(F.interpolate(x, **spec, **self.kw) for spec in self.SPECS)


@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("nearest-exact", None), ("bilinear", False),
                                                 ("bilinear", True)])
@pytest.mark.parametrize("frontend", ["exported_program", "fx"])
def test_interpolate_matches_pytorch(mode, align_corners, frontend):
    torch.manual_seed(0)
    model = Resizes(mode, align_corners)
    x = torch.randn(2, 3, 5, 7)
    if frontend == "exported_program":
        mod = from_exported_program(exported(model, x))
        assert "upsample" not in mod.script()
    else:
        mod = from_fx(fx.symbolic_trace(model), [((2, 3, 5, 7), "float32")])
    # R.image.resize2d for the sizes and the scale 2; align_corners ignores the scales
    assert mod.script().count("R.image.resize2d(") == (7 if align_corners else 3)
    outs, refs = Compiled(mod)(x), torch_out(model, x)
    for spec, out, ref in zip(Resizes.SPECS, outs, refs):
        assert out.shape == ref.shape, spec
        assert rel_err(out, ref) <= 1e-6, spec


class AtenUpsample(nn.Module):
    """The .default overloads (an output size, with scales that only map coordinates) and
    nn.Upsample."""

    def forward(self, x):
        return (torch.ops.aten.upsample_nearest2d.default(x, [8, 4], 1.7, 0.6),
                torch.ops.aten.upsample_nearest2d.default(x, [8, 4], None, 0.6),
                torch.ops.aten.upsample_bilinear2d.default(x, [7, 9], False, None, None),
                nn.Upsample(scale_factor=2, mode="bilinear")(x))


def test_upsample_default_overloads_and_module():
    x = torch.randn(1, 2, 5, 7)
    mod = from_exported_program(exported(AtenUpsample(), x))
    for out, ref in zip(Compiled(mod)(x), torch_out(AtenUpsample(), x)):
        assert rel_err(out, ref) <= 1e-6
    model = nn.Sequential(nn.Upsample(scale_factor=2.5, mode="nearest"), nn.ReLU())
    mod = from_fx(fx.symbolic_trace(model), [((1, 2, 5, 7), "float32")])
    assert rel_err(Compiled(mod)(x), torch_out(model, x)) <= 1e-6


class SymbolicSizeResize(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="bilinear")


def test_interpolate_of_a_symbolic_size():
    ep = exported(SymbolicSizeResize(), torch.randn(1, 2, 4, 6), dynamic_shapes={"x": {2: Dim("h", min=2, max=64)}})
    mod = from_exported_program(ep, unwrap_unit_return_tuple=True)
    assert 'R.Tensor((1, 2, "h * 2", 12)' in mod.script()
    compiled = Compiled(mod)
    for h in (3, 10):
        x = torch.randn(1, 2, h, 6)
        assert rel_err(compiled(x), torch_out(SymbolicSizeResize(), x)) <= 1e-6


class LSTMModel(nn.Module):
    def __init__(self, with_state, **kwargs):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, **kwargs)
        self.with_state = with_state

    def forward(self, x, h, c):
        out, (h_n, c_n) = self.lstm(x, (h, c)) if self.with_state else self.lstm(x)
        return out, h_n, c_n


LSTM_CASES = {
    "one_layer_zero_state": (False, {}),
    "two_layers_bidirectional_batch_first": (True, dict(num_layers=2, bidirectional=True, batch_first=True)),
    "no_bias_projected_bidirectional": (True, dict(bias=False, proj_size=3, bidirectional=True)),
}


@pytest.mark.parametrize("case", sorted(LSTM_CASES))
@pytest.mark.parametrize("frontend", ["exported_program", "fx"])
def test_lstm_matches_pytorch(case, frontend):
    """nn.LSTM (aten.lstm.input) unrolled over its steps: output, h_n and c_n as PyTorch's,
    for stacked and bidirectional layers, batch_first, with and without biases, an initial state
    or a projection."""
    with_state, kwargs = LSTM_CASES[case]
    torch.manual_seed(0)
    model = LSTMModel(with_state, **kwargs).eval()
    states = (2 if kwargs.get("bidirectional") else 1) * kwargs.get("num_layers", 1)
    batch = 2 if kwargs.get("batch_first") else 3
    x = torch.randn(2, 3, 4)  # (steps, batch, features), or (batch, steps, features)
    h = torch.randn(states, batch, kwargs.get("proj_size") or 5)
    c = torch.randn(states, batch, 5)
    if frontend == "exported_program":
        mod = from_exported_program(exported(model, x, h, c), keep_params_as_input=True)
    else:
        mod = from_fx(fx.symbolic_trace(model), [(tuple(t.shape), "float32") for t in (x, h, c)],
                      keep_params_as_input=True)
    outs, refs = Compiled(mod)(x, h, c), torch_out(model, x, h, c)
    assert [o.shape for o in outs] == [r.shape for r in refs]
    for out, ref in zip(outs, refs):
        assert rel_err(out, ref) <= TOLERANCE


def test_lstm_over_a_symbolic_length_says_why_not():
    """(torch.export specializes an LSTM's length itself; an fx graph's input can leave it open.)"""
    shapes = [(("steps", 3, 4), "float32"), ((1, 3, 5), "float32"), ((1, 3, 5), "float32")]
    with pytest.raises(UnsupportedOpError, match="a symbolic sequence length .*unrolled"):
        from_fx(fx.symbolic_trace(LSTMModel(True).eval()), shapes)


class SymbolicFx(nn.Module):
    def forward(self, x):
        n = x.size(1)
        return torch.softmax(x.view(-1, n) * 2, dim=-1)[:, : n - 1]


def test_fx_symbolic_input_dims():
    mod = from_fx(fx.symbolic_trace(SymbolicFx()), [((3, "n"), "float32")])
    assert 'def main(inp_0: R.Tensor((3, "n"), dtype="float32")' in mod.script()
    compiled = Compiled(mod)
    for n in (4, 7):
        x = torch.randn(3, n)
        assert rel_err(compiled(x), torch_out(SymbolicFx(), x)) <= TOLERANCE
