"""The CUDA backend without a GPU: the CUDA C it prints for representative kernels, NVRTC
compiles of every sample, build errors, the compile cache, and the CLI's --emit cuda/ptx.

What the kernels compute is checked by `test_cuda_emulator.py` and `test_cuda_gpu.py` on the
emulated GPU (the same CUDA C run on the CPU) and, on
a machine with a GPU, by `test_cuda_gpu.py` on it."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler import nvrtc
from tvmscript.compiler.build import BuildError
from tvmscript.compiler.build_cuda import build_cuda

from support.cuda_check import ARCHS, assert_compiles_for_cuda, prim_funcs_of

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMS_CACHE_DIR", str(tmp_path / "cache"))


def cuda_source(text: str, target: str = "cuda", **kw) -> str:
    mod = tvms.parse(text)
    return build_cuda(prim_funcs_of(mod), target, kind="source", **kw).source


def kernel_text(source: str, name: str) -> str:
    m = re.search(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?' + name + r"\(.*?\n}\n", source, re.S)
    assert m, f"no kernel {name} in\n{source}"
    return m.group(0)


ELEMENTWISE_DYN = """
@I.ir_module
class Module:
    @T.prim_func
    def add(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n,), "float32")
        for i in range(n):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]
"""


def test_elementwise_with_a_symbolic_length():
    code = build_cuda(prim_funcs_of(tvms.parse(ELEMENTWISE_DYN)), "cuda", kind="source")
    k = kernel_text(code.source, "add_kernel")
    assert "float* __restrict__ A" in k and "long long n" in k, k
    assert re.search(r"if \(.*< n\)", k), "the tail of the last block must be guarded"
    (launch,) = code.functions["add"].launches
    assert launch.block == ("1024", "1", "1")
    assert "n" in launch.grid[0] and "//" in launch.grid[0], launch.grid  # a ceil-division of n
    assert [a.kind for a in launch.args].count("sym") == 1


MATMUL = """
@I.ir_module
class Module:
    @T.prim_func
    def mm(A: T.Buffer((512, 512), "float32"), B: T.Buffer((512, 512), "float32"), C: T.Buffer((512, 512), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(512, 512, 512):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def test_matmul_tiles_in_shared_memory_with_barriers():
    k = kernel_text(cuda_source(MATMUL), "mm_kernel")
    shared = re.findall(r"__shared__ __align__\(16\) float (\w+)\[(\d+)\]", k)
    assert {name for name, _ in shared} == {"A_reindex_shared", "B_reindex_shared"}, k
    assert all(int(size) * 4 <= 48 * 1024 for _, size in shared), "tiles, not whole matrices"
    body = k[k.index("for (int ax3_0"):]
    # One barrier after the cooperative fetch (RAW), one at the end of the k step (WAR).
    assert body.count("__syncthreads();") == 2, k
    fetch_end = body.index("__syncthreads();")
    assert "A_reindex_shared[" in body[:fetch_end] and "C_reindex_local[" not in body[:fetch_end]
    assert "float C_reindex_local[16];" in k, "each thread's 4x4 accumulator lives in registers"
    assert "__launch_bounds__(128)" in k


def test_storage_align_pads_the_rows_of_shared_tiles():
    """DLight's Matmul asks for A's and B's shared rows at a stride of 8k + its copy's vector
    length: the tiles are 32x16 and 64x16. A is copied 2 floats at a time along K (rows 18
    floats apart); B of A @ B, contiguous along its rows (J), one float per thread along J,
    coalesced (rows 17 floats apart: consecutive rows in different banks)."""
    k = kernel_text(cuda_source(MATMUL), "mm_kernel")
    shared = dict(re.findall(r"__shared__ __align__\(16\) float (\w+)\[(\d+)\]", k))
    assert shared == {"A_reindex_shared": str(31 * 18 + 16), "B_reindex_shared": str(63 * 17 + 16)}, k
    assert re.search(r"A_reindex_shared\[.*\* 18\)", k), k
    assert re.search(r"B_reindex_shared\[.*\* 17\)", k), k


def test_aligned_strides_follow_tvm_buffer_dim_align():
    from tvmscript.compiler.lower_gpu import aligned_strides

    def shape(*dims):
        return [tir.IntImm("int32", d) for d in dims]

    assert aligned_strides(shape(1, 32, 16), {1: (8, 2)}) == [32 * 18, 18, 1]
    assert aligned_strides(shape(32, 32), {0: (32, 1)}) == [33, 1]
    assert aligned_strides(shape(64, 40), {0: (32, 8)}) is None, "40 is already 32k + 8"
    assert aligned_strides(shape(64, 32), {0: (32, 8)}) == [40, 1]
    assert aligned_strides(shape(32, 32), {0: (16, 0)}) is None, "already aligned: nothing to pad"
    assert aligned_strides([tir.Var("int32", "n"), tir.IntImm("int32", 4)], {0: (8, 1)}) is None


def test_cooperative_fetches_of_index_splits_are_vector_loads():
    """The fetch of A's 32x16 tile fuses and re-splits the tile's loops, so its global index
    is ``(q * 2 + v) // 16`` and ``(q * 2 + v) % 16``: a division by a multiple of the vector
    length of an aligned ramp, which stays one float2 (TVM's vectorizer reasons the same)."""
    k = kernel_text(cuda_source(MATMUL), "mm_kernel")
    assert re.search(r"float2 \w+ = \*\(float2\*\)\(A \+ ", k), k
    assert re.search(r"\*\(float2\*\)\(A_reindex_shared \+ .*\) = \w+;", k), k


TRANSPOSE = """
@I.ir_module
class Module:
    @T.prim_func
    def tr(A: T.Buffer((1024, 512), "float32"), B: T.Buffer((512, 1024), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j in T.grid(512, 1024):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi]
"""


def test_transpose_tiles_are_padded_against_bank_conflicts():
    """DLight's Transpose reads its shared tile down columns; `storage_align(factor=32,
    offset=1)` makes its rows 33 floats apart so a warp's column read hits 32 banks."""
    k = kernel_text(cuda_source(TRANSPOSE), "tr_kernel")
    assert re.search(r"\w+_shared\[.*\* 33\)", k), k


ROW_SUM = """
@I.ir_module
class Module:
    @T.prim_func
    def row_sum(A: T.Buffer((128, 4096), "float32"), B: T.Buffer((128,), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, k in T.grid(128, 4096):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
"""


def test_cross_thread_reduction_uses_warp_shuffles():
    k = kernel_text(cuda_source(ROW_SUM), "row_sum_kernel")
    assert "__shfl_xor_sync(0xffffffffu" in k, k
    assert re.search(r"if \(\(+\(int\)threadIdx\.x\)+ == 0\)", k), "one thread writes the row's sum"


FP16 = """
@I.ir_module
class Module:
    @T.prim_func
    def gelu_ish(A: T.Buffer((4096,), "float16"), B: T.Buffer((4096,), "float16")):
        for i in range(4096):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.exp(A[vi]) + T.float16(1)
"""


def test_float16_kernels_use_cuda_fp16():
    src = cuda_source(FP16)
    assert "#include <cuda_fp16.h>" in src
    k = kernel_text(src, "gelu_ish_kernel")
    assert "half* A" in k and "__restrict__" not in k, "no tir.noalias: no __restrict__"
    assert "__float2half_rn(expf(__half2float(" in k, "float16 math goes through float"


VECTORIZED = """
@I.ir_module
class Module:
    @T.prim_func
    def scale(A: T.Buffer((4096,), "float32"), B: T.Buffer((4096,), "float32")):
        T.func_attr({"tir.noalias": True})
        for bx in T.thread_binding(8, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                for v in T.vectorized(4):
                    with T.block("B"):
                        vi = T.axis.spatial(4096, bx * 512 + tx * 4 + v)
                        B[vi] = A[vi] * T.float32(2)
"""


def wmma_source(b_layout="row_major", acc="float32"):
    """C (64x64, acc) = A (64x64 fp16) @ B; B is (K, N) row_major or (N, K) col_major."""
    b_index = "k * 1024 + by * 32 + j * 16" if b_layout == "row_major" else "(by * 32 + j * 16) * 64 + k * 16"
    return f'''
@I.ir_module
class Module:
    @T.prim_func
    def wmma_mm(A: T.Buffer((64, 64), "float16"), B: T.Buffer((64, 64), "float16"), C: T.Buffer((64, 64), "{acc}")):
        T.func_attr({{"tir.noalias": True}})
        A_shared = T.alloc_buffer((32, 16), "float16", scope="shared")
        a_frag = T.alloc_buffer((16, 16), "float16", scope="wmma.matrix_a")
        b_frag = T.alloc_buffer((16, 16), "float16", scope="wmma.matrix_b")
        c_frag = T.alloc_buffer((16, 32), "{acc}", scope="wmma.accumulator")
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for by in T.thread_binding(2, thread="blockIdx.y"):
                for ty in T.thread_binding(2, thread="threadIdx.y"):
                    for tx in T.thread_binding(32, thread="threadIdx.x"):
                        for j in range(2):
                            T.evaluate(T.tvm_fill_fragment(c_frag.data, 16, 16, 16, j, T.{acc}(0)))
                        for k in range(4):
                            for i in range(8):
                                A_shared[(i * 64 + ty * 32 + tx) // 16, (i * 64 + ty * 32 + tx) % 16] = A[bx * 32 + (i * 64 + ty * 32 + tx) // 16, k * 16 + (i * 64 + ty * 32 + tx) % 16]
                            T.evaluate(T.tvm_load_matrix_sync(a_frag.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), A_shared.data, ty * 256, 256, 1), 16, "row_major"))
                            for j in range(2):
                                T.evaluate(T.tvm_load_matrix_sync(b_frag.data, 16, 16, 16, 0, T.tvm_access_ptr(T.type_annotation("float16"), B.data, {b_index}, 1024, 1), 64, "{b_layout}"))
                                T.evaluate(T.tvm_mma_sync(c_frag.data, j, a_frag.data, 0, b_frag.data, 0, c_frag.data, j))
                        for j in range(2):
                            T.evaluate(T.tvm_store_matrix_sync(c_frag.data, 16, 16, 16, j, T.tvm_access_ptr(T.type_annotation("{acc}"), C.data, (bx * 32 + ty * 16) * 64 + by * 32 + j * 16, 256, 2), 64, "row_major"))
'''


@pytest.mark.parametrize("b_layout", ["row_major", "col_major"])
@pytest.mark.parametrize("acc", ["float32", "float16"])
def test_tensor_core_intrinsics_become_wmma_fragments_and_calls(b_layout, acc):
    """TVM's tensor-core intrinsics (what tensorizing with its wmma intrinsics leaves) print as
    mma.h's fragments and calls; the shared tile the fragments load through tvm_access_ptr is
    fenced by barriers before the load (RAW) and before the next fill (WAR)."""
    mod = tvms.parse(wmma_source(b_layout, acc))
    src = cuda_source(wmma_source(b_layout, acc))
    assert "#include <mma.h>" in src
    k = kernel_text(src, "wmma_mm_kernel")
    t = "float" if acc == "float32" else "half"
    assert f"nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, {t}> c_frag[2];" in k
    assert ("nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, "
            f"nvcuda::wmma::{b_layout}> b_frag[1];") in k
    assert "nvcuda::wmma::load_matrix_sync(a_frag[0], ((half*)A_shared + (((int)threadIdx.y) * 256)), 16);" in k
    assert "nvcuda::wmma::mma_sync(c_frag[j_1], a_frag[0], b_frag[0], c_frag[j_1]);" in k
    assert "c_frag[j_2], 64, nvcuda::wmma::mem_row_major);" in k
    fill, load = k.index("A_shared[("), k.index("load_matrix_sync(a_frag")
    assert "__syncthreads();" in k[fill:load] and k.count("__syncthreads();") == 2
    assert_compiles_for_cuda(mod)


def test_the_default_schedule_puts_fp16_matmuls_on_wmma_tensor_cores_before_ampere():
    """With no schedule of its own, an fp16 matmul gets `dlight.gpu.MatmulTensorCore`: on a
    Turing GPU (sm_75, no cp.async) shared tiles, wmma fragments of one warp, mma_sync (sm_80
    and later: tests/cuda/test_cuda_mma.py); NVRTC compiles it. 512 is a
    multiple of 128: blocks of 128x64, warps of 64x32 (4x2 accumulators). A's tile [128, 32]
    and B's [32, 64] (B of ``A @ B`` kept row-major, read as a row-major matrix_b) have rows
    padded to 40 and 72 halfs, and are filled 16 bytes per thread and instruction."""
    src = MATMUL.replace('"float32"', '"float16"').replace("T.float32(0)", "T.float16(0)")
    k = kernel_text(cuda_source(src, "cuda -arch=sm_75"), "mm_kernel")
    assert "nvcuda::wmma::mma_sync(" in k and "nvcuda::wmma::load_matrix_sync(" in k
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, half> C_reindex_shared_wmma_accumulator[8];" in k
    assert "nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::row_major> B_reindex_shared_wmma_matrix_b[2];" in k
    assert re.search(r"load_matrix_sync\(A_reindex_shared_wmma_matrix_a\[\w+\], .*\), 40\);", k), k
    assert re.search(r"load_matrix_sync\(B_reindex_shared_wmma_matrix_b\[\w+\], .*\), 72\);", k), k
    assert re.search(r"\*\(uint4\*\)\(A_reindex_shared \+ .*\) = \*\(uint4\*\)\(A \+ ", k), k
    assert re.search(r"\*\(uint4\*\)\(B_reindex_shared \+ .*\) = \*\(uint4\*\)\(B \+ ", k), k
    assert k.count("__syncthreads();") >= 3
    assert_compiles_for_cuda(tvms.parse(src), archs=("sm_75",))


def test_fills_of_padded_rows_are_16_byte_words_or_zeros():
    """77 rows of A in padded tiles: on sm_75 (wmma, no cp.async) the fill reads a 16-byte word
    where the row exists and stores zeros past the end; the condition is the row's, the same
    for the 8 lanes. On sm_80 and later the same fill is a zero-filling cp.async."""
    src = (MATMUL.replace('"float32"', '"float16"').replace("T.float32(0)", "T.float16(0)")
           .replace("A: T.Buffer((512, 512)", "A: T.Buffer((77, 512)")
           .replace("C: T.Buffer((512, 512)", "C: T.Buffer((77, 512)").replace("T.grid(512, 512, 512)", "T.grid(77, 512, 512)"))
    k = kernel_text(cuda_source(src, "cuda -arch=sm_75"), "mm_kernel")
    assert re.search(r"\*\(uint4\*\)\(A_reindex_pad_shared \+ .*\) = \(\(.*\) < 77\) \? \*\(uint4\*\)\(A \+ .*\) : "
                     r"make_uint4\(0u, 0u, 0u, 0u\)\);", k), k
    k = kernel_text(cuda_source(src), "mm_kernel")
    assert re.search(r"tvms_cp_async16_zfill\(\(A_reindex_pad_shared \+ .*\(bool\)\(\(.*\) < 77\)\)\);", k), k
    assert_compiles_for_cuda(tvms.parse(src), archs=("sm_75", "sm_80"))


def test_a_fragment_loaded_with_two_layouts_is_an_error():
    text = wmma_source().replace('64, "row_major"))\n                                T.evaluate(T.tvm_mma_sync',
                                 '64, "col_major"))\n                                T.evaluate(T.tvm_mma_sync')
    text = text.replace('T.tvm_mma_sync(c_frag.data, j, a_frag.data, 0, b_frag.data, 0, c_frag.data, j))',
                        'T.tvm_mma_sync(c_frag.data, j, a_frag.data, 0, b_frag.data, 0, c_frag.data, j))\n'
                        '                                T.evaluate(T.tvm_load_matrix_sync(b_frag.data, 16, 16, 16, 0, '
                        'B.data, 64, "row_major"))')
    with pytest.raises(BuildError, match=r"fragment 'b_frag' \(wmma.matrix_b\) must be loaded with one layout "
                                         r"\(row_major or col_major\), found \['col_major', 'row_major'\]"):
        build_cuda(prim_funcs_of(tvms.parse(text)), "cuda", kind="source")


def test_vectorized_loops_become_float4_accesses():
    k = kernel_text(cuda_source(VECTORIZED), "scale_kernel")
    assert re.search(r"float4 \w+ = \*\(float4\*\)\(A \+ ", k), k
    assert re.search(r"\*\(float4\*\)\(B \+ .*\) = \w+;", k), k
    assert_compiles_for_cuda(tvms.parse(VECTORIZED))


BIG_TILE = """
@I.ir_module
class Module:
    @T.prim_func
    def copy(A: T.Buffer((64, 16384), "float32"), B: T.Buffer((64, 16384), "float32")):
        T.func_attr({"tir.noalias": True})
        A_shared = T.alloc_buffer((64, 16384), scope="shared")
        for bx in T.thread_binding(64, thread="blockIdx.x"):
            for j0 in range(64):
                for tx in T.thread_binding(256, thread="threadIdx.x"):
                    with T.block("A_shared"):
                        vi = T.axis.spatial(64, bx)
                        vj = T.axis.spatial(16384, j0 * 256 + tx)
                        A_shared[vi, vj] = A[vi, vj]
            for j0 in range(64):
                for tx in T.thread_binding(256, thread="threadIdx.x"):
                    with T.block("B"):
                        vi = T.axis.spatial(64, bx)
                        vj = T.axis.spatial(16384, j0 * 256 + tx)
                        B[vi, vj] = A_shared[vi, 16383 - vj]
"""


def test_large_shared_buffers_use_dynamic_shared_memory():
    code = build_cuda(prim_funcs_of(tvms.parse(BIG_TILE)), "cuda", kind="source")
    k = kernel_text(code.source, "copy_kernel")
    assert "extern __shared__ __align__(16) unsigned char tvms_dynamic_smem[];" in k
    assert "float* A_shared = (float*)(tvms_dynamic_smem + 0);" in k
    assert code.functions["copy"].launches[0].dyn_shared_bytes == str(16384 * 4)
    assert k.count("__syncthreads();") == 1, "the reversed read needs the whole row fetched first"


def test_index_arithmetic_is_int32_unless_the_shapes_need_int64():
    mod = tvms.relax.transform.LegalizeOps()(tvms.parse((SAMPLES / "mlp.tvms").read_text()))
    text = build_cuda(prim_funcs_of(mod), "cuda", kind="source").source
    assert "long long" not in text, "static int64 shapes all fit in int32"
    dyn = build_cuda(prim_funcs_of(tvms.parse(ELEMENTWISE_DYN)), "cuda", kind="source").source
    assert "long long" in dyn, "a symbolic int64 length keeps int64 indices"


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.tvms"))


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_every_sample_compiles_with_nvrtc(name):
    from tvmscript.diagnostics import TVMScriptError

    try:
        mod = tvms.load(str(SAMPLES / name))
    except TVMScriptError as err:  # a fragment: its constants or callees live elsewhere
        pytest.skip(f"{name} is not a whole program: {err.message}")
    if isinstance(mod, tir.PrimFunc):
        mod = tvms.ir.IRModule({"main": mod})
    elif isinstance(mod, tvms.relax.Function):
        mod = tvms.ir.IRModule({"main": mod})
    if any(isinstance(f, tvms.relax.Function) for f in mod.functions.values()):
        mod = tvms.relax.transform.LegalizeOps()(mod)
    if not prim_funcs_of(mod):
        pytest.skip(f"{name} has no prim_func")
    codes = assert_compiles_for_cuda(mod)
    assert set(codes) == set(ARCHS)


def test_nvrtc_errors_name_the_kernel_and_the_prim_func():
    src = """
@I.ir_module
class Module:
    @T.prim_func
    def bad(A: T.Buffer((32,), "float32")):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("A"):
                vi = T.axis.remap("S", [tx])
                A[vi] = T.call_extern("float32", "no_such_function", A[vi])
"""
    with pytest.raises(BuildError) as info:
        build_cuda(prim_funcs_of(tvms.parse(src)), "cuda")
    msg = str(info.value)
    assert "in kernel 'bad_kernel' (prim_func 'bad')" in msg and "no_such_function" in msg, msg
    assert info.value.span is not None and info.value.span.line == 5


def test_unbound_loops_are_an_error_naming_the_loop():
    src = """
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((32,), "float32")):
        for i in range(32):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = T.float32(1)
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.remap("S", [tx])
                A[vi] = A[vi] + T.float32(1)
"""
    with pytest.raises(BuildError, match="loop 'i' of 'f' is not inside any loop bound to a GPU thread"):
        build_cuda(prim_funcs_of(tvms.parse(src)), "cuda")


def test_compile_cache_is_private_atomic_and_validated(tmp_path):
    source = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }\n'
    first = nvrtc.compile_cuda(source, "sm_90")
    assert not first.cached and first.binary[:4] == b"\x7fELF"
    folder = nvrtc.cache_dir()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    again = nvrtc.compile_cuda(source, "sm_90")
    assert again.cached and again.binary == first.binary
    assert nvrtc.compile_cuda(source, "sm_80").cached is False, "the architecture is part of the key"
    (entry,) = [p for p in Path(folder).iterdir() if p.name.endswith(".cubin") and
                Path(folder, p.name).read_bytes().endswith(first.binary)]
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF  # a corrupted entry fails its checksum and is compiled again
    entry.write_bytes(bytes(data))
    rebuilt = nvrtc.compile_cuda(source, "sm_90")
    assert not rebuilt.cached and rebuilt.binary == first.binary
    assert not [p for p in Path(folder).iterdir() if p.name.startswith(".tmp-")]


def test_whole_builds_are_cached_in_memory_and_on_disk(monkeypatch):
    """A rebuild of the same functions skips the schedules, the code generator and NVRTC: in
    this process from memory, in the next from the disk cache; another architecture, kind or
    function is a build of its own."""
    import tvmscript.compiler.build_cuda as cuda_build

    funcs = prim_funcs_of(tvms.parse(MATMUL))
    first = build_cuda(funcs, "cuda -arch=sm_90")
    assert build_cuda(funcs, "cuda -arch=sm_90") is first
    assert list(Path(tvms.cache.root(), "cuda-builds").iterdir())
    cuda_build.clear_cuda_cache()                  # a new process, as far as memory goes
    made = []
    real = cuda_build._build_cuda
    monkeypatch.setattr(cuda_build, "_build_cuda", lambda *a, **k: made.append(a[2:]) or real(*a, **k))
    again = build_cuda(funcs, "cuda -arch=sm_90")
    assert made == [] and again is not first
    assert (again.source, again.cubin, again.arch) == (first.source, first.cubin, first.arch)
    assert again.functions["mm"].launches == first.functions["mm"].launches
    build_cuda(funcs, "cuda -arch=sm_80")
    build_cuda(funcs, "cuda -arch=sm_90", kind="ptx")
    changed = prim_funcs_of(tvms.parse(MATMUL.replace("A[vi, vk] * B[vk, vj]", "A[vi, vk] * B[vk, vj] * T.float32(2)")))
    build_cuda(changed, "cuda -arch=sm_90")
    assert made == [("sm_80", "cubin"), ("sm_90", "ptx"), ("sm_90", "cubin")]


def test_ptx_is_for_the_virtual_architecture():
    ptx = nvrtc.compile_cuda('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }\n', "sm_80",
                             kind="ptx").binary.decode()
    assert ".target sm_80" in ptx and ".entry k" in ptx


def test_executable_for_cuda_holds_cubin_and_launches():
    ex = tvms.compile(tvms.relax.transform.LegalizeOps()(tvms.parse((SAMPLES / "mlp.tvms").read_text())),
                      target="cuda -arch=sm_80")
    assert ex.target == "cuda" and ex.cuda_code.arch == "sm_80" and ex.cuda_code.cubin[:4] == b"\x7fELF"
    assert [p.written for p in ex.kernels["transpose"].params] == [False, True], "outputs are marked written"
    for name, func in ex.kernels.items():
        assert func.launches, name
        assert all(len(launch.grid) == 3 and len(launch.block) == 3 for launch in func.launches)
    assert "_K0_" in ex.as_python()


def test_cli_compile_emits_cuda_and_ptx():
    from support.cli import tvms as run_tvms

    mlp = str(SAMPLES / "mlp.tvms")
    cuda = run_tvms("compile", mlp, "--target", "cuda", "--emit", "cuda")
    assert cuda.returncode == 0, cuda.err
    assert cuda.out.count('extern "C" __global__') >= 4 and "#include <cuda_fp16.h>" in cuda.out
    ptx = run_tvms("compile", mlp, "--target", "cuda", "--emit", "ptx", "--arch", "sm_80")
    assert ptx.returncode == 0, ptx.err
    assert ".target sm_80" in ptx.out and ".entry transpose_kernel" in ptx.out
    bad = run_tvms("compile", mlp, "--target", "cuda", "--emit", "llvm")
    assert bad.returncode == 1 and "--target cuda emits CUDA C" in bad.err
    bad = run_tvms("compile", mlp, "--emit", "cuda")
    assert bad.returncode == 1 and "--emit cuda needs --target cuda" in bad.err
    bad = run_tvms("compile", mlp, "--target", "cuda", "--emit", "cuda", "--arch", "90")
    assert bad.returncode == 1 and "expected a CUDA architecture such as sm_90" in bad.err


_COMPILE_IN_A_WHEEL_FOLDER = """
import sys
from tvmscript.compiler import nvrtc
nvrtc._nvidia_roots = lambda: [sys.argv[1]]
if sys.argv[2] == "without-preload":
    nvrtc._preload_builtins = lambda path: None
try:
    nvrtc.compile_cuda('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', "sm_90", use_cache=False)
except nvrtc.NVRTCError as err:
    print("failed:", err.log)
else:
    print("compiled with", nvrtc._lib._name)
"""


def test_nvrtc_finds_its_builtins_where_the_wheel_has_no_rpath(tmp_path):
    """nvidia-cuda-nvrtc 13.0.88 (the wheel PyPI's CUDA PyTorch pins) ships a libnvrtc.so.13
    without the ``$ORIGIN`` RPATH, so NVRTC cannot open the libnvrtc-builtins beside it. A copy of
    the installed NVRTC with its RPATH blanked out is that wheel: it fails without the preload,
    and compiles with it."""
    wheels = [os.path.dirname(p) for p in nvrtc._library_candidates() if os.path.isabs(p)]
    if not wheels:
        pytest.skip("no nvidia-cuda-nvrtc wheel installed")
    installed = wheels[0]
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    for name in os.listdir(installed):
        if name.startswith("libnvrtc"):
            data = Path(installed, name).read_bytes()
            if name.startswith("libnvrtc.so."):
                data = data.replace(b"$ORIGIN\0", b"/nonex/\0")  # the RPATH, now a folder that is not there
            (lib / name).write_bytes(data)
    import subprocess
    import sys

    def run(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", _COMPILE_IN_A_WHEEL_FOLDER, str(tmp_path / "nvidia"), mode],
                              capture_output=True, text=True, check=True).stdout

    unpatched = run("without-preload")
    assert "failed:" in unpatched and "libnvrtc-builtins" in unpatched, "the copy must be a wheel without an RPATH"
    assert f"compiled with {lib}" in run("with-preload")
