"""Row fusion (`schedule_cpu.row_fusion.fuse_row_stages`): the stages of softmax and the norms
run block of rows by block of rows in one parallel loop, each block's statistics in buffers
of its own. Each element is computed as before: results are the same bits as the per-stage
schedule's, and the stages that must not be fused (rows read across, a symbolic row count, a
pooling's epilogue) are left as they were."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.lower_tir import VECTORIZE_ANN
from tvmscript.compiler.schedule.common import blocks_under
from tvmscript.compiler.schedule_cpu.analysis import buffer_loads
from tvmscript.compiler.schedule_cpu.host import vector_bytes
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_cpu import driver
from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import contains
from tvmscript.relax import op

from support import schedule_corpus as sc
from support.tir_walk import walk

RNG = np.random.default_rng(5)


def _loops(func) -> list:
    return [lp for lp in walk(func.body).loops]


def _row_blocks(func) -> list:
    return [r.block for r in blocks_under(func.body) if r.block.name.endswith(("_rows", "_rows_tail"))]


def _run(func, arrays, monkeypatch=None, fuse: bool = True):
    if not fuse:
        monkeypatch.setattr(driver, "fuse_row_stages", lambda body: body)
    try:
        kernel = build_cpu({"f": func}, use_cache=False)["f"]
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()
    out = np.full(arrays[0].shape, np.nan, "float32")
    kernel(*arrays, out)
    return out


SOFTMAX = (lambda x: [op.nn.softmax(x)], [((1, 8, 128, 128), "float32")])
LAYER_NORM = (lambda x, g, b: [op.nn.layer_norm(x, g, b, axes=[-1])],
              [((1, 197, 768), "float32"), ((768,), "float32"), ((768,), "float32")])


def test_softmax_stages_run_per_block_of_rows_in_one_parallel_loop():
    scheduled = default_schedule(sc.zero_kernel(*SOFTMAX))
    (rows,) = _row_blocks(scheduled)
    assert {b.name for b in rows.alloc_buffers} == {"T_softmax_maxelem_rows", "T_softmax_exp_rows",
                                                    "T_softmax_expsum_rows"}
    assert all(int(b.shape[0].value) == 8 for b in rows.alloc_buffers)  # a block of rows, not the tensor
    assert not scheduled.body.block.alloc_buffers
    parallel = [lp for lp in _loops(scheduled) if lp.kind == "parallel"]
    assert len(parallel) == 1  # one parallel loop for every stage; none nested in it
    stages = {r.block.name for r in blocks_under(parallel[0])}
    assert {"T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"} <= stages


@pytest.mark.parametrize("case", [SOFTMAX, LAYER_NORM], ids=["softmax", "layer_norm_197_rows"])
def test_row_fusion_keeps_the_bits_of_the_per_stage_schedule(case, monkeypatch):
    func = sc.zero_kernel(*case)
    arrays = [RNG.standard_normal(shape).astype(dtype) for shape, dtype in case[1]]
    fused = _run(func, arrays)
    staged = _run(func, arrays, monkeypatch, fuse=False)
    assert np.array_equal(fused, staged)
    if len(arrays) == 1:
        x = arrays[0].astype("float64")
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(fused, e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
    else:
        x, g, b = (a.astype("float64") for a in arrays)
        ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
        np.testing.assert_allclose(fused, ref, rtol=1e-4, atol=1e-4)


def test_rows_no_block_divides_end_with_a_serial_block_of_the_rest():
    scheduled = default_schedule(sc.zero_kernel(*LAYER_NORM))
    names = [b.name for b in _row_blocks(scheduled)]
    assert names == ["T_layer_norm_rows", "T_layer_norm_rows_tail"]
    tail = _row_blocks(scheduled)[1]
    assert all(int(b.shape[0].value) == 197 % 8 for b in tail.alloc_buffers)


# A row statistic S and a stage reading it: ``{term}`` is what S sums, ``{read}`` where B reads it.
TWO_STAGES = '''
@T.prim_func
def f(A: T.Buffer((16, 32), "float32"), W: T.Buffer((32,), "float32"), B: T.Buffer((16, 32), "float32")):
    T.func_attr({{"tir.noalias": True}})
    S = T.alloc_buffer((16,))
    for i, k in T.grid(16, 32):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + {term}
    for i, j in T.grid(16, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] - S[{read}]
'''
STAGGERED = TWO_STAGES.format(term="A[vi, vk]", read="15 - vi")
CONTRACTION = TWO_STAGES.format(term="A[vi, vk] * W[vk]", read="vi")


def test_a_stage_reading_another_rows_statistic_is_not_fused():
    func = tvms.parse(STAGGERED)
    scheduled = default_schedule(func)
    assert not _row_blocks(scheduled)
    a = RNG.standard_normal((16, 32)).astype("float32")
    out = _run(func, [a, np.zeros(32, "float32")])
    np.testing.assert_allclose(out, a - a.sum(1)[::-1, None], rtol=1e-5, atol=1e-5)


def test_symbolic_rows_keep_the_per_stage_nests():
    n = tir.Var("int64", "n")
    func = sc.zero_kernel(lambda x: [op.nn.softmax(x)], [((n, 64), "float32")])
    assert not _row_blocks(default_schedule(func))


@pytest.mark.parametrize("build,specs", [
    (lambda x: [op.nn.softmax(x, axis=0)], [((33, 16), "float32")]),
    (lambda x: [op.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])], [((2, 16, 14, 14), "float32")]),
], ids=["softmax_axis0", "avg_pool_epilogue"])
def test_other_chains_are_left_to_the_per_stage_rules(build, specs):
    funcs = sc.zero_kernels(build, specs)
    for func in funcs.values():
        assert not _row_blocks(default_schedule(func))


def test_a_matrix_product_stage_is_left_to_its_own_rules():
    """``S = A @ W`` reads ``W`` the same for every row: a contraction, tiled by its own rules."""
    assert not _row_blocks(default_schedule(tvms.parse(CONTRACTION)))


def test_a_symbolic_batch_above_constant_rows_is_fused_and_exact():
    """Rows of constant count under a symbolic batch: the batch loop runs the blocks (13 rows:
    a block of 8, then the last 5), each batch's rows as before."""
    n = tir.Var("int64", "n")
    func = sc.zero_kernel(lambda x: [op.nn.softmax(x)], [((n, 13, 37), "float32")])
    assert _row_blocks(default_schedule(func))
    kernel = build_cpu({"f": func}, use_cache=False)["f"]
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 13, 37)).astype("float32")
        out = np.full(x.shape, np.nan, "float32")
        kernel(x, out)
        e = np.exp(x.astype("float64") - x.max(-1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)


# ----------------------------------------------------------------------------- padded windows


def _pool_ref(x, k, s, pad, fill=-np.inf):
    """NumPy max pooling of NCHW ``x``: window ``k``, stride ``s``, ``pad`` = (top, left, bottom, right)."""
    t, left, b, r = pad
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (left, r)), constant_values=fill)
    oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf, x.dtype)
    for dy in range(k):
        for dx in range(k):
            out = np.maximum(out, xp[:, :, dy:dy + s * oh:s, dx:dx + s * ow:s])
    return out


def test_a_padded_window_runs_one_channel_at_a_time_on_its_planes_phases():
    """A stride-2 max pooling with padding: per channel (the parallel loop), its padded plane
    in a buffer of one channel's size, split in the four phases of the stride (phase (py, px)
    holds the padded elements (2r + py, 2q + px) at r * 39 + q), copied with no condition per
    element; then the window as one vector loop over the plane's outputs at that pitch, every
    tap a read at a constant offset; then the outputs stored from it."""
    build = lambda x: [op.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])]  # noqa: E731
    func = sc.zero_kernel(build, [((1, 16, 75, 75), "float32")])
    scheduled = default_schedule(func)
    (rows,) = _row_blocks(scheduled)
    phases, flat = rows.alloc_buffers
    lanes = vector_bytes() // 4
    outputs = -(-(37 * 39 + 38) // lanes) * lanes  # 38 rows of 38 outputs at a pitch of 39, whole vectors
    assert [int(d.value) for d in flat.shape] == [outputs]
    assert [int(d.value) for d in phases.shape] == [4, max(39 * 39, outputs + 39 + 1)]
    assert not scheduled.body.block.alloc_buffers  # no padded copy of the whole tensor
    parallel = [lp for lp in _loops(scheduled) if lp.kind == "parallel"]
    assert [int(lp.extent.value) for lp in parallel] == [16]
    padding_condition = lambda n: isinstance(n, tir.Call) and n.op == "tir.if_then_else"  # noqa: E731
    assert not contains(scheduled.body, padding_condition)  # the padding's condition became loop bounds
    (window,) = [lp for lp in _loops(scheduled) if isinstance(lp.body, tir.BufferStore) and lp.body.buffer is flat]
    assert window.annotations[VECTORIZE_ANN] == lanes and int(window.extent.value) == outputs
    taps = []
    buffer_loads(window.body.value, taps)
    offsets = sorted((int(ld.indices[0].value), 0 if ld.indices[1] is window.loop_var else int(ld.indices[1].b.value))
                     for ld in taps)
    assert offsets == [(0, 0), (0, 1), (0, 39), (0, 40), (1, 0), (1, 39), (2, 0), (2, 1), (3, 0)]
    x = RNG.standard_normal((1, 16, 75, 75)).astype("float32")
    out = np.full((1, 16, 38, 38), np.nan, "float32")
    build_cpu({"f": func}, use_cache=False)["f"](x, out)
    np.testing.assert_array_equal(out, _pool_ref(x, 3, 2, (1, 1, 1, 1)))


def test_a_padded_window_of_a_stride_past_the_phase_limit_is_filled_then_copied():
    """Stride 5, past `phase_window.MAX_STRIDE`: the padded plane per channel as it is, filled
    with the padding value then the interior copied (both plain nests, no condition per
    element), then the window."""
    build = lambda x: [op.nn.max_pool2d(x, pool_size=[5, 5], strides=[5, 5], padding=[1, 1, 1, 1])]  # noqa: E731
    func = sc.zero_kernel(build, [((1, 16, 98, 98), "float32")])
    scheduled = default_schedule(func)
    (rows,) = _row_blocks(scheduled)
    (plane,) = rows.alloc_buffers
    assert [int(d.value) for d in plane.shape] == [1, 100, 100]
    names = [r.block.name for r in blocks_under(scheduled.body)]
    assert names.index("pad_temp_fill") < names.index("pad_temp")
    copy = next(r for r in blocks_under(scheduled.body) if r.block.name == "pad_temp")
    assert not isinstance(copy.block.body.value, tir.Call)  # no if_then_else left
    copy_loops = [lp for lp in _loops(scheduled) if lp.loop_var in {v for v in copy.iter_values}]
    assert sorted((int(lp.min.value), int(lp.extent.value)) for lp in copy_loops) == [(1, 98), (1, 98)]
    x = RNG.standard_normal((1, 16, 98, 98)).astype("float32")
    out = np.full((1, 16, 20, 20), np.nan, "float32")
    build_cpu({"f": func}, use_cache=False)["f"](x, out)
    np.testing.assert_array_equal(out, _pool_ref(x, 5, 5, (1, 1, 1, 1)))


@pytest.mark.parametrize("shape, k, s, pad", [
    ((2, 3, 40, 37), 3, 2, (0, 1, 2, 1)),    # batch 2, uneven padding
    ((1, 5, 64, 64), 2, 2, (1, 1, 1, 1)),
    ((1, 3, 70, 70), 4, 3, (1, 2, 1, 2)),    # stride 3
])
def test_padded_windows_match_numpy(shape, k, s, pad):
    build = lambda x: [op.nn.max_pool2d(x, pool_size=[k, k], strides=[s, s], padding=list(pad))]  # noqa: E731
    func = sc.zero_kernel(build, [(shape, "float32")])
    scheduled = default_schedule(func)
    expected = _pool_ref(np.zeros(shape, "float32"), k, s, pad)
    x = RNG.standard_normal(shape).astype("float32")
    out = np.full(expected.shape, np.nan, "float32")
    build_cpu({"f": func}, use_cache=False)["f"](x, out)
    np.testing.assert_array_equal(out, _pool_ref(x, k, s, pad))
    assert _row_blocks(scheduled)


def test_a_depthwise_convolution_of_stride_2_matches_numpy_one_channel_at_a_time():
    def build(x, w, b):
        return [op.clip(op.add(op.nn.conv2d(x, w, strides=[2, 2], padding=[1] * 4, groups=16), b), 0.0, 6.0)]

    shapes = [(1, 16, 67, 67), (16, 1, 3, 3), (1, 16, 1, 1)]
    func = sc.zero_kernel(build, [(sh, "float32") for sh in shapes])
    scheduled = default_schedule(func)
    (rows,) = _row_blocks(scheduled)
    assert [b.name for b in rows.alloc_buffers] == ["pad_temp_rows_phases", "group_conv2d_nchw_intermediate_rows_flat"]
    x, w, b = (RNG.standard_normal(sh).astype("float32") for sh in shapes)
    out = np.full((1, 16, 34, 34), np.nan, "float32")
    build_cpu({"f": func}, use_cache=False)["f"](x, w, b, out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype("float64")
    ref = np.zeros((1, 16, 34, 34))
    for dy in range(3):
        for dx in range(3):
            ref += xp[:, :, dy:dy + 68:2, dx:dx + 68:2] * w[None, :, 0, dy, dx, None, None]
    np.testing.assert_allclose(out, np.clip(ref + b, 0, 6), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("extent, lanes, width", [
    (28, 16, 8), (56, 16, 16), (38, 16, 16), (112, 16, 16), (16, 16, 8), (28, 8, 8), (12, 8, 8), (8, 8, 4),
])
def test_a_window_row_takes_the_vector_width_that_leaves_the_least_work(extent, lanes, width):
    from tvmscript.compiler.schedule_cpu.strided_window import _row_width

    assert _row_width(extent, lanes) == width


def test_a_row_of_28_strided_outputs_is_vectorized_at_the_narrower_width():
    from tvmscript.compiler.schedule_cpu.strided_window import _row_width

    build = lambda x: [op.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2])]  # noqa: E731
    func = sc.zero_kernel(build, [((1, 8, 57, 57), "float32")])
    widths = {lp.annotations.get(VECTORIZE_ANN) for lp in _loops(default_schedule(func))} - {None}
    assert widths == {_row_width(28, vector_bytes() // 4)}
