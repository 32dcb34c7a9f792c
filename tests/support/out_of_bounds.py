"""The out-of-bounds reproducers of the bounds-safety issue, shared by the CPU's tests
(tests/compiler/test_bounds_check.py) and the GPU's (tests/cuda/test_cuda_bounds_check.py)."""

COPY = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range({extent}):
        {stmt}
'''

# The reproducers: a wild write 4 MB past B, one 400 GB past it (a segfault), a read
# of the heap after A, and a loop twice as long as the buffers. (statement, loop extent, what
# the run-time error says, what `tvms check` says)
REPRODUCERS = [
    ("B[i + 1000000] = A[i]", 4, "write to B[i + 1000000]", "indices 1000000 to 1000003 reach outside axis 0 of B",
     "the index takes the values 1000000 to 1000003"),
    ("B[i + 100000000000] = A[i]", 4, "write to B[i + 100000000000]", "indices 100000000000 to 100000000003",
     "the index takes the values 100000000000 to 100000000003"),
    ("B[i] = A[i + 64]", 4, "read of A[i + 64]", "indices 64 to 67 reach outside axis 0 of A",
     "the index takes the values 64 to 67"),
    ("B[i] = A[i]", 8, "of ", "indices 0 to 7 reach outside axis 0 of", "the index takes the values 0 to 7"),
]

# A loop over a symbolic size, ``{extent}`` iterations (``n + 1``: one too many).
SYMBOLIC = '''# from tvm.script import tir as T
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range({extent}):
        B[i] = A[i] * T.float32(2)
'''


def on_gpu(text: str) -> str:
    """A kernel above with its loop bound to GPU threads (the statements stay on their lines)."""
    return text.replace("for i in range({extent}):", 'for i in T.thread_binding({extent}, thread="threadIdx.x"):')


GPU_COPY, GPU_SYMBOLIC = on_gpu(COPY), on_gpu(SYMBOLIC)
