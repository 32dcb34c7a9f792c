"""FoldBatchnormToConv2D: a constant batch norm after a conv2d folded into the conv2d's weights
(NumPy computes the same numbers), and, with the bound-inference passes, conv2d + batch norm +
ReLU as one kernel."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform import (BindParams, DecomposeOpsForInference, FoldBatchnormToConv2D,
                                          bound_inference_passes, get_pipeline)

EPS = 1e-5


def conv_bn_relu(c_in=3, c_out=4, size=6, batch="1", groups=1, layout=("NCHW", "OIHW"), axis=1, eps=EPS):
    """``main(x, w, gamma, beta, mean, var)``: padded 3x3 conv2d, batch norm, ReLU."""
    data_layout, kernel_layout = layout
    x_shape = {"NCHW": f"({batch}, {c_in}, {size}, {size})", "NHWC": f"({batch}, {size}, {size}, {c_in})"}[data_layout]
    i = c_in // groups
    w_shape = {"OIHW": f"({c_out}, {i}, 3, 3)", "HWIO": f"(3, 3, {i}, {c_out})"}[kernel_layout]
    n = '        n = T.int64()\n' if batch == '"n"' else ''
    return tvms.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({x_shape}, "float32"), w: R.Tensor({w_shape}, "float32"),
             gamma: R.Tensor(({c_out},), "float32"), beta: R.Tensor(({c_out},), "float32"),
             mean: R.Tensor(({c_out},), "float32"), var: R.Tensor(({c_out},), "float32")):
{n}        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=[1, 1, 1, 1], groups={groups}, data_layout="{data_layout}",
                            kernel_layout="{kernel_layout}")
            bn = R.nn.batch_norm(c, gamma, beta, mean, var, axis={axis}, epsilon={eps})
            y = bn[0]
            gv = R.nn.relu(y)
            R.output(gv)
        return gv
''')


def weights(rng, w_shape, c_out):
    return {"w": rng.standard_normal(w_shape).astype("float32"),
            "gamma": rng.standard_normal(c_out).astype("float32"), "beta": rng.standard_normal(c_out).astype("float32"),
            "mean": rng.standard_normal(c_out).astype("float32"), "var": rng.uniform(0.5, 2, c_out).astype("float32")}


def conv2d_nchw(x, w, groups=1):
    """NumPy padded 3x3 convolution, NCHW / OIHW."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w 3 3
    o = w.shape[0]
    per = c // groups
    out = np.empty((n, o, h, wd), "float64")
    for g in range(groups):
        cs, os_ = slice(g * per, (g + 1) * per), slice(g * o // groups, (g + 1) * o // groups)
        out[:, os_] = np.einsum("nchwkl,ockl->nohw", patches[:, cs], w[os_])
    return out


def reference(x, p, groups=1):
    conv = conv2d_nchw(x.astype("float64"), p["w"].astype("float64"), groups)
    b = lambda v: v.astype("float64")[None, :, None, None]
    return np.maximum((conv - b(p["mean"])) / np.sqrt(b(p["var"]) + EPS) * b(p["gamma"]) + b(p["beta"]), 0)


def run(mod, *args):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*(tvms.nd.array(a) for a in args)).numpy()


def kernel_names(mod):
    """The PrimFuncs main calls, in order (without the number that makes a name unique)."""
    return [b.value.args[0].name_hint.rstrip("0123456789") for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)
            and b.value.op.name == "relax.call_tir"]


def bound(mod, params):
    return BindParams("main", params)(mod)


FOLDED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 1, 6, 6), dtype="float32")) -> R.Tensor((1, 2, 6, 6), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 2, 6, 6), dtype="float32") = R.nn.conv2d(x, metadata["relax.expr.Constant"][0], strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")
            lv1: R.Tensor((1, 2, 6, 6), dtype="float32") = R.add(lv, R.const([[[[-1.0]], [[1.5]]]], "float32"))
            bn: R.Tuple(R.Tensor((1, 2, 6, 6), dtype="float32"), R.Tensor((2,), dtype="float32"), R.Tensor((2,), dtype="float32")) = lv1, R.const([2.0, 1.0], "float32"), R.const([4.0, 0.25], "float32")
            y: R.Tensor((1, 2, 6, 6), dtype="float32") = bn[0]
            gv: R.Tensor((1, 2, 6, 6), dtype="float32") = R.nn.relu(y)
            R.output(gv)
        return gv

# Metadata omitted. Use show_meta=True in script() method to show it.
'''


def test_folded_module_prints_and_weight_is_scaled():
    """gamma (1, 2), beta (0, 5.5), mean (2, 1), var (4, 0.25), eps 0: s = gamma / sqrt(var)
    = (0.5, 4), the bias beta - mean * s = (-1, 1.5), the kernel's output rows scaled by s."""
    w = np.arange(18, dtype="float32").reshape(2, 1, 3, 3)
    params = {"w": w, "gamma": np.array([1, 2], "float32"), "beta": np.array([0, 5.5], "float32"),
              "mean": np.array([2, 1], "float32"), "var": np.array([4, 0.25], "float32")}
    mod = conv_bn_relu(c_in=1, c_out=2, eps=0.0)
    folded = FoldBatchnormToConv2D()(bound(mod, params))
    assert folded.script() == FOLDED
    conv = folded["main"].body.blocks[0].bindings[0].value
    np.testing.assert_array_equal(conv.args[1].data, w * np.array([0.5, 4], "float32")[:, None, None, None])


@pytest.mark.parametrize("groups, c_in, c_out", [(1, 3, 4), (4, 4, 4)])  # plain and depthwise
def test_same_numbers_as_numpy_and_one_kernel_with_the_relu(groups, c_in, c_out):
    rng = np.random.default_rng(groups)
    mod = conv_bn_relu(c_in=c_in, c_out=c_out, groups=groups)
    params = weights(rng, (c_out, c_in // groups, 3, 3), c_out)
    x = rng.standard_normal((1, c_in, 6, 6)).astype("float32")
    decomposed = get_pipeline("zero")(DecomposeOpsForInference()(bound(mod, params)))
    folded = get_pipeline("zero")(bound_inference_passes()(bound(mod, params)))
    assert kernel_names(decomposed) == ["fused_conv2d_subtract_divide_multiply_add", "relu"]
    # Dense and depthwise convolutions compute in NHWC on the CPU (bound_inference_passes): the
    # input and the result are transposed around the one kernel.
    assert kernel_names(folded) == ["transpose", "fused_conv2d_add_relu", "transpose"]
    want = reference(x, params, groups)
    np.testing.assert_allclose(run(folded, x), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(folded, x), run(decomposed, x), rtol=1e-4, atol=1e-4)


def test_nhwc_hwio_layout_folds_along_its_channel_axes():
    rng = np.random.default_rng(7)
    mod = conv_bn_relu(c_in=3, c_out=4, layout=("NHWC", "HWIO"), axis=3)
    params = weights(rng, (3, 3, 3, 4), 4)
    x = rng.standard_normal((1, 6, 6, 3)).astype("float32")
    folded = bound_inference_passes()(bound(mod, params))
    assert "subtract" not in folded.script()
    oihw = dict(params, w=params["w"].transpose(3, 2, 0, 1))
    got = run(get_pipeline("zero")(folded), x)
    np.testing.assert_allclose(got, reference(x.transpose(0, 3, 1, 2), oihw).transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


def test_symbolic_batch_dim():
    rng = np.random.default_rng(3)
    mod = conv_bn_relu(batch='"n"')
    params = weights(rng, (4, 3, 3, 3), 4)
    folded = get_pipeline("zero")(bound_inference_passes()(bound(mod, params)))
    assert kernel_names(folded) == ["transpose", "fused_conv2d_add_relu", "transpose"]  # in NHWC
    for batch in (1, 3):
        x = rng.standard_normal((batch, 3, 6, 6)).astype("float32")
        np.testing.assert_allclose(run(folded, x), reference(x, params), rtol=1e-4, atol=1e-4)


def test_unbound_parameters_do_not_fold():
    """gamma... as parameters (not constants): nothing to fold, the module is kept."""
    mod = conv_bn_relu()
    assert FoldBatchnormToConv2D()(mod)["main"] is mod["main"]


def test_convolution_with_another_use_does_not_fold():
    rng = np.random.default_rng(2)
    text = conv_bn_relu().script().replace("R.nn.relu(y)", "R.add(R.nn.relu(y), c)")
    mod = bound(tvms.parse(text), weights(rng, (4, 3, 3, 3), 4))
    assert "batch_norm" in FoldBatchnormToConv2D()(mod).script()


def test_batch_norm_on_another_axis_does_not_fold():
    rng = np.random.default_rng(4)
    mod = bound(conv_bn_relu(c_out=6, size=6, axis=2), weights(rng, (6, 3, 3, 3), 6))
    assert "batch_norm" in FoldBatchnormToConv2D()(mod).script()
