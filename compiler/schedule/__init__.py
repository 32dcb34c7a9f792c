"""TensorIR schedules: `Schedule` and its primitives, one module per family.

Where each primitive lives: `loops` (get_loops, get_child_blocks, get_producers,
get_consumers, split, fuse, reorder, parallel, vectorize, unroll, bind, annotate, unannotate),
`compute_location` (compute_at, reverse_compute_at), `inline` (compute_inline,
reverse_compute_inline), `cache` (cache_read, cache_write, set_scope), `reduction`
(decompose_reduction, rfactor), `blockize`, `layout` (storage_align, transform_layout),
`reindex` (transform_block_layout, add_unit_loop, reindex, pad_einsum: what DLight needs),
`sampling` (sample_perfect_tile, sample_categorical, sample_compute_location: a tuner's
search space).
`state` holds the Schedule itself, `tree` the statement-tree plumbing, `trace` the trace;
`block_scope` what the primitives that move or merge blocks check (the scope's dependencies,
complete and reduction blocks), and `intervals` and `iter_domains` compute_at's arithmetic.
"""

from .errors import ScheduleError
from .state import BlockRV, LoopRV, Schedule
from .trace import Trace

# Importing a family module adds its primitives to `Schedule` (in this order).
from . import loops, compute_location, inline, cache, reduction, blockize, layout, reindex, sampling  # noqa: F401
from .sampling import ExprRV

__all__ = ["Schedule", "ScheduleError", "BlockRV", "LoopRV", "ExprRV", "Trace"]
