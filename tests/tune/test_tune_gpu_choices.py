"""DLight's matmul schedules as a GPU design space (compiler/schedule_choices.py, the
`DefaultScheduleChoices` rule on a GPU target): the tensor-core schedule's block tiling, K per
pipeline step and pipeline stages, and the CUDA-core schedule's block width and stages, sampled.

Checked without a GPU: the points a product offers; each pick changes the CUDA C as it says
(the stages a ``cp.async`` wait leaves in flight, the launch's grid) and keeps the results (the
emulator against the CPU); the design space samples them and records them with
``choose_gpu_schedule``; a candidate compiles with NVRTC; a database record of one validates and
applies as the picks; the tuner's rule list starts with the rule on a GPU. Under ``-m cuda`` a
picked candidate runs on the GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tvmscript as tvms
from support.cuda_check import matmul_src, prim_funcs_of
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.compiler.meta_schedule.apply import apply_database
from tvmscript.compiler.meta_schedule.database import JSONDatabase, TuningRecord
from tvmscript.compiler.meta_schedule.postproc import finish
from tvmscript.compiler.meta_schedule.schedule_rules import DefaultScheduleChoices, default_rules
from tvmscript.compiler.meta_schedule.space import generate_design_space, sample_candidate
from tvmscript.compiler.schedule_choices import (BLOCK_TILING, CHOICES_ATTR, GPU_KINDS, INSTRUCTIONS, PIPELINE_STAGES,
                                                 STEP_K, TILE_SHAPE, choice_points, choices_of, with_choices)

SM90 = "cuda -arch=sm_90"


def only(src: str):
    (func,) = prim_funcs_of(tvms.parse(src)).values()
    return func


@pytest.fixture(scope="module")
def fp16():
    return only(matmul_src(256, 512, 256, "float32"))     # fp16 operands, fp32 accumulators


def cuda_source(func, target: str = SM90):
    return build_cuda({"mm": func}, target, kind="source")


def stages_in(source: str) -> set:
    """Steps a pipeline keeps in flight, from its ``cp.async`` waits (stages - 1)."""
    return {int(w) for w in re.findall(r"tvms_cp_async_wait<(\d+)>\(\)", source)}


def test_a_tensor_core_product_offers_tilings_steps_and_stages(fp16):
    points = choice_points(fp16, "cuda -arch=sm_80")
    assert len(points[BLOCK_TILING]) == 1 and points[BLOCK_TILING][0] > 1
    assert points[STEP_K] == [3] and len(points[PIPELINE_STAGES]) == 1 and points[PIPELINE_STAGES][0] > 1
    assert points[INSTRUCTIONS] == []
    # sm_90 offers Hopper's wgmma too, whose tiling is a second point (its stages share the
    # first: one schedule or the other meets it).
    points = choice_points(fp16, SM90)
    assert points[INSTRUCTIONS] == [2] and len(points[BLOCK_TILING]) == 2 and points[BLOCK_TILING][1] > 1
    assert points[STEP_K] == [3] and len(points[PIPELINE_STAGES]) == 1 and points[PIPELINE_STAGES][0] > 1
    simt = choice_points(only(matmul_src(2048, 1024, 32, "float32", dtype="float32")), SM90)
    assert simt[BLOCK_TILING] == [2] and simt[PIPELINE_STAGES] == [4] and simt[STEP_K] == [2]   # K of 8 or 16
    assert all(not v for v in choice_points(fp16, "cuda -arch=sm_75").values())   # wmma: no knobs
    cpu = choice_points(fp16)                                   # the CPU's default schedule: its own kinds
    assert all(not cpu[k] for k in GPU_KINDS) and cpu[TILE_SHAPE]


def test_each_pick_changes_the_kernel_and_keeps_its_results(fp16):
    from support.cuda_emulator import compare_with_cpu

    default = cuda_source(fp16)
    assert stages_in(default.source) == {3}                       # 4 stages
    picks = {PIPELINE_STAGES: [1]}                                 # the first other count: 2 stages
    two = cuda_source(with_choices(fp16, picks))
    assert stages_in(two.source) == {1}
    tiled = cuda_source(with_choices(fp16, {BLOCK_TILING: [1]}))
    assert tiled.functions["mm"].launches[0].grid != default.functions["mm"].launches[0].grid
    longer = cuda_source(with_choices(fp16, {STEP_K: [2]}))       # K of 64 a step
    assert longer.source != default.source
    for code, func in ((two, with_choices(fp16, picks)), (tiled, with_choices(fp16, {BLOCK_TILING: [1]}))):
        (result,) = compare_with_cpu({"mm": func}, code=code, target=SM90, rtol=1e-3, atol=1e-3).values()
        assert result.ok, result


def test_the_simt_picks_change_the_block_and_the_pipeline():
    func = only(matmul_src(2048, 1024, 32, "float32", dtype="float32"))
    default = cuda_source(func).source
    narrow = cuda_source(with_choices(func, {BLOCK_TILING: [1]})).source
    assert "__launch_bounds__(256)" in default and "__launch_bounds__(128)" in narrow
    deeper = cuda_source(with_choices(func, {PIPELINE_STAGES: [2]})).source   # (3), 2, 4: 4 stages
    assert stages_in(default) == {2} and stages_in(deeper) == {3}
    # K of 16 a step: 2 steps of this K of 32, each 16 k's of FMAs.
    longer = with_choices(func, {STEP_K: [1]})
    assert len(re.findall(r"tvms_cp_async", cuda_source(longer).source)) != len(re.findall(r"tvms_cp_async", default))
    from support.cuda_emulator import compare_with_cpu

    (result,) = compare_with_cpu({"mm": longer}, target=SM90, rtol=1e-4, atol=1e-4).values()
    assert result.ok, result


def test_the_design_space_samples_the_picks_and_a_record_applies_them(tmp_path, fp16):
    assert isinstance(default_rules(SM90)[0], DefaultScheduleChoices)
    spaces = [s for s in generate_design_space(fp16, SM90) if CHOICES_ATTR in s.func("main").attrs]
    (space,) = spaces
    kinds = [inst.kind for inst in space.trace.insts]
    # The tiling (mma.sync's, wgmma's), the step, the stages and the instructions.
    assert kinds.count("sample_categorical") == 5 and kinds[-1] == "choose_gpu_schedule"
    seen = set()
    for seed in range(8):
        mod = finish(sample_candidate(space, seed), SM90)
        seen.add(str(choices_of(mod["main"])))
    assert len(seen) > 2
    cand = next(c for c in (sample_candidate(space, seed) for seed in range(40))
                if choices_of(c.func("main"))[PIPELINE_STAGES] != [0] and choices_of(c.func("main"))[INSTRUCTIONS] == [0])
    db = JSONDatabase(str(tmp_path))
    db.commit_tuning_record(TuningRecord(cand.trace, db.commit_workload(tvms.IRModule({"main": fp16})), [1e-4], SM90))
    # Read back from disk: the record validates (``choose_gpu_schedule`` is a primitive) and
    # applies as the picks, which the CUDA build's DLight then takes.
    applied = apply_database(tvms.IRModule({"main": fp16}), JSONDatabase(str(tmp_path)), SM90)["main"]
    assert choices_of(applied) == choices_of(cand.func("main"))
    assert stages_in(cuda_source(applied).source) != stages_in(cuda_source(fp16).source)


def test_a_picked_candidate_compiles_with_nvrtc(fp16):
    from tvmscript.compiler import nvrtc
    from tvmscript.compiler.meta_schedule.builder import CUDAArtifact, build_artifact
    from tvmscript.compiler.meta_schedule.measure import BuildInput

    try:
        nvrtc.nvrtc_version()
    except nvrtc.NVRTCUnavailable as err:
        pytest.skip(f"no NVRTC: {err}")
    artifact = build_artifact(BuildInput(with_choices(fp16, {PIPELINE_STAGES: [1], BLOCK_TILING: [1]}), SM90))
    assert isinstance(artifact, CUDAArtifact) and artifact.code.cubin
    # Hopper's wgmma, picked: compiled for sm_90a, as tvms.compile does.
    artifact = build_artifact(BuildInput(with_choices(fp16, {INSTRUCTIONS: [1]}), SM90))
    assert artifact.code.arch == "sm_90a" and "tvms_wgmma_" in artifact.code.source and artifact.code.cubin


@pytest.mark.cuda
def test_a_picked_candidate_runs_on_the_gpu():
    func = only(matmul_src(256, 512, 256, "float32"))
    ex = tvms.compile(tvms.IRModule({"main": with_choices(func, {PIPELINE_STAGES: [1], STEP_K: [2]})}), "cuda")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype("float16")
    b = rng.standard_normal((256, 512)).astype("float16")
    dev = tvms.cuda()
    c = tvms.nd.array(np.zeros((256, 512), "float32"), dev)
    ex["main"](tvms.nd.array(a, dev), tvms.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32"), rtol=1e-2, atol=1e-2)
