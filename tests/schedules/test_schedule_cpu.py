"""`compiler.schedule_cpu` carried out with schedule primitives: names, duplicate block names."""

import numpy as np

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule.common import blocks_under
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_cpu.balance import collapse_parallel
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.ir.tir_visitor import TIRVisitor

TWO_NESTS_ONE_NAME = '''
@T.prim_func
def f(A: T.Buffer((64, 512), "float32"), B: T.Buffer((512, 256), "float32"), C: T.Buffer((64, 256), "float32"),
      D: T.Buffer((64, 256), "float32")):
    for i, j, k in T.grid(64, 256, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j, k in T.grid(64, 256, 512):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = T.float32(0)
            D[vi, vj] = T.max(D[vi, vj], A[vi, vk] * B[vk, vj])
'''


def _blocks(stmt) -> list:
    """The names of ``stmt`` (when a block) and of every block below it, in program order."""
    realizes = ([stmt] if isinstance(stmt, tir.BlockRealize) else []) + blocks_under(stmt)
    return [r.block.name for r in realizes]


def test_nests_sharing_a_block_name_are_both_scheduled_bitwise():
    g = default_schedule(tvms.parse(TWO_NESTS_ONE_NAME))
    names = _blocks(g.body)
    assert {"C_tile", "C_pack", "C_1_tile", "C_1_pack"} <= set(names)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 512)).astype("float32")
    b = rng.standard_normal((512, 256)).astype("float32")
    outs = []
    for schedule in (True, False):
        c, d = np.zeros((64, 256), "float32"), np.zeros((64, 256), "float32")
        build_cpu({"f": tvms.parse(TWO_NESTS_ONE_NAME)}, schedule=schedule)["f"](a, b, c, d)
        outs.append((c, d))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_allclose(outs[0][0], a @ b, rtol=1e-4, atol=1e-3)


def test_transposing_copy_is_block_tiled_with_split_names():
    src = '''
@T.prim_func
def f(A: T.Buffer((512, 384), "float32"), B: T.Buffer((384, 512), "float32")):
    for i, j in T.grid(384, 512):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi]
'''
    g = default_schedule(tvms.parse(src))
    top = g.body.block.body if isinstance(g.body, tir.BlockRealize) else g.body
    names = []
    while isinstance(top, tir.For):
        names.append((top.loop_var.name, top.kind))
        top = top.body
    assert names == [("i_0", "parallel"), ("j_0", "serial"), ("i_1", "serial"), ("j_1", "serial")]
    a = np.random.default_rng(1).standard_normal((512, 384)).astype("float32")
    b = np.zeros((384, 512), "float32")
    build_cpu({"f": tvms.parse(src)}, schedule=True)["f"](a, b)
    np.testing.assert_array_equal(b, a.T)


# ----------------------------------------------------------------------------- register tiles
#
# Every schedule below must give the bits the unscheduled nest gives (the reduction order per
# element is kept), and the NumPy result within float tolerance. The modules are built from
# Relax ops through the zero pipeline, as `tvms run` builds an imported model.

import math  # noqa: E402

import pytest  # noqa: E402

from tvmscript import relax  # noqa: E402
from tvmscript.compiler.schedule_cpu import parallel_threads  # noqa: E402
from tvmscript.relax import op  # noqa: E402

RNG = np.random.default_rng(7)


def _tensor(shape, dtype="float32"):
    return relax.TensorStructInfo(list(shape), dtype)


def _zero_module(build, shapes):
    """``main`` of ``build(*params)`` (a list of Relax expressions to emit, the last returned)
    over float32 parameters of ``shapes``, through the zero pipeline."""
    params = [op.make_var(f"p{i}", _tensor(s)) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = None
            for expr in build(*params):
                out = bb.emit(expr) if not isinstance(expr, relax.Var) else expr
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return tvms.relax.get_pipeline("zero")(bb.get())


def _prim_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def _run_both(mod, arrays):
    """The module's single kernel run scheduled and unscheduled (uncached: the schedule
    depends on the thread count tests change): (scheduled outputs, plain outputs)."""
    (name, func), = _prim_funcs(mod).items()
    outs = []
    for schedule in (True, False):
        kernel = build_cpu({name: func}, schedule=schedule, use_cache=False)[name]
        out_bufs = [np.full([int(d.value) for d in func.buffer_map[p].shape], np.nan, "float32")
                    for p in func.params[len(arrays):]]
        kernel(*arrays, *out_bufs)
        outs.append(out_bufs)
    return outs


def _conv_ref(x, w, stride, pad):
    import numpy.lib.stride_tricks as st

    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    win = st.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,fcij->nfhw", win, w.astype("float64"))


CONVS = [  # (in channels, out channels, size, kernel, stride, padding): resnet's kinds, smaller
    (16, 32, 14, 3, 1, 1),
    (32, 64, 14, 3, 2, 1),
    (32, 64, 14, 1, 2, 0),
    (3, 32, 20, 7, 2, 3),
    (64, 64, 7, 3, 1, 1),
]


@pytest.mark.parametrize("threads", ["1", "2", "4"])
@pytest.mark.parametrize("conv", CONVS, ids=str)
def test_conv_bias_relu_register_tile_is_bitwise(conv, threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    c, f, size, k, s, p = conv
    mod = _zero_module(lambda x, w, b: [op.nn.relu(op.add(op.nn.conv2d(x, w, strides=[s, s], padding=[p] * 4), b))],
                       [(1, c, size, size), (f, c, k, k), (1, f, 1, 1)])
    x, w, b = (RNG.standard_normal(sh).astype("float32") for sh in [(1, c, size, size), (f, c, k, k), (1, f, 1, 1)])
    (fast,), (plain,) = _run_both(mod, [x, w, b])
    np.testing.assert_array_equal(fast, plain)
    np.testing.assert_allclose(fast, np.maximum(_conv_ref(x, w, s, p) + b, 0), rtol=1e-4, atol=1e-4)


def test_conv_is_a_register_tile_with_its_epilogue_folded():
    mod = _zero_module(lambda x, w: [op.nn.relu(op.nn.conv2d(x, w, padding=[1] * 4))],
                       [(1, 32, 14, 14), (64, 32, 3, 3)])
    (func,) = _prim_funcs(mod).values()
    g = default_schedule(func)
    names = _blocks(g.body)
    assert "conv2d_nchw_tile" in names and "conv2d_nchw_pack" in names
    assert "compute" not in names  # the ReLU is computed where the tile is stored
    root = g.body.block
    assert [b.name for b in root.alloc_buffers] == ["pad_temp"]  # no buffer for the convolution itself
    tile = next(r for r in blocks_under(g.body) if r.block.name == "conv2d_nchw_tile").block
    (acc,) = tile.alloc_buffers
    assert acc.scope == "local" and len(acc.shape) == 2  # rows x vector lanes


@pytest.mark.parametrize("stride, vectorized", [(2, True), (3, False)])
def test_a_stride_2_panel_is_filled_along_its_tile(stride, vectorized):
    """The input panel of a stride-2 convolution is copied with the tile's loop innermost, which
    LLVM vectorizes (two loads and a shuffle per vector); a larger stride keeps the transposing
    scalar copy (the tile's loop outside a block of contiguous reads, marked scalar)."""
    from tvmscript.compiler.lower_tir import VECTORIZE_ANN

    mod = _zero_module(lambda x, w: [op.nn.conv2d(x, w, strides=[stride] * 2, padding=[3] * 4)],
                       [(1, 3, 64, 64), (32, 3, 7, 7)])
    (func,) = _prim_funcs(mod).values()
    g = default_schedule(func)
    pack = next(r for r in blocks_under(g.body) if r.block.name == "conv2d_nchw_pack").block
    fill = pack.body.seq[0]
    loops = []
    while isinstance(fill, tir.For):
        loops.append(fill)
        fill = fill.body
    panel = fill.buffer
    tile_var = fill.indices[-1]
    tile_loop = next(lp for lp in loops if lp.loop_var is tile_var)
    assert panel.name.endswith("_panel")
    assert (tile_loop is loops[-1]) is vectorized
    assert (tile_loop.annotations.get(VECTORIZE_ANN) == 1) is not vectorized


ATTENTION = [  # batched matmuls of a 4-head block over 64 tokens, head size 16
    (lambda q, k: [op.matmul(q, op.permute_dims(k, [0, 1, 3, 2]))], [(1, 4, 64, 16), (1, 4, 64, 16)],
     lambda q, k: q @ k.transpose(0, 1, 3, 2)),
    (lambda p, v: [op.matmul(p, v)], [(1, 4, 64, 64), (1, 4, 64, 16)], lambda p, v: p @ v),
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("case", range(len(ATTENTION)))
def test_batched_matmuls_are_bitwise(case, threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    build, shapes, ref = ATTENTION[case]
    mod = _zero_module(build, shapes)
    arrays = [RNG.standard_normal(s).astype("float32") for s in shapes]
    funcs = _prim_funcs(mod)
    main = max(funcs, key=lambda n: "matmul" in n)
    mod = tvms.IRModule({main: funcs[main]}) if len(funcs) > 1 else mod
    if len(funcs) > 1:  # the transpose is a kernel of its own: feed the matmul its result
        arrays = [arrays[0], np.ascontiguousarray(arrays[1].transpose(0, 1, 3, 2))]
    (fast,), (plain,) = _run_both(mod, arrays)
    np.testing.assert_array_equal(fast, plain)
    a, b = arrays
    np.testing.assert_allclose(fast, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", ["1", "2", "4"])
@pytest.mark.parametrize("m,k,n", [(64, 96, 128), (1, 256, 40), (24, 2048, 64), (7, 33, 48)])
def test_linear_gelu_is_bitwise(m, k, n, threads, monkeypatch):
    """Dense (weights in rows: x @ W.T), bias and GELU fused: the register tile stores the
    GELU of its sums. (1, 256, 40): a matrix-vector product, a dot product per output with
    vector partial sums (the one schedule that reorders additions: within the error bound of
    a k-term sum, `sum_error_bound`); (24, 2048, 64): the panel exceeds its budget, the
    reduction is split; 4 threads with 2 vector tiles: the weights are packed up front and
    the rows chunked per thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    mod = _zero_module(lambda x, w, b: [op.nn.gelu(op.add(op.nn.dense(x, w), b))], [(m, k), (n, k), (n,)])
    x, w, b = (RNG.standard_normal(s).astype("float32") for s in [(m, k), (n, k), (n,)])
    (fast,), (plain,) = _run_both(mod, [x, w, b])
    y = x.astype("float64") @ w.T.astype("float64") + b
    gelu = y * 0.5 * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    if m == 1:
        # GELU's slope is below 1.13; its float32 evaluation adds a few ulps.
        bound = 1.13 * sum_error_bound(np.abs(x) @ np.abs(w).T + np.abs(b), k + 1) + 4e-7 * np.abs(gelu) + 1e-30
        assert (np.abs(fast - gelu) <= bound).all(), np.max(np.abs(fast - gelu) / bound)
    else:
        np.testing.assert_array_equal(fast, plain)
    np.testing.assert_allclose(fast, gelu, rtol=1e-4, atol=1e-4)


def sum_error_bound(abs_sum, terms: int):
    """Rounding error bound of a float32 sum of ``terms`` products, in any order:
    ``gamma_terms * sum |term|`` with ``gamma_n = n u / (1 - n u)``, ``u = 2**-24``."""
    u = 2.0 ** -24
    return terms * u / (1 - terms * u) * abs_sum


@pytest.mark.parametrize("threads", ["1", "2"])
def test_softmax_and_layer_norm_rows_are_bitwise(threads, monkeypatch):
    """Row reductions along the last axis with no loop to vectorize: a maximum keeps scalar
    accumulators (bitwise: max is exact in any order); the sums get vector partial sums (a
    dot-product nest), so softmax and layer_norm are checked against float64 within a few
    ulps instead of bit for bit."""
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    x = (RNG.standard_normal((2, 64, 48)) * 4).astype("float32")
    mod = _zero_module(lambda a: [op.nn.softmax(a, axis=-1)], [x.shape])
    (fast,), (plain,) = _run_both(mod, [x])
    np.testing.assert_allclose(fast, plain, rtol=4e-6, atol=0)
    x64 = x.astype("float64")
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    np.testing.assert_allclose(fast, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    g, b = RNG.standard_normal(48).astype("float32"), RNG.standard_normal(48).astype("float32")
    mod = _zero_module(lambda a, gg, bb: [op.nn.layer_norm(a, gg, bb, axes=[-1])], [x.shape, (48,), (48,)])
    (fast,), (plain,) = _run_both(mod, [x, g, b])
    np.testing.assert_allclose(fast, plain, rtol=1e-5, atol=1e-6)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(fast, (x - mean) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=1e-4)


NO_INIT = '''
@T.prim_func
def f(A: T.Buffer((32, 64), "float32"), B: T.Buffer((64, 48), "float32"), C: T.Buffer((32, 48), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(32, 48, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_reduction_without_init_accumulates_onto_the_output():
    a, b = RNG.standard_normal((32, 64)).astype("float32"), RNG.standard_normal((64, 48)).astype("float32")
    c0 = RNG.standard_normal((32, 48)).astype("float32")
    outs = []
    for schedule in (True, False):
        c = c0.copy()
        build_cpu({"f": tvms.parse(NO_INIT)}, schedule=schedule, use_cache=False)["f"](a, b, c)
        outs.append(c)
    assert "C_tile" in _blocks(default_schedule(tvms.parse(NO_INIT)).body)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], c0 + a @ b, rtol=1e-4, atol=1e-4)


def test_parallel_threads_follows_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")
    assert parallel_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert parallel_threads() >= 1


# ----------------------------------------------------------------------------- inlining


def test_gelu_chain_is_one_nest_and_softmax_keeps_its_exponentials():
    mod = _zero_module(lambda x: [op.nn.gelu(x)], [(8, 32)])
    (func,) = _prim_funcs(mod).values()
    assert len(blocks_under(func.body)) == 5  # TVM's stages: multiply, erf, multiply, add, multiply
    g = default_schedule(func)
    assert len(blocks_under(g.body)) == 1 and not g.body.block.alloc_buffers
    # softmax: the exponentials feed a reduction (their sum): they stay a stage of their own,
    # computed once, not once per reduction step.
    mod = _zero_module(lambda x: [op.nn.softmax(x)], [(8, 32)])
    (func,) = _prim_funcs(mod).values()
    names = _blocks(default_schedule(func).body)
    assert any("exp" in n and "sum" not in n for n in names)



def test_softmax_normalization_runs_in_parallel():
    """TOPI's softmax marks its blocks with the axis they normalize (``T.block_attr({"axis":
    3})``): a description, not a request, so the normalization is scheduled like any nest (in
    the parallel loop over blocks of rows `row_fusion` runs the stages in)."""
    mod = _zero_module(lambda x: [op.nn.softmax(x)], [(8, 128, 128)])
    (func,) = _prim_funcs(mod).values()
    scheduled = default_schedule(func)
    norm = [r for r in blocks_under(scheduled.body) if r.block.name == "T_softmax_norm"]
    assert norm and norm[0].block.annotations == {"axis": 2}

    parallel = []

    class Loops(tvms.ir.mutator.IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and s.kind == "parallel":
                parallel.append(s)
            return super().visit_stmt(s)

    Loops().visit_stmt(scheduled.body)
    assert any(r.block.name == "T_softmax_norm" for lp in parallel for r in blocks_under(lp)), \
        "the normalization nest was left serial"


EXPENSIVE_TWICE = '''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tir.noalias": True})
    E = T.alloc_buffer((64,))
    for i in range(64):
        with T.block("E"):
            vi = T.axis.remap("S", [i])
            E[vi] = T.exp(A[vi])
    for i in range(64):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = E[vi] * E[vi]
'''


def test_an_expensive_stage_read_twice_is_not_inlined():
    g = default_schedule(tvms.parse(EXPENSIVE_TWICE))
    assert _blocks(g.body) == ["root", "E", "B"] or _blocks(g.body)[-2:] == ["E", "B"]
    a = RNG.standard_normal(64).astype("float32")
    b = np.zeros(64, "float32")
    build_cpu({"f": tvms.parse(EXPENSIVE_TWICE)}, use_cache=False)["f"](a, b)
    np.testing.assert_allclose(b, np.exp(a) ** 2, rtol=1e-5)


MIXED_INDEX_TYPES = '''
@T.prim_func(private=True)
def main(lv3: T.Buffer((T.int64(2), T.int64(6), T.int64(16)), "float32"), out: T.Buffer((2, 6, 19, 5), "float32")):
    T.func_attr({"tir.noalias": True})
    pad = T.alloc_buffer((T.int64(2), T.int64(6), T.int64(19)))
    for i0, i1, i2 in T.grid(T.int64(2), T.int64(6), T.int64(19)):
        with T.block("PadInput"):
            v_i0, v_i1, v_i2 = T.axis.remap("SSS", [i0, i1, i2])
            pad[v_i0, v_i1, v_i2] = T.if_then_else(T.int64(1) <= v_i2 and v_i2 < T.int64(17), lv3[v_i0, v_i1, v_i2 - T.int64(1)], T.float32(0.0))
    for ax0, ax1, ax2, ax3 in T.grid(2, 6, 19, 5):
        with T.block("T_broadcast_to"):
            v_ax0, v_ax1, v_ax2, v_ax3 = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
            out[v_ax0, v_ax1, v_ax2, v_ax3] = pad[v_ax0, v_ax1, v_ax2]
'''


def test_merged_stages_with_int32_loops_over_int64_buffers():
    """A torch import's pad -> broadcast_to: int32 loops index the int64 pad buffer. Merging the
    pad into its consumer substitutes int32 variables for int64 ones; they are cast, so the
    kernel stays well typed (LLVM refused `i32 - i64`)."""
    from tvmscript.compiler.build_cpu import build_cpu

    x = np.random.default_rng(0).standard_normal((2, 6, 16)).astype("float32")
    out = np.full((2, 6, 19, 5), np.nan, "float32")
    build_cpu({"f": tvms.parse(MIXED_INDEX_TYPES)})["f"](x, out)
    expected = np.broadcast_to(np.pad(x, [(0, 0), (0, 0), (1, 2)])[..., None], (2, 6, 19, 5))
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("size", [28, 14])
def test_a_depthwise_convolution_runs_its_channels_in_parallel(size):
    """No panel to pack: the 192 channels run in parallel, not the row's two vector tiles
    (which split every row of outputs between the threads), and results keep their bits."""
    build = lambda x, w: [op.nn.conv2d(x, w, padding=[1] * 4, groups=192)]  # noqa: E731
    shapes = [(1, 192, size, size), (192, 1, 3, 3)]
    mod = _zero_module(build, shapes)
    (func,) = _prim_funcs(mod).values()
    g = default_schedule(func)
    parallel = []

    def visit(s):
        if isinstance(s, tir.For):
            if s.kind == "parallel":
                parallel.append(int(s.extent.value))
            visit(s.body)
        elif isinstance(s, tir.SeqStmt):
            for c in s.seq:
                visit(c)
        elif isinstance(s, tir.BlockRealize):
            visit(s.block.body)

    visit(g.body)
    assert parallel == [192]
    arrays = [RNG.standard_normal(sh).astype("float32") for sh in shapes]
    (fast,), (plain,) = _run_both(mod, arrays)
    np.testing.assert_array_equal(fast, plain)


COLLAPSIBLE = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((9, 5, 16), "float32"), B: T.Buffer((9, 5, 16), "float32")):
    for i in T.parallel(9):
        for j in range(5):
            for k in range(16):
                B[i, j, k] = A[i, j, k] * T.float32(2) + T.float32(i * 5 + j)
'''


def _parallel_extents(stmt) -> list:
    found = []

    class Walk(TIRVisitor):
        def visit_For(self, node) -> None:
            if node.kind == "parallel":
                found.append(int(node.extent.value))
            self.visit(node.body)

    Walk().visit(stmt)
    return found


@pytest.mark.parametrize("threads, extents", [("2", [45]), ("3", [9]), ("4", [720])])
def test_a_parallel_loop_is_collapsed_with_its_inner_loop_to_share_evenly(threads, extents, monkeypatch):
    """9 iterations over 2 threads leave one idle at the end; 9 x 5 as one loop of 45 nearly
    do not (23 and 22); over 3 threads they already share evenly; over 4, 45 still leaves 7%
    idle, and the innermost loop joins too. Results do not change."""
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    func = tvms.parse(COLLAPSIBLE)
    assert _parallel_extents(collapse_parallel(func.body)) == extents
    a = RNG.standard_normal((9, 5, 16)).astype("float32")
    b = np.zeros_like(a)
    build_cpu({"f": tir.PrimFunc(func.params, func.buffer_map, collapse_parallel(func.body))},
              schedule=False, use_cache=False)["f"](a, b)
    np.testing.assert_array_equal(b, a * 2 + np.arange(45, dtype="float32").reshape(9, 5, 1))


def test_a_loop_with_work_of_its_own_around_the_inner_loop_is_not_collapsed(monkeypatch):
    """A panel packed per outer iteration and reused by the inner loop's: collapsed, it would
    be packed for each of them."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    src = COLLAPSIBLE.replace("        for j in range(5):\n",
                              "        B[i, 0, 0] = T.float32(0)\n        for j in range(5):\n")
    assert _parallel_extents(collapse_parallel(tvms.parse(src).body)) == [9]
