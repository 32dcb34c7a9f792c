"""ConvertLayout (TVM's ``relax.transform.ConvertLayout``) and the CPU's channels-last policy in
``bound_inference_passes``: what is rewritten, where the original layout is read back, and that
every converted module computes what the original does (NumPy references)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tvmscript as tvms
from tvmscript.compiler.transform import BindParams, ConvertLayout, bound_inference_passes, channels_last_for_cpu
from test_op_nn import np_adaptive_avg_pool2d, np_conv2d, np_pool2d

NHWC = {"relax.nn.conv2d": ["NHWC", "HWIO"]}

BLOCK = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 12, 12), "float32"), w: R.Tensor((8, 8, 3, 3), "float32"),
             b: R.Tensor((1, 8, 1, 1), "float32")) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            z = R.add(y, b)
            r = R.nn.relu(z)
            p = R.nn.max_pool2d(r, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
            y2 = R.nn.conv2d(p, w, padding=[1, 1, 1, 1])
            s = R.add(y2, p)
            a = R.nn.adaptive_avg_pool2d(s, output_size=[1, 1])
            f = R.reshape(a, [1, 8])
            R.output(f)
        return f
'''

CONVERTED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 12, 12), dtype="float32"), w: R.Tensor((8, 8, 3, 3), dtype="float32"), b: R.Tensor((1, 8, 1, 1), dtype="float32")) -> R.Tensor((1, 8), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 12, 12, 8), dtype="float32") = R.permute_dims(x, axes=[0, 2, 3, 1])
            lv1: R.Tensor((3, 3, 8, 8), dtype="float32") = R.permute_dims(w, axes=[2, 3, 1, 0])
            lv2: R.Tensor((1, 12, 12, 8), dtype="float32") = R.nn.conv2d(lv, lv1, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, data_layout="NHWC", kernel_layout="HWIO", out_layout="NHWC", out_dtype="void")
            lv3: R.Tensor((1, 1, 1, 8), dtype="float32") = R.permute_dims(b, axes=[0, 2, 3, 1])
            lv4: R.Tensor((1, 12, 12, 8), dtype="float32") = R.add(lv2, lv3)
            lv5: R.Tensor((1, 12, 12, 8), dtype="float32") = R.nn.relu(lv4)
            lv6: R.Tensor((1, 6, 6, 8), dtype="float32") = R.nn.max_pool2d(lv5, pool_size=[3, 3], strides=[2, 2], dilation=[1, 1], padding=[1, 1, 1, 1], ceil_mode=False, count_include_pad=False, layout="NHWC", out_layout="NHWC")
            lv7: R.Tensor((1, 6, 6, 8), dtype="float32") = R.nn.conv2d(lv6, lv1, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, data_layout="NHWC", kernel_layout="HWIO", out_layout="NHWC", out_dtype="void")
            lv8: R.Tensor((1, 6, 6, 8), dtype="float32") = R.add(lv7, lv6)
            lv9: R.Tensor((1, 1, 1, 8), dtype="float32") = R.nn.adaptive_avg_pool2d(lv8, output_size=[1, 1], layout="NHWC", out_layout="NHWC")
            lv10: R.Tensor((1, 8, 1, 1), dtype="float32") = R.permute_dims(lv9, axes=[0, 3, 1, 2])
            f: R.Tensor((1, 8), dtype="float32") = R.reshape(lv10, R.shape([1, 8]))
            R.output(f)
        return f
'''


def run(mod, *args):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*[tvms.nd.array(a) for a in args]).numpy()


def rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def test_layout_carried_through_elementwise_ops_and_pools():
    """The convolutions compute in NHWC; the bias is permuted, the ReLU, the pools and the
    residual add stay in NHWC, the shared weight is permuted once, and the reshape reads the
    value back in NCHW."""
    mod = tvms.parse(BLOCK)
    new = ConvertLayout(NHWC)(mod)
    assert new.script() == CONVERTED
    rng = np.random.default_rng(0)
    x, w, b = rand(rng, 1, 8, 12, 12), rand(rng, 8, 8, 3, 3), rand(rng, 1, 8, 1, 1)
    r = np.maximum(np_conv2d(x, w, [1, 1], [1, 1, 1, 1], [1, 1], 1) + b, 0)
    p = np_pool2d(r, "max", (3, 3), (2, 2), (1, 1), (1, 1, 1, 1))
    s = np_conv2d(p, w, [1, 1], [1, 1, 1, 1], [1, 1], 1) + p
    want = np_adaptive_avg_pool2d(s, (1, 1)).reshape(1, 8)
    np.testing.assert_allclose(run(new, x, w, b), want, rtol=1e-4, atol=1e-4)
    assert ConvertLayout(NHWC)(new).script() == CONVERTED  # idempotent: nothing left in NCHW


def test_values_seen_outside_the_block_and_other_ops_read_the_original_layout():
    """A converted value that is a block output is restored where it is bound; an op without a
    layout rule (a sum over the channels) reads it back once, however often it is used; a
    bias of lower rank (ONNX's ``(C, 1, 1)``) gains the leading axis, then is permuted."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 6, 6), "float32"), w: R.Tensor((4, 4, 1, 1), "float32"),
             b: R.Tensor((4, 1, 1), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w)
            z = R.add(y, b)
            c = R.sum(z, axis=[1])
            d = R.max(z, axis=[1])
            e = R.multiply(z, R.const(2.0, "float32"))
            R.output(c, d, e)
        return (c, d, e)
'''
    mod = tvms.parse(src)
    new = ConvertLayout(NHWC)(mod)
    text = new.script()
    assert text.count("axes=[0, 3, 1, 2]") == 2  # z read back once, e restored once
    assert "R.expand_dims(b, axis=[0])" in text
    rng = np.random.default_rng(1)
    x, w, b = rand(rng, 2, 4, 6, 6), rand(rng, 4, 4, 1, 1), rand(rng, 4, 1, 1)
    z = np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]) + b
    vm = tvms.relax.VirtualMachine(tvms.compile(new, "llvm"), tvms.cpu())
    got = vm["main"](*[tvms.nd.array(a) for a in (x, w, b)])
    for out, want in zip(got, (z.sum(1), z.max(1), 2 * z)):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_pool_alone_and_layouts_already_wanted():
    """A pooling named alone converts alone (a transpose either side); a convolution already in
    the desired layouts is left as it is."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32")):
        with R.dataflow():
            p = R.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])
            R.output(p)
        return p
'''
    mod = tvms.parse(src)
    new = ConvertLayout({"relax.nn.avg_pool2d": ["NHWC"]})(mod)
    assert 'layout="NHWC"' in new.script() and new.script().count("R.permute_dims") == 2
    x = rand(np.random.default_rng(2), 1, 3, 8, 8)
    np.testing.assert_allclose(run(new, x), np_pool2d(x, "avg", (2, 2), (2, 2), (1, 1), (0, 0, 0, 0)), rtol=1e-5)
    converted = ConvertLayout(NHWC)(tvms.parse(BLOCK))
    assert ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"], "nn.max_pool2d": "NHWC"})(converted).script() \
        == CONVERTED


@pytest.mark.parametrize("layouts, message", [
    ({"relax.nn.softmax": ["NHWC"]}, "no layout rule for relax.nn.softmax"),
    ({"relax.nn.conv2d": ["NHWC"]}, "takes 2 unpacked layout"),
    ({"relax.nn.conv2d": ["NCHW16c", "OIHW"]}, "takes 2 unpacked layout"),
])
def test_layouts_it_cannot_apply_are_refused(layouts, message):
    with pytest.raises(ValueError, match=message):
        ConvertLayout(layouts)


def grouped_module(groups: int) -> str:
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 8, 8), "float32"), w: R.Tensor((4, 4, 3, 3), "float32"),
             d: R.Tensor((4, {4 // groups}, 3, 3), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            z = R.nn.conv2d(y, d, strides=[2, 2], padding=[1, 1, 1, 1], groups={groups})
            R.output(z)
        return z
'''


def test_cpu_policy_converts_only_modules_of_dense_and_depthwise_convolutions():
    """bound_inference_passes puts dense and depthwise convolutions with bound weights in NHWC
    on the CPU, never on CUDA; it leaves a module with another grouped convolution in NCHW (it
    has no NHWC kernel), and weights passed in (they would be transposed on every call)."""
    rng = np.random.default_rng(3)
    grouped = BindParams("main", {"w": rand(rng, 4, 4, 3, 3), "d": rand(rng, 4, 2, 3, 3)})(
        tvms.parse(grouped_module(2)))
    assert channels_last_for_cpu(grouped) is grouped
    depthwise = BindParams("main", {"w": rand(rng, 4, 4, 3, 3), "d": rand(rng, 4, 1, 3, 3)})(
        tvms.parse(grouped_module(4)))
    converted = bound_inference_passes()(depthwise)
    assert converted.script().count('data_layout="NHWC"') == 2
    x = rand(rng, 1, 4, 8, 8)
    np.testing.assert_allclose(run(converted, x), run(depthwise, x), rtol=1e-5, atol=1e-5)
    unbound = tvms.parse(BLOCK)
    assert channels_last_for_cpu(unbound) is unbound
    dense = BindParams("main", {"w": rand(rng, 8, 8, 3, 3)})(unbound)
    assert "NHWC" in bound_inference_passes()(dense).script()
    assert "NHWC" not in bound_inference_passes(target="cuda")(dense).script()
    x, b = rand(rng, 1, 8, 12, 12), rand(rng, 1, 8, 1, 1)
    np.testing.assert_allclose(run(bound_inference_passes()(dense), x, b), run(dense, x, b), rtol=1e-4, atol=1e-4)


# The ops of the random chains below: the binding each makes of ``{x}``, and how it changes
# the spatial size (None: kept; a function: applied, and the op left out below a size of 2).
CHAIN_OPS = {
    "conv3": ("R.nn.conv2d({x}, w3, padding=[1, 1, 1, 1])", None),
    "conv1s2": ("R.nn.conv2d({x}, w1, strides=[2, 2])", lambda n: (n + 1) // 2),
    "dw3": ("R.nn.conv2d({x}, wd, padding=[1, 1, 1, 1], groups=4)", None),
    "dw3s2": ("R.nn.conv2d({x}, wd, strides=[2, 2], padding=[0, 1, 1, 0], groups=4)", lambda n: n // 2),
    "relu": ("R.nn.relu({x})", None),
    "bias": ("R.add({x}, b)", None),
    "clip": ("R.clip({x}, R.prim_value(0), R.prim_value(6))", None),
    "maxpool": ("R.nn.max_pool2d({x}, pool_size=[3, 3], padding=[1, 1, 1, 1])", None),
    "avgpool": ("R.nn.avg_pool2d({x}, pool_size=[2, 2], strides=[2, 2])", lambda n: n // 2),
    "residual": ("R.add({x}, {x})", None),
    "sum": ("R.sum({x}, axis=[1], keepdims=True)", None),  # then added to {x}: an op with no layout rule
}


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from(list(CHAIN_OPS)), min_size=1, max_size=5), st.integers(0, 2 ** 16))
def test_any_chain_computes_what_the_original_does(ops, seed):
    """Random chains of convolutions, pools and elementwise ops (and an op with no layout rule)
    compute the same numbers after the conversion as before it."""
    lines, cur, size = [], "x", 8
    for i, kind in enumerate(ops):
        v = f"v{i}"
        binding, resize = CHAIN_OPS[kind]
        if resize is not None:
            if size < 2:
                continue
            size = resize(size)
        lines.append(f"{v} = {binding.format(x=cur)}")
        if kind == "sum":
            lines.append(f"{v}b = R.add({v}, {cur})")
            v = f"{v}b"
        cur = v
    body = "\n            ".join(lines + [f"R.output({cur})"])
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 8, 8), "float32"), w3: R.Tensor((4, 4, 3, 3), "float32"),
             w1: R.Tensor((4, 4, 1, 1), "float32"), b: R.Tensor((1, 4, 1, 1), "float32"),
             wd: R.Tensor((4, 1, 3, 3), "float32")):
        with R.dataflow():
            {body}
        return {cur}
'''
    mod = tvms.parse(src)
    rng = np.random.default_rng(seed)
    args = [rand(rng, 1, 4, 8, 8), rand(rng, 4, 4, 3, 3), rand(rng, 4, 4, 1, 1), rand(rng, 1, 4, 1, 1),
            rand(rng, 4, 1, 3, 3)]
    np.testing.assert_allclose(run(ConvertLayout(NHWC)(mod), *args), run(mod, *args), rtol=1e-4, atol=1e-4)
