"""PTX's tensor-core and asynchronous-copy builtins: TVM's ``ptx_ldmatrix``, ``ptx_mma``,
``ptx_cp_async``, ``ptx_commit_group`` and ``ptx_wait_group``, as the CUDA printer writes them
(compiler/codegen_cuda/ptx.py: calls of inline-PTX helpers) and as the CPU emulator runs them
(tests/support/cuda_emulator_ptx.h).

What is checked, on hand-written one-warp prim_funcs (shared tiles, per-thread register arrays):

* the emulator against NumPy: ldmatrix x4 (plain and .trans) feeding mma.sync m16n8k16 (fp16
  and bf16 into fp32, fp16 into fp16), accumulating onto C in place; mma with its fragments
  loaded by the PTX ISA's formulas directly (fp16, and tf32 m16n8k8 with cvt.rna's rounding),
  so that ldmatrix and mma are each checked against the ISA, not only against each other;
  ldmatrix x1/x2/x4, plain and .trans, against the ISA's layout, the lanes whose addresses the
  instruction ignores giving misaligned ones; cp.async of 16, 8 and 4 bytes, zero fill;
* what the emulator catches: shared memory read before the ``ptx_wait_group`` that covers a
  copy (stale bytes), a missing wait, copies never committed, a misaligned or non-shared
  ldmatrix row, half a warp at an mma, a cp.async to global memory;
* the CUDA C: only the helpers used, inside ``#ifndef TVMS_CUDA_EMULATOR``; clear errors for an
  unsupported mma form or layout, a pointer into the wrong memory, an architecture below
  sm_80; NVRTC compiles every form for sm_80 and sm_90 (ptxas accepts the operands) and the
  PTX holds the instructions;
* the counters: an mma is a tensor-core operation of its shape; ldmatrix rows conflict in an
  unpadded 16x16 half tile (rows 32 bytes apart) and not in one padded to 24 halfs; cp.async's
  global sectors, its shared stores, and no cp.async load counted as reused;
* on the driver in use (the emulated GPU everywhere, a real one with ``-m cuda``): the mma
  kernel through `tvms.compile` and the runtime.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build import BuildError
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.codegen_cuda import codegen_cuda

if shutil.which("g++") is None:
    pytest.skip("the CUDA emulator needs g++", allow_module_level=True)

from support.cuda_counters import CountingModule  # noqa: E402
from support.cuda_emulator import EmulatedModule, EmulationError, bfloat16_bits, bfloat16_to_float32  # noqa: E402

RNG = np.random.default_rng(7)
PTX_NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMS_CACHE_DIR", str(tmp_path / "cache"))


def parse_func(text: str):
    return tvms.parse(text)


def emulated(text: str, trace: bool = False):
    """The prim_func of ``text`` built as CUDA C and compiled for the emulator (counting when
    ``trace``), and its name."""
    func = parse_func(text)
    code = build_cuda({"f": func}, kind="source", trace=trace)
    return (CountingModule(code) if trace else EmulatedModule(code)), code


def small_values(shape, dtype, scale: int = 8) -> np.ndarray:
    """Multiples of 1/scale in [-1, 1): exact in fp16 and bf16, and their products and sums of 16
    exact in fp32 (and in fp16 for scale 4), so results compare exactly."""
    values = (RNG.integers(-scale, scale, shape) / scale).astype(np.float32)
    if dtype == "bfloat16":
        return bfloat16_bits(values)
    return values.astype(dtype)


def as_float64(a: np.ndarray, dtype: str) -> np.ndarray:
    return (bfloat16_to_float32(a) if dtype == "bfloat16" else a).astype(np.float64)


# ----------------------------------------------------------------------------- ldmatrix + mma


def mma_source(in_dtype="float16", acc="float32", b_trans=True, stride=16) -> str:
    """One warp: C (16x16, ``acc``) += A (16x16) @ B, with A and B copied into shared tiles whose
    rows are ``stride`` elements apart, loaded with ldmatrix x4 (A plain; B .trans when B is
    stored k-major, [k, n], plain when stored n-major, [n, k]) and multiplied by two mma.sync
    m16n8k16 (one per 8 columns of C). C's fragment is loaded and stored by the ISA's layout:
    element i of a lane's 4 is at row lane/4 + 8*(i/2), column 2*(lane%4) + i%2."""
    ab, cc = PTX_NAMES[in_dtype], PTX_NAMES[acc]
    if b_trans:   # lanes 8j..8j+7 give rows k of matrix j: k = lane % 16, n = 8 * (lane / 16)
        b_row = f"tx % 16 * {stride} + tx // 16 * 8"
    else:         # [n, k]: matrix j's rows are n = 8 * (j / 2) + lane % 8 at k = 8 * (j % 2)
        b_row = f"(tx // 16 * 8 + tx % 8) * {stride} + tx // 8 % 2 * 8"
    return f'''
@T.prim_func
def f(A: T.Buffer((16, 16), "{in_dtype}"), B: T.Buffer((16, 16), "{in_dtype}"), C: T.Buffer((16, 16), "{acc}")):
    T.func_attr({{"tir.noalias": True}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("warp"):
            A_shared = T.alloc_buffer((16, {stride}), "{in_dtype}", scope="shared")
            B_shared = T.alloc_buffer((16, {stride}), "{in_dtype}", scope="shared")
            A_local = T.alloc_buffer((8,), "{in_dtype}", scope="local")
            B_local = T.alloc_buffer((8,), "{in_dtype}", scope="local")
            C_local = T.alloc_buffer((8,), "{acc}", scope="local")
            for i in range(8):
                A_shared[tx // 2, tx % 2 * 8 + i] = A[tx // 2, tx % 2 * 8 + i]
                B_shared[tx // 2, tx % 2 * 8 + i] = B[tx // 2, tx % 2 * 8 + i]
            for j, i in T.grid(2, 4):
                C_local[j * 4 + i] = C[tx // 4 + i // 2 * 8, j * 8 + tx % 4 * 2 + i % 2]
            T.tvm_storage_sync("shared")
            T.ptx_ldmatrix("{in_dtype}", T.bool(False), 4, ".b16", A_local.data, 0, A_shared.data, tx % 16 * {stride} + tx // 16 * 8)
            T.ptx_ldmatrix("{in_dtype}", T.bool({b_trans}), 4, ".b16", B_local.data, 0, B_shared.data, {b_row})
            for j in range(2):
                T.ptx_mma("{acc}", "m16n8k16", "row", "col", "{ab}", "{ab}", "{cc}", A_local.data, 0, B_local.data, j * 4, C_local.data, j * 4, T.bool(False))
            for j, i in T.grid(2, 4):
                C[tx // 4 + i // 2 * 8, j * 8 + tx % 4 * 2 + i % 2] = C_local[j * 4 + i]
'''


@pytest.mark.parametrize("in_dtype,acc", [("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")])
@pytest.mark.parametrize("b_trans", [True, False], ids=["B_kn_trans", "B_nk"])
def test_ldmatrix_and_mma_compute_a_tile(in_dtype, acc, b_trans):
    """The values are exact in every precision involved, so the comparison is exact: a single
    element in the wrong place of any fragment shows."""
    mod, code = emulated(mma_source(in_dtype, acc, b_trans))
    assert "tvms_ldmatrix_x4(" in code.source and ("tvms_ldmatrix_x4_trans(" in code.source) == b_trans
    scale = 4 if acc == "float16" else 8
    a, b_kn = small_values((16, 16), in_dtype, scale), small_values((16, 16), in_dtype, scale)
    b = b_kn if b_trans else np.ascontiguousarray(b_kn.T)
    c0 = small_values((16, 16), acc, scale)
    c = c0.copy()
    mod.run("f", a, b, c)
    expected = as_float64(a, in_dtype) @ as_float64(b_kn, in_dtype) + c0
    np.testing.assert_array_equal(c.astype(np.float64), expected)


def test_fp16_accumulators_round_once_per_mma():
    """fp16 accumulators with values no longer exact in half: within half a unit in the last
    place of each result (the emulator rounds the float sum of a k-step once)."""
    mod, _ = emulated(mma_source("float16", "float16"))
    a, b = (RNG.uniform(-1, 1, (16, 16)).astype(np.float16) for _ in range(2))
    c = np.zeros((16, 16), np.float16)
    mod.run("f", a, b, c)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(c, exact.astype(np.float32).astype(np.float16))


def fragment_mma_source(kind: str) -> str:
    """mma.sync with its fragments loaded from global memory by the PTX ISA's formulas (groupID
    g = lane / 4, threadID_in_group t = lane % 4), no ldmatrix involved. fp16 m16n8k16: A
    register i holds row g + 8*(i%2), columns 2t + 8*(i/2) and +1; B register i rows 2t + 8i
    and +1, column g. tf32 m16n8k8: A register i row g + 8*(i%2), column t + 4*(i/2); B register
    i row t + 4i, column g. C: element i at row g + 8*(i/2), column 2t + i%2."""
    if kind == "fp16":
        k, dt, regs = 16, "float16", (8, 4)
        loads = '''for i, h in T.grid(4, 2):
                A_local[i * 2 + h] = A[tx // 4 + i % 2 * 8, tx % 4 * 2 + i // 2 * 8 + h]
            for i, h in T.grid(2, 2):
                B_local[i * 2 + h] = B[tx % 4 * 2 + i * 8 + h, tx // 4]'''
    else:
        k, dt, regs = 8, "float32", (4, 2)
        loads = '''for i in range(4):
                A_local[i] = A[tx // 4 + i % 2 * 8, tx % 4 + i // 2 * 4]
            for i in range(2):
                B_local[i] = B[tx % 4 + i * 4, tx // 4]'''
    return f'''
@T.prim_func
def f(A: T.Buffer((16, {k}), "{dt}"), B: T.Buffer(({k}, 8), "{dt}"), C: T.Buffer((16, 8), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("warp"):
            A_local = T.alloc_buffer(({regs[0]},), "{dt}", scope="local")
            B_local = T.alloc_buffer(({regs[1]},), "{dt}", scope="local")
            C_local = T.alloc_buffer((4,), "float32", scope="local")
            {loads}
            for i in range(4):
                C_local[i] = C[tx // 4 + i // 2 * 8, tx % 4 * 2 + i % 2]
            T.ptx_mma("float32", "m16n8k{k}", "row", "col", "{kind}", "{kind}", "fp32", A_local.data, 0, B_local.data, 0, C_local.data, 0, T.bool(False))
            for i in range(4):
                C[tx // 4 + i // 2 * 8, tx % 4 * 2 + i % 2] = C_local[i]
'''


def test_mma_fragments_follow_the_isa_layout():
    mod, _ = emulated(fragment_mma_source("fp16"))
    a, b, c0 = small_values((16, 16), "float16"), small_values((16, 8), "float16"), small_values((16, 8), "float32")
    c = c0.copy()
    mod.run("f", a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64) + c0)


def tf32(x: np.ndarray) -> np.ndarray:
    """fp32 rounded to tf32 as cvt.rna does: 10 mantissa bits, to nearest, ties away from zero."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_mma_rounds_its_inputs_to_nearest_away():
    """1 + 2^-11 lies halfway between two tf32 values: cvt.rna makes it 1 + 2^-10, where
    truncating (what the tensor core does to raw fp32) or rounding to even would give 1."""
    mod, code = emulated(fragment_mma_source("tf32"))
    assert "tvms_mma_m16n8k8_f32_tf32(" in code.source
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    b = RNG.standard_normal((8, 8)).astype(np.float32)
    a[0, :] = 1 + 2.0**-11
    b[:, 0] = [1, 0, 0, 0, 0, 0, 0, 0]
    c0 = RNG.standard_normal((16, 8)).astype(np.float32)
    c0[0, 0] = 0      # so that c[0, 0] is the product alone (a random c0 would round the sum)
    c = c0.copy()
    mod.run("f", a, b, c)
    np.testing.assert_allclose(c, tf32(a).astype(np.float64) @ tf32(b).astype(np.float64) + c0, rtol=1e-5, atol=1e-5)
    assert c[0, 0] == np.float32(1 + 2.0**-10)


# ----------------------------------------------------------------------------- ldmatrix alone


def ldmatrix_source(num: int, trans: bool) -> str:
    """Lane l gives the row address of tile row (7 l) % 16 at column 8 ((l / 4) % 2); lanes past
    the 8 * num the instruction reads give a misaligned address (element 1), which it ignores.
    Out[l] holds lane l's registers."""
    return f'''
@T.prim_func
def f(A: T.Buffer((16, 16), "float16"), Out: T.Buffer((32, {2 * num}), "float16")):
    T.func_attr({{"tir.noalias": True}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("warp"):
            A_shared = T.alloc_buffer((16, 16), "float16", scope="shared")
            R = T.alloc_buffer(({2 * num},), "float16", scope="local")
            for i in range(8):
                A_shared[tx // 2, tx % 2 * 8 + i] = A[tx // 2, tx % 2 * 8 + i]
            T.tvm_storage_sync("shared")
            T.ptx_ldmatrix("float16", T.bool({trans}), {num}, ".b16", R.data, 0, A_shared.data, T.if_then_else(tx < {8 * num}, tx * 7 % 16 * 16 + tx // 4 % 2 * 8, 1))
            for i in range({2 * num}):
                Out[tx, i] = R[i]
'''


def ldmatrix_expected(tile: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """Per the PTX ISA: matrix j's rows come from lanes 8j..8j+7; lane L's register j holds row
    L/4, columns 2(L%4) and +1 of matrix j (.trans: rows 2(L%4) and +1, column L/4)."""
    out = np.zeros((32, 2 * num), tile.dtype)
    for j in range(num):
        m = np.stack([tile[(l * 7) % 16, (l // 4) % 2 * 8:(l // 4) % 2 * 8 + 8] for l in range(8 * j, 8 * j + 8)])
        for lane in range(32):
            for h in range(2):
                r, c = (2 * (lane % 4) + h, lane // 4) if trans else (lane // 4, 2 * (lane % 4) + h)
                out[lane, 2 * j + h] = m[r, c]
    return out


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_gives_each_lane_its_fragment(num, trans):
    mod, code = emulated(ldmatrix_source(num, trans))
    assert f"tvms_ldmatrix_x{num}{'_trans' if trans else ''}(" in code.source
    tile = np.arange(256, dtype=np.float16).reshape(16, 16)
    out = np.zeros((32, 2 * num), np.float16)
    mod.run("f", tile, out)
    np.testing.assert_array_equal(out, ldmatrix_expected(tile, num, trans))


def test_ldmatrix_rows_must_be_aligned_and_in_shared_memory():
    row = "tx * 7 % 16 * 16 + tx // 4 % 2 * 8"
    text = ldmatrix_source(4, False).replace(row, row + " + tx // 31")       # lane 31: 2 bytes off
    mod, _ = emulated(text)
    out = np.zeros((32, 8), np.float16)
    with pytest.raises(EmulationError, match=r"ldmatrix row address .* is not 16-byte aligned .*thread \(31, 0, 0\)"):
        mod.run("f", np.zeros((16, 16), np.float16), out)
    hand = EmulatedModule(r'''
extern "C" __global__ void __launch_bounds__(32) from_global(const half* __restrict__ a, half* __restrict__ out) {
  __align__(16) half r[2];
  tvms_ldmatrix_x1(reinterpret_cast<unsigned*>(r), a + (threadIdx.x % 8) * 8);
  out[threadIdx.x] = r[0];
}
''')
    with pytest.raises(EmulationError, match="ldmatrix row address .* is not in shared memory"):
        hand.launch("from_global", 1, 32, np.zeros(64, np.float16), np.zeros(32, np.float16))


def test_half_a_warp_at_an_mma_is_an_error():
    """mma.sync is warp-collective: lanes that skip it leave the others waiting for them."""
    loop = "            for j in range(2):\n"
    text = mma_source().replace(loop + "                T.ptx_mma", loop + "                if tx < 16:\n"
                                "                    T.ptx_mma")
    mod, _ = emulated(text)
    args = [np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float32)]
    with pytest.raises(EmulationError, match=r"warp shuffle \(0xffffffff, ...\) in warp 0 .* lane 16, named by the "
                                             r"mask"):
        mod.run("f", *args)


# ----------------------------------------------------------------------------- cp.async


def cp_async_source(nbytes: int = 16, *, predicate: str = "", commit: bool = True, wait: bool = True,
                    two_groups: bool = False) -> str:
    """One warp copies A (128 floats, 512 bytes) into shared memory with cp.async of ``nbytes``
    (copy c of lane l: bytes 16 c + ... coalesced per instruction), then, after a barrier, every
    lane reads it back into Out. ``predicate``: the zero fill's condition (lanes where it is
    false give a source past A's end, which must not be read); ``two_groups``: the second half
    of each lane's copies (8 bytes or less: two copies or more) is a second group, and Early holds
    the tile after ``wait_group(1)``."""
    per_copy = nbytes // 4
    copies = 512 // nbytes // 32
    pred = f", {predicate}" if predicate else ""
    src = f"(c * 32 + tx) * {per_copy}" + (f" + T.if_then_else({predicate}, 0, 192)" if predicate else "")
    group_split = f'''
                if c == {copies // 2 - 1}:
                    T.ptx_commit_group()''' if two_groups else ""
    early = '''
            T.ptx_wait_group(1)
            T.tvm_storage_sync("shared")
            for i in range(4):
                Early[i * 32 + tx] = S[i * 32 + tx]''' if two_groups else ""
    return f'''
@T.prim_func
def f(A: T.Buffer((128,), "float32"), Out: T.Buffer((128,), "float32"), Early: T.Buffer((128,), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("warp"):
            S = T.alloc_buffer((128,), "float32", scope="shared")
            for c in range({copies}):
                T.ptx_cp_async("float32", S.data, (c * 32 + tx) * {per_copy}, A.data, {src}, {nbytes}{pred}){group_split}
            {"T.ptx_commit_group()" if commit else "T.evaluate(0)"}{early}
            {"T.ptx_wait_group(0)" if wait else "T.evaluate(0)"}
            T.tvm_storage_sync("shared")
            for i in range(4):
                Out[i * 32 + tx] = S[i * 32 + tx]
'''


def run_copy(text: str, trace: bool = False):
    mod, code = emulated(text, trace)
    a = RNG.standard_normal(128).astype(np.float32)
    out, early = np.zeros(128, np.float32), np.zeros(128, np.float32)
    mod.run("f", a, out, early)
    return a, out, early, mod, code


@pytest.mark.parametrize("nbytes,level", [(16, "cg"), (8, "ca"), (4, "ca")])
def test_cp_async_copies_into_shared_memory(nbytes, level):
    a, out, _, _, code = run_copy(cp_async_source(nbytes))
    np.testing.assert_array_equal(out, a)
    assert f"tvms_cp_async{nbytes}((S + " in code.source
    assert f"cp.async.{level}.shared.global [%0], [%1], {nbytes};" in code.source
    assert "tvms_cp_async_commit();" in code.source and "tvms_cp_async_wait<0>();" in code.source


@pytest.mark.parametrize("nbytes", [16, 4])
def test_cp_async_zero_fills_where_its_predicate_is_false(nbytes):
    """Lanes where ``tx % 3 == 0`` copy nothing and write zeros; their source lies past A, in
    the emulator's guard bytes (NaN), so a read of it would show."""
    a, out, _, _, code = run_copy(cp_async_source(nbytes, predicate="tx % 3 != 0"))
    assert f"tvms_cp_async{nbytes}_zfill(" in code.source
    lane = (np.arange(128) // (nbytes // 4)) % 32
    np.testing.assert_array_equal(out, np.where(lane % 3 != 0, a, 0))


def test_reading_before_the_wait_reads_stale_shared_memory():
    """Two groups: after wait_group(1) the first group's copies are there and the second's are
    not yet (the emulator copies at the wait; shared memory starts as 0xff bytes, NaN); after
    wait_group(0) all are."""
    a, out, early, _, code = run_copy(cp_async_source(8, two_groups=True))
    assert "tvms_cp_async_wait<1>();" in code.source
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(early[:64], a[:64])
    assert np.isnan(early[64:]).all()


def test_a_missing_wait_group_gives_a_wrong_result():
    """Without ptx_wait_group the copies may still be in flight when the tile is read: the
    emulator makes that so, and the result is wrong (NaN), not right by luck."""
    a, out, _, _, _ = run_copy(cp_async_source(16, wait=False))
    assert not np.array_equal(out, a)
    assert np.isnan(out).all()


def test_copies_never_committed_are_not_waited_for():
    """wait_group waits for committed groups only, as in PTX."""
    _, out, _, _, _ = run_copy(cp_async_source(16, commit=False))
    assert np.isnan(out).all()


def test_cp_async_needs_shared_destination_and_aligned_addresses():
    hand = EmulatedModule(r'''
extern "C" __global__ void __launch_bounds__(32) to_global(const float* __restrict__ a, float* __restrict__ out) {
  tvms_cp_async4(out + threadIdx.x, a + threadIdx.x);
  tvms_cp_async_commit();
  tvms_cp_async_wait<0>();
}
extern "C" __global__ void __launch_bounds__(32) misaligned(const float* __restrict__ a, float* __restrict__ out) {
  __shared__ __align__(16) float s[160];
  tvms_cp_async16(s + threadIdx.x * 4 + 1, a + threadIdx.x * 4);
  tvms_cp_async_commit();
  tvms_cp_async_wait<0>();
  out[threadIdx.x] = s[threadIdx.x];
}
''')
    a, out = np.zeros(128, np.float32), np.zeros(128, np.float32)
    with pytest.raises(EmulationError, match="cp.async destination .* is not 4 bytes of shared memory"):
        hand.launch("to_global", 1, 32, a, out)
    with pytest.raises(EmulationError, match="cp.async of 16 bytes .* both addresses must be 16-byte aligned"):
        hand.launch("misaligned", 1, 32, a, out)


# ----------------------------------------------------------------------------- the CUDA C


def test_the_prelude_holds_only_the_helpers_used():
    src = codegen_cuda({"f": parse_func(mma_source())}).source
    assert src.count("#ifndef TVMS_CUDA_EMULATOR") == 1 and "#endif  // TVMS_CUDA_EMULATOR" in src
    assert "void tvms_ldmatrix_x4(" in src and "void tvms_ldmatrix_x4_trans(" in src
    assert "void tvms_mma_m16n8k16_f32_f16(" in src
    assert "__align__(16) half A_local[8];" in src and "__align__(16) float C_local[8];" in src
    for unused in ("tvms_ldmatrix_x1", "tvms_mma_m16n8k16_f16_f16", "tvms_cp_async", "tvms_to_tf32"):
        assert unused not in src
    assert src.index("#endif  // TVMS_CUDA_EMULATOR") < src.index('extern "C" __global__')
    plain = codegen_cuda({"f": parse_func(mma_source().split("            T.tvm_storage_sync")[0])}).source
    assert "TVMS_CUDA_EMULATOR" not in plain
    tf32_src = codegen_cuda({"f": parse_func(fragment_mma_source("tf32"))}).source
    assert "cvt.rna.tf32.f32" in tf32_src and tf32_src.index("tvms_to_tf32(float x)") < tf32_src.index(
        "void tvms_mma_m16n8k8_f32_tf32(")


def test_kernel_lines_account_for_the_helpers():
    out = codegen_cuda({"f": parse_func(mma_source())})
    first, last = out.kernel_lines["f_kernel"]
    lines = out.source.split("\n")
    assert lines[first - 1].startswith('extern "C" __global__ void __launch_bounds__(32) f_kernel(')
    assert lines[last - 2:last] == ["}", ""]


@pytest.mark.parametrize("change,message", [
    (('"row", "col", "fp16"', '"col", "col", "fp16"'), r"takes A row-major and B column-major"),
    (('"m16n8k16", "row"', '"m16n8k8", "row"'), r"ptx_mma m16n8k8 fp16 x fp16 -> fp32 is not supported"),
    (("C_local.data, j * 4, T.bool(False)", "C_local.data, j * 4, T.bool(True)"), r"saturate"),
    (("B_local.data, 0, B_shared.data", "B_local.data, 0, B.data"), r"ptx_ldmatrix: its source must be shared memory, "
                                                                     r"but 'B' is global memory"),
    (("A_local.data, 0, B_local.data", "A_shared.data, 0, B_local.data"), r"ptx_mma: its A fragment must be a "
                                                                          r"per-thread \('local'\) array"),
    (('T.bool(False), 4, ".b16", A_local', 'T.bool(False), 3, ".b16", A_local'), "loads 1, 2 or 4 matrices, not 3"),
])
def test_unsupported_forms_are_clear_errors(change, message):
    text = mma_source()
    assert change[0] in text
    with pytest.raises(BuildError, match=message):
        build_cuda({"f": parse_func(text.replace(change[0], change[1], 1))}, kind="source")


def test_cp_async_operands_are_checked():
    text = cp_async_source(16)
    with pytest.raises(BuildError, match="copies 4, 8 or 16 bytes, not 12"):
        build_cuda({"f": parse_func(text.replace("A.data, (c * 32 + tx) * 4, 16)", "A.data, (c * 32 + tx) * 4, 12)"))},
                   kind="source")
    with pytest.raises(BuildError, match="ptx_cp_async: its destination must be shared memory, but 'Out' is global"):
        build_cuda({"f": parse_func(text.replace("T.ptx_cp_async(\"float32\", S.data", "T.ptx_cp_async(\"float32\", "
                                                                                         "Out.data"))}, kind="source")
    with pytest.raises(BuildError, match="ptx_wait_group: the number of groups left pending must be a constant"):
        build_cuda({"f": parse_func(text.replace("T.ptx_wait_group(0)", "T.ptx_wait_group(tx)"))}, kind="source")


def test_older_architectures_are_refused():
    func = parse_func(mma_source())
    with pytest.raises(BuildError, match="mma.sync needs sm_80 or newer; the target architecture is sm_75"):
        build_cuda({"f": func}, "cuda -arch=sm_75", kind="source")
    with pytest.raises(BuildError, match="ldmatrix needs sm_75 or newer; the target architecture is sm_70"):
        build_cuda({"f": func}, "cuda -arch=sm_70", kind="source")
    only_ldmatrix = parse_func(ldmatrix_source(2, True))
    assert "tvms_ldmatrix_x2_trans(" in build_cuda({"f": only_ldmatrix}, "cuda -arch=sm_75", kind="source").source


# ----------------------------------------------------------------------------- NVRTC


def _nvrtc():
    from tvmscript.compiler import nvrtc

    try:
        nvrtc.nvrtc_version()
    except Exception as err:  # noqa: BLE001 - no NVRTC wheel here
        pytest.skip(f"NVRTC is not available: {err}")
    return nvrtc


def every_form() -> dict:
    funcs = {}
    for in_dtype, acc in (("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")):
        for trans in (True, False):
            name = f"mma_{PTX_NAMES[in_dtype]}_{PTX_NAMES[acc]}_{int(trans)}"
            funcs[name] = parse_func(mma_source(in_dtype, acc, trans))
    funcs["mma_tf32"] = parse_func(fragment_mma_source("tf32"))
    for num in (1, 2, 4):
        for trans in (False, True):
            funcs[f"ldmatrix_x{num}_{int(trans)}"] = parse_func(ldmatrix_source(num, trans))
    for nbytes in (4, 8, 16):
        funcs[f"copy{nbytes}"] = parse_func(cp_async_source(nbytes))
        funcs[f"copy{nbytes}_zfill"] = parse_func(cp_async_source(nbytes, predicate="tx % 3 != 0"))
    funcs["copy_groups"] = parse_func(cp_async_source(8, two_groups=True))
    return funcs


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_form(arch):
    """ptxas accepts the helpers' operands (a CUBIN, not only PTX), and the PTX has the
    instructions, each helper inlined."""
    _nvrtc()
    funcs = every_form()
    code = build_cuda(funcs, f"cuda -arch={arch}")
    assert code.cubin[:4] == b"\x7fELF" and set(code.functions) == set(funcs)
    ptx = build_cuda(funcs, f"cuda -arch={arch}", kind="ptx").ptx
    for instruction in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32",
                        "ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
                        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "cp.async.cg.shared.global",
                        "cp.async.ca.shared.global", "cp.async.commit_group", "cp.async.wait_group 1"):
        assert instruction in ptx, instruction
    assert ".func" not in ptx  # every helper inlined


def test_nvrtc_refuses_the_helpers_below_sm_80():
    """CUDA C printed without a known architecture still cannot be built for one too old."""
    nvrtc = _nvrtc()
    src = codegen_cuda({"f": parse_func(cp_async_source(16))}).source
    with pytest.raises(nvrtc.NVRTCError) as info:
        nvrtc.compile_cuda(src, "sm_75")
    assert "need sm_80 or newer" in info.value.log


# ----------------------------------------------------------------------------- counters


@pytest.mark.parametrize("stride,wavefronts", [(16, 16), (24, 8)])
def test_counters_mma_and_ldmatrix_bank_conflicts(stride, wavefronts):
    """Two ldmatrix x4 (8 phases of 8 rows) and two mma. Rows 32 bytes apart put rows r and r + 4
    of a matrix in the same banks (2 wavefronts a phase); 48 bytes apart, the 8 rows of a phase
    cover the 32 banks once."""
    mod, code = emulated(mma_source(stride=stride), trace=True)
    assert "tvms_trace_rows(" in code.source
    a, b, c0 = small_values((16, 16), "float16"), small_values((16, 16), "float16"), small_values((16, 16), "float32")
    c = c0.copy()
    mod.run("f", a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64) + c0)
    (k,) = mod.counters
    assert k.mma == 2 and k.tensor_flops == {"fp16": 2 * 2 * 16 * 8 * 16}
    assert (k.shared_load_requests, k.shared_load_wavefronts, k.shared_load_ideal) == (2, wavefronts, 8)


def test_counters_tf32_and_bf16_mma():
    mod, _ = emulated(fragment_mma_source("tf32"), trace=True)
    mod.run("f", np.ones((16, 8), np.float32), np.ones((8, 8), np.float32), np.zeros((16, 8), np.float32))
    assert mod.counters[0].mma == 1 and mod.counters[0].tensor_flops == {"tf32": 2 * 16 * 8 * 8}
    mod, _ = emulated(mma_source("bfloat16"), trace=True)
    mod.run("f", *(np.zeros((16, 16), t) for t in (np.uint16, np.uint16, np.float32)))
    assert mod.counters[0].tensor_flops == {"bf16": 2 * 2 * 16 * 8 * 16}


@pytest.mark.parametrize("nbytes,predicate", [(16, ""), (4, ""), (16, "tx < 16")])
def test_counters_cp_async(nbytes, predicate):
    """Each cp.async instruction of the warp reads 32 consecutive pieces: 512 bytes, 16 sectors,
    in one request per instruction (half of it with half the lanes' predicate false), and
    writes them to shared memory without conflicts."""
    a, out, _, mod, code = run_copy(cp_async_source(nbytes, predicate=predicate), trace=True)
    assert "tvms_trace_if(" in code.source if predicate else "tvms_trace_if(" not in code.source
    (k,) = mod.counters
    requests = 512 // nbytes // 32
    read = 256 if predicate else 512
    assert (k.global_load_requests, k.global_load_bytes, k.global_load_sectors) == (requests, read, read // 32)
    assert k.shared_store_requests == requests
    assert k.shared_store_wavefronts == k.shared_store_ideal == requests * max(1, nbytes // 4)
    lane = np.arange(128) // (nbytes // 4) % 32
    np.testing.assert_array_equal(out, np.where(lane < 16, a, 0) if predicate else a)


def test_counters_never_reuse_a_cp_async_load():
    """The same 512 bytes copied twice are two requests: cp.async is asm volatile, which no
    compiler merges, where two equal plain loads would be counted once."""
    text = cp_async_source(16).replace(
        "            T.ptx_commit_group()",
        "            for c in range(1):\n"
        "                T.ptx_cp_async(\"float32\", S.data, (c * 32 + tx) * 4, A.data, (c * 32 + tx) * 4, 16)\n"
        "            T.ptx_commit_group()")
    _, _, _, mod, _ = run_copy(text, trace=True)
    (k,) = mod.counters
    assert k.global_load_requests == 2 and k.reused_loads == 0


# ----------------------------------------------------------------------------- on the driver in use


@pytest.fixture(params=["emulated", pytest.param("real", marks=pytest.mark.cuda)])
def gpu(request, monkeypatch):
    """GPU 0, emulated (the NVRTC-built kernels run in the emulator) or real."""
    import tvmscript.runtime.cuda as cuda_rt
    from support.gpu_drivers import EmulatedDriver, install_driver

    if request.param == "emulated":
        install_driver(monkeypatch, EmulatedDriver())
    return cuda_rt._driver()


@pytest.mark.parametrize("in_dtype,acc", [("float16", "float32"), ("float16", "float16")])
def test_mma_kernel_on_the_gpu(gpu, in_dtype, acc):
    """The ldmatrix + mma kernel and the cp.async one through `tvms.compile` and the runtime."""
    _nvrtc()
    mod = tvms.IRModule({"f": parse_func(mma_source(in_dtype, acc, b_trans=True))})
    scale = 4 if acc == "float16" else 8
    a, b, c0 = (small_values((16, 16), d, scale) for d in (in_dtype, in_dtype, acc))
    dev = tvms.cuda(0)
    args = [tvms.nd.array(x, dev) for x in (a, b, c0)]
    tvms.compile(mod, target="cuda")["f"](*args)
    np.testing.assert_array_equal(args[2].numpy().astype(np.float64),
                                  a.astype(np.float64) @ b.astype(np.float64) + c0)
    copy = tvms.IRModule({"f": parse_func(cp_async_source(8, predicate="tx % 3 != 0", two_groups=True))})
    x = RNG.standard_normal(128).astype(np.float32)
    out = [tvms.nd.array(np.zeros(128, np.float32), dev) for _ in range(2)]
    tvms.compile(copy, target="cuda")["f"](tvms.nd.array(x, dev), *out)
    lane = np.arange(128) // 2 % 32
    np.testing.assert_array_equal(out[0].numpy(), np.where(lane % 3 != 0, x, 0))
