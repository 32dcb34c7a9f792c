"""ReadTransposedInPlace (compiler/transform/read_transposed.py): `tvms.compile` for the CPU
drops a transpose kernel whose result only feeds other kernels, which read the original
tensor in its place. Results are bit for bit those of the module as written."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tvmscript as tvms
import tvmscript.compiler.transform.read_transposed as read_transposed
from tvmscript import relax, tir
from tvmscript.compiler.transform.read_transposed import permutation_of, read_transposed_in_place

ROOT = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(7)


def run(mod, args, *, pass_on: bool = True, monkeypatch=None):
    if not pass_on:
        monkeypatch.setattr(read_transposed, "read_transposed_in_place", lambda m: m)
    ex = tvms.compile(mod, "llvm")
    if not pass_on:
        monkeypatch.undo()
    vm = relax.VirtualMachine(ex, tvms.cpu())
    return ex, vm["main"](*[tvms.nd.array(a) for a in args])


def test_the_seed_mlp_runs_without_transposes(monkeypatch):
    mod = tvms.load(str(ROOT / "samples" / "mlp_zero.tvms"))
    args = [RNG.standard_normal(s, dtype=np.float32) for s in [(1, 784), (256, 784), (256,), (10, 256), (10,)]]
    ex, out = run(mod, args)
    _, ref = run(mod, args, pass_on=False, monkeypatch=monkeypatch)
    assert sorted(ex.kernels) == ["fused_matmul1_add1_transposed_read", "fused_matmul_add_relu_transposed_read"]
    # The default schedule sums these matrix-vector products in vector lanes (a dot product,
    # tests/schedules/test_schedule_dot.py), the transposed module's matmuls in order: close, not equal.
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-4)
    x, w0, b0, w1, b1 = args
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w0.T + b0, 0) @ w1.T + b1, rtol=1e-4, atol=1e-4)


def test_reading_in_place_computes_the_same_bits():
    """The pass itself changes no arithmetic: unscheduled, the kernel reading the weight in
    place gives the bits of the transpose followed by the original kernel."""
    from tvmscript.compiler.build_cpu import build_cpu

    mod = tvms.load(str(ROOT / "samples" / "mlp_zero.tvms"))
    opt = read_transposed_in_place(mod)
    x, w, b = (RNG.standard_normal(s, dtype=np.float32) for s in [(1, 784), (256, 784), (256,)])
    plain = build_cpu({n: mod[n] for n in ("transpose", "fused_matmul_add_relu")}, schedule=False, use_cache=False)
    wt = np.empty((784, 256), np.float32)
    plain["transpose"](w, wt)
    expected = np.empty((1, 256), np.float32)
    plain["fused_matmul_add_relu"](x, wt, b, expected)
    fused = build_cpu({"f": opt["fused_matmul_add_relu_transposed_read"]}, schedule=False, use_cache=False)
    got = np.empty((1, 256), np.float32)
    fused["f"](x, w, b, got)
    np.testing.assert_array_equal(got, expected)
    # The zero pipeline's printout stays TVM's: the pass belongs to the build only.
    assert "transpose" in tvms.load(str(ROOT / "samples" / "mlp_zero.tvms")).script()


PERMUTE3 = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 4), "float32"), y: R.Tensor((4, 2, 3), "float32")):
        with R.dataflow():
            t = R.permute_dims(x, [2, 0, 1])
            a = R.add(t, y)
            b = R.multiply(t, y)
            gv = R.tuple(a, b)
            R.output(gv)
        return gv
'''


def test_a_rank_three_permutation_read_by_two_kernels(monkeypatch):
    mod = relax.transform.LegalizeOps()(tvms.parse(PERMUTE3))
    opt = read_transposed_in_place(mod)
    prims = {gv.name_hint: f for gv, f in opt.functions.items() if isinstance(f, tir.PrimFunc)}
    assert sorted(prims) == ["add_transposed_read", "multiply_transposed_read"]
    x, y = RNG.standard_normal((2, 3, 4), dtype=np.float32), RNG.standard_normal((4, 2, 3), dtype=np.float32)
    _, out = run(mod, [x, y])
    t = x.transpose(2, 0, 1)
    np.testing.assert_array_equal(out[0].numpy(), t + y)
    np.testing.assert_array_equal(out[1].numpy(), t * y)


RETURNED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((4, 3), "float32")):
        with R.dataflow():
            t = R.permute_dims(x)
            a = R.add(t, y)
            gv = R.tuple(a, t)
            R.output(gv)
        return gv
'''


def test_a_transpose_whose_result_is_used_elsewhere_stays():
    mod = relax.transform.LegalizeOps()(tvms.parse(RETURNED))
    assert read_transposed_in_place(mod) is mod
    x, y = RNG.standard_normal((3, 4), dtype=np.float32), RNG.standard_normal((4, 3), dtype=np.float32)
    _, out = run(mod, [x, y])
    np.testing.assert_array_equal(out[0].numpy(), x.T + y)
    np.testing.assert_array_equal(out[1].numpy(), x.T)


NOT_TRANSPOSES = {
    "reversed": "B[i, j] = A[3 - i, j]",
    "rotated": "B[i, j] = A[i, (j + 1) % 4]",
    "scaled": "B[i, j] = A[i, j] * T.float32(2)",
}


@pytest.mark.parametrize("body", sorted(NOT_TRANSPOSES.values()), ids=sorted(NOT_TRANSPOSES))
def test_only_pure_permutations_count_as_transposes(body):
    text = f'''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            {body.replace("i", "vi").replace("j", "vj")}
'''
    func = tvms.parse(text)
    assert permutation_of(func) is None
    swapped = tvms.parse(text.replace(body.replace("i", "vi").replace("j", "vj"), "B[vi, vj] = A[vj, vi]"))
    assert permutation_of(swapped) == (1, 0)
