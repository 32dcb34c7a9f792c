"""The default CPU schedule on attention (`schedule_cpu.attention`): the legalized chain of
``R.nn.attention`` becomes one flash-structured nest (online softmax over key blocks), for
static and symbolic sequence lengths, causal masks, a bias and grouped-query heads.

Each case checks the structure (the rule fired: one flash block, no buffer of the score
tensor's size) and the numbers, against a NumPy softmax(Q K^T * scale + bias) V in float64.
The flash nest adds the terms of the sums in another order and divides after the product with
V, so results are within a few float32 ulps of the reference, not the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from tvmscript import tir
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_cpu.attention import BLOCK_K, BLOCK_Q, FLASH_BLOCK
from tvmscript.relax import op

from support import schedule_corpus as sc
from support import tir_walk

F32 = "float32"
N = tir.Var("int64", "n")


def _kernel(build, specs) -> tir.PrimFunc:
    return sc.zero_kernel(build, [(shape, F32) for shape in specs])


def _attention(causal=None, scale=None, bias=False):
    if bias:
        return lambda q, k, v, b: [op.nn.attention(q, k, v, b, scale=scale, causal_mask=causal)]
    return lambda q, k, v: [op.nn.attention(q, k, v, scale=scale, causal_mask=causal)]


def reference(q, k, v, bias=None, scale=None, causal=None):
    """softmax(Q K^T * scale + bias, masked) V in float64, TVM's layouts; a row with no
    visible key gives 0."""
    q, k, v = (x.astype("float64") for x in (q, k, v))
    heads, kv_heads = q.shape[2], k.shape[2]
    k, v = np.repeat(k, heads // kv_heads, axis=2), np.repeat(v, heads // kv_heads, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, k) * (scale if scale is not None else 1 / np.sqrt(q.shape[3]))
    if bias is not None:
        s = s + bias
    n, m = q.shape[1], k.shape[1]
    visible = np.ones((n, m), bool)
    if causal is not None:
        offset = m - n if causal == "BottomRight" else 0
        visible = np.arange(m)[None, :] <= np.arange(n)[:, None] + offset
    s = np.where(visible, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    p = np.where(visible, np.exp(s - np.where(np.isfinite(top), top, 0)), 0)
    total = p.sum(-1, keepdims=True)
    p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
    return np.einsum("bhij,bjhd->bihd", p, v)


def _run(func, arrays, out_shape, sizes=None):
    kernel = build_cpu({"kernel": func}, schedule=True)["kernel"]
    out = np.full(out_shape, np.nan, F32)
    kernel(*arrays, out)
    return out


def _inputs(rng, *shapes):
    return [rng.standard_normal(s).astype(F32) for s in shapes]


def _close(out, ref):
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-6)


# ----------------------------------------------------------------------------- structure


def _assert_flash(func: tir.PrimFunc) -> None:
    """The scheduled ``func`` is one flash nest: a flash block in a parallel loop, and every
    buffer it allocates local and of block size (no score tensor)."""
    scheduled = default_schedule(func)
    w = tir_walk.walk(scheduled.body)
    flash = [b for b in w.blocks if b.name == FLASH_BLOCK]
    assert len(flash) == 1, "the attention rule did not fire"
    assert w.loops[0].kind == "parallel"
    limit = BLOCK_Q * max(BLOCK_K, 256)
    for blk in w.blocks:
        for buf in blk.alloc_buffers:
            assert buf.scope == "local" and all(isinstance(d, tir.IntImm) for d in buf.shape), buf
            assert int(np.prod([d.value for d in buf.shape])) <= limit, buf
    assert not any("T_softmax" in b.name or "batch_matmul" in b.name for b in w.blocks)


def test_flash_structure_static():
    _assert_flash(_kernel(_attention(), [(1, 197, 12, 64)] * 3))


def test_flash_structure_symbolic_causal():
    _assert_flash(_kernel(_attention("TopLeft"), [(1, N, 4, 16)] * 3))


def test_causal_skips_blocks_above_the_diagonal():
    """Under a causal mask the key-block loop's extent depends on the query block."""
    func = default_schedule(_kernel(_attention("TopLeft"), [(1, 256, 2, 16)] * 3))
    (flash,) = [b for b in tir_walk.walk(func.body).blocks if b.name == FLASH_BLOCK]
    key_loop = [lp for lp in tir_walk.walk(flash.body).loops if lp.loop_var.name == "kb"][0]
    assert not isinstance(key_loop.extent, tir.IntImm)


def test_other_functions_untouched():
    """A softmax alone, and attention with an epilogue fused after it, keep the generic path."""
    soft = _kernel(lambda x: [op.nn.softmax(x, axis=-1)], [(4, 64)])
    assert not any(b.name == FLASH_BLOCK for b in tir_walk.walk(default_schedule(soft).body).blocks)


def test_epilogue_after_attention_falls_back_exactly():
    """The output doubled after attention, fused into the same PrimFunc, or not: either way
    the results are attention's."""
    funcs = sc.zero_kernels(lambda q, k, v: [op.multiply(op.nn.attention(q, k, v), op.const(np.float32(2)))],
                            [((1, 20, 2, 8), F32)] * 3)
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng, (1, 20, 2, 8), (1, 20, 2, 8), (1, 20, 2, 8))
    ref = 2 * reference(q, k, v)
    x = [q, k, v]
    for name, func in funcs.items():  # the chain's functions, in call order
        fused = "attention" in name and "multiply" in name
        if fused:
            _close(_run(func, x, ref.shape), ref)
            return
    attention = next(f for n, f in funcs.items() if n.startswith("attention"))
    mid = _run(attention, x, ref.shape)
    _close(2 * mid, ref)


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("shape", [(1, 197, 12, 64), (2, 5, 3, 7), (1, 33, 2, 16), (2, 65, 1, 8)])
def test_static_matches_numpy(shape):
    func = _kernel(_attention(), [shape] * 3)
    _assert_flash(func)
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, shape, shape, shape)
    _close(_run(func, [q, k, v], shape), reference(q, k, v))


def test_kv_length_and_value_dim_differ():
    qs, ks, vs = (2, 9, 3, 8), (2, 70, 3, 8), (2, 70, 3, 5)
    func = _kernel(_attention(scale=0.3), [qs, ks, vs])
    _assert_flash(func)
    rng = np.random.default_rng(1)
    q, k, v = _inputs(rng, qs, ks, vs)
    _close(_run(func, [q, k, v], (2, 9, 3, 5)), reference(q, k, v, scale=0.3))


@pytest.mark.parametrize("causal", ["TopLeft", "BottomRight"])
@pytest.mark.parametrize("seq,seq_kv", [(128, 128), (40, 100), (100, 40), (1, 70)])
def test_causal_matches_numpy(causal, seq, seq_kv):
    """Incl. rows with no visible key (BottomRight, more queries than keys): 0, not NaN."""
    qs, ks = (1, seq, 8, 32), (1, seq_kv, 8, 32)
    func = _kernel(_attention(causal), [qs, ks, ks])
    _assert_flash(func)
    rng = np.random.default_rng(2)
    q, k, v = _inputs(rng, qs, ks, ks)
    _close(_run(func, [q, k, v], qs), reference(q, k, v, causal=causal))


@pytest.mark.parametrize("bias_shape", [(2, 3, 37, 45), (1, 1, 37, 45), (2, 3, 1, 45)])
def test_bias_matches_numpy(bias_shape):
    qs, ks = (2, 37, 3, 16), (2, 45, 3, 16)
    func = _kernel(_attention(bias=True), [qs, ks, ks, bias_shape])
    _assert_flash(func)
    rng = np.random.default_rng(3)
    q, k, v, bias = _inputs(rng, qs, ks, ks, bias_shape)
    _close(_run(func, [q, k, v, bias], qs), reference(q, k, v, bias=bias))


@pytest.mark.parametrize("causal", [None, "TopLeft"])
def test_grouped_query_matches_numpy(causal):
    qs, ks = (1, 50, 8, 16), (1, 50, 2, 16)
    func = _kernel(_attention(causal), [qs, ks, ks])
    _assert_flash(func)
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, qs, ks, ks)
    _close(_run(func, [q, k, v], qs), reference(q, k, v, causal=causal))


@pytest.fixture(scope="module")
def symbolic_kernels() -> dict:
    return {causal: build_cpu({"kernel": _kernel(_attention(causal), [(1, N, 4, 16), (1, N, 2, 16), (1, N, 2, 16)])},
                              schedule=True)["kernel"] for causal in (None, "TopLeft", "BottomRight")}


@pytest.mark.parametrize("causal", [None, "TopLeft", "BottomRight"])
@pytest.mark.parametrize("n", [1, 7, BLOCK_Q - 1, BLOCK_K, BLOCK_K + 1, 128, 300])
def test_symbolic_length_matches_numpy(symbolic_kernels, causal, n):
    rng = np.random.default_rng(n)
    q, k, v = _inputs(rng, (1, n, 4, 16), (1, n, 2, 16), (1, n, 2, 16))
    out = np.full((1, n, 4, 16), np.nan, F32)
    symbolic_kernels[causal](q, k, v, out)
    _close(out, reference(q, k, v, causal=causal))
