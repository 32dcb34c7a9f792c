"""Image ops (tvmscript/ir/op/image.py, compiler/op/image.py): ``R.image.resize2d`` legalized, compiled for the CPU and
compared with a NumPy reference written from the coordinate formulas (and with PyTorch's
interpolate where its modes match); resizes that aborted LLVM, compiled in a child process;
TVM's printed form; located diagnostics."""

from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax

from support.op_check import assert_located, check_op
from support.resize_reference import np_resize2d, np_resize_linear

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("size,method,mode,rounding", [
    ((8, 8), "linear", "half_pixel", "round"), ((3, 5), "linear", "align_corners", "round"),
    ((7, 2), "linear", "asymmetric", "round"), ((6, 9), "nearest_neighbor", "asymmetric", "floor"),
    ((5, 3), "nearest_neighbor", "half_pixel", "round_prefer_ceil"),
    ((9, 7), "nearest_neighbor", "tf_half_pixel_for_nn", "floor"), ((1, 6), "linear", "pytorch_half_pixel", "round"),
], ids=str)
def test_resize2d(size, method, mode, rounding):
    x = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    legal = check_op(relax.op.image.resize2d, [x, size], np_resize2d(x, size, method, mode, rounding), rtol=1e-5,
                     atol=1e-5, method=method, coordinate_transformation_mode=mode, rounding_method=rounding)
    assert "def resize2d(" in legal.script() and 'T.block("resize")' in legal.script()


@pytest.mark.parametrize("mode,align", [("bilinear", False), ("bilinear", True), ("nearest", None)], ids=str)
def test_resize2d_matches_torch(mode, align):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((1, 2, 5, 4)).astype("float32")
    expected = torch.nn.functional.interpolate(torch.from_numpy(x), size=(7, 9), mode=mode,
                                               align_corners=align).numpy()
    attrs = ({"method": "nearest_neighbor", "coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"}
             if mode == "nearest" else
             {"coordinate_transformation_mode": "align_corners" if align else "half_pixel"})
    check_op(relax.op.image.resize2d, [x, (7, 9)], expected, rtol=1e-5, atol=1e-5, **attrs)


# Linear resizes whose kernels killed the process inside LLVM 22.1's SLP vectorizer (exit 134,
# "must be scheduled at this point"; `codegen_llvm.avoid_llvm_aborts`): where both neighbours
# of a point clamp to the same pixel, the unrolled and folded blend is an fmuladd using one
# value twice. A sweep of small shapes found 221 of 1225 align_corners resize2d shapes, 49 of
# 3675 with the other linear modes and 21 of 216 resize3d ones; the first is the report.
ABORTED_RESIZES = [
    ("resize2d", [1, 2, 4, 6], [6, 3], "align_corners"), ("resize2d", [1, 2, 2, 2], [2, 3], "align_corners"),
    ("resize2d", [1, 2, 3, 4], [5, 7], "align_corners"), ("resize2d", [1, 2, 6, 2], [7, 5], "align_corners"),
    ("resize2d", [1, 2, 2, 2], [2, 6], "half_pixel"), ("resize2d", [1, 2, 4, 2], [7, 6], "asymmetric"),
    ("resize2d", [1, 2, 5, 2], [7, 6], "pytorch_half_pixel"),
    ("resize3d", [1, 1, 2, 2, 3], [2, 3, 3], "align_corners"), ("resize3d", [1, 1, 3, 4, 6], [2, 5, 4], "align_corners"),
]

# Compiles and runs each case of argv[1] on argv[2]'s inputs, writing the results to argv[4];
# with a CPU name in argv[3], also compiles each for that CPU (not run): LLVM's abort depends
# on the CPU's costs, and these shapes aborted for znver4 whatever CPU compiled them.
RESIZE_CHILD = """
import json, sys
import numpy as np
import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform import LegalizeOps
from support.op_check import build_op_module

cases, inputs, other_cpu = json.loads(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
results = {}
for i, (op, shape, size, mode) in enumerate(cases):
    print(f"compiling {op} of {shape} to {size}, {mode}", file=sys.stderr, flush=True)
    x = inputs[str(i)]
    mod, _ = build_op_module(getattr(relax.op.image, op), [x, size], method="linear",
                             coordinate_transformation_mode=mode)
    mod = LegalizeOps()(mod)
    results[str(i)] = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["main"](x).numpy()
    if other_cpu:
        tvms.compile(mod, target="llvm -mcpu=" + other_cpu)
np.savez(sys.argv[4], **results)
"""


def test_linear_resizes_that_aborted_llvm_compile_and_match_numpy(tmp_path):
    """In a child process with an empty compile cache, so that LLVM runs and an abort fails
    this test rather than pytest; the results against NumPy and, for align_corners, PyTorch's
    bilinear and trilinear interpolation."""
    inputs = {str(i): RNG.standard_normal(shape).astype("float32") for i, (_, shape, _, _) in enumerate(ABORTED_RESIZES)}
    np.savez(tmp_path / "in.npz", **inputs)
    other_cpu = "znver4" if platform.machine().lower() in ("x86_64", "amd64") else ""
    proc = subprocess.run([sys.executable, "-c", RESIZE_CHILD, json.dumps(ABORTED_RESIZES), str(tmp_path / "in.npz"),
                           other_cpu, str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=600,
                          cwd=pathlib.Path(__file__).parents[1],  # tests/, where `support` is
                          env=dict(os.environ, TVMS_CACHE_DIR=str(tmp_path / "cache")))
    assert proc.returncode == 0, f"the compile died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    got = np.load(tmp_path / "out.npz")
    try:
        import torch
    except ImportError:
        torch = None
    for i, (op, shape, size, mode) in enumerate(ABORTED_RESIZES):
        x, case = inputs[str(i)], f"{op} of {shape} to {size}, {mode}"
        np.testing.assert_allclose(got[str(i)], np_resize_linear(x, size, mode), rtol=1e-5, atol=1e-5, err_msg=case)
        if torch is not None and mode == "align_corners":
            expected = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, align_corners=True,
                                                       mode="bilinear" if op == "resize2d" else "trilinear")
            np.testing.assert_allclose(got[str(i)], expected.numpy(), rtol=1e-5, atol=1e-5, err_msg=case)


def test_resize2d_prints_like_tvm_with_symbolic_batch():
    src = ('@R.function\ndef main(im: R.Tensor(("n", 2, 4, 4), dtype="float32")):\n'
           '    g = R.image.resize2d(im, (8, 8))\n    return g\n')
    text = tvms.parse(src).script()
    assert ('g: R.Tensor((n, 2, 8, 8), dtype="float32") = R.image.resize2d(im, R.shape([8, 8]), '
            'roi=[T.float32(0.0), T.float32(0.0), T.float32(0.0), T.float32(0.0)], layout="NCHW", method="linear", '
            'coordinate_transformation_mode="half_pixel", rounding_method="round", cubic_alpha=-0.75, '
            'cubic_exclude=0, extrapolation_value=0.0, out_dtype=None)') in text
    assert tvms.parse(text).script() == text


def test_resize2d_one_size_is_both_dims():
    x = relax.Var("x", relax.TensorStructInfo([1, 1, 4, 4], "float32"))
    call = relax.op.image.resize2d(x, (6,))
    assert [d.value for d in call.struct_info.shape] == [1, 1, 6, 6]


@pytest.mark.parametrize("attr,message,at", [
    ('method="cubic"', "method 'cubic' is not supported yet", '"cubic"'),
    ('layout="NCW"', "layout must name the axes N, C, H, W once each", '"NCW"'),
    ('layout="NCHW4h"', "an inner split of axis H is not supported", '"NCHW4h"'),
    ('rounding_method="up"', "rounding_method must be one of", '"up"'),
], ids=str)
def test_resize2d_errors_are_located(attr, message, at):
    src = ('@R.function\ndef main(im: R.Tensor((1, 2, 4, 4), dtype="float32")):\n'
           f'    g = R.image.resize2d(im, (8, 8), {attr})\n    return g\n')
    assert_located(src, message, at)
