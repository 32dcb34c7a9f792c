"""A convolution followed by an inference batch norm, the pattern `DecomposeOpsForInference`
folds into the convolution when the weights are bound: the program and random weights for it.
Shared by the pass's tests (tests/compiler/test_decompose_ops.py) and `tvms run --bind`'s."""

from __future__ import annotations

import numpy as np


def conv_bn_program(channels: int, size: int) -> str:
    """``main(x, w, gamma, beta, mean, var)``: a padded 3x3 conv2d of a ``1 x channels x size x
    size`` input, then ``R.nn.batch_norm(..., training=False)``'s normalized output."""
    c, s = channels, size
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, {c}, {s}, {s}), "float32"), w: R.Tensor(({c}, {c}, 3, 3), "float32"),
             gamma: R.Tensor(({c},), "float32"), beta: R.Tensor(({c},), "float32"),
             mean: R.Tensor(({c},), "float32"), var: R.Tensor(({c},), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            bn = R.nn.batch_norm(c, gamma, beta, mean, var, axis=1, epsilon=1e-5, training=False)
            y = bn[0]
            R.output(y)
        return y
'''


def conv_bn_weights(rng: np.random.Generator, channels: int) -> dict:
    """Random float32 weights for `conv_bn_program`: every parameter but ``x`` (variances kept
    away from 0)."""
    c = channels
    return {"w": rng.standard_normal((c, c, 3, 3)).astype("float32"),
            "gamma": rng.standard_normal(c).astype("float32"), "beta": rng.standard_normal(c).astype("float32"),
            "mean": rng.standard_normal(c).astype("float32"), "var": (rng.random(c) + 0.5).astype("float32")}
