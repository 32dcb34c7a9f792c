"""Checks of the CUDA backend that need no GPU: the default GPU schedules, CUDA C and NVRTC.

`assert_compiles_for_cuda(mod)` schedules every prim_func of ``mod`` with the default GPU
schedules, prints it as CUDA C and compiles that with NVRTC for each architecture of
`ARCHS` (an A100's and an H100's), as CI does for every op and every sample.
"""

from __future__ import annotations

from tvmscript import tir
from tvmscript.compiler.build_cuda import build_cuda

ARCHS = ("sm_80", "sm_90")


# A two-layer MLP at batch 1: a launch-bound Relax function (CUDA graph tests).
SMALL_MLP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 32), "float32"), w1: R.Tensor((32, 16), "float32"), b1: R.Tensor((16,), "float32"),
             w2: R.Tensor((16, 8), "float32")) -> R.Tensor((1, 8), "float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            out = R.matmul(h, w2)
            R.output(out)
        return out
'''


def square_matmul_src(n: int, dtype: str) -> str:
    """``mm(A, B, C)``: C = A @ B for n x n matrices of ``dtype``, unscheduled (the default GPU
    schedules' matmul; benchmarks/cuda.py times it, tests/cuda count and estimate it)."""
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def mm(A: T.Buffer(({n}, {n}), "{dtype}"), B: T.Buffer(({n}, {n}), "{dtype}"), C: T.Buffer(({n}, {n}), "{dtype}")):
        T.func_attr({{"tir.noalias": True}})
        for i, j, k in T.grid({n}, {n}, {n}):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.{dtype}(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def matmul_src(m: int, n: int, k: int, acc: str = "float32", b_transposed: bool = False, dtype: str = "float16",
               epilogue: bool = False) -> str:
    """``mm``: C = A @ B (or A @ B.T) of ``dtype`` operands accumulated in ``acc`` (cast to it
    when the two differ); ``epilogue``: then D = relu(C + bias), which the matmul schedules
    inline into the write-back of the accumulators."""
    b_shape, b_load = ((n, k), "B[vj, vk]") if b_transposed else ((k, n), "B[vk, vj]")
    a_load = "A[vi, vk]"
    if dtype != acc:
        a_load, b_load = f'T.Cast("{acc}", {a_load})', f'T.Cast("{acc}", {b_load})'
    tail = f"""
        for i, j in T.grid({m}, {n}):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(C[vi, vj] + bias[vj], T.{acc}(0))""" if epilogue else ""
    extra = f', bias: T.Buffer(({n},), "{acc}"), D: T.Buffer(({m}, {n}), "{acc}")' if epilogue else ""
    alloc = f'C = T.alloc_buffer(({m}, {n}), "{acc}")' if epilogue else ""
    c_param = "" if epilogue else f', C: T.Buffer(({m}, {n}), "{acc}")'
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def mm(A: T.Buffer(({m}, {k}), "{dtype}"), B: T.Buffer({b_shape}, "{dtype}"){c_param}{extra}):
        T.func_attr({{"tir.noalias": True}})
        {alloc}
        for i, j, k in T.grid({m}, {n}, {k}):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.{acc}(0)
                C[vi, vj] = C[vi, vj] + {a_load} * {b_load}{tail}
"""


def relax_prim_funcs(params: str, body: str, fuse: bool = False) -> dict:
    """The prim_funcs of a Relax ``main(params)`` whose dataflow ``body`` (lines at 12 spaces)
    binds ``y``, legalized, and with ``fuse`` fused as the default pipeline fuses them."""
    import tvmscript as tvms
    from tvmscript import relax

    mod = tvms.parse(f"""
@I.ir_module
class Module:
    @R.function
    def main({params}):
        with R.dataflow():
{body}
            R.output(y)
        return y
""")
    passes = [relax.transform.LegalizeOps()]
    if fuse:
        passes += [relax.transform.AnnotateTIROpPattern(), relax.transform.FuseOps(), relax.transform.FuseTIR()]
    for p in passes:
        mod = p(mod)
    return prim_funcs_of(mod)


def scheduled_by(rule, mod, target: str = "cuda") -> dict:
    """The prim_funcs of ``mod`` (an IRModule, or TVMScript text) scheduled by DLight ``rule``
    alone under ``target`` (a function the rule does not take is left unscheduled): a rule's
    own schedule, where the default list would pick another."""
    import tvmscript as tvms
    from tvmscript.compiler import dlight as dl
    from tvmscript.target import Target

    with Target(target):
        return prim_funcs_of(dl.ApplyDefaultSchedule(rule)(tvms.parse(mod) if isinstance(mod, str) else mod))


def prim_funcs_of(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def assert_compiles_for_cuda(mod, archs=ARCHS) -> dict:
    """The `CUDACode` per architecture; fails (a BuildError) when a kernel does not compile."""
    funcs = prim_funcs_of(mod)
    out = {}
    for arch in archs:
        code = build_cuda(funcs, f"cuda -arch={arch}")
        assert code.cubin and code.cubin[:4] == b"\x7fELF", f"NVRTC gave no CUBIN for {arch}"
        assert set(code.functions) == set(funcs)
        out[arch] = code
    return out


def batch_matmul_src(batch: int, m: int, n: int, k: int, dtype: str = "float16", acc: str = "float32",
                     b_transposed: bool = True) -> str:
    """``bmm``: C[b] = A[b] @ B[b].T (or A[b] @ B[b]) of ``dtype`` operands accumulated in ``acc``."""
    b_shape, b_load = ((batch, n, k), "B[vb, vj, vk]") if b_transposed else ((batch, k, n), "B[vb, vk, vj]")
    a_load = "A[vb, vi, vk]"
    if dtype != acc:
        a_load, b_load = f'T.Cast("{acc}", {a_load})', f'T.Cast("{acc}", {b_load})'
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def bmm(A: T.Buffer(({batch}, {m}, {k}), "{dtype}"), B: T.Buffer({b_shape}, "{dtype}"),
            C: T.Buffer(({batch}, {m}, {n}), "{acc}")):
        T.func_attr({{"tir.noalias": True}})
        for b, i, j, k in T.grid({batch}, {m}, {n}, {k}):
            with T.block("C"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.{acc}(0)
                C[vb, vi, vj] = C[vb, vi, vj] + {a_load} * {b_load}
"""


def nhwc_conv2d_src(x_shape: tuple, w_shape: tuple, dtype: str = "float16", layout: str = "HWIO") -> str:
    """`conv2d_src` of an NHWC ``x_shape`` input by ``layout`` weights of ``w_shape``, into
    float32: how the CUDA pipeline lays out the convolutions it runs on tensor cores."""
    return conv2d_src(x_shape, w_shape, dtype, "float32", ("NHWC", layout))


def conv2d_src(x_shape: tuple, w_shape: tuple, dtype: str = "float32", out_dtype: str = "",
               layouts: tuple = ()) -> str:
    """A Relax ``main``: a 3x3 convolution (padding 1) of ``x_shape`` by ``w_shape``, both
    ``dtype``, into ``out_dtype`` (the input's type when empty); NCHW and OIHW unless
    ``layouts`` gives (data layout, kernel layout)."""
    out = f', out_dtype="{out_dtype}"' if out_dtype else ""
    if layouts:
        out += f', data_layout="{layouts[0]}", kernel_layout="{layouts[1]}"'
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({tuple(x_shape)}, "{dtype}"), w: R.Tensor({tuple(w_shape)}, "{dtype}")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1]{out})
            R.output(y)
        return y
"""
