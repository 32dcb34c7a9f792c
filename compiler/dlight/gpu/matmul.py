"""`Matmul`: matrix products (``C[S, I, J] += A[S, I, K] * B[S, J, K]`` up to transposes and
batch axes, with elementwise prologues and epilogues), tiled for shared memory and registers.

Why this structure: a matmul does O(n^3) work on O(n^2) data, so it is fast only if each
element fetched from global memory is used many times. Each thread block computes a 32x64 tile
of C (blockIdx.x over I, blockIdx.y over batch x J); its 8x16 threads each compute a 4x4 sub-
tile held in registers ("local"), with the inner J loop vectorized by 2. The reduction runs in
chunks of 16: per chunk the block loads the A and B tiles it needs into shared memory
cooperatively (all threads, rows padded by `storage_align` against bank conflicts), then every
thread accumulates its 4x4 from shared memory, the 16-step inner loop unrolled. The copies are
coalesced, unlike TVM's: consecutive threads take consecutive elements of the global operand,
vectorized along K, or one element each along the rows where those are contiguous (a transposed
operand, a convolution's im2col read of its input's pixels). The result is written back from
registers, where the epilogue is inlined.

To get there the block is first brought into the canonical form: each operand gets a copy
indexed by the block's iterators (`reindex`) whose layout is rewritten to
``[S, I, K]`` / ``[S, J, K]`` / ``[S, I, J]`` (`transform_layout`, fusing several I or J axes),
the block's iterators likewise (`transform_block_layout`); the iteration space is padded to
the tile sizes (`pad_einsum`); the copies are inlined into the shared-memory loads and the
write-back at the end.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.index_map import IndexMap
from tvmscript.ir.tir_visitor import vars_in

from ...schedule import ScheduleError
from ..analysis import get_root_block
from .base import GPUScheduleRule


# ----------------------------------------------------------------------------- inlining


def _collect_transitive(step, block) -> list:
    """Everything ``step`` (``sch.get_producers`` or ``sch.get_consumers``) reaches from
    ``block``, depth first."""
    out = []
    for b in step(block):
        out.append(b)
        out.extend(_collect_transitive(step, b))
    return out


def _inline_each(inline, blocks: list) -> int:
    """How many of ``blocks`` the primitive ``inline`` (``sch.compute_inline`` or
    ``sch.reverse_compute_inline``) accepted."""
    n = 0
    for b in blocks:
        try:
            inline(b)
            n += 1
        except ScheduleError:
            continue
    return n


def auto_inline_producers(sch, block) -> None:
    """Inline every producer (transitively) of ``block`` that can be, until none can."""
    while _inline_each(sch.compute_inline, _collect_transitive(sch.get_producers, block)):
        pass


def auto_inline_consumers(sch, block) -> None:
    """Inline every consumer (transitively) of ``block``: into their own consumers, or into
    ``block`` (reverse), until none can."""
    while True:
        consumers = _collect_transitive(sch.get_consumers, block)
        n = _inline_each(sch.compute_inline, consumers)
        n += _inline_each(sch.reverse_compute_inline, consumers)
        if n == 0:
            return


def auto_inline_consumer_chain(sch, block) -> None:
    """Inline all consumers of ``block``; a consumer that also reads another producer gets
    that producer inlined first."""
    auto_inline_consumers(sch, block)
    remaining = sch.get_consumers(block)
    if remaining:
        me = sch.get(block)
        for c in remaining:
            for p in sch.get_producers(c):
                if sch.get(p) is not me:
                    auto_inline_producers(sch, p)
                    sch.compute_inline(p)
        auto_inline_consumers(sch, block)
    if sch.get_consumers(block):
        raise ScheduleError("Matmul", f"block '{sch.get(block).name}'",
                            "some consumers of the cache-write stage could not be inlined")


# ----------------------------------------------------------------------------- the canonical form


class IterKind(enum.Enum):
    """The role of a matmul iterator in ``C[S, I, J] += A[S, I, K] * B[S, J, K]``; T: unit."""

    kIter_S = 0
    kIter_I = 1
    kIter_J = 2
    kIter_K = 3
    kIter_T = 4


@dataclasses.dataclass
class IterTrait:
    kind: IterKind
    extent: tir.PrimExpr


def make_iter_fusion_index_map(traits: list, kind_order: list):
    """The index map fusing the iterators of each kind, in ``kind_order`` (a kind with none
    becomes a constant 0)."""
    fused: dict = {}
    inputs = []
    for n, t in enumerate(traits):
        v = tir.Var(t.extent.dtype, f"i{n}")
        inputs.append(v)
        if t.kind is IterKind.kIter_T:
            continue
        if t.kind not in kind_order:
            raise ValueError(f"unknown iterator kind {t.kind}")
        if t.kind in fused:
            fused[t.kind] = tir.Add(v.dtype, tir.Mul(v.dtype, fused[t.kind], t.extent), v)
        else:
            fused[t.kind] = v
    dtype = traits[0].extent.dtype
    return IndexMap(inputs, [fused.get(k, tir.IntImm(dtype, 0)) for k in kind_order])


def detect_iter_traits(block: tir.Block) -> Optional[tuple]:
    """The traits of the iterators of A, B and C and of the block, or None when the block is
    not ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` (point accesses, two reads, one write)."""
    if len(block.reads) != 2 or len(block.writes) != 1:
        return None

    def axes(region) -> Optional[set]:
        out: set = set()
        for r in region:
            if not tir.is_const_int(r.extent, 1):
                return None
            out |= set(vars_in([r.min]))
        return out

    a_axes, b_axes, c_axes = axes(block.reads[0].region), axes(block.reads[1].region), axes(block.writes[0].region)
    if a_axes is None or b_axes is None or c_axes is None:
        return None
    traits = {}
    for iv in block.iter_vars:
        v = iv.var
        if tir.is_const_int(iv.dom.extent, 1):
            kind = IterKind.kIter_T
        elif iv.kind == "S":
            if v in a_axes and v in b_axes and v in c_axes:
                kind = IterKind.kIter_S
            elif v in a_axes and v in c_axes:
                kind = IterKind.kIter_I
            elif v in b_axes and v in c_axes:
                kind = IterKind.kIter_J
            else:
                return None
        elif iv.kind == "R":
            if v in a_axes and v in b_axes and v not in c_axes:
                kind = IterKind.kIter_K
            else:
                return None
        else:
            return None
        traits[v] = IterTrait(kind, iv.dom.extent)
    gemm = {IterKind.kIter_I, IterKind.kIter_J, IterKind.kIter_K}
    if {t.kind for t in traits.values()} & gemm != gemm:
        return None
    a = [traits[iv.var] for iv in block.iter_vars if iv.var in a_axes]
    b = [traits[iv.var] for iv in block.iter_vars if iv.var in b_axes]
    c = [traits[iv.var] for iv in block.iter_vars if iv.var in c_axes]
    return a, b, c, [traits[iv.var] for iv in block.iter_vars]


def product_extents(block: tir.Block) -> Optional[dict]:
    """The extents of the canonical product's S, I, J and K (`IterKind` -> the product of its
    iterators' extents; None where one of them is symbolic), or None when the block is no
    matmul (`detect_iter_traits`)."""
    traits = detect_iter_traits(block)
    if traits is None:
        return None
    extent = {IterKind.kIter_S: 1, IterKind.kIter_I: 1, IterKind.kIter_J: 1, IterKind.kIter_K: 1}
    for t in traits[3]:
        if t.kind in extent and extent[t.kind] is not None:
            extent[t.kind] = extent[t.kind] * t.extent.value if isinstance(t.extent, tir.IntImm) else None
    return extent


def get_index_map(block: tir.Block) -> Optional[tuple]:
    """(block map, A map, B map, C map) to the canonical form, or None."""
    traits = detect_iter_traits(block)
    if traits is None:
        return None
    a, b, c, blk = traits
    S, I, J, K = IterKind.kIter_S, IterKind.kIter_I, IterKind.kIter_J, IterKind.kIter_K
    return (make_iter_fusion_index_map(blk, [S, I, J, K]), make_iter_fusion_index_map(a, [S, I, K]),
            make_iter_fusion_index_map(b, [S, J, K]), make_iter_fusion_index_map(c, [S, I, J]))


def find_matmul_block(sch):
    """The function's one reduction block if it is a matmul (`get_index_map`), else None."""
    try:
        root = get_root_block(sch)
    except ValueError:
        return None
    reduction_blocks = get_reduction_blocks(sch, sch.get_child_blocks(root))
    if reduction_blocks is None or not get_index_map(sch.get(reduction_blocks[0])):
        return None
    return reduction_blocks[0]


def to_canonical_form(sch, main) -> None:
    """Bring the matmul block ``main`` to ``C[S, I, J] += A[S, I, K] * B[S, J, K]``: each
    operand gets a copy indexed by the block's iterators, laid out in that order, and the
    block's iterators likewise (`get_index_map`)."""
    reindex_a = sch.reindex(main, ("read", 0))
    reindex_b = sch.reindex(main, ("read", 1))
    reindex_c = sch.reindex(main, ("write", 0))
    matmul_map, a_map, b_map, c_map = get_index_map(sch.get(main))
    sch.transform_layout(reindex_a, ("write", 0), a_map)
    sch.transform_layout(reindex_b, ("write", 0), b_map)
    sch.transform_layout(reindex_c, ("read", 0), c_map)
    sch.transform_block_layout(main, matmul_map)


def get_reduction_blocks(sch, blocks) -> Optional[list]:
    """The one reduction block, when every block is spatial or a (spatial + reduce) one."""

    def kinds(b):
        return {iv.kind for iv in sch.get(b).iter_vars}

    if not all(kinds(b) in ({"S", "R"}, {"S"}) for b in blocks):
        return None
    red = [b for b in blocks if kinds(b) == {"S", "R"}]
    return red if len(red) == 1 else None


# ----------------------------------------------------------------------------- the rule


def loops_of_last_index(sch, block, loops: list) -> list:
    """The loops of ``loops`` (a copy's own) that the last -- contiguous -- index of the global
    buffer the copy ``block`` reads or writes follows, in the order the index names them: one
    for a plain matrix, two for an im2col read (``X[n, c, h + kh, w + kw]`` follows the pixel
    and the kernel column)."""
    realize = sch.resolve_block(block)[1]
    b = realize.block
    realize_values = dict(zip((iv.var for iv in b.iter_vars), realize.iter_values))
    accesses = [r for r in list(b.reads) + list(b.writes) if r.buffer.scope in ("global", "")]
    if not accesses:
        return []
    last = accesses[0].region[-1].min
    loop_vars = {sch.get(lp).loop_var: lp for lp in loops}
    out = []
    for v in vars_in([last]):
        bound = realize_values.get(v)
        if bound is None:
            continue
        used = [loop_vars[x] for x in vars_in([bound]) if x in loop_vars]
        if len(used) == 1 and used[0] not in out:
            out.append(used[0])
    return out


def copy_along_contiguous_rows(sch, block, loops: list) -> tuple:
    """``loops`` (a copy's own, ``[..., rows, K]``) with the rows moved innermost where the
    global operand's contiguous index follows them, and which way that index runs: "rows" (a
    transposed operand), "rows and K" (a convolution's im2col read: pixels and kernel columns,
    whose zero padding differs from one element to the next) or "K" (loops left as they are)."""
    rows, k = loops[-2], loops[-1]
    follows = loops_of_last_index(sch, block, loops)
    if rows not in follows:
        return loops, "K"
    ordered = [lp for lp in loops if lp is not rows] + [rows]
    sch.reorder(*ordered)
    return ordered, "rows and K" if k in follows else "rows"


def loop_of_last_index(sch, block, loops: list):
    """The first of `loops_of_last_index`, if any."""
    found = loops_of_last_index(sch, block, loops)
    return found[0] if found else None


class Matmul(GPUScheduleRule):
    """Shared-memory tiles with register blocking (see the module docstring)."""

    @dataclasses.dataclass
    class Config:
        block_size_x: int = 8
        block_size_y: int = 8
        vthread_x: int = 1
        vthread_y: int = 1
        micro_size_x: int = 4
        micro_size_y: int = 4
        micro_size_k: int = 8
        vector_size: int = 1
        unroll: int = 256  # 0: no unrolling
        use_shared: bool = True
        storage_align: bool = False
        inner_x: bool = False

    def get_configs(self, target) -> "Matmul.Config":
        if target.kind.name in ("cuda", "rocm"):
            return Matmul.Config(block_size_x=8, block_size_y=16, vthread_x=1, vthread_y=1, micro_size_x=4,
                                 micro_size_y=4, micro_size_k=16, vector_size=2, unroll=256, use_shared=True,
                                 storage_align=True, inner_x=False)
        if target.kind.name == "opencl" and ("android" in str(target.host) or "adreno" in str(target.attrs)):
            return Matmul.Config(block_size_x=32, block_size_y=4, vthread_x=1, vthread_y=1, micro_size_x=8,
                                 micro_size_y=2, micro_size_k=16, vector_size=8, unroll=16, use_shared=False,
                                 storage_align=False, inner_x=True)
        return Matmul.Config()

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        config = self.get_configs(target)
        main = find_matmul_block(sch)
        if main is None:
            return None

        # Step 0: the canonical form C[S, I, J] += A[S, I, K] * B[S, J, K]
        to_canonical_form(sch, main)

        # (float16 matmuls whose extents fit its tiles are `MatmulTensorCore`'s, tried first
        # by the default schedules; the others take this generic path.)

        # Step 2: tile
        y_kernel = config.vthread_y * config.block_size_y * config.micro_size_y
        x_kernel = config.vthread_x * config.block_size_x * config.micro_size_x
        if config.inner_x:
            sch.pad_einsum(main, [1, y_kernel, x_kernel, config.micro_size_k])
            batch, y, x, k = sch.get_loops(main)
        else:
            sch.pad_einsum(main, [1, x_kernel, y_kernel, config.micro_size_k])
            batch, x, y, k = sch.get_loops(main)
        by, vy, ty, yi = sch.split(y, [None, config.vthread_y, config.block_size_y, config.micro_size_y])
        bx, vx, tx, xi = sch.split(x, [None, config.vthread_x, config.block_size_x, config.micro_size_x])
        ko, ki = sch.split(k, factors=[None, config.micro_size_k])
        order = [by, bx, vy, vx, ty, tx, ko, ki] + ([yi, xi] if config.inner_x else [xi, yi])
        sch.reorder(*order)
        by = sch.fuse(batch, by)
        sch.bind(bx, "blockIdx.x")
        sch.bind(by, "blockIdx.y")
        sch.bind(vy, "vthread.y")
        sch.bind(vx, "vthread.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        inner = config.micro_size_x if config.inner_x else config.micro_size_y
        if inner % config.vector_size == 0:
            _, v = sch.split(order[-1], [None, config.vector_size])
            sch.vectorize(v)
        if config.unroll > 0:
            sch.annotate(tx, ann_key="pragma_auto_unroll_max_step", ann_val=config.unroll)
            sch.annotate(tx, ann_key="pragma_unroll_explicit", ann_val=1)

        # the accumulator in registers, written back per thread
        l2g = sch.cache_write(main, 0, "local")
        sch.reverse_compute_at(l2g, tx, preserve_unit_loops=True)
        if config.micro_size_x % config.vector_size == 0:
            _, v = sch.split(sch.get_loops(l2g)[-1], [None, config.vector_size])
            sch.vectorize(v)

        if config.use_shared:

            def cooperative_fetch(index: int, vec_len: int):
                block = sch.cache_read(main, index, "shared")
                num_loops = len(sch.get_loops(block))
                sch.compute_at(block, ko, preserve_unit_loops=True)
                loops = sch.get_loops(block)[-num_loops:]
                auto_inline_producers(sch, block)      # the copy reads the global operand itself
                # The block's threads take consecutive elements (vectors of ``vec_len``) round
                # after round, so that a warp reads whole lines; TVM's DLight gives each thread
                # a run of its own, and a warp's lanes then read elements a run apart.
                loops, contiguous = copy_along_contiguous_rows(sch, block, loops)
                if contiguous != "K":
                    # Along the rows (a transposed operand, the pixels of a convolution's
                    # im2col read): consecutive threads take consecutive rows, one element
                    # each (the shared tile is [rows][K]: a vector along its rows would not be).
                    vec_len = 1
                _, ty_, tx_, vec = sch.split(sch.fuse(*loops),
                                             factors=[None, config.block_size_y, config.block_size_x, vec_len])
                if vec_len > 1:
                    sch.vectorize(vec)
                sch.bind(ty_, "threadIdx.y")
                sch.bind(tx_, "threadIdx.x")
                if config.storage_align:
                    sch.storage_align(block, 0, axis=1, factor=8, offset=vec_len)
                return block

            cooperative_fetch(0, config.vector_size)
            cooperative_fetch(1, config.vector_size)
        else:
            auto_inline_producers(sch, main)
        auto_inline_consumer_chain(sch, l2g)
        sch.decompose_reduction(main, ko)
        return sch


def spread_copy(sch, block, groups: int, lanes: int, vector: int) -> None:
    """The copy ``block`` spread over a thread block's threads: ``lanes`` on threadIdx.x,
    ``groups`` of them (warps, warpgroups) on threadIdx.y, ``vector`` elements per thread and
    instruction. Neighbouring threads take neighbouring elements of the global buffer
    (coalesced): the loop its last index follows goes innermost (B of ``A @ B`` is read across
    its rows into a [J, K] tile)."""
    loops = sch.get_loops(block)
    n = len(sch.get(block).iter_vars)
    own = loops[-n:]
    fastest = loop_of_last_index(sch, block, own)
    if fastest is not None and fastest is not own[-1]:
        own = [lp for lp in own if lp is not fastest] + [fastest]
        sch.reorder(*own)
    bind_copy_threads(sch, own, groups, lanes, vector)


def bind_copy_threads(sch, loops, groups: int, lanes: int, vector: int) -> None:
    """A copy's ``loops`` (ordered, the innermost along its contiguous elements) fused and
    split over ``groups`` x ``lanes`` threads (threadIdx.y, threadIdx.x), ``vector`` elements
    each per instruction (a vectorized loop)."""
    fused = sch.fuse(*loops)
    _, ty, tx, vec = sch.split(fused, [None, groups, lanes, vector])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    if vector > 1:
        sch.vectorize(vec)


def blockize_tile_op(sch, block, inner: int, annotation: str, kind: str, tiles: tuple = ()) -> None:
    """Make the innermost ``inner`` loops of ``block`` one block annotated ``annotation`` =
    ``kind``: the tile operation a tensorizing pass replaces. ``tiles``: the block's own loops
    first split into tiles of these extents (a copy between a fragment and memory covering
    several)."""
    loops = sch.get_loops(block)
    if tiles:
        parts = [sch.split(lp, [None, extent]) for lp, extent in zip(loops[-inner:], tiles)]
        sch.reorder(*[p[0] for p in parts], *[p[1] for p in parts])
        loops = sch.get_loops(block)
    sch.annotate(sch.blockize(loops[-inner]), annotation, kind)
