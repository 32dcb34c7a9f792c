"""The VM's memory plan (`compiler.memory_plan`): which intermediate tensors live in a
function's arena, the span of bindings each is live over, and the layout in which tensors
never live at the same time share memory (two tensors live together never overlap)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmscript as tvms
from tvmscript.compiler.memory_plan import ArenaTensor, arena_layout
from tvmscript.ir import relax, tir

INCREMENT = '''
    @T.prim_func
    def add1(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.block("b"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] + T.float32(1)
'''

ADD1 = INCREMENT + '''
    @T.prim_func
    def add(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.block("c"):
                vi = T.axis.spatial(64, i)
                C[vi] = A[vi] + B[vi]
'''


def _module(body: str) -> str:
    return f'''
@I.ir_module
class Module:
{ADD1}
    @R.function
    def main(x: R.Tensor((64,), "float32")) -> R.Tensor((64,), "float32"):
        cls = Module
{body}
'''


def _run(text: str, x):
    ex = tvms.compile(tvms.parse(text))
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    first = vm["main"](x).numpy()
    np.testing.assert_array_equal(vm["main"](x).numpy(), first)  # the arena reused: the same result
    return ex.functions["main"], first


CHAIN = _module('''
        a = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((64,), "float32"))
        b = R.call_tir(cls.add1, (a,), out_sinfo=R.Tensor((64,), "float32"))
        c = R.call_tir(cls.add1, (b,), out_sinfo=R.Tensor((64,), "float32"))
        d = R.call_tir(cls.add1, (c,), out_sinfo=R.Tensor((64,), "float32"))
        e = R.call_tir(cls.add1, (d,), out_sinfo=R.Tensor((64,), "float32"))
        out = R.call_tir(cls.add1, (e,), out_sinfo=R.Tensor((64,), "float32"))
        return out''')


def test_a_chain_of_kernels_takes_turns_in_two_slots():
    """Each intermediate is dead once the next kernel has read it: five of them need two
    slots (a kernel's input and output are live together), not five."""
    func, out = _run(CHAIN, np.zeros(64, "float32"))
    assert len(func.arena) == 5
    assert func.arena_bytes == 2 * 64 * 4
    assert {offset for offset, _, _ in func.arena} == {0, 256}
    np.testing.assert_array_equal(out, np.full(64, 6, "float32"))


def test_a_tensor_read_late_keeps_its_memory_until_then():
    """``a`` is read again by the last kernel: nothing made in between may take its memory
    (had ``c`` or ``d`` overwritten it, the sum would not be x + 1 + x + 4)."""
    text = _module('''
        a = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((64,), "float32"))
        b = R.call_tir(cls.add1, (a,), out_sinfo=R.Tensor((64,), "float32"))
        c = R.call_tir(cls.add1, (b,), out_sinfo=R.Tensor((64,), "float32"))
        d = R.call_tir(cls.add1, (c,), out_sinfo=R.Tensor((64,), "float32"))
        out = R.call_tir(cls.add, (a, d), out_sinfo=R.Tensor((64,), "float32"))
        return out''')
    x = np.arange(64, dtype="float32")
    func, out = _run(text, x)
    offsets = {i: offset for i, (offset, _, _) in enumerate(func.arena)}
    assert all(offsets[0] != offsets[i] for i in (1, 2, 3))
    assert func.arena_bytes == 3 * 64 * 4  # a, and two slots taking turns for b, c, d
    np.testing.assert_array_equal(out, (x + 1) + (x + 4))


def test_a_view_keeps_the_tensor_it_views_alive():
    """``r`` is a reshape of ``a`` (a view of its memory): ``a`` is live as long as ``r`` is read."""
    text = '''
@I.ir_module
class Module:
''' + INCREMENT + '''
    @T.prim_func
    def add2d(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
        for i, j in T.grid(8, 8):
            with T.block("c"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]

    @R.function
    def main(x: R.Tensor((64,), "float32")) -> R.Tensor((8, 8), "float32"):
        cls = Module
        with R.dataflow():
            a = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((64,), "float32"))
            r = R.reshape(a, R.shape([8, 8]))
            b = R.call_tir(cls.add1, (a,), out_sinfo=R.Tensor((64,), "float32"))
            c = R.call_tir(cls.add1, (b,), out_sinfo=R.Tensor((64,), "float32"))
            d = R.call_tir(cls.add1, (c,), out_sinfo=R.Tensor((64,), "float32"))
            d2 = R.reshape(d, R.shape([8, 8]))
            out = R.call_tir(cls.add2d, (r, d2), out_sinfo=R.Tensor((8, 8), "float32"))
            R.output(out)
        return out
'''
    x = np.arange(64, dtype="float32")
    _, out = _run(text, x)
    np.testing.assert_array_equal(out, ((x + 1) + (x + 4)).reshape(8, 8))


def test_tensors_of_two_branches_and_one_read_after_them():
    """A tensor made before an ``if`` and read after it stays live through both branches."""
    text = '''
@I.ir_module
class Module:
''' + ADD1 + '''
    @R.function
    def main(x: R.Tensor((64,), "float32"), k: R.Prim("int64")) -> R.Tensor((64,), "float32"):
        cls = Module
        a = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((64,), "float32"))
        if k:
            b = R.call_tir(cls.add1, (a,), out_sinfo=R.Tensor((64,), "float32"))
            c = R.call_tir(cls.add1, (b,), out_sinfo=R.Tensor((64,), "float32"))
            out = R.call_tir(cls.add, (a, c), out_sinfo=R.Tensor((64,), "float32"))
        else:
            b2 = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((64,), "float32"))
            c2 = R.call_tir(cls.add1, (b2,), out_sinfo=R.Tensor((64,), "float32"))
            out = R.call_tir(cls.add, (a, c2), out_sinfo=R.Tensor((64,), "float32"))
        return out
'''
    ex = tvms.compile(tvms.parse(text))
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    x = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(vm["main"](x, 1).numpy(), (x + 1) + (x + 3))
    np.testing.assert_array_equal(vm["main"](x, 0).numpy(), (x + 1) + (x + 2))


def _tensor(n: int, first: int, last: int) -> ArenaTensor:
    return ArenaTensor(relax.TensorStructInfo([tir.IntImm("int64", n)], "float32"), first, last)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 40), st.integers(0, 15)), min_size=1, max_size=40))
def test_tensors_live_together_never_share_memory(specs):
    """Any spans and sizes: two tensors live at one binding get disjoint bytes; the arena is
    no larger than a slot per tensor, and no smaller than what is live at the busiest binding."""
    tensors = {k: _tensor(n, first, first + length) for k, (n, first, length) in enumerate(specs)}
    layout, total = arena_layout(tensors)
    size = [(-(-n * 4 // 64)) * 64 for n, _, _ in specs]
    for i, (oi, _, _) in enumerate(layout):
        ti = tensors[i]
        assert oi % 64 == 0 and oi + size[i] <= total
        for j in range(i + 1, len(layout)):
            tj, oj = tensors[j], layout[j][0]
            if ti.last < tj.first or tj.last < ti.first:
                continue
            assert oi + size[i] <= oj or oj + size[j] <= oi, (i, j)
    assert total <= sum(size)
    busiest = max(sum(s for s, t in zip(size, tensors.values()) if t.first <= p <= t.last) for p in range(60))
    assert total >= busiest
