"""Software prefetch of a streamed weight's next block (compiler/schedule_cpu/prefetch.py): a
register-tiled kernel whose parallel loop walks the blocks of a packed weight larger than L2
requests the next block while it computes the current one. The hint changes no result (bit
for bit the kernel without it), every address it names lies in the weight (the bounds check
proves it), and it walks the whole next block once per block."""

from __future__ import annotations


import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler import te
from tvmscript.compiler.bounds_check import count_checks
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.llvm_target import cpu_target
from tvmscript.compiler.lower_tir import lower
from tvmscript.compiler.prepack_constants import gather_index
from tvmscript.compiler.schedule_cpu import driver, prefetch
from tvmscript.compiler.schedule_cpu.host import DEFAULT_L2_BYTES, l2_bytes, scheduling_for
from tvmscript.compiler.schedule_cpu.prepack import LAYOUT_FREE_ATTR, PACKED_LAYOUTS_ATTR
from tvmscript.compiler.topi.nn.conv import conv2d_nhwc
from tvmscript.compiler.topi.nn.dense import dense
from tvmscript.compiler.transform._common import replace_fields
from tvmscript.ir import tir
from tvmscript.ir.tir_numpy import evaluate_on_arrays
from tvmscript.target import Target

RNG = np.random.default_rng(7)
L2 = 256 * 1024  # the L2 the tests schedule for, whatever this machine's is


@pytest.fixture(autouse=True)
def _small_l2(monkeypatch):
    monkeypatch.setattr(prefetch, "l2_bytes", lambda: L2)


def _dense(m, k, n):
    x = te.placeholder((m, k), "float32", name="x")
    w = te.placeholder((n, k), "float32", name="w")
    return _weight_free(te.create_prim_func([x, w, dense(x, w)]))


def _conv(h, c, f, stride=1):
    x = te.placeholder((1, h * stride, h * stride, c), "float32", name="x")
    w = te.placeholder((3, 3, c, f), "float32", name="w")
    return _weight_free(te.create_prim_func([x, w, conv2d_nhwc(x, w, stride=(stride, stride), padding=(1, 1, 1, 1))]))


def _weight_free(func):
    """``func`` with its weight (parameter 1) marked layout-free, as a bound weight is."""
    return replace_fields(func, attrs={**func.attrs, LAYOUT_FREE_ATTR: [1]})


def _hints(func) -> list:
    """The prefetch calls of a scheduled function, with the loops around each."""
    found = []

    def walk(s, loops):
        if isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op == "tir.call_llvm_intrin":
            found.append((s.value, list(loops)))
        elif isinstance(s, tir.For):
            walk(s.body, loops + [s])
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                walk(x, loops)
        elif isinstance(s, tir.BlockRealize):
            walk(s.block, loops)
        elif isinstance(s, (tir.Block, tir.DeclBuffer, tir.LetStmt, tir.Allocate)):
            walk(s.body, loops)

    walk(func.body, [])
    return found


def _without_prefetch(func, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(driver, "prefetch_next_blocks", lambda body, packed: body)
        return driver.default_schedule(func)


def _inputs(shapes):
    return [RNG.standard_normal(s).astype("float32") for s in shapes[:-1]] + [np.zeros(shapes[-1], "float32")]


def _run(scheduled, args):
    """The output of the built ``scheduled`` on ``args``, its weight packed as the build packs it."""
    kernel = build_cpu({"k": scheduled}, use_cache=False)["k"]
    packed = [a.copy() for a in args]
    for i, layout in (scheduled.attrs.get(PACKED_LAYOUTS_ATTR) or {}).items():
        packed[int(i)] = np.ascontiguousarray(args[int(i)][gather_index(layout)])
    kernel(*packed)
    return packed[-1]


def test_dense_prefetches_its_next_weight_panel_in_the_reduction_loop():
    g = driver.default_schedule(_dense(40, 512, 1024))  # a 2 MB weight
    (call, loops), = _hints(g)
    name, address, rw, locality, cache = call.args
    assert name.value == "llvm.prefetch" and (rw.value, locality.value, cache.value) == (0, 3, 1)
    load = address.args[0]
    weight = g.buffer_map[g.params[1]]
    assert address.op == "tir.address_of" and load.buffer.data is weight.data and load.buffer.dtype == "uint8"
    assert loops[0].kind == "parallel" and loops[-1].loop_var.name == "k"


@pytest.mark.parametrize("shape", [(40, 512, 1024), (197, 768, 768), (7, 300, 600)])
def test_dense_results_unchanged(shape, monkeypatch):
    m, k, n = shape
    func = _dense(m, k, n)
    g = driver.default_schedule(func)
    assert _hints(g)
    x, w, out = args = _inputs([(m, k), (n, k), (m, n)])
    y = _run(g, args)
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
    y0 = _run(_without_prefetch(func, monkeypatch), args)
    assert np.array_equal(y, y0)


@pytest.mark.parametrize("h,c,f,stride", [(7, 128, 256, 1), (7, 64, 128, 2), (14, 64, 128, 1)])
def test_conv_results_unchanged(h, c, f, stride, monkeypatch):
    func = _conv(h, c, f, stride)
    g = driver.default_schedule(func)
    assert _hints(g)
    x, w, _ = args = _inputs([(1, h * stride, h * stride, c), (3, 3, c, f), (1, h, h, f)])
    y = _run(g, args)
    pad = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(np.einsum("nhwc,cf->nhwf", pad[:, i:i + h * stride:stride, j:j + h * stride:stride], w[i, j])
              for i in range(3) for j in range(3))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    y0 = _run(_without_prefetch(func, monkeypatch), args)
    assert np.array_equal(y, y0)


def test_weights_that_stay_in_l2_get_no_prefetch():
    assert not _hints(driver.default_schedule(_dense(40, 128, 256)))  # 128 KB
    assert not _hints(driver.default_schedule(_conv(14, 32, 64)))  # 72 KB


@pytest.mark.parametrize("func", [_dense(40, 512, 1024), _dense(197, 768, 768), _conv(7, 128, 256)],
                         ids=["dense", "dense-odd-m", "conv"])
def test_addresses_lie_in_the_weight_and_cover_the_next_block(func):
    g = driver.default_schedule(func)
    (call, loops), = _hints(g)
    index = call.args[1].args[0].indices[0]
    weight = g.buffer_map[g.params[1]]
    blocks = int(weight.shape[0].value)
    block_bytes = int(np.prod([int(d.value) for d in weight.shape[1:]])) * 4
    extents = [int(x.extent.value) for x in loops]
    grids = np.meshgrid(*[np.arange(n) for n in extents], indexing="ij", sparse=True)
    at = evaluate_on_arrays(index, {x.loop_var: v for x, v in zip(loops, grids)})
    at = np.moveaxis(np.broadcast_to(at, extents), [x.kind for x in loops].index("parallel"), 0)
    assert at.min() >= 0 and at.max() < blocks * block_bytes
    for b in range(blocks - 1):
        lines = np.unique(at[b] // 64)
        assert lines.min() * 64 >= (b + 1) * block_bytes and lines.max() * 64 < (b + 2) * block_bytes
        assert len(lines) >= 0.97 * block_bytes / 64  # the block's lines, but for the last step's


def test_the_bounds_check_proves_the_addresses():
    g = driver.default_schedule(_conv(7, 128, 256))
    assert count_checks(lower(g, bounds_check=True)) == {"in place": 0, "hoisted": 0}


def test_llvm_ir_holds_the_prefetch():
    module = build_cpu({"k": driver.default_schedule(_dense(40, 512, 1024))}, use_cache=False)
    assert "@llvm.prefetch.p0(" in module.get_source("ll")


def test_scheduled_kernel_prints_and_parses_back():
    g = driver.default_schedule(_conv(7, 128, 256))
    # (the packed layout attribute is a compiler object, not TVMScript)
    text = replace_fields(g, attrs={k: v for k, v in g.attrs.items() if k != PACKED_LAYOUTS_ATTR}).script()
    assert 'T.call_llvm_intrin("void", "llvm.prefetch", T.address_of(w_bytes[' in text
    assert 'T.decl_buffer((' in text and '"uint8", data=w.data)' in text
    again = tvms.parse(text)
    assert _hints(again if isinstance(again, tir.PrimFunc) else again["main"])


PREFETCH_SOURCE = """
@T.prim_func
def main(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for i in range(256):
        T.call_llvm_intrin("void", "llvm.prefetch", T.address_of(A[T.min(i + 16, 255)]), 0, 3, 1)
        B[i] = A[i] * T.float32(2)
"""


def test_a_prefetch_written_in_tvmscript_compiles_and_runs():
    mod = build_cpu({"main": tvms.parse(PREFETCH_SOURCE)}, schedule=False, use_cache=False)
    a = RNG.standard_normal(256).astype("float32")
    b = np.zeros(256, "float32")
    mod["main"](a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_other_llvm_intrinsics_by_name_are_a_clear_error():
    text = PREFETCH_SOURCE.replace('T.call_llvm_intrin("void", "llvm.prefetch", T.address_of(A[T.min(i + 16, 255)]),'
                                   ' 0, 3, 1)', 'T.evaluate(T.call_llvm_intrin("void", "llvm.donothing"))')
    with pytest.raises(NotImplementedError, match="llvm.donothing"):
        build_cpu({"main": tvms.parse(text)}, schedule=False, use_cache=False)


def test_haswell_target_uses_the_default_l2(monkeypatch):
    monkeypatch.undo()  # the real l2_bytes: a target other than this machine's gets the default
    assert DEFAULT_L2_BYTES == 256 * 1024
    with scheduling_for(cpu_target(Target("llvm -mcpu=haswell"))):
        assert l2_bytes() == DEFAULT_L2_BYTES


