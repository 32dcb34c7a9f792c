"""The default CPU schedule on matrix products whose row count no good tile divides (ViT's 197
tokens, a prime batch): the register tile keeps its full height, the last tile shifted back to
end at the last row (`schedule_cpu.symbolic.shifted_start`), and its stores skip the rows the
tile before it stored (`accumulators._fresh_outputs`). Without that, a prime row count got
one-row tiles, a third of the speed of a square matmul.

Each case is checked twice: the scheduled PrimFunc has the intended tile (several rows, a
shifted start, no fallback nest), and the scheduled kernel gives the unscheduled kernel's bits,
including where the tile starts from the output (a split reduction, a reduction without
``T.init``) and where the row tiles run in parallel, so that a row stored twice, or a shifted
tile adding its terms twice, would show.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.lower_tir import VECTORIZE_ANN
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_cpu.host import packed_panel_bytes
from tvmscript.relax import op

from support import schedule_corpus as sc
from support import tir_walk

F32 = "float32"


def _dense(m: int, k: int, n: int, epilogue: bool = False) -> tir.PrimFunc:
    """``x[m, k] @ w[n, k]^T`` (+ bias, ReLU) through the zero pipeline."""
    if epilogue:
        return sc.zero_kernel(lambda x, w, b: [op.nn.relu(op.add(op.nn.dense(x, w), b))],
                              [((m, k), F32), ((n, k), F32), ((n,), F32)])
    return sc.zero_kernel(lambda x, w: [op.nn.dense(x, w)], [((m, k), F32), ((n, k), F32)])


def _matmul(m: int, k: int, n: int) -> tir.PrimFunc:
    """``a[m, k] @ b[k, n]``: the operand read along the vector loop is in rows."""
    return sc.zero_kernel(lambda a, b: [op.matmul(a, b)], [((m, k), F32), ((k, n), F32)])


ACCUMULATE = """
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for i, j, r in T.grid({m}, {n}, {k}):
        with T.block("acc"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]
"""


def _accumulate(m: int, k: int, n: int) -> tir.PrimFunc:
    """``C += A @ B`` without ``T.init``: every tile starts from the output."""
    return tvms.parse(ACCUMULATE.format(m=m, k=k, n=n))


def _walk(func: tir.PrimFunc):
    return tir_walk.walk(func.body)


def _tile_rows(func: tir.PrimFunc) -> int:
    """Rows of the register tile's accumulators in the scheduled ``func``."""
    w = _walk(func)
    tiles = [b for blk in w.blocks if blk.name.endswith("_tile") for b in blk.alloc_buffers if b.scope == "local"]
    assert tiles, "no register tile"
    assert any(lp.annotations.get(VECTORIZE_ANN, 1) > 1 for lp in w.loops), "no vectorized loop"
    return tiles[0].shape[0].value


@pytest.mark.parametrize("m", [197, 37, 29])
def test_a_prime_row_count_gets_a_full_height_shifted_tile(m):
    scheduled = default_schedule(_dense(m, 64, 64))
    rows = _tile_rows(scheduled)
    assert rows >= 4 and m % rows, f"{rows}-row tile for {m} rows"
    w = _walk(scheduled)
    assert any(isinstance(x.b, tir.IntImm) and x.b.value == m - rows for x in w.mins), "no tile shifted back"
    assert not any(s.else_case is not None for s in w.ifs), "a constant extent needs no fallback nest"


def test_a_row_count_a_good_tile_divides_is_not_shifted():
    scheduled = default_schedule(_dense(192, 64, 64))
    assert 192 % _tile_rows(scheduled) == 0
    assert not _walk(scheduled).mins


def _same_bits(func: tir.PrimFunc, initial=None, seed: int = 0, inputs=None) -> None:
    rng = np.random.default_rng(seed)
    if inputs is None:
        inputs = [sc.random_array(rng, sc._shape(func.buffer_map[p], {}), F32) for p in func.params[:-1]]
    shape = sc._shape(func.buffer_map[func.params[-1]], {})
    out0 = np.full(shape, np.nan, F32) if initial is None else initial(rng, shape)
    case = sc.Case(id="odd", func=func)
    plain, fast = sc.run(case, inputs, out0, False), sc.run(case, inputs, out0, True)
    assert sc.same_bits(fast, plain), f"max |difference| {np.nanmax(np.abs(fast - plain))}"


@pytest.mark.parametrize("m,k,n", [(197, 64, 64), (13, 32, 48), (37, 20, 96), (293, 48, 32), (7, 16, 64)])
def test_dense_same_bits(m, k, n):
    _same_bits(_dense(m, k, n))


@pytest.mark.parametrize("m", [197, 11])
def test_folded_epilogue_same_bits(m):
    func = _dense(m, 48, 64, epilogue=True)
    assert _tile_rows(default_schedule(func)) > 1
    _same_bits(func)


def test_split_reduction_starts_each_tile_from_the_output():
    """A panel over `packed_panel_bytes` splits the reduction: the tiles start from the partial
    sums in the output, so a shifted tile that stored its overlap would add those rows twice."""
    func = _matmul(37, 3 * packed_panel_bytes() // (128 * 4), 128)
    scheduled = default_schedule(func)
    assert any(blk.name.endswith("_init") for blk in _walk(scheduled).blocks), "the reduction was not split"
    assert _tile_rows(scheduled) > 1
    _same_bits(func)


def test_reduction_without_init_adds_to_the_output_once():
    func = _accumulate(29, 40, 64)
    assert _tile_rows(default_schedule(func)) > 1
    _same_bits(func, initial=lambda rng, shape: rng.standard_normal(shape).astype(F32))


def _vector_widths(func: tir.PrimFunc) -> set:
    return {lp.annotations.get(VECTORIZE_ANN, 1) for lp in _walk(func).loops}


@pytest.mark.parametrize("n", [1000, 40, 20])
def test_columns_not_a_multiple_of_the_vector_get_full_vectors(n):
    """A 1000-class layer's columns: full-width vectors, the last tile shifted back, rather
    than half-width ones that divide 1000."""
    from tvmscript.compiler.schedule_cpu import vector_bytes

    func = _dense(9, 64, n)
    scheduled = default_schedule(func)
    assert max(_vector_widths(scheduled)) == vector_bytes() // 4
    assert _walk(scheduled).mins, "no tile shifted back"
    _same_bits(func)


@pytest.mark.parametrize("m,n", [(29, 40), (8, 20)])
def test_shifted_vectors_add_to_the_output_once(m, n):
    """Without ``T.init`` the tiles start from the output: the shifted vector tile's stores are
    masked to the columns the tile before did not store."""
    func = _accumulate(m, 24, n)
    scheduled = default_schedule(func)
    assert _walk(scheduled).mins
    _same_bits(func, initial=lambda rng, shape: rng.standard_normal(shape).astype(F32))


def test_pointwise_convolution_reads_its_input_in_place():
    """A 1x1 convolution's padding by zero is a plain copy: inlined, the convolution reads its
    input in place, with no pass over memory to copy it."""
    func = sc.zero_kernel(lambda x, w: [op.nn.conv2d(x, w)], [((1, 24, 14, 14), F32), ((40, 24, 1, 1), F32)])
    assert any(b.name == "pad_temp" for b in _walk(func).blocks)
    scheduled = default_schedule(func)
    assert not any(b.name == "pad_temp" for b in _walk(scheduled).blocks)
    _same_bits(func)


def _pointwise(ci: int, co: int, hw: int, kernel: int = 1) -> tir.PrimFunc:
    """conv2d (NCHW) + bias + ReLU6, as mobilenet_v2's layers are after batch norm folds."""
    pad = [kernel // 2] * 4
    return sc.zero_kernel(lambda x, w, b: [op.clip(op.add(op.nn.conv2d(x, w, padding=pad), b), 0, 6)],
                          [((1, ci, hw, hw), F32), ((co, ci, kernel, kernel), F32), ((1, co, 1, 1), F32)],
                          "conv2d")


@pytest.mark.parametrize("ci,co,hw", [(24, 40, 14), (16, 24, 7), (8, 16, 12)])
def test_pointwise_convolution_vectorizes_the_pixels(ci, co, hw):
    """A 1x1 convolution's pixel rows and columns are one contiguous loop (`merge_dims`): the
    register tile's vectors run along the pixels (the output stores are vector stores), its
    rows along the output channels, and the epilogue folds into its stores."""
    from tvmscript.compiler.schedule_cpu import vector_bytes

    func = _pointwise(ci, co, hw)
    scheduled = default_schedule(func)
    w = _walk(scheduled)
    stores = [s for s in tir_walk.stores(scheduled.body) if s.buffer.name.startswith("compute")]
    assert stores and all(len(s.buffer.shape) == 3 and s.buffer.shape[-1].value == hw * hw for s in stores)
    tiles = [b for blk in w.blocks if blk.name.endswith("_tile") for b in blk.alloc_buffers if b.scope == "local"]
    assert tiles and tiles[0].shape[-1].value % (vector_bytes() // 4) == 0
    assert not any(b.name.startswith("compute") for b in w.blocks), "the epilogue did not fold"
    _same_bits(func)


def test_a_padded_convolution_keeps_its_rows():
    func = _pointwise(8, 16, 14, kernel=3)
    stores = [s for s in tir_walk.stores(default_schedule(func).body) if s.buffer.name.startswith("compute")]
    assert stores and all(len(s.buffer.shape) == 4 for s in stores)
    _same_bits(func)


def test_split_heads_after_inlining_runs_in_parallel():
    """ViT's split of the packed Q/K/V into heads (take, reshape, transpose, reshape,
    transpose): the take runs alone (it reads through its index: kOpaque, as in TVM), the rest
    inlines into one copy whose indices compose into ``//`` and ``%`` by constants; resolved by
    the iterators' ranges, the copy reads ``x[i, 0, h * 64 + d]`` and is scheduled (in
    parallel) like any elementwise nest. Same bits."""
    func = sc.zero_kernel(
        lambda x: [op.permute_dims(op.reshape(op.permute_dims(op.reshape(op.take(x, op.const(np.int64(1)), axis=0),
                                                                        [197, 12, 64]), [1, 0, 2]), [1, 12, 197, 64]),
                                   [0, 2, 1, 3])],
        [((3, 197, 1, 768), F32)], pick="fused_reshape")
    scheduled = default_schedule(func)
    from tvmscript.ir.tir_visitor import contains

    assert not contains(scheduled.body, lambda x: isinstance(x, (tir.FloorDiv, tir.FloorMod)))
    assert any(lp.kind == "parallel" for lp in _walk(scheduled).loops)
    x = np.random.default_rng(1).standard_normal((197, 1, 768)).astype(F32)
    _same_bits(func, inputs=[x])
