"""RewriteAttention: hand-written attention (matmul, scale, mask, softmax, matmul) rewritten into
R.nn.attention, checked for structure (one attention op, no softmax, the permutes gone) and
against NumPy computing the original chain; chains that are not attention stay as they were;
a GPT block imported from PyTorch computes what PyTorch does."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform import BindParams, ComposePermutes, RewriteAttention, bound_inference_passes

H, D = 2, 8
RNG = np.random.default_rng(0)


def attention_module(n="16", m=None, scale="R.multiply(s, R.const(0.25, \"float32\"))", mask=None,
                     extra_params="", softmax_axis=-1, returns="o", kv_heads=H):
    """``main(q, k, v, ...)``: q (1, n, H, D), k (1, H, m, D) (heads first: no permute to look
    through), v (1, m, H, D); scores ``q @ k^T``, ``scale`` of ``s``, then ``mask`` of ``l``
    (lines computing ``l`` from ``s2``), softmax, matmul, permuted back to (1, n, H, D)."""
    m = m or n
    symbolic = {d.strip('"') for d in (n, m) if d.startswith('"')}
    decl = "".join(f"        {d} = T.int64()\n" for d in sorted(symbolic))
    mask_lines = mask or ""
    # no scale: the matmul computes s2 itself (an alias ``s2 = s`` would be a link of its own)
    scores = f"s = R.matmul(qt, kt)\n            s2 = {scale}" if scale else "s2 = R.matmul(qt, kt)"
    logits = "l" if mask else "s2"
    return tvms.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((1, {n}, {H}, {D}), "float32"), k: R.Tensor((1, {kv_heads}, {m}, {D}), "float32"),
             v: R.Tensor((1, {m}, {kv_heads}, {D}), "float32"){extra_params}):
{decl}        with R.dataflow():
            qt = R.permute_dims(q, axes=[0, 2, 1, 3])
            kt = R.permute_dims(k, axes=[0, 1, 3, 2])
            vt = R.permute_dims(v, axes=[0, 2, 1, 3])
            {scores}
            {mask_lines}
            p = R.nn.softmax({logits}, axis={softmax_axis})
            o1 = R.matmul(p, vt)
            o = R.permute_dims(o1, axes=[0, 2, 1, 3])
            gv = {returns}
            R.output(gv)
        return gv
''')


def ops_in(mod) -> list:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)]


def attention_call(mod):
    calls = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)
             and b.value.op.name.startswith("relax.nn.attention")]
    assert len(calls) == 1
    return calls[0]


def run(mod, *args):
    mod = bound_inference_passes()(mod)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*(tvms.nd.array(a) for a in args)).numpy()


def inputs(n, m=None, kv_heads=H):
    m = m or n
    return (RNG.standard_normal((1, n, H, D)).astype("float32"),
            RNG.standard_normal((1, kv_heads, m, D)).astype("float32"),
            RNG.standard_normal((1, m, kv_heads, D)).astype("float32"))


def reference(q, k, v, scale=0.25, hidden=None, bias=None):
    """The chain in float64: (1, n, H, D) out. ``hidden`` is True where a score is -inf."""
    s = np.einsum("bnhd,bhmd->bhnm", q.astype("float64"), k.astype("float64")) * scale
    if bias is not None:
        s = s + bias
    if hidden is not None:
        s = np.where(hidden, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhnm,bmhd->bnhd", p, v.astype("float64"))


def tril(size):
    return np.tril(np.ones((1, 1, size, size), "float32"))


CAUSAL = '''mask = R.equal(tril, R.const(0.0, "float32"))
            l = R.where(mask, R.const("-inf", "float32"), s2)'''
TRIL_PARAM = ', tril: R.Tensor((1, 1, 16, 16), "float32")'


CAUSAL_KEPT = '''keep = R.not_equal(tril, R.const(0.0, "float32"))
            l = R.where(keep, s2, R.const("-inf", "float32"))'''


@pytest.mark.parametrize("mask", [CAUSAL, CAUSAL_KEPT], ids=["hidden-where-true", "kept-where-true"])
def test_static_causal_mask_becomes_causal_attention(mask):
    mod = BindParams("main", {"tril": tril(16)})(attention_module(mask=mask, extra_params=TRIL_PARAM))
    new = bound_inference_passes()(mod)
    assert "relax.nn.softmax" not in ops_in(new) and ops_in(new).count("relax.matmul") == 0
    call = attention_call(new)
    assert call.attrs["causal_mask"] == "TopLeft" and call.attrs["scale"] == 0.25
    q, k, v = inputs(16)
    hidden = np.triu(np.ones((16, 16), bool), 1)
    np.testing.assert_allclose(run(mod, q, k, v), reference(q, k, v, hidden=hidden), rtol=1e-5, atol=1e-5)


def test_permute_inserted_where_no_permute_is_looked_through():
    """k arrives heads-first, so its (b, m, h, d) layout is one inserted permute_dims, composed
    with the transpose before the first matmul into one."""
    new = bound_inference_passes()(attention_module())
    assert ops_in(new) == ["relax.permute_dims", "relax.nn.attention"]
    assert attention_call(new).args[0].name_hint == "q"


DYNAMIC_CAUSAL = '''r1 = R.arange(R.prim_value(0), R.prim_value(n), R.prim_value(1), dtype="int64")
            t1 = R.take(tril, r1, axis=2)
            r2 = R.arange(R.prim_value(0), R.prim_value(n), R.prim_value(1), dtype="int64")
            t2 = R.take(t1, r2, axis=3)
            mask = R.equal(t2, R.const(0.0, "float32"))
            l = R.where(mask, R.const("-inf", "float32"), s2)'''


@pytest.mark.parametrize("length", [1, 7, 130])
def test_dynamic_causal_mask_sliced_from_a_constant(length):
    mod = attention_module(n='"n"', mask=DYNAMIC_CAUSAL, extra_params=', tril: R.Tensor((1, 1, 160, 160), "float32")')
    mod = BindParams("main", {"tril": tril(160)})(mod)
    assert attention_call(bound_inference_passes()(mod)).attrs["causal_mask"] == "TopLeft"
    q, k, v = inputs(length)
    hidden = np.triu(np.ones((length, length), bool), 1)
    np.testing.assert_allclose(run(mod, q, k, v), reference(q, k, v, hidden=hidden), rtol=1e-5, atol=1e-5)


def test_constant_mask_that_is_not_causal_becomes_a_bias():
    """One changed element: the values are checked, so the mask is a bias, not causal."""
    ones = tril(16)
    ones[0, 0, 5, 2] = 0.0
    mod = BindParams("main", {"tril": ones})(attention_module(mask=CAUSAL, extra_params=TRIL_PARAM))
    call = attention_call(bound_inference_passes()(mod))
    assert call.op.name == "relax.nn.attention_bias" and call.attrs["causal_mask"] is None
    q, k, v = inputs(16)
    np.testing.assert_allclose(run(mod, q, k, v), reference(q, k, v, hidden=ones[:, :, :, :] == 0),
                               rtol=1e-5, atol=1e-5)


def test_bottom_right_causal_mask_with_fewer_queries():
    hidden = np.triu(np.ones((1, 1, 4, 16), bool), 1 + 16 - 4)
    mod = attention_module(n="4", m="16", mask=CAUSAL, extra_params=', tril: R.Tensor((1, 1, 4, 16), "float32")')
    mod = BindParams("main", {"tril": (~hidden).astype("float32")})(mod)
    assert attention_call(bound_inference_passes()(mod)).attrs["causal_mask"] == "BottomRight"
    q, k, v = inputs(4, 16)
    np.testing.assert_allclose(run(mod, q, k, v), reference(q, k, v, hidden=hidden), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kept", [False, True])
def test_runtime_boolean_mask_becomes_a_bias(kept):
    """where(mask, -inf, s) and where(keep, s, -inf), the mask an input (1, 1, n, n)."""
    line = ('l = R.where(mask, s2, R.const("-inf", "float32"))' if kept
            else 'l = R.where(mask, R.const("-inf", "float32"), s2)')
    mod = attention_module(mask=line, extra_params=', mask: R.Tensor((1, 1, 16, 16), "bool")')
    new = RewriteAttention()(mod)
    assert "relax.nn.softmax" not in ops_in(new) and attention_call(new).op.name == "relax.nn.attention_bias"
    hidden = RNG.random((1, 1, 16, 16)) < 0.3
    hidden[..., np.arange(16), np.arange(16)] = False  # no row entirely hidden
    q, k, v = inputs(16)
    mask = ~hidden if kept else hidden
    np.testing.assert_allclose(run(mod, q, k, v, mask), reference(q, k, v, hidden=hidden), rtol=1e-5, atol=1e-5)


def test_additive_bias_and_a_divide_by_sqrt_d():
    mod = attention_module(scale=f'R.divide(s, R.const({np.sqrt(D)}, "float32"))', mask="l = R.add(s2, bias)",
                           extra_params=', bias: R.Tensor((1, 2, 16, 16), "float32")')
    call = attention_call(RewriteAttention()(mod))
    assert call.op.name == "relax.nn.attention_bias" and call.attrs["scale"] == pytest.approx(1 / np.sqrt(D))
    q, k, v = inputs(16)
    bias = RNG.standard_normal((1, H, 16, 16)).astype("float32")
    np.testing.assert_allclose(run(mod, q, k, v, bias), reference(q, k, v, scale=1 / np.sqrt(D), bias=bias),
                               rtol=1e-5, atol=1e-5)


def test_no_scale_and_no_mask():
    mod = attention_module(scale=None)
    assert attention_call(RewriteAttention()(mod)).attrs["scale"] == 1.0
    q, k, v = inputs(16)
    np.testing.assert_allclose(run(mod, q, k, v), reference(q, k, v, scale=1.0), rtol=1e-5, atol=1e-5)


def test_one_key_head_broadcast_by_matmul():
    """Key and value with one head, which matmul broadcasts to all: grouped-query attention
    with one group."""
    mod = attention_module(kv_heads=1)
    assert attention_call(RewriteAttention()(mod)).op.name == "relax.nn.attention"
    q, k, v = inputs(16, kv_heads=1)
    expected = reference(q, np.repeat(k, H, axis=1), np.repeat(v, H, axis=2))
    np.testing.assert_allclose(run(mod, q, k, v), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", [
    {"returns": "(o, p)"},                                                   # the probabilities used twice
    {"softmax_axis": 2},                                                     # softmax over the queries
    {"scale": "R.multiply(s, w)", "extra_params": ', w: R.Tensor((16,), "float32")'},  # not a scalar
    {"scale": "R.multiply(s, R.const(0.25, \"float32\"))",                  # a mask that does not broadcast
     "mask": 'l = R.where(mask, R.const("-inf", "float32"), s2)',
     "extra_params": ', mask: R.Tensor((16, 1), "bool")'},
], ids=["second-use", "softmax-axis", "tensor-scale", "mask-shape"])
def test_chains_that_are_not_attention_stay(variant):
    mod = attention_module(**variant)
    new = RewriteAttention()(mod)
    assert new["main"] is mod["main"]
    assert "relax.nn.softmax" in ops_in(new)


def test_compose_permutes_cancels_an_inverse_pair_and_merges_others():
    mod = tvms.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 4), "float32")):
        with R.dataflow():
            a = R.permute_dims(x, axes=[1, 0, 2])
            b = R.permute_dims(a, axes=[1, 0, 2])
            c = R.permute_dims(a, axes=[2, 0, 1])
            gv = (b, c)
            R.output(gv)
        return gv
''')
    new = ComposePermutes()(mod)
    values = {bd.var.name_hint: bd.value for bd in new["main"].body.blocks[0].bindings}
    assert "a" not in values  # read by nothing once both readers read x
    b, c = values["b"], values["c"]
    assert b is mod["main"].params[0]
    assert c.args[0] is mod["main"].params[0] and list(c.attrs["axes"]) == [2, 1, 0]


def test_gpt_blocks_from_pytorch():
    torch = pytest.importorskip("torch")
    from torch.export import Dim, export

    from support.torch_models import GPTBlock
    from tvmscript.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = torch.nn.Sequential(GPTBlock(32, 4, 24, sdpa=False), GPTBlock(32, 4, 24, sdpa=False)).eval()
    with torch.no_grad():
        ep = export(model, (torch.randn(1, 8, 32),), dynamic_shapes=({1: Dim("T", min=2, max=23)},))
    mod = from_exported_program(ep, unwrap_unit_return_tuple=True)
    bound = bound_inference_passes()(mod)
    assert "relax.nn.softmax" not in ops_in(bound) and ops_in(bound).count("relax.nn.attention") == 2
    vm = tvms.relax.VirtualMachine(tvms.compile(bound, "llvm"), tvms.cpu())
    for length in (3, 17):
        x = torch.randn(1, length, 32)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(vm["main"](tvms.nd.array(x.numpy())).numpy(), expected, rtol=1e-4, atol=1e-4)


def test_the_attention_rewrite_is_for_the_cpu_only():
    """On a GPU the written-out matmuls and softmax get DLight's tensor-core and reduction
    schedules; a fused ``R.nn.attention`` would get its Fallback (one thread per score)."""
    from tvmscript.compiler.transform.pipeline import default_pipeline

    mod = BindParams("main", {"tril": tril(16)})(attention_module(mask=CAUSAL, extra_params=TRIL_PARAM))
    def kernels(m):
        return sorted(gv.name_hint for gv in m.functions if gv.name_hint != "main")

    assert "relax.nn.attention" in ops_in(bound_inference_passes()(mod))
    assert "relax.nn.attention" not in ops_in(bound_inference_passes(target="cuda")(mod))
    assert "attention" in kernels(default_pipeline("llvm")(mod))
    assert "attention" not in kernels(default_pipeline("cuda")(mod))
    assert any("softmax" in k for k in kernels(default_pipeline("cuda")(mod)))
