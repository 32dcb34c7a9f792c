"""``tvms.tir.analysis.verify_gpu_code``: hand-written GPU kernels that fit and kernels that
break each rule — work not bound to threads (an epilogue run by every thread of a block is
fine), too many threads, a thread tag with two extents, too many virtual threads, too much
shared or local memory (counted at the tile a kernel touches, as TVM compacts root-level cache
buffers), vector width, kernel count — with both signatures (a target: a list of messages;
TVM's dict of constraints: a bool)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tvmscript as tvms
from tvmscript.target import Target
from test_gpu_schedule_on_cpu import (FUSED_ELEMENTWISE, GEMV_RFACTOR, ROW_SUM, SOFTMAX,
                                      TILED_MATMUL, TILED_MATMUL_COMPACT, VTHREAD)

HEADER = "# from tvm.script import tir as T\n"


def parse(text: str):
    return tvms.parse(HEADER + text)


def errors(text: str, target="cuda") -> list:
    return tvms.tir.analysis.gpu_code_errors(parse(text), target)


def one_error(text: str, target="cuda") -> str:
    errs = errors(text, target)
    assert len(errs) == 1, errs
    return errs[0]


# ----------------------------------------------------------------------------- good kernels

# An elementwise kernel: 1024 threads per block, the most CUDA allows.
GOOD_ELEMENTWISE = '''
@T.prim_func
def add_one(A: T.Buffer((4096,), "float32"), B: T.Buffer((4096,), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(1024, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(4096, bx * 1024 + tx)
                B[vi] = A[vi] + T.float32(1)
'''

# A tiled matmul: 16x16 threads, two 16x16 float32 shared tiles (2 KiB), a local accumulator,
# the tiles fetched cooperatively by loops bound again to threadIdx.y/x with the same extents.
GOOD_MATMUL = '''
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for by in T.thread_binding(8, thread="blockIdx.y"):
        for bx in T.thread_binding(8, thread="blockIdx.x"):
            for ty in T.thread_binding(16, thread="threadIdx.y"):
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    with T.block("tile"):
                        acc = T.alloc_buffer((1,), scope="local")
                        A_sh = T.alloc_buffer((16, 16), scope="shared")
                        B_sh = T.alloc_buffer((16, 16), scope="shared")
                        acc[0] = T.float32(0)
                        for k0 in range(8):
                            for f_y in T.thread_binding(16, thread="threadIdx.y"):
                                for f_x in T.thread_binding(16, thread="threadIdx.x"):
                                    with T.block("fetch"):
                                        A_sh[f_y, f_x] = A[by * 16 + f_y, k0 * 16 + f_x]
                                        B_sh[f_y, f_x] = B[k0 * 16 + f_y, bx * 16 + f_x]
                            T.tvm_storage_sync("shared")
                            for k1 in range(16):
                                with T.block("update"):
                                    acc[0] = acc[0] + A_sh[ty, k1] * B_sh[k1, tx]
                            T.tvm_storage_sync("shared")
                        C[by * 16 + ty, bx * 16 + tx] = acc[0]
'''


@pytest.mark.parametrize("text", [GOOD_ELEMENTWISE, GOOD_MATMUL])
def test_good_kernels_pass(text):
    func = parse(text)
    assert tvms.tir.analysis.gpu_code_errors(func, Target("cuda")) == []
    assert tvms.tir.analysis.verify_gpu_code(func, Target("cuda")) is True
    assert tvms.tir.analysis.gpu_code_errors(func, "cuda") == []
    assert tvms.tir.analysis.verify_gpu_code(func) is True  # no target given: "cuda"
    assert tvms.tir.analysis.verify_gpu_code(func, {"max_threads_per_block": 1024,
                                                    "max_shared_memory_per_block": 49152}) is True


def test_the_scheduled_kernels_of_the_cpu_tests_pass():
    for text in (FUSED_ELEMENTWISE, TILED_MATMUL, TILED_MATMUL_COMPACT, ROW_SUM, GEMV_RFACTOR, SOFTMAX, VTHREAD):
        assert tvms.tir.analysis.gpu_code_errors(tvms.parse(text), "cuda") == []


# ----------------------------------------------------------------------------- (a) bound to threads

NO_THREADS = '''
@T.prim_func
def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)
'''


def test_a_kernel_without_threads_is_not_bound():
    assert one_error(NO_THREADS) == ("add_one: block 'B' is not bound to threads: it runs inside no "
                                     "blockIdx.* and no threadIdx.* loop")
    assert tvms.tir.analysis.verify_gpu_code(parse(NO_THREADS), {"max_threads_per_block": 1024}) is False


def test_blocks_only_or_threads_only_are_not_bound():
    # A kernel that binds no threadIdx at all: TVM would launch it with one thread per block.
    blocks_only = GOOD_ELEMENTWISE.replace('thread="threadIdx.x"', 'thread="blockIdx.y"')
    assert one_error(blocks_only) == ("add_one: block 'B' is not bound to threads: it runs inside no threadIdx.* "
                                      "loop, and its kernel binds none (TVM would launch it with one thread per "
                                      "block)")
    threads_only = GOOD_ELEMENTWISE.replace('thread="blockIdx.x"', 'thread="threadIdx.y"')
    # (4 x 1024 threads is too many as well.)
    assert "add_one: block 'B' is not bound to threads: it runs inside no blockIdx.* loop" in errors(threads_only)


def test_only_the_unbound_block_is_reported():
    # The init of a reduction left outside the kernel: only it is reported.
    text = '''
@T.prim_func
def row_sum(A: T.Buffer((16, 256), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B_init"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.float32(0)
    for bx in T.thread_binding(16, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [bx, tx])
                B[vi] = B[vi] + A[vi, vk]
'''
    assert one_error(text) == ("row_sum: block 'B_init' is not bound to threads: it runs inside no "
                               "blockIdx.* and no threadIdx.* loop")


def test_a_store_outside_blocks_is_named_by_its_buffer():
    text = '''
@T.prim_func
def fill(B: T.Buffer((64,), "float32")):
    for i in range(64):
        B[i] = T.float32(0)
'''
    assert one_error(text) == ("fill: the store to 'B' is not bound to threads: it runs inside no "
                               "blockIdx.* and no threadIdx.* loop")


# A reduction as TVM's Reduction rule writes it: the epilogue 'M' inside the kernel (under
# blockIdx.x) but after the threadIdx.x loop, so every thread of the block runs it.
EPILOGUE = '''
@T.prim_func
def mean(A: T.Buffer((64, 256), "float32"), M: T.Buffer((64,), "float32")):
    S_local = T.alloc_buffer((64,), scope="local")
    for bx in T.thread_binding(64, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [bx, tx])
                with T.init():
                    S_local[vi] = T.float32(0)
                S_local[vi] = S_local[vi] + A[vi, vk]
        with T.block("M"):
            vi = T.axis.spatial(64, bx)
            M[vi] = S_local[vi] / T.float32(256)
'''


def test_an_epilogue_outside_the_thread_loops_runs_on_every_thread():
    assert errors(EPILOGUE) == []
    assert tvms.tir.analysis.verify_gpu_code(parse(EPILOGUE), {"max_threads_per_block": 256}) is True


def test_an_epilogue_outside_the_kernel_is_not_bound():
    outside = EPILOGUE.replace('''        with T.block("M"):
            vi = T.axis.spatial(64, bx)''', '''    for i in range(64):
        with T.block("M"):
            vi = T.axis.spatial(64, i)''')
    assert outside != EPILOGUE
    assert one_error(outside) == ("mean: block 'M' is not bound to threads: it runs inside no blockIdx.* and no "
                                  "threadIdx.* loop")


# ----------------------------------------------------------------------------- (b) thread extents


def test_too_many_threads_per_block():
    text = '''
@T.prim_func
def big(A: T.Buffer((64, 32), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for ty in T.thread_binding(32, thread="threadIdx.y"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("A"):
                    vi, vj = T.axis.remap("SS", [tx, ty])
                    A[vi, vj] = T.float32(0)
'''
    assert one_error(text) == ("big: kernel at loop 'bx' (blockIdx.x) with block 'A': 2048 threads per block "
                               "(threadIdx.x 64 x threadIdx.y 32) exceed max_threads_per_block = 1024")
    assert tvms.tir.analysis.verify_gpu_code(parse(text), {"max_threads_per_block": 2048}) is True


def test_the_target_sets_the_thread_limit():
    assert errors(GOOD_ELEMENTWISE, "cuda") == []
    msg = one_error(GOOD_ELEMENTWISE, "cuda -max_threads_per_block=512")
    assert "1024 threads per block (threadIdx.x 1024) exceed max_threads_per_block = 512" in msg
    assert "exceed max_threads_per_block = 256" in one_error(GOOD_ELEMENTWISE, Target("rocm"))


def test_thread_extent_per_dimension():
    text = GOOD_ELEMENTWISE.replace('T.thread_binding(1024, thread="threadIdx.x")', 'T.thread_binding(128, thread="threadIdx.z")')
    text = text.replace("bx * 1024 + tx", "bx * 128 + tx").replace("(4, thread", "(32, thread")
    assert one_error(text) == ("add_one: kernel at loop 'bx' (blockIdx.x) with block 'B': threadIdx.z has extent "
                               "128, more than max_thread_z = 64")
    assert tvms.tir.analysis.verify_gpu_code(parse(GOOD_ELEMENTWISE), {"max_thread_x": 512}) is False
    assert tvms.tir.analysis.verify_gpu_code(parse(GOOD_ELEMENTWISE), {"max_thread_x": 1024}) is True


def test_a_thread_tag_bound_twice_with_different_extents():
    bad = GOOD_MATMUL.replace('for f_x in T.thread_binding(16, thread="threadIdx.x")',
                              'for f_x in T.thread_binding(8, thread="threadIdx.x")')
    msg = one_error(bad)
    assert msg == ("matmul: kernel at loop 'by' (blockIdx.y) with blocks 'tile', 'fetch', 'update': threadIdx.x is "
                   "bound with different extents (16 at loop 'tx', 8 at loop 'f_x'); a thread tag has one extent "
                   "per kernel")


def test_threads_are_counted_per_kernel():
    # Two kernels of 1024 threads each: fine, each launch has its own block size.
    text = GOOD_ELEMENTWISE + '''
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(1024, thread="threadIdx.x"):
            with T.block("A"):
                vi = T.axis.spatial(4096, bx * 1024 + tx)
                A[vi] = B[vi]
'''
    func = parse(text)
    assert tvms.tir.analysis.gpu_code_errors(func, "cuda") == []
    assert tvms.tir.analysis.verify_gpu_code(func, {"max_kernels": 2}) is True
    assert tvms.tir.analysis.gpu_code_errors(func, {"max_kernels": 1}) == [
        "add_one: 2 kernel launches exceed max_kernels = 1"]


def test_too_many_virtual_threads():
    text = '''
@T.prim_func
def vt(A: T.Buffer((4, 4, 32), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for vy in T.thread_binding(4, thread="vthread.y"):
            for vx in T.thread_binding(4, thread="vthread.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("A"):
                        vi, vj, vk = T.axis.remap("SSS", [vy, vx, tx])
                        A[vi, vj, vk] = T.float32(0)
'''
    assert one_error(text) == ("vt: kernel at loop 'bx' (blockIdx.x) with block 'A': 16 virtual threads exceed "
                               "max_vthread = 8")
    assert tvms.tir.analysis.verify_gpu_code(parse(text), {"max_vthread": 16}) is True


# ----------------------------------------------------------------------------- (c) memory

BIG_SHARED = '''
@T.prim_func
def tiles(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    A_sh = T.alloc_buffer((128, 64), scope="shared")
    B_sh = T.alloc_buffer((128, 64), scope="shared.dyn")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for j in range(64):
                with T.block("load"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    A_sh[vi, vj] = A[vi, bx * 64 + vj]
                    B_sh[vi, vj] = A_sh[vi, vj] * T.float32(2)
            for j in range(64):
                with T.block("store"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    B[vi, bx * 64 + vj] = B_sh[vi, vj] + A_sh[vi, vj]
'''


def test_too_much_shared_memory():
    # Two 32 KiB tiles declared at the root and used by the kernel: 64 KiB > 48 KiB.
    assert one_error(BIG_SHARED) == (
        "tiles: kernel at loop 'bx' (blockIdx.x) with blocks 'load', 'store': 65536 bytes of shared memory "
        "('A_sh' 32768, 'B_sh' 32768) exceed max_shared_memory_per_block = 49152")
    assert errors(BIG_SHARED, "cuda -max_shared_memory_per_block=65536") == []
    assert tvms.tir.analysis.verify_gpu_code(parse(BIG_SHARED), {"max_shared_memory_per_block": 65536}) is True
    # A local or global scratch buffer is not shared memory.
    assert errors(BIG_SHARED.replace('scope="shared.dyn"', 'scope="global"')) == []


def dlight_matmul(kt: int) -> str:
    """A 1024x1024 matmul as DLight's Matmul rule leaves it: the cache buffers A_shared,
    B_shared, C_local declared at the root with the whole matrices' shape (4 MiB each); per
    thread block a 64x64 tile of C from a 64 x ``kt`` tile of A and a ``kt`` x 64 tile of B
    fetched cooperatively by the 16x16 threads, per thread a 4x4 tile of C_local."""
    idx = f"f0 * {kt * 4} + f1 * {kt // 4} + f2"
    return f'''
@T.prim_func
def matmul(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"), C: T.Buffer((1024, 1024), "float32")):
    A_shared = T.alloc_buffer((1024, 1024), scope="shared")
    B_shared = T.alloc_buffer((1024, 1024), scope="shared")
    C_local = T.alloc_buffer((1024, 1024), scope="local")
    for by in T.thread_binding(16, thread="blockIdx.y"):
        for bx in T.thread_binding(16, thread="blockIdx.x"):
            for ty in T.thread_binding(16, thread="threadIdx.y"):
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    for i_init, j_init in T.grid(4, 4):
                        with T.block("C_init"):
                            vi = T.axis.spatial(1024, by * 64 + ty * 4 + i_init)
                            vj = T.axis.spatial(1024, bx * 64 + tx * 4 + j_init)
                            C_local[vi, vj] = T.float32(0)
                    for k0 in range({1024 // kt}):
                        for f0 in T.thread_binding(16, thread="threadIdx.y"):
                            for f1 in T.thread_binding(16, thread="threadIdx.x"):
                                for f2 in range({kt // 4}):
                                    with T.block("A_shared"):
                                        v0 = T.axis.spatial(1024, by * 64 + ({idx}) // {kt})
                                        v1 = T.axis.spatial(1024, k0 * {kt} + ({idx}) % {kt})
                                        A_shared[v0, v1] = A[v0, v1]
                        for f0 in T.thread_binding(16, thread="threadIdx.y"):
                            for f1 in T.thread_binding(16, thread="threadIdx.x"):
                                for f2 in range({kt // 4}):
                                    with T.block("B_shared"):
                                        v0 = T.axis.spatial(1024, k0 * {kt} + ({idx}) // 64)
                                        v1 = T.axis.spatial(1024, bx * 64 + ({idx}) % 64)
                                        B_shared[v0, v1] = B[v0, v1]
                        for k1, i, j in T.grid({kt}, 4, 4):
                            with T.block("C_update"):
                                vi = T.axis.spatial(1024, by * 64 + ty * 4 + i)
                                vj = T.axis.spatial(1024, bx * 64 + tx * 4 + j)
                                vk = T.axis.reduce(1024, k0 * {kt} + k1)
                                C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                    for i, j in T.grid(4, 4):
                        with T.block("C_local"):
                            vi = T.axis.spatial(1024, by * 64 + ty * 4 + i)
                            vj = T.axis.spatial(1024, bx * 64 + tx * 4 + j)
                            C[vi, vj] = C_local[vi, vj]
'''


def test_root_cache_buffers_count_the_tile_a_kernel_touches():
    # Declared: 4 MiB of shared memory per buffer and 4 MiB of local memory; touched: a 64x16
    # and a 16x64 tile of shared memory (8 KiB) per block, 4x4 floats of C_local per thread,
    # as TVM's CompactBufferAllocation shrinks them.
    func = parse(dlight_matmul(16))
    assert tvms.tir.analysis.gpu_code_errors(func, "cuda") == []
    assert tvms.tir.analysis.verify_gpu_code(func, {"max_shared_memory_per_block": 8192,
                                                    "max_local_memory_per_block": 64}) is True
    assert tvms.tir.analysis.gpu_code_errors(func, {"max_shared_memory_per_block": 8191,
                                                    "max_local_memory_per_block": 63}) == [
        "matmul: kernel at loop 'by' (blockIdx.y) with blocks 'C_init', 'A_shared', 'B_shared', 'C_update', ...: "
        "8192 bytes of shared memory ('A_shared' 4096 (its 64x16 tile), 'B_shared' 4096 (its 16x64 tile)) "
        "exceed max_shared_memory_per_block = 8191",
        "matmul: kernel at loop 'by' (blockIdx.y) with blocks 'C_init', 'A_shared', 'B_shared', 'C_update', ...: "
        "64 bytes of local memory per thread ('C_local' 64 (its 4x4 tile)) exceed max_local_memory_per_block = 63"]


def test_root_cache_buffers_whose_tiles_do_not_fit():
    # A k tile of 256: 64x256 and 256x64 floats, 128 KiB of shared memory per block.
    assert one_error(dlight_matmul(256)) == (
        "matmul: kernel at loop 'by' (blockIdx.y) with blocks 'C_init', 'A_shared', 'B_shared', 'C_update', ...: "
        "131072 bytes of shared memory ('A_shared' 65536 (its 64x256 tile), 'B_shared' 65536 (its 256x64 tile)) "
        "exceed max_shared_memory_per_block = 49152")


def test_a_buffer_is_allocated_where_all_its_accesses_meet():
    # A_sh is only touched in the first j loop: TVM allocates it there, one column (128 floats)
    # per iteration; B_sh is written in one j loop and read in the other: the whole 128x64.
    one_loop = BIG_SHARED.replace(" + A_sh[vi, vj]\n", "\n")
    assert one_loop != BIG_SHARED
    assert errors(one_loop) == []
    assert errors(one_loop, {"max_shared_memory_per_block": 32768}) == [
        "tiles: kernel at loop 'bx' (blockIdx.x) with blocks 'load', 'store': 33280 bytes of shared memory "
        "('A_sh' 512 (its 128x1 tile), 'B_sh' 32768) exceed max_shared_memory_per_block = 32768"]


def test_shared_memory_is_counted_per_kernel():
    # The same tiles used by two kernels, one tile each: 32 KiB per kernel, fine.
    text = '''
@T.prim_func
def two(A: T.Buffer((128, 64), "float32"), B: T.Buffer((128, 64), "float32")):
    A_sh = T.alloc_buffer((128, 64), scope="shared")
    B_sh = T.alloc_buffer((128, 64), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for j in range(64):
                with T.block("a"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    A_sh[vi, vj] = A[vi, vj]
            for j in range(64):
                with T.block("a2"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    A[vi, vj] = A_sh[vi, vj] * T.float32(2)
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for j in range(64):
                with T.block("b"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    B_sh[vi, vj] = B[vi, vj]
            for j in range(64):
                with T.block("b2"):
                    vi, vj = T.axis.remap("SS", [tx, j])
                    B[vi, vj] = B_sh[vi, vj] * T.float32(2)
'''
    assert errors(text) == []
    assert not tvms.tir.analysis.verify_gpu_code(parse(text), {"max_shared_memory_per_block": 32767})


def test_shared_memory_with_a_symbolic_size():
    text = '''
@T.prim_func
def dyn(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("k"):
                sh = T.alloc_buffer((n,), scope="shared")
                for i in range(n):
                    sh[i] = A[i]
                A[tx] = sh[tx]
'''
    assert "shared buffer 'sh' has a size that is not a constant" in one_error(text)
    assert errors(text.replace('scope="shared"', 'scope="shared.dyn"')) == []
    # A symbolic buffer of which the block touches a constant tile (32 floats) is that tile.
    fixed = text.replace("for i in range(n):\n                    sh[i] = A[i]", "sh[tx] = A[tx]")
    assert fixed != text and errors(fixed) == []


def test_absurd_local_memory_per_thread():
    text = '''
@T.prim_func
def hog(A: T.Buffer((32,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("k"):
                scratch = T.alloc_buffer((262144,), scope="local")
                for i in range(262144):
                    scratch[i] = A[tx]
                A[tx] = scratch[7]
'''
    assert one_error(text) == ("hog: kernel at loop 'bx' (blockIdx.x) with block 'k': 1048576 bytes of local memory "
                               "per thread ('scratch' 1048576) exceed max_local_memory_per_block = 524288")
    assert tvms.tir.analysis.verify_gpu_code(parse(text), {"max_local_memory_per_block": 1 << 20}) is True


def test_vector_bytes():
    text = '''
@T.prim_func
def vec(A: T.Buffer((256,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for v in T.vectorized(8):
                with T.block("A"):
                    vi = T.axis.spatial(256, tx * 8 + v)
                    A[vi] = T.float32(0)
'''
    assert tvms.tir.analysis.verify_gpu_code(parse(text), {"max_vector_bytes": 32}) is True
    assert tvms.tir.analysis.verify_gpu_code(parse(text), {"max_vector_bytes": 16}) is False
    (msg,) = tvms.tir.analysis.gpu_code_errors(parse(text), {"max_vector_bytes": 16})
    assert "block 'A': the vectorized loop 'v' accesses 'A' 32 bytes at a time, more than max_vector_bytes = 16" in msg


# ----------------------------------------------------------------------------- the API


def test_targets_and_constraints_are_checked():
    func = parse(GOOD_ELEMENTWISE)
    with pytest.raises(ValueError, match="unknown constraint 'max_threads'"):
        tvms.tir.analysis.verify_gpu_code(func, {"max_threads": 1024})
    with pytest.raises(ValueError, match="must be an integer"):
        tvms.tir.analysis.verify_gpu_code(func, {"max_threads_per_block": "many"})
    with pytest.raises(ValueError, match="needs a GPU target, not 'llvm'"):
        tvms.tir.analysis.verify_gpu_code(func, "llvm")
    with pytest.raises(TypeError, match="expects a tir.PrimFunc"):
        tvms.tir.analysis.verify_gpu_code("add_one", "cuda")
    # A target dict (it has a "kind") is a target, not constraints: the list comes back.
    assert tvms.tir.analysis.verify_gpu_code(func, {"kind": "cuda", "max_threads_per_block": 512}) != []


def test_the_current_target_is_the_default():
    func = parse(GOOD_ELEMENTWISE)
    with Target("cuda -max_threads_per_block=256"):
        assert "exceed max_threads_per_block = 256" in tvms.tir.analysis.gpu_code_errors(func)[0]
    assert tvms.tir.analysis.verify_gpu_code(func) is True


def test_a_module_is_checked_function_by_function():
    mod = tvms.parse(HEADER + "# from tvm.script import ir as I\n\n@I.ir_module\nclass Module:\n"
                     + "\n".join("    " + line for line in (GOOD_ELEMENTWISE + NO_THREADS.replace("def add_one", "def plain")).splitlines()))
    assert tvms.tir.analysis.gpu_code_errors(mod, "cuda") == [
        "plain: block 'B' is not bound to threads: it runs inside no blockIdx.* and no threadIdx.* loop"]


def test_analysis_is_served_lazily():
    code = ("import sys, tvmscript as tvms, tvmscript.tir as tir\n"
            "assert 'tvmscript.compiler.verify_gpu_code' not in sys.modules\n"
            "assert 'tvmscript.target' not in sys.modules\n"
            "from tvmscript.tir import analysis\n"
            "assert analysis is tvms.tir.analysis and callable(analysis.verify_gpu_code)\n"
            "import tvmscript.tir.analysis as again\n"
            "assert again is analysis\n"
            "assert 'numpy' not in sys.modules and 'llvmlite' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
