"""The NN and gradient ops TVM's own tests use: ``R.grad.*`` (nll_loss, pooling and take
backward, the gradient markers), ``R.nn.cross_entropy_with_logits``, ``R.nn.batch_flatten``,
``R.nn.conv3d``/``conv3d_transpose``, and convolution/pooling in layouts other than NCHW
(NHWC, NWC, HWIO kernels, packed NCHW16c, a separate out_layout). Each op is inferred as TVM
infers it, round-trips through the text, legalizes, compiles for the CPU and matches a NumPy
reference (tests/support/op_check.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from support.op_check import assert_located, check_op
from test_op_nn import np_adaptive_avg_pool2d, np_conv2d, np_conv_transpose, np_pool2d, _pool_out

RNG = np.random.default_rng(11)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def _var(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(list(shape), dtype))


def _sinfo_text(expr) -> str:
    """The struct info of a built call, as the printer writes it."""
    return str(relax.struct_info_of(expr))


# ----------------------------------------------------------------------------- NumPy references


def np_conv_nd(x, w, strides, padding, dilation, groups=1):
    """N-C-spatial convolution with an O-I-spatial kernel, by its definition (float64 sums)."""
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(padding[a], padding[nsp + a]) for a in range(nsp)]).astype(np.float64)
    o, i, *ks = w.shape
    out_sizes = [(xp.shape[2 + a] - (ks[a] - 1) * dilation[a] - 1) // strides[a] + 1 for a in range(nsp)]
    out = np.zeros((x.shape[0], o, *out_sizes))
    opg = o // groups
    for f in range(o):
        g = f // opg
        for taps in np.ndindex(*ks):
            sl = tuple(slice(taps[a] * dilation[a], taps[a] * dilation[a] + strides[a] * (out_sizes[a] - 1) + 1,
                             strides[a]) for a in range(nsp))
            patch = xp[(slice(None), slice(g * i, (g + 1) * i)) + sl]
            out[:, f] += np.tensordot(w[(f, slice(None)) + taps], patch, axes=([0], [1]))
    return out.astype(x.dtype)


def np_nll_loss_backward(g, pred, tgt, w, reduction, ignore_index):
    """The derivative of PyTorch's nll_loss (ignored targets weigh 0) times ``g``."""
    batched = pred.ndim > 1
    classes = pred.shape[1] if batched else pred.shape[0]
    weights = w if w is not None else np.ones(classes, pred.dtype)
    kept = tgt != ignore_index
    safe = np.where(kept, tgt, 0)
    wt = np.where(kept, weights[safe], 0).astype(np.float64)
    gb = np.broadcast_to(g, tgt.shape).astype(np.float64)
    scale = gb / wt.sum() if reduction == "mean" else gb
    per = -wt * scale
    out = np.zeros(pred.shape)
    if batched:
        onehot = np.moveaxis(np.eye(classes)[safe], -1, 1)
        out = onehot * per[:, None]
    else:
        out[safe] = per
    return out.astype(pred.dtype)


def np_take_backward(g, x, indices, axis):
    out = np.zeros(x.shape, np.float64)
    axis = axis % x.ndim if axis is not None else None
    if axis is None:
        flat = out.reshape(-1)
        np.add.at(flat, np.where(indices < 0, indices + x.size, indices).reshape(-1), g.reshape(-1))
        return flat.reshape(x.shape).astype(x.dtype)
    idx = np.where(indices < 0, indices + x.shape[axis], indices)
    moved = np.moveaxis(out, axis, 0)
    gm = np.moveaxis(g, list(range(axis, axis + indices.ndim)), list(range(indices.ndim)))
    np.add.at(moved, idx, gm)
    return out.astype(x.dtype)


def np_pool2d_backward(g, x, kind, pool_size, strides, dilation, padding, ceil_mode=False, count_include_pad=False):
    """Each window's gradient to its first maximal tap inside the input (max), or shared by its
    taps inside the input over the forward's divisor (avg)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    pt, pl, pb, pr = padding
    oh, ow = _pool_out(h, kh, sh, dh, pt, pb, ceil_mode), _pool_out(w, kw, sw, dw, pl, pr, ceil_mode)
    assert g.shape == (n, c, oh, ow)
    out = np.zeros(x.shape, np.float64)
    low = np.finfo(x.dtype).min
    for i in range(oh):
        for j in range(ow):
            taps = [(i * sh + a * dh - pt, j * sw + b * dw - pl) for a in range(kh) for b in range(kw)]
            inside = [(y, v) for y, v in taps if 0 <= y < h and 0 <= v < w]
            if kind == "max":
                vals = np.stack([x[:, :, y, v] if 0 <= y < h and 0 <= v < w else np.full((n, c), low, x.dtype)
                                 for y, v in taps], axis=-1)
                first = vals.argmax(axis=-1)
                for t, (y, v) in enumerate(taps):
                    if 0 <= y < h and 0 <= v < w:
                        out[:, :, y, v] += np.where(first == t, g[:, :, i, j], 0)
            else:
                if count_include_pad:
                    cy = sum(1 for a in range(kh) if -pt <= i * sh + a * dh - pt < h + pb)
                    cx = sum(1 for b in range(kw) if -pl <= j * sw + b * dw - pl < w + pr)
                    count = cy * cx
                else:
                    count = len(inside)
                for y, v in inside:
                    out[:, :, y, v] += g[:, :, i, j] / max(count, 1)
    return out.astype(x.dtype)


# ----------------------------------------------------------------------------- grad ops


@pytest.mark.parametrize("pshape,reduction,weighted,ignore", [
    ((2, 3, 4, 5), "mean", True, -1),
    ((3, 5, 4), "sum", False, 2),
    ((4, 3), "none", True, 1),
    ((4,), "mean", True, -100),
    ((3, 4, 2), "mean", False, -100),
])
def test_nll_loss_backward(pshape, reduction, weighted, ignore):
    batched = len(pshape) > 1
    classes = pshape[1] if batched else pshape[0]
    tshape = (pshape[0],) + pshape[2:] if batched else ()
    pred = rand(*pshape)
    tgt = RNG.integers(0, classes, tshape).astype("int64")
    if tgt.ndim:
        tgt.reshape(-1)[0] = 0 if ignore < 0 else ignore  # one target hits ignore_index when it is a class
    w = np.abs(rand(classes)) + 0.5 if weighted else None
    g = rand(*tshape) if reduction == "none" else rand()
    g = np.asarray(g, "float32")
    expected = np_nll_loss_backward(g, pred, tgt, w, reduction, ignore)
    args = [g, pred, tgt] + ([w] if weighted else [])
    # Only a batched mean reduces (the weights' sum); a scalar gradient broadcasts, others gather.
    pattern = {"mean": "out_ewise_fusable" if batched else "injective", "sum": "broadcast", "none": "injective"}
    legal = check_op(relax.op.grad.nll_loss_backward, args, expected, rtol=1e-5, atol=1e-6, reduction=reduction,
                     ignore_index=ignore, expect_pattern=pattern[reduction])
    name = "nll_loss_backward" if weighted else "te_nll_loss_backward_no_weight"
    assert f"def {name}(" in legal.script()


def test_nll_loss_backward_broadcasts_a_full_output_grad_under_mean():
    """TVM's parser tests pass a targets-shaped gradient with reduction="mean": it broadcasts."""
    pred, tgt = rand(3, 5, 2), RNG.integers(0, 5, (3, 2)).astype("int64")
    g = rand(3, 2)
    expected = np_nll_loss_backward(g, pred, tgt, None, "mean", -1)
    check_op(relax.op.grad.nll_loss_backward, [g, pred, tgt], expected, reduction="mean", ignore_index=-1)


@pytest.mark.parametrize("xshape,ishape,axis", [
    ((3, 4, 5), (2,), 1),
    ((4, 3), (5,), 0),
    ((3, 4), (2, 3), None),
    ((2, 6), (2, 2), -1),
])
def test_take_backward(xshape, ishape, axis):
    x = rand(*xshape)
    extent = x.size if axis is None else xshape[axis]
    indices = RNG.integers(-extent, extent, ishape).astype("int32")
    indices.reshape(-1)[-1] = indices.reshape(-1)[0]  # a repeated index adds up
    gshape = ishape if axis is None else np.take(x, indices, axis=axis).shape
    g = rand(*gshape)
    expected = np_take_backward(g, x, indices, axis)
    legal = check_op(relax.op.grad.take_backward, [g, x, indices], expected, rtol=1e-5, atol=1e-6, axis=axis)
    assert "def take_backward(" in legal.script()


POOL_BACKWARD_CASES = [
    # (data shape, pool, strides, dilation, padding, ceil, count_include_pad): the first is TVM's test
    ((3, 2, 10, 10), (5, 5), (2, 2), (1, 1), (2, 1, 2, 1), True, False),
    ((1, 2, 6, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), False, True),
    ((2, 1, 9, 8), (2, 3), (3, 2), (2, 1), (0, 1, 1, 0), False, False),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,pool,strides,dilation,padding,ceil,incl", POOL_BACKWARD_CASES, ids=str)
def test_pool2d_backward(kind, shape, pool, strides, dilation, padding, ceil, incl):
    x = rand(*shape)
    n, c, h, w = shape
    oshape = (n, c, _pool_out(h, pool[0], strides[0], dilation[0], padding[0], padding[2], ceil),
              _pool_out(w, pool[1], strides[1], dilation[1], padding[1], padding[3], ceil))
    g = rand(*oshape)
    expected = np_pool2d_backward(g, x, kind, pool, strides, dilation, padding, ceil, incl)
    op = relax.op.grad.max_pool2d_backward if kind == "max" else relax.op.grad.avg_pool2d_backward
    legal = check_op(op, [g, x], expected, rtol=1e-5, atol=1e-5, pool_size=pool, strides=strides, padding=padding,
                     dilation=dilation, ceil_mode=ceil, count_include_pad=incl)
    assert 'T.block("T_pool_grad")' in legal.script()


def test_max_pool2d_backward_in_nhwc():
    x = rand(1, 6, 6, 3)
    g = rand(1, 3, 3, 3)
    nchw = np_pool2d_backward(g.transpose(0, 3, 1, 2), x.transpose(0, 3, 1, 2), "max", (2, 2), (2, 2), (1, 1),
                              (0, 0, 0, 0))
    check_op(relax.op.grad.max_pool2d_backward, [g, x], nchw.transpose(0, 2, 3, 1), pool_size=2, strides=2,
             layout="NHWC")


def test_grad_ops_print_like_tvm():
    """TVM's printout of its parser tests reads back and prints the same (attribute order,
    ``mode=""``, positional pooling arguments in TVM's Python order)."""
    src = '''# from tvm.script import relax as R

@R.function
def foo(output_grad: R.Tensor((3, 2, 6, 5), dtype="float32"), data: R.Tensor((3, 2, 10, 10), dtype="float32"), g: R.Tensor((3, 2, 5), dtype="float32"), x: R.Tensor((3, 4, 5), dtype="float32"), indices: R.Tensor((2,), dtype="int32")) -> R.Tensor((3, 2, 10, 10), dtype="float32"):
    gv: R.Tensor((3, 2, 10, 10), dtype="float32") = R.grad.max_pool2d_backward(output_grad, data, pool_size=[5, 5], strides=[2, 2], dilation=[1, 1], padding=[2, 1, 2, 1], ceil_mode=True, count_include_pad=False, layout="NCHW", out_layout="NCHW")
    gv1: R.Tensor((3, 4, 5), dtype="float32") = R.grad.take_backward(g, x, indices, axis=1, mode="")
    gv2: R.Tensor((3, 4, 5), dtype="float32") = R.grad.no_grad(gv1)
    gv3: R.Tensor((3, 4, 5), dtype="float32") = R.grad.start_checkpoint(gv2)
    gv4: R.Tensor((3, 4, 5), dtype="float32") = R.grad.end_checkpoint(gv3)
    return gv
'''
    mod = tvms.parse(src)
    assert mod.script() == src
    positional = src.replace('pool_size=[5, 5], strides=[2, 2], dilation=[1, 1], padding=[2, 1, 2, 1], ceil_mode=True',
                             '(5, 5), (2, 2), (2, 1, 2, 1), (1, 1), True')
    again = tvms.parse(positional)
    tvms.ir.assert_structural_equal(again, mod)


def test_grad_op_errors_are_located():
    src = ('@R.function\n'
           'def main(g: R.Tensor((3, 2), "float32"), x: R.Tensor((3, 4), "float32"), i: R.Tensor((2,), "float32")):\n'
           '    y = R.grad.take_backward(g, x, i, axis=1)\n'
           '    return y\n')
    assert_located(src, "indices must be integers", "i, axis")
    src = ('@R.function\n'
           'def main(g: R.Tensor((3, 2, 5, 5), "float32"), x: R.Tensor((3, 2, 10, 10), "float32")):\n'
           '    y = R.grad.avg_pool2d_backward(g, x, pool_size=[2, 2])\n'
           '    return y\n')
    assert_located(src, "output_grad has shape (3, 2, 5, 5) but the pooling's output has shape (3, 2, 9, 9)", "g,")


# ----------------------------------------------------------------------------- cross_entropy, batch_flatten


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)])
def test_cross_entropy_with_logits(shape):
    x, y = rand(*shape), rand(*shape)
    total = -(x.astype(np.float64) * y).sum()
    expected = np.asarray(total / shape[0] if len(shape) > 1 else total, "float32")
    legal = check_op(relax.op.nn.cross_entropy_with_logits, [x, y], expected, rtol=1e-5, atol=1e-5)
    assert 'T.block("T_divide")' in legal.script() or len(shape) == 1


def test_cross_entropy_with_logits_infers_a_scalar_and_checks_shapes():
    assert _sinfo_text(relax.op.nn.cross_entropy_with_logits(_var("x", (2, 3)), _var("y", (2, 3)))) == \
        'R.Tensor((), dtype="float32")'
    with pytest.raises(ValueError, match=r"labels have shape \(2, 4\) but predictions have shape \(2, 3\)"):
        relax.op.nn.cross_entropy_with_logits(_var("x", (2, 3)), _var("y", (2, 4)))
    with pytest.raises(ValueError, match="dtypes differ"):
        relax.op.nn.cross_entropy_with_logits(_var("x", (2, 3)), _var("y", (2, 3), "float16"))


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 1), (3, 2, 2)])
def test_batch_flatten(shape):
    x = rand(*shape)
    legal = check_op(relax.op.nn.batch_flatten, [x], x.reshape(shape[0], -1))
    assert "def reshape(" in legal.script()


def test_batch_flatten_inference():
    n = tir.Var("int64", "n")
    assert _sinfo_text(relax.op.nn.batch_flatten(_var("x", (n, 3, 4)))) == 'R.Tensor((n, 12), dtype="float32")'
    unknown = relax.Var("x", relax.TensorStructInfo(None, "float32", 4))
    assert _sinfo_text(relax.op.nn.batch_flatten(unknown)) == 'R.Tensor(dtype="float32", ndim=2)'
    with pytest.raises(ValueError, match="rank at least 2, got rank 1"):
        relax.op.nn.batch_flatten(_var("x", (3,)))


# ----------------------------------------------------------------------------- conv3d, conv3d_transpose


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups", [
    ((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), 1, 0, 1, 1),
    ((2, 4, 6, 5, 4), (4, 2, 2, 3, 1), (2, 1, 1), (1, 0, 1), (1, 2, 1), 2),
])
def test_conv3d(dshape, wshape, strides, padding, dilation, groups):
    x, w = rand(*dshape), rand(*wshape)
    s3 = [strides] * 3 if isinstance(strides, int) else list(strides)
    d3 = [dilation] * 3 if isinstance(dilation, int) else list(dilation)
    p6 = [padding] * 6 if isinstance(padding, int) else list(padding) * 2
    expected = np_conv_nd(x, w, s3, p6, d3, groups)
    legal = check_op(relax.op.nn.conv3d, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides, padding=padding,
                     dilation=dilation, groups=groups)
    assert ('T.block("conv3d_ncdhw")' if groups == 1 else 'T.block("group_conv3d_ncdhw")') in legal.script()


@pytest.mark.parametrize("dshape,wshape,strides,padding,opad,groups", [
    ((2, 3, 4, 4, 4), (3, 4, 3, 3, 3), 1, 0, 0, 1),
    ((1, 4, 3, 2, 3), (4, 1, 2, 3, 2), 2, (1, 0, 0), 1, 2),
])
def test_conv3d_transpose(dshape, wshape, strides, padding, opad, groups):
    x, w = rand(*dshape), rand(*wshape)
    p6 = [padding] * 6 if isinstance(padding, int) else list(padding) * 2
    expected = np_conv_transpose(x, w, [strides] * 3, p6, [opad] * 3, [1, 1, 1], groups)
    legal = check_op(relax.op.nn.conv3d_transpose, [x, w], expected, rtol=1e-4, atol=1e-4, strides=strides,
                     padding=padding, output_padding=opad, groups=groups)
    assert 'T.block("kernel_transform")' in legal.script()


def test_conv3d_ndhwc_dhwio():
    x, w = rand(1, 5, 4, 6, 2), rand(2, 3, 3, 2, 3)  # NDHWC data, DHWIO kernel
    nc = x.transpose(0, 4, 1, 2, 3)
    expected = np_conv_nd(nc, w.transpose(4, 3, 0, 1, 2), [1, 1, 2], [1, 0, 1, 1, 0, 1], [1, 1, 1])
    check_op(relax.op.nn.conv3d, [x, w], expected.transpose(0, 2, 3, 4, 1), rtol=1e-4, atol=1e-4, strides=[1, 1, 2],
             padding=[1, 0, 1], data_layout="NDHWC", kernel_layout="DHWIO")


def test_take_backward_symbolic_shapes_legalize_and_run():
    """TVM's symbolic test program: the extents come from the arguments at run time."""
    src = """@R.function
def main(g: R.Tensor(("m", "i"), "float32"), x: R.Tensor(("m", "n"), "float32"), idx: R.Tensor(("i",), "int32")):
    m = T.int64()
    n = T.int64()
    y = R.grad.take_backward(g, x, idx, axis=1)
    return y
"""
    mod = relax.transform.LegalizeOps()(tvms.IRModule({"main": tvms.parse(src)}))
    assert "R.grad.take_backward" not in mod.script()
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    g, x, idx = rand(3, 4), rand(3, 5), np.array([4, -1, 0, 4], "int32")
    np.testing.assert_allclose(vm["main"](g, x, idx).numpy(), np_take_backward(g, x, idx, 1), rtol=1e-6)


def test_conv3d_prints_like_tvm():
    src = '''# from tvm.script import relax as R

@R.function
def foo(x: R.Tensor((2, 3, 4, 4, 4), dtype="float32"), w: R.Tensor((3, 4, 3, 3, 3), dtype="float32")) -> R.Tensor((2, 4, 6, 6, 6), dtype="float16"):
    gv: R.Tensor((2, 4, 6, 6, 6), dtype="float16") = R.nn.conv3d_transpose(x, w, strides=[1, 1, 1], padding=[0, 0, 0, 0, 0, 0], output_padding=[0, 0, 0], dilation=[1, 1, 1], groups=1, data_layout="NCDHW", kernel_layout="IODHW", out_layout="NCDHW", out_dtype="float16")
    gv1: R.Tensor((2, 4, 2, 2, 2), dtype="float32") = R.nn.conv3d(x, w, strides=[1, 1, 1], padding=[0, 0, 0, 0, 0, 0], dilation=[1, 1, 1], groups=1, data_layout="NCDHW", kernel_layout="IODHW", out_layout="NCDHW", out_dtype="void")
    return gv
'''
    mod = tvms.parse(src)
    assert mod.script() == src
    short = src.replace('R.nn.conv3d(x, w, strides=[1, 1, 1], padding=[0, 0, 0, 0, 0, 0], dilation=[1, 1, 1], '
                        'groups=1, data_layout="NCDHW", kernel_layout="IODHW", out_layout="NCDHW", out_dtype="void")',
                        'R.nn.conv3d(x, w, kernel_layout="IODHW")')
    tvms.ir.assert_structural_equal(tvms.parse(short), mod)


# ----------------------------------------------------------------------------- layouts


def test_layout_inference_matches_tvm():
    """TVM 0.27's inferred shapes for convolutions and pooling in other layouts."""
    cases = [
        (relax.op.nn.conv2d(_var("x", (2, 28, 28, 128)), _var("w", (64, 128, 3, 3)), data_layout="NHWC"),
         "(2, 26, 26, 64)"),
        (relax.op.nn.conv2d(_var("x", (2, 8, 8, 3)), _var("w", (3, 3, 3, 4)), data_layout="NHWC",
                            kernel_layout="HWIO"), "(2, 6, 6, 4)"),
        (relax.op.nn.conv2d(_var("x", (2, 3, 8, 8)), _var("w", (4, 3, 3, 3)), out_layout="NHWC"), "(2, 6, 6, 4)"),
        (relax.op.nn.conv1d(_var("x", (2, 28, 128)), _var("w", (64, 128, 3)), data_layout="NWC"), "(2, 26, 64)"),
        (relax.op.nn.conv3d(_var("x", (2, 8, 8, 8, 3)), _var("w", (3, 3, 3, 3, 4)), data_layout="NDHWC",
                            kernel_layout="DHWIO"), "(2, 6, 6, 6, 4)"),
        (relax.op.nn.max_pool2d(_var("x", (4, 112, 112, 6)), 3, 2, 1, layout="NHWC"), "(4, 56, 56, 6)"),
        (relax.op.nn.avg_pool2d(_var("x", (4, 4, 112, 112, 16)), 3, layout="NCHW16c"), "(4, 4, 110, 110, 16)"),
        (relax.op.nn.max_pool2d(_var("x", (2, 8, 8, 8)), 2, out_layout="NHWC"), "(2, 7, 7, 8)"),
        (relax.op.nn.adaptive_avg_pool2d(_var("x", (2, 4, 7, 7, 16)), 1, layout="NCHW16c"), "(2, 4, 1, 1, 16)"),
        (relax.op.nn.adaptive_avg_pool2d(_var("x", (2, 8, 8, 8)), (4, 4), layout="NHWC"), "(2, 4, 4, 8)"),
    ]
    for call, shape in cases:
        assert _sinfo_text(call) == f'R.Tensor({shape}, dtype="float32")'
    with pytest.raises(ValueError, match="data has 12 channels but weight expects 3"):
        relax.op.nn.conv2d(_var("x", (2, 3, 8, 8, 4)), _var("w", (4, 3, 3, 3)), data_layout="NCHW4c")
    with pytest.raises(ValueError, match="is not a multiple of 16"):
        relax.op.nn.max_pool2d(_var("x", (2, 8, 8, 8)), 2, out_layout="NCHW16c")


def test_out_layout_defaults_to_the_data_layout():
    call = relax.op.nn.conv2d(_var("x", (2, 8, 8, 3)), _var("w", (4, 3, 3, 3)), data_layout="NHWC")
    assert call.attrs["out_layout"] == "NHWC"
    assert relax.op.nn.avg_pool2d(_var("x", (2, 8, 8, 3)), layout="NHWC").attrs["out_layout"] == "NHWC"


def _nhwc(a):
    return a.transpose(0, 2, 3, 1)


def _nchw(a):
    return a.transpose(0, 3, 1, 2)


def _pack(a, f):
    """NCHW -> NCHW{f}c."""
    n, c, h, w = a.shape
    return a.reshape(n, c // f, f, h, w).transpose(0, 1, 3, 4, 2).copy()


def _unpack(a):
    n, co, h, w, f = a.shape
    return a.transpose(0, 1, 4, 2, 3).reshape(n, co * f, h, w)


def test_conv2d_nhwc_hwio():
    x, w = rand(2, 7, 6, 4), rand(3, 3, 2, 6)  # HWIO, two groups
    expected = _nhwc(np_conv2d(_nchw(x), w.transpose(3, 2, 0, 1), [1, 2], [1, 0, 1, 0], [1, 1], 2))
    check_op(relax.op.nn.conv2d, [x, w], expected, rtol=1e-4, atol=1e-4, strides=[1, 2], padding=[1, 0], groups=2,
             data_layout="NHWC", kernel_layout="HWIO")


def test_conv2d_nhwc_oihw_kernel_as_tvm_tests():
    x, w = rand(2, 6, 6, 4), rand(5, 4, 3, 3)
    expected = _nhwc(np_conv2d(_nchw(x), w, [1, 1], [0, 0, 0, 0], [1, 1], 1))
    check_op(relax.op.nn.conv2d, [x, w], expected, rtol=1e-4, atol=1e-4, data_layout="NHWC")


@pytest.mark.parametrize("kernel_layout", ["HWIO", "OHWI"])
def test_conv2d_nhwc_in_place(kernel_layout):
    """One group in NHWC with an HWIO or OHWI kernel: ``conv2d_nhwc`` reads the operands in place
    (no transposes in the kernel), with strides, dilation and uneven padding."""
    x, w = rand(2, 9, 8, 5), rand(6, 5, 3, 2)  # OIHW
    kernel = w.transpose([{"O": 0, "I": 1, "H": 2, "W": 3}[a] for a in kernel_layout]).copy()
    expected = _nhwc(np_conv2d(_nchw(x), w, [2, 1], [1, 0, 2, 1], [1, 2], 1))
    check_op(relax.op.nn.conv2d, [x, kernel], expected, rtol=1e-4, atol=1e-4, strides=[2, 1], padding=[1, 0, 2, 1],
             dilation=[1, 2], data_layout="NHWC", kernel_layout=kernel_layout)
    bb = tvms.relax.BlockBuilder()
    with bb.function("main", [xv := _var("x", x.shape), wv := _var("w", kernel.shape)]):
        out = bb.emit(relax.op.nn.conv2d(xv, wv, data_layout="NHWC", kernel_layout=kernel_layout))
        bb.emit_func_output(out)
    text = tvms.relax.transform.LegalizeOps()(bb.get()).script()
    assert "Conv2dOutput" in text and "T_layout_trans" not in text


def test_conv2d_packed_data_and_out_layout():
    x, w = rand(1, 8, 5, 5), rand(8, 8, 3, 3)
    expected = _nhwc(np_conv2d(x, w, [1, 1], [1, 1, 1, 1], [1, 1], 1))
    check_op(relax.op.nn.conv2d, [_pack(x, 4), w], expected, rtol=1e-4, atol=1e-4, padding=1, data_layout="NCHW4c",
             out_layout="NHWC")


def test_conv1d_nwc():
    x, w = rand(2, 9, 3), rand(4, 3, 3)
    expected = np_conv2d(x.transpose(0, 2, 1)[:, :, None], w[:, :, None], [1, 2], [0, 1, 0, 1], [1, 1], 1)[:, :, 0]
    check_op(relax.op.nn.conv1d, [x, w], expected.transpose(0, 2, 1), rtol=1e-4, atol=1e-4, strides=2, padding=1,
             data_layout="NWC")


def test_conv2d_transpose_nhwc():
    x, w = rand(1, 4, 5, 3), rand(3, 2, 3, 3)
    expected = _nhwc(np_conv_transpose(_nchw(x), w, [2, 2], [1, 1, 1, 1], [1, 1], [1, 1], 1))
    check_op(relax.op.nn.conv2d_transpose, [x, w], expected, rtol=1e-4, atol=1e-4, strides=2, padding=1,
             output_padding=1, data_layout="NHWC")


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d_nhwc_and_packed(kind):
    x = rand(2, 32, 9, 9)
    ref = np_pool2d(x, kind, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1))
    op = relax.op.nn.max_pool2d if kind == "max" else relax.op.nn.avg_pool2d
    check_op(op, [_nhwc(x).copy()], _nhwc(ref), pool_size=3, strides=2, padding=1, layout="NHWC")
    check_op(op, [_pack(x, 16)], _pack(ref, 16), pool_size=3, strides=2, padding=1, layout="NCHW16c")
    check_op(op, [x], _nhwc(ref), pool_size=3, strides=2, padding=1, out_layout="NHWC")


def test_pool1d_nwc():
    x = rand(2, 8, 3)
    ref = np_pool2d(x.transpose(0, 2, 1)[:, :, None], "max", (1, 2), (1, 2), (1, 1), (0, 0, 0, 0))[:, :, 0]
    check_op(relax.op.nn.max_pool1d, [x], ref.transpose(0, 2, 1), pool_size=2, strides=2, layout="NWC")


def test_adaptive_avg_pool2d_packed():
    x = rand(2, 32, 7, 6)
    ref = np_adaptive_avg_pool2d(x, (3, 2))
    check_op(relax.op.nn.adaptive_avg_pool2d, [_pack(x, 16)], _pack(ref, 16), rtol=1e-5, atol=1e-6,
             output_size=(3, 2), layout="NCHW16c")
    check_op(relax.op.nn.adaptive_avg_pool2d, [_nhwc(x).copy()], _nhwc(ref), rtol=1e-5, atol=1e-6, layout="NHWC",
             output_size=(3, 2))


def test_layout_errors_are_located():
    src = ('@R.function\n'
           'def main(x: R.Tensor((2, 8, 8, 3), "float32")):\n'
           '    y = R.nn.max_pool2d(x, layout="NHWX")\n'
           '    return y\n')
    assert_located(src, "layout 'NHWX' must name each of the axes NCHW once", '"NHWX"')
    src = ('@R.function\n'
           'def main(x: R.Tensor((2, 8, 8, 3), "float32")):\n'
           '    y = R.nn.avg_pool2d(x, layout="NCHW3c")\n'
           '    return y\n')
    assert_located(src, "needs a 5-D data, got rank 4", "x,")
