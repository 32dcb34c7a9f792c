"""Loops of symbolic extent (a sequence length ``n``): where a shifted tile starts, and
whether the nest being scheduled is the one run when ``n`` is small.

A register tile and a dot product tile such a loop with tiles of a static size, the last one
shifted back to end at ``n`` (`shifted_start`); the nest then runs under ``if n >= tile``, and
the nest as it was runs otherwise, scheduled with its symbolic extents taken as small
(`symbolic_extents_small`, set by `driver.small_nest`). Several rules read both, so they live
here."""

from __future__ import annotations

import contextvars

from tvmscript.ir import tir


def shifted_start(start, extent, factor: int):
    """Where a tile of ``factor`` iterations of a loop of symbolic ``extent`` starts: at
    ``start``, or, for the last tile, which would cross the extent, ``extent - factor``. The
    shifted tile overlaps the one before it and recomputes some of its outputs, each by the
    same operations in the same order (register tiles start from the init value), so it
    stores the same values again; no tile needs a predicate or a tail loop. The nest runs
    only when ``extent >= factor`` (`small_nest` otherwise)."""
    dtype = start.dtype
    if isinstance(extent, tir.IntImm):  # a constant extent its tile does not divide
        return tir.Min(dtype, start, tir.IntImm(dtype, extent.value - factor))
    return tir.Min(dtype, start, tir.Sub(dtype, extent, tir.IntImm(dtype, factor)))


# Scheduling `small_nest`: the symbolic extents there are below a tile's rows (a few rows,
# a decode step's one), so a panel packed for them would be reused a few times at most: the
# nest is planned as its constant-extent twin with that few rows is (a dense layer at batch 1
# becomes a dot product over the weight's rows, not a packed register tile).
symbolic_extents_small = contextvars.ContextVar("symbolic_extents_small", default=False)


# Scheduling the nest run when a symbolic row count is below `LOCALITY_PACK_ROWS`: a register
# tile reads its contiguous operand in place rather than through panels (`register_tile`).
no_locality_pack = contextvars.ContextVar("no_locality_pack", default=False)

# Rows of symbolic count from which a register tile copies its contiguous operand into panels
# (`register_tile._locality_pack`): the copy is the whole operand on every call, worth it over
# many rows (ViT's 197, a 300-token GPT: 2.5x faster with it), not over a decode step's few
# (7 tokens: a fifth faster without it).
LOCALITY_PACK_ROWS = 32
