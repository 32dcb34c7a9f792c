"""The default fp16 matmul schedule on sm_80 and later: mma.sync m16n8k16 with ldmatrix operands
and a 4-stage cp.async pipeline (dlight.gpu.MatmulTensorCore, lower_gpu.software_pipeline,
lower_gpu.async_copy, compiler.mma_tiles), held to its design without a GPU: the CUDA C and
PTX it prints, its results in the emulator against the CPU, the emulator's counters (no bank
conflicts in the operand loads, coalesced copies) and ptxas's report (no spills)."""

from __future__ import annotations

import re

import numpy as np

import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.kernel_resources import resources_of
from support.cuda_check import (
    batch_matmul_src, conv2d_src, matmul_src, nhwc_conv2d_src, prim_funcs_of, relax_prim_funcs, scheduled_by,
    square_matmul_src,
)
from support.cuda_counters import count
from support.cuda_emulator import compare_with_cpu

SM90 = "cuda -arch=sm_90"


def source_of(src: str, target: str = SM90) -> str:
    return build_cuda(prim_funcs_of(tvms.parse(src)), target, kind="source").source


def test_the_default_fp16_schedule_is_mma_sync_ldmatrix_and_a_4_stage_cp_async_pipeline():
    src = source_of(square_matmul_src(512, "float16"))
    assert "tvms_mma_m16n8k16" in src and "tvms_ldmatrix_x4" in src and "tvms_cp_async16(" in src
    # Four stages: the copies of step k + 3 are committed before step k waits for its own.
    waits = re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", src)
    assert waits and all(w == "3" for w in waits), waits
    assert re.search(r"% 4\) \* \d+", src), "shared tiles in 4 versions"
    assert "nvcuda::wmma" not in src
    ptx = build_cuda(prim_funcs_of(tvms.parse(square_matmul_src(512, "float16"))), SM90, kind="ptx").ptx
    assert "mma.sync.aligned.m16n8k16.row.col" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4" in ptx and "cp.async.cg.shared.global" in ptx
    assert "cp.async.wait_group 3" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("acc", ["float32", "float16"])
def test_no_register_spills(arch, acc):
    """ptxas's report for the 4096^3 benchmark matmul (128x128 tiles, 4 warps): the 128
    accumulators of a warp's 64x64 tile per lane stay in registers, and a multiprocessor
    holds two blocks (registers and the 64 KiB of 4 pipeline stages allow it)."""
    code = build_cuda(prim_funcs_of(tvms.parse(matmul_src(4096, 4096, 4096, acc))), f"cuda -arch={arch}")
    (res,) = resources_of(code).values()
    assert res.ptxas.spill_store_bytes == 0 and res.ptxas.spill_load_bytes == 0 and res.ptxas.stack_bytes == 0
    assert res.occupancy.warps_per_block == 4 and res.occupancy.blocks >= 2
    assert res.dyn_shared_bytes == 4 * (128 * 32 + 32 * 128) * 2


@pytest.mark.parametrize("shape, b_transposed, acc", [
    ((128, 128, 64), False, "float32"),
    ((256, 256, 512), False, "float32"),     # 16 steps of K: prologue, steady state, epilogue
    ((256, 128, 256), True, "float32"),      # x @ w.T: B's tile K-major, ldmatrix without .trans
    ((2048, 128, 64), False, "float32"),     # a smaller tile gives more blocks
    ((128, 256, 96), True, "float16"),       # fp16 accumulators
])
def test_mma_matmuls_match_the_cpu(shape, b_transposed, acc):
    m, n, k = shape
    src = matmul_src(m, n, k, acc, b_transposed)
    assert "tvms_mma_m16n8k16" in source_of(src)
    tol = 2e-2 if acc == "float16" else 1e-3
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=tol, atol=tol).values()
    assert result.ok, result


BATCH_MATMUL = batch_matmul_src(128, 256, 128, 32, b_transposed=False)   # 128 tiles of 256x128


def test_the_default_tiling_is_128x128_of_4_warps_and_256x128_of_8_is_a_knob():
    """Enough tiles to give each multiprocessor one (128 batches of 256 x 128) take 128x128 of 4
    warps of 64x64 (faster than 256x128 of 8 on every product timed on an H200); the 256x128
    tiling, 8 warps of 64x64 and a block of 256 threads, is still there for the asking."""
    from tvmscript.compiler.dlight.gpu import MatmulTensorCore
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling

    assert "__launch_bounds__(128)" in source_of(BATCH_MATMUL)
    # (2 batches are enough to check the knob's kernel: one tiling is taken whatever the count)
    small = batch_matmul_src(2, 256, 128, 32, b_transposed=False)
    funcs = scheduled_by(MatmulTensorCore(mma_tilings=(Tiling(4, 2, 4, 4),)), small, SM90)
    code = build_cuda(funcs, SM90, kind="source")
    assert "__launch_bounds__(256)" in code.source and "tvms_mma_m16n8k16" in code.source
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


def test_bfloat16_operands():
    src = matmul_src(128, 128, 64, "float32", dtype="bfloat16")
    assert "tvms_mma_m16n8k16_f32_bf16" in source_of(src)
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


def test_the_epilogue_is_applied_to_the_accumulators_in_registers():
    src = matmul_src(128, 128, 64, "float32", epilogue=True)
    text = source_of(src)
    assert "tvms_mma_m16n8k16" in text and "max(" in text
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


def test_a_k_of_whole_chunks_but_not_whole_steps_is_copied_by_cp_async():
    """TF32 with K = 72 floats (18 chunks of 16 bytes; steps of 32): the padding's predicate on
    K, per element in the copy loop, is one value for each chunk (`async_copy._lane_uniform`),
    so the copies are zero-filling cp.async of 16 bytes, not element by element (which
    conflicted 4 ways in shared memory)."""
    from support.cuda_counters import count

    target = SM90 + " -allow_tf32=1"
    src = matmul_src(256, 256, 72, b_transposed=True, dtype="float32")
    assert "tvms_cp_async16_zfill(" in source_of(src, target)
    funcs = prim_funcs_of(tvms.parse(src))
    (c,) = count(funcs, "mm", target=target)
    assert c.shared_store_wavefronts == c.shared_store_ideal
    (result,) = compare_with_cpu(funcs, target=target, rtol=2e-2, atol=2e-2).values()
    assert result.ok, result


@pytest.mark.parametrize("case", ["fp32_acc", "b_k_major", "fp16_acc", "bf16", "epilogue", "tf32"])
def test_tiles_that_do_not_divide_the_product_go_through_a_shared_tile_of_c(case):
    """Where no tiling divides I and J (200 x 136, 77 rows), mma.sync still computes the
    padded product (the copies zero-fill past the end); each warp stores its accumulators
    into a shared tile of C, from which all threads write C with the epilogue, the padding's
    rows and columns skipped. The tile's rows are 8 elements longer, so that a half-warp's
    pairs of columns hit every bank once. Against the CPU with each copy landing at its wait
    and at its issue; the counters show no bank conflict in the shared accesses."""
    from support.cuda_counters import count

    target, tol = SM90, 1e-3
    src = {"fp32_acc": lambda: matmul_src(200, 136, 72),
           "b_k_major": lambda: matmul_src(77, 256, 64, b_transposed=True),
           "fp16_acc": lambda: matmul_src(300, 136, 96, "float16", True),
           "bf16": lambda: matmul_src(200, 136, 72, dtype="bfloat16"),
           "epilogue": lambda: matmul_src(200, 136, 72, b_transposed=True, epilogue=True),
           "tf32": lambda: matmul_src(200, 136, 72, dtype="float32")}[case]()
    if case == "tf32":
        target, tol = SM90 + " -allow_tf32=1", 2e-2
    elif case == "fp16_acc":
        tol = 2e-2
    funcs = prim_funcs_of(tvms.parse(src))
    text = source_of(src, target)
    assert "tvms_mma_m16n8k" in text and "nvcuda::wmma" not in text and "__syncthreads" in text
    for eager in (False, True):
        for result in compare_with_cpu(funcs, target=target, rtol=tol, atol=tol, eager_copies=eager).values():
            assert result.ok, result
    for c in count(funcs, "mm", target=target):
        assert c.shared_load_wavefronts == c.shared_load_ideal
        assert c.shared_store_wavefronts == c.shared_store_ideal



def test_which_padding_predicates_are_one_value_for_a_copys_lanes():
    """`async_copy._lane_uniform` on the lanes v of an 8-wide copy starting at a multiple of 8
    (x = 8t): the row of a run of 32-element rows, (x + v) // 32 < c, is one value (lane 0's);
    (x + v) // 4 < c is not (lanes 0-3 and 4-7 are different rows), nor is (x + v) % 8 < 3,
    nor a row that falls as v grows."""
    from tvmscript.compiler.lower_gpu.async_copy import _lane_uniform
    from tvmscript.ir import tir
    from tvmscript.ir.tir_visitor import vars_in

    t, v, c = tir.Var("int32", "t"), tir.Var("int32", "v"), tir.IntImm("int32", 49)
    x = tir.Add("int32", tir.Mul("int32", t, tir.IntImm("int32", 8)), v)
    zero = tir.IntImm("int32", 0)

    def uniform(e):
        return _lane_uniform(tir.LT("bool", e, c), v, zero, 8)

    row = uniform(tir.FloorDiv("int32", x, tir.IntImm("int32", 32)))
    assert row is not None and v not in vars_in([row])
    assert uniform(tir.FloorDiv("int32", x, tir.IntImm("int32", 4))) is None
    assert uniform(tir.FloorMod("int32", x, tir.IntImm("int32", 8))) is None
    falling = tir.FloorDiv("int32", tir.Sub("int32", tir.Mul("int32", t, tir.IntImm("int32", 8)), v),
                           tir.IntImm("int32", 32))
    assert uniform(falling) is None


def test_a_padded_tiling_leaves_room_for_its_shared_tile_of_c():
    """A padded product keeps 2 pipeline stages and its tile of C in shared memory: a TF32
    256x128 tile of C (136 KiB) beside two 60 KiB stages would exceed sm_90's 227 KiB, a launch
    the GPU refuses, so the 128x128 tiling is taken instead (the emulator checks the launch's
    shared memory against the GPU's)."""
    from tvmscript.compiler import dlight as dl
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling

    target = SM90 + " -allow_tf32=1"
    rule = dl.gpu.MatmulTensorCore(mma_tilings=(Tiling(4, 2, 4, 4), Tiling(2, 2, 4, 4)))
    funcs = dict(scheduled_by(rule, tvms.parse(matmul_src(250, 250, 64, dtype="float32")), target))
    (res,) = resources_of(build_cuda(funcs, target)).values()
    assert res.block == (32, 4, 1) and res.occupancy.blocks >= 1, res
    (result,) = compare_with_cpu(funcs, target=target, rtol=2e-2, atol=2e-2).values()
    assert result.ok, result


def test_small_dividing_tiles_give_way_to_padded_ones_where_the_model_says_so():
    """resnet18's last convolutions at batch 32 are 1568 x 512 x 4608 products: only 32-row
    tiles divide 1568 (32 x 49), and 392 blocks of 32x64 read A 8 times and B 49 times. The
    tiling model (`_tiling_cost`: L2 traffic, fragment reads, tensor work, over waves) puts
    padded 64x128 tiles (1600 rows, 100 blocks) well ahead, so the product takes them, through
    a shared tile of C, its copies of A zero-filling ``cp.async`` (the predicate on a copy's
    row is one for its 16 bytes); 4096^3 and the GPT block's 4096 x 2304 x 768, which 128x128
    divides, keep it and write C straight from the registers."""
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import (
        MMA_TILINGS, MODEL_MARGIN, Tiling, _gpu_model, _tiling_cost,
    )
    from tvmscript.target import Target

    h100 = _gpu_model(Target(SM90))
    assert h100.arch == "sm_90" and _gpu_model(Target("cuda -arch=sm_75")) is None
    small, padded = Tiling(2, 2, 1, 2), Tiling(2, 2, 2, 4)
    for elem_bytes, c_bytes in ((4, 4), (2, 4)):
        shape = ((1, 1568, 512), 4608, elem_bytes)
        assert _tiling_cost(padded, *shape, c_bytes, h100) * MODEL_MARGIN < _tiling_cost(small, *shape, 0, h100)
    for target, dtype in ((SM90 + " -allow_tf32=1", "float32"), (SM90, "float16")):
        code = build_cuda(prim_funcs_of(tvms.parse(matmul_src(1568, 512, 4608, dtype=dtype, b_transposed=True))),
                          target, kind="source")
        text = code.source
        assert "__launch_bounds__(128)" in text and "C_reindex_pad_shared" in text
        assert [tuple(map(int, ln.grid)) for ln in code.functions["mm"].launches] == [(4, 25, 1)]   # 64x128
        assert "tvms_cp_async16_zfill((A_reindex_pad_shared" in text and "*(uint4*)(A_reindex" not in text
    for m, n, k in ((4096, 4096, 4096), (4096, 2304, 768)):
        text = source_of(matmul_src(m, n, k), SM90)
        assert "_pad_shared" not in text and "tvms_mma_m16n8k16" in text
    assert MMA_TILINGS[0] == Tiling(2, 2, 4, 4)
    # A tiling that divides the product never goes through the shared tile of C: 6272 x 256
    # in TF32, whose only padded candidate (256x128) does not fit beside its tile of C.
    text = source_of(matmul_src(6272, 256, 2304, dtype="float32", b_transposed=True), SM90 + " -allow_tf32=1")
    assert "_pad_shared" not in text and "tvms_mma_m16n8k8" in text


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_padded_convolution_copies_its_input_with_cp_async(dtype):
    """resnet18's last stage in miniature: 98 output pixels (2 x 7 x 7), which no tiling
    divides. Each 16-byte copy of the im2col input is predicated on the padding past the last
    pixel and on the convolution's own padding, both functions of the copy's pixel, which is
    one for its 16 bytes (`async_copy._lane_uniform`): zero-filling cp.async, none element by
    element. Against the CPU with each copy landing at its wait and at its issue."""
    from tvmscript import relax

    target, tol = (SM90 + " -allow_tf32=1", 2e-2) if dtype == "float32" else (SM90, 1e-3)
    src = nhwc_conv2d_src((2, 7, 7, 64), (3, 3, 64, 128), dtype)
    funcs = prim_funcs_of(relax.transform.LegalizeOps()(tvms.parse(src)))
    text = build_cuda(funcs, target, kind="source").source
    assert "_pad_shared" in text and "tvms_cp_async16_zfill((PaddedInput_reindex_pad_shared" in text
    assert not re.search(r"PaddedInput_reindex_pad_shared\[[^\n]*\] = ", text)
    for eager in (False, True):
        (result,) = compare_with_cpu(funcs, target=target, rtol=tol, atol=tol, eager_copies=eager).values()
        assert result.ok, result


@pytest.mark.parametrize("b_transposed", [False, True])
def test_counters_no_bank_conflicts_coalesced_copies_and_one_mma_per_8x16x16(b_transposed):
    """The shared tiles are XOR-swizzled, not padded (`lower_gpu.permuted_layout`): ldmatrix
    (plain for A and for B of x @ w.T, .trans for B of A @ B) and the cp.async copies hit
    every bank once."""
    n = 256
    (c,) = count(prim_funcs_of(tvms.parse(matmul_src(n, n, n, b_transposed=b_transposed))), "mm", target=SM90)
    assert c.mma * 2 * 16 * 8 * 16 == 2 * n ** 3 and c.fma == 0
    assert c.shared_load_requests > 0 and c.shared_load_wavefronts == c.shared_load_ideal      # ldmatrix
    assert c.shared_store_wavefronts == c.shared_store_ideal                                   # cp.async
    assert c.sectors_per_request() == c.ideal_sectors_per_request()                            # 16-byte runs
    # C: each lane stores its pairs of columns as one float2; a warp's store covers 8 rows of
    # 32 bytes, every sector it touches full.
    assert c.global_store_bytes == 4 * n * n and c.global_store_sectors * 32 == c.global_store_bytes


CONV_FP16 = conv2d_src((1, 32, 16, 16), (64, 32, 3, 3), "float16", "float32")


def test_a_half_precision_convolution_is_an_implicit_gemm_on_mma_sync():
    """What ToMixedPrecision leaves of a convolution (fp16 operands, fp32 out): the canonical
    form reads the input through the im2col index (I = output pixels, J = output channels, K =
    input channels x kernel window), so the same mma.sync schedule applies."""
    from tvmscript import relax

    mod = relax.transform.LegalizeOps()(tvms.parse(CONV_FP16))
    funcs = prim_funcs_of(mod)
    assert "tvms_mma_m16n8k16_f32_f16" in build_cuda(funcs, SM90, kind="source").source
    (result,) = compare_with_cpu(funcs, target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


def _conv_module(dtype: str, weights: str = "constant") -> "tvms.ir.IRModule":
    """A 3x3 convolution of 64 channels on 8x8 pixels in NCHW; its weights a bound constant
    (cast to ``dtype`` as ToMixedPrecision leaves it for half precision) or a parameter."""
    from tvmscript import relax

    rng = np.random.default_rng(0)
    x = relax.Var("x", relax.TensorStructInfo((2, 64, 8, 8), dtype))
    w_param = relax.Var("w", relax.TensorStructInfo((64, 64, 3, 3), dtype))
    bb = relax.BlockBuilder()
    params = [x] if weights == "constant" else [x, w_param]
    with bb.function("main", params):
        with bb.dataflow():
            if weights == "constant":
                w = bb.emit(relax.op.astype(relax.const(rng.standard_normal((64, 64, 3, 3)).astype("float32")), dtype))
            else:
                w = w_param
            y = bb.emit_output(relax.op.nn.conv2d(x, w, padding=[1, 1, 1, 1], out_dtype="float32"))
        bb.emit_func_output(y)
    return bb.get()


def _conv_layouts(mod) -> list:
    from tvmscript.compiler.transform._common import op_name, walk_relax

    found = []
    walk_relax(mod["main"], lambda n: found.append(n.attrs["data_layout"]) if op_name(n) == "relax.nn.conv2d" else None)
    return found


@pytest.mark.parametrize("dtype, target, weights, layout", [
    ("float16", "cuda", "constant", "NHWC"),             # on tensor cores: channels contiguous along K
    ("bfloat16", "cuda", "constant", "NHWC"),
    ("float32", "cuda", "constant", "NCHW"),             # CUDA cores: read along the pixels
    ("float32", "cuda -allow_tf32=1", "constant", "NHWC"),
    ("float16", "cuda", "parameter", "NCHW"),            # would be transposed on every call
    ("float16", "llvm", "constant", "NCHW"),             # the CPU's choice is channels_last_for_cpu's
])
def test_convolutions_on_tensor_cores_are_computed_in_nhwc(dtype, target, weights, layout):
    from tvmscript.compiler.transform import ChannelsLastForTensorCores

    assert _conv_layouts(ChannelsLastForTensorCores(target)(_conv_module(dtype, weights))) == [layout]


def test_an_nhwc_half_precision_convolution_copies_16_bytes_at_a_time_and_matches_the_cpu():
    """The default CUDA pipeline's NHWC convolution: K (kernel row, column, channel) runs along
    the channels, so the input's tile is copied with cp.async 16 bytes a thread; the kernels
    (the layout transposes, the convolution) match the CPU's."""
    from tvmscript import relax

    mod = relax.get_pipeline("default", "cuda")(_conv_module("float16"))
    funcs = prim_funcs_of(mod)
    conv = next(n for n in funcs if "conv2d" in n)
    src = build_cuda({conv: funcs[conv]}, SM90, kind="source").source
    assert "tvms_mma_m16n8k16_f32_f16" in src and src.count("tvms_cp_async16(") >= 2
    results = compare_with_cpu(funcs, target=SM90, rtol=2e-2, atol=2e-2)
    assert results and all(r.ok for r in results.values()), results


TF32 = "cuda -arch=sm_90 -allow_tf32=1"


def test_tf32_is_off_by_default():
    src = matmul_src(256, 256, 256, "float32", dtype="float32")
    assert "m16n8k8" not in source_of(src)
    assert "tvms_mma_m16n8k8_f32_tf32" in source_of(src, TF32)


def test_tf32_matmul_is_mma_sync_m16n8k8_with_rounded_operands():
    funcs = prim_funcs_of(tvms.parse(matmul_src(512, 512, 512, "float32", dtype="float32")))
    ptx = build_cuda(funcs, TF32, kind="ptx").ptx
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx and "cvt.rna.tf32.f32" in ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 2" in ptx     # TF32: 3 stages


def test_a_short_k_loop_keeps_no_more_stages_than_it_has_steps_plus_one():
    """Attention's scores have K = 64: 2 steps of 32, both copies in flight from the start with
    3 stages; a fourth would only hold 16 KiB more shared memory a block."""
    src = source_of(matmul_src(2048, 1024, 64, "float32"))
    waits = re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", src)
    assert waits and all(w == "2" for w in waits), waits
    assert re.search(r"% 3\) \* \d+", src), "shared tiles in 3 versions"


@pytest.mark.parametrize("arch, stages", [("sm_90", 3), ("sm_80", 3), ("sm_86", 2)])
def test_the_pipeline_keeps_to_the_gpus_shared_memory(arch, stages):
    """A TF32 128x128 tile pair takes up to 40 KiB a stage (its rows padded): TF32's 3 stages
    where a block may have 227 KiB (sm_90) or 163 (sm_80), 2 where it may have 99 (sm_86),
    so that the kernel launches on every GPU with mma.sync."""
    from tvmscript.compiler import dlight as dl
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling

    target = f"cuda -arch={arch} -allow_tf32=1"
    rule = dl.gpu.MatmulTensorCore(mma_tilings=(Tiling(2, 2, 4, 4),))
    funcs = dict(scheduled_by(rule, tvms.parse(matmul_src(2048, 1024, 512, "float32", dtype="float32")), target))
    code = build_cuda(funcs, target, kind="source")
    (launch,) = code.functions["mm"].launches
    assert launch.block[:2] == ("32", "4"), launch
    limit = {"sm_90": 227, "sm_80": 163, "sm_86": 99}[arch] * 1024
    assert stages * 32 * 1024 < int(launch.dyn_shared_bytes) <= limit, launch
    waits = re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", code.source)
    assert waits and all(w == str(stages - 1) for w in waits), waits


@pytest.mark.parametrize("arch, warps", [("sm_90", "8"), ("sm_86", "4")])
def test_tf32_takes_256x128_of_8_warps_where_two_stages_of_it_fit(arch, warps):
    """TF32's preference (256x128 of 8 warps, 3 stages: 180 KiB on an sm_90); on an sm_86 even
    2 stages of 256x128 (120 KiB) do not fit a block's 99 KiB: 128x128 there."""
    funcs = prim_funcs_of(tvms.parse(matmul_src(4096, 1024, 512, "float32", dtype="float32")))  # 128 tiles
    code = build_cuda(funcs, f"cuda -arch={arch} -allow_tf32=1", kind="source")
    (launch,) = code.functions["mm"].launches
    assert launch.block[:2] == ("32", warps), launch


@pytest.mark.parametrize("shape, b_transposed", [((128, 128, 64), False), ((256, 256, 512), False),
                                                 ((256, 128, 96), True)])
def test_tf32_matmuls_match_the_cpu_to_tf32_precision(shape, b_transposed):
    src = matmul_src(*shape, "float32", b_transposed, dtype="float32")
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=TF32, rtol=1e-2, atol=1e-2).values()
    assert result.ok, result


def test_tf32_rounds_away_what_a_10_bit_mantissa_cannot_hold():
    """The precision TF32 costs: 1 + 2^-12 is 1 in TF32, so with B all ones each element of
    C is K, where float32 gives K (1 + 2^-12)."""
    m = n = 128
    k = 64
    funcs = prim_funcs_of(tvms.parse(matmul_src(m, n, k, "float32", dtype="float32")))
    a = np.full((m, k), 1 + 2.0 ** -12, "float32")
    b = np.ones((k, n), "float32")
    given = {"mm": {"A": a, "B": b, "C": np.zeros((m, n), "float32")}}
    (result,) = compare_with_cpu(funcs, target=TF32, given=given, rtol=0, atol=0).values()
    np.testing.assert_array_equal(result.gpu["C"], np.full((m, n), k, "float32"))
    np.testing.assert_allclose(result.cpu["C"], k * (1 + 2.0 ** -12), rtol=1e-7)


def test_tf32_operand_loads_are_free_of_bank_conflicts_and_do_not_spill():
    n = 256
    for b_transposed in (False, True):
        src = matmul_src(n, n, n, "float32", b_transposed, dtype="float32")
        (c,) = count(prim_funcs_of(tvms.parse(src)), "mm", target=TF32)
        assert c.mma * 2 * 16 * 8 * 8 == 2 * n ** 3 and c.fma == 0
        assert c.shared_load_wavefronts == c.shared_load_ideal, b_transposed
    code = build_cuda(prim_funcs_of(tvms.parse(matmul_src(4096, 4096, 4096, "float32", dtype="float32"))), TF32)
    (res,) = resources_of(code).values()
    assert res.ptxas.spill_store_bytes == 0 and res.ptxas.stack_bytes == 0


def test_a_float32_convolution_takes_tf32_tensor_cores_when_allowed():
    from tvmscript import relax

    conv = conv2d_src((1, 32, 16, 16), (64, 32, 3, 3), "float32")
    funcs = prim_funcs_of(relax.transform.LegalizeOps()(tvms.parse(conv)))
    assert "tvms_mma_m16n8k8_f32_tf32" in build_cuda(funcs, TF32, kind="source").source
    (result,) = compare_with_cpu(funcs, target=TF32, rtol=1e-2, atol=2e-2).values()
    assert result.ok, result


def test_an_epilogue_that_reads_the_accumulator_twice():
    """A GELU-like epilogue, x * erf(x) with x = C + bias: both reads are the lane's register."""
    src = matmul_src(128, 128, 64, "float32", epilogue=True).replace(
        "T.max(C[vi, vj] + bias[vj], T.float32(0))", "(C[vi, vj] + bias[vj]) * T.erf(C[vi, vj] + bias[vj])")
    assert "tvms_mma_m16n8k16" in source_of(src)
    (result,) = compare_with_cpu(prim_funcs_of(tvms.parse(src)), target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result


def test_the_tiling_and_pipeline_knobs_change_the_kernel_and_keep_its_results():
    """``MatmulTensorCore(mma_tilings=, stages=)`` (benchmarks/cuda_tilings.py times them): a
    3-stage pipeline waits for the copies of 2 steps ahead and keeps 3 versions of each tile;
    a 128x256 tiling takes half the blocks along I."""
    from tvmscript.compiler.dlight.gpu import MatmulTensorCore
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling

    src = matmul_src(256, 512, 256, "float32")
    funcs = scheduled_by(MatmulTensorCore(mma_tilings=(Tiling(2, 4, 4, 4),), stages=3), src, SM90)
    code = build_cuda(funcs, SM90, kind="source")
    (launch,) = code.functions["mm"].launches
    assert launch.grid[:2] == ("2", "2") and launch.block[:2] == ("32", "8"), launch
    waits = re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", code.source)
    assert waits and all(w == "2" for w in waits), waits
    assert re.search(r"% 3\) \* \d+", code.source), "shared tiles in 3 versions"
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-3, atol=1e-3).values()
    assert result.ok, result
    with pytest.raises(ValueError, match="2 stages or more"):
        MatmulTensorCore(stages=1)


def test_the_simt_column_knob():
    from tvmscript.compiler.dlight.gpu import MatmulSIMT

    src = matmul_src(2048, 1024, 32, "float32", dtype="float32")     # 128 tiles of 128 columns
    narrow = build_cuda(scheduled_by(MatmulSIMT(tile_j=64), src, SM90), SM90, kind="source").source
    wide = build_cuda(scheduled_by(MatmulSIMT(), src, SM90), SM90, kind="source").source
    assert "__launch_bounds__(128)" in narrow and "__launch_bounds__(256)" in wide
    with pytest.raises(ValueError, match="tile_j must be 128 or 64"):
        MatmulSIMT(tile_j=32)


def test_a_masked_epilogue_stores_pairs_of_halves():
    """Attention's scores, scaled and causally masked (``where(mask, -inf, q @ k * scale)``) in
    the matmul's epilogue: each lane's two adjacent results are one ``half2`` store, the mask
    read lane by lane (no vector type holds two bools); on an H200 the element-by-element
    stores made this kernel of a GPT block take 119 µs, 8x its memory traffic's time."""
    funcs = relax_prim_funcs(
        'q: R.Tensor((4, 128, 64), "float16"), k: R.Tensor((4, 64, 128), "float16"), '
        'mask: R.Tensor((128, 128), "bool")',
        '            s = R.multiply(R.matmul(q, k), R.const(0.125, "float16"))\n'
        '            y = R.where(mask, R.const(-60000.0, "float16"), s)', fuse=True)
    code = build_cuda(funcs, SM90, kind="source")
    assert "tvms_mma_m16n8k16" in code.source
    assert re.search(r"\*\(half2\*\)\(T_where\w* \+", code.source), code.source
    (result,) = compare_with_cpu(funcs, code=code, target=SM90, rtol=1e-2, atol=1e-2).values()
    assert result.ok, result


@pytest.mark.parametrize("dtype, target, step_k, stages, regs", [
    ("float16", SM90, 64, 3, 255),   # 3 x 32 KiB stages of 128x128: two blocks a multiprocessor still
    ("float32", TF32, 16, 4, 200),   # TF32 at steps of 16: 4 stages in the shared memory of 2 of 32
])
def test_the_step_k_knob_keeps_the_loads_free_of_conflicts_and_the_results(dtype, target, step_k, stages, regs):
    """``MatmulTensorCore(step_k=)`` (benchmarks/cuda_tilings.py times it): K per pipeline stage.
    The swizzled (fp16) or padded (TF32) tiles of the other width still load without bank
    conflicts, K that is not a whole number of steps is padded, and the 4096^3 kernel keeps
    its accumulators in registers with two blocks a multiprocessor."""
    from tvmscript.compiler.dlight.gpu import MatmulTensorCore
    from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling

    rule = MatmulTensorCore(mma_tilings=(Tiling(2, 2, 4, 4),), stages=stages, step_k=step_k)
    elem = 2 if dtype == "float16" else 4
    big = build_cuda(scheduled_by(rule, matmul_src(4096, 4096, 4096, "float32", dtype=dtype), target), target)
    (res,) = resources_of(big).values()
    assert res.ptxas.spill_store_bytes == 0 and res.ptxas.stack_bytes == 0 and res.ptxas.registers <= regs
    assert res.occupancy.blocks >= 2
    # (a transposed TF32 tile's rows are padded by 8 floats)
    assert stages * 256 * step_k * elem <= res.dyn_shared_bytes + res.ptxas.shared_bytes <= stages * 256 * (
        step_k + 8) * elem
    waits = re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", big.source)
    assert waits and all(w == str(stages - 1) for w in waits), waits
    tol = 1e-3 if dtype == "float16" else 1e-2
    for b_transposed in (False, True):
        funcs = scheduled_by(rule, matmul_src(128, 128, 160, "float32", b_transposed, dtype=dtype), target)
        (c,) = count(funcs, "mm", target=target)
        assert c.shared_load_wavefronts == c.shared_load_ideal and c.shared_store_wavefronts == c.shared_store_ideal
        (result,) = compare_with_cpu(funcs, target=target, rtol=tol, atol=tol).values()
        assert result.ok, result
    with pytest.raises(ValueError, match="step_k must be one of"):
        MatmulTensorCore(step_k=48)
