"""``tvms.relax.frontend.nn``: export models written with the PyTorch-like API, compare the
printed modules with the seeds' and with golden files, and run them against NumPy / PyTorch.

Golden files live in tests/golden/frontend/nn_*.tvms (rewrite them with
``TVMS_REGEN_NN_GOLDENS=1 python -m pytest tests/frontends/test_frontend_nn.py`` and read the diff).
``nn_*.tvm027.txt`` are what Apache TVM 0.27 prints for the same models
(``from tvm.relax.frontend import nn`` in /work/tvmref, code identical up to the import): the
tests hold our bindings to TVM's names and ops, line by line; the printers' dialects differ
(TVM 0.27 writes ``out_dtype=None`` and module-level ``TypeVar``s, tvms the classic form).
"""

from __future__ import annotations

import math
import os
import pathlib
import re

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.build import BuildError
from tvmscript.relax.frontend import nn
from tvmscript.relax.frontend.nn import op

GOLDEN = pathlib.Path(__file__).parents[1] / "golden" / "frontend"
# The seeds' printouts, copied from ../shared/seeds (seed 001's re-indented as seed 000's).
SEEDS = pathlib.Path(__file__).parents[1] / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TVMS_REGEN_NN_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from the golden file"


def bindings(text: str) -> list:
    """(variable, callee) of each binding line: ``matmul: ... = R.matmul(`` -> (matmul, R.matmul)."""
    return re.findall(r"^\s+(\w+): .*? = (R\.[\w.]+|\w+\[\d+\]|\(?\w+)", text, re.M)


def dataflow_lines(text: str) -> list:
    """The lines of the dataflow blocks, in the classic dialect: TVM 0.27 prints an op's unset
    out_dtype as ``None`` and a prim-value argument bare (``R.tril(x, 0)``) where the classic
    printer (and the seeds) write ``"void"`` and ``R.prim_value(0)``."""
    text = text.replace("out_dtype=None", 'out_dtype="void"')
    text = re.sub(r"R\.(tril|triu)\((\w+), (-?\d+)\)", r"R.\1(\2, R.prim_value(\3))", text)
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip() == "with R.dataflow():":
            inside = True
        elif inside:
            lines.append(line.strip())
            inside = not line.strip().startswith("R.output(")
    return lines


def run(mod, name: str, *args):
    """Legalize and fuse (TVM's zero pipeline), compile for the CPU, call ``name``."""
    ex = tvms.compile(relax.get_pipeline("zero")(mod), "llvm")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    return vm[name](*args)


def random_params(params, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [(0.5 * rng.standard_normal(p.shape)).astype(p.dtype) for _, p in params]


# ----------------------------------------------------------------------------- the seeds' MLP


class RelaxModel(nn.Module):
    """Seed 000 and 001's model, as they write it."""

    def __init__(self):
        super(RelaxModel, self).__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


class MLPModel(nn.Module):
    """Seed 003's model; its printout was made with a bias-less last layer."""

    def __init__(self, fc2_bias: bool = True):
        super(MLPModel, self).__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=fc2_bias)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


MLP_SPEC = {"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}


def seed_block(path: str) -> str:
    """The ``@I.ir_module`` printout of a seed, from its copy in tests/golden/seedNNN/."""
    text = (SEEDS / path).read_text()
    start = text.index("@I.ir_module")
    end = text.index("return gv", start) + len("return gv")
    return text[start:end]


def test_seed000_relax_model_prints_as_the_seed():
    mod, params = RelaxModel().export_tvm(MLP_SPEC)
    text = mod.script()
    check_golden("nn_seed000_mlp.tvms", text)
    assert seed_block("seed000/relax_nn_module.tvms") in text
    assert [name for name, _ in params] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_seed001_relax_model_prints_as_the_seed():
    # Seed 001's printout lost its indentation; its copy is re-indented as seed 000's.
    mod, _ = RelaxModel().export_tvm(MLP_SPEC)
    assert seed_block("seed001/relax_nn_module.tvms") in mod.script()


def test_seed003_text_is_the_model_without_fc2_bias():
    """Seed 003 prints no fc2_bias/add1 although its code says nn.Linear(256, 10): its text was
    made from a bias-less layer. That model gives its text; the default gives seed 000's."""
    mod, params = MLPModel(fc2_bias=False).export_tvm(MLP_SPEC)
    text = mod.script()
    check_golden("nn_seed003_mlp_no_fc2_bias.tvms", text)
    assert text.endswith(seed_block("seed003/mlp_model.tvms") + "\n")
    assert [name for name, _ in params] == ["fc1.weight", "fc1.bias", "fc2.weight"]
    default, _ = MLPModel().export_tvm(MLP_SPEC)
    assert default.script() == (GOLDEN / "nn_seed000_mlp.tvms").read_text()


def test_exported_text_parses_back_to_the_same_module():
    mod, _ = RelaxModel().export_tvm(MLP_SPEC)
    assert tvms.ir.structural_equal(tvms.parse(mod.script()), mod)


@pytest.mark.parametrize("name", [
    "nn_seed000_mlp", "nn_seed003_mlp_no_fc2_bias", "nn_cnn", "nn_transformer", "nn_two_methods",
    "nn_packed_debug",
])
def test_goldens_are_canonical_tvmscript(name):
    """What export_tvm prints reads back as it is (goldens made by the tests above)."""
    text = (GOLDEN / f"{name}.tvms").read_text()
    assert tvms.parse(text).script() == text


def test_debug_effect_module_runs():
    """The golden of export_tvm(debug=True) compiles as it reads: ``R.null_value()`` makes the
    empty ``_io`` object (None), which forward takes and hands back beside its outputs."""
    mod = tvms.parse((GOLDEN / "nn_packed_debug.tvms").read_text())
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    effect = vm["_initialize_effect"]()
    assert list(effect) == [None]
    rng = np.random.default_rng(0)
    x, w, b = (rng.random(s, dtype=np.float32) for s in ((4, 5), (3, 5), (3,)))
    (y, z), (io,) = vm["forward"](x, (7,), effect[0], (tvms.nd.array(w), tvms.nd.array(b)))
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, rtol=1e-5)
    assert z.numpy().shape == (2, 7) and not z.numpy().any() and io is None


def test_missing_relax_op_is_named():
    with pytest.raises(nn.ExportError, match=r"R\.nn\.no_such_op is not available in this build"):
        op._relax_op("nn.no_such_op")


def mlp_reference(x, w1, b1, w2, b2):
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def test_mlp_runs_like_numpy():
    mod, params = RelaxModel().export_tvm(MLP_SPEC)
    weights = random_params(params)
    x = np.random.default_rng(1).random((1, 784), dtype=np.float32)
    out = run(mod, "forward", x, *weights).numpy()
    np.testing.assert_allclose(out, mlp_reference(x, *weights), rtol=1e-4, atol=1e-4)


def test_seed003_run_snippet():
    """Seed 003's run code with ``tvm`` -> ``tvms``. It compiles the exported module as it is,
    which needs tvms.compile to legalize high-level ops as TVM's does; until then the same
    lines are checked on the legalized module."""
    mod, param_spec = MLPModel(fc2_bias=False).export_tvm(MLP_SPEC)

    def snippet(mod):
        target = tvms.target.Target("llvm")
        ex = tvms.compile(mod, target)
        device = tvms.cpu()
        vm = relax.VirtualMachine(ex, device)
        data = np.random.rand(1, 784).astype("float32")
        tvm_data = tvms.nd.array(data, device=device)
        params = [np.random.rand(*param.shape).astype("float32") for _, param in param_spec]
        params = [tvms.nd.array(param, device=device) for param in params]
        out = vm["forward"](tvm_data, *params).numpy()
        w1, b1, w2 = (p.numpy() for p in params)
        np.testing.assert_allclose(out, np.maximum(data @ w1.T + b1, 0) @ w2.T, rtol=1e-4)
        return out

    assert snippet(relax.transform.LegalizeOps()(mod)).shape == (1, 10)
    try:
        snippet(mod)
    except BuildError as err:
        if "is not lowered yet" not in str(err):
            raise
        pytest.xfail("tvms.compile does not run LegalizeOps itself yet (TVM's tvm.compile does)")


# ----------------------------------------------------------------------------- a small CNN


class CNN(nn.Module):
    def __init__(self):
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.act = nn.SiLU()
        self.drop = nn.Dropout(0.1)
        self.conv1 = nn.Conv1D(8, 4, 3, bias=True)
        self.head = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 5))

    def forward(self, x):
        x = self.act(self.norm(self.conv(x)))
        x = self.drop(x)
        x = op.reshape(x, [2, 8, 36])
        x = op.mean(self.conv1(x), axis=2)
        return op.softmax(self.head(x), axis=-1)


CNN_SPEC = {"forward": {"x": nn.spec.Tensor((2, 3, 6, 6), "float32")}}


def test_cnn_exports_with_tvm_names():
    mod, params = CNN().export_tvm(CNN_SPEC)
    text = mod.script()
    check_golden("nn_cnn.tvms", text)
    assert [n for n, _ in params] == ["conv.weight", "conv.bias", "norm.weight", "norm.bias", "conv1.weight",
                                      "conv1.bias", "head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias"]
    assert "head_0_weight: R.Tensor((6, 4)" in text
    assert dataflow_lines(text) == dataflow_lines((GOLDEN / "nn_cnn.tvm027.txt").read_text())


def test_cnn_runs_like_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    mod, params = CNN().export_tvm(CNN_SPEC)
    weights = random_params(params, seed=2)
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 6)).astype("float32")
    out = run(mod, "forward", x, *weights).numpy()
    w = [torch.from_numpy(a) for a in weights]
    t = F.silu(F.group_norm(F.conv2d(torch.from_numpy(x), w[0], w[1], padding=1), 2, w[2], w[3]))
    t = F.conv1d(t.reshape(2, 8, 36), w[4], w[5]).mean(dim=2)
    t = F.linear(F.gelu(F.linear(t, w[6], w[7])), w[8], w[9]).softmax(-1)
    np.testing.assert_allclose(out, t.numpy(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- a transformer block


class Attention(nn.Module):
    """Causal self-attention written with nn.op (the mask made from the symbolic length)."""

    def __init__(self, d: int, heads: int):
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d)
        self.heads, self.d = heads, d

    def forward(self, x):
        b, s, _ = x.shape
        hd = self.d // self.heads
        q, k, v = op.split(self.qkv(x), 3, axis=-1)
        q, k, v = (op.permute_dims(op.reshape(t, (b, s, self.heads, hd)), [0, 2, 1, 3]) for t in (q, k, v))
        scores = op.matmul(q, op.permute_dims(k, [0, 1, 3, 2])) * (1.0 / math.sqrt(hd))
        causal = op.tril(op.ones((s, s), "float32"))
        scores = op.where(causal > 0.5, scores, op.full((s, s), -1e9, "float32"))
        out = op.matmul(op.softmax(scores, axis=-1), v)
        return self.proj(op.reshape(op.permute_dims(out, [0, 2, 1, 3]), (b, s, self.d)))


class Block(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 16, heads: int = 2):
        self.emb = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.norm = nn.RMSNorm(d, axes=-1, bias=False)
        self.mlp = nn.ModuleList([nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)])

    def forward(self, ids):
        h = self.emb(ids)
        h = h + self.attn(self.ln(h))
        return h + self.mlp(self.norm(h))


BLOCK_SPEC = {"forward": {"ids": nn.spec.Tensor((1, "n"), "int32")}}


def test_transformer_block_exports_with_tvm_names():
    mod, params = Block().export_tvm(BLOCK_SPEC)
    text = mod.script()
    check_golden("nn_transformer.tvms", text)
    assert 'def forward(ids: R.Tensor((1, "n"), dtype="int32")' in text
    assert [n for n, _ in params][-4:] == ["mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"]
    assert dataflow_lines(text) == dataflow_lines((GOLDEN / "nn_transformer.tvm027.txt").read_text())


def _layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def block_reference(ids, emb, ln_w, ln_b, qkv_w, proj_w, proj_b, norm_w, w1, b1, w2, b2, heads=2):
    h = emb[ids]                                    # (1, n, d)
    x = _layer_norm(h, ln_w, ln_b)
    s, d = h.shape[1], h.shape[2]
    q, k, v = np.split(x @ qkv_w.T, 3, axis=-1)
    q, k, v = (t.reshape(1, s, heads, d // heads).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
    scores = np.where(np.tril(np.ones((s, s))) > 0.5, scores, -1e9)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    att = (p / p.sum(-1, keepdims=True)) @ v
    h = h + att.transpose(0, 2, 1, 3).reshape(1, s, d) @ proj_w.T + proj_b
    y = h / np.sqrt((h ** 2).mean(-1, keepdims=True) + 1e-5) * norm_w
    return h + _gelu(y @ w1.T + b1) @ w2.T + b2


def test_transformer_block_runs_like_numpy_at_two_lengths():
    mod, params = Block().export_tvm(BLOCK_SPEC)
    weights = random_params(params, seed=4)
    ex = tvms.compile(relax.get_pipeline("zero")(mod), "llvm")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    rng = np.random.default_rng(5)
    for n in (3, 9):
        ids = rng.integers(0, 50, size=(1, n)).astype("int32")
        out = vm["forward"](ids, *weights).numpy()
        assert out.shape == (1, n, 16)
        np.testing.assert_allclose(out, block_reference(ids, *weights), rtol=1e-4, atol=1e-4)


def test_scaled_dot_product_attention_matches_the_written_out_attention():
    class Both(nn.Module):
        def forward(self, q, k, v):
            fused = op.scaled_dot_product_attention(q, k, v, is_causal=True)
            return fused

    spec = {"forward": {name: nn.spec.Tensor((1, "n", 2, 8), "float32") for name in "qkv"}}
    mod, _ = Both().export_tvm(spec)
    assert 'R.nn.attention(q, k, v, scale=None, causal_mask="TopLeft"' in mod.script()
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 5, 2, 8)).astype("float32") for _ in range(3))
    out = run(mod, "forward", q, k, v).numpy()
    qt, kt, vt = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    scores = qt @ kt.transpose(0, 1, 3, 2) / math.sqrt(8)
    scores = np.where(np.tril(np.ones((5, 5))) > 0, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(out, ((p / p.sum(-1, keepdims=True)) @ vt).transpose(0, 2, 1, 3),
                               rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- the ops, one by one


def _erf(x):
    return np.vectorize(math.erf)(x).astype(x.dtype)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# name -> (the Relax op it needs, nn.op on x [2, 3, 4] float32, the same in NumPy)
OP_CASES = {
    "exp": ("exp", lambda x: op.exp(x), np.exp),
    "log": ("log", lambda x: op.log(op.abs(x) + 1.0), lambda x: np.log(np.abs(x) + 1)),
    "sqrt": ("sqrt", lambda x: op.sqrt(op.abs(x)), lambda x: np.sqrt(np.abs(x))),
    "rsqrt": ("rsqrt", lambda x: op.rsqrt(op.abs(x) + 1.0), lambda x: 1 / np.sqrt(np.abs(x) + 1)),
    "square": ("square", lambda x: op.square(x), np.square),
    "sigmoid": ("sigmoid", lambda x: op.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ("tanh", lambda x: op.tanh(x), np.tanh),
    "sin_cos": ("sin", lambda x: op.sin(x) + op.cos(x), lambda x: np.sin(x) + np.cos(x)),
    "erf": ("erf", lambda x: op.erf(x), _erf),
    "floor_ceil": ("floor", lambda x: op.floor(x * 3.0) - op.ceil(x), lambda x: np.floor(x * 3) - np.ceil(x)),
    "neg": ("negative", lambda x: -x, np.negative),
    "rdiv": ("divide", lambda x: 1.0 / (op.abs(x) + 1.0), lambda x: 1 / (np.abs(x) + 1)),
    "power": ("power", lambda x: op.power(op.abs(x), 1.5), lambda x: np.abs(x) ** 1.5),
    "min_max": ("minimum", lambda x: op.minimum(x, 0.5) + op.maximum(x, -0.5),
                lambda x: np.minimum(x, 0.5) + np.maximum(x, -0.5)),
    "relu": ("nn.relu", lambda x: op.relu(x), lambda x: np.maximum(x, 0)),
    "silu": ("nn.silu", lambda x: op.silu(x), lambda x: x / (1 + np.exp(-x))),
    "gelu": ("nn.gelu", lambda x: op.gelu(x), lambda x: 0.5 * x * (1 + _erf(x / np.float32(math.sqrt(2))))),
    "gelu_tanh": ("nn.gelu_tanh", lambda x: op.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "leaky_relu": ("nn.leakyrelu", lambda x: op.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    "relu6": ("clip", lambda x: op.relu6(x * 8.0), lambda x: np.clip(x * 8, 0, 6)),
    "clip": ("clip", lambda x: op.clip(x, -0.3, 0.4), lambda x: np.clip(x, -0.3, 0.4)),
    "softmax": ("nn.softmax", lambda x: op.softmax(x, axis=1), lambda x: _softmax(x, 1)),
    "log_softmax": ("nn.log_softmax", lambda x: op.log_softmax(x), lambda x: np.log(_softmax(x))),
    "sum": ("sum", lambda x: op.sum(x, axis=[0, 2]), lambda x: x.sum((0, 2))),
    "max": ("max", lambda x: op.max(x, axis=1, keepdims=True), lambda x: x.max(1, keepdims=True)),
    "min": ("min", lambda x: op.min(x), lambda x: x.min()),
    "mean": ("mean", lambda x: op.mean(x, axis=-1), lambda x: x.mean(-1)),
    "prod": ("prod", lambda x: op.prod(x, axis=0), lambda x: x.prod(0)),
    "variance": ("variance", lambda x: op.variance(x, axis=2), lambda x: x.var(2)),
    "std": ("std", lambda x: op.std(x, axis=2), lambda x: x.std(2)),
    "argmax": ("argmax", lambda x: op.argmax(x, axis=1), lambda x: x.argmax(1)),
    "cumsum": ("cumsum", lambda x: op.cumsum(x, axis=2), lambda x: x.cumsum(2)),
    "unsqueeze_squeeze": ("expand_dims", lambda x: op.squeeze(op.unsqueeze(x, 1), 1), lambda x: x),
    "broadcast_to": ("broadcast_to", lambda x: op.broadcast_to(op.sum(x, axis=0, keepdims=True), [5, 3, 4]),
                     lambda x: np.broadcast_to(x.sum(0, keepdims=True), (5, 3, 4))),
    "repeat": ("repeat", lambda x: op.repeat(x, 2, axis=1), lambda x: np.repeat(x, 2, axis=1)),
    "tile": ("tile", lambda x: op.tile(x, [1, 2, 1]), lambda x: np.tile(x, (1, 2, 1))),
    "take": ("take", lambda x: op.take(x, op.arange(0, 4, 2, dtype="int64"), axis=2), lambda x: x[:, :, ::2]),
    "strided_slice": ("strided_slice", lambda x: op.strided_slice(x, [1], [1], [3]), lambda x: x[:, 1:3]),
    "pad": ("nn.pad", lambda x: op.pad(x, [0, 0, 1, 0, 0, 2], value=7.0),
            lambda x: np.pad(x, [(0, 0), (1, 0), (0, 2)], constant_values=7)),
    "triu": ("triu", lambda x: op.triu(x, 1), lambda x: np.triu(x, 1)),
    "chunk_concat": ("split", lambda x: op.concat(list(op.chunk(x, 2, dim=2))[::-1], dim=2),
                     lambda x: np.concatenate(np.split(x, 2, axis=2)[::-1], axis=2)),
    "permute": ("permute_dims", lambda x: op.permute(x, [2, 0, 1]), lambda x: x.transpose(2, 0, 1)),
    "where": ("where", lambda x: op.where(x < 0.0, op.zeros([2, 3, 4]), op.ones([2, 3, 4])),
              lambda x: np.where(x < 0, 0, 1).astype("float32")),
    "full": ("full", lambda x: x + op.full([4], 2.5), lambda x: x + 2.5),
    "astype": ("astype", lambda x: op.astype(x * 10.0, "int32"), lambda x: (x * 10).astype("int32")),
}


def test_each_op_computes_what_numpy_does():
    """One module holding every op whose Relax op this build has, compiled once."""
    from tvmscript.ir.op import find_op

    cases = {k: v for k, v in OP_CASES.items() if find_op("relax." + v[0]) is not None}
    assert len(cases) >= len(OP_CASES) - 6  # the ops still being added (cumsum, std, gelu_tanh, ...)

    class Zoo(nn.Module):
        def forward(self, x):
            return tuple(build(x) for _, build, _ in cases.values())

    mod, _ = Zoo().export_tvm({"forward": {"x": nn.spec.Tensor((2, 3, 4), "float32")}})
    x = np.random.default_rng(7).standard_normal((2, 3, 4)).astype("float32")
    outs = run(mod, "forward", x)
    for (name, (_, _, reference)), out in zip(cases.items(), outs):
        want = np.asarray(reference(x))
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
        assert out.numpy().dtype == want.dtype, name


def test_tensor_expr_and_tensor_ir_ops():
    from tvmscript import te

    def affine(x, scale):
        return te.compute(x.shape, lambda i, j: x[i, j] * scale + 1.0, name="affine")

    a = te.placeholder((4, 3), "float32", name="A")
    double = te.create_prim_func([a, te.compute((4, 3), lambda i, j: a[i, j] * 2.0, name="B")])

    class Custom(nn.Module):
        def forward(self, x):
            y = op.tensor_expr_op(affine, "affine", [x], {"scale": 3.0})
            return op.tensor_ir_op(double, "double", [y], nn.Tensor.placeholder((4, 3), "float32"))

    mod, _ = Custom().export_tvm({"forward": {"x": nn.spec.Tensor((4, 3), "float32")}})
    assert "double = R.call_tir(cls.double, (affine,)" in mod.script()
    x = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_allclose(run(mod, "forward", x).numpy(), (x * 3 + 1) * 2)


# ----------------------------------------------------------------------------- the API


def test_parameters_state_dict_and_data():
    model = RelaxModel()
    assert [n for n, _ in model.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert model.fc1.weight.shape == [256, 784] and model.fc1.weight.dtype == "float32"
    assert list(model.state_dict()) == [n for n, _ in model.named_parameters()]
    w = np.ones((10,), "float32")
    model.fc2.bias.data = w
    assert isinstance(model.fc2.bias.data, tvms.nd.Tensor)
    np.testing.assert_array_equal(model.fc2.bias.data.numpy(), w)
    model.fc2.bias.data = tvms.nd.array(2 * w)
    assert model.fc2.bias.data.numpy()[0] == 2
    with pytest.raises(ValueError, match=r"shape mismatch: expected \(10,\), got \(3,\)"):
        model.fc2.bias.data = np.ones(3, "float32")
    with pytest.raises(ValueError, match="dtype mismatch: expected float32, got float64"):
        model.fc2.bias.data = np.ones(10)
    with pytest.raises(ValueError, match="bound to data"):
        model.fc2.bias.to("float16")
    model.fc2.bias.data = None
    missing, unexpected = model.load_state_dict({"fc2.bias": w, "other": w}, strict=False)
    assert missing == ["fc1.weight", "fc1.bias", "fc2.weight"] and unexpected == ["other"]
    with pytest.raises(KeyError, match="missing keys"):
        model.load_state_dict({"fc2.bias": w})


def test_to_changes_the_exported_dtypes():
    model = RelaxModel()
    model.to("float16")
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float16")}})
    assert all(p.dtype == "float16" for _, p in params)
    assert 'fc2_bias: R.Tensor((10,), dtype="float16")' in mod.script()


def test_default_dtype():
    nn.set_default_dtype("float16")
    try:
        assert nn.Linear(2, 3).weight.dtype == "float16"
    finally:
        nn.set_default_dtype("float32")
    assert nn.Linear(2, 3).weight.dtype == "float32"
    with pytest.raises(ValueError, match="unknown dtype"):
        nn.set_default_dtype("f16")


def test_torch_tensor_as_parameter_data():
    torch = pytest.importorskip("torch")
    layer = nn.Linear(3, 2)
    layer.weight.data = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    np.testing.assert_array_equal(layer.weight.data.numpy(), np.arange(6, dtype="float32").reshape(2, 3))


class Ops(nn.Module):
    def forward(self, x, y):
        a = (x + 1.0) * 2 - y / 4
        b = (1.0 - a).reshape(4, 2).permute_dims(1, 0).astype("float32")
        c = op.concat([b, b], dim=0)
        return c, x.astype("float16"), op.maximum(x, y) > 0.0


def test_tensor_operators_emit_named_ops_with_constants_of_the_tensor_dtype():
    mod, _ = Ops().export_tvm({"forward": {"x": nn.spec.Tensor((2, 4), "float32"),
                                           "y": nn.spec.Tensor((2, 4), "float32")}})
    got = bindings(mod.script())
    assert [name for name, _ in got] == ["add", "mul", "divide", "subtract", "subtract1", "reshape",
                                         "permute_dims", "concat", "astype", "maximum", "greater", "gv"]
    assert 'R.add(x, R.const(1.0, "float32"))' in mod.script()
    assert 'R.subtract(R.const(1.0, "float32"), subtract)' in mod.script()
    x = np.arange(8, dtype="float32").reshape(2, 4)
    y = np.full((2, 4), 2.0, "float32")
    c, h, g = run(mod, "forward", x, y)
    a = (x + 1) * 2 - y / 4
    np.testing.assert_allclose(c.numpy(), np.concatenate([(1 - a).reshape(4, 2).T] * 2))
    assert h.numpy().dtype == np.float16 and g.numpy().dtype == np.bool_


class TwoMethods(nn.Module):
    def __init__(self):
        self.fc = nn.Linear("d", 3)

    def forward(self, x, k: int):
        return self.fc(x), op.zeros((2, k), "float32")

    def embed(self, x):
        return op.sum(x, axis=-1, keepdims=True)


def test_symbolic_dims_int_specs_and_methods():
    mod, params = TwoMethods().export_tvm({
        "forward": {"x": nn.spec.Tensor(("b", "d"), "float32"), "k": int},
        "embed": {"x": nn.spec.Tensor((2, "d"), "float32"), "$": {"param_mode": "none"}},
    })
    text = mod.script()
    check_golden("nn_two_methods.tvms", text)
    # "d" of the input and of fc's weight are one variable: the function takes a single d.
    assert 'fc_weight: R.Tensor((3, "d"), dtype="float32")' in text
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["embed", "forward"]
    assert mod["embed"].attrs["num_input"] == 1 and len(mod["embed"].params) == 1
    assert mod["forward"].attrs["num_input"] == 2
    w, b = np.ones((3, 5), "float32"), np.arange(3, dtype="float32")
    x = np.ones((4, 5), "float32")
    ex = tvms.compile(relax.get_pipeline("zero")(mod), "llvm")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    y, z = vm["forward"](x, (7,), w, b)  # an R.Shape argument is a tuple of ints
    np.testing.assert_allclose(y.numpy(), x @ w.T + b)
    assert z.numpy().shape == (2, 7)


def test_packed_params_and_debug_effect():
    mod, _ = TwoMethods().export_tvm({
        "forward": {"x": nn.spec.Tensor((4, "d"), "float32"), "k": "int", "$": {"param_mode": "packed"}},
    }, debug=True)
    text = mod.script()
    check_golden("nn_packed_debug.tvms", text)
    assert "def _initialize_effect() -> R.Tuple(R.Object):" in text
    assert "_io: R.Object = R.null_value()" in text
    forward = mod["forward"]
    assert [p.name_hint for p in forward.params] == ["x", "k", "_io", "packed_params"]
    assert forward.attrs["num_input"] == 3
    assert 'fc_weight: R.Tensor((3, d), dtype="float32") = packed_params[0]' in text


def test_tuple_inputs():
    class Pair(nn.Module):
        def forward(self, xs):
            a, b = xs
            return a * b

    mod, _ = Pair().export_tvm({"forward": {"xs": (nn.spec.Tensor((3,), "float32"),
                                                   nn.spec.Tensor((3,), "float32"))}})
    assert [name for name, _ in bindings(mod.script())] == ["xs_0", "xs_1", "mul", "gv"]
    a, b = np.arange(3, dtype="float32"), np.full(3, 3.0, "float32")
    out = run(mod, "forward", (tvms.nd.array(a), tvms.nd.array(b)))
    np.testing.assert_allclose(out.numpy(), a * b)


# ----------------------------------------------------------------------------- errors


class BadMatmul(nn.Module):
    def __init__(self):
        self.w = nn.Parameter((5, 3))

    def forward(self, x):
        return op.matmul(x, self.w)


def test_shape_errors_name_the_binding_and_the_model_line():
    with pytest.raises(nn.ExportError, match=r"'matmul' at .*test_frontend_nn.py:\d+ in forward: "
                                             r".*reduction dimensions differ"):
        BadMatmul().export_tvm({"forward": {"x": nn.spec.Tensor((2, 4), "float32")}})


def test_spec_errors():
    with pytest.raises(nn.ExportError, match="gives no spec for argument 'x'"):
        RelaxModel().export_tvm({"forward": {}})
    with pytest.raises(nn.ExportError, match=r"names arguments the method does not have: \['y'\]"):
        RelaxModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32"), "y": int}})
    with pytest.raises(nn.ExportError, match="has no method 'predict'"):
        RelaxModel().export_tvm({"predict": {}})
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        nn.spec.Tensor((1, 2), "float33")
    with pytest.raises(ValueError, match="invalid param_mode 'all'"):
        RelaxModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32"),
                                             "$": {"param_mode": "all"}}})


def test_misuse_errors():
    with pytest.raises(nn.ExportError, match=r"only be called while Module.export_tvm traces"):
        nn.Linear(2, 3).weight + 1.0

    class ReturnsInt(nn.Module):
        def forward(self, x):
            return 3

    with pytest.raises(nn.ExportError, match="method 'forward' returned int"):
        ReturnsInt().export_tvm({"forward": {"x": nn.spec.Tensor((2,), "float32")}})

    class Truncates(nn.Module):
        def forward(self, x):
            return x * 0.5

    with pytest.raises(nn.ExportError, match="int32 tensor with the fractional number 0.5"):
        Truncates().export_tvm({"forward": {"x": nn.spec.Tensor((2,), "int32")}})

    with pytest.raises(nn.ExportError, match="param_mode 'none' cannot use the module's parameters"):
        RelaxModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32"),
                                             "$": {"param_mode": "none"}}})
