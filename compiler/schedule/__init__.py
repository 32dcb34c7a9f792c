"""TensorIR schedules: `Schedule` and its primitives, one module per family.

Where each primitive lives: `loops` (get_loops, get_child_blocks, get_producers,
get_consumers, split, fuse, reorder, parallel, vectorize, unroll, bind, annotate, unannotate),
`compute_location` (compute_at, reverse_compute_at), `inline` (compute_inline,
reverse_compute_inline), `cache` (cache_read, cache_write, set_scope), `reduction`
(decompose_reduction, rfactor), `blockize`, `layout` (storage_align, transform_layout),
`reindex` (transform_block_layout, add_unit_loop, reindex, pad_einsum: what DLight needs).
`state` holds the Schedule itself, `tree` the statement-tree plumbing, `trace` the trace.
"""

import importlib as _importlib

from .errors import ScheduleError
from .state import BlockRV, LoopRV, Schedule
from .trace import Trace

for _family in ("loops", "compute_location", "inline", "cache", "reduction", "blockize", "layout", "reindex"):
    try:
        _importlib.import_module(f"{__name__}.{_family}")
    except ModuleNotFoundError as _e:  # a family not written yet
        if _e.name != f"{__name__}.{_family}":
            raise

__all__ = ["Schedule", "ScheduleError", "BlockRV", "LoopRV", "Trace"]
