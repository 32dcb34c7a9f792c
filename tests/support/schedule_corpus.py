"""A corpus of real kernels for checking that the default CPU schedule keeps results
(tests/schedules/test_schedule_keeps_results.py), and the tools that check it.

The kernels come from where `tvms run` gets them: Relax ops built with `relax.BlockBuilder`
and put through the zero pipeline (legalized, fused: `zero_kernels`), and the seed programs'
prim_funcs in samples/ (`seed_kernels`). A few rules of `compiler.schedule_cpu` need a form
no legalized op has (a symbolic reduction extent, a reduction without ``T.init``, two blocks
with one name); those kernels are written in TVMScript, each saying why.

`applied_rules(original, scheduled)` reads which schedule rules a scheduled PrimFunc shows,
from what each rule leaves in the IR (block names it makes, its loop annotations, the
buffers it allocates or removes); the module has no trace of its own, and reading the result
checks that a rule was carried out, not only planned (a plan the schedule primitives refuse
is dropped).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.lower_tir import INTERLEAVE_ANN, UNROLL_ANN, VECTORIZE_ANN, dtype_bytes
from tvmscript.ir.mutator import IRMutator
from tvmscript.compiler.schedule.common import blocks_under
from tvmscript.compiler.schedule_cpu import vector_bytes
from tvmscript.relax import op

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"

# ----------------------------------------------------------------------------- the rules
#
# Each rule of compiler/schedule_cpu/, as a tag `applied_rules` reports, with the function
# that carries it out (module.function in that package).
RULES = {
    "inline": "inline.inline_elementwise: an intermediate elementwise stage computed in its reader",
    "inline_padding": "inline._padding_read_few_times: a padding computed where a depthwise convolution reads it",
    "keep_expensive_stage": "inline.inline_elementwise: a stage computing exp/erf/... read by a reduction stays",
    "unique_names": "schedule.common.with_unique_block_names: blocks sharing a name renamed before scheduling",
    "register_tile": "register_tile.plan_register_tile: accumulators in a <out>_local tile, vectorized",
    "narrow_lanes": "register_tile._pick_vector_loop: half or quarter vector width when no loop fits the full one",
    "tile_rows": "register_tile._pick_row_loop/_pick_tile_shape: several rows per tile, unrolled",
    "scalar_tile": "register_tile._pick_vector_loop/_scalar_tile: scalar accumulators (no loop to vectorize)",
    "pack_transposing": "register_tile._pick_vector_loop, packing.packed_panel/_fill_nest: a strided operand packed "
                        "(a transposing copy)",
    "pack_rows": "register_tile._locality_pack, packing._fill_nest: a contiguous operand packed (rows copied)",
    "pack_upfront": "register_tile._order_register_tile: the whole operand packed before the nest, in parallel",
    "row_chunks": "register_tile._order_register_tile: the tile rows split into one chunk per thread",
    "k_split": "register_tile._order_register_tile: the reduction split (panel over packed_panel_bytes), init nest "
               "of its own",
    "fold_epilogue": "accumulators.foldable_epilogue: the elementwise stage after a tile computed in its stores",
    "acc_from_output": "accumulators.accumulator_tile: accumulators start from the output (no T.init)",
    "guard": "plan.reduce_guard: an empty symbolic reduction leaves the output alone",
    "dot_product": "dot_product.DotProduct: vector partial sums (reorders float additions)",
    "dot_extremum": "dot_product.DotProduct: vector partial maxima or minima (exact)",
    "loop_tile": "loop_tile.plan_loop_tile/_plan_packing: the one-dimensional tile (no register tile)",
    "decompose": "loop_tile._finish_loop_tile, apply.apply_plan: T.init moved to a nest of its own "
                 "(decompose_reduction)",
    "init_parallel": "loop_tile._finish_loop_tile: the init nest's outer loop parallel too",
    "block_tiles": "block_tiles.plan_block_tiles: a transposing copy tiled in two dimensions",
    "parallel": "loop_tile._parallel_entry, register_tile._order_register_tile, dot_product.DotProduct: the outer "
                "loop T.parallel",
    "not_vectorized": "analysis.vectorizable: a tile's stores calling a libm function are not vectorized",
    "row_fusion": "row_fusion.fuse_row_stages: a row-wise op's stages run block of rows by block of rows",
    "strided_window": "strided_window.StridedWindow: a pooling window's taps unrolled in the outputs' vector loop",
    "phase_window": "phase_window.phase_split: a padded plane split in its stride's phases, the window one vector "
                    "loop over the plane",
}


# ----------------------------------------------------------------------------- kernels


@dataclass
class Case:
    """One kernel: ``func`` built scheduled and not, run on the same random inputs.

    ``rules``: the rules (`RULES`) its schedule must show. ``sums``: when set, the schedule
    reorders float additions (a dot-product nest), and this says how results may differ (see
    `SumBound`); else they must be the same bits. ``xfail``: a known difference, described.
    ``sizes``: values of symbolic dimensions. ``accumulates``: the output starts with values
    the kernel adds to (a reduction without ``T.init``)."""

    id: str
    func: tir.PrimFunc
    rules: frozenset = frozenset()
    sums: Optional["SumBound"] = None
    xfail: Optional[str] = None
    sizes: dict = field(default_factory=dict)
    accumulates: bool = False
    inputs: Optional[Callable] = None  # rng -> list of arrays, when random normals will not do
    threads: tuple = ("1", "2")  # OMP_NUM_THREADS values the schedule is fitted to (it may differ)
    untouched: bool = False  # the schedule must leave the nests as they are (no rule matches)


@dataclass
class SumBound:
    """How a kernel whose float sums are reordered may differ from the unscheduled one.

    ``terms``: the length of the reordered sum (plus one for its init value). A float sum of
    ``n`` terms in any order is within ``gamma_n * sum |terms|`` of the exact sum
    (``gamma_n = n u / (1 - n u)``, ``u`` the unit roundoff), so two orders are within twice
    that of each other. ``magnitude(inputs, plain)`` gives, per output element, what the
    error of the sum is multiplied by when it reaches the output times ``sum |terms|`` (for a
    kernel linear in its terms: the unscheduled kernel run on the inputs' absolute values);
    ``slack_ulps``: roundings after the sum that may differ once its value differs (a
    division, a GELU)."""

    reason: str
    terms: int
    magnitude: Callable
    slack_ulps: float = 0.0


def unit_roundoff(dtype: str) -> float:
    return {"float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}[dtype]


def gamma(n: int, dtype: str) -> float:
    u = unit_roundoff(dtype)
    return n * u / (1 - n * u)


def zero_kernels(build: Callable, specs: list) -> dict:
    """The PrimFuncs of ``main(*params)`` (``build(*params)`` gives the Relax expressions to
    emit, the last is returned) through the zero pipeline; ``specs``: (shape, dtype) per
    parameter."""
    params = [op.make_var(f"p{i}", relax.TensorStructInfo(list(shape), dtype))
              for i, (shape, dtype) in enumerate(specs)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = None
            for expr in build(*params):
                out = bb.emit(expr)
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    mod = tvms.relax.get_pipeline("zero")(bb.get())
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def zero_kernel(build: Callable, specs: list, pick: Optional[str] = None) -> tir.PrimFunc:
    """The one PrimFunc of `zero_kernels` (or the one whose name contains ``pick``)."""
    funcs = zero_kernels(build, specs)
    if pick is not None:
        funcs = {n: f for n, f in funcs.items() if pick in n}
    (func,) = funcs.values()
    return func


# Seeds `tvms.load` cannot read alone: a metadata section they refer to is not in the file, or
# a function they call is in another file.
UNLOADABLE_SEEDS = {"fx_mlp_highlevel", "fx_mlp_module", "fx_module", "two_dataflow_blocks_fn"}


def seed_kernels() -> dict:
    """Every prim_func of the seed programs (samples/*.tvms), by ``file:name``, structurally
    equal ones once."""
    from tvmscript.ir import structural_equal

    out: dict = {}
    for path in sorted(SAMPLES.glob("*.tvms")):
        if path.stem in UNLOADABLE_SEEDS:
            continue
        loaded = tvms.load(str(path))
        if isinstance(loaded, tir.PrimFunc):
            funcs = {path.stem: loaded}
        elif hasattr(loaded, "functions"):
            funcs = {gv.name_hint: f for gv, f in loaded.functions.items() if isinstance(f, tir.PrimFunc)}
        else:
            continue
        for name, func in funcs.items():
            if not any(structural_equal(func, seen) for seen in out.values()):
                out[f"{path.stem}:{name}"] = func
    return out


# ----------------------------------------------------------------------------- running


def _shape(buf, sizes: dict) -> list:
    out = []
    for d in buf.shape:
        out.append(int(d.value) if isinstance(d, tir.IntImm) else int(sizes[d.name]))
    return out


def random_array(rng, shape, dtype: str):
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("uint"):
        return rng.integers(0, 20, shape).astype(dtype)
    return rng.integers(-20, 20, shape).astype(dtype)


def make_inputs(case: Case, rng) -> list:
    if case.inputs is not None:
        return case.inputs(rng)
    func = case.func
    return [random_array(rng, _shape(func.buffer_map[p], case.sizes), func.buffer_map[p].dtype)
            for p in func.params[:-1]]


def initial_output(case: Case, rng):
    buf = case.func.buffer_map[case.func.params[-1]]
    shape = _shape(buf, case.sizes)
    if case.accumulates:
        return random_array(rng, shape, buf.dtype)
    if buf.dtype.startswith("float"):
        return np.full(shape, np.nan, buf.dtype)  # elements never written show
    return np.full(shape, -7, buf.dtype)


def run(case: Case, inputs: list, out0, schedule: bool):
    """The kernel's output, built scheduled or not (cached builds are keyed by the thread count
    the schedule fits its tiles to)."""
    from tvmscript.compiler.build_cpu import build_cpu

    kernel = build_cpu({"kernel": case.func}, schedule=schedule)["kernel"]
    out = out0.copy()
    kernel(*inputs, out)
    return out


def same_bits(a, b) -> bool:
    """Equal element for element, NaN where the other has NaN, zeros of the same sign."""
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    return bool(np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)))


def sum_bound(case: Case, inputs: list, plain):
    """Per output element: how far the scheduled result may lie from the unscheduled one."""
    s = case.sums
    dtype = case.func.buffer_map[case.func.params[-1]].dtype
    mag = np.asarray(s.magnitude(inputs, plain), "float64")
    ulp = np.spacing(np.abs(plain).astype(dtype)).astype("float64")
    return 2 * gamma(s.terms, dtype) * mag + s.slack_ulps * ulp


def linear_magnitude(case_func: Callable) -> Callable:
    """`SumBound.magnitude` of a kernel linear in each term of its sums (a sum, a mean, a
    matrix-vector product, plus a bias, through a ReLU): the kernel on absolute values gives
    ``sum |terms|`` per output (computed in the kernel's own precision: a few ulps low at
    most, covered by the factor 1.01)."""

    def magnitude(inputs, plain):
        return 1.01 * np.abs(case_func([np.abs(x) for x in inputs]))

    return magnitude


# ----------------------------------------------------------------------------- rules shown


class _Walk(IRMutator):
    """Collects loops (with the blocks around them), blocks, and conditionals."""

    def __init__(self) -> None:
        self.loops: list = []  # (For, names of the enclosing blocks)
        self.blocks: list = []  # tir.Block, program order
        self.ifs = 0
        self.stack: list = []

    def visit_stmt(self, s):
        if isinstance(s, tir.For):
            self.loops.append((s, tuple(self.stack)))
        if isinstance(s, tir.IfThenElse):
            self.ifs += 1
        if isinstance(s, tir.Block):
            self.blocks.append(s)
            self.stack.append(s.name)
            out = super().visit_stmt(s)
            self.stack.pop()
            return out
        return super().visit_stmt(s)


def _walk(func) -> _Walk:
    w = _Walk()
    w.visit_stmt(func.body)
    return w


def _root_buffers(func) -> int:
    return len(func.body.block.alloc_buffers) if isinstance(func.body, tir.BlockRealize) else 0


def _stores(stmt) -> list:
    found = []

    class S(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                found.append(s)
            return super().visit_stmt(s)

    S().visit_stmt(stmt)
    return found


def applied_rules(original: tir.PrimFunc, scheduled: tir.PrimFunc) -> set:
    """The rules of `RULES` that ``scheduled`` shows, against ``original``."""
    before, after = _walk(original), _walk(scheduled)
    rules = set()
    names_before = [b.name for b in before.blocks]
    if len(set(names_before)) != len(names_before):
        rules.add("unique_names")
    tiles = [b for b in after.blocks if b.name.endswith("_tile") and any(x.scope == "local" for x in b.alloc_buffers)]
    packs = [b for b in after.blocks if b.name.endswith("_pack")]
    folded = 0
    for tile in tiles:
        acc = next(x for x in tile.alloc_buffers if x.scope == "local")
        full = max(1, vector_bytes() // dtype_bytes(acc.dtype))
        widths = {lp.annotations.get(VECTORIZE_ANN, 1) for lp, encl in after.loops if tile.name in encl}
        if max(widths) > 1:
            rules.add("register_tile")
            if max(widths) < full:
                rules.add("narrow_lanes")
        else:
            rules.add("scalar_tile")
        if len(acc.shape) == 2 and max(widths) > 1:
            rules.add("tile_rows")
        start, finish = tile.body.seq[0], tile.body.seq[-1]
        (first,) = _stores(start)
        if isinstance(first.value, tir.BufferLoad) and first.value.buffer.scope != "local":
            rules.add("acc_from_output")
        (last,) = _stores(finish)
        if not (isinstance(last.value, tir.BufferLoad) and last.value.buffer is acc):
            rules.add("fold_epilogue")
            folded += 1
            finish_loops = [lp for lp, _ in after.loops if lp is finish or _inside(lp, finish)]
            if (max(widths) > 1 and _calls_libm(last.value)
                    and all(lp.annotations.get(VECTORIZE_ANN, 1) == 1 for lp in finish_loops)):
                rules.add("not_vectorized")
    for pack in packs:
        fill = pack.body.seq[0]
        fill_loops = []
        cur = fill
        while isinstance(cur, tir.For):
            fill_loops.append(cur)
            cur = cur.body
        if any(lp.annotations.get(VECTORIZE_ANN) == 1 for lp in fill_loops):
            rules.add("pack_transposing")
        else:
            rules.add("pack_rows")
        if fill_loops and fill_loops[0].kind == "parallel":
            rules.add("pack_upfront")
    loop_names = {lp.loop_var.name for lp, _ in after.loops}
    if any(n.endswith("_2") and n[:-2] + "_0" in loop_names and n[:-2] + "_1" in loop_names for n in loop_names):
        rules.add("row_chunks")
    tiled = {t.name[:-len("_tile")] for t in tiles}
    inits = [b for b in after.blocks if b.name.endswith("_init")]
    if any(b.name[:-len("_init")] in tiled for b in inits):
        rules.add("k_split")  # a register tile's reduction split: the output initialized first
    for blk in after.blocks:
        if any(b.name.endswith("_dot") for b in blk.alloc_buffers):
            # Partial sums reorder additions; partial maxima or minima round nothing.
            sums = any(isinstance(s.value, tir.Add) for s in _stores(blk.body) if s.buffer.name.endswith("_dot"))
            rules.add("dot_product" if sums else "dot_extremum")
    tile_names = {t.name for t in tiles}
    if any(lp.annotations.get(INTERLEAVE_ANN) and not (set(encl) & tile_names) for lp, encl in after.loops):
        rules.add("loop_tile")
    if any(b.name[:-len("_init")] not in tiled for b in inits):
        rules.add("decompose")
    for lp, _ in after.loops:
        if lp.kind == "parallel":
            rules.add("parallel")
            inner = blocks_under(lp.body)
            if inner and all(r.block.name.endswith("_init") for r in inner):
                rules.add("init_parallel")
    if any(lp.annotations.get(UNROLL_ANN) == 0 and lp.annotations.get(VECTORIZE_ANN) == 1 for lp, _ in after.loops):
        rules.add("block_tiles")
    if after.ifs > before.ifs:
        rules.add("guard")
    if any(b.name.endswith("_window") for b in after.blocks):
        rules.add("strided_window")
    row_blocks = [b for b in after.blocks if b.name.endswith("_rows")]
    row_copies = {x for b in row_blocks for x in b.alloc_buffers if x.name.endswith("_rows")}
    if row_blocks:
        rules.add("row_fusion")
    if any(x.name.endswith("_phases") for b in row_blocks for x in b.alloc_buffers):
        rules.add("phase_window")
    moved = len({x.name for x in row_copies})  # root buffers that became the blocks' copies
    removed = _root_buffers(original) - _root_buffers(scheduled) - moved
    if removed > folded:
        rules.add("inline")
    kept = set(scheduled.body.block.alloc_buffers) if isinstance(scheduled.body, tir.BlockRealize) else set()
    kept |= row_copies
    kept_names = {b.name for b in kept}
    intermediates = set(original.body.block.alloc_buffers) if isinstance(original.body, tir.BlockRealize) else set()
    if any(isinstance(b.body, tir.BufferStore) and b.body.buffer in intermediates
           and isinstance(b.body.value, tir.Call) and b.body.value.op == "tir.if_then_else"
           and b.body.buffer.name not in kept_names for b in before.blocks):
        rules.add("inline_padding")
    if any(isinstance(b.body, tir.BufferStore) and b.body.buffer in kept and b.init is None
           and _calls_expensive(b.body.value) for b in after.blocks):
        rules.add("keep_expensive_stage")
    return rules


def _inside(lp, stmt) -> bool:
    found = False

    class F(IRMutator):
        def visit_stmt(self, s):
            nonlocal found
            if s is lp:
                found = True
                return s
            return super().visit_stmt(s)

    F().visit_stmt(stmt)
    return found


def _calls_expensive(value) -> bool:
    """Whether a value calls exp, erf, ... (`schedule_cpu.inline.EXPENSIVE_CALLS`)."""
    from tvmscript.compiler.schedule_cpu.inline import has_expensive_call

    return has_expensive_call(value)


def _calls_libm(value) -> bool:
    """Whether a value calls a function LLVM cannot vectorize (`codegen_llvm.vectorizable_call`)."""
    from tvmscript.compiler.codegen_llvm import vectorizable_call

    found = False

    class C(IRMutator):
        def visit_expr(self, e):
            nonlocal found
            if isinstance(e, tir.Call) and not vectorizable_call(e.op, e.dtype):
                found = True
            return super().visit_expr(e)

    C().visit_expr(value)
    return found


# ----------------------------------------------------------------------------- bounds


def reduction_length(func: tir.PrimFunc) -> int:
    """The most terms any reduction of ``func`` combines per output element (constant extents)."""
    longest = 1
    for realize in blocks_under(func.body):
        n = 1
        for iv in realize.block.iter_vars:
            if iv.kind == "R":
                n *= int(iv.dom.extent.value)
        longest = max(longest, n)
    return longest


def _plain_on_abs(func: tir.PrimFunc, sizes: Optional[dict] = None):
    """The unscheduled kernel as a function of its inputs (its output allocated here);
    ``sizes``: the values of its symbolic dims."""
    def call(inputs):
        case = Case("abs", func, sizes=dict(sizes or {}))
        return run(case, inputs, initial_output(case, None), schedule=False)
    return call


def linear_sums(func: tir.PrimFunc, reason: str, slack_ulps: float = 0.0, sizes: Optional[dict] = None) -> SumBound:
    """The bound of a kernel whose output is linear in the terms of its reordered sum (a sum, a
    mean, a matrix-vector product; a bias added, a ReLU: 1-Lipschitz, one rounding each)."""
    return SumBound(reason, reduction_length(func), linear_magnitude(_plain_on_abs(func, sizes)), slack_ulps)


def softmax_sums(func: tir.PrimFunc) -> SumBound:
    """softmax = e / s, s = sum of the K exponentials (positive terms: sum |terms| = s): a
    relative error of s is one of the output, ``|d out| = out |d s| / s``; the division's
    rounding may then differ by one ulp."""
    return SumBound("softmax's row sum of exponentials is a dot-product nest", reduction_length(func),
                    lambda inputs, plain: 1.01 * np.abs(plain), slack_ulps=1)


def log_softmax_sums(func: tir.PrimFunc) -> SumBound:
    """log_softmax = x - m - log(s), s = sum of the K exponentials of x - m (positive terms:
    sum |terms| = s): a relative error of s is an absolute one of log(s), so of the output;
    the log and the two subtractions may then each differ by an ulp."""
    return SumBound("log_softmax's row sum of exponentials is a dot-product nest", reduction_length(func),
                    lambda inputs, plain: np.full(plain.shape, 1.01), slack_ulps=3)


def layer_norm_sums(axis_len: int) -> SumBound:
    """layer_norm (two passes, as legalized): mu = sum(x) / K, V = sum((x - mu)^2),
    out = (x - mu) rsqrt(V / K + eps) g + b; both sums are dot-product nests. With
    ``d mu <= gamma_K sum|x| / K`` (per order) and ``d V <= gamma_K V + 2 d mu sum|x - mu|``,
    ``|d out| <= |g| r d mu + |g| |x - mu| r^3 d V / (2K)`` (r = rsqrt(V / K + eps)), to first
    order (the factor 1.1 covers the rest); the roundings after the sums (x - mu, rsqrt, two
    products, a sum) may each differ by an ulp: 6 ulps of slack. `magnitude` gives that over
    ``gamma_K``, so the bound is ``2 gamma_K magnitude``."""

    def magnitude(inputs, plain):
        x, g = (a.astype("float64") for a in inputs[:2])
        k = axis_len
        mu = x.mean(-1, keepdims=True)
        v = ((x - mu) ** 2).sum(-1, keepdims=True)
        r = 1 / np.sqrt(v / k + 1e-5)
        d_mu = np.abs(x).sum(-1, keepdims=True) / k  # over gamma_K
        d_v = v + 2 * d_mu * np.abs(x - mu).sum(-1, keepdims=True)
        return 1.1 * (np.abs(g) * r * d_mu + np.abs(g) * np.abs(x - mu) * r ** 3 * d_v / (2 * k))

    return SumBound("layer_norm's mean and variance sums are dot-product nests", axis_len, magnitude, slack_ulps=6)


def rms_norm_sums(axis_len: int) -> SumBound:
    """rms_norm: S = sum(x^2) (a dot-product nest, positive terms), out = rsqrt(S / K + eps) x g;
    ``|d out| <= |x g| r^3 d S / (2K)``, 1.1 for the second order, 3 ulps for the roundings
    after the sum."""

    def magnitude(inputs, plain):
        x, g = (a.astype("float64") for a in inputs[:2])
        s = (x * x).sum(-1, keepdims=True)
        r = 1 / np.sqrt(s / axis_len + 1e-5)
        return 1.1 * np.abs(x * g) * r ** 3 * s / (2 * axis_len)

    return SumBound("rms_norm's sum of squares is a dot-product nest", axis_len, magnitude, slack_ulps=3)


# ----------------------------------------------------------------------------- the corpus

F32 = "float32"


def _t(*shape, dtype=F32):
    return (shape, dtype)


# Written in TVMScript: forms no legalized op takes.
ACCUMULATE_TRANSPOSED = '''
@T.prim_func
def f(A: T.Buffer((33, 9), "float32"), B: T.Buffer((33, 40), "float32"), C: T.Buffer((9, 40), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(9, 40, 33):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vk, vi] * B[vk, vj]
'''  # no T.init: accumulates onto C (a gradient's update); A read transposed

SYMBOLIC_REDUCTION = '''
@T.prim_func
def f(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (T.int64(12), n), "float32")
    B = T.match_buffer(b, (n, T.int64(48)), "float32")
    C = T.match_buffer(c, (T.int64(12), T.int64(48)), "float32")
    for i, j, k in T.grid(T.int64(12), T.int64(48), n):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''  # a matmul over a dynamic sequence length

SYMBOLIC_REDUCTION_F16 = SYMBOLIC_REDUCTION.replace('"float32"', '"float16"').replace("T.float32", "T.float16")

SHARED_NAME = '''
@T.prim_func
def f(A: T.Buffer((24, 64), "float32"), B: T.Buffer((24, 64), "float32"), C: T.Buffer((64,), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j in T.grid(24, 64):
        with T.block("T"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.max(A[vi, vj], T.float32(0))
    for j, i in T.grid(64, 24):
        with T.block("T"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                C[vj] = T.float32(0)
            C[vj] = C[vj] + B[vi, vj]
'''  # two blocks named "T" (written by hand or merged from two modules); the second a column sum

USER_PARALLEL = '''
@T.prim_func
def f(A: T.Buffer((64, 48), "float32"), B: T.Buffer((48, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    T.func_attr({"tir.noalias": True})
    for i in T.parallel(64):
        for j, k in T.grid(32, 48):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''  # a user's own schedule: left alone


# A multiply stage inlined into an add would be one fused multiply-add (one rounding) where the
# unscheduled kernel rounds the product in its buffer first: schedule_cpu marks such products
# rounded (inline._RoundedProducts). These cases failed before it did.


def corpus() -> list:
    """Every kernel of the test, with the rules its schedule must show (see `Case`)."""
    cases = []

    def zero(id, build, specs, rules=(), pick=None, **kw):
        func = zero_kernel(build, specs, pick)
        sums = kw.pop("sums", None)
        cases.append(Case(id, func, frozenset(rules), sums(func) if callable(sums) else sums, **kw))

    def script(id, text, rules=(), **kw):
        cases.append(Case(id, tvms.parse(text), frozenset(rules), **kw))

    mm = lambda a, b: [op.matmul(a, b)]  # noqa: E731
    # Matrix products: register tiles.
    zero("matmul_bias_relu_64x128x96", lambda x, w, b: [op.nn.relu(op.add(op.matmul(x, w), b))],
         [_t(64, 128), _t(128, 96), _t(96)],
         {"register_tile", "tile_rows", "pack_rows", "fold_epilogue", "inline", "parallel"})
    zero("matmul_7x33x48", mm, [_t(7, 33), _t(33, 48)], {"register_tile", "tile_rows"})
    # 40 and 36 columns: full-width vectors, the last tile shifted back; 12 and 4: narrower ones.
    zero("matmul_7x33x40_shifted_vectors", mm, [_t(7, 33), _t(33, 40)], {"register_tile", "tile_rows"})
    zero("matmul_5x33x36_shifted_vectors", mm, [_t(5, 33), _t(33, 36)], {"register_tile", "tile_rows"})
    zero("matmul_7x33x12_half_lanes", mm, [_t(7, 33), _t(33, 12)], {"register_tile", "narrow_lanes"})
    zero("matmul_5x33x4_quarter_lanes", mm, [_t(5, 33), _t(33, 4)], {"register_tile", "narrow_lanes"})
    zero("matmul_7x33x7_shifted_quarter_lanes", mm, [_t(7, 33), _t(33, 7)], {"register_tile", "narrow_lanes"})
    zero("matmul_3x5x3_tiny", mm, [_t(3, 5), _t(5, 3)], {"decompose"})
    zero("matmul_batch1_129x64", mm, [_t(1, 129), _t(129, 64)], {"register_tile"})
    zero("matmul_1x1x1", mm, [_t(1, 1), _t(1, 1)])
    zero("matmul_scale_bias", lambda x, w, s, b: [op.add(op.multiply(op.matmul(x, w), s), b)],
         [_t(16, 32), _t(32, 48), _t(48), _t(48)], {"register_tile", "fold_epilogue", "inline"})  # the scale's product, folded into the tile's stores
    zero("matmul_f64_17x40x24", mm, [_t(17, 40, dtype="float64"), _t(40, 24, dtype="float64")],
         {"register_tile", "tile_rows"})
    zero("matmul_i32_17x40x32", mm, [_t(17, 40, dtype="int32"), _t(40, 32, dtype="int32")],
         {"register_tile", "tile_rows"})
    zero("matmul_i64_9x20x16", mm, [_t(9, 20, dtype="int64"), _t(20, 16, dtype="int64")], {"register_tile"})
    zero("matmul_f16_17x40x256", mm, [_t(17, 40, dtype="float16"), _t(40, 256, dtype="float16")],
         {"loop_tile", "pack_rows", "decompose", "parallel"})
    zero("matmul_f16_512x16x256", mm, [_t(512, 16, dtype="float16"), _t(16, 256, dtype="float16")],
         {"loop_tile", "decompose", "init_parallel"})
    zero("matmul_i8_17x40x64", mm, [_t(17, 40, dtype="int8"), _t(40, 64, dtype="int8")], {"decompose"})
    zero("batch_matmul_2x4x33x16x48", mm, [_t(2, 4, 33, 16), _t(2, 4, 16, 48)],
         {"register_tile", "tile_rows", "parallel"})
    # 24x16384 @ 16384x64: one vector tile of 64 columns. One thread: the panel (16384 x 64
    # floats, 4 MB) exceeds what stays in L2 (`host.packed_panel_bytes`), the reduction is
    # split. Two: the weights are packed up front, the rows chunked per thread.
    ksplit = lambda: zero_kernel(mm, [_t(24, 16384), _t(16384, 64)])  # noqa: E731
    cases.append(Case("matmul_24x16384x64_threads1", ksplit(), frozenset({"register_tile", "k_split"})))
    cases[-1].threads = ("1",)
    cases.append(Case("matmul_24x16384x64_threads2", ksplit(), frozenset({"pack_upfront", "row_chunks"})))
    cases[-1].threads = ("2",)
    zero("matmul_129x512x64_upfront", mm, [_t(129, 512), _t(512, 64)], {"pack_upfront", "parallel"},
         threads=("2",))
    # Dense (x @ W.T): the weights packed transposed.
    zero("dense_bias_gelu_33x96x128", lambda x, w, b: [op.nn.gelu(op.add(op.nn.dense(x, w), b))],
         [_t(33, 96), _t(128, 96), _t(128)], {"register_tile", "pack_transposing", "fold_epilogue", "inline"})
    zero("dense_exp_f64", lambda x, w: [op.exp(op.nn.dense(x, w))],
         [_t(16, 32, dtype="float64"), _t(48, 32, dtype="float64")],
         {"register_tile", "fold_epilogue", "not_vectorized"})
    zero("dense_bias_relu_batch1", lambda x, w, b: [op.nn.relu(op.add(op.nn.dense(x, w), b))],
         [_t(1, 256), _t(40, 256), _t(40)], {"dot_product", "inline"},
         sums=lambda f: linear_sums(f, "a matrix-vector product with the matrix in rows is a dot-product "
                                       "nest; the bias add and ReLU after it round once more", 1))
    zero("dense_batch1_odd_k", lambda x, w: [op.nn.dense(x, w)], [_t(1, 129), _t(7, 129)], {"dot_product"},
         sums=lambda f: linear_sums(f, "a matrix-vector product with terms past its last vector is a dot product"))
    # Convolutions: output channels vectorized, weights packed.
    zero("conv2d_bias_relu_16to32_14", lambda x, w, b: [op.nn.relu(op.add(op.nn.conv2d(x, w, padding=[1] * 4), b))],
         [_t(1, 16, 14, 14), _t(32, 16, 3, 3), _t(1, 32, 1, 1)],
         {"register_tile", "pack_transposing", "fold_epilogue", "parallel"})
    zero("conv2d_batch2_3to8_9_stride2", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2])],
         [_t(2, 3, 9, 9), _t(8, 3, 3, 3)], {"register_tile", "narrow_lanes", "pack_transposing"})
    # Depthwise (groups = channels), as in mobilenet_v2: with stride 1 the padding is computed
    # where the tile reads it (vectorized along the width); with stride 2, one channel at a time,
    # its padded plane split in phases and the window one vector loop (more: see the pooling).
    dw = lambda s: lambda x, w, b: [op.clip(op.add(op.nn.conv2d(x, w, strides=[s, s], padding=[1] * 4,  # noqa: E731
                                                                 groups=12), b), 0, 6)]
    zero("depthwise_12x19_stride1", dw(1), [_t(1, 12, 19, 19), _t(12, 1, 3, 3), _t(1, 12, 1, 1)],
         {"inline_padding", "register_tile", "tile_rows", "fold_epilogue", "inline"})
    zero("depthwise_12x13_stride2", dw(2), [_t(1, 12, 13, 13), _t(12, 1, 3, 3), _t(1, 12, 1, 1)],
         {"phase_window", "row_fusion", "inline"})
    zero("conv2d_1x1_7to5", lambda x, w: [op.nn.conv2d(x, w)], [_t(1, 7, 5, 5), _t(5, 7, 1, 1)])
    # Reductions.
    zero("sum_inner_8x64", lambda x: [op.sum(x, axis=[-1])], [_t(8, 64)], {"dot_product"},
         sums=lambda f: linear_sums(f, "a row sum along contiguous elements is a dot-product nest"))
    zero("sum_inner_8x33", lambda x: [op.sum(x, axis=[-1])], [_t(8, 33)], {"dot_product"},
         sums=lambda f: linear_sums(f, "a row sum with terms past its last vector is a dot-product nest"))
    zero("sum_outer_33x48", lambda x: [op.sum(x, axis=[0])], [_t(33, 48)], {"register_tile"})
    zero("sum_middle_4x33x16", lambda x: [op.sum(x, axis=[1])], [_t(4, 33, 16)], {"register_tile"})
    zero("sum_all_7x9", lambda x: [op.sum(x)], [_t(7, 9)])
    zero("max_inner_8x64", lambda x: [op.max(x, axis=[-1])], [_t(8, 64)], {"dot_extremum"})
    zero("min_outer_9x32", lambda x: [op.min(x, axis=[0])], [_t(9, 32)], {"register_tile"})
    zero("prod_inner_f64_6x8", lambda x: [op.prod(x, axis=[-1])], [_t(6, 8, dtype="float64")], {"scalar_tile"})
    zero("mean_inner_4x7x64", lambda x: [op.mean(x, axis=[-1])], [_t(4, 7, 64)], {"dot_product"},
         sums=lambda f: linear_sums(f, "a row mean's sum is a dot-product nest; the division rounds once", 1))
    zero("sum_inner_i32_8x64", lambda x: [op.sum(x, axis=[-1])], [_t(8, 64, dtype="int32")], {"scalar_tile"})
    zero("sum_inner_f64_5x32", lambda x: [op.sum(x, axis=[-1])], [_t(5, 32, dtype="float64")], {"dot_product"},
         sums=lambda f: linear_sums(f, "a float64 row sum is a dot-product nest"))
    zero("softmax_2x64x48", lambda x: [op.nn.softmax(x)], [_t(2, 64, 48)],
         {"dot_product", "keep_expensive_stage", "row_fusion"}, sums=softmax_sums)
    zero("softmax_3x7x33", lambda x: [op.nn.softmax(x)], [_t(3, 7, 33)],
         {"dot_product", "keep_expensive_stage", "row_fusion"}, sums=softmax_sums)
    # Rows no block of 8 divides: blocks, then the last 5 rows (ViT's 197 rows, its attention's 197 keys).
    zero("softmax_2x37x197", lambda x: [op.nn.softmax(x)], [_t(2, 37, 197)],
         {"dot_product", "keep_expensive_stage", "row_fusion"}, sums=softmax_sums)
    zero("softmax_axis0_33x16", lambda x: [op.nn.softmax(x, axis=0)], [_t(33, 16)], {"register_tile"})
    zero("log_softmax_5x129", lambda x: [op.nn.log_softmax(x)], [_t(5, 129)], {"dot_product", "row_fusion"},
         sums=log_softmax_sums)
    zero("layer_norm_4x64", lambda x, g, b: [op.nn.layer_norm(x, g, b, axes=[-1])], [_t(4, 64), _t(64), _t(64)],
         {"dot_product", "row_fusion"}, sums=lambda f: layer_norm_sums(64))
    zero("layer_norm_3x33", lambda x, g, b: [op.nn.layer_norm(x, g, b, axes=[-1])], [_t(3, 33), _t(33), _t(33)],
         {"dot_product", "row_fusion"}, sums=lambda f: layer_norm_sums(33))
    zero("layer_norm_197x256", lambda x, g, b: [op.nn.layer_norm(x, g, b, axes=[-1])],
         [_t(1, 197, 256), _t(256), _t(256)], {"dot_product", "row_fusion"},
         sums=lambda f: layer_norm_sums(256))
    zero("rms_norm_4x64", lambda x, g: [op.nn.rms_norm(x, g, axes=[-1])], [_t(4, 64), _t(64)],
         {"dot_product", "row_fusion"}, sums=lambda f: rms_norm_sums(64))
    # Pooling.
    zero("max_pool2d_8x15_k3s2", lambda x: [op.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2])],
         [_t(1, 8, 15, 15)], {"scalar_tile"})  # its schedule_rule names a MetaSchedule rule: scheduled
    zero("avg_pool2d_2x16x14", lambda x: [op.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])],
         [_t(2, 16, 14, 14)], {"scalar_tile", "fold_epilogue"})
    # Outputs a vector wide or more: the window's taps unrolled in the vector loop.
    zero("avg_pool2d_3x64_k2s2", lambda x: [op.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])],
         [_t(1, 3, 64, 64)], {"strided_window"})
    zero("max_pool1d_4x99_k4s3", lambda x: [op.nn.max_pool1d(x, pool_size=[4], strides=[3])],
         [_t(2, 4, 99)], {"strided_window"})
    # Padded, one channel at a time: its padded plane split in the stride's phases in cache,
    # then the window as one vector loop over the plane, every tap a contiguous read.
    zero("max_pool2d_4x75_k3s2p1", lambda x: [op.nn.max_pool2d(x, pool_size=[3, 3], strides=[2, 2],
                                                                padding=[1, 1, 1, 1])],
         [_t(1, 4, 75, 75)], {"phase_window", "row_fusion"})
    zero("max_pool2d_2x23_k3s3p1", lambda x: [op.nn.max_pool2d(x, pool_size=[3, 3], strides=[3, 3],
                                                                padding=[1, 1, 1, 1])],
         [_t(1, 2, 23, 23)], {"phase_window", "row_fusion"})
    zero("avg_pool2d_3x17_k3s2p1", lambda x: [op.nn.avg_pool2d(x, pool_size=[3, 3], strides=[2, 2],
                                                                padding=[1, 1, 1, 1], count_include_pad=True)],
         [_t(1, 3, 17, 17)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_s2_8x40", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2], padding=[1, 1, 1, 1], groups=8)],
         [_t(1, 8, 40, 40), _t(8, 1, 3, 3)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_s2_bias_relu6_6x34", lambda x, w, b: [op.clip(op.add(op.nn.conv2d(
        x, w, strides=[2, 2], padding=[1, 1, 1, 1], groups=6), b), 0.0, 6.0)],
         [_t(1, 6, 34, 34), _t(6, 1, 3, 3), _t(1, 6, 1, 1)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_k5s2p2_5x17", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2], padding=[2, 2, 2, 2], groups=5)],
         [_t(1, 5, 17, 17), _t(5, 1, 5, 5)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_s2_dilated_4x21", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2], padding=[2, 2, 2, 2],
                                                                  dilation=[2, 2], groups=4)],
         [_t(1, 4, 21, 21), _t(4, 1, 3, 3)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_s2_asymmetric_3x16", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2], padding=[0, 1, 1, 0],
                                                                     groups=3)],
         [_t(1, 3, 16, 16), _t(3, 1, 3, 3)], {"phase_window", "row_fusion"})
    zero("dw_conv2d_s2_tiny_f64_4x4", lambda x, w: [op.nn.conv2d(x, w, strides=[2, 2], padding=[1, 1, 1, 1],
                                                                  groups=2)],
         [_t(1, 2, 4, 4, dtype="float64"), _t(2, 1, 3, 3, dtype="float64")], {"phase_window", "row_fusion"})
    zero("global_avg_pool_32x7", lambda x: [op.nn.adaptive_avg_pool2d(x, output_size=[1, 1])],
         [_t(1, 32, 7, 7)], {"fold_epilogue"})
    # Transposes and copies.
    zero("transpose_64x48", lambda x: [op.permute_dims(x, [1, 0])], [_t(64, 48)], {"block_tiles"})
    zero("transpose_784x256", lambda x: [op.permute_dims(x, [1, 0])], [_t(784, 256)], {"block_tiles", "parallel"})
    zero("transpose_33x7", lambda x: [op.permute_dims(x, [1, 0])], [_t(33, 7)])
    zero("transpose_021_4x128x64", lambda x: [op.permute_dims(x, [0, 2, 1])], [_t(4, 128, 64)], {"block_tiles"})
    zero("transpose_i8_64x32", lambda x: [op.permute_dims(x, [1, 0])], [_t(64, 32, dtype="int8")], {"block_tiles"})
    zero("concat_7x33", lambda x, y: [op.concat([x, y], axis=1)], [_t(7, 33), _t(7, 5)])
    # Elementwise chains.
    zero("add_broadcast_512x512", lambda x, y: [op.add(x, y)], [_t(512, 512), _t(512)], {"parallel"})
    zero("add_1", lambda x, y: [op.add(x, y)], [_t(1), _t(1)])
    zero("gelu_9x129", lambda x: [op.nn.gelu(x)], [_t(9, 129)], {"inline"})
    zero("gelu_tanh_9x129", lambda x: [op.nn.gelu_tanh(x)], [_t(9, 129)], {"inline"})  # 1 + 0.044715 * x * x
    zero("silu_9x129", lambda x: [op.nn.silu(x)], [_t(9, 129)], {"inline"})
    zero("exp_twice_f64", lambda x: [op.exp(op.add(x, x))], [_t(9, 33, dtype="float64")], {"inline"})
    zero("relu_sub_div_7x33", lambda x, y: [op.nn.relu(op.divide(op.subtract(x, y), y))], [_t(7, 33), _t(7, 33)],
         {"inline"})
    zero("add_max_i32", lambda x, y: [op.maximum(op.add(x, y), y)], [_t(9, 33, dtype="int32")] * 2, {"inline"})
    zero("add_mul_f16", lambda x, y: [op.multiply(op.add(x, y), y)], [_t(9, 33, dtype="float16")] * 2, {"inline"})
    zero("where_compare", lambda x, y: [op.where(op.greater(x, y), x, op.negative(y))], [_t(7, 33)] * 2, {"inline"})
    zero("multiply_add_7x33", lambda x, y, z: [op.add(x, op.multiply(y, z))], [_t(7, 33)] * 3, {"inline"})
    zero("sigmoid_mul_add_8x64", lambda x, y: [op.add(op.multiply(op.sigmoid(x), y), x)], [_t(8, 64)] * 2,
         {"inline"})
    # Hand-written forms.
    script("accumulate_no_init_transposed", ACCUMULATE_TRANSPOSED, {"register_tile", "acc_from_output"},
           accumulates=True)
    script("symbolic_reduction_n37", SYMBOLIC_REDUCTION, {"register_tile", "guard"}, sizes={"n": 37})
    script("symbolic_reduction_n0", SYMBOLIC_REDUCTION, {"register_tile", "guard"}, sizes={"n": 0})
    script("symbolic_reduction_f16_n19", SYMBOLIC_REDUCTION_F16, {"guard", "decompose"},
           sizes={"n": 19})
    script("symbolic_reduction_f16_n0", SYMBOLIC_REDUCTION_F16, {"guard", "decompose"}, sizes={"n": 0})
    script("two_blocks_one_name", SHARED_NAME, {"unique_names", "register_tile"})
    script("user_parallel_left_alone", USER_PARALLEL, untouched=True)
    return cases
