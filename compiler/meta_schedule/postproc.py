"""Postprocessors: what turns a sampled candidate into a function the builds compile as it is
(TVM's ``meta_schedule.postproc``), and `finish`, which applies them.

The schedule rules leave intentions as annotations, because what they ask for is only
decidable on the finished loop nest: the root block's parallel / vector / unroll limits
(`RewriteParallelVectorizeUnroll` picks the loops), a shared-memory copy to split over the
threads (`RewriteCooperativeFetch`), reductions whose init must become a block of its own
before the loops that need it (`RewriteReductionBlock`), blocks left unbound on a GPU
(`RewriteUnboundBlock`). Others only judge: `DisallowDynamicLoop` (loops of unknown extent
cannot be tuned), `VerifyGPUCode` (thread counts, shared and local memory within the GPU's
limits). Each is a small class with ``apply(sch) -> bool``: False discards the candidate.

Postprocessors schedule with the public primitives, so their steps land in the trace after an
``enter_postproc`` marker (TVM's EnterPostproc): the whole trace replays to the identical
finished function (`replay_finished`), and `strip_postprocs` gives back the sampled part, which
is what the search mutates before finishing the mutant again.

Unrolling: the code generators honour neither TVM's ``pragma_auto_unroll_max_step`` nor
``pragma_unroll_explicit`` (TVM's UnrollLoop pass reads them; tvms has none), but both honour
loops of kind ``unroll`` (the CPU one unrolls them in the IR, or has LLVM unroll them fully;
the CUDA one prints ``#pragma unroll``). So `RewriteParallelVectorizeUnroll` writes TVM's two
annotations, for the record and for cost-model features, and also does UnrollLoop's job itself:
under the annotated loop, the innermost serial loops whose iterations times statements stay
within the limit are made ``unroll`` loops (`_UnrollPlanner`).
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import IRModule, tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_visitor import vars_in

from ..dlight.base import IS_SCHEDULED               # DLight's default GPU schedules leave it alone
from ..schedule import LoopRV, Schedule, ScheduleError
from ..schedule.common import blocks_under, const_value
from ..schedule.trace import Trace
from ..schedule.tree import stmt_children
from ..schedule_choices import CHOICES_ATTR
from ..schedule_cpu.driver import NO_DEFAULT_SCHEDULE   # the CPU build compiles the function as scheduled
from ..verify_gpu_code import gpu_code_errors
from .schedule_rules.analysis import (COOPERATIVE_FETCH, PARALLEL, THREAD_EXTENT_HIGH, THREAD_EXTENT_LOW,
                                      UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE, is_single_stmt, is_spatial,
                                      loop_extent, loop_iter_type, prim_func_names, root_block_name, thread_tag)
from .schedule_rules.auto_bind import bind_block_thread_idx
from .schedule_rules.base import as_target, is_gpu
from .space import as_module

__all__ = ["Postproc", "DisallowDynamicLoop", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock",
           "RewriteCooperativeFetch", "RewriteUnboundBlock", "VerifyGPUCode", "default_postprocs", "finish",
           "mark_scheduled", "replay_finished", "strip_postprocs", "NO_DEFAULT_SCHEDULE", "IS_SCHEDULED",
           "ENTER_POSTPROC"]

ENTER_POSTPROC = "enter_postproc"       # `compiler.schedule.sampling.enter_postproc`'s trace name
AUTO_UNROLL_MAX_STEP = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT_PRAGMA = "pragma_unroll_explicit"
AUTO_UNROLL_MAX_DEPTH = 8           # UnrollLoop's default: at most this many nested loops unrolled


class Postproc:
    """The interface of a postprocessor (see the module docstring)."""

    def initialize(self, target) -> None:
        """Read what the postprocessor needs of ``target`` (a `tvmscript.target.Target`)."""

    def apply(self, sch: Schedule) -> bool:
        raise NotImplementedError(f"{type(self).__name__}.apply")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _loops(stmt):
    """Every For below ``stmt`` (itself included), in program order."""
    if isinstance(stmt, tir.For):
        yield stmt
    for c in stmt_children(stmt):
        yield from _loops(c)


class DisallowDynamicLoop(Postproc):
    """Reject a function with a loop of non-constant extent: tile sizes are sampled as exact
    factors of constant extents, and such a candidate could not be measured for every size."""

    def apply(self, sch: Schedule) -> bool:
        return all(const_value(lp.extent) is not None
                   for name in prim_func_names(sch) for lp in _loops(sch.func(name).body))


# ----------------------------------------------------------------------------- parallel, vectorize, unroll


class RewriteParallelVectorizeUnroll(Postproc):
    """The root block's ``meta_schedule.parallel`` / ``vectorize`` / ``unroll_*`` annotations
    made loops, block by block (TVM's rule): the outer spatial loops fused into one parallel
    loop of at most the parallel extent, the inner spatial loops whose accesses stay contiguous
    fused into one vector loop of at most the vector extent, and the unroll limit applied under
    the outermost loop (see the module docstring)."""

    def apply(self, sch: Schedule) -> bool:
        for func_name in prim_func_names(sch):
            root_name = root_block_name(sch, func_name)
            if root_name is None:
                continue
            anns = sch.func(func_name).body.block.annotations
            limits = {k: int(anns[k]) for k in (PARALLEL, VECTORIZE, UNROLL_EXPLICIT, UNROLL_IMPLICIT) if k in anns}
            if not limits:
                continue
            root = sch.get_block(root_name, func_name)
            for key in limits:
                sch.unannotate(root, key)
            unroll_under = []
            for block in sch.get_child_blocks(root):
                loop = self._rewrite_block(sch, block, limits)
                if loop is not None and all(loop.var is not lp.var for lp in unroll_under):
                    unroll_under.append(loop)
            # Unrolled last, as TVM's UnrollLoop runs after the vector loops are made.
            for loop in unroll_under:
                _unroll(sch, loop, limits.get(UNROLL_EXPLICIT, limits.get(UNROLL_IMPLICIT, 0)))
        return True

    @staticmethod
    def _rewrite_block(sch: Schedule, block, limits: dict) -> Optional[LoopRV]:
        """Parallelize and vectorize the block's loops; the loop to unroll under, if any."""
        loops = sch.get_loops(block)
        if not loops:
            return None
        n_par, n_vec = _parallel_vectorize_plan(sch, block, loops, limits.get(PARALLEL, -1),
                                                limits.get(VECTORIZE, -1))
        n = len(loops)
        if n_par == n and n_vec == n:
            outer, inner = sch.split(sch.fuse(*loops), factors=[None, limits[VECTORIZE]])
            sch.parallel(outer)
            sch.vectorize(inner)
            loops = [outer] * (n - 1) + [inner]
        else:
            if n_par > 0:
                fused = sch.fuse(*loops[:n_par])
                sch.parallel(fused)
                loops = [fused] * n_par + loops[n_par:]
            if n_vec > 0:
                fused = sch.fuse(*loops[n - n_vec:])
                sch.vectorize(fused)
                loops = loops[:n - n_vec] + [fused] * n_vec
        explicit = UNROLL_EXPLICIT in limits
        max_step = limits.get(UNROLL_EXPLICIT, limits.get(UNROLL_IMPLICIT, 0))
        if max_step > 0 and not is_spatial(sch.get(block)):
            sch.annotate(loops[0], AUTO_UNROLL_MAX_STEP, max_step)
            sch.annotate(loops[0], UNROLL_EXPLICIT_PRAGMA, int(explicit))
            return loops[0]
        return None


def _stride(e, var) -> Optional[int]:
    """The coefficient of ``var`` in an index built of adds and constant multiples (TVM's
    StrideExtractor: the smallest coefficient among the terms; None where ``var`` is not found
    in such a form)."""
    if e is var:
        return 1
    if isinstance(e, tir.Mul):
        for c, x in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, tir.IntImm):
                s = _stride(x, var)
                return None if s is None else s * c.value
        return None
    if isinstance(e, tir.Add):
        found = [s for s in (_stride(e.a, var), _stride(e.b, var)) if s is not None]
        return min(found) if found else None
    return None


def _max_fusible(sch: Schedule, block, fors: list) -> int:
    """How many inner loops every access of the block reads or writes contiguously through (or
    does not use): the loops a vector loop may fuse (TVM's count in AdjustParallelVectorize)."""
    _, realize = sch.resolve_block(block)
    blk = realize.block
    binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    best = len(fors)
    for access in list(blk.reads) + list(blk.writes):
        indices = [simplify(substitute(r.min, binding)) for r in access.region]
        strides = []
        for lp in fors:
            stride, below = 0, 1
            for dim in range(len(access.region) - 1, -1, -1):
                coef = _stride(indices[dim], lp.loop_var) or 0
                if coef:
                    stride = coef * below
                    break
                size = const_value(access.buffer.shape[dim])
                if size is None:
                    stride = -1        # a symbolic dimension: not contiguous past it
                    break
                below *= size
            strides.append(stride)
        fusible, prev = 0, None
        for i in range(len(strides) - 1, -1, -1):
            if strides[i] == 0:
                fusible += 1
            elif prev is None:
                if strides[i] != 1 and fusible != 0:
                    break
                fusible, prev = fusible + 1, i
            elif strides[i] == strides[prev] * (loop_extent(fors[prev]) or -1):
                fusible, prev = fusible + 1, i
            else:
                break
        best = min(best, fusible)
    return best


def _rewritable(lp: tir.For, kind: str) -> bool:
    """A loop (of iterator type ``kind``, `loop_iter_type`) the rewrite may fuse into a parallel
    or vector loop: serial, unannotated, spatial, of constant extent, with one statement in its
    body."""
    return lp.kind == "serial" and not lp.annotations and kind == "S" and is_single_stmt(lp.body) \
        and loop_extent(lp) is not None


def _parallel_vectorize_plan(sch: Schedule, block, loops: list, max_parallel: int, max_vectorize: int) -> tuple:
    """``(outer loops to parallelize, inner loops to vectorize)``, -1 for none (TVM's
    AdjustParallelVectorize)."""
    if max_parallel == -1 and max_vectorize == -1:
        return -1, -1
    fors = [sch.get(lp) for lp in loops]
    kinds = [loop_iter_type(lp) for lp in fors]
    n = len(fors)
    max_fusible = _max_fusible(sch, block, fors)
    n_par = n_vec = -1
    if max_parallel != -1:
        n_par, product = 0, 1
        for lp, kind in zip(fors, kinds):
            # (A loop already parallel or bound, or annotated, ends the parallel part.)
            if kind != "S" or lp.kind != "serial" or lp.annotations or loop_extent(lp) is None:
                break
            n_par += 1
            product *= loop_extent(lp)
            if product > max_parallel or not is_single_stmt(lp.body):
                break
        n_par = -1 if product == 1 else n_par
    if max_vectorize != -1:
        n_vec, product = 0, 1
        for lp, kind in zip(reversed(fors), reversed(kinds)):
            if kind != "S" or n_vec >= max_fusible or not _rewritable(lp, kind):
                break
            if product * loop_extent(lp) > max_vectorize:
                break
            product *= loop_extent(lp)
            n_vec += 1
        n_vec = -1 if product == 1 else n_vec
    if n_par != -1 and n_vec != -1:
        if sum(map(_rewritable, fors, kinds)) == n and max_fusible == n:
            return n, n
        n_par = min(n_par, n - n_vec)
    return n_par, n_vec


class _UnrollPlanner:
    """Which loops TVM's UnrollLoop would unroll under a ``pragma_auto_unroll_max_step`` of
    ``max_step``: walking up from the statements, a serial loop of constant extent is unrolled
    when nothing below it stayed a loop and its iterations times the statements in its body are
    at most ``max_step`` (a vector loop counts its lanes, see `visit`)."""

    def __init__(self, max_step: int) -> None:
        self.max_step = max_step
        self.steps = self.unrolled_depth = self.normal_depth = 0
        self.marked: list = []

    def visit(self, s) -> None:
        if isinstance(s, tir.For):
            self.visit(s.body)
            if s.kind == "vectorized":
                # Its lanes count as steps: here a vector loop stays a loop that LLVM vectorizes
                # (TVM's are vector instructions before it unrolls), and every copy an unrolled
                # loop makes of it costs LLVM a loop to vectorize.
                self.steps *= loop_extent(s) or 1
                return
            extent = loop_extent(s)
            auto = (s.kind in ("serial", "unroll") and extent is not None and self.normal_depth == 0
                    and self.unrolled_depth <= AUTO_UNROLL_MAX_DEPTH and extent * self.steps <= self.max_step)
            if auto or s.kind == "unroll":
                self.steps *= extent if extent is not None else 1
                self.unrolled_depth += 1
                if s.kind == "serial":
                    self.marked.append(s.loop_var)
            else:
                self.normal_depth += 1
        elif isinstance(s, (tir.BufferStore, tir.Evaluate)):
            self.steps += 1
        elif isinstance(s, tir.SeqStmt) or (isinstance(s, tir.Block) and s.init is not None):
            for part in (s.seq if isinstance(s, tir.SeqStmt) else [s.init, s.body]):
                saved = (self.steps, self.unrolled_depth, self.normal_depth)
                self.steps = self.unrolled_depth = self.normal_depth = 0
                self.visit(part)
                self.steps += saved[0]
                self.unrolled_depth = max(self.unrolled_depth, saved[1])
                self.normal_depth = max(self.normal_depth, saved[2])
        else:
            for c in stmt_children(s):
                self.visit(c)


def _unroll(sch: Schedule, loop: LoopRV, max_step: int) -> None:
    """Make ``unroll`` loops of the loops TVM's UnrollLoop would unroll under ``loop``; the
    handles come from ``get_loops`` of a block under each, so the steps replay."""
    idx, top = sch.resolve_loop(loop)
    planner = _UnrollPlanner(max_step)
    planner.visit(top)
    todo = set(planner.marked)
    for realize in blocks_under(top):
        mine = [lp.loop_var for lp in idx.loops_above(realize) if lp.loop_var in todo]
        if not mine:
            continue
        for handle in sch.get_loops(sch.get_block(realize.block.name, loop.func_name)):
            if handle.var in todo:
                sch.unroll(handle)
                todo.discard(handle.var)
        if not todo:
            break


# ----------------------------------------------------------------------------- reductions


class RewriteReductionBlock(Postproc):
    """Each reduction block's init made a block of its own (``decompose_reduction``) above its
    first loop that is not spatial (TVM's rule): the code generators want a plain store, and
    the init then runs once per output, not as a branch in the innermost loop. A reduction
    whose reduce loops are bound to threads is left to the cross-thread lowering."""

    def apply(self, sch: Schedule) -> bool:
        for func_name in prim_func_names(sch):
            while True:
                pending = [r for r in _reduction_blocks(sch.func(func_name).body) if _decompose_point(sch, r, func_name)
                           is not None]
                if not pending:
                    break
                realize = pending[0]
                block = sch.get_block(realize.block.name, func_name)
                loops = sch.get_loops(block)
                sch.decompose_reduction(block, loops[_decompose_point(sch, realize, func_name)])
        return True


def _reduction_blocks(body) -> list:
    """Blocks with an init none of whose reduce iterators is bound to a thread-bound loop."""
    out: list = []

    def walk(s, bound: frozenset) -> None:
        if isinstance(s, tir.For) and s.kind == "thread_binding":
            bound = bound | {s.loop_var}
        if isinstance(s, tir.BlockRealize) and s.block.init is not None:
            reduce_values = [v for iv, v in zip(s.block.iter_vars, s.iter_values) if iv.kind == "R"]
            if not any(v in bound for v in vars_in(reduce_values)):
                out.append(s)
        for c in stmt_children(s):
            walk(c, bound)

    walk(body, frozenset())
    return out


def _decompose_point(sch: Schedule, realize, func_name: str) -> Optional[int]:
    """The index of the block's first loop that is not spatial, or None."""
    loops = sch.index(func_name).loops_above(realize)
    return next((n for n, lp in enumerate(loops) if loop_iter_type(lp) != "S"), None)


# ----------------------------------------------------------------------------- GPU


def _thread_extents_above(sch: Schedule, block) -> dict:
    """Thread tag -> extent of the loops bound to threads above the block."""
    idx, realize = sch.resolve_block(block)
    out = {}
    for a in idx.ancestors(realize):
        if isinstance(a, tir.For) and thread_tag(a):
            out.setdefault(thread_tag(a), loop_extent(a))
    return out


class RewriteCooperativeFetch(Postproc):
    """Each shared-memory copy annotated ``meta_schedule.cooperative_fetch`` split over the
    thread block's threads (TVM's rule): its fused loop split into (rest, threadIdx.y,
    threadIdx.x, vector) with the thread counts of the kernel it is in, so that every thread
    copies a part and consecutive threads copy consecutive elements (coalesced loads); the
    annotated vector length where it divides the copy, else one element at a time."""

    def apply(self, sch: Schedule) -> bool:
        for func_name in prim_func_names(sch):
            names = [r.block.name for r in blocks_under(sch.func(func_name).body)
                     if COOPERATIVE_FETCH in r.block.annotations]
            for name in names:
                block = sch.get_block(name, func_name)
                lanes = int(sch.get(block).annotations[COOPERATIVE_FETCH])
                threads = _thread_extents_above(sch, block)
                tx, ty = threads.get("threadIdx.x"), threads.get("threadIdx.y")
                sch.unannotate(block, COOPERATIVE_FETCH)
                if tx is None:
                    return False       # no threads to share the copy among: not a GPU schedule
                fused = sch.get_loops(block)[-1]
                extent = loop_extent(sch.get(fused))
                if extent is None:
                    continue
                lanes = lanes if lanes > 1 and extent % lanes == 0 else 1
                factors = [None] + ([ty] if ty is not None else []) + [tx] + ([lanes] if lanes > 1 else [])
                parts = list(sch.split(fused, factors=factors))   # (the trace keeps the returned list)
                if lanes > 1:
                    sch.vectorize(parts.pop())
                sch.bind(parts.pop(), "threadIdx.x")
                if ty is not None:
                    sch.bind(parts.pop(), "threadIdx.y")
        return True


class RewriteUnboundBlock(Postproc):
    """Blocks still outside any ``blockIdx`` x ``threadIdx`` nest bound to threads (TVM's
    rule; `schedule_rules.AutoBind` without the sampling): a GPU runs nothing else."""

    def __init__(self, max_threadblocks: int = 256) -> None:
        self.max_threadblocks = max_threadblocks
        self.max_threads_per_block = 1024

    def initialize(self, target) -> None:
        self.max_threads_per_block = as_target(target).max_threads_per_block or 1024

    def apply(self, sch: Schedule) -> bool:
        limit = self.max_threads_per_block
        for func_name in prim_func_names(sch):
            for name in _unbound_blocks(sch.func(func_name).body):
                bind_block_thread_idx(sch, sch.get_block(name, func_name), self.max_threadblocks, limit,
                                      lambda most: min(limit, most))
        return True


def _unbound_blocks(body) -> list:
    """The outermost blocks below the root not under both a blockIdx and a threadIdx loop."""
    out: list = []

    def walk(s, block_idx: bool, thread_idx: bool) -> None:
        if isinstance(s, tir.BlockRealize):
            out.append(s.block.name)
            return
        tag = thread_tag(s) if isinstance(s, tir.For) else None
        block_idx = block_idx or bool(tag and tag.startswith("blockIdx"))
        thread_idx = thread_idx or bool(tag and tag.startswith("threadIdx"))
        if block_idx and thread_idx:
            return
        for c in stmt_children(s):
            walk(c, block_idx, thread_idx)

    for c in stmt_children(body.block if isinstance(body, tir.BlockRealize) else body):
        walk(c, False, False)
    return out


class VerifyGPUCode(Postproc):
    """Reject a candidate that does not fit the GPU (`compiler.verify_gpu_code`: threads per
    block, shared and local memory, everything on threads), or whose tiled blocks run on fewer
    or more threads than `MultiLevelTiling` allowed them (its thread-extent annotations, as
    TVM's ThreadExtentChecker)."""

    def __init__(self) -> None:
        self.target = None

    def initialize(self, target) -> None:
        self.target = as_target(target)

    def apply(self, sch: Schedule) -> bool:
        mod = sch.mod
        for name in prim_func_names(sch):
            if gpu_code_errors(mod[name], self.target, name) or not _thread_extents_ok(mod[name].body):
                return False
        return True


def _thread_extents_ok(body) -> bool:
    def walk(s, threads: dict) -> bool:
        if isinstance(s, tir.For) and thread_tag(s) and thread_tag(s).startswith("threadIdx"):
            threads = {**threads, thread_tag(s): loop_extent(s) or 1}
        if isinstance(s, tir.Block):
            low, high = s.annotations.get(THREAD_EXTENT_LOW), s.annotations.get(THREAD_EXTENT_HIGH)
            if low is not None and high is not None:
                product = 1
                for n in threads.values():
                    product *= n
                if not int(low) <= product <= int(high):
                    return False
        return all(walk(c, threads) for c in stmt_children(s))

    return walk(body, {})


# ----------------------------------------------------------------------------- finishing


def default_postprocs(target) -> list:
    """TVM's default postprocessors for ``target``, in TVM's order (without RewriteLayout)."""
    if is_gpu(target):
        return [DisallowDynamicLoop(), RewriteCooperativeFetch(), RewriteUnboundBlock(max_threadblocks=256),
                RewriteParallelVectorizeUnroll(), RewriteReductionBlock(), VerifyGPUCode()]
    as_target(target)
    return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


def mark_scheduled(mod: IRModule) -> IRModule:
    """``mod`` with each PrimFunc marked `NO_DEFAULT_SCHEDULE` and `IS_SCHEDULED`: the builds
    compile it as it is instead of scheduling it again (`compiler.schedule_cpu.driver`, DLight),
    as `apply.apply_database` marks a tuned function."""
    out = mod.copy()
    for gv in list(out.functions):
        name = getattr(gv, "name_hint", gv)
        f = out[name]
        if isinstance(f, tir.PrimFunc):
            attrs = {**f.attrs, NO_DEFAULT_SCHEDULE: True, IS_SCHEDULED: True}
            out[name] = tir.PrimFunc(f.params, f.buffer_map, f.body, f.ret_type, attrs, f.private, f.span, f.comments)
    return out


def finish(sch: Schedule, target, postprocs=None) -> Optional[IRModule]:
    """Apply the postprocessors (default: `default_postprocs`) to the candidate ``sch``, in
    place, after an ``enter_postproc`` marker in its trace; the finished module, marked
    `NO_DEFAULT_SCHEDULE`, or None where one of them rejects the candidate (or a step of one
    is illegal). A candidate of the default schedule's picks is finished as it is: the build
    schedules it (`schedule_rules.DefaultScheduleChoices`)."""
    target = as_target(target)
    postprocs = default_postprocs(target) if postprocs is None else list(postprocs)
    for p in postprocs:
        p.initialize(target)
    sch.enter_postproc()
    if _default_scheduled(sch.mod):
        return sch.mod   # the build applies the default schedule with the candidate's picks
    for p in postprocs:
        try:
            if not p.apply(sch):
                return None
        except ScheduleError:
            return None
    return mark_scheduled(sch.mod)


def _default_scheduled(mod: IRModule) -> bool:
    """Whether every PrimFunc of ``mod`` carries the default schedule's picks
    (`schedule_rules.DefaultScheduleChoices`): a candidate the build schedules."""
    funcs = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)]
    return bool(funcs) and all(CHOICES_ATTR in (f.attrs or {}) for f in funcs)


def strip_postprocs(trace: Trace) -> Trace:
    """The trace up to its ``enter_postproc`` marker: the sampled design, without the steps the
    postprocessors added (what a mutation changes before the candidate is finished again)."""
    out = trace.copy()
    at = next((n for n, inst in enumerate(out.insts) if inst.kind == ENTER_POSTPROC), None)
    if at is not None:
        out.insts = out.insts[:at]
    return out


def replay_finished(func_or_mod, trace) -> IRModule:
    """The finished module a finished candidate's trace (a `Trace` or its JSON) replays to on
    ``func_or_mod``, marked as `finish` marks it. Raises what the replay raises."""
    if not isinstance(trace, Trace):
        trace = Trace.from_json(trace)
    sch = Schedule(as_module(func_or_mod))
    trace.apply_to_schedule(sch)
    return sch.mod if _default_scheduled(sch.mod) else mark_scheduled(sch.mod)
