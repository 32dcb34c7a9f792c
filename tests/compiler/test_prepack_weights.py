"""Bound weights packed once at compile time (compiler/prepack_constants.py with
compiler/schedule_cpu/prepack.py): a kernel parameter every call passes a constant is marked
layout-free, the register tile reads it in its panels' layout instead of filling panels on
each call, and the build packs the constant. Results are NumPy's, and bit for bit those of
the build without the feature (the same reductions in the same order)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
import tvmscript.compiler.build as build_module
from tvmscript import relax
from tvmscript.compiler import build_cpu as cpu
from tvmscript.compiler.prepack_constants import gather_index, mark_layout_free
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_cpu.prepack import LAYOUT_FREE_ATTR, PACKED_LAYOUTS_ATTR
from tvmscript.compiler.transform._common import walk_relax
from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.compiler.transform import BindParams

RNG = np.random.default_rng(27)


def _rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def _module(params: str, body: str):
    return tvms.parse(f"""
@I.ir_module
class Module:
    @R.function
    def main({params}):
        with R.dataflow():
{body}
        return y
""")


def _run(mod, weights: dict, inputs: list, monkeypatch=None, prepack: bool = True):
    """Outputs of ``mod`` with ``weights`` bound, built with (or without) the prepacking,
    and the executable."""
    bound = BindParams("main", weights)(mod)
    if not prepack:
        monkeypatch.setattr(build_module, "mark_layout_free", lambda m: m)
    ex = tvms.compile(bound, "llvm")
    if not prepack:
        monkeypatch.undo()
    out = relax.VirtualMachine(ex, tvms.cpu())["main"](*[tvms.nd.array(a) for a in inputs])
    return _numpy(out), ex


def _numpy(out):
    """An output, or a tuple's outputs added (the kernels' results, each checked)."""
    return out.numpy() if hasattr(out, "numpy") else sum(o.numpy() for o in out)


def _constant_shapes(ex) -> list:
    shapes = []

    def visit(n):
        if isinstance(n, relax.Constant):
            shapes.append(tuple(n.data.shape))

    walk_relax(ex.mod["main"], visit)
    return shapes


def _check(mod, weights, inputs, expected, monkeypatch, packed_shapes=None):
    got, ex = _run(mod, weights, inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    plain, _ = _run(mod, weights, inputs, monkeypatch, prepack=False)
    np.testing.assert_array_equal(got, plain)
    if packed_shapes is not None:
        assert sorted(s for s in _constant_shapes(ex) if len(s) == 3) == sorted(packed_shapes)
    return ex


@pytest.mark.parametrize("m, k, n, transposed", [
    (7, 64, 96, True), (197, 64, 100, True), (7, 8, 48, True), (128, 256, 768, True),
    (197, 64, 96, False), (33, 128, 200, False)])
def test_matmul_with_a_bound_weight(m, k, n, transposed, monkeypatch):
    w = _rand(n, k) if transposed else _rand(k, n)
    x = _rand(m, k)
    wt = "R.permute_dims(w)" if transposed else "w"
    mod = _module(f"x: R.Tensor(({m}, {k}), \"float32\"), w: R.Tensor({w.shape}, \"float32\")",
                  f"            y = R.matmul(x, {wt})\n            R.output(y)")
    # (bound, the transpose is folded into the constant; 197 rows may be the vector loop, the
    # weight then not packed at all: whether it is, the other tests check)
    _check(mod, {"w": w}, [x], x @ (w.T if transposed else w), monkeypatch)


def test_symbolic_rows(monkeypatch):
    w = _rand(256, 128)
    mod = _module('x: R.Tensor(("n", 128), "float32"), w: R.Tensor((256, 128), "float32")',
                  "            y = R.matmul(x, R.permute_dims(w))\n            R.output(y)")
    bound = BindParams("main", {"w": w})(mod)
    ex = tvms.compile(bound, "llvm")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    monkeypatch.setattr(build_module, "mark_layout_free", lambda m: m)
    plain = relax.VirtualMachine(tvms.compile(bound, "llvm"), tvms.cpu())
    for rows in (1, 3, 7, 8, 33, 128):
        x = _rand(rows, 128)
        got = vm["main"](tvms.nd.array(x)).numpy()
        np.testing.assert_allclose(got, x @ w.T, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got, plain["main"](tvms.nd.array(x)).numpy())
    assert any(len(s) == 3 for s in _constant_shapes(ex))


def test_batched_matmul_shares_the_constant(monkeypatch):
    w, x = _rand(64, 96), _rand(4, 7, 64)
    mod = _module('x: R.Tensor((4, 7, 64), "float32"), w: R.Tensor((64, 96), "float32")',
                  "            y = R.matmul(x, w)\n            R.output(y)")
    ex = _check(mod, {"w": w}, [x], x @ w, monkeypatch)
    assert any(len(s) == 3 for s in _constant_shapes(ex))


def test_conv2d_with_a_bound_weight(monkeypatch):
    """A convolution's weight (O, I, kh, kw) read whole by its nest, packed over the output
    channels, the reduce axes (I, kh, kw) in its panels."""
    import torch

    w, x = _rand(32, 16, 3, 3), _rand(1, 16, 14, 14)
    mod = _module('x: R.Tensor((1, 16, 14, 14), "float32"), w: R.Tensor((32, 16, 3, 3), "float32")',
                  "            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])\n            R.output(y)")
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    ex = _check(mod, {"w": w}, [x], expected, monkeypatch)
    assert [len(s) for s in _constant_shapes(ex)] == [5]  # [O tiles, I, kh, kw, tile]


def test_a_1x1_nhwc_kernel_read_through_unit_loops_is_packed(monkeypatch):
    """resnet18's downsample convolutions in NHWC: the HWIO weight's two axes of one are
    indexed by the kernel window's loops of one iteration, which do not stop its packing."""
    import torch

    w, x = _rand(1, 1, 64, 128), _rand(1, 14, 14, 64)
    mod = _module('x: R.Tensor((1, 14, 14, 64), "float32"), w: R.Tensor((1, 1, 64, 128), "float32")',
                  '            y = R.nn.conv2d(x, w, strides=[2, 2], data_layout="NHWC", kernel_layout="HWIO")\n'
                  "            R.output(y)")
    expected = torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                                          torch.from_numpy(w).permute(3, 2, 0, 1), stride=2).permute(0, 2, 3, 1)
    ex = _check(mod, {"w": w}, [x], expected.numpy(), monkeypatch)
    assert [len(s) for s in _constant_shapes(ex)] == [3]


@pytest.mark.parametrize("cin, cout, packed", [(192, 32, True), (16, 96, False)])
def test_pointwise_conv2d_vectorizes_channels_over_a_long_reduction(cin, cout, packed, monkeypatch):
    """A 1x1 convolution summing 192 channels (mobilenet's projections) is vectorized over its
    output channels, its weight packed (`register_tile.LONG_REDUCTION`); one summing 16 (the
    expansions) over the map's pixels, its weight read as it is (broadcast)."""
    import torch

    w, x = _rand(cout, cin, 1, 1), _rand(1, cin, 14, 14)
    mod = _module(f'x: R.Tensor((1, {cin}, 14, 14), "float32"), w: R.Tensor(({cout}, {cin}, 1, 1), "float32")',
                  "            y = R.nn.conv2d(x, w)\n            R.output(y)")
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    ex = _check(mod, {"w": w}, [x], expected, monkeypatch)
    assert [len(s) for s in _constant_shapes(ex)] == ([3] if packed else [4])


def test_fused_matmul_add_gelu(monkeypatch):
    w, b, x = _rand(192, 64), _rand(192), _rand(7, 64)
    mod = _module('x: R.Tensor((7, 64), "float32"), w: R.Tensor((192, 64), "float32"), b: R.Tensor((192,), "float32")',
                  "            y = R.nn.gelu(R.add(R.matmul(x, R.permute_dims(w)), b))\n            R.output(y)")
    from math import erf

    z = x @ w.T + b
    expected = z * 0.5 * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    ex = _check(mod, {"w": w, "b": b}, [x], expected.astype(np.float32), monkeypatch)
    assert any(len(s) == 3 for s in _constant_shapes(ex))


def _mm(name: str, term: str) -> str:
    """``C = A @ B.T`` over ``term`` (a product of ``A[vi, vk]`` and ``B[vj, vk]``), 7 x 64 x 96."""
    return f"""
    @T.prim_func(private=True)
    def {name}(A: T.Buffer((7, 64), "float32"), B: T.Buffer((96, 64), "float32"), C: T.Buffer((7, 96), "float32")):
        for i, j, k in T.grid(7, 96, 64):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + {term}
"""


MM = _mm("mm", "A[vi, vk] * B[vj, vk]")


def _calling(body: str, params: str):
    return tvms.parse(f"""
@I.ir_module
class Module:
{MM}
{_mm("mm_doubled", "A[vi, vk] * B[vj, vk] * T.float32(2)")}
    @R.function
    def main(x: R.Tensor((7, 64), "float32"), {params}):
        cls = Module
        with R.dataflow():
{body}
        return y
""")


def test_a_kernel_called_with_two_constants(monkeypatch):
    w1, w2, x = _rand(96, 64), _rand(96, 64), _rand(7, 64)
    mod = _calling("""            a = R.call_tir(cls.mm, (x, w1), out_sinfo=R.Tensor((7, 96), "float32"))
            b = R.call_tir(cls.mm, (x, w2), out_sinfo=R.Tensor((7, 96), "float32"))
            y = (a, b)
            R.output(y)""", 'w1: R.Tensor((96, 64), "float32"), w2: R.Tensor((96, 64), "float32")')
    assert mark_layout_free(BindParams("main", {"w1": w1, "w2": w2})(mod))["mm"].attrs[LAYOUT_FREE_ATTR] == [1]
    ex = _check(mod, {"w1": w1, "w2": w2}, [x], x @ w1.T + x @ w2.T, monkeypatch)
    assert len([s for s in _constant_shapes(ex) if len(s) == 3]) == 2


def test_a_constant_used_by_two_kernels(monkeypatch):
    w, x = _rand(96, 64), _rand(7, 64)
    mod = _calling("""            a = R.call_tir(cls.mm, (x, w), out_sinfo=R.Tensor((7, 96), "float32"))
            b = R.call_tir(cls.mm_doubled, (x, w), out_sinfo=R.Tensor((7, 96), "float32"))
            y = (a, b)
            R.output(y)""", 'w: R.Tensor((96, 64), "float32")')
    ex = _check(mod, {"w": w}, [x], x @ w.T + (x * 2) @ w.T, monkeypatch)
    shapes = [s for s in _constant_shapes(ex) if len(s) == 3]
    assert len(shapes) == 2 and len(set(shapes)) == 1  # same layout: the calls pass one packed constant
    main = ex.mod["main"]
    calls = [b.value for blk in main.body.blocks for b in blk.bindings if getattr(b.value, "args", None)
             and len(b.value.args) > 1 and isinstance(b.value.args[1], relax.Tuple)]
    packed = [a for c in calls for a in c.args[1].fields if isinstance(a, relax.Constant)]
    assert len(packed) == 2 and packed[0] is packed[1]


def test_a_kernel_also_called_with_a_variable_keeps_its_layout(monkeypatch):
    w, v, x = _rand(96, 64), _rand(96, 64), _rand(7, 64)
    mod = _calling("""            a = R.call_tir(cls.mm, (x, w), out_sinfo=R.Tensor((7, 96), "float32"))
            b = R.call_tir(cls.mm, (x, v), out_sinfo=R.Tensor((7, 96), "float32"))
            y = (a, b)
            R.output(y)""", 'v: R.Tensor((96, 64), "float32"), w: R.Tensor((96, 64), "float32")')
    bound = BindParams("main", {"w": w})(mod)
    assert LAYOUT_FREE_ATTR not in mark_layout_free(bound)["mm"].attrs
    ex = tvms.compile(bound, "llvm")
    got = _numpy(relax.VirtualMachine(ex, tvms.cpu())["main"](tvms.nd.array(x), tvms.nd.array(v)))
    np.testing.assert_allclose(got, x @ w.T + x @ v.T, rtol=1e-4, atol=1e-4)
    assert not [s for s in _constant_shapes(ex) if len(s) == 3]


def test_a_layout_free_list_in_the_source_is_the_builds_to_decide():
    """Only constants are packed: a kernel the source marks layout-free but calls with a
    variable reads it as it is."""
    v, x = _rand(96, 64), _rand(7, 64)
    mod = _calling("""            y = R.call_tir(cls.mm, (x, v), out_sinfo=R.Tensor((7, 96), "float32"))
            R.output(y)""", 'v: R.Tensor((96, 64), "float32")')
    mm = mod["mm"]
    mod["mm"] = tir.PrimFunc(mm.params, mm.buffer_map, mm.body, mm.ret_type, {**mm.attrs, LAYOUT_FREE_ATTR: [1]},
                             mm.private, mm.span)
    assert LAYOUT_FREE_ATTR not in mark_layout_free(mod)["mm"].attrs
    got = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())["main"](tvms.nd.array(x), tvms.nd.array(v))
    np.testing.assert_allclose(got.numpy(), x @ v.T, rtol=1e-4, atol=1e-4)


def _blocks(stmt) -> list:
    names = []

    class _Names(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.Block):
                names.append(s.name)
            return super().visit_stmt(s)

    _Names().visit_stmt(stmt)
    return names


def test_the_scheduled_kernel_fills_no_panel():
    func = tvms.parse(MM.replace("(private=True)", "").replace("\n    ", "\n"))
    without = default_schedule(func)
    assert any(n.endswith("_pack") for n in _blocks(without.body))
    free = default_schedule(tir.PrimFunc(func.params, func.buffer_map, func.body, func.ret_type,
                                         {**func.attrs, LAYOUT_FREE_ATTR: [1]}))
    assert not any(n.endswith("_pack") for n in _blocks(free.body))
    layout = free.attrs[PACKED_LAYOUTS_ATTR][1]
    assert [d.value for d in free.buffer_map[free.params[1]].shape] == list(layout.shape)
    assert layout.shape[1] == 64 and layout.shape[0] * layout.shape[2] >= 96
    # the build gathers the constant by the layout's map: every weight element is held
    w = np.arange(96 * 64, dtype=np.float32).reshape(96, 64)
    packed = w[gather_index(layout)]
    assert set(packed.ravel().tolist()) == set(w.ravel().tolist())


def test_a_large_weight_is_split_between_the_threads(monkeypatch):
    """960 -> 320 channels over 7 x 7 pixels (mobilenet_v2's last projection): 5 tiles of
    output channels, but the weight (1.2 MB) is larger than the output, so the tiles run in
    parallel (collapsed with the rows inside them, 5 x 9) and each thread reads its share of
    the weight, not all of it. Results stay NumPy's and the unpacked build's bits."""
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    w, x = _rand(320, 960, 1, 1), _rand(1, 960, 7, 7)
    mod = _module('x: R.Tensor((1, 960, 7, 7), "float32"), w: R.Tensor((320, 960, 1, 1), "float32")',
                  "            y = R.nn.conv2d(x, w)\n            R.output(y)")
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    _check(mod, {"w": w}, [x], expected, monkeypatch)
    legal = tvms.relax.get_pipeline("zero")(BindParams("main", {"w": w})(mod))
    (kernel,) = [f for f in mark_layout_free(legal).functions.values() if isinstance(f, tir.PrimFunc)]
    parallel = []

    class Loops(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and s.kind == "parallel":
                parallel.append((s.loop_var.name, int(s.extent.value)))
            return super().visit_stmt(s)

    Loops().visit_stmt(default_schedule(kernel).body)
    assert len(parallel) == 1 and parallel[0][0].startswith("ff_0") and parallel[0][1] == 45


def test_the_disk_cache_keeps_the_layouts(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMS_CACHE_DIR", str(tmp_path / "cache"))
    cpu.clear_cache()
    w, x = _rand(96, 64), _rand(7, 64)
    mod = _calling("""            y = R.call_tir(cls.mm, (x, w), out_sinfo=R.Tensor((7, 96), "float32"))
            R.output(y)""", 'w: R.Tensor((96, 64), "float32")')
    bound = BindParams("main", {"w": w})(mod)
    try:
        first = tvms.compile(bound, "llvm")
        cpu.clear_cache()  # a new process, as far as the in-memory cache goes

        def refuse(*args, **kwargs):
            raise AssertionError("compiled although the disk cache holds the kernels")

        monkeypatch.setattr(cpu, "_build", refuse)
        again = tvms.compile(bound, "llvm")  # the layouts come from the disk entry
        monkeypatch.undo()
        assert _constant_shapes(again) == _constant_shapes(first) and len(_constant_shapes(again)[0]) == 3
        got = relax.VirtualMachine(again, tvms.cpu())["main"](tvms.nd.array(x)).numpy()
        np.testing.assert_allclose(got, x @ w.T, rtol=1e-4, atol=1e-4)
        assert "mm" in again.as_text() and again.as_python()  # the executable still prints
    finally:
        cpu.clear_cache()
