"""Elementwise kernels at full bandwidth: DLight's `ElementWise` rule gives each thread 16 bytes
of consecutive elements as one vector (`dlight.gpu.elementwise.vector_lanes`), and the CUDA printer
makes them vector loads and stores (`codegen_cuda.vectorize`): ``float4`` for float32, a
``uint4`` of 8 halves or bfloat16s. A partial last block keeps its guard outside the vector.

Each kernel's CUDA C is checked for its memory instructions, and run on the CPU emulator
against the CPU backend (tests/support/cuda_emulator.py); NVRTC compiles the fp16 one with no
local memory (its lanes stay in registers).
"""

from __future__ import annotations

import re
import shutil

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.dlight.gpu.elementwise import vector_lanes

from support.cuda_emulator import compare_with_cpu
from support.tir_walk import walk


def binary(shape, dtype="float32", op="+", b_shape=None, b_index=None):
    """``C = A op B`` over ``shape``; ``B`` of ``b_shape`` read at ``b_index`` (a broadcast)."""
    rank = len(shape)
    names = ["i", "j", "k", "l"][:rank]
    idx = ", ".join(f"v{n}" for n in names)
    b_shape = b_shape or shape
    b_index = b_index or idx
    loops = "".join(f"{'    ' * d}        for {n} in range({e}):\n" for d, (n, e) in enumerate(zip(names, shape)))
    pad = "    " * rank
    return f'''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer({tuple(shape)}, "{dtype}"), B: T.Buffer({tuple(b_shape)}, "{dtype}"),
          C: T.Buffer({tuple(shape)}, "{dtype}")):
        T.func_attr({{"tir.noalias": True}})
{loops}{pad}            with T.block("C"):
{pad}                {", ".join("v" + n for n in names)} = T.axis.remap("{"S" * rank}", [{", ".join(names)}])
{pad}                C[{idx}] = A[{idx}] {op} B[{b_index}]
'''


def cuda_of(src: str) -> str:
    return build_cuda({"f": tvms.parse(src)["f"]}, "cuda", kind="source").source


def kernel_body(source: str) -> str:
    return source[source.index('extern "C"'):]


@pytest.mark.parametrize("shape,dtype,vector", [
    ((1 << 20,), "float32", "float4"),
    ((64, 1000), "float32", "float4"),
    ((4096,), "float16", "uint4"),
    ((8, 512), "bfloat16", "uint4"),
])
def test_elementwise_kernels_move_16_bytes_per_access(shape, dtype, vector):
    body = kernel_body(cuda_of(binary(shape, dtype)))
    assert body.count(f"*({vector}*)") == 3, body        # two vector loads, one vector store
    assert "__launch_bounds__(256)" in body


def test_a_partial_last_block_keeps_its_guard_outside_the_vector():
    body = kernel_body(cuda_of(binary((1000,))))         # 250 float4s on one block of 256 threads
    assert re.search(r"if \(\(?\(\(int\)threadIdx.x\) < 250\)\)? \{", body), body
    assert body.count("*(float4*)") == 3


def test_an_odd_length_stays_scalar():
    body = kernel_body(cuda_of(binary((1003,))))
    assert "float4" not in body and "__launch_bounds__(1024)" in body


def test_a_broadcast_operand_is_read_as_a_vector_when_its_rows_align():
    body = kernel_body(cuda_of(binary((64, 256), b_shape=(256,), b_index="vj")))
    assert body.count("*(float4*)") == 3, body


def test_lanes_follow_the_widest_dtype_and_divide_the_extent():
    def block_of(src):
        return next(b for b in walk(tvms.parse(src)["f"].body).blocks if b.name == "C")

    assert vector_lanes(block_of(binary((1024,)))) == 4
    assert vector_lanes(block_of(binary((1024,), "float16"))) == 8
    assert vector_lanes(block_of(binary((1024,), "float64"))) == 2
    assert vector_lanes(block_of(binary((6,)))) == 2
    assert vector_lanes(block_of(binary((7,)))) == 1
    # A transposed write is not in iteration order: no vector.
    assert vector_lanes(block_of(binary((8, 8)).replace("C[vi, vj] =", "C[vj, vi] ="))) == 1


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")


@needs_gxx
@pytest.mark.parametrize("src", [
    binary((1 << 14,)), binary((1000,)), binary((1003,)), binary((4096,), "float16"), binary((8, 512), "bfloat16"),
    binary((64, 256), b_shape=(256,), b_index="vj"), binary((64, 250), b_shape=(250,), b_index="vj"),
    binary((32, 64), op="*"),
], ids=["f32", "f32_partial_block", "f32_odd", "f16", "bf16", "broadcast", "broadcast_unaligned", "mul"])
def test_vectorized_kernels_match_the_cpu(src):
    result = compare_with_cpu({"f": tvms.parse(src)["f"]}, rtol=1e-2, atol=1e-2)["f"]
    assert result.ok, result


def test_nvrtc_keeps_half_lanes_in_registers():
    nvrtc = pytest.importorskip("tvmscript.compiler.nvrtc")
    source = cuda_of(binary((4096,), "float16"))
    try:
        ptx = nvrtc.compile_cuda(source, "sm_90", kind="ptx").binary.decode()
    except nvrtc.NVRTCUnavailable as err:
        pytest.skip(str(err))
    assert ptx.count("ld.global.nc.v4.u32") == 2 and ptx.count("st.global.v4.u32") == 1
    assert ".local" not in ptx
