"""Dot-product nests of the default CPU schedule (`schedule_cpu.dot_product.DotProduct`): a
float sum along a loop every operand reads contiguously, with no spatial loop to vectorize
(``x @ W.T`` at batch 1, row sums), gets vector partial sums. The order of additions changes: results are
checked against float64 within the error bound of a K-term sum, the same bound the sequential
order has; every other nest stays bit for bit the unscheduled kernel's."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule_cpu import default_schedule, vector_bytes
from tvmscript.compiler.build_cpu import build_cpu

ROOT = pathlib.Path(__file__).resolve().parents[2]

RNG = np.random.default_rng(11)
LANES = vector_bytes() // 4

MATVEC = '''# from tvm.script import tir as T
@T.prim_func
def f(x: T.Buffer((1, {k}), "{dtype}"), w: T.Buffer(({n}, {k}), "{dtype}"), y: T.Buffer((1, {n}), "{dtype}")):
    T.func_attr({{"tir.noalias": True}})
    for i, j, k in T.grid(1, {n}, {k}):
        with T.block("y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                y[vi, vj] = {init}
            y[vi, vj] = {combine}
'''


def matvec(n: int, k: int, dtype: str = "float32", init: str = "T.float32(0.5)",
           combine: str = "y[vi, vj] + x[vi, vk] * w[vj, vk]") -> tir.PrimFunc:
    return tvms.parse(MATVEC.format(n=n, k=k, dtype=dtype, init=init.replace("float32", dtype), combine=combine))


def is_dot_product(func: tir.PrimFunc) -> bool:
    return "_dot = T.alloc_buffer" in default_schedule(func).script()


def run(func, arrays, schedule: bool):
    kernel = build_cpu({"f": func}, schedule=schedule, use_cache=False)["f"]
    shape = [int(d.value) for d in func.buffer_map[func.params[-1]].shape]
    out = np.full(shape, np.nan if arrays[0].dtype.kind == "f" else -1, arrays[0].dtype)
    kernel(*arrays, out)
    return out


@pytest.mark.parametrize("n,k", [(256, 784), (10, 256), (7, 2 * LANES), (3, 64 * LANES), (16, 3 * LANES + 1),
                                 (197, 197)])
def test_a_matrix_vector_product_gets_vector_partial_sums_within_the_error_bound(n, k):
    func = matvec(n, k)
    assert is_dot_product(func)
    x = RNG.standard_normal((1, k)).astype("float32")
    w = RNG.standard_normal((n, k)).astype("float32")
    fast, plain = run(func, [x, w], True), run(func, [x, w], False)
    exact = 0.5 + x.astype("float64") @ w.T.astype("float64")
    u = 2.0 ** -24
    bound = (k + 1) * u / (1 - (k + 1) * u) * (0.5 + np.abs(x) @ np.abs(w).T)
    assert (np.abs(fast - exact) <= bound).all()
    assert (np.abs(plain - exact) <= bound).all()  # the same bound as the sequential sum


@pytest.mark.parametrize("n,k", [(16, 4 * LANES), (197, 3 * LANES + 5)])
@pytest.mark.parametrize("combine", ["T.max(y[vi, vj], x[vi, vk] * w[vj, vk])",
                                     "T.min(y[vi, vj], x[vi, vk] * w[vj, vk])"])
def test_maxima_and_minima_get_vector_partial_results_bit_for_bit(combine, n, k):
    """A maximum (softmax's row maximum) or minimum has no rounding: vectors of partial maxima,
    taken again at the end, give the same bits as the sequential order (on numbers; which of
    two NaNs or signed zeros comes out may differ, as it does with the order of the inputs)."""
    func = matvec(n, k, combine=combine)
    assert is_dot_product(func)
    x, w = (RNG.standard_normal([int(d.value) for d in func.buffer_map[p].shape]) * 20 for p in func.params[:2])
    x, w = x.astype("float32"), w.astype("float32")
    np.testing.assert_array_equal(run(func, [x, w], True), run(func, [x, w], False))


@pytest.mark.parametrize("what,func", [
    ("a reduction shorter than two vectors", lambda: matvec(16, LANES + 3)),
    ("an integer sum", lambda: matvec(16, 4 * LANES, dtype="int32", init="T.int32(1)")),
])
def test_other_reductions_keep_their_order_bit_for_bit(what, func):
    func = func()
    assert not is_dot_product(func), what
    dtype = func.buffer_map[func.params[0]].dtype
    x, w = (RNG.standard_normal([int(d.value) for d in func.buffer_map[p].shape]) * 20 for p in func.params[:2])
    x, w = x.astype(dtype), w.astype(dtype)
    np.testing.assert_array_equal(run(func, [x, w], True), run(func, [x, w], False))


def test_the_seed_mlp_at_batch_one_runs_its_matrix_vector_products_as_dot_products():
    """After ReadTransposedInPlace, the MLP's matmuls read the weights in rows: dot products."""
    from tvmscript.compiler.transform.read_transposed import read_transposed_in_place

    mod = read_transposed_in_place(tvms.load(str(ROOT / "samples" / "mlp_zero.tvms")))
    funcs = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)]
    assert len(funcs) == 2 and all(is_dot_product(f) for f in funcs)
