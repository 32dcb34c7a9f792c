"""NumPy references of ``R.image.resize2d`` and ``resize3d``, written from the coordinate
formulas of each ``coordinate_transformation_mode``: tests/compiler/test_op_image.py checks the
ops against them, and tests/cli/test_cli_run.py a resize ``tvms run`` compiles."""

from __future__ import annotations

import numpy as np


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
    if method == "linear":
        return np_resize_linear(x, size, mode)
    ih, iw = x.shape[2:]
    cy, cx = _coords(size[0], ih, mode), _coords(size[1], iw, mode)
    iy = np.clip(_ROUND[rounding](cy), 0, ih - 1).astype(int)
    ix = np.clip(_ROUND[rounding](cx), 0, iw - 1).astype(int)
    return x[:, :, iy][:, :, :, ix]


def np_resize_linear(x, size, mode):
    """Bilinear (two sizes) or trilinear (three) resize of the trailing axes: one axis at a
    time, each output point the blend of its two neighbours clamped into the axis."""
    out = x.astype(np.float64)
    for axis, n in zip(range(x.ndim - len(size), x.ndim), size):
        c = _coords(n, x.shape[axis], mode)
        lo = np.floor(c)
        w = (c - lo).reshape([n if a == axis else 1 for a in range(x.ndim)])
        near, far = (np.take(out, np.clip(lo + d, 0, x.shape[axis] - 1).astype(int), axis) for d in (0, 1))
        out = near * (1 - w) + far * w
    return out.astype(x.dtype)
