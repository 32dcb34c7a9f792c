"""Image ops (compiler/op/image.py): ``R.image.resize2d`` legalized, compiled for the CPU and
compared with a NumPy reference written from the coordinate formulas (and with PyTorch's
interpolate where its modes match); TVM's printed form; located diagnostics."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import tvmscript as tvms  # noqa: E402
from tvmscript import relax  # noqa: E402

from op_check import assert_located, check_op  # noqa: E402

RNG = np.random.default_rng(9)


def _coords(out: int, inp: int, mode: str) -> np.ndarray:
    x = np.arange(out, dtype=np.float64)
    scale = inp / out
    if mode == "align_corners":
        return x * (inp - 1) / (out - 1) if out > 1 else np.zeros(out)
    if mode == "asymmetric":
        return x * scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) * scale
    if mode == "pytorch_half_pixel" and out == 1:
        return np.zeros(out)
    return (x + 0.5) * scale - 0.5


_ROUND = {"round": np.round, "floor": np.floor, "ceil": np.ceil,
          "round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5)}


def np_resize2d(x, size, method, mode, rounding):
    ih, iw = x.shape[2:]
    cy, cx = _coords(size[0], ih, mode), _coords(size[1], iw, mode)
    if method == "nearest_neighbor":
        iy = np.clip(_ROUND[rounding](cy), 0, ih - 1).astype(int)
        ix = np.clip(_ROUND[rounding](cx), 0, iw - 1).astype(int)
        return x[:, :, iy][:, :, :, ix]
    y0, x0 = np.floor(cy), np.floor(cx)
    wy, wx = (cy - y0)[:, None], (cx - x0)[None, :]
    ys = [np.clip(y0 + d, 0, ih - 1).astype(int) for d in (0, 1)]
    xs = [np.clip(x0 + d, 0, iw - 1).astype(int) for d in (0, 1)]
    p = [[x[:, :, yy][:, :, :, xx] for xx in xs] for yy in ys]
    top = p[0][0] * (1 - wx) + p[0][1] * wx
    bottom = p[1][0] * (1 - wx) + p[1][1] * wx
    return (top * (1 - wy) + bottom * wy).astype(x.dtype)


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
