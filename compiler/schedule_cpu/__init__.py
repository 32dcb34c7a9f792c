"""A default CPU schedule: makes naive TensorIR loop nests fast without changing results.

`default_schedule(func)` first looks for attention (`attention`): a function that is exactly
the stage chain ``R.nn.attention`` legalizes to (scores, scale, bias, causal mask, softmax,
product with V; `attention_match`) becomes one flash-structured nest, an online softmax over
key blocks that never stores the score tensor (its sums are added in another order: within
float rounding of the unfused chain, not the same bits). Otherwise it inlines a function's
intermediate elementwise and injective stages into the stages that read them (`inline`: a fused GELU's six passes become one),
merges two loops that every access walks as one contiguous dimension (`merge_dims`: a
pointwise convolution's pixel rows and columns, through views of its buffers), runs the
stages of a row-wise op (softmax, layer norm) block of rows by block of rows in one parallel
loop (`row_fusion`: each block's statistics in buffers of its own, every stage reading its
rows while they are in L1; the rules below then schedule each stage's nest for the block; a
padded window of stride 2, channel by channel, its plane split in the stride's phases and
the window one vector loop of contiguous taps over it: `phase_window`),
then looks for loop nests of the simplest, most common form (`nest.match_nest`): serial loops,
perfectly nested, around one block that stores one buffer element per spatial point (an
elementwise op, or a reduction ``C[s] = C[s] <op> f(...)``, usually with ``T.init``, where
``<op>`` is ``+``, ``*``, ``max`` or ``min``), and gives each to the rules in order
(`driver.plan_nest`), as DLight gives a GPU function to its rules:

* `register_tile`: a reduction becomes a *register tile*, the micro-kernel of a matrix
  multiply, when a spatial loop can be vectorized: ``rows x vectors`` of outputs accumulated
  in registers over the whole reduction, the operand it reads along the vector loop packed
  into a panel when it is strided or reused, an elementwise stage after it computed in its
  final stores, the vector loop's tiles (or the first other spatial loop) in parallel;
* `dot_product`: without a loop to vectorize (a matrix-vector product whose matrix is in
  rows, a softmax's row maximum), a float sum along a loop every operand reads contiguously
  becomes a *dot product*: each output gets a vector of partial sums along that loop, added
  together at the end; it is the one schedule here that changes the order of additions (see
  below). Other such reductions (a maximum, integers, other extents) get a register tile of
  a few scalar accumulators along the innermost spatial loop: the dependent chain of each
  element is kept, several run side by side;
* `strided_window`: a pooling window read with a stride along the outputs (max pooling of
  stride 2 reads ``X[2x + rx]``) keeps a vector of outputs, the window's last loop unrolled
  inside the vector loop so that its taps are one interleaved load LLVM shuffles apart;
* `loop_tile`: other reductions (a type the register tile does not take, shapes it cannot
  split) and the elementwise nests keep the first schedule this package had: the loop of
  unit stride made innermost and vectorized, a reduction's output tiled in vector registers
  with the other operand's panel packed, T.init in a nest of its own, the outermost loop
  parallel; a transposing copy is tiled in two dimensions instead (`block_tiles`).

Loops of symbolic extent (a sequence length ``n``, `nest.NestLoop.shiftable`) are tiled as
loops of constant extent are: a register tile's vector loop and rows, and a dot product's
rows, take static tiles (`register_tile.SYMBOLIC_VECTORS` vectors, rows as for
`register_tile.SYMBOLIC_ROWS`, `dot_product.DOT_ROWS`), and the last tile, which would cross
``n``, is shifted back to end at it (`symbolic.shifted_start`): it recomputes some outputs of
the tile before it by the same operations and stores the same values again, so no tile needs
a predicate or a tail loop, and loads stay in bounds. The nest runs under ``if n >= tile``;
otherwise the nest as it was runs, scheduled as its static twin with a few rows is
(`driver.small_nest`: a decode step's dense layer becomes a dot product over the weight's
rows, in parallel over them, instead of packing a panel for one row). A tile that copies a
contiguous operand into panels only for cache locality does so along a symbolic row count
from `symbolic.LOCALITY_PACK_ROWS` rows; below, the same tiles read it in place. Register tiles tile a
symbolic loop only when they start from the init value (an overlapping tile starting from the
output would add its terms twice), and a dot product's shifted rows add up each total in a
register and store it once (two threads may compute the same output).

How: a rule plans each nest (a `plan.Plan`); the plan is then carried out with the schedule
primitives of `compiler.schedule`, as a DLight rule would be on a GPU (`apply`), and the
steps no primitive does are done directly on the result (`fixup`: the packed panels, a
register tile's accumulators, `accumulators`, and the guard that keeps the init from running
when a symbolic reduce loop is empty). A nest the primitives refuse is left as it was. The
dot product is built directly. Last, a parallel loop over the blocks of a packed weight larger
than L2 requests the next block while it computes the current one (`prefetch`: software
prefetch hints, which change no result).

A tuner may also make a 3x3 convolution of stride 1 Winograd's (`winograd`: six stages, a
batched matrix multiply the rules above schedule between hand-scheduled transforms); that
choice (`schedule_choices.ALGORITHM`) changes the rounding, so the default schedule never makes it.

Where the rest lives: `host` (the target CPU's vector width and registers, threads, cache
budgets), `analysis` (strides, loads, and other questions the rules ask of expressions), `affine_indices`
(indices dividing by a symbolic extent, made affine first), `packing` (panels),
`block_edits` (edits of blocks no primitive makes).

Why this is legal: in the nests accepted, every spatial point writes its own element (the
store's indices are exactly the spatial iterators), reads the stored buffer only at that
element and only as the reduction's accumulator, and the reduce loops keep their relative
order; so every element sees the same sequence of updates, in the same order, whatever the
order of the loops around them, and whether the running value sits in the output or in a
register. Inlining and folding an epilogue compute each element by the same expression.
Results are bit-for-bit the same, except in dot-product nests: there the terms of each float
sum are added in another order (lane ``l`` of the partial sums takes terms ``l, l + L, ...``,
then the lanes are added in order), whose rounding error has the same bound as the
sequential sum's, ``gamma_K * sum |terms|`` (tests/schedules/test_schedule_dot.py checks it against
float64). The sequential order would leave the vector units idle: a matrix-vector product with
its matrix in rows ran 4.5x slower. (Requiring an associative and commutative combiner is
stricter than bit-exactness needs; the dot product relies on it.) Nests
that do not match are left alone, as are loops a user already annotated (``T.parallel``,
``T.vectorized``, ...).
"""

from .driver import default_schedule
from .host import (BLOCK_TILE_BYTES, PACKED_PANEL_BYTES, PANEL_BYTES, PARALLEL_MIN_WORK, parallel_threads,
                   scheduling_for, target_cpu, tile_bytes, vector_bytes, vector_registers)

__all__ = ["default_schedule", "scheduling_for", "target_cpu", "tile_bytes", "vector_bytes", "vector_registers",
           "parallel_threads", "PANEL_BYTES", "PACKED_PANEL_BYTES", "PARALLEL_MIN_WORK", "BLOCK_TILE_BYTES"]
