"""decompose_reduction and rfactor: the printed result is TVM 0.27's, the function computes the
same, preconditions are TVM's and a rejected call changes nothing.

The TVM outputs are in tests/golden/schedule_reduction/ (made by
tools/tvm_reduction_reference.py); tests/schedules/test_schedule_goldens.py replays the cases of
tests/golden/schedule/ as well.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.compiler.schedule.iter_map import detect_iter_map, is_affine_binding
from tvmscript.compiler.schedule.reduction import match_reducer
from tvmscript.ir import structural_equal

from support.schedule_cases import REDUCTION_DIR, cases_named, schedule_case
from support.schedule_check import assert_same_result, check_golden_case, check_golden_rejected, module, random_args, run

CASES = cases_named(("decompose_", "rfactor_", "mlc_", "err_decompose_", "err_rfactor_"), REDUCTION_DIR)
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error]


def _static(mod) -> bool:
    return all(isinstance(d, tir.IntImm) for f in mod.functions.values() if isinstance(f, tir.PrimFunc)
               for buf in f.buffer_map.values() for d in buf.shape)


def _input(name: str) -> str:
    return schedule_case(name, REDUCTION_DIR).input_text


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_matches_tvm(case):
    # rfactor reassociates a float sum: equal up to rounding. (Symbolic shapes are not run.)
    check_golden_case(case, numeric=_static(module(case.input_text)), rtol=1e-5)


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_rejected_like_tvm(case):
    check_golden_rejected(case, ("decompose_reduction", "rfactor"))


# ----------------------------------------------------------------------------- decompose_reduction

MM_RELU = _input("mlc_mm_relu_decompose_split_reorder")


def test_mlc_mm_relu_decompose_after_split_reorder():
    """The mlc.ai TensorIR chapter's schedule: handles follow the block to its new name."""
    mod = module(MM_RELU)
    sch = Schedule(mod)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    init = sch.decompose_reduction(block_Y, k)
    assert init.name == "Y_init" and block_Y.name == "Y_update"
    assert sch.get(block_Y).init is None
    assert [lp.var.name for lp in sch.get_loops(init)] == ["i", "j_0", "j_1_init"]
    assert [lp.var.name for lp in sch.get_loops(block_Y)] == ["i", "j_0", "k", "j_1"]
    # the update block now lists the accumulator among its reads, first
    assert [r.buffer.name for r in sch.get(block_Y).reads] == ["Y", "A", "B"]
    assert sch.get(init).reads == []
    assert_same_result(mod, sch.mod, name="mm_relu")


def test_decompose_at_outer_loop_copies_spatial_loops():
    mod = module(MM_RELU)
    sch = Schedule(mod)
    y = sch.get_block("Y", "mm_relu")
    i, _, _ = sch.get_loops(y)
    init = sch.decompose_reduction(y, i)
    assert [lp.var.name for lp in sch.get_loops(init)] == ["i_init", "j_init"]
    # the init nest sits right before the loop it was decomposed at
    root = sch.mod["mm_relu"].body.block.body
    assert isinstance(root, tir.SeqStmt) and root.seq[0].loop_var.name == "i_init"
    assert_same_result(mod, sch.mod, name="mm_relu")


def test_decompose_rejects_loop_outside_block():
    sch = Schedule(module(MM_RELU))
    y = sch.get_block("Y", "mm_relu")
    i, j = sch.get_loops(sch.get_block("C", "mm_relu"))
    before = sch.mod
    with pytest.raises(ScheduleError) as info:
        sch.decompose_reduction(y, i)
    err = info.value
    assert err.primitive == "decompose_reduction" and "not an ancestor" in err.reason
    assert err.span is not None  # the Y block's line in the source
    assert structural_equal(sch.mod, before)


def test_decompose_keeps_a_split_predicate_only_for_loops_kept():
    mod = module(_input("decompose_tiled_with_predicate"))
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 3])
    k0, k1 = sch.split(k, factors=[None, 6])
    sch.reorder(i0, j, k0, i1, k1)
    init = sch.decompose_reduction(c, k0)
    realize = sch.index("main").blocks[init.name]
    from tvmscript.ir.tir_visitor import vars_in
    assert [v.name for v in vars_in([realize.predicate])] == ["i_0", "i_1_init"]
    assert_same_result(mod, sch.mod)


# ----------------------------------------------------------------------------- rfactor

ROW_SUM = _input("rfactor_then_decompose")

LONG_SUM = """
@T.prim_func
def main(A: T.Buffer((8, 4096), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4096):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_rfactor_of_a_sum_split_in_two_is_numerically_equal():
    """Partial sums change the order of float additions: equal up to reassociation."""
    func = tvms.parse(LONG_SUM)
    sch = Schedule(func)
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, factors=[None, 64])
    rf = sch.rfactor(ki, 0)
    assert rf.name == "B_rf" and b.name == "B"
    assert sch.get(rf).writes[0].buffer.name == "B_rf"
    assert [d.value for d in sch.get(rf).writes[0].buffer.shape] == [64, 8]
    assert [iv.kind for iv in sch.get(b).iter_vars] == ["R", "S"]  # reduces over the partial sums
    after = sch.mod["main"]
    assert_same_result(func, after, rtol=1e-5, atol=1e-5)
    args = random_args(func, seed=3)
    expected = args[0].astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(run(after, args)[1], expected, rtol=1e-5, atol=1e-4)


def test_rfactor_buffer_goes_to_the_root_block():
    sch = Schedule(module(ROW_SUM))
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    _, ki = sch.split(k, factors=[None, 4])
    sch.rfactor(ki, 0)
    root = sch.mod["main"].body.block
    assert [buf.name for buf in root.alloc_buffers] == ["B_rf"]


def test_rfactor_rejects_unknown_combiner():
    src = ROW_SUM.replace("B[vi] = B[vi] + A[vi, vk]", "B[vi] = B[vi] - A[vi, vk]")
    sch = Schedule(module(src))
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    before = sch.mod
    with pytest.raises(ScheduleError, match="no known reducer"):
        sch.rfactor(k, 0)
    assert structural_equal(sch.mod, before)


def _store(buf, value, idx):
    return tir.BufferStore(buf, value, idx)


@pytest.mark.parametrize("kind,init,make", [
    ("sum", 0.0, lambda x, y: tir.Add("float32", x, y)),
    ("product", 1.0, lambda x, y: tir.Mul("float32", x, y)),
    ("min", 3.4028234663852886e38, lambda x, y: tir.Min("float32", x, y)),
    ("max", -3.4028234663852886e38, lambda x, y: tir.Max("float32", x, y)),
])
def test_match_reducer_recognises_the_four_combiners(kind, init, make):
    buf, a = tir.Buffer("B", [tir.IntImm("int32", 4)]), tir.Buffer("A", [tir.IntImm("int32", 4)])
    i = tir.Var("int32", "i")
    lhs = tir.BufferLoad("float32", buf, [i])
    rhs = tir.BufferLoad("float32", a, [i])
    found = match_reducer(_store(buf, tir.FloatImm("float32", init), [i]), _store(buf, make(lhs, rhs), [i]))
    assert found is not None and found[3] is rhs
    # the accumulator on the right, or another init value: not recognised (as in TVM)
    assert match_reducer(_store(buf, tir.FloatImm("float32", init), [i]), _store(buf, make(rhs, lhs), [i])) is None
    assert match_reducer(_store(buf, tir.FloatImm("float32", 7.0), [i]), _store(buf, make(lhs, rhs), [i])) is None


def test_rfactor_of_int_min_uses_the_dtype_identity():
    mod = module(_input("rfactor_row_min_int"))
    sch = Schedule(mod)
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    ko, _ = sch.split(k, factors=[None, 16])
    rf = sch.rfactor(ko, 1)
    assert sch.get(rf).init.value.value == 2147483647
    assert_same_result(mod, sch.mod)


# ----------------------------------------------------------------------------- affine bindings


def _loops_and_realize(func):
    sch = Schedule(func)
    idx = sch.index("main")
    realize = next(r for n, r in idx.blocks.items() if n != "root")
    return idx.loops_above(realize), realize


def test_affine_binding_detection():
    ok = tvms.parse("""
@T.prim_func
def main(A: T.Buffer((64,), "float32")):
    for f0, f1 in T.grid(8, 8):
        with T.block("A"):
            vi = T.axis.spatial(64, f0 * 8 + f1)
            A[vi] = T.float32(0)
""")
    loops, realize = _loops_and_realize(ok)
    assert is_affine_binding(realize, loops)
    imap = detect_iter_map(realize.iter_values, {lp.loop_var: 8 for lp in loops})
    assert imap.extents == [64]
    twice = tvms.parse("""
@T.prim_func
def main(A: T.Buffer((64, 64), "float32")):
    for i in range(64):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, i])
            A[vi, vj] = T.float32(0)
""")
    loops, realize = _loops_and_realize(twice)
    assert not is_affine_binding(realize, loops)  # one loop point -> one block point only


def test_non_affine_reduction_is_rejected():
    src = """
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi = T.axis.spatial(64, i * i)
            vk = T.axis.reduce(64, k)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""
    sch = Schedule(tvms.parse(src))
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    with pytest.raises(ScheduleError, match="condition 2"):
        sch.decompose_reduction(b, k)
    with pytest.raises(ScheduleError, match="condition 2"):
        sch.rfactor(k, 0)


# ----------------------------------------------------------------------------- random schedules

SMALL_MATMUL = """
@T.prim_func
def main(A: T.Buffer((24, 20), "float32"), B: T.Buffer((20, 16), "float32"), C: T.Buffer((24, 16), "float32")):
    for i, j, k in T.grid(24, 16, 20):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


@pytest.mark.parametrize("seed", range(16))
def test_random_tiling_then_reduction_primitives_keep_the_result(seed):
    """Tile with random (also non-dividing) factors, reorder at random, then decompose, rfactor
    or blockize at a random loop: each either refuses (ScheduleError, nothing changed) or
    computes what the input computed."""
    import random

    rng = random.Random(seed)
    func = tvms.parse(SMALL_MATMUL)
    sch = Schedule(func)
    c = sch.get_block("C")
    loops = []
    for lp in sch.get_loops(c):
        loops += sch.split(lp, factors=[None, rng.choice([2, 3, 4, 5])])
    rng.shuffle(loops)
    sch.reorder(*loops)
    if rng.random() < 0.5:  # and fuse two neighbours, split again
        ls = sch.get_loops(c)
        n = rng.randrange(len(ls) - 1)
        sch.split(sch.fuse(ls[n], ls[n + 1]), factors=[None, rng.choice([2, 4, 8])])
    for _ in range(2):
        prim = rng.choice(["decompose", "rfactor", "blockize"])
        loops = sch.get_loops(c)
        lp = rng.choice(loops)
        snapshot = sch.mod
        try:
            if prim == "decompose":
                sch.decompose_reduction(c, lp)
            elif prim == "rfactor":
                sch.rfactor(lp, rng.choice([0, 1, -1]))
            else:
                sch.blockize(lp, preserve_unit_iters=rng.choice([True, False]))
        except ScheduleError:
            assert structural_equal(sch.mod, snapshot)
            continue
        assert_same_result(func, sch.mod, rtol=1e-5)
        assert tvms.parse(sch.mod.script()).script() == sch.mod.script()


# ----------------------------------------------------------------------------- where tvms differs from TVM


def test_rfactor_write_back_keeps_the_spatial_predicate():
    """After a split that overshoots a spatial extent TVM leaves the write-back block without
    the split's T.where (writing out of bounds); tvms keeps the spatial conditions."""
    func = tvms.parse(SMALL_MATMUL)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, factors=[None, 5])  # 16 = 4 * 5 - 4: j_0 * 5 + j_1 < 16
    k0, k1 = sch.split(k, factors=[None, 5])
    sch.rfactor(k0, 0)
    from tvmscript.ir.tir_visitor import vars_in
    pred = sch.index("main").blocks["C"].predicate
    assert [v.name for v in vars_in([pred])] == ["j_0", "j_1"]
    assert_same_result(func, sch.mod)


def test_rfactor_refuses_partials_without_elements():
    """k = 21 values in 11 pairs fused from (k_1, k_0): the partial of the last pair has no
    element, so TVM's rfactor would leave it uninitialised."""
    func = tvms.parse(SMALL_MATMUL)
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    k0, k1 = sch.split(k, factors=[None, 3])
    sch.reorder(i, j, k1, k0)
    f0, f1 = sch.split(sch.fuse(k1, k0), factors=[None, 2])
    before = sch.mod
    with pytest.raises(ScheduleError, match="never be initialised"):
        sch.rfactor(f0, 0)
    assert structural_equal(sch.mod, before)


def test_second_rfactor_of_one_reduction():
    """GEMV's two-stage rfactor: TVM names both rfactor blocks ``Y_rf``; tvms finds blocks by
    name, so the second is ``Y_rf_1``. Its buffer keeps TVM's name and prints as ``Y_rf_1``."""
    src = """
@T.prim_func
def main(W: T.Buffer((64, 256), "float32"), X: T.Buffer((256,), "float32"), Y: T.Buffer((64,), "float32")):
    for i, k in T.grid(64, 256):
        with T.block("Y"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = T.float32(0)
            Y[vi] = Y[vi] + W[vi, vk] * X[vk]
"""
    func = tvms.parse(src)
    sch = Schedule(func)
    y = sch.get_block("Y")
    i, k = sch.get_loops(y)
    r, tr, vc = sch.split(k, factors=[None, 16, 4])
    sch.reorder(r, tr, vc)
    rf = sch.rfactor(sch.fuse(tr, vc), 0)
    _, f = sch.get_loops(y)
    tr, vc = sch.split(f, factors=[16, None])
    rf2 = sch.rfactor(tr, 0)
    assert (rf.name, rf2.name) == ("Y_rf", "Y_rf_1")
    text = sch.mod.script()
    assert "Y_rf = T.alloc_buffer((64, 64))" in text and "Y_rf_1 = T.alloc_buffer((16, 64))" in text
    assert_same_result(func, sch.mod, rtol=1e-5)
