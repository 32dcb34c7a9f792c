"""The default CPU schedule's picks as tuning decisions (compiler/schedule_cpu/choices.py and
compiler/meta_schedule/schedule_rules/default_schedule_choices.py).

Checked on resnet18's first 3x3 convolution (as legalized, its padding stage included) and a
matmul: the default schedule meets choice points with several options; every pick schedules a
kernel that computes what NumPy computes, different picks make different kernels, pick 0 is
the heuristic's, an index out of range keeps it; the design space samples the picks, a
candidate is finished as it is (the build schedules it), and a database record of one applies
as the picks, with the function left to the default schedule."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from support.sampled_schedules import conv2d_src, func, matmul_src
from tvmscript.compiler.meta_schedule.apply import TUNED_ATTRS, apply_database
from tvmscript.compiler.meta_schedule.database import JSONDatabase, TuningRecord
from tvmscript.compiler.meta_schedule.postproc import finish
from tvmscript.compiler.meta_schedule.space import generate_design_space, sample_candidate
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_choices import (ALGORITHM, CHOICES_ATTR, ROWS, TILE_SHAPE, choice_points,
                                                      choices_of, with_choices)
from tvmscript.ir.structural import structural_equal, structural_hash

CONV = conv2d_src(64, 64, 56)


@pytest.fixture(scope="module")
def conv():
    return func(CONV)


def conv_reference(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 64, 56, 56), "float32")
    for ry in range(3):
        for rx in range(3):
            out[0] += np.einsum("chw,fc->fhw", xp[0, :, ry:ry + 56, rx:rx + 56], w[:, :, ry, rx])
    return out


def run_conv(f) -> np.ndarray:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 64, 56, 56), dtype=np.float32), rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    y = tvms.nd.array(np.zeros((1, 64, 56, 56), "float32"))
    tvms.compile(tvms.IRModule({"main": f}))["main"](tvms.nd.array(x), tvms.nd.array(w), y)
    np.testing.assert_allclose(y.numpy(), conv_reference(x, w), rtol=1e-3, atol=1e-3)
    return y.numpy()


def test_the_default_schedule_offers_tile_shapes_and_row_loops(conv):
    points = choice_points(conv)
    assert len(points[TILE_SHAPE]) == 1 and points[TILE_SHAPE][0] > 1
    assert len(points[ROWS]) == 1 and points[ROWS][0] > 1      # the output's rows or columns
    assert points[ALGORITHM] == [3]                             # direct, Winograd 4x4 or 2x2
    matmul = choice_points(func(matmul_src(64, 64, 64)))
    assert matmul[TILE_SHAPE][0] > 1 and matmul[ALGORITHM] == []


def test_every_pick_computes_the_same_and_picks_make_different_kernels(conv):
    points = choice_points(conv)
    picks = [(0, 0), (points[TILE_SHAPE][0] - 1, 0), (1, points[ROWS][0] - 1)]
    kernels = set()
    for shape, rows in picks:
        chosen = with_choices(conv, {TILE_SHAPE: [shape], ROWS: [rows]})
        run_conv(chosen)
        kernels.add(structural_hash(default_schedule(chosen).body))
    assert len(kernels) == len(picks)


def test_pick_zero_and_an_index_out_of_range_are_the_heuristics(conv):
    heuristic = default_schedule(conv).body
    for picks in ({TILE_SHAPE: [0], ROWS: [0]}, {TILE_SHAPE: [999], ROWS: [-1]}, {}):
        assert structural_equal(default_schedule(with_choices(conv, picks)).body, heuristic)


def test_the_design_space_samples_the_picks_and_the_build_schedules_them(conv):
    (space,) = [s for s in generate_design_space(conv, "llvm") if CHOICES_ATTR in s.func("main").attrs]
    kinds = [inst.kind for inst in space.trace.insts]
    # The register tile's shape and rows, and the convolution's algorithm (direct or Winograd).
    assert kinds.count("sample_categorical") == 3 and kinds[-1] == "choose_cpu_schedule"
    seen = set()
    for seed in range(6):
        mod = finish(sample_candidate(space, seed), "llvm")
        f = mod["main"]
        assert CHOICES_ATTR in f.attrs and "tvms.no_default_schedule" not in f.attrs
        seen.add(str(f.attrs[CHOICES_ATTR]))
    assert len(seen) > 1


def test_a_record_of_picks_applies_as_picks(tmp_path, conv):
    (space,) = [s for s in generate_design_space(conv, "llvm") if CHOICES_ATTR in s.func("main").attrs]
    cand = sample_candidate(space, 3)
    db = JSONDatabase(str(tmp_path))
    workload = db.commit_workload(tvms.IRModule({"main": conv}))
    db.commit_tuning_record(TuningRecord(cand.trace, workload, [1e-3], "llvm"))
    applied = apply_database(tvms.IRModule({"main": conv}), db, "llvm")["main"]
    assert applied.attrs[CHOICES_ATTR] == cand.func("main").attrs[CHOICES_ATTR]
    assert not any(k in applied.attrs for k in TUNED_ATTRS)
    run_conv(applied)
    # Read back from disk by a process that never imported the schedule rules (`tvms run
    # --tuned`): the record is valid there too, its primitive known.
    (tmp_path / "conv.tvms").write_text(CONV)
    code = ("import sys, tvmscript as tvms; from tvmscript.compiler.meta_schedule.apply import apply_database; "
            "f = tvms.parse(open(sys.argv[1]).read()); "
            "print(apply_database(tvms.IRModule({'main': f}), sys.argv[2], 'llvm')['main'].attrs.get(sys.argv[3]))")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code, str(tmp_path / "conv.tvms"), str(tmp_path),
                          CHOICES_ATTR], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(cand.func("main").attrs[CHOICES_ATTR])


def test_a_record_picking_winograd_builds_the_winograd_kernel(tmp_path, conv):
    """A tuned record whose pick is Winograd's algorithm (`schedule_cpu.winograd`) applies as
    that pick: the build makes the Winograd kernel, and it computes the convolution."""
    (space,) = [s for s in generate_design_space(conv, "llvm") if CHOICES_ATTR in s.func("main").attrs]
    cand = next(c for c in (sample_candidate(space, seed) for seed in range(40))
                if choices_of(c.func("main"))[ALGORITHM] == [1])
    db = JSONDatabase(str(tmp_path))
    workload = db.commit_workload(tvms.IRModule({"main": conv}))
    db.commit_tuning_record(TuningRecord(cand.trace, workload, [1e-3], "llvm"))
    applied = apply_database(tvms.IRModule({"main": conv}), db, "llvm")["main"]
    assert "wino_gemm" in default_schedule(applied).script()
    run_conv(applied)
