"""Winograd convolutions (compiler/schedule_cpu/winograd.py): the algorithm a tuner may pick
for a 3x3 convolution of stride 1 (`choices.ALGORITHM`).

Checked: the transform matrices compute a correlation exactly; every convolution the rewrite
takes, as legalization and fusion give it to the build (padded or not, a batch, sizes that are
not a multiple of the tile, a fused bias and ReLU), computes what NumPy computes, with either
tile size; the default schedule never picks it; convolutions it does not take (strided,
dilated, 1x1, grouped, float16) offer no such choice; and the choice points the tuner samples
cover the Winograd kernel's own register tile."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import meta_schedule as ms
from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.compiler.schedule_choices import ALGORITHM, ROWS, TILE_SHAPE, choice_points, with_choices
from tvmscript.compiler.schedule_cpu.winograd import ALGORITHMS, DIRECT, TRANSFORMS, WINOGRAD_2, WINOGRAD_4
from tvmscript.ir.structural import structural_equal

CONV = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({n}, {c}, {h}, {w}), "{dt}"), wt: R.Tensor(({k}, {cg}, {r}, {r}), "{dt}"),
             b: R.Tensor((1, {k}, 1, 1), "{dt}")):
        with R.dataflow():
            y = R.nn.conv2d(x, wt, strides=[{s}, {s}], padding=[{p}, {p}, {p}, {p}], dilation=[{d}, {d}],
                            groups={g})
            z = {epilogue}
            R.output(z)
        return z
'''


# The layout the CPU build gives a model's convolutions: NHWC data, HWIO weights.
CONV_NHWC = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({n}, {h}, {w}, {c}), "float32"), wt: R.Tensor((3, 3, {c}, {k}), "float32"),
             b: R.Tensor((1, 1, 1, {k}), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, wt, padding=[{p}, {p}, {p}, {p}], data_layout="NHWC", kernel_layout="HWIO")
            z = {epilogue}
            R.output(z)
        return z
'''
EPILOGUES = {"y": "y", "bias_relu": "R.nn.relu(R.add(y, b))"}


def nhwc_module(n, c, k, h, w, p, epilogue):
    return tvms.parse(CONV_NHWC.format(n=n, c=c, k=k, h=h, w=w, p=p, epilogue=EPILOGUES[epilogue]))


def conv_task(n=1, c=8, k=8, h=12, w=12, r=3, s=1, p=1, d=1, g=1, dt="float32", epilogue="y"):
    """The kernel the build compiles for a conv2d (and its epilogue) on x (n, c, h, w)."""
    src = CONV.format(n=n, c=c, k=k, h=h, w=w, r=r, cg=c // g, s=s, p=p, d=d, g=g, dt=dt,
                      epilogue=EPILOGUES[epilogue])
    tasks = ms.extract_tasks(tvms.parse(src), "llvm")
    (conv,) = [f for name, f, _ in tasks if "conv2d" in name]
    return conv


def reference(x, wt, b, p, epilogue):
    """NumPy's convolution (stride 1, float64) and the epilogue."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], wt.shape[0], oh, ow))
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, ry:ry + oh, rx:rx + ow], wt[:, :, ry, rx].astype(np.float64))
    return np.maximum(out + b, 0) if epilogue == "bias_relu" else out


def run(func, n, c, k, h, w, p, epilogue, seed=0) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, k, 1, 1)).astype(np.float32)
    want = reference(x, wt, b, p, epilogue)
    y = np.zeros(want.shape, np.float32)
    args = [x, wt, b, y] if epilogue == "bias_relu" else [x, wt, y]
    tvms.compile(tvms.IRModule({"main": func}))["main"](*args)
    return y, want


@pytest.mark.parametrize("m", [2, 4])
def test_the_transforms_compute_a_correlation_exactly(m):
    bt, g, at = ([[Fraction(v) for v in row] for row in mat] for mat in TRANSFORMS[m])
    rng = np.random.default_rng(m)
    d = [[Fraction(int(v)) for v in row] for row in rng.integers(-9, 9, (m + 2, m + 2))]
    f = [[Fraction(int(v)) for v in row] for row in rng.integers(-9, 9, (3, 3))]

    def mul(a, b):
        return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    def tr(a):
        return [list(col) for col in zip(*a)]

    u, v = mul(mul(g, f), tr(g)), mul(mul(bt, d), tr(bt))
    y = mul(mul(at, [[u[i][j] * v[i][j] for j in range(m + 2)] for i in range(m + 2)]), tr(at))
    want = [[sum(d[i + a][j + b] * f[a][b] for a in range(3) for b in range(3)) for j in range(m)] for i in range(m)]
    assert y == want


SHAPES = [  # n, c, k, h, w, padding, epilogue
    (1, 16, 24, 12, 12, 1, "y"),         # tiles fill the output exactly (m = 2 and 4)
    (2, 3, 5, 7, 9, 1, "y"),             # a batch, odd channels, partial tiles in both directions
    (1, 8, 16, 10, 11, 0, "y"),          # no padding: the input is the function's parameter
    (1, 16, 16, 14, 14, 1, "bias_relu"),  # fused with its epilogue
]


@pytest.mark.parametrize("algorithm", [WINOGRAD_4, WINOGRAD_2])
@pytest.mark.parametrize("n,c,k,h,w,p,epilogue", SHAPES)
def test_a_winograd_convolution_computes_the_convolution(algorithm, n, c, k, h, w, p, epilogue):
    conv = conv_task(n=n, c=c, k=k, h=h, w=w, p=p, epilogue=epilogue)
    assert choice_points(conv)[ALGORITHM] == [len(ALGORITHMS)]
    picked = with_choices(conv, {ALGORITHM: [ALGORITHMS.index(algorithm)]})
    scheduled = default_schedule(picked).script()
    assert "wino_v_transform" in scheduled and "wino_gemm" in scheduled
    y, want = run(picked, n, c, k, h, w, p, epilogue)
    # Winograd rounds differently from the direct sum: within float32's error for these sizes.
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("algorithm", [WINOGRAD_4, WINOGRAD_2])
@pytest.mark.parametrize("n,c,k,h,w,p,epilogue", [(1, 16, 8, 12, 12, 1, "bias_relu"), (2, 3, 5, 7, 9, 1, "y")])
def test_an_nhwc_convolution_with_hwio_weights(algorithm, n, c, k, h, w, p, epilogue):
    """The CPU build's layout for models (NHWC data, HWIO weights): the same rewrite, each
    buffer read and written along its own axes."""
    (conv,) = [f for name, f, _ in ms.extract_tasks(nhwc_module(n, c, k, h, w, p, epilogue), "llvm")
               if "conv2d" in name]
    assert choice_points(conv)[ALGORITHM] == [len(ALGORITHMS)]
    picked = with_choices(conv, {ALGORITHM: [ALGORITHMS.index(algorithm)]})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt = rng.standard_normal((3, 3, c, k)).astype(np.float32)
    b = rng.standard_normal((1, 1, 1, k)).astype(np.float32)
    want = reference(x.transpose(0, 3, 1, 2), wt.transpose(3, 2, 0, 1), b.transpose(0, 3, 1, 2), p, epilogue)
    want = want.transpose(0, 2, 3, 1)
    y = np.zeros(want.shape, np.float32)
    tvms.compile(tvms.IRModule({"main": picked}))["main"](*([x, wt, b, y] if epilogue == "bias_relu" else [x, wt, y]))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_padding_stage_is_inlined_into_the_packing():
    picked = with_choices(conv_task(), {ALGORITHM: [ALGORITHMS.index(WINOGRAD_4)]})
    text = default_schedule(picked).script()
    assert 'T.block("pad_temp")' not in text and "if_then_else" in text.split("wino_d_pack")[1].split("T.block")[0]


def test_the_default_schedule_never_picks_winograd():
    conv = conv_task(c=16, k=16, h=14, w=14)
    direct = default_schedule(conv)
    assert "wino" not in direct.script()
    assert structural_equal(default_schedule(with_choices(conv, {ALGORITHM: [ALGORITHMS.index(DIRECT)]})).body,
                            direct.body)
    y, want = run(conv, 1, 16, 16, 14, 14, 1, "y")
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("kwargs", [dict(s=2), dict(d=2, p=2), dict(r=1, p=0), dict(g=2), dict(dt="float16")],
                         ids=["stride2", "dilation2", "1x1", "groups2", "float16"])
def test_other_convolutions_offer_no_algorithm(kwargs):
    conv = conv_task(**kwargs)
    assert choice_points(conv)[ALGORITHM] == []
    assert "wino" not in default_schedule(with_choices(conv, {ALGORITHM: [1]})).script()


def test_the_points_sampled_cover_the_winograd_kernels_register_tile():
    conv = conv_task(c=32, k=32, h=16, w=16)
    points = choice_points(conv)
    direct = choice_points(with_choices(conv, {ALGORITHM: [0]}))  # (recorded as if unpicked)
    assert points[ALGORITHM] == [3]
    assert len(points[TILE_SHAPE]) >= 1 and points[TILE_SHAPE][0] >= direct[TILE_SHAPE][0]
    # Every sampled pick schedules a kernel that computes the convolution.
    for tile in range(points[TILE_SHAPE][0]):
        picked = with_choices(conv, {ALGORITHM: [1], TILE_SHAPE: [tile], ROWS: [points[ROWS][0] - 1]})
        y, want = run(picked, 1, 32, 32, 16, 16, 1, "y", seed=tile)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_a_constant_weight_is_transformed_once_by_the_build(tmp_path, layout):
    """A model whose convolution weight is bound to a constant, tuned to Winograd's algorithm:
    the kernel reads the weight already transformed (`WinogradWeights`, no weight-transform
    stage), the build transforms the constant once, and the model computes the convolution."""
    from tvmscript.compiler.meta_schedule.database import JSONDatabase, TuningRecord
    from tvmscript.compiler.schedule import Schedule
    from tvmscript.compiler.schedule_cpu.prepack import PACKED_LAYOUTS_ATTR
    from tvmscript.compiler.schedule_cpu.winograd import WinogradWeights
    from tvmscript.compiler.transform import BindParams

    rng = np.random.default_rng(0)
    wt, b = rng.standard_normal((16, 8, 3, 3)).astype(np.float32), rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    if layout == "NCHW":
        src = tvms.parse(CONV.format(n=1, c=8, k=16, h=12, w=12, r=3, cg=8, s=1, p=1, d=1, g=1, dt="float32",
                                     epilogue=EPILOGUES["bias_relu"]))
        mod = BindParams("main", {"wt": wt, "b": b})(src)
    else:
        mod = BindParams("main", {"wt": wt.transpose(2, 3, 1, 0), "b": b.transpose(0, 2, 3, 1)})(
            nhwc_module(1, 8, 16, 12, 12, 1, "bias_relu"))
    (name, task, _), = [t for t in ms.extract_tasks(mod, "llvm") if "conv2d" in t[0]]
    scheduled = default_schedule(with_choices(task, {ALGORITHM: [ALGORITHMS.index(WINOGRAD_4)]}))
    layouts = dict(scheduled.attrs[PACKED_LAYOUTS_ATTR])
    axes = "kcyx" if layout == "NCHW" else "yxck"
    assert list(layouts.values()) == [WinogradWeights(4, (6, 6, 8, 16), axes)]
    assert "wino_u_transform" not in scheduled.script() and "wino_v_transform" in scheduled.script()
    # Through a tuning record, as `tvms compile --tuned` applies it.
    sch = Schedule(tvms.IRModule({"main": task}))
    sch.choose_cpu_schedule([[ALGORITHM, [ALGORITHMS.index(WINOGRAD_4)]]])
    db = JSONDatabase(str(tmp_path))
    db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(tvms.IRModule({"main": task})), [1e-4], "llvm"))
    ex = tvms.compile(mod, tuning_db=db)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    xin = x if layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    got = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"](tvms.nd.array(xin)).numpy()
    want = reference(x, wt, b, 1, "bias_relu")
    want = want if layout == "NCHW" else want.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    untuned = tvms.relax.VirtualMachine(tvms.compile(mod), tvms.cpu())["main"](tvms.nd.array(xin)).numpy()
    assert not np.array_equal(got, untuned)   # (the Winograd kernel ran: it rounds differently)
