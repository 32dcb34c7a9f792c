"""The seeds' own import code, run after the import change (``import tvm`` -> ``import
tvmscript as tvm``): seed 002's hand-made ``from_fx`` (section 5.4, a torch.fx graph mapped to
``emit_te`` calls, then the FashionMNIST MLP through TOPI's ``nn.dense`` and ``add``).
Seeds 000/001/003's ``from_exported_program``, ``from_fx`` and ``nn.Module`` code is run by
test_frontend_torch.py and test_frontend_nn.py."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tvmscript as tvm  # noqa: E402  (the import change)
from tvmscript import relax, te, topi  # noqa: E402
from torch import fx, nn  # noqa: E402


# ---- seed 002, section 5.2 and 5.4, as written there
def te_matmul(A: te.Tensor, B: te.Tensor) -> te.Tensor:
    assert A.shape[1] == B.shape[0]
    n = A.shape[0]
    m = B.shape[1]
    k = te.reduce_axis((0, A.shape[1]), name="k")
    return te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")


def te_relu(A: te.Tensor) -> te.Tensor:
    return te.compute(A.shape, lambda *i: te.max(A(*i), 0), name="relu")


class MyModel(nn.Module):
    def __init__(self):
        super(MyModel, self).__init__()
        self.weight = nn.Parameter(torch.randn(128, 128))

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = torch.relu(x)
        return x


def map_param(param: nn.Parameter):
    ndim = len(param.data.shape)
    return relax.const(
        param.data.cpu().numpy(), relax.DynTensorType(ndim, "float32")
    )


def fetch_attr(fx_mod, target: str):
    """Helper function to fetch an attr"""
    target_atoms = target.split('.')
    attr_itr = fx_mod
    for i, atom in enumerate(target_atoms):
        if not hasattr(attr_itr, atom):
            raise RuntimeError(f"Node referenced nonexistant target {'.'.join(target_atoms[:i])}")
        attr_itr = getattr(attr_itr, atom)
    return attr_itr


def from_fx(fx_mod, input_shapes, call_function_map, call_module_map):
    input_index = 0
    node_map = {}
    named_modules = dict(fx_mod.named_modules())

    bb = relax.BlockBuilder()

    fn_inputs = []
    fn_output = None
    with bb.function("main"):
        with bb.dataflow():
            for node in fx_mod.graph.nodes:
                if node.op == "placeholder":
                    # create input placeholder
                    shape = input_shapes[input_index]
                    input_index += 1
                    input_var = relax.Var(
                        node.target, shape, relax.DynTensorType(len(shape), "float32")
                    )
                    fn_inputs.append(input_var)
                    node_map[node] = input_var
                elif node.op == "get_attr":
                    node_map[node] = map_param(fetch_attr(fx_mod, node.target))
                elif node.op == "call_function":
                    node_map[node] = call_function_map[node.target](bb, node_map, node)
                elif node.op == "call_module":
                    named_module = named_modules[node.target]
                    node_map[node] = call_module_map[type(named_module)](bb, node_map, node, named_module)
                elif node.op == "output":
                    output = node_map[node.args[0]]
                    assert fn_output is None
                    fn_output = bb.emit_output(output)
        # output and finalize the function
        bb.emit_func_output(output, fn_inputs)
    return bb.get()


def map_matmul(bb, node_map, node: fx.Node):
    A = node_map[node.args[0]]
    B = node_map[node.args[1]]
    return bb.emit_te(te_matmul, A, B)


def map_relu(bb, node_map, node: fx.Node):
    A = node_map[node.args[0]]
    return bb.emit_te(te_relu, A)


class MLP(nn.Module):
    def __init__(self):
        super(MLP, self).__init__()
        self.linear0 = nn.Linear(784, 128, bias=True)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10, bias=True)

    def forward(self, x):
        x = self.linear0(x)
        x = self.relu(x)
        x = self.linear1(x)
        return x


def map_nn_linear(bb, node_map, node, nn_mod):
    x = node_map[node.args[0]]
    w = map_param(nn_mod.weight)
    if nn_mod.bias is not None:
        b = map_param(nn_mod.bias)
    y = bb.emit_te(topi.nn.dense, x, w)
    return bb.emit_te(topi.add, y, b)


def map_nn_relu(bb, node_map, node, nn_mod):
    return map_relu(bb, node_map, node)
# ---- end of the seed's code


def run_main(mod, *args):
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.nd.array(a) for a in args]).numpy()


def test_seed002_hand_made_from_fx_matmul_relu():
    torch.manual_seed(0)
    model = MyModel()
    fx_module = fx.symbolic_trace(model)
    MyModule = from_fx(
        fx_module,
        input_shapes=[(1, 128)],
        call_function_map={
            torch.matmul: map_matmul,
            torch.relu: map_relu,
        },
        call_module_map={},
    )
    assert [gv.name_hint for gv in MyModule.get_global_vars()] == ["main", "te_matmul", "te_relu"]
    text = MyModule.script()
    assert 'R.call_tir(cls.te_matmul, (x, metadata["relax.expr.Constant"][0])' in text
    x = np.random.default_rng(0).standard_normal((1, 128)).astype("float32")
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_main(MyModule, x), expected, rtol=1e-5, atol=1e-5)


def test_seed002_hand_made_from_fx_mlp_through_topi():
    torch.manual_seed(0)
    mlp_model = MLP()
    MLPModule = from_fx(
        fx.symbolic_trace(mlp_model),
        input_shapes=[(1, 784)],
        call_function_map={
        },
        call_module_map={
            torch.nn.Linear: map_nn_linear,
            torch.nn.ReLU: map_nn_relu,
        },
    )
    # TVM names the TOPI functions dense, add, te_relu, dense1, add1 (seed 002's printout).
    assert sorted(gv.name_hint for gv in MLPModule.get_global_vars()) == \
        ["add", "add1", "dense", "dense1", "main", "te_relu"]
    img = np.random.default_rng(1).random((1, 784)).astype("float32")
    with torch.no_grad():
        torch_res = mlp_model(torch.from_numpy(img)).numpy()
    np.testing.assert_allclose(run_main(MLPModule, img), torch_res, rtol=1e-4, atol=1e-5)
