"""SplitAttention: R.nn.attention written out as matmul, scale, mask, softmax, matmul (what a CUDA
build runs, compiler/transform/split_attention.py), checked against the fused op on the CPU
and for structure; what it cannot split stays fused; RewriteAttention undoes it."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.transform import RewriteAttention
from tvmscript.compiler.transform.pipeline import default_pipeline
from tvmscript.compiler.transform.split_attention import SplitAttention

RNG = np.random.default_rng(3)


def attention(n=16, m=None, heads=2, kv_heads=None, dim=8, attrs="", bias=False, dtype="float32"):
    m = m or n
    kv_heads = kv_heads or heads
    bias_param = f', bias: R.Tensor((1, {heads}, {n}, {m}), "{dtype}")' if bias else ""
    bias_arg = ", bias" if bias else ""
    return tvms.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((1, {n}, {heads}, {dim}), "{dtype}"), k: R.Tensor((1, {m}, {kv_heads}, {dim}), "{dtype}"),
             v: R.Tensor((1, {m}, {kv_heads}, {dim}), "{dtype}"){bias_param}):
        with R.dataflow():
            o = R.nn.attention(q, k, v{bias_arg}{attrs})
            R.output(o)
        return o
''')


def ops(mod) -> list:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if hasattr(b.value, "op") and hasattr(b.value.op, "name")]


def run(mod, args):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*(tvms.nd.array(a) for a in args)).numpy()


def args_for(mod, bias=False):
    shapes = [[int(d) for d in p.struct_info.shape] for p in mod["main"].params]
    return [RNG.standard_normal(s).astype("float32") for s in shapes]


@pytest.mark.parametrize("kw", [
    {},                                                    # scale 1 / sqrt(8)
    {"attrs": ", scale=0.5"},
    {"attrs": ', causal_mask="TopLeft"'},
    {"n": 8, "m": 16, "attrs": ', causal_mask="BottomRight"'},
    {"bias": True},
    {"heads": 4, "kv_heads": 1},                           # one key head for all: matmul broadcasts it
], ids=["default-scale", "scale", "top-left", "bottom-right", "bias", "one-kv-head"])
def test_split_attention_computes_what_the_fused_op_does(kw):
    mod = attention(**kw)
    split = SplitAttention()(mod)
    assert "relax.nn.attention" not in ops(split) and "relax.nn.attention_bias" not in ops(split)
    assert ops(split).count("relax.matmul") == 2 and "relax.nn.softmax" in ops(split)
    args = args_for(mod)
    np.testing.assert_allclose(run(split, args), run(mod, args), rtol=1e-5, atol=1e-5)


def test_what_cannot_be_split_stays_fused():
    windowed = attention(attrs=', causal_mask="TopLeft", window_size=4')
    assert SplitAttention()(windowed)["main"] is windowed["main"]
    grouped = attention(heads=4, kv_heads=2)                # 2 groups: matmul cannot broadcast it
    assert SplitAttention()(grouped)["main"] is grouped["main"]


def test_rewrite_attention_undoes_it():
    mod = attention(attrs=', causal_mask="TopLeft"')
    back = RewriteAttention()(SplitAttention()(mod))
    assert "relax.nn.attention" in ops(back) and "relax.nn.softmax" not in ops(back)


def test_cuda_builds_split_it_and_cpu_builds_keep_it():
    mod = attention(attrs=', causal_mask="TopLeft"')
    cuda = {gv.name_hint for gv in default_pipeline("cuda")(mod).functions}
    cpu = {gv.name_hint for gv in default_pipeline("llvm")(mod).functions}
    assert "attention" in cpu and "attention" not in cuda and any("softmax" in f for f in cuda)
