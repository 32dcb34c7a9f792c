"""`GPUScheduleRule`: a rule that applies only to GPU targets."""

from __future__ import annotations

from tvmscript.ir import tir

from ...schedule import ScheduleError
from ..base import ScheduleRule

# The multiprocessors of an H100 or H200, the GPUs the matmul rules size their grids for.
SMS = 132
# Thread blocks enough to give each of them one: a product with fewer tiles of a rule's size
# leaves SMs idle, and is better served by a rule with smaller tiles (or K split).
FILL_BLOCKS = 128


class GPUScheduleRule(ScheduleRule):
    """A schedule rule for GPU targets (those whose keys include ``"gpu"``); on another target
    `apply` returns None."""

    def is_target_available(self, target) -> bool:
        return super().is_target_available(target) and "gpu" in target.keys


def accumulate_in_register(sch, block, thread_loop, threads_cover_outputs: bool) -> None:
    """Make reduction ``block``, one output element per thread of ``thread_loop``, accumulate
    in a register ("local") stored to its buffer once after its reduce loops, rather than in
    the buffer at every step (a pooling window of 9: 9 reads and 10 writes of global memory
    per output). Only where each thread's output is one element the block indexes by its own
    spatial variables (``y[b, c, h, w]``, not ``y[b, g * 3 + c, h, w]``), and the threads
    cover the outputs exactly (``threads_cover_outputs``: no predicate on the block, which the
    store placed under the thread would not keep): its region is then that element. Left as
    it is otherwise."""
    if not threads_cover_outputs:
        return
    b = sch.get(block)
    store = b.body
    spatial = {iv.var for iv in b.iter_vars if iv.kind == "S"}
    if len(b.writes) != 1 or not isinstance(store, tir.BufferStore) or not all(
            isinstance(index, tir.IntImm) or index in spatial for index in store.indices):
        return
    try:
        local = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(local, thread_loop, preserve_unit_loops=True)
    except ScheduleError:
        pass
