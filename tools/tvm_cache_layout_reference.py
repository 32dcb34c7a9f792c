"""Golden files of the cache and layout primitives (cache_read, cache_write, set_scope,
storage_align, transform_layout) from real Apache TVM 0.27.

A developer tool, like ``tools/tvm_schedule_reference.py``: its cases complement the ones there
(which already holds the basic cache_read / cache_write / set_scope / storage_align /
transform_layout cases and the MLC GPU chapter's schedules) and are written into the same
``tests/golden/schedule/`` by ``tools/tvm_oracle.py`` (``<name>.input.tvms``, ``<name>.steps.py``
and TVM's ``<name>.tvms`` + ``<name>.trace.py``, or ``<name>.error.txt``).  They cover placement
inside loops, compact cache buffers, ``consumer_blocks``, scopes with tags (``shared.dyn``),
repeated alignment, and the layout maps and errors.  The cases whose schedule changes the
function's signature (a parameter's layout) go to ``tests/golden/schedule_params/``: the generic
golden test cannot feed the scheduled function the original's inputs, so
tests/schedules/test_schedule_layout.py checks them (re-laying the inputs out itself).

Run from the repository root with the TVM venv (see tools/tvm_oracle.py)::

    /work/tvmref/bin/python tools/tvm_cache_layout_reference.py          # every case
    /work/tvmref/bin/python tools/tvm_cache_layout_reference.py cl_cache_write
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import tvm_oracle as oracle  # noqa: E402
import tvm_schedule_reference  # noqa: E402,F401  (its cases share tests/golden/schedule/: no name twice)
from tvm_oracle import EW2D, MM_RELU, producer_consumer  # noqa: E402

CASES = oracle.Cases(oracle.Layout(oracle.GOLDEN / "schedule"))
PARAMS = oracle.Layout(oracle.GOLDEN / "schedule_params")
case, error_case, on_block, looped = CASES.add, CASES.error, CASES.on_block, CASES.looped


# Two readers of one input: B = A * 2, C = A + 1.
TWO_READERS = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 128):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + T.float32(1)
'''

# An intermediate B with two readers C and D.
FAN_OUT = producer_consumer(128, 128, "CD")

# B written on columns 32..96 only, read back by C, both under one loop i.
PARTIAL_IN_LOOP = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.sblock_alloc_buffer((128, 128), "float32")
    for i in range(128):
        for j in range(64):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 32] = A[vi, vj] * T.float32(2)
        for j in range(64):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj + 32] + T.float32(1)
'''

# The same at the root: the cache buffer is compact (64 columns).
PARTIAL_AT_ROOT = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.sblock_alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj + 32] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 64):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj + 32] + T.float32(1)
'''

# Two writers of B (rows 0..64 and 64..128).
TWO_WRITERS = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    B = T.sblock_alloc_buffer((128,), "float32")
    for i in range(64):
        with T.sblock("B0"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi]
    for i in range(64):
        with T.sblock("B1"):
            vi = T.axis.spatial(64, i)
            B[vi + 64] = A[vi + 64] * T.float32(2)
    for i in range(128):
        with T.sblock("C"):
            vi = T.axis.spatial(128, i)
            C[vi] = B[vi] + T.float32(1)
'''

EW_INT64 = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((T.int64(128), T.int64(64)), "float32"), B: T.Buffer((T.int64(128), T.int64(64)), "float32")):
    for i, j in T.grid(T.int64(128), T.int64(64)):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''

# A 256x256 matmul, the MLC GPU chapter's shared-memory blocking (no decompose_reduction).
MATMUL_256 = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((256, 256), "float32"), B: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 256), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(256, 256, 256):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

# A block nested in an outer block (what blockize makes): the cache lives in the outer block.
NESTED = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i0, j0 in T.grid(8, 8):
        with T.sblock("outer"):
            vi0, vj0 = T.axis.remap("SS", [i0, j0])
            T.reads(A[vi0 * 16:vi0 * 16 + 16, vj0 * 16:vj0 * 16 + 16])
            T.writes(B[vi0 * 16:vi0 * 16 + 16, vj0 * 16:vj0 * 16 + 16])
            for i1, j1 in T.grid(16, 16):
                with T.sblock("B"):
                    vi = T.axis.spatial(128, vi0 * 16 + i1)
                    vj = T.axis.spatial(128, vj0 * 16 + j1)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
'''

# B then C over 100 elements (splits by 8 need a predicate).
ODD_CHAIN = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((100,), "float32"), C: T.Buffer((100,), "float32")):
    B = T.sblock_alloc_buffer((100,))
    for i in range(100):
        with T.sblock("B"):
            vi = T.axis.spatial(100, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(100):
        with T.sblock("C"):
            vi = T.axis.spatial(100, i)
            C[vi] = B[vi] * T.float32(2)
'''

# ---------------------------------------------------------------------------- cache_read

case("cl_cache_read_consumer_blocks", TWO_READERS, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    sch.cache_read(b, 0, "shared", consumer_blocks=[b])
    sch.cache_read(c, 0, "shared.dyn")
''')

on_block("cl_cache_read_consumer_of_intermediate", FAN_OUT,
         'sch.cache_read(d, 0, "local", consumer_blocks=[d])', block="D")

on_block("cl_cache_read_all_readers", FAN_OUT, 'sch.cache_read(c, 0, "shared")', block="C")
on_block("cl_cache_read_in_loop", PARTIAL_IN_LOOP, 'sch.cache_read(c, 0, "local")', block="C")
on_block("cl_cache_read_compact", PARTIAL_AT_ROOT, 'sch.cache_read(c, 0, "local")', block="C")

case("cl_cache_read_by_name", TWO_READERS, '''
    sch.cache_read("C", "A", "local")
''')

on_block("cl_cache_read_then_cache_read_again", TWO_READERS, '''
    sch.cache_read(b, 0, "shared")
    sch.cache_read(b, 0, "local")
''')

on_block("cl_cache_read_nested_scope", NESTED, 'sch.cache_read(b, 0, "shared")')

case("cl_cache_read_outer_block", NESTED, '''
    b = sch.get_block("outer")
    sch.cache_read(b, 0, "shared")
''')

looped("cl_cache_read_split_compute_at", ODD_CHAIN, "i,", '''
    i0, i1 = sch.split(i, [None, 8])
    x = sch.cache_read(c, 0, "shared")
    sch.compute_at(x, i0)
''', block="C")

case("cl_cache_read_write_in_shared_loop", ODD_CHAIN, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    sch.compute_at(b, sch.get_loops(c)[0])
    sch.cache_read(c, 0, "local")
    sch.cache_write(b, 0, "shared")
''')

error_case("cl_err_cache_read_region_cover", '''
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
        B = T.sblock_alloc_buffer((128,))
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(128):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                C[vi] = B[vi] * T.float32(2)
''', '''
    c = sch.get_block("C")
    sch.cache_read(c, 0, "shared")
''')

on_block("cl_err_cache_read_bad_scope", TWO_READERS, 'sch.cache_read(b, 0, "bad.scope")', expect_error=True)
on_block("cl_err_cache_read_two_writers", TWO_WRITERS, 'sch.cache_read(c, 0, "local")', block="C", expect_error=True)

# ---------------------------------------------------------------------------- cache_write

on_block("cl_cache_write_in_loop", PARTIAL_IN_LOOP, 'sch.cache_write(b, 0, "local")')
on_block("cl_cache_write_compact", PARTIAL_AT_ROOT, 'sch.cache_write(b, 0, "local")')

on_block("cl_cache_write_consumer_blocks", FAN_OUT,
         'sch.cache_write(b, 0, "local", consumer_blocks=[sch.get_block("D")])')

case("cl_cache_write_all_consumers", FAN_OUT, '''
    b = sch.get_block("B")
    c = sch.get_block("C")
    d = sch.get_block("D")
    sch.cache_write(b, 0, "shared", consumer_blocks=[c, d])
''')

on_block("cl_cache_write_reduction_tiled", MATMUL_256, '''
    C_local = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(C_local, j0)
''', block="C")

on_block("cl_cache_write_nested_scope", NESTED, 'sch.cache_write(b, 0, "local")')

looped("cl_cache_write_split_predicate", ODD_CHAIN, "i,", '''
    i0, i1 = sch.split(i, [None, 8])
    sch.cache_write(b, 0, "local")
''')

on_block("cl_err_cache_write_bad_scope", FAN_OUT, 'sch.cache_write(b, 0, "mma.x")', expect_error=True)

error_case("cl_err_cache_write_two_writers", TWO_WRITERS, '''
    b = sch.get_block("B1")
    sch.cache_write(b, 0, "local")
''')

# ------------------------------------------------- the MLC GPU chapter's shared-memory matmul

case("cl_gpu_matmul_shared_cache_read", MATMUL_256, '''
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, 8, 8])
    j0, j1, j2 = sch.split(loop=j, factors=[None, 8, 8])
    k0, k1 = sch.split(loop=k, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    A_shared = sch.cache_read(block=block_C, read_buffer_index=0, storage_scope="shared")
    sch.compute_at(block=A_shared, loop=k0)
    B_shared = sch.cache_read(block=block_C, read_buffer_index=1, storage_scope="shared")
    sch.compute_at(block=B_shared, loop=k0)
''')

case("cl_gpu_matmul_shared_storage_align", MATMUL_256, '''
    block_C = sch.get_block("C")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1 = sch.split(loop=i, factors=[None, 16])
    j0, j1 = sch.split(loop=j, factors=[None, 16])
    k0, k1 = sch.split(loop=k, factors=[None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    A_shared = sch.cache_read(block_C, 0, "shared")
    sch.compute_at(A_shared, k0)
    sch.storage_align(A_shared, 0, axis=-2, factor=32, offset=1)
''')

# ---------------------------------------------------------------------------- set_scope

on_block("cl_set_scope_shared_dyn_by_name", FAN_OUT, 'sch.set_scope(b, "B", "shared.dyn")')

on_block("cl_set_scope_after_cache_read", TWO_READERS, '''
    A_shared = sch.cache_read(b, 0, "shared")
    sch.set_scope(A_shared, 0, "local")
''')

on_block("cl_err_set_scope_bad_scope", FAN_OUT, 'sch.set_scope(b, 0, "foo")', expect_error=True)
on_block("cl_err_set_scope_index", FAN_OUT, 'sch.set_scope(b, 1, "local")', expect_error=True)

# ---------------------------------------------------------------------------- storage_align

on_block("cl_storage_align_negative_axis", FAN_OUT, 'sch.storage_align(b, 0, axis=-1, factor=32, offset=1)')

on_block("cl_storage_align_replace", FAN_OUT, '''
    sch.storage_align(b, 0, axis=0, factor=32, offset=1)
    sch.storage_align(b, 0, axis=1, factor=16, offset=2)
    sch.storage_align(b, 0, axis=0, factor=8, offset=3)
''')

on_block("cl_err_storage_align_factor", FAN_OUT,
         'sch.storage_align(b, 0, axis=0, factor=0, offset=1)', expect_error=True)

on_block("cl_err_storage_align_param", FAN_OUT,
         'sch.storage_align(c, 0, axis=0, factor=32, offset=1)', block="C", expect_error=True)

on_block("cl_err_storage_align_negative_axis", FAN_OUT,
         'sch.storage_align(b, 0, axis=-3, factor=32, offset=1)', expect_error=True)

# ---------------------------------------------------------------------------- transform_layout

on_block("cl_transform_layout_flatten", FAN_OUT, 'sch.transform_layout(b, ("write", 0), lambda i, j: (i * 128 + j,))')

on_block("cl_transform_layout_tile_columns", FAN_OUT,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (j // 16, i, j % 16))')

on_block("cl_transform_layout_int64_param", EW_INT64,
         'sch.transform_layout(b, ("read", 0), lambda i, j: (i // 4, j, i % 4))', layout=PARAMS)

on_block("cl_transform_layout_write_param", EW_INT64,
         'sch.transform_layout(b, "B", lambda i, j: (j, i))', layout=PARAMS)

on_block("cl_transform_layout_cache_buffer", EW2D, '''
    A_shared = sch.cache_read(b, 0, "shared")
    i, j = sch.get_loops(b)
    sch.compute_at(A_shared, i)
    sch.transform_layout(A_shared, ("write", 0), lambda i, j: (j // 32, i, j % 32))
''')

case("cl_transform_layout_reduction_tiled", MM_RELU, '''
    y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(y)
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.reorder(i0, k, i1)
    sch.transform_layout(y, ("write", 0), lambda i, j: (i // 4, j, i % 4))
''')

on_block("cl_err_transform_layout_padding", FAN_OUT,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (i // 3, j, i % 3))', expect_error=True)

on_block("cl_err_transform_layout_not_independent", FAN_OUT,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (i + j, j))', expect_error=True)

on_block("cl_err_transform_layout_offset", FAN_OUT,
         'sch.transform_layout(b, ("write", 0), lambda i, j: (i // 4, j, i % 4 + 1))', expect_error=True)


if __name__ == "__main__":
    sys.exit(oracle.main(sys.argv[1:], CASES))
