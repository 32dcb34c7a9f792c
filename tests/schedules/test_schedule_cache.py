"""cache_read, cache_write and set_scope (compiler/schedule/cache.py).

* every golden case of these primitives (tests/golden/schedule/, from TVM 0.27 by
  tools/tvm_schedule_reference.py and tools/tvm_cache_layout_reference.py) prints as TVM's
  result, computes what the input computes on the CPU, and traces as TVM traces;
* every call TVM rejects is rejected with a ScheduleError that leaves the schedule unchanged;
* the MLC GPU chapter's shared-memory matmul (cache_write + reverse_compute_at, cache_read +
  compute_at) computes the same on the CPU;
* what differs from TVM (a repeated cache block name) is pinned down.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.ir import structural_equal

from support.schedule_cases import cases_named, schedule_case
from support.schedule_check import (assert_same_result, check_golden_case, check_golden_rejected, failing, module,
                                    producer_consumer)

_PREFIXES = ("cache_read", "cache_write", "set_scope", "mlc_mm_relu_cache_write", "cl_cache", "cl_set_scope",
             "cl_gpu_matmul_shared_cache_read", "err_cache", "err_set_scope", "cl_err_cache", "cl_err_set_scope")
CASES = cases_named(_PREFIXES) + [schedule_case("gpu_window_sum_shared")]
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error]


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_matches_tvm(case):
    check_golden_case(case)


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_rejected_like_tvm(case):
    check_golden_rejected(case)


# ----------------------------------------------------------------------------- inputs

EW = '''
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + T.float32(1)
'''

PRODUCER_CONSUMER = producer_consumer(64)

# ----------------------------------------------------------------------------- cache_read


def test_cache_read_returns_the_copy_block_and_allocates_in_scope():
    sch = Schedule(module(EW))
    blk = sch.cache_read(sch.get_block("B"), 0, "shared")
    assert blk.name == "A_shared"
    copy = sch.get(blk)
    assert [iv.var.name for iv in copy.iter_vars] == ["v0", "v1"]
    assert [lp.loop_var.name for lp in map(sch.get, sch.get_loops(blk))] == ["ax0", "ax1"]
    text = sch.mod.script()
    assert 'A_shared = T.alloc_buffer((128, 128), scope="shared")' in text
    # Without consumer_blocks every reader reads the copy (C too), as in TVM.
    assert "C[vi, vj] = A_shared[vi, vj] + T.float32(1.0)" in text
    assert_same_result(module(EW), sch.mod)


@pytest.mark.parametrize("scope", ["global", "shared", "shared.dyn", "local", "warp", "wmma.matrix_a", ""])
def test_cache_scopes_run_on_cpu(scope):
    sch = Schedule(module(EW))
    sch.cache_read(sch.get_block("B"), 0, scope)
    sch.cache_write(sch.get_block("C"), 0, scope)
    assert_same_result(module(EW), sch.mod)


def test_cache_read_same_buffer_twice_gets_unique_names():
    """TVM names both copies' blocks ``A_shared`` (and prints the second buffer as
    ``A_shared_1``); block names are handles here, so the second block is ``A_shared_1``."""
    sch = Schedule(module(EW))
    b, c = sch.get_block("B"), sch.get_block("C")
    first = sch.cache_read(b, 0, "shared", consumer_blocks=[b])
    second = sch.cache_read(c, 0, "shared", consumer_blocks=[c])
    assert (first.name, second.name) == ("A_shared", "A_shared_1")
    text = sch.mod.script()
    assert "B[vi, vj] = A_shared[vi, vj] * T.float32(2.0)" in text
    assert "C[vi, vj] = A_shared_1[vi, vj] + T.float32(1.0)" in text
    assert_same_result(module(EW), sch.mod)
    assert sch.trace.as_python()[-1] == (
        'b3 = sch.cache_read(block=b1, read_buffer_index=0, storage_scope="shared", consumer_blocks=[b1])')


def test_cache_read_by_name_and_buffer_object():
    sch = Schedule(module(EW))
    a = sch.mod["main"].buffer_map[sch.mod["main"].params[0]]
    sch.cache_read("B", a, "local", consumer_blocks=["B"])
    text = sch.mod.script()
    assert "B[vi, vj] = A_local[vi, vj]" in text and "C[vi, vj] = A[vi, vj]" in text
    with pytest.raises(ScheduleError):
        sch.cache_read("B", "nonexistent", "local")


def test_cache_read_compact_cache_shifts_indices():
    src = '''
@T.prim_func
def main(A: T.Buffer((128,), "float32"), C: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((128,))
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi + 16] = A[vi] * T.float32(2)
    for i in range(64):
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = B[vi + 16] + T.float32(1)
'''
    sch = Schedule(module(src))
    sch.cache_read(sch.get_block("C"), 0, "local")
    text = sch.mod.script()
    assert 'B_local = T.alloc_buffer((64,), scope="local")' in text
    assert "B_local[v0] = B[16 + v0]" in text
    assert "C[vi] = B_local[vi] + T.float32(1.0)" in text
    assert_same_result(module(src), sch.mod)


def test_cache_read_failures_leave_the_schedule_unchanged():
    sch = Schedule(module(EW))
    b = sch.get_block("B")
    assert "invalid" in failing(sch, lambda: sch.cache_read(b, 0, "foo"))
    assert "[0, 1)" in failing(sch, lambda: sch.cache_read(b, 1, "shared"))
    assert "[0, 1)" in failing(sch, lambda: sch.cache_read(b, -1, "shared"))
    failing(sch, lambda: sch.cache_read(b, "B", "shared"))  # B is written, not read
    root = sch.get_block("root")
    failing(sch, lambda: sch.cache_read(root, 0, "shared"))


def test_cache_read_with_stale_block_handle():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    sch.compute_inline(b)
    failing(sch, lambda: sch.cache_read(b, 0, "shared"))


# ----------------------------------------------------------------------------- cache_write


def test_cache_write_copies_back_after_the_writer():
    sch = Schedule(module(PRODUCER_CONSUMER))
    blk = sch.cache_write(sch.get_block("B"), 0, "local")
    assert blk.name == "B_local"
    names = [r.name for r in sch.get_child_blocks(sch.get_block("root"))]
    assert names == ["B", "B_local", "C"]
    text = sch.mod.script()
    assert "B_local[vi, vj] = A[vi, vj] * T.float32(2.0)" in text and "B[v0, v1] = B_local[v0, v1]" in text
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)


def test_cache_write_consumer_reads_the_cache_directly():
    sch = Schedule(module(PRODUCER_CONSUMER))
    sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=["C"])
    names = [r.name for r in sch.get_child_blocks(sch.get_block("root"))]
    assert names == ["B", "C", "B_local"]  # no other reader: the copy-back goes last
    assert "C[vi, vj] = B_local[vi, vj] + T.float32(1.0)" in sch.mod.script()
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)


def test_cache_write_failures_leave_the_schedule_unchanged():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    assert "invalid" in failing(sch, lambda: sch.cache_write(b, 0, "GLOBAL"))
    assert "[0, 1)" in failing(sch, lambda: sch.cache_write(b, 2, "local"))
    failing(sch, lambda: sch.cache_write(b, 0, "local", consumer_blocks=["nope"]))


# ----------------------------------------------------------------------------- the MLC GPU chapter


MATMUL = '''
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def _blocking_with_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k, decompose=True):
    """The MLC course's ``blocking_with_shared`` (GPU acceleration chapter), verbatim but for
    the decompose_reduction switch."""
    def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
        read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
        sch.compute_at(block=read_cache, loop=read_loc)
        inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
        inner = sch.fuse(inner0, inner1)
        _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
        sch.vectorize(vec)
        sch.bind(tx, "threadIdx.x")

    block_C = sch.get_block("C", "main")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    if decompose:
        sch.decompose_reduction(block_C, k0)
    return sch


def test_mlc_shared_memory_matmul_on_cpu():
    sch = _blocking_with_shared(Schedule(module(MATMUL)), 4, 4, 8, 8, 8, decompose=False)
    text = sch.mod.script()
    assert 'A_shared = T.alloc_buffer((128, 128), scope="shared")' in text
    assert 'C_local = T.alloc_buffer((128, 128), scope="local")' in text
    # The copies sit under k_0, each fetched cooperatively by the 64 threads of a block.
    k0 = next(lp for lp in map(sch.get, sch.get_loops(sch.get_block("C"))) if lp.loop_var.name == "k_0")
    assert [r.block.name for r in tvms.compiler.schedule.tree.child_block_realizes(k0)][:2] == ["A_shared", "B_shared"]
    assert_same_result(module(MATMUL), sch.mod)


def test_mlc_shared_memory_matmul_decomposed_on_cpu():
    sch = _blocking_with_shared(Schedule(module(MATMUL)), 4, 4, 8, 8, 8)
    assert_same_result(module(MATMUL), sch.mod)


# ----------------------------------------------------------------------------- set_scope


def test_set_scope_renames_and_moves_the_buffer():
    sch = Schedule(module(PRODUCER_CONSUMER))
    sch.set_scope(sch.get_block("B"), 0, "shared")
    text = sch.mod.script()
    assert 'B_shared = T.alloc_buffer((64, 64), scope="shared")' in text
    assert "C[vi, vj] = B_shared[vi, vj] + T.float32(1.0)" in text
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)
    before = sch.mod
    sch.set_scope(sch.get_block("B"), 0, "shared")  # already there: nothing to do
    assert structural_equal(sch.mod, before)


def test_set_scope_failures_leave_the_schedule_unchanged():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b, c = sch.get_block("B"), sch.get_block("C")
    assert "not allocated by a block" in failing(sch, lambda: sch.set_scope(c, 0, "shared"))
    assert "invalid" in failing(sch, lambda: sch.set_scope(b, 0, "fast"))
    assert "[0, 1)" in failing(sch, lambda: sch.set_scope(b, 3, "local"))
