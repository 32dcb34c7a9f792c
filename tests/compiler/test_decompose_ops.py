"""DecomposeOpsForInference: batch norm as the elementwise ops it computes at inference, printed as
TVM prints it, equal in value to the op, and folded and fused once the weights are bound."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform import BindParams, DecomposeOpsForInference, get_pipeline

from support.conv_bn import conv_bn_program, conv_bn_weights

BEFORE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 112, 112), "float32"), gamma: R.Tensor((64,), "float32"),
             beta: R.Tensor((64,), "float32"), moving_mean: R.Tensor((64,), "float32"),
             moving_var: R.Tensor((64,), "float32")):
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5,
                                 center=True, scale=True)
            gv = bn[0]
            R.output(gv)
        return gv
'''

# TVM's expected module (tests/python/relax/test_transform_decompose_ops.py, batch norm at
# inference), as TVM prints it.
EXPECTED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 112, 112), dtype="float32"), gamma: R.Tensor((64,), dtype="float32"), beta: R.Tensor((64,), dtype="float32"), moving_mean: R.Tensor((64,), dtype="float32"), moving_var: R.Tensor((64,), dtype="float32")) -> R.Tensor((1, 64, 112, 112), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 64, 1, 1), dtype="float32") = R.expand_dims(moving_mean, axis=[0, 2, 3])
            lv1: R.Tensor((1, 64, 112, 112), dtype="float32") = R.subtract(x, lv)
            lv2: R.Tensor((1, 64, 1, 1), dtype="float32") = R.expand_dims(moving_var, axis=[0, 2, 3])
            lv3: R.Tensor((1, 64, 1, 1), dtype="float32") = R.add(lv2, R.const(9.9999997473787516e-06, "float32"))
            lv4: R.Tensor((1, 64, 1, 1), dtype="float32") = R.sqrt(lv3)
            lv5: R.Tensor((1, 64, 112, 112), dtype="float32") = R.divide(lv1, lv4)
            lv6: R.Tensor((1, 64, 1, 1), dtype="float32") = R.expand_dims(gamma, axis=[0, 2, 3])
            lv7: R.Tensor((1, 64, 112, 112), dtype="float32") = R.multiply(lv5, lv6)
            lv8: R.Tensor((1, 64, 1, 1), dtype="float32") = R.expand_dims(beta, axis=[0, 2, 3])
            lv9: R.Tensor((1, 64, 112, 112), dtype="float32") = R.add(lv7, lv8)
            bn: R.Tuple(R.Tensor((1, 64, 112, 112), dtype="float32"), R.Tensor((64,), dtype="float32"), R.Tensor((64,), dtype="float32")) = lv9, moving_mean, moving_var
            gv: R.Tensor((1, 64, 112, 112), dtype="float32") = bn[0]
            R.output(gv)
        return gv
'''


def test_batch_norm_prints_as_tvm_decomposes_it():
    after = DecomposeOpsForInference("main")(tvms.parse(BEFORE))
    assert after.script() == EXPECTED
    assert DecomposeOpsForInference()(tvms.parse(BEFORE)).script() == EXPECTED


def test_second_run_changes_nothing_and_input_is_kept():
    before = tvms.parse(BEFORE)
    text = before.script()
    once = DecomposeOpsForInference()(before)
    assert before.script() == text
    assert DecomposeOpsForInference()(once)["main"] is once["main"]


def test_only_the_named_function():
    two = BEFORE.replace("class Module:", "class Module:\n" + _function_text("other"))
    after = DecomposeOpsForInference("other")(tvms.parse(two))
    assert "R.nn.batch_norm" in after["main"].script()
    assert "R.nn.batch_norm" not in after["other"].script()
    assert DecomposeOpsForInference("missing")(tvms.parse(two))["main"] is not None  # as TVM: no error


def _function_text(name):
    body = BEFORE.split("class Module:\n", 1)[1]
    return body.replace("def main(", f"def {name}(")


def test_decomposed_calls_keep_the_batch_norms_span():
    before = tvms.parse(BEFORE)
    span = before["main"].body.blocks[0].bindings[0].value.span
    after = DecomposeOpsForInference()(before)
    calls = [b.value for b in after["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call)]
    assert len(calls) == 10 and all(c.span == span for c in calls)


def _bn_module(shape, axis, scale=True, center=True, training="False"):
    ndim = len(shape)
    channels = shape[axis]
    dims = ", ".join(str(d) for d in shape)
    return tvms.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({dims}), "float32"), gamma: R.Tensor(({channels},), "float32"),
             beta: R.Tensor(({channels},), "float32"), mean: R.Tensor(({channels},), "float32"),
             var: R.Tensor(({channels},), "float32")):
        n = T.int64()
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var, axis={axis - ndim if axis == ndim - 1 else axis},
                                 epsilon=1e-3, center={center}, scale={scale}, training={training})
            y = bn[0]
            m = bn[1]
            v = bn[2]
            gv = (y, m, v)
            R.output(gv)
        return gv
''')


def _reference(x, gamma, beta, mean, var, axis, scale, center):
    shape = [1] * x.ndim
    shape[axis] = -1
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + np.float32(1e-3))
    if scale:
        out = out * gamma.reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out


def _inputs(shape, axis, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[axis]
    return [rng.standard_normal(shape).astype("float32"), rng.standard_normal(c).astype("float32"),
            rng.standard_normal(c).astype("float32"), rng.standard_normal(c).astype("float32"),
            (rng.random(c) + 0.5).astype("float32")]


def _run(mod, args):
    vm = tvms.relax.VirtualMachine(tvms.compile(get_pipeline("zero")(mod), target="llvm"), tvms.cpu())
    out = vm["main"](*[tvms.nd.array(a) for a in args])
    return [t.numpy() for t in out] if isinstance(out, (list, tuple)) else [out.numpy()]


@pytest.mark.parametrize("shape, axis, scale, center", [
    ((2, 3, 4, 5), 1, True, True),
    ((2, 3, 4, 5), 3, True, False),
    ((6, 7), 1, False, True),
    ((2, 5, 3), 0, False, False),
])
def test_same_numbers_as_the_op_and_numpy(shape, axis, scale, center):
    mod = _bn_module(shape, axis, scale, center)
    decomposed = DecomposeOpsForInference()(mod)
    assert "batch_norm" not in decomposed.script()
    args = _inputs(shape, axis)
    got = _run(decomposed, args)
    want = _run(mod, args)
    ref = _reference(*args, axis, scale, center)
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], args[3])  # the moving statistics come back unchanged
    np.testing.assert_array_equal(got[2], args[4])


def test_symbolic_batch_dim():
    mod = tvms.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4, 3, 3), "float32"), gamma: R.Tensor((4,), "float32"),
             beta: R.Tensor((4,), "float32"), mean: R.Tensor((4,), "float32"), var: R.Tensor((4,), "float32")):
        n = T.int64()
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=1e-3, training=False)
            gv = bn[0]
            R.output(gv)
        return gv
''')
    decomposed = DecomposeOpsForInference()(mod)
    text = decomposed.script()
    assert 'R.Tensor((n, 4, 3, 3), dtype="float32") = R.subtract(x, lv)' in text
    assert decomposed["main"].ret_struct_info.shape[0] is mod["main"].ret_struct_info.shape[0]
    for batch in (1, 3):
        args = _inputs((batch, 4, 3, 3), 1, seed=batch)
        np.testing.assert_allclose(_run(decomposed, args)[0], _reference(*args, 1, True, True), rtol=1e-5, atol=1e-5)


def _kernel_calls(mod):
    """The calls of main that run a kernel: call_tir, or a fused function's call."""
    return [b for blk in mod["main"].body.blocks for b in blk.bindings if isinstance(b.value, relax.Call)
            and (not isinstance(b.value.op, relax.Op) or b.value.op.name == "relax.call_tir")]


def test_bound_conv2d_batch_norm_folds_and_fuses_into_one_kernel():
    rng = np.random.default_rng(1)
    program = tvms.parse(conv_bn_program(channels=8, size=16))
    bound = BindParams("main", conv_bn_weights(rng, channels=8))(program)
    plain = get_pipeline("zero")(bound)
    folded = get_pipeline("zero")(DecomposeOpsForInference()(bound))
    assert len(_kernel_calls(plain)) == 2  # conv2d, then batch_norm
    assert len(_kernel_calls(folded)) == 1  # conv2d with the normalization as its epilogue
    assert "sqrt" not in str([f.script() for f in folded.functions.values()])  # folded at compile time
    x = rng.standard_normal((1, 8, 16, 16)).astype("float32")
    run = lambda m: tvms.relax.VirtualMachine(tvms.compile(m, "llvm"), tvms.cpu())["main"](tvms.nd.array(x)).numpy()
    np.testing.assert_allclose(run(folded), run(plain), rtol=1e-4, atol=1e-4)
