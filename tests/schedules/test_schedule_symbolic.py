"""The default CPU schedule on kernels with a symbolic extent ``n`` (a sequence length): the
loops of symbolic extent get the same register tiles, dot products and parallel loops as
loops of constant extent (`schedule_cpu.symbolic.shifted_start`: static tiles, the last one
shifted back to end at ``n``; the nest as it was, scheduled without symbolic tiles, when ``n``
is smaller than a tile), and the results do not change.

Each kernel is checked twice: its scheduled PrimFunc has the intended structure, and at
several values of ``n`` (1, below a tile, a tile, not a multiple of the tile, large enough
for the parallel loop to start threads) the scheduled kernel gives the unscheduled kernel's
bits, or, where a dot product reorders a float sum, stays within the bound of
tests/support/schedule_corpus.py (`SumBound`).
"""

from __future__ import annotations

import numpy as np
import pytest

from tvmscript import tir
from tvmscript.compiler.lower_tir import VECTORIZE_ANN
from tvmscript.ir.mutator import IRMutator
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.relax import op
from tvmscript.compiler.build_cpu import build_cpu

from support import schedule_corpus as sc
from support import tir_walk

N = tir.Var("int64", "n")
SIZES = (1, 3, 4, 5, 37, 64, 100, 300)  # 300: the parallel loops start threads
F32 = "float32"


def _kernel(build, specs, pick=None) -> tir.PrimFunc:
    return sc.zero_kernel(build, [(shape, F32) for shape in specs], pick)


@pytest.fixture(scope="module")
def kernels() -> dict:
    scores = sc.zero_kernels(
        lambda q, kt, m: [op.add(op.multiply(op.matmul(q, kt), op.const(np.float32(0.25))), m)],
        [((1, 2, N, 16), F32), ((1, 2, 16, N), F32), ((1, 1, N, N), F32)])
    return {
        "scores": next(f for name, f in scores.items() if "matmul" in name),
        "dense": _kernel(lambda x, w, b: [op.add(op.nn.dense(x, w), b)], [(1, N, 64), (48, 64), (48,)], "dense"),
        "layer_norm": _kernel(lambda x, g, b: [op.nn.layer_norm(x, g, b, axes=[-1])], [(N, 64), (64,), (64,)]),
        "softmax": _kernel(lambda x: [op.nn.softmax(x, axis=-1)], [(N, 64)]),
        "elementwise": _kernel(lambda x, y: [op.add(x, y)], [(N, 3, 64), (3, 64)]),
        # a reshape over n runs alone (TVM's analysis finds it kOpaque); the transpose after it
        # is a kernel of its own
        "split_heads": _kernel(lambda x: [op.permute_dims(op.reshape(x, [1, N, 8, 32]), [0, 2, 1, 3])],
                               [(1, N, 256)], "reshape"),
    }


# ----------------------------------------------------------------------------- structure


def _walk(stmt):
    return tir_walk.walk(stmt)


def _uses_n(e) -> bool:
    from tvmscript.ir.tir_visitor import vars_in

    return any(v.name == "n" for v in vars_in([e]))


def _tiled_branch(func: tir.PrimFunc):
    """The scheduled nest run when ``n`` fills a tile: the then-branch of a top-level
    ``if n >= tile``; asserts there is one."""
    ifs = [s for s in _walk(func.body).ifs if _uses_n(s.condition) and s.else_case is not None]
    assert ifs, "no 'if n >= tile' around a nest tiled along n"
    return ifs[0].then_case


def _register_tile(branch) -> tir.Buffer:
    """The accumulators of the register tile in ``branch`` (rows x vector), asserted there."""
    w = _walk(branch)
    tiles = [b for blk in w.blocks if blk.name.endswith("_tile") for b in blk.alloc_buffers if b.scope == "local"]
    assert tiles, "no register tile"
    assert any(lp.annotations.get(VECTORIZE_ANN, 1) > 1 for lp in w.loops), "no vectorized loop"
    assert any(_uses_n(m) for m in w.mins), "no tile shifted back to end at n"
    return tiles[0]


def test_batched_matmul_with_symbolic_m_and_n_gets_a_register_tile(kernels):
    scheduled = default_schedule(kernels["scores"])
    acc = _register_tile(_tiled_branch(scheduled))
    assert len(acc.shape) == 2 and acc.shape[0].value > 1, "the rows (M = n) should be tiled too"
    assert any(lp.kind == "parallel" for lp in _walk(scheduled.body).loops)
    # The scale and the mask are computed in the tile's stores: no intermediate pass.
    assert len(_walk(_tiled_branch(scheduled)).blocks) == 3  # pack, tile, update


def test_dense_with_symbolic_batch_tiles_the_rows(kernels):
    scheduled = default_schedule(kernels["dense"])
    branch = _tiled_branch(scheduled)
    acc = _register_tile(branch)
    assert len(acc.shape) == 2 and acc.shape[0].value > 1, "no row tile along the symbolic batch"
    assert any(lp.kind == "unroll" for lp in _walk(branch).loops)
    assert any(lp.kind == "parallel" for lp in _walk(branch).loops)
    # The small-n branch (a decode step's single row) is what the static twin at batch 1 gets:
    # a dot product along the weight's rows (vector partial sums, no panel packed on every
    # call), in parallel over the output rows, not over the few rows of n.
    small = _walk([s for s in _walk(scheduled.body).ifs if _uses_n(s.condition)][0].else_case)
    assert any(lp.annotations.get(VECTORIZE_ANN, 1) > 1 for lp in small.loops)
    assert not any(blk.name.endswith("_pack_small") or "panel" in str([b.name for b in blk.alloc_buffers])
                   for blk in small.blocks), "a panel packed for a few rows"
    assert any(b.name.endswith("_dot") for blk in small.blocks for b in blk.alloc_buffers), "no dot product"
    assert any(lp.kind == "parallel" and isinstance(lp.extent, tir.IntImm) for lp in small.loops), \
        "the small nest's dot product should run in parallel over the output rows, not over n"


@pytest.mark.parametrize("name", ["layer_norm", "softmax"])
def test_row_reductions_with_symbolic_row_count_are_dot_products(kernels, name):
    scheduled = default_schedule(kernels[name])
    branch = _tiled_branch(scheduled)
    w = _walk(branch)
    assert any(b.name.endswith("_total") for blk in w.blocks for b in blk.alloc_buffers), "no dot-product rows"
    assert any(lp.annotations.get(VECTORIZE_ANN, 1) > 1 for lp in w.loops)
    assert any(lp.kind == "unroll" for lp in w.loops), "the rows should be unrolled"
    assert any(lp.kind == "parallel" for lp in w.loops)


def test_elementwise_with_symbolic_dims_runs_in_parallel(kernels):
    scheduled = default_schedule(kernels["elementwise"])
    loops = _walk(scheduled.body).loops
    assert any(lp.kind == "parallel" and _uses_n(lp.extent) for lp in loops)


# ----------------------------------------------------------------------------- results


def _run(func, n: int, schedule: bool, inputs):
    out = np.full(sc._shape(func.buffer_map[func.params[-1]], {"n": n}), np.nan, F32)
    build_cpu({"kernel": func}, schedule=schedule)["kernel"](*inputs, out)
    return out


def _inputs(func, n: int) -> list:
    rng = np.random.default_rng(n)
    return [sc.random_array(rng, sc._shape(func.buffer_map[p], {"n": n}), F32) for p in func.params[:-1]]


def test_reshape_over_a_symbolic_length_gets_affine_indices(kernels):
    """The heads' split (reshape to (1, n, 8, 32)) indexes its input by
    ``((v2 * 32 + v3) // 256 + v1) % n`` (TVM's form); the iterators' ranges resolve it
    (`arith.symbolic_divmod`), so the nest runs in parallel as its static twin does."""
    scheduled = default_schedule(kernels["split_heads"])
    w = _walk(scheduled.body)
    divides = []

    class Divisions(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, (tir.FloorDiv, tir.FloorMod)):
                divides.append(e)
            return super().visit_expr(e)

    Divisions().visit_stmt(scheduled.body)
    assert not divides, f"indices still divide: {divides[:2]}"
    assert any(lp.kind == "parallel" for lp in w.loops)


def test_symbolic_divisions_are_resolved_only_where_the_ranges_prove_it():
    from tvmscript.ir.arith.symbolic_divmod import simplify_divmod

    n = tir.Var("int64", "n")
    v0, v1, v2, v3 = (tir.Var("int64", f"v{i}") for i in range(4))

    def c(v):
        return tir.IntImm("int64", v)

    flat = ((v0 * n + v2) * c(8) + v1) * c(32) + v3
    ranges = {v0: (c(0), c(1)), v1: (c(0), c(8)), v2: (c(0), n), v3: (c(0), c(32))}
    assert str(simplify_divmod(tir.FloorDiv("int64", flat, c(256) * n), ranges)) == "v0"
    assert str(simplify_divmod(tir.FloorMod("int64", tir.FloorDiv("int64", flat, c(256)), n), ranges)) == "v2"
    # v2 + 1 reaches n; v3 + 256 v2 is not below 256 n when v3 may reach 256; a divisor that may be 0
    for e, r in [(tir.FloorMod("int64", v2 + c(1), n), ranges),
                 (tir.FloorDiv("int64", v2 * c(256) + v3, c(256) * n), {**ranges, v3: (c(0), c(257))}),
                 (tir.FloorMod("int64", v2, v1), ranges)]:
        assert simplify_divmod(e, r) is e


@pytest.mark.parametrize("name", ["scores", "elementwise", "split_heads"])
def test_same_bits_at_every_n(kernels, name):
    func = kernels[name]
    for n in SIZES:
        inputs = _inputs(func, n)
        plain, fast = _run(func, n, False, inputs), _run(func, n, True, inputs)
        assert sc.same_bits(fast, plain), f"n={n}: max |difference| {np.nanmax(np.abs(fast - plain))}"


def test_dense_same_bits_when_tiled_within_the_bound_below(kernels):
    """At ``n`` below the row tile (``if n >= rows``) the dense layer is the static batch-1 form, a
    dot product (vector partial sums: the one reordering schedule); from a tile on, the
    register tile keeps the order of the additions."""
    func = kernels["dense"]
    [guard] = [s.condition for s in _walk(default_schedule(func).body).ifs if _uses_n(s.condition)]
    assert isinstance(guard, tir.GE) and isinstance(guard.b, tir.IntImm), guard
    tile_rows = guard.b.value
    for n in SIZES:
        bound = sc.linear_sums(func, "the small-n branch of a dense layer is a dot-product nest", sizes={"n": n})
        inputs = _inputs(func, n)
        plain, fast = _run(func, n, False, inputs), _run(func, n, True, inputs)
        if n >= tile_rows:
            assert sc.same_bits(fast, plain), f"n={n}: max |difference| {np.nanmax(np.abs(fast - plain))}"
        else:
            case = sc.Case(id="dense", func=func, sums=bound, sizes={"n": n})
            assert (np.abs(fast.astype("float64") - plain) <= sc.sum_bound(case, inputs, plain)).all(), f"n={n}"


@pytest.mark.parametrize("name", ["layer_norm", "softmax"])
def test_reordered_sums_stay_within_their_bound(kernels, name):
    func = kernels[name]
    bound = sc.layer_norm_sums(64) if name == "layer_norm" else sc.softmax_sums(func)
    for n in SIZES:
        inputs = _inputs(func, n)
        plain, fast = _run(func, n, False, inputs), _run(func, n, True, inputs)
        assert not np.isnan(fast).any(), f"n={n}: outputs not written"
        case = sc.Case(id=name, func=func, sums=bound, sizes={"n": n})
        allowed = sc.sum_bound(case, inputs, plain)
        assert (np.abs(fast.astype("float64") - plain) <= allowed).all(), f"n={n}: outside the bound"


def test_panels_along_a_symbolic_row_count_only_from_enough_rows():
    """A matmul whose weight is contiguous along its columns copies it into panels for cache
    locality, which pays over many rows; along a symbolic row count the panels run only from
    `LOCALITY_PACK_ROWS` rows, and below them the same tiles read the weight in place (a
    decode step's 7 tokens: a fifth faster), and below one tile, the few-rows nest."""
    from tvmscript.compiler.schedule_cpu.symbolic import LOCALITY_PACK_ROWS

    func = _kernel(lambda x, w: [op.matmul(x, w)], [(N, 64), (64, 96)])
    scheduled = default_schedule(func)
    guards = [s for s in _walk(scheduled.body).ifs if _uses_n(s.condition) and s.else_case is not None]
    bounds = sorted(g.condition.b.value for g in guards if isinstance(g.condition, tir.GE))
    assert LOCALITY_PACK_ROWS in bounds and len(bounds) >= 2, bounds
    top = next(g for g in guards if g.condition.b.value == LOCALITY_PACK_ROWS)
    panels = lambda stmt: [b for blk in _walk(stmt).blocks for b in blk.alloc_buffers if b.name.endswith("_panel")]  # noqa: E731
    assert panels(top.then_case) and not panels(top.else_case)
    for n in SIZES + (31, 32):
        inputs = _inputs(func, n)
        plain, fast = _run(func, n, False, inputs), _run(func, n, True, inputs)
        assert sc.same_bits(fast, plain), f"n={n}: max |difference| {np.nanmax(np.abs(fast - plain))}"
