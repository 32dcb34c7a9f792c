"""The neural-network ops (``R.nn.*``, transposed convolutions and 1-D pooling included): each
legalized on several shapes and attribute settings, compiled for the CPU and compared with a
NumPy reference (tests/support/op_check.py), plus inference errors and located diagnostics for bad
attributes in TVMScript text."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.diagnostics import TVMScriptError
from support.op_check import PATTERN_KINDS, assert_located, build_op_module, check_op, run
from tvmscript.compiler.transform import LegalizeOps, analyze_op_pattern

RNG = np.random.default_rng(7)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------- NumPy references


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_layer_norm(x, gamma, beta, axes, eps=1e-5, center=True, scale=True):
    axes = tuple(sorted(a % x.ndim for a in axes))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if scale:
        out = out * gamma.reshape(bshape)
    if center:
        out = out + beta.reshape(bshape)
    return out.astype(x.dtype)


def np_batch_norm(x, gamma, beta, mean, var, axis, eps=1e-5, momentum=0.1, training=True):
    axis %= x.ndim
    others = tuple(i for i in range(x.ndim) if i != axis)
    bshape = [x.shape[i] if i == axis else 1 for i in range(x.ndim)]
    if training:
        bm, bv = x.mean(axis=others), x.var(axis=others)
        new_mean, new_var = (1 - momentum) * mean + momentum * bm, (1 - momentum) * var + momentum * bv
    else:
        bm, bv, new_mean, new_var = mean, var, mean, var
    out = (x - bm.reshape(bshape)) / np.sqrt(bv.reshape(bshape) + eps) * gamma.reshape(bshape) + beta.reshape(bshape)
    return [out.astype(x.dtype), new_mean.astype(x.dtype), new_var.astype(x.dtype)]


def np_conv2d(x, w, strides, padding, dilation, groups):
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    o, i, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    opg = o // groups
    for f in range(o):
        g = f // opg
        for ry in range(kh):
            for rx in range(kw):
                patch = xp[:, g * i:(g + 1) * i, ry * dh: ry * dh + sh * (oh - 1) + 1: sh,
                           rx * dw: rx * dw + sw * (ow - 1) + 1: sw]
                out[:, f] += np.einsum("nchw,c->nhw", patch, w[f, :, ry, rx])
    return out.astype(x.dtype)


def _pool_out(size, k, s, d, pb, pa, ceil):
    eff = (k - 1) * d + 1
    num = size + pb + pa - eff
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= size + pb:
        out -= 1
    return out


def np_pool2d(x, kind, pool_size, strides, dilation, padding, ceil_mode=False, count_include_pad=False):
    """Pooling as TVM (and PyTorch) define it: windows over the padded input, ceil mode keeping
    a last partial window that starts inside the input or its leading padding; averages divide
    by the taps inside the input, or inside the explicitly padded input with count_include_pad."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    pt, pl, pb, pr = padding
    oh = _pool_out(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = _pool_out(w, kw, sw, dw, pl, pr, ceil_mode)
    out = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            ys = [i * sh + a * dh - pt for a in range(kh)]
            xs = [j * sw + b * dw - pl for b in range(kw)]
            iy = [y for y in ys if 0 <= y < h]
            ix = [v for v in xs if 0 <= v < w]
            if kind == "max":
                # padded taps hold the dtype's lowest value, below any element
                vals = x[:, :, iy][:, :, :, ix].reshape(n, c, -1)
                out[:, :, i, j] = vals.max(axis=2) if vals.shape[2] else np.finfo(x.dtype).min
            else:
                total = x[:, :, iy][:, :, :, ix].sum(axis=(2, 3))
                if count_include_pad:
                    cy = sum(1 for y in ys if -pt <= y < h + pb)
                    cx = sum(1 for v in xs if -pl <= v < w + pr)
                else:
                    cy, cx = len(iy), len(ix)
                out[:, :, i, j] = total / max(cy * cx, 1)
    return out


def np_adaptive_avg_pool2d(x, out_size):
    n, c, h, w = x.shape
    oh, ow = out_size
    out = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        y0, y1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            x0, x1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, y0:y1, x0:x1].mean(axis=(2, 3))
    return out


# ----------------------------------------------------------------------------- softmax


@pytest.mark.parametrize("shape,axis", [((2, 5), -1), ((3, 4, 5), 1), ((3, 4, 5), -3), ((7,), 0)])
def test_softmax(shape, axis):
    x = rand(*shape) * 3
    check_op(relax.op.nn.softmax, [x], np_softmax(x, axis), axis=axis)


@pytest.mark.parametrize("shape,axis", [((2, 5), -1), ((3, 4, 5), -2), ((4, 3), 0)])
def test_log_softmax(shape, axis):
    x = rand(*shape) * 3
    check_op(relax.op.nn.log_softmax, [x], np.log(np_softmax(x, axis)), rtol=1e-5, atol=1e-5, axis=axis)


def test_softmax_prints_tvm_blocks():
    mod, _ = build_op_module(relax.op.nn.softmax, [rand(2, 3, 4)], axis=1)
    text = LegalizeOps()(mod).script()
    for block in ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        assert f'T.block("{block}")' in text
    assert 'T.block_attr({"axis": 1})' in text
    assert "for i0, i1, k in T.grid(T.int64(2), T.int64(4), T.int64(3)):" in text


# ----------------------------------------------------------------------------- normalization


@pytest.mark.parametrize("shape,axes,center,scale", [
    ((2, 3, 8), [-1], True, True),
    ((2, 3, 4), [1, 2], True, False),
    ((4, 3, 5), [0, -1], False, True),
])
def test_layer_norm(shape, axes, center, scale):
    x = rand(*shape)
    nshape = [shape[a] for a in sorted(a % len(shape) for a in axes)]
    g, b = rand(*nshape), rand(*nshape)
    check_op(relax.op.nn.layer_norm, [x, g, b], np_layer_norm(x, g, b, axes, 1e-5, center, scale),
             rtol=1e-4, atol=1e-5, axes=axes, center=center, scale=scale)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((4, 5), -1), ((2, 3, 2, 2), 1)])
def test_batch_norm_training(shape, axis):
    x = rand(*shape)
    ch = shape[axis]
    g, b, m = rand(ch), rand(ch), rand(ch)
    v = np.abs(rand(ch)) + 0.5
    check_op(relax.op.nn.batch_norm, [x, g, b, m, v], np_batch_norm(x, g, b, m, v, axis, momentum=0.2),
             rtol=1e-4, atol=1e-5, axis=axis, momentum=0.2)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((2, 4, 3, 3), -3)])
def test_batch_norm_inference(shape, axis):
    """``training=False`` normalizes with the moving statistics. Its legalized function is a
    broadcast, not the reduction the op table declares for the default (training) form, so it
    is checked here instead of through check_op's pattern check."""
    x = rand(*shape)
    ch = shape[axis]
    g, b, m = rand(ch), rand(ch), rand(ch)
    v = np.abs(rand(ch)) + 0.5
    mod, arrays = build_op_module(relax.op.nn.batch_norm, [x, g, b, m, v], axis=axis, training=False)
    text = mod.script()
    assert "training=False" in text and tvms.parse(text).script() == text
    legal = LegalizeOps()(mod)
    (prim,) = [f for f in legal.functions.values() if isinstance(f, tir.PrimFunc)]
    assert analyze_op_pattern(prim) <= PATTERN_KINDS["injective"]
    got = run(legal, arrays)
    for g_, e in zip(got, np_batch_norm(x, g, b, m, v, axis, training=False)):
        np.testing.assert_allclose(g_, e, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- conv2d


CONV_CASES = [
    # data, weight, strides, padding, dilation, groups
    ((1, 4, 9, 9), (6, 2, 3, 3), 1, 0, 1, 2),
    ((2, 3, 7, 8), (4, 3, 3, 3), 2, 1, 1, 1),
    ((1, 4, 9, 9), (6, 2, 3, 3), (2, 1), (1, 2), 1, 2),
    ((1, 3, 9, 9), (2, 3, 3, 2), 1, (0, 1, 2, 0), 2, 1),
    ((1, 4, 6, 6), (8, 1, 3, 3), 1, 1, 1, 4),  # depthwise, two filters per channel
    ((1, 2, 8, 7), (3, 2, 1, 1), [3, 2], 0, [1, 1], 1),
]


def _pair(v):
    return [v, v] if isinstance(v, int) else list(v) * (2 if len(v) == 1 else 1)


def _pad4(v):
    v = [v] if isinstance(v, int) else list(v)
    return v * 4 if len(v) == 1 else (v * 2 if len(v) == 2 else v)


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d(dshape, wshape, strides, padding, dilation, groups):
    x, w = rand(*dshape), rand(*wshape)
    expected = np_conv2d(x, w, _pair(strides), _pad4(padding), _pair(dilation), groups)
    legal = check_op(relax.op.nn.conv2d, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides,
                     padding=padding, dilation=dilation, groups=groups)
    text = legal.script()
    assert 'T.block("pad_temp")' in text
    assert ('T.block("conv2d_nchw")' if groups == 1 else 'T.block("group_conv2d_nchw")') in text


DEPTHWISE_NHWC_CASES = [
    # data (NHWC), kernel (kh, kw), strides, padding, dilation, kernel layout
    ((1, 9, 9, 16), (3, 3), 1, 1, 1, "HWIO"),
    ((2, 8, 7, 5), (3, 3), 2, (0, 1, 1, 0), 1, "HWOI"),
    ((1, 12, 11, 24), (5, 5), (2, 1), 2, 1, "HWIO"),
    ((1, 10, 10, 8), (3, 3), 1, 2, 2, "HWIO"),
    ((1, 7, 7, 40), (3, 3), 1, 1, 1, "HWIO"),
]


@pytest.mark.parametrize("dshape,ksize,strides,padding,dilation,kernel_layout", DEPTHWISE_NHWC_CASES)
def test_depthwise_conv2d_nhwc(dshape, ksize, strides, padding, dilation, kernel_layout):
    """A depthwise convolution in NHWC (one filter per channel) is computed in place
    (``DepthwiseConv2d``, channels innermost), not transposed to NCHW and back; the CPU build
    partitions its padding guards (`compiler.loop_partition`), and the NumPy reference checks
    the borders as well as the interior."""
    c = dshape[3]
    x = rand(*dshape)
    w_oihw = rand(c, 1, *ksize)
    w = w_oihw.transpose(2, 3, 1, 0) if kernel_layout == "HWIO" else w_oihw.transpose(2, 3, 0, 1)
    expected = np_conv2d(x.transpose(0, 3, 1, 2), w_oihw, _pair(strides), _pad4(padding), _pair(dilation),
                         c).transpose(0, 2, 3, 1)
    legal = check_op(relax.op.nn.conv2d, [x, np.ascontiguousarray(w)], expected, rtol=1e-4, atol=1e-4,
                     strides=strides, padding=padding, dilation=dilation, groups=c, data_layout="NHWC",
                     kernel_layout=kernel_layout)
    text = legal.script()
    assert 'T.block("DepthwiseConv2d")' in text and "permute" not in text and "T_transpose" not in text


def test_conv2d_prints_normalized_attrs():
    x = relax.Var("x", relax.TensorStructInfo([1, 4, 9, 9], "float32"))
    w = relax.Var("w", relax.TensorStructInfo([6, 2, 3, 3], "float32"))
    call = relax.op.nn.conv2d(x, w, strides=2, padding=(1, 2), groups=2)
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        bb.emit_func_output(bb.emit(call))
    text = bb.get().script()
    assert ('R.nn.conv2d(x, w, strides=[2, 2], padding=[1, 2, 1, 2], dilation=[1, 1], groups=2, '
            'data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")') in text
    assert "R.Tensor((1, 6, 5, 6), dtype=\"float32\")" in text


def test_conv2d_symbolic_shape():
    n, h, w = (tir.Var("int64", s) for s in ("n", "h", "w"))
    x = relax.Var("x", relax.TensorStructInfo([n, 4, h, w], "float32"))
    k = relax.Var("k", relax.TensorStructInfo([6, 4, 3, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, k]):
        a = bb.emit(relax.op.nn.conv2d(x, k, strides=2, padding=1))
        b = bb.emit(relax.op.nn.max_pool2d(x, pool_size=3, strides=2, padding=1, ceil_mode=True))
        bb.emit_func_output(relax.Tuple([a, b]))
    # as TVM prints them (up to how int64 constants in Relax shapes are printed)
    text = re.sub(r"T\.int64\((\d+)\)", r"\1", bb.get().script())
    assert 'R.Tensor((n, 6, (h - 1) // 2 + 1, (w - 1) // 2 + 1), dtype="float32")' in text
    assert 'R.Tensor((n, 4, h // 2 + 1, w // 2 + 1), dtype="float32")' in text
    legal = LegalizeOps()(bb.get())
    assert 'T.block("conv2d_nchw")' in legal.script()


# ----------------------------------------------------------------------------- pooling


POOL_CASES = [
    # shape, pool_size, strides, dilation, padding, ceil_mode, count_include_pad
    ((1, 2, 8, 8), 2, 2, 1, 0, False, False),
    ((1, 2, 8, 8), 3, 2, 1, 1, True, False),
    ((2, 1, 7, 7), (2, 3), 2, 1, (1, 1), False, False),
    ((2, 1, 7, 7), (2, 3), 2, 1, (1, 1), True, True),
    ((1, 3, 9, 8), 2, 1, 2, (0, 1, 1, 0), False, True),
    ((1, 2, 7, 6), 3, 3, 1, 1, True, False),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,pool,strides,dilation,padding,ceil,incl", POOL_CASES)
def test_pool2d(kind, shape, pool, strides, dilation, padding, ceil, incl):
    x = rand(*shape)
    expected = np_pool2d(x, kind, _pair(pool), _pair(strides), _pair(dilation), _pad4(padding), ceil, incl)
    op = relax.op.nn.max_pool2d if kind == "max" else relax.op.nn.avg_pool2d
    check_op(op, [x], expected, rtol=1e-5, atol=1e-6, pool_size=pool, strides=strides, dilation=dilation,
             padding=padding, ceil_mode=ceil, count_include_pad=incl)


@pytest.mark.parametrize("shape,size", [((1, 2, 8, 8), (2, 4)), ((2, 3, 7, 9), (3, 2)), ((1, 2, 5, 6), None),
                                        ((1, 1, 6, 5), 1)])
def test_adaptive_avg_pool2d(shape, size):
    x = rand(*shape)
    out = shape[2:] if size is None else ((size, size) if isinstance(size, int) else size)
    check_op(relax.op.nn.adaptive_avg_pool2d, [x], np_adaptive_avg_pool2d(x, out), rtol=1e-5, atol=1e-6,
             output_size=size)


# ----------------------------------------------------------------------------- dropout, dense


def test_dropout_is_identity_with_ones_mask():
    x = rand(3, 4)
    check_op(relax.op.nn.dropout, [x], [x, np.ones_like(x)], rate=0.25)


@pytest.mark.parametrize("xshape,wshape", [((4, 3), (5, 3)), ((2, 3, 6), (4, 6))])
def test_dense(xshape, wshape):
    x, w = rand(*xshape), rand(*wshape)
    check_op(relax.op.nn.dense, [x, w], (x @ w.T).astype("float32"), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- pad


PAD_CASES = [
    # shape, pad_width, mode, value, dtype
    ((2, 3), [0, 0, 1, 2], "constant", 0.0, "float32"),
    ((1, 2, 3, 4), [0, 0, 0, 0, 1, 1, 2, 0], "constant", 1.5, "float32"),
    ((3, 4), [2, 1, 1, 0], "constant", -1.0, "int32"),
    ((4, 5), [1, 1, 2, 2], "reflect", 0.0, "float32"),
    ((2, 6), [0, 0, 0, 5], "reflect", 0.0, "float32"),
    ((3, 4), [2, 1, 0, 3], "edge", 0.0, "float32"),
]


@pytest.mark.parametrize("shape,width,mode,value,dtype", PAD_CASES, ids=str)
def test_pad(shape, width, mode, value, dtype):
    x = (rand(*shape) * 4).astype(dtype)
    pairs = list(zip(width[0::2], width[1::2]))
    expected = np.pad(x, pairs, mode=mode, **({"constant_values": value} if mode == "constant" else {}))
    check_op(relax.op.nn.pad, [x], expected.astype(dtype), pad_width=width, pad_mode=mode, pad_value=value)


def test_pad_prints_like_tvm_and_takes_tvms_python_order():
    """TVM prints ``pad_value`` before ``pad_mode`` but its Python signature is
    ``pad(data, pad_width, pad_mode="constant", pad_value=0.0)``; symbolic dims grow."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([4, n], "float32"))
    call = relax.op.nn.pad(x, [1, 1, 2, 2], "reflect")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(call))
    text = bb.get().script()
    assert 'R.nn.pad(x, pad_width=[1, 1, 2, 2], pad_value=0.0, pad_mode="reflect")' in text
    assert 'R.Tensor((6, n + 4), dtype="float32")' in text
    legal = LegalizeOps()(bb.get()).script()
    assert "def reflect_pad(" in legal and 'T.block("ReflectPadInput")' in legal


# ----------------------------------------------------------------------------- attention


def np_attention(q, k, v, bias=None, scale=None, causal=None):
    """Scaled dot-product attention on (batch, seq, heads, dim) tensors, kv heads repeated for
    grouped-query attention."""
    b, n, h, d = q.shape
    m, hk = k.shape[1], k.shape[2]
    k, v = np.repeat(k, h // hk, axis=2), np.repeat(v, h // hk, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), k) * (1 / math.sqrt(d) if scale is None else scale)
    if bias is not None:
        s = s + bias
    if causal is not None:
        offset = 0 if causal == "TopLeft" else m - n
        s = np.where(np.arange(m)[None, :] <= np.arange(n)[:, None] + offset, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bjhe->bihe", p, v).astype(q.dtype)


ATTENTION_CASES = [
    # q, k, v shapes, bias shape, scale, causal_mask
    ((2, 3, 2, 8), (2, 5, 2, 8), (2, 5, 2, 6), None, None, None),
    ((1, 4, 2, 4), (1, 4, 2, 4), (1, 4, 2, 4), None, None, "TopLeft"),
    ((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 4), None, 0.5, "BottomRight"),
    ((1, 3, 4, 8), (1, 5, 2, 8), (1, 5, 2, 8), (1, 4, 3, 5), 0.25, None),  # grouped-query, bias
    ((2, 2, 2, 4), (2, 3, 2, 4), (2, 3, 2, 4), (2, 1, 1, 3), None, "BottomRight"),
]


@pytest.mark.parametrize("qs,ks,vs,bs,scale,causal", ATTENTION_CASES, ids=str)
def test_attention(qs, ks, vs, bs, scale, causal):
    q, k, v = rand(*qs), rand(*ks), rand(*vs)
    args = [q, k, v] + ([rand(*bs)] if bs else [])
    expected = np_attention(q, k, v, args[3] if bs else None, scale, causal)
    legal = check_op(relax.op.nn.attention, args, expected, rtol=1e-4, atol=1e-5, scale=scale, causal_mask=causal)
    assert ("def attention_bias(" if bs else "def attention(") in legal.script()


def test_attention_prints_like_tvm():
    """With a bias, ``relax.op.nn.attention`` builds TVM's ``R.nn.attention_bias``."""
    q = relax.Var("q", relax.TensorStructInfo([1, 3, 2, 4], "float32"))
    b = relax.Var("b", relax.TensorStructInfo([1, 2, 3, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q, b]):
        x = bb.emit(relax.op.nn.attention(q, q, q, causal_mask="TopLeft"))
        bb.emit_func_output(bb.emit(relax.op.nn.attention(x, q, q, b, scale=0.5)))
    text = bb.get().script()
    assert 'R.nn.attention(q, q, q, scale=None, causal_mask="TopLeft", window_size=None)' in text
    assert "R.nn.attention_bias(gv, q, q, b, scale=0.5, causal_mask=None, window_size=None)" in text
    assert tvms.parse(text).script() == text


def test_attention_symbolic_sequence_runs():
    """A causal GPT block's attention: one compiled kernel for every sequence length."""
    n = tir.Var("int64", "n")
    q = relax.Var("q", relax.TensorStructInfo([1, n, 2, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q]):
        bb.emit_func_output(bb.emit(relax.op.nn.attention(q, q, q, causal_mask="TopLeft")))
    mod = bb.get()
    assert 'R.Tensor((1, n, 2, 4), dtype="float32")' in mod.script()
    legal = LegalizeOps()(mod)
    for size in (1, 5):
        x = rand(1, size, 2, 4)
        np.testing.assert_allclose(run(legal, [x]), np_attention(x, x, x, causal="TopLeft"), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- rms_norm, group_norm


def np_rms_norm(x, w, axes, eps=1e-5):
    axes = tuple(sorted(a % x.ndim for a in axes))
    ms = (x.astype(np.float64) ** 2).mean(axis=axes, keepdims=True)
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    return (x / np.sqrt(ms + eps) * w.reshape(bshape)).astype(x.dtype)


@pytest.mark.parametrize("shape,axes", [((2, 3, 8), [-1]), ((2, 4, 6), [1, 2]), ((5,), [0])], ids=str)
def test_rms_norm(shape, axes):
    x = rand(*shape)
    w = rand(*[shape[a] for a in sorted(a % len(shape) for a in axes)])
    check_op(relax.op.nn.rms_norm, [x, w], np_rms_norm(x, w, axes), rtol=1e-4, atol=1e-5, axes=axes)


def np_group_norm(x, gamma, beta, groups, caxis, axes, eps=1e-5, center=True, scale=True):
    """Each group of consecutive channels normalized over its channels and ``axes``."""
    caxis %= x.ndim
    red = tuple(sorted({caxis} | {a % x.ndim for a in axes}))
    per = x.shape[caxis] // groups
    out = np.empty(x.shape, np.float64)
    for g in range(groups):
        idx = [slice(None)] * x.ndim
        idx[caxis] = slice(g * per, (g + 1) * per)
        part = x[tuple(idx)].astype(np.float64)
        mean, var = part.mean(axis=red, keepdims=True), part.var(axis=red, keepdims=True)
        out[tuple(idx)] = (part - mean) / np.sqrt(var + eps)
    cshape = [x.shape[caxis] if i == caxis else 1 for i in range(x.ndim)]
    if scale:
        out = out * gamma.reshape(cshape)
    if center:
        out = out + beta.reshape(cshape)
    return out.astype(x.dtype)


@pytest.mark.parametrize("shape,groups,caxis,axes,center", [
    ((2, 4, 3, 3), 2, 1, [2, 3], True),
    ((2, 6, 5), 3, 1, [2], False),
    ((2, 3, 3, 4), 2, -1, [1, 2], True),  # channels last
])
def test_group_norm(shape, groups, caxis, axes, center):
    x = rand(*shape)
    c = shape[caxis]
    gamma, beta = rand(c), rand(c)
    check_op(relax.op.nn.group_norm, [x, gamma, beta], np_group_norm(x, gamma, beta, groups, caxis, axes, center=center),
             rtol=1e-4, atol=1e-5, num_groups=groups, channel_axis=caxis, axes=axes, center=center)


# ----------------------------------------------------------------------------- conv1d


CONV1D_CASES = [
    # data, weight, strides, padding, dilation, groups
    ((2, 4, 9), (6, 4, 3), 1, 0, 1, 1),
    ((1, 4, 10), (6, 2, 3), 2, 1, 1, 2),
    ((1, 3, 12), (2, 3, 2), 1, (0, 1), 2, 1),
    ((1, 4, 8), (4, 1, 3), 1, 1, 1, 4),  # depthwise
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups", CONV1D_CASES, ids=str)
def test_conv1d(dshape, wshape, strides, padding, dilation, groups):
    x, w = rand(*dshape), rand(*wshape)
    left, right = (padding, padding) if isinstance(padding, int) else padding
    expected = np_conv2d(x[:, :, None], w[:, :, None], [1, strides], [0, left, 0, right], [1, dilation], groups)[:, :, 0]
    legal = check_op(relax.op.nn.conv1d, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides, padding=padding,
                     dilation=dilation, groups=groups)
    assert ('T.block("conv1d_ncw")' if groups == 1 else 'T.block("group_conv1d_ncw")') in legal.script()


def test_conv1d_prints_like_tvm_with_symbolic_length():
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([2, 4, n], "float32"))
    w = relax.Var("w", relax.TensorStructInfo([6, 2, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        bb.emit_func_output(bb.emit(relax.op.nn.conv1d(x, w, 2, 1, 1, 2)))
    text = re.sub(r"T\.int64\((\d+)\)", r"\1", bb.get().script())
    assert ('R.nn.conv1d(x, w, strides=[2], padding=[1, 1], dilation=[1], groups=2, data_layout="NCW", '
            'kernel_layout="OIW", out_layout="NCW", out_dtype="void")') in text
    assert 'R.Tensor((2, 6, (n - 1) // 2 + 1), dtype="float32")' in text
    legal = LegalizeOps()(bb.get())
    xs, ws = rand(2, 4, 7), rand(6, 2, 3)
    expected = np_conv2d(xs[:, :, None], ws[:, :, None], [1, 2], [0, 1, 0, 1], [1, 1], 2)[:, :, 0]
    np.testing.assert_allclose(run(legal, [xs, ws]), expected, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- inference errors


def _var(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(list(shape), dtype))


@pytest.mark.parametrize("make,message", [
    (lambda: relax.op.nn.softmax(_var("x", (2, 3)), axis=2), "axis 2 is out of range"),
    (lambda: relax.op.nn.softmax(_var("x", (2, 3), "int32")), "floating-point"),
    (lambda: relax.op.nn.conv2d(_var("x", (1, 4, 5, 5)), _var("w", (6, 3, 3, 3))), "data has 4 channels"),
    (lambda: relax.op.nn.conv2d(_var("x", (1, 4, 5, 5)), _var("w", (5, 2, 3, 3)), groups=2), "do not divide"),
    (lambda: relax.op.nn.conv2d(_var("x", (4, 5, 5)), _var("w", (6, 4, 3, 3))), "4-D data"),
    (lambda: relax.op.nn.conv2d(_var("x", (1, 4, 2, 2)), _var("w", (6, 4, 3, 3))), "output height would be 0"),
    (lambda: relax.op.nn.conv2d(_var("x", (1, 4, 5, 5)), _var("w", (6, 4, 3, 3)), padding=[1, 2, 3]),
     "padding must be"),
    (lambda: relax.op.nn.conv2d(_var("x", (1, 4, 5, 5)), _var("w", (6, 4, 3, 3)), data_layout="NCHX"),
     "must name each of the axes NCHW once"),
    (lambda: relax.op.nn.max_pool2d(_var("x", (1, 4, 2, 2)), pool_size=3), "output height would be 0"),
    (lambda: relax.op.nn.max_pool2d(_var("x", (1, 4, 5, 5)), strides=0), "strides must be positive"),
    (lambda: relax.op.nn.layer_norm(_var("x", (2, 3)), _var("g", (2,)), _var("b", (3,)), axes=[-1]),
     "gamma has shape (2,), expected (3,)"),
    (lambda: relax.op.nn.layer_norm(_var("x", (2, 3)), _var("g", (3,)), _var("b", (3,)), axes=[1, -1]),
     "name an axis twice"),
    (lambda: relax.op.nn.batch_norm(*[_var(n, (2, 3, 4)) for n in "x"], *[_var(n, (4,)) for n in "gbmv"], axis=1),
     "gamma has shape (4,), expected (3,)"),
    (lambda: relax.op.nn.dropout(_var("x", (2, 3)), rate=1.0), "rate must be in [0, 1)"),
    (lambda: relax.op.nn.dense(_var("x", (2, 3)), _var("w", (4, 5))), "reduction dimensions differ"),
    (lambda: relax.op.nn.pad(_var("x", (2, 3)), [1, 1]), "pad_width needs 2 values per axis (4 for rank 2), got 2"),
    (lambda: relax.op.nn.pad(_var("x", (2, 3)), [0, 0, 3, 0], "reflect"), "reflect padding of 3 on axis 1"),
    (lambda: relax.op.nn.pad(_var("x", (2, 3)), [0, 0, 1, 0], "wrap"), "pad_mode must be one of"),
    (lambda: relax.op.nn.pad(_var("x", (2, 3)), [0, -1, 1, 0]), "pad_width must be non-negative"),
    (lambda: relax.op.nn.attention(_var("q", (2, 3, 4)), _var("k", (2, 3, 4)), _var("v", (2, 3, 4))),
     "query must be 4-D"),
    (lambda: relax.op.nn.attention(_var("q", (1, 3, 2, 8)), _var("k", (1, 5, 2, 4)), _var("v", (1, 5, 2, 4))),
     "the key's head dimension is 4 but the query's is 8"),
    (lambda: relax.op.nn.attention(_var("q", (1, 3, 2, 8)), _var("k", (1, 5, 2, 8)), _var("v", (1, 4, 2, 8))),
     "the value's sequence length is 4 but the key's is 5"),
    (lambda: relax.op.nn.attention(_var("q", (1, 3, 3, 8)), _var("k", (1, 5, 2, 8)), _var("v", (1, 5, 2, 8))),
     "the query's 3 heads are not a multiple of the key's 2"),
    (lambda: relax.op.nn.attention(*[_var(n, (1, 3, 2, 8)) for n in "qkv"], _var("b", (1, 2, 3, 4))),
     "the bias's last dimension is 4 but the key's sequence length is 3"),
    (lambda: relax.op.nn.attention(*[_var(n, (1, 3, 2, 8)) for n in "qkv"], causal_mask="Upper"),
     "causal_mask must be None"),
    (lambda: relax.op.nn.rms_norm(_var("x", (2, 3)), _var("w", (2,))), "weight has shape (2,), expected (3,)"),
    (lambda: relax.op.nn.group_norm(_var("x", (2, 6, 4)), _var("g", (6,)), _var("b", (6,)), 4, 1, [2]),
     "6 channels do not divide into 4 groups"),
    (lambda: relax.op.nn.group_norm(_var("x", (2, 6, 4)), _var("g", (6,)), _var("b", (6,)), 2, 1, [1, 2]),
     "hold the channel axis 1"),
    (lambda: relax.op.nn.group_norm(_var("x", (2, 6, 4)), _var("g", (3,)), _var("b", (6,)), 2, 1, [2]),
     "gamma has shape (3,), expected (6,)"),
    (lambda: relax.op.nn.conv1d(_var("x", (1, 4, 5)), _var("w", (6, 3, 3))), "data has 4 channels"),
    (lambda: relax.op.nn.conv1d(_var("x", (4, 5)), _var("w", (6, 4, 3))), "3-D data"),
    (lambda: relax.op.nn.conv1d(_var("x", (1, 4, 2)), _var("w", (6, 4, 3))), "output width would be 0"),
    (lambda: relax.op.nn.conv1d(_var("x", (1, 4, 5)), _var("w", (6, 4, 3)), strides=[1, 1]), "strides must be"),
])
def test_inference_errors(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


# ----------------------------------------------------------------------------- located diagnostics


def _program(params: str, line: str) -> str:
    return (
        "@R.function\n"
        f"def main({params}):\n"
        f"    {line}\n"
        "    return y\n"
    )


def _diagnose(source: str, message: str, line: int, col: int):
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(source)
    err = info.value
    assert message in err.message, err.message
    assert (err.span.line, err.span.col) == (line, col), f"{err.message} at {err.span}"
    return err


def test_diagnostic_softmax_bad_axis_points_at_the_attribute():
    line = "y = R.nn.softmax(x, axis=3)"
    src = _program('x: R.Tensor((2, 3), "float32")', line)
    _diagnose(src, "axis 3 is out of range for a tensor of rank 2", 3, 5 + line.index("3)"))


def test_diagnostic_conv2d_channel_mismatch_points_at_the_weight():
    line = "y = R.nn.conv2d(x, w, groups=2)"
    src = _program('x: R.Tensor((1, 4, 5, 5), "float32"), w: R.Tensor((6, 4, 3, 3), "float32")', line)
    _diagnose(src, "data has 4 channels but weight expects 4 per group x 2 group(s) = 8", 3, 5 + line.index("w,"))


def test_diagnostic_bad_padding_points_at_the_attribute():
    line = "y = R.nn.max_pool2d(x, pool_size=[2, 2], padding=[1, 2, 3])"
    src = _program('x: R.Tensor((1, 4, 5, 5), "float32")', line)
    _diagnose(src, "padding must be an integer or a list of 1, 2 or 4 integers", 3, 5 + line.index("[1, 2, 3]"))


def test_diagnostic_layer_norm_gamma_shape_points_at_gamma():
    line = "y = R.nn.layer_norm(x, g, b, axes=[-1])"
    src = _program('x: R.Tensor((2, 3), "float32"), g: R.Tensor((2,), "float32"), b: R.Tensor((3,), "float32")', line)
    _diagnose(src, "gamma has shape (2,), expected (3,)", 3, 5 + line.index("g,"))


def test_diagnostic_attention_bias_points_at_the_bias():
    line = "y = R.nn.attention_bias(q, q, q, b)"
    src = _program('q: R.Tensor((1, 3, 2, 4), "float32"), b: R.Tensor((1, 2, 3, 2), "float32")', line)
    _diagnose(src, "the bias's last dimension is 2 but the key's sequence length is 3", 3, 5 + line.index("b)"))


def test_diagnostic_reflect_pad_points_at_pad_width():
    line = 'y = R.nn.pad(x, pad_width=[0, 0, 0, 3], pad_mode="reflect")'
    src = _program('x: R.Tensor((2, 3), "float32")', line)
    _diagnose(src, "reflect padding of 3 on axis 1 needs the axis to have more than 3 elements", 3,
              5 + line.index("[0, 0, 0, 3]"))


def test_attention_with_window_size_is_left_unlegalized():
    """TVM's legalization rejects a sliding window; the call stays for the build to report."""
    q = relax.Var("q", relax.TensorStructInfo([1, 3, 2, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q]):
        bb.emit_func_output(bb.emit(relax.op.nn.attention(q, q, q, causal_mask="TopLeft", window_size=2)))
    assert "R.nn.attention(" in LegalizeOps()(bb.get()).script()


def test_tvm_printed_text_parses():
    """Calls as TVM 0.25 prints them parse and print back the same."""
    text = (
        "@R.function\n"
        'def main(x: R.Tensor((1, 2, 8, 8), dtype="float32"), g: R.Tensor((2,), dtype="float32")) '
        '-> R.Tuple(R.Tensor((1, 2, 4, 4), dtype="float32"), R.Tensor((1, 2, 8, 8), dtype="float32")):\n'
        '    a: R.Tensor((1, 2, 4, 4), dtype="float32") = R.nn.max_pool2d(x, pool_size=[2, 2], strides=[2, 2], '
        'dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=False, layout="NCHW", '
        'out_layout="NCHW")\n'
        '    b: R.Tuple(R.Tensor((1, 2, 8, 8), dtype="float32"), R.Tensor((2,), dtype="float32"), '
        'R.Tensor((2,), dtype="float32")) = R.nn.batch_norm(x, g, g, g, g, axis=1, epsilon=1.0000000000000001e-05, '
        'center=True, scale=True, momentum=0.10000000000000001, training=True)\n'
        '    c: R.Tensor((1, 2, 8, 8), dtype="float32") = b[0]\n'
        "    return (a, c)\n"
    )
    func = tvms.parse(text)
    again = tvms.parse(func.script())
    tvms.ir.assert_structural_equal(again, func)
    assert math.isclose(func.body.blocks[0].bindings[1].value.attrs["epsilon"], 1e-5)


def test_symbolic_shapes_legalize_and_run():
    """softmax, layer_norm (its element count a cast of the symbolic dim) and avg_pool2d on
    symbolic extents compile once and run on concrete inputs."""
    n, m = tir.Var("int64", "n"), tir.Var("int64", "m")
    x = relax.Var("x", relax.TensorStructInfo([n, m], "float32"))
    g = relax.Var("g", relax.TensorStructInfo([m], "float32"))
    img = relax.Var("img", relax.TensorStructInfo([1, 2, n, m], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, g, img]):
        a = bb.emit(relax.op.nn.softmax(x, axis=0))
        b = bb.emit(relax.op.nn.layer_norm(x, g, g, axes=[-1]))
        c = bb.emit(relax.op.nn.avg_pool2d(img, pool_size=3, strides=2, padding=1))
        bb.emit_func_output(relax.Tuple([a, b, c]))
    mod = LegalizeOps()(bb.get())
    xs, gs, imgs = rand(3, 5), rand(5), rand(1, 2, 3, 5)
    ra, rb, rc = run(mod, [xs, gs, imgs])
    np.testing.assert_allclose(ra, np_softmax(xs, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rb, np_layer_norm(xs, gs, gs, [-1]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rc, np_pool2d(imgs, "avg", [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- 1-D pooling


POOL1D_CASES = [
    # shape, pool_size, strides, dilation, padding, ceil_mode, count_include_pad
    ((2, 3, 9), 3, 2, 1, 1, True, False),
    ((1, 2, 8), 2, 2, 1, 0, False, True),
    ((1, 2, 10), 3, 1, 2, (1, 2), False, True),
    ((2, 1, 7), 3, 3, 1, 1, True, True),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,pool,strides,dilation,padding,ceil,incl", POOL1D_CASES, ids=str)
def test_pool1d(kind, shape, pool, strides, dilation, padding, ceil, incl):
    x = rand(*shape)
    left, right = (padding, padding) if isinstance(padding, int) else padding
    expected = np_pool2d(x[:, :, None], kind, [1, pool], [1, strides], [1, dilation], [0, left, 0, right], ceil,
                         incl)[:, :, 0]
    op = relax.op.nn.max_pool1d if kind == "max" else relax.op.nn.avg_pool1d
    legal = check_op(op, [x], expected, rtol=1e-5, atol=1e-6, pool_size=pool, strides=strides, dilation=dilation,
                     padding=padding, ceil_mode=ceil, count_include_pad=incl)
    assert f"def {kind}_pool1d(" in legal.script()


def test_pool_prints_like_tvm_and_takes_tvms_python_order():
    """TVM's pooling functions take ``padding`` before ``dilation`` but print ``dilation``
    first; avg_pool1d counts the padding by default (TVM's default there)."""
    x = relax.Var("x", relax.TensorStructInfo([1, 2, 8], "float32"))
    y = relax.Var("y", relax.TensorStructInfo([1, 2, 8, 8], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        a = bb.emit(relax.op.nn.avg_pool1d(x, 3, 2, 1))
        b = bb.emit(relax.op.nn.max_pool2d(y, 3, 2, 1))
        bb.emit_func_output(relax.Tuple([a, b]))
    text = bb.get().script()
    assert ('R.nn.avg_pool1d(x, pool_size=[3], strides=[2], dilation=[1], padding=[1, 1], ceil_mode=False, '
            'count_include_pad=True, layout="NCW", out_layout="NCW")') in text
    assert 'R.Tensor((1, 2, 4), dtype="float32")' in text
    assert "R.nn.max_pool2d(y, pool_size=[3, 3], strides=[2, 2], dilation=[1, 1], padding=[1, 1, 1, 1]" in text
    assert tvms.parse(text).script() == text


# ----------------------------------------------------------------------------- transposed convolutions


def np_conv_transpose(x, w, strides, padding, output_padding, dilation, groups):
    """The transposed convolution by its definition: input element ``i`` spreads ``x[i] * w[k]``
    to output ``i * stride + k * dilation - pad_before`` (weights (in, out / groups, k...))."""
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    ipg, opg = c // groups, w.shape[1]
    sizes, ks = x.shape[2:], w.shape[2:]
    out = [(sizes[a] - 1) * strides[a] - padding[a] - padding[nsp + a] + dilation[a] * (ks[a] - 1)
           + output_padding[a] + 1 for a in range(nsp)]
    full = [max((sizes[a] - 1) * strides[a] + dilation[a] * (ks[a] - 1) + 1, padding[a] + out[a]) for a in range(nsp)]
    big = np.zeros((n, opg * groups, *full), np.float64)
    for g in range(groups):
        xg, wg = x[:, g * ipg:(g + 1) * ipg], w[g * ipg:(g + 1) * ipg]
        for tap in np.ndindex(*ks):
            contrib = np.einsum("nc...,co->no...", xg, wg[(slice(None), slice(None)) + tap])
            start = [tap[a] * dilation[a] for a in range(nsp)]
            where = tuple(slice(start[a], start[a] + (sizes[a] - 1) * strides[a] + 1, strides[a]) for a in range(nsp))
            big[(slice(None), slice(g * opg, (g + 1) * opg)) + where] += contrib
    crop = tuple(slice(padding[a], padding[a] + out[a]) for a in range(nsp))
    return big[(slice(None), slice(None)) + crop].astype(x.dtype)


CONV2D_T_CASES = [
    # data, weight, strides, padding, output_padding, dilation, groups
    ((1, 4, 5, 5), (4, 3, 3, 3), 2, 1, 1, 1, 1),
    ((1, 4, 5, 5), (4, 3, 3, 3), 2, 0, 0, 2, 2),
    ((2, 2, 4, 3), (2, 5, 2, 3), (1, 2), (0, 1), (0, 1), 1, 1),
    ((1, 3, 4, 4), (3, 2, 1, 1), 1, 0, 0, 1, 1),
    ((1, 4, 3, 3), (4, 1, 3, 3), 3, (1, 0, 2, 1), 2, 1, 4),  # depthwise, asymmetric padding
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,opad,dilation,groups", CONV2D_T_CASES, ids=str)
def test_conv2d_transpose(dshape, wshape, strides, padding, opad, dilation, groups):
    x, w = rand(*dshape), rand(*wshape)
    expected = np_conv_transpose(x, w, _pair(strides), _pad4(padding), _pair(opad), _pair(dilation), groups)
    legal = check_op(relax.op.nn.conv2d_transpose, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides,
                     padding=padding, output_padding=opad, dilation=dilation, groups=groups)
    text = legal.script()
    assert "def conv2d_transpose(" in text
    for block in ("data_pad", "kernel_transform", "compute"):
        assert f'T.block("{block}")' in text
    assert ('T.block("data_dilate")' in text) == (_pair(strides) != [1, 1])


@pytest.mark.parametrize("dshape,wshape,strides,padding,opad,dilation,groups", [
    ((1, 4, 5), (4, 3, 3), 2, 1, 0, 1, 1),
    ((2, 4, 6), (4, 2, 3), 3, (0, 2), 1, 2, 2),
    ((1, 2, 4), (2, 3, 1), 1, 0, 0, 1, 1),
], ids=str)
def test_conv1d_transpose(dshape, wshape, strides, padding, opad, dilation, groups):
    x, w = rand(*dshape), rand(*wshape)
    pads = [padding, padding] if isinstance(padding, int) else list(padding)
    expected = np_conv_transpose(x, w, [strides], pads, [opad], [dilation], groups)
    legal = check_op(relax.op.nn.conv1d_transpose, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides,
                     padding=padding, output_padding=opad, dilation=dilation, groups=groups)
    assert 'T.block("kernel")' in legal.script()


def test_conv_transpose_against_torch():
    torch = pytest.importorskip("torch")
    x, w = rand(2, 4, 5, 6), rand(4, 3, 3, 2)
    expected = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=(2, 1), padding=(1, 0),
                                                    output_padding=(1, 0), dilation=(1, 2), groups=2).numpy()
    check_op(relax.op.nn.conv2d_transpose, [x, w], expected, rtol=1e-4, atol=1e-4, strides=(2, 1), padding=(1, 0),
             output_padding=(1, 0), dilation=(1, 2), groups=2)


def test_conv2d_transpose_prints_like_tvm_with_symbolic_size():
    n, h = tir.Var("int64", "n"), tir.Var("int64", "h")
    x = relax.Var("x", relax.TensorStructInfo([n, 4, h, 5], "float32"))
    w = relax.Var("w", relax.TensorStructInfo([4, 3, 3, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        bb.emit_func_output(bb.emit(relax.op.nn.conv2d_transpose(x, w, strides=2, padding=1, output_padding=1)))
    text = re.sub(r"T\.int64\((\d+)\)", r"\1", bb.get().script())
    assert ('R.nn.conv2d_transpose(x, w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1], '
            'dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="IOHW", out_layout="NCHW", '
            'out_dtype="void")') in text
    assert 'R.Tensor((n, 3, (h - 1) * 2 + 2, 10), dtype="float32")' in text
    legal = LegalizeOps()(bb.get())
    for size in (1, 4):
        xs, ws = rand(2, 4, size, 5), rand(4, 3, 3, 3)
        expected = np_conv_transpose(xs, ws, [2, 2], [1, 1, 1, 1], [1, 1], [1, 1], 1)
        np.testing.assert_allclose(run(legal, [xs, ws]), expected, rtol=1e-4, atol=1e-4)


def test_tvm_027_conv2d_transpose_text_parses():
    """TVM 0.27 prints an unset out_dtype as None: that reads as "void"."""
    text = (
        "@R.function\n"
        'def main(x: R.Tensor((1, 4, 5, 5), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32")):\n'
        '    gv: R.Tensor((1, 3, 10, 10), dtype="float32") = R.nn.conv2d_transpose(x, w, strides=[2, 2], '
        'padding=[1, 1, 1, 1], output_padding=[1, 1], dilation=[1, 1], groups=1, data_layout="NCHW", '
        'kernel_layout="IOHW", out_layout="NCHW", out_dtype=None)\n'
        "    return gv\n"
    )
    func = tvms.parse(text)
    assert func.body.blocks[0].bindings[0].value.attrs["out_dtype"] == "void"


@pytest.mark.parametrize("make,message", [
    (lambda: relax.op.nn.conv2d_transpose(_var("x", (1, 4, 5, 5)), _var("w", (3, 3, 3, 3))),
     "data has 4 channels but weight (in, out / groups, ...) expects 3"),
    (lambda: relax.op.nn.conv2d_transpose(_var("x", (1, 4, 5, 5)), _var("w", (4, 3, 3, 3)), groups=3),
     "4 channels do not divide into 3 groups"),
    (lambda: relax.op.nn.conv2d_transpose(_var("x", (1, 4, 5, 5)), _var("w", (4, 3, 3, 3)), output_padding=1),
     "output_padding [1, 1] must be smaller than the stride or the dilation"),
    (lambda: relax.op.nn.conv2d_transpose(_var("x", (1, 4, 5, 5)), _var("w", (4, 3, 3, 3)), kernel_layout="IOH"),
     "must name each of the axes IOHW once"),
    (lambda: relax.op.nn.conv1d_transpose(_var("x", (1, 4, 1)), _var("w", (4, 3, 1)), padding=1),
     "output width would be -1"),
    (lambda: relax.op.nn.max_pool1d(_var("x", (1, 4, 2)), pool_size=3), "output width would be 0"),
    (lambda: relax.op.nn.avg_pool1d(_var("x", (1, 4, 5, 5))), "3-D data"),
])
def test_new_nn_inference_errors(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


# ----------------------------------------------------------------------------- nll_loss


def _np_nll_loss(pred, tgt, weights, reduction, ignore_index):
    """PyTorch's NLLLoss by its definition: ``-pred[n, t, d...] * w[t]`` per target, 0 where
    ignored; "mean" divides the sum by the kept targets' weights."""
    w = np.ones(pred.shape[1 if pred.ndim > 1 else 0], pred.dtype) if weights is None else weights
    p = pred[None] if pred.ndim == 1 else pred
    t = np.asarray(tgt)[None] if pred.ndim == 1 else tgt
    loss = np.zeros(t.shape, pred.dtype)
    wsum = np.zeros((), pred.dtype)
    for q in np.ndindex(*t.shape):
        c = t[q]
        if c == ignore_index:
            continue
        loss[q] = -p[(q[0], c) + q[1:]] * w[c]
        wsum += w[c]
    if pred.ndim == 1:
        loss = loss[0]
    if reduction == "none":
        return loss
    return np.asarray(loss.sum(), pred.dtype) if reduction == "sum" else np.asarray(loss.sum() / wsum, pred.dtype)


@pytest.mark.parametrize("pshape,reduction,weighted,ignore", [
    ((4, 3), "mean", False, -100), ((4, 3), "sum", True, 1), ((2, 3, 5), "none", False, -100),
    ((2, 3, 5), "mean", True, 2), ((6,), "sum", True, -100), ((6,), "mean", False, -100), ((3, 4, 2, 2), "none", True, 0),
], ids=str)
def test_nll_loss(pshape, reduction, weighted, ignore):
    rng = np.random.default_rng(3)
    pred = rng.standard_normal(pshape).astype("float32")
    c = pshape[1] if len(pshape) > 1 else pshape[0]
    tshape = (pshape[0],) + pshape[2:] if len(pshape) > 1 else ()
    tgt = rng.integers(0, c, tshape).astype("int64")
    if tshape:
        tgt.flat[0] = ignore if ignore >= 0 else tgt.flat[0]
    weights = rng.uniform(0.5, 2, (c,)).astype("float32") if weighted else None
    args = [pred, tgt] + ([weights] if weighted else [])
    expected = _np_nll_loss(pred, tgt, weights, reduction, ignore)
    pattern = {"none": "injective", "sum": "reduce"}.get(reduction) if tshape else "injective"
    legal = check_op(relax.op.nn.nll_loss, args, expected, rtol=1e-5, atol=1e-5, reduction=reduction,
                     ignore_index=ignore, expect_pattern=pattern)
    assert ("def nll_loss(" if weighted else "def nll_loss_without_weight(") in legal.script()


def test_nll_loss_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    pred = rng.standard_normal((5, 4, 3)).astype("float32")
    tgt = rng.integers(0, 4, (5, 3)).astype("int64")
    tgt[0, 0] = 2
    w = rng.uniform(0.5, 2, (4,)).astype("float32")
    expected = torch.nn.functional.nll_loss(torch.from_numpy(pred), torch.from_numpy(tgt), torch.from_numpy(w),
                                            ignore_index=2).numpy()
    check_op(relax.op.nn.nll_loss, [pred, tgt, w], expected, rtol=1e-5, atol=1e-5, ignore_index=2)


def test_nll_loss_prints_like_tvm():
    src = ('@R.function\ndef main(x: R.Tensor(("n", 3), dtype="float32"), t: R.Tensor(("n",), dtype="int64"), '
           'w: R.Tensor((3,), dtype="float32")):\n'
           '    a = R.nn.nll_loss(x, t, w, reduction="sum", ignore_index=1)\n'
           '    b = R.nn.nll_loss(x, t, reduction="none")\n    return (a, b)\n')
    text = tvms.parse(src).script()
    assert 'a: R.Tensor((), dtype="float32") = R.nn.nll_loss(x, t, w, reduction="sum", ignore_index=1)' in text
    assert 'b: R.Tensor((n,), dtype="float32") = R.nn.nll_loss(x, t, reduction="none", ignore_index=-100)' in text
    assert tvms.parse(text).script() == text


def test_nll_loss_bad_targets_are_located():
    src = ('@R.function\ndef main(x: R.Tensor((4, 3), dtype="float32"), t: R.Tensor((5,), dtype="int64")):\n'
           '    a = R.nn.nll_loss(x, t)\n    return a\n')
    assert_located(src, "targets have shape (5,), expected (4,)", "t)")
