"""`MultiLevelTiling`: tile a block with data reuse into nested levels of tiles (TVM's rule).

Why: a matmul-like block reads each input element many times (``A[i, k]`` once per ``j``);
cut into tiles, the data a tile reuses fits a cache level (on the CPU), or a thread block's
shared memory and a thread's registers (on a GPU), and the loop order says which. Which tile
sizes are fastest depends on the shapes and the machine, so they are sampled
(`sample_perfect_tile`): the rule writes the structure, the search picks the sizes.

The structure is a string of levels, ``"SSRSRS"`` on the CPU and ``"SSSRRSRS"`` on a GPU: each
spatial loop is split into as many factors as there are S levels, each reduce loop into as many
as there are R levels, and the tiles are reordered level by level (all the first S tiles, then
all the second, ...). Then, as TVM's sub-rules in order:

* on a GPU the first levels are fused and bound to ``tile_binds`` (``blockIdx.x``,
  ``vthread.x``, ``threadIdx.x``), and the block is annotated with the thread extents the GPU
  check accepts (`postproc.VerifyGPUCode`);
* a write cache (``reuse_write``): the block accumulates into a new buffer of the given scope
  ("global" on the CPU: a tile of C stays in cache while it is summed; "local" on a GPU: a
  thread's registers), copied out under the tile of level ``levels[i]``; "may" offers the
  schedule without it too (CPU: three design spaces), "must" only with it;
* read caches (``reuse_read``, GPU): each input is copied into "shared" memory under the first
  R level (the thread block's working set for one step of K), the copy's loops fused and
  annotated ``meta_schedule.cooperative_fetch`` with a sampled vector length;
  `postproc.RewriteCooperativeFetch` later splits the copy over the threads.

The block is annotated ``meta_schedule.tiling_structure`` so that the rules after (random
compute location, cross-thread reduction, auto-bind) leave it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from tvmscript.ir import tir

from ...schedule import BlockRV, Schedule
from .analysis import (COOPERATIVE_FETCH, THREAD_EXTENT_HIGH, THREAD_EXTENT_LOW, TILING_STRUCTURE, loop_extent,
                       needs_multi_level_tiling)
from .base import ScheduleRule, as_target, fork, is_gpu

__all__ = ["MultiLevelTiling", "ReuseConfig"]


@dataclass(frozen=True)
class ReuseConfig:
    """A cache the rule adds: ``req`` "no", "may" (with and without) or "must"; the tile
    ``levels`` (1-based) it is placed under; its storage ``scope``."""

    req: str = "no"
    levels: tuple = ()
    scope: str = "global"

    def __post_init__(self) -> None:
        if self.req not in ("no", "may", "must"):
            raise ValueError(f"ReuseConfig: req must be 'no', 'may' or 'must', not {self.req!r}")
        object.__setattr__(self, "levels", tuple(int(n) for n in self.levels))

    @classmethod
    def of(cls, value) -> "ReuseConfig":
        """None (no reuse), a dict with TVM's keys ``req``, ``levels``, ``scope``, or a config."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        return cls(**dict(value))


@dataclass
class _State:
    """One design space being built: its schedule, the block, and the tiles (loop handles,
    level by level) the later sub-rules place caches under."""

    sch: Schedule
    block: BlockRV
    tiles: list = field(default_factory=list)

    def copy(self) -> "_State":
        return _State(fork(self.sch), self.block, [list(t) for t in self.tiles])


class MultiLevelTiling(ScheduleRule):
    """TVM's MultiLevelTiling (see the module docstring); the arguments are TVM's."""

    def __init__(self, structure: str, tile_binds: Optional[Sequence[str]] = None, max_innermost_factor: int = 64,
                 vector_load_lens: Optional[Sequence[int]] = None, reuse_read=None, reuse_write=None) -> None:
        if not structure or set(structure) - {"S", "R"}:
            raise ValueError(f"MultiLevelTiling: structure must be made of S and R, not {structure!r}")
        self.structure = structure
        self.s_indices = [n for n, c in enumerate(structure) if c == "S"]
        self.r_indices = [n for n, c in enumerate(structure) if c == "R"]
        self.tile_binds = list(tile_binds or [])
        self.max_innermost_factor = max_innermost_factor
        self.vector_load_lens = list(vector_load_lens or [])
        self.reuse_read, self.reuse_write = ReuseConfig.of(reuse_read), ReuseConfig.of(reuse_write)
        if self.reuse_read.req == "may":
            raise ValueError("MultiLevelTiling: a read cache is 'no' or 'must', not 'may' (as in TVM)")
        self.thread_warp_size: Optional[int] = None
        self.max_threads_per_block: Optional[int] = None

    def initialize(self, target) -> None:
        target = as_target(target)
        if is_gpu(target):
            self.thread_warp_size = target.thread_warp_size or 32
            self.max_threads_per_block = target.max_threads_per_block or 1024

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if not needs_multi_level_tiling(sch, block) or \
                any(loop_extent(lp) is None for lp in _loops_of(sch, block)):
            return [sch]      # (tile sizes are exact factors of constant extents)
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        states = [_State(sch, block)]
        for sub_rule in (self._tile_loop_nest, self._add_write_reuse, self._add_read_reuse):
            states = [out for state in states for out in sub_rule(state)]
        return [s.sch for s in states]

    # ---- the sub-rules, each a state -> states

    def _tile_loop_nest(self, state: _State) -> list:
        """Split each loop into its levels (sampled factors), reorder level by level, bind the
        first levels to ``tile_binds``."""
        sch, block = state.sch, state.block
        loops = sch.get_loops(block)
        kinds = [iv.kind for iv in sch.get(block).iter_vars]
        tiles: list = [[] for _ in self.structure]
        spatial_product: Optional[int] = 1
        for loop, kind in zip(loops, kinds):
            if kind == "S":
                slots = self.s_indices
                extent = loop_extent(sch.get(loop))
                spatial_product = None if extent is None or spatial_product is None else spatial_product * extent
            elif kind == "R":
                slots = self.r_indices
            else:
                continue
            if len(slots) == 1:
                tiles[slots[0]].append(loop)
                continue
            factors = sch.sample_perfect_tile(loop, n=len(slots), max_innermost_factor=self.max_innermost_factor)
            for slot, part in zip(slots, sch.split(loop, factors=factors)):
                tiles[slot].append(part)
        sch.reorder(*[lp for tile in tiles for lp in tile])
        for n, thread in enumerate(self.tile_binds[:len(tiles)]):
            fused = sch.fuse(*tiles[n])
            sch.bind(fused, thread)
            tiles[n] = [fused]
        state.tiles = tiles
        if self.thread_warp_size is not None:
            # Enough spatial work for whole warps: the thread block must be at least one warp
            # (TVM's bounds, checked by VerifyGPUCode).
            big = spatial_product is not None and spatial_product > 2 * self.thread_warp_size
            sch.annotate(block, THREAD_EXTENT_LOW, self.thread_warp_size if big else 1)
            sch.annotate(block, THREAD_EXTENT_HIGH, self.max_threads_per_block)
        return [state]

    def _add_write_reuse(self, state: _State) -> list:
        config = self.reuse_write
        if config.req == "no":
            return [state]
        out = []
        if config.req == "may":
            consumers = state.sch.get_consumers(state.block)
            if len(consumers) == 1 and _is_write_cache(state.sch, consumers[0]):
                return [self._cache_at(state, consumers[0], level) for level in config.levels] + [state]
            out.append(state.copy())
        cache = state.sch.cache_write(state.block, 0, config.scope)
        return out + [self._cache_at(state, cache, level) for level in config.levels]

    @staticmethod
    def _cache_at(state: _State, cache: BlockRV, level: int) -> _State:
        new = state.copy()
        new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
        return new

    def _add_read_reuse(self, state: _State) -> list:
        config = self.reuse_read
        if config.req == "no":
            return [state]
        out = []
        for level in config.levels:
            new = state.copy()
            sch, block = new.sch, new.block
            blk = sch.get(block)
            written = {w.buffer for w in blk.writes}
            for n, region in enumerate(blk.reads):
                if region.buffer in written:
                    continue
                cache = sch.cache_read(block, n, config.scope, [block])
                sch.compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
                ndim = len(region.buffer.shape)
                sch.fuse(*sch.get_loops(cache)[-ndim:])
                self._annotate_cooperative_fetch(sch, cache)
            out.append(new)
        return out

    def _annotate_cooperative_fetch(self, sch: Schedule, cache: BlockRV) -> None:
        """A sampled vector length for the copy, among those the element type allows in one
        access of at most 16 bytes (TVM's filter)."""
        dtype = sch.get(cache).writes[0].buffer.dtype
        allowed = {"float32": lambda n: n <= 4, "float16": lambda n: (n == 1 or n % 2 == 0) and n <= 8,
                   "int8": lambda n: n <= 16}.get(dtype, lambda n: True)
        lens = [n for n in self.vector_load_lens if allowed(n)]
        if lens:
            length = sch.sample_categorical(lens, [1.0 / len(lens)] * len(lens))
            sch.annotate(cache, COOPERATIVE_FETCH, length)


def _is_write_cache(sch: Schedule, block: BlockRV) -> bool:
    """A block that only copies one buffer into another (TVM's IsWriteCache)."""
    blk = sch.get(block)
    body = blk.body
    return (len(blk.reads) == 1 and len(blk.writes) == 1 and isinstance(body, tir.BufferStore)
            and isinstance(body.value, tir.BufferLoad) and body.value.buffer is blk.reads[0].buffer)


def _loops_of(sch: Schedule, block: BlockRV) -> list:
    """The loops above the block (For nodes: an analysis, not a traced step)."""
    idx, realize = sch.resolve_block(block)
    return idx.loops_above(realize)
