"""blockize: the printed result is TVM 0.27's (outer block ``<name>_o``, inner iterators from the
subspace division, the reduction's init moved to the outer block), the function computes the
same, and a binding that does not divide is rejected without changing anything.

TVM's outputs are in tests/golden/schedule_reduction/ (tools/tvm_reduction_reference.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.compiler.schedule.iter_map import subspace_divide, trivial_divide
from tvmscript.ir import structural_equal

from support.schedule_cases import REDUCTION_DIR, cases_named, schedule_case
from support.schedule_check import assert_same_result, check_golden_case, check_golden_rejected, module

CASES = cases_named(("blockize_", "err_blockize_"), REDUCTION_DIR)
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error]


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_matches_tvm(case):
    check_golden_case(case)


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_rejected_like_tvm(case):
    check_golden_rejected(case, ("blockize",))


MATMUL = schedule_case("blockize_matmul_4x4_tile", REDUCTION_DIR).input_text


def test_blockize_inner_4x4_tile_of_a_matmul():
    mod = module(MATMUL)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(i0, j0, k, i1, j1)
    outer = sch.blockize(i1)
    assert outer.name == "C_o" and c.name == "C"  # the handle stays on the inner block
    ob, ib = sch.get(outer), sch.get(c)
    assert [iv.var.name for iv in ob.iter_vars] == ["vi_o", "vj_o", "vk_o"]
    assert [iv.kind for iv in ob.iter_vars] == ["S", "S", "R"]
    assert [iv.var.name for iv in ib.iter_vars] == ["vi_i", "vj_i"]
    assert [lp.var.name for lp in sch.get_loops(outer)] == ["i_0", "j_0", "k"]
    assert [lp.var.name for lp in sch.get_loops(c)] == ["i_1", "j_1"]
    # the outer block reads a 4x4 tile of A's rows (one column per k)
    text = sch.mod.script()
    assert "T.reads(A[vi_o * 4:vi_o * 4 + 4, vk_o], B[vk_o, vj_o * 4:vj_o * 4 + 4])" in text
    assert "C[vi_o * 4 + vi_i, vj_o * 4 + vj_i]" in text
    # the init moved to the outer block: the tile is zeroed once, before its first k
    assert ib.init is None and ob.init is not None
    assert 'with T.block("C_init"):' in text
    # the printed module reads back as the same module
    assert tvms.parse(text).script() == text
    assert_same_result(mod, sch.mod)


def test_blockize_twice_nests_outer_blocks():
    """TVM names both outer blocks ``C_o``; tvms keeps block names unique (``C_o_1``)."""
    mod = module(MATMUL)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 16])
    j0, j1 = sch.split(j, factors=[None, 16])
    k0, k1 = sch.split(k, factors=[None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    o1 = sch.blockize(i1)
    a, b, d = sch.get_loops(c)
    a0, a1 = sch.split(a, factors=[None, 4])
    b0, b1 = sch.split(b, factors=[None, 4])
    d0, d1 = sch.split(d, factors=[None, 4])
    sch.reorder(a0, b0, d0, a1, b1, d1)
    o2 = sch.blockize(a1)
    assert (o1.name, o2.name) == ("C_o", "C_o_1")
    assert_same_result(mod, sch.mod)


def test_blockize_rejects_loop_with_two_blocks_and_changes_nothing():
    sch = Schedule(module(schedule_case("err_blockize_two_blocks", REDUCTION_DIR).input_text))
    i, = sch.get_loops(sch.get_block("B"))
    before = sch.mod
    with pytest.raises(ScheduleError, match="exactly one block"):
        sch.blockize(i)
    assert structural_equal(sch.mod, before)


def test_blockize_rejects_non_loop_statement_between():
    src = """
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        if i < 8:
            for j in range(16):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]
"""
    sch = Schedule(tvms.parse(src))
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="loops only"):
        sch.blockize(i)


# ----------------------------------------------------------------------------- the division


def _vars(*names):
    return [tir.Var("int32", n) for n in names]


class _Loop:
    def __init__(self, var, extent):
        self.loop_var, self.min, self.extent = var, tir.IntImm("int32", 0), tir.IntImm("int32", extent)


def test_subspace_divide_splits_each_binding():
    i0, i1, k = _vars("i0", "i1", "k")
    loops = [_Loop(i0, 8), _Loop(k, 32), _Loop(i1, 16)]
    vi = i0 * 16 + i1
    d = subspace_divide([vi, k], loops, {i1}, tir.IntImm("bool", 1))
    (o_expr, o_ext, i_expr, i_ext), (ko, kext, ki, kiext) = d.parts
    assert o_expr is i0 and o_ext == 8 and i_expr is i1 and i_ext == 16
    assert ko is k and kext == 32 and kiext == 1
    # an inner loop above an outer one: not of the form outer * E + inner
    assert subspace_divide([vi], loops, {i0}, tir.IntImm("bool", 1)) is None


def test_trivial_division_takes_whole_bindings():
    i, j = _vars("i", "j")
    ivs = [tir.IterVar(tir.Var("int32", "vi"), tir.Range(tir.IntImm("int32", 0), tir.IntImm("int32", 64)), "S")]
    d = trivial_divide(ivs, [i * i], tir.IntImm("bool", 1), {i}, {j})
    assert d.parts[0][1] == 64 and d.parts[0][3] == 1
    assert trivial_divide(ivs, [i * j], tir.IntImm("bool", 1), {i}, {j}) is None


def test_outer_init_drops_conditions_on_reduce_loops():
    """TVM copies the inner block's whole T.where into the outer block's init, where the
    conditions on the reduce loops name loops the init does not have (TVM's own verifier then
    rejects the module); tvms keeps the conditions on the loops the init iterates."""
    mod = module(MATMUL)
    sch = Schedule(mod)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 4])
    k0, k1 = sch.split(k, factors=[None, 3])  # 128 = 43 * 3 - 1: k_0 * 3 + k_1 < 128
    sch.reorder(i0, j, i1, k0, k1)
    outer = sch.blockize(i1)
    init = sch.get(outer).init
    from tvmscript.ir.tir_visitor import vars_in
    names = {v.name for v in vars_in([init])}
    assert "k_0" not in names and "k_1" not in names
    assert_same_result(mod, sch.mod)


SYMBOLIC_ROWS = '''
@T.prim_func(s_tir=True)
def main(a: T.handle, b: T.handle, s: T.handle):
    n = T.int64()
    S = T.match_buffer(s, (n,), "float32")  # binds n when the function is called
    A = T.match_buffer(a, (n * T.int64(16), T.int64(8)), "float32")
    B = T.match_buffer(b, (n * T.int64(16), T.int64(8)), "float32")
    for i, j in T.grid(n * T.int64(16), T.int64(8)):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''


def test_blockize_under_a_loop_of_symbolic_extent():
    """The outer loop's extent is ``n``: the outer iterator spans the iterator's extent over
    the tile's (``n * 16 // 16``), as TVM's subspace division allows a symbolic outermost
    iterator. (A sequence length in the rows of an fp16 matmul on tensor cores.)"""
    mod = module(SYMBOLIC_ROWS)
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, factors=[None, 16])
    outer = sch.blockize(i1)
    ob = sch.get(outer)
    from tvmscript.printer import to_script

    assert [to_script(iv.dom.extent) for iv in ob.iter_vars] == ["n", "T.int64(1)"]
    assert "B[vi_o * T.int64(16) + vi_i, vj_i] = A[vi_o * T.int64(16) + vi_i, vj_i]" in sch.mod.script()
    a = np.random.default_rng(0).standard_normal((48, 8)).astype("float32")
    for m in (mod, sch.mod):
        b = np.zeros_like(a)
        tvms.compile(m, target="llvm")["main"](a, b, np.zeros(3, "float32"))
        np.testing.assert_array_equal(b, a * 2)
