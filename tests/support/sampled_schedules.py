"""A matmul PrimFunc and a small search space over it (sampled tiles of I and J, a sampled
unroll limit), shared by the sampling, trace and tuning tests."""

from __future__ import annotations

import numpy as np

import tvmscript as tvms
from tvmscript.compiler.schedule import Schedule

MATMUL_TEMPLATE = '''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    for i, j, k in T.grid({m}, {n}, {k}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def matmul_src(m: int, n: int, k: int) -> str:
    """A plain, unscheduled M x K times K x N float32 matmul prim_func, ``main``."""
    return MATMUL_TEMPLATE.format(m=m, n=n, k=k)


MATMUL = matmul_src(128, 96, 64)

CONV2D_TEMPLATE = '''
@T.prim_func
def main(X: T.Buffer((1, {c}, {s}, {s}), "float32"), W: T.Buffer(({f}, {c}, 3, 3), "float32"),
         Y: T.Buffer((1, {f}, {s}, {s}), "float32")):
    pad = T.alloc_buffer((1, {c}, {p}, {p}))
    for n, c, h, w in T.grid(1, {c}, {p}, {p}):
        with T.block("pad"):
            vn, vc, vh, vw = T.axis.remap("SSSS", [n, c, h, w])
            pad[vn, vc, vh, vw] = T.if_then_else(1 <= vh and vh < {end} and 1 <= vw and vw < {end},
                                                 X[vn, vc, vh - 1, vw - 1], T.float32(0))
    for n, f, y, x, c, ry, rx in T.grid(1, {f}, {s}, {s}, {c}, 3, 3):
        with T.block("conv"):
            vn, vf, vy, vx, vc, vry, vrx = T.axis.remap("SSSSRRR", [n, f, y, x, c, ry, rx])
            with T.init():
                Y[vn, vf, vy, vx] = T.float32(0)
            Y[vn, vf, vy, vx] = Y[vn, vf, vy, vx] + pad[vn, vc, vy + vry, vx + vrx] * W[vf, vc, vry, vrx]
'''


def conv2d_src(channels: int, filters: int, size: int) -> str:
    """A plain 3x3 convolution of padding 1 over a ``size`` x ``size`` image, its padding a
    stage of its own (as legalization writes it), ``main``."""
    return CONV2D_TEMPLATE.format(c=channels, f=filters, s=size, p=size + 2, end=size + 1)


def func(src: str = MATMUL):
    parsed = tvms.parse(src)
    return parsed if isinstance(parsed, tvms.tir.PrimFunc) else parsed["main"]


def tiled(sch: Schedule) -> Schedule:
    """A small search space: the matmul's I and J each split in 3 sampled factors, an unroll
    limit sampled, the innermost J loop vectorized."""
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    i0, i1, i2 = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=16))
    j0, j1, j2 = sch.split(j, factors=sch.sample_perfect_tile(j, n=3, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, j1, k, i2, j2)
    sch.annotate(i0, "pragma_auto_unroll_max_step", sch.sample_categorical([0, 16, 64], [0.2, 0.3, 0.5]))
    sch.vectorize(j2)
    return sch


def run(mod, shapes=((128, 64), (64, 96), (128, 96))) -> np.ndarray:
    """``mod``'s ``main`` on random A and B, checked against NumPy's A @ B."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype("float32") for s in shapes[:2])
    c = tvms.nd.array(np.zeros(shapes[2], "float32"))
    tvms.compile(mod)["main"](tvms.nd.array(a), tvms.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    return c.numpy()
