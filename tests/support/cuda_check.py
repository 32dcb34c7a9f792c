"""Checks of the CUDA backend that need no GPU: the default GPU schedules, CUDA C and NVRTC.

`assert_compiles_for_cuda(mod)` schedules every prim_func of ``mod`` with the default GPU
schedules, prints it as CUDA C and compiles that with NVRTC for each architecture of
`ARCHS` (an A100's and an H100's), as CI does for every op and every sample.
"""

from __future__ import annotations

from tvmscript import tir
from tvmscript.compiler.build_cuda import build_cuda

ARCHS = ("sm_80", "sm_90")


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
