"""Image, vision, collective-communication, distributed, memory and device ops
(tvmscript/ir/op/{image,vision,ccl,vm_builtin}.py, compiler/op/{image,vision,ccl}.py).

Legalized to TensorIR: ``R.image.resize2d`` in other layouts (NHWC, NCHW16c), ``resize3d``,
``affine_grid``, ``R.vision.roi_align`` and ``roi_pool``: compiled and compared with NumPy
references written here from the ops' definitions. The ccl/dist ops legalize to calls of the
runtime's ``runtime.disco.*`` functions, run here against stand-ins for one worker. The rest
(NMS family, box decoding, memory ops, ``R.to_vdevice``) are checked by struct info (the
shapes TVM 0.27 infers) and by TVM's printed form round-tripping.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import structural_equal

from support.op_check import assert_located, check_op

RNG = np.random.default_rng(17)


def _roundtrip(src: str):
    """Parse, print, re-parse: structurally equal, printing again identical. The parsed module."""
    mod = tvms.parse(src)
    text = mod.script()
    again = tvms.parse(text)
    assert structural_equal(mod, again)
    assert again.script() == text
    return mod


def _func(params: str, body: str) -> str:
    return ("@R.function\ndef main(" + params + "):\n" + "".join(f"    {line}\n" for line in body.split("\n")))


def _sinfo_text(mod, name: str = "gv") -> str:
    """The annotation the printer gives binding ``name`` of main (its struct info)."""
    for line in mod.script().split("\n"):
        if line.strip().startswith(name + ":"):
            return line.strip()[len(name) + 2:].split(" = ")[0]
    raise AssertionError(f"no binding {name}")


# ----------------------------------------------------------------------------- resize


def _coords(out: int, inp: int, mode: str) -> np.ndarray:
    x = np.arange(out, dtype=np.float64)
    if mode == "align_corners":
        return x * (inp - 1) / (out - 1) if out > 1 else np.zeros(out)
    if mode == "asymmetric":
        return x * inp / out
    return (x + 0.5) * inp / out - 0.5


_ROUND = {"round": np.round, "floor": np.floor, "": np.floor}


def np_resize(x, axes, size, method, mode, rounding="round"):
    """Resize along each of ``axes`` in turn: nearest and (multi)linear interpolation are both
    separable, so one axis at a time gives the same result."""
    out = x.astype(np.float64)
    for ax, n in zip(axes, size):
        inp = out.shape[ax]
        c = _coords(n, inp, mode)
        if method == "nearest_neighbor":
            out = np.take(out, np.clip(_ROUND[rounding](c), 0, inp - 1).astype(int), axis=ax)
            continue
        lo = np.floor(c)
        w = (c - lo).reshape([-1 if a == ax else 1 for a in range(out.ndim)])
        a = np.take(out, np.clip(lo, 0, inp - 1).astype(int), axis=ax)
        b = np.take(out, np.clip(lo + 1, 0, inp - 1).astype(int), axis=ax)
        out = a * (1 - w) + b * w
    return out.astype(x.dtype)


@pytest.mark.parametrize("layout,shape,axes,method,mode", [
    ("NHWC", (2, 4, 5, 3), (1, 2), "linear", "half_pixel"),
    ("NHWC", (1, 3, 3, 2), (1, 2), "nearest_neighbor", "asymmetric"),
    ("NCHW4c", (1, 2, 4, 3, 4), (2, 3), "linear", "align_corners"),
    ("HWCN", (4, 5, 3, 2), (0, 1), "linear", "asymmetric"),
], ids=str)
def test_resize2d_layouts(layout, shape, axes, method, mode):
    x = RNG.standard_normal(shape).astype("float32")
    size = (6, 7)
    expected = np_resize(x, axes, size, method, mode)
    check_op(relax.op.image.resize2d, [x, size], expected, rtol=1e-5, atol=1e-5, layout=layout, method=method,
             coordinate_transformation_mode=mode)


@pytest.mark.parametrize("method,mode,rounding", [
    ("linear", "half_pixel", ""), ("nearest_neighbor", "asymmetric", ""), ("nearest_neighbor", "align_corners", "")],
    ids=str)
def test_resize3d(method, mode, rounding):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype("float32")
    size = (4, 3, 7)
    expected = np_resize(x, (2, 3, 4), size, method, mode, "round" if mode == "align_corners" else rounding)
    legal = check_op(relax.op.image.resize3d, [x, size], expected, rtol=1e-5, atol=1e-5, method=method,
                     coordinate_transformation_mode=mode, rounding_method=rounding)
    assert "def resize3d(" in legal.script()


def test_resize3d_ndhwc():
    x = RNG.standard_normal((1, 3, 4, 2, 2)).astype("float32")
    check_op(relax.op.image.resize3d, [x, (2, 5, 3)], np_resize(x, (1, 2, 3), (2, 5, 3), "linear", "half_pixel"),
             rtol=1e-5, atol=1e-5, layout="NDHWC")


def test_resize_layouts_print_like_tvm():
    src = _func('x: R.Tensor(("n", "c", 8, 8, 16), dtype="float32")',
                'gv = R.image.resize2d(x, size=(4, 5), layout="NCHW16c")\nreturn gv')
    mod = _roundtrip(src)
    assert _sinfo_text(mod) == 'R.Tensor((n, c, 4, 5, 16), dtype="float32")'
    src = _func('x: R.Tensor((2, 3, 8, 8, 8), dtype="float32")', 'gv = R.image.resize3d(x, (4, 6, 7))\nreturn gv')
    text = _roundtrip(src).script()
    assert ('R.image.resize3d(x, R.shape([4, 6, 7]), roi=[T.float32(0.0), T.float32(0.0), T.float32(0.0), '
            'T.float32(0.0), T.float32(0.0), T.float32(0.0)], layout="NCDHW", method="linear", '
            'coordinate_transformation_mode="half_pixel", rounding_method="", cubic_alpha=-0.75, cubic_exclude=0, '
            'extrapolation_value=0.0, out_dtype=None)') in text


def test_resize_unknown_shape_keeps_layout_rank():
    x = relax.Var("x", relax.TensorStructInfo(None, "float32", 5))
    sinfo = relax.op.image.resize2d(x, (3, 4), layout="NCHW4c").struct_info
    assert sinfo.shape is None and sinfo.ndim == 5


@pytest.mark.parametrize("call,message,at", [
    ('R.image.resize2d(x, (8, 8), layout="NHWC")', "data must be 4-D (layout NHWC), got rank 5", "x, (8"),
    ('R.image.resize3d(x, (8, 8, 8), layout="NCHW")', "layout must name the axes N, C, D, H, W", '"NCHW"'),
    ('R.image.resize3d(x, (8, 8))', "size must have 3 values (D, H, W), got 2", "(8, 8)"),
], ids=str)
def test_resize_errors_are_located(call, message, at):
    src = _func('x: R.Tensor((1, 2, 4, 4, 4), dtype="float32")', f"g = {call}\nreturn g")
    assert_located(src, message, at)


# ----------------------------------------------------------------------------- affine_grid


def np_affine_grid(theta, size, align_corners):
    k = len(size)
    axes = []
    for s in size:
        i = np.arange(s, dtype=np.float64)
        axes.append(-1 + i * 2 / (s - 1) if align_corners and s > 1 else -1 + (2 * i + 1) / s)
    mesh = np.meshgrid(*axes, indexing="ij")  # slowest first: (z,) y, x
    # column c of theta multiplies the coordinate of the c-th fastest axis; column k translates.
    out = theta[:, :, k][:, :, None] + sum(theta[:, :, c][:, :, None] * mesh[k - 1 - c].reshape(1, 1, -1)
                                           for c in range(k))
    return out.reshape(theta.shape[0], k, *size).astype(theta.dtype)


@pytest.mark.parametrize("size,align", [((5, 7), True), ((4, 3), False), ((3, 4, 5), True), ((2, 3, 4), False),
                                        ((1, 4), True), ((3, 1), True), ((1, 1), False)], ids=str)
def test_affine_grid(size, align):
    k = len(size)
    theta = RNG.standard_normal((2, k, k + 1)).astype("float32")
    # Declared injective as in TVM; its kernel reads theta at (n, d, constant), which the pattern
    # analysis (as TVM's AnnotateTIROpPattern) classes as broadcast.
    legal = check_op(relax.op.image.affine_grid, [theta, size], np_affine_grid(theta, size, align), rtol=1e-5,
                     atol=1e-5, expect_pattern="broadcast", align_corners=align)
    assert "def affine_grid(" in legal.script()


def test_affine_grid_of_one_pixel_matches_pytorch():
    """With align_corners an axis of one pixel has no corners to span; PyTorch puts it at 0,
    the pixel's centre (as without align_corners). tvms divided by size - 1 and stopped with
    a ZeroDivisionError."""
    torch = pytest.importorskip("torch")
    theta = RNG.standard_normal((2, 2, 3)).astype("float32")
    for size in [(1, 4), (3, 1), (1, 1)]:
        expected = torch.nn.functional.affine_grid(torch.from_numpy(theta), [2, 1, *size], align_corners=True)
        # PyTorch's grid is (n, h, w, xy); R.image.affine_grid's is (n, xy, h, w)
        check_op(relax.op.image.affine_grid, [theta, size], expected.numpy().transpose(0, 3, 1, 2), rtol=1e-6,
                 atol=1e-6, expect_pattern="broadcast", align_corners=True)


def test_affine_grid_struct_info_and_errors():
    src = _func('t: R.Tensor(("b", 2, 3), dtype="float32")', "gv = R.image.affine_grid(t, size=(16, 16))\nreturn gv")
    mod = _roundtrip(src)
    assert _sinfo_text(mod) == 'R.Tensor((b, 2, 16, 16), dtype="float32")'
    assert "R.image.affine_grid(t, R.shape([16, 16]), align_corners=True)" in mod.script()
    bad = _func('t: R.Tensor((1, 3, 4), dtype="float32")', "g = R.image.affine_grid(t, (4, 4))\nreturn g")
    assert_located(bad, "data must have shape (batch, 2, 3) for 2 sizes", "t, ")


# ----------------------------------------------------------------------------- roi_align / roi_pool


def _bilinear(img, y, x):
    """img (C, H, W) sampled at (y, x) as ROI align samples: 0 beyond a pixel outside."""
    h, w = img.shape[1:]
    if y < -1 or x < -1 or y > h or x > w:
        return np.zeros(img.shape[0])
    y, x = min(max(y, 0.0), h - 1), min(max(x, 0.0), w - 1)
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[:, y0, x0] + (1 - ly) * lx * img[:, y0, x1] + ly * (1 - lx) * img[:, y1, x0]
            + ly * lx * img[:, y1, x1])


def np_roi_align(data, rois, pooled, scale, ratio, aligned, mode):
    out = np.zeros((len(rois), data.shape[1]) + tuple(pooled))
    for r, (b, x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
        sw, sh = x1 * scale, y1 * scale
        rw, rh = x2 * scale - sw, y2 * scale - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / pooled[0], rw / pooled[1]
        for ph in range(pooled[0]):
            for pw in range(pooled[1]):
                samples = [_bilinear(data[int(b)], sh + ph * bh + (iy + 0.5) * bh / ratio,
                                     sw + pw * bw + (ix + 0.5) * bw / ratio)
                           for iy in range(ratio) for ix in range(ratio)]
                out[r, :, ph, pw] = np.mean(samples, axis=0) if mode == "avg" else np.max(samples, axis=0)
    return out.astype(data.dtype)


def _rois(n_batch, size, count):
    corners = np.sort(RNG.uniform(-2, size * 2 + 2, (count, 2, 2)), axis=1)  # x1 <= x2, y1 <= y2
    return np.concatenate([RNG.integers(0, n_batch, (count, 1)), corners[:, 0], corners[:, 1]], axis=1)[
        :, [0, 1, 3, 2, 4]].astype("float32")


@pytest.mark.parametrize("layout,aligned,mode", [("NCHW", False, "avg"), ("NCHW", True, "max"), ("NHWC", False, "avg")],
                         ids=str)
def test_roi_align(layout, aligned, mode):
    data = RNG.standard_normal((2, 3, 6, 7)).astype("float32")
    rois = _rois(2, 6, 4)
    expected = np_roi_align(data, rois, (3, 2), 0.5, 2, aligned, mode)
    if layout == "NHWC":
        data, expected = data.transpose(0, 2, 3, 1).copy(), expected.transpose(0, 2, 3, 1)
    legal = check_op(relax.op.vision.roi_align, [data, rois], expected, rtol=1e-4, atol=1e-5, pooled_size=(3, 2),
                     spatial_scale=0.5, sample_ratio=2, aligned=aligned, layout=layout, mode=mode)
    assert "def roi_align(" in legal.script()


def np_roi_pool(data, rois, pooled, scale):
    h, w = data.shape[2:]
    out = np.zeros((len(rois), data.shape[1]) + tuple(pooled), data.dtype)
    for r, (b, *corners) in enumerate(rois):
        sw, sh, ew, eh = (int(np.round(v * scale)) for v in corners)
        bh, bw = max(eh - sh + 1, 1) / pooled[0], max(ew - sw + 1, 1) / pooled[1]
        for ph in range(pooled[0]):
            for pw in range(pooled[1]):
                hs, he = (min(max(int(f(v * bh)) + sh, 0), h) for f, v in ((np.floor, ph), (np.ceil, ph + 1)))
                ws, we = (min(max(int(f(v * bw)) + sw, 0), w) for f, v in ((np.floor, pw), (np.ceil, pw + 1)))
                if hs < he and ws < we:
                    out[r, :, ph, pw] = data[int(b), :, hs:he, ws:we].max(axis=(1, 2))
    return out


def test_roi_pool():
    data = RNG.standard_normal((2, 2, 5, 6)).astype("float32")
    rois = _rois(2, 5, 5)
    check_op(relax.op.vision.roi_pool, [data, rois], np_roi_pool(data, rois, (2, 3), 0.5), pooled_size=(2, 3),
             spatial_scale=0.5)


def test_roi_align_adaptive_grid_stays_unlegalized():
    src = ("@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((1, 2, 8, 8), dtype=\"float32\"), "
           'rois: R.Tensor((2, 5), dtype="float32")):\n'
           "        gv = R.vision.roi_align(x, rois, pooled_size=3, spatial_scale=1.0)\n        return gv\n")
    mod = _roundtrip(src)
    assert _sinfo_text(mod) == 'R.Tensor((2, 2, 3, 3), dtype="float32")'
    assert "R.vision.roi_align" in relax.transform.LegalizeOps()(mod).script()


# ----------------------------------------------------------------------------- NMS family, box decoding


@pytest.mark.parametrize("params,call,expected", [
    ('b: R.Tensor((2, 5, 4), dtype="float32"), s: R.Tensor((2, 3, 5), dtype="float32"), '
     'm: R.Tensor((), dtype="int64"), io: R.Tensor((), dtype="float32"), st: R.Tensor((), dtype="float32")',
     "R.vision.all_class_non_max_suppression(b, s, m, io, st)",
     'R.Tuple(R.Tensor((30, 3), dtype="int64"), R.Tensor((1,), dtype="int64"))'),
    ('b: R.Tensor((2, 5, 4), dtype="float32"), s: R.Tensor((2, 3, 5), dtype="float32"), '
     'm: R.Tensor((), dtype="int64"), io: R.Tensor((), dtype="float32"), st: R.Tensor((), dtype="float32")',
     'R.vision.all_class_non_max_suppression(b, s, m, io, st, output_format="tensorflow")',
     'R.Tuple(R.Tensor((2, 15, 2), dtype="int64"), R.Tensor((2, 15), dtype="float32"), '
     'R.Tensor((2,), dtype="int64"))'),
    ('d: R.Tensor((2, 5, 6), dtype="float16")', "R.vision.get_valid_counts(d, score_threshold=0.5)",
     'R.Tuple(R.Tensor((2,), dtype="int32"), R.Tensor((2, 5, 6), dtype="float16"), R.Tensor((2, 5), dtype="int32"))'),
    ('d: R.Tensor((2, 5, 6), dtype="float32"), v: R.Tensor((2,), dtype="int32"), i: R.Tensor((2, 5), dtype="int32")',
     "R.vision.non_max_suppression(d, v, i, top_k=3)",
     'R.Tuple(R.Tensor((2, 5), dtype="int32"), R.Tensor((2, 1), dtype="int32"))'),
    ('d: R.Tensor((2, 5, 6), dtype="float32"), v: R.Tensor((2,), dtype="int32"), i: R.Tensor((2, 5), dtype="int32")',
     "R.vision.non_max_suppression(d, v, i, soft_nms_sigma=0.5)",
     'R.Tuple(R.Tensor((2, 5, 6), dtype="float32"), R.Tensor((2, 5), dtype="int32"), '
     'R.Tensor((2, 1), dtype="int32"))'),
    ('d: R.Tensor((2, 5, 6), dtype="float32"), v: R.Tensor((2,), dtype="int32"), i: R.Tensor((2, 5), dtype="int32")',
     "R.vision.non_max_suppression(d, v, i, return_indices=False, soft_nms_sigma=0.5)",
     'R.Tensor((2, 5, 6), dtype="float32")'),
    ('c: R.Tensor((2, 3, 5), dtype="float32"), l: R.Tensor((2, 20), dtype="float32"), '
     'a: R.Tensor((1, 5, 4), dtype="float32")', "R.vision.multibox_transform_loc(c, l, a)",
     'R.Tuple(R.Tensor((2, 5, 4), dtype="float32"), R.Tensor((2, 3, 5), dtype="float32"))'),
    ('x: R.Tensor((1, 8, 8, 2), dtype="float32"), r: R.Tensor((3, 5), dtype="float32")',
     'R.vision.roi_pool(x, r, pooled_size=(3, 4), spatial_scale=0.5, layout="NHWC")',
     'R.Tensor((3, 3, 4, 2), dtype="float32")'),
], ids=lambda v: v.split("(")[0] if v.startswith("R.vision") else "")
def test_vision_struct_info_like_tvm(params, call, expected):
    mod = _roundtrip(_func(params, f"gv = {call}\nreturn gv"))
    assert _sinfo_text(mod) == expected


def test_vision_prints_every_attribute():
    src = _func('c: R.Tensor((1, 3, 5), dtype="float32"), l: R.Tensor((1, 20), dtype="float32"), '
                'a: R.Tensor((1, 5, 4), dtype="float32")', "gv = R.vision.multibox_transform_loc(c, l, a)\nreturn gv")
    assert ("R.vision.multibox_transform_loc(c, l, a, clip=False, threshold=0.0, variances=[1.0, 1.0, 1.0, 1.0], "
            "keep_background=True, apply_softmax=True)") in _roundtrip(src).script()


@pytest.mark.parametrize("call,message,at", [
    ("R.vision.multibox_transform_loc(c, l, a)", "loc_pred.shape[1] must be divisible by 4, got 21", "l, a"),
    ('R.vision.roi_align(x, r, pooled_size=2, spatial_scale=1.0, mode="sum")', "mode must be one of", '"sum"'),
    ("R.vision.roi_align(x, r, spatial_scale=1.0)", "pooled_size is required", "R.vision"),
], ids=str)
def test_vision_errors_are_located(call, message, at):
    params = ('c: R.Tensor((1, 3, 5), dtype="float32"), l: R.Tensor((1, 21), dtype="float32"), '
              'a: R.Tensor((1, 5, 4), dtype="float32"), x: R.Tensor((1, 2, 8, 8), dtype="float32"), '
              'r: R.Tensor((2, 5), dtype="float32")')
    assert_located(_func(params, f"g = {call}\nreturn g"), message, at)


# ----------------------------------------------------------------------------- ccl / dist


def _ccl_module(call: str, shape=(4, 6)) -> str:
    """A module whose ``main`` binds ``gv`` to ``call`` of ``x`` (LegalizeOps runs on modules)."""
    return ("@I.ir_module\nclass Module:\n    @R.function\n"
            f'    def main(x: R.Tensor({shape}, dtype="float32")):\n        gv = {call}\n        return gv\n')


@pytest.mark.parametrize("call,sinfo,legal", [
    ('R.ccl.allreduce(x, "max")', 'R.Tensor((4, 6), dtype="float32")',
     'R.call_dps_packed("runtime.disco.allreduce", (x, R.shape([3]), R.prim_value(1)), '
     'out_sinfo=R.Tensor((4, 6), dtype="float32"))'),
    ("R.ccl.allgather(x, num_workers=3, in_group=False)", 'R.Tensor((12, 6), dtype="float32")',
     'R.call_dps_packed("runtime.disco.allgather", (x, R.prim_value(0)), '
     'out_sinfo=R.Tensor((12, 6), dtype="float32"))'),
    ("R.ccl.broadcast_from_worker0(x)", 'R.Tensor((4, 6), dtype="float32")',
     'R.call_dps_packed("runtime.disco.broadcast_from_worker0", (x, R.prim_value(0)), '
     'out_sinfo=R.Tensor((4, 6), dtype="float32"))'),
], ids=lambda v: v.split("(")[0] if v.startswith("R.ccl") else "")
def test_ccl_struct_info_and_legalized_form(call, sinfo, legal):
    mod = _roundtrip(_ccl_module(call))
    assert _sinfo_text(mod) == sinfo
    out = relax.transform.LegalizeOps()(mod)
    assert f"gv = {legal}" in out.script()
    _roundtrip(out.script())


def test_symbolic_dims_as_tvm_infers_them():
    mod = _roundtrip(_func('x: R.Tensor(("n", 3), dtype="float32")', "gv = R.ccl.allgather(x, 2)\nreturn gv"))
    assert _sinfo_text(mod) == 'R.Tensor((n * 2, 3), dtype="float32")'
    mod = _roundtrip(_func('x: R.Tensor(("n", 3), dtype="float32")', "gv = R.ccl.scatter_from_worker0(x, 2)\nreturn gv"))
    assert _sinfo_text(mod) == 'R.Tensor((T.Div(n, 2), 3), dtype="float32")'


@pytest.fixture
def one_worker():
    """Stand-ins for the disco runtime functions as one worker sees them (``set(worker)``),
    removed afterwards."""
    from tvmscript.runtime.registry import remove_global_func

    names = ("runtime.disco.scatter_from_worker0", "runtime.disco.worker_id")

    def set_worker(worker: int) -> None:
        def scatter(stacked, in_group, out):  # worker 0 sends slice ``worker`` of the stack
            out.numpy()[...] = stacked.numpy()[worker]

        tvms.register_func(names[0], scatter, override=True)
        tvms.register_func(names[1], lambda: (worker,), override=True)

    yield set_worker
    for name in names:
        remove_global_func(name)


@pytest.mark.parametrize("op", ["R.ccl.scatter_from_worker0", "R.dist.redistribute_replica_to_shard"])
@pytest.mark.parametrize("axis,worker", [(0, 1), (1, 2), (-1, 0)])
def test_sharding_gives_the_worker_its_slice(op, axis, worker, one_worker):
    x = RNG.standard_normal((6, 9)).astype("float32")
    mod = _roundtrip(_ccl_module(f"{op}(x, num_workers=3, axis={axis})", shape=(6, 9)))
    expected = np.split(x, 3, axis=axis)[worker]
    assert _sinfo_text(mod) == f'R.Tensor({expected.shape}, dtype="float32")'
    legal = relax.transform.LegalizeOps()(mod)
    _roundtrip(legal.script())
    one_worker(worker)
    vm = relax.VirtualMachine(tvms.compile(legal, "llvm"), tvms.cpu())
    np.testing.assert_array_equal(vm["main"](x).numpy(), expected)


def test_scatter_indivisible_is_located():
    src = _func('x: R.Tensor((4, 6), dtype="float32")',
                "gv = R.ccl.scatter_from_worker0(x, num_workers=4, axis=1)\nreturn gv")
    assert_located(src, "dim 1 of size 6 is not divisible by num_workers=4", "4, axis")


# ----------------------------------------------------------------------------- memory ops, devices


def test_memory_ops_read_and_print_like_tvm():
    src = _func('x: R.Tensor(("m", "n"), dtype="float32")',
                "m = T.int64()\nn = T.int64()\n"
                'storage = R.memory.alloc_storage(R.shape([4 * m * n]), virtual_device_index=0, '
                'storage_scope="global", dtype="float32")\n'
                'alloc = R.memory.alloc_tensor(storage, offset=0, shape=R.shape([m, n]), dtype="float32")\n'
                "k = R.memory.kill_tensor(alloc)\nks = R.memory.kill_storage(storage)\n"
                "s = R.builtin.stop_lift_params(x)\nreturn (alloc, s)")
    mod = _roundtrip(src)
    text = mod.script()
    assert ('R.memory.alloc_storage(R.shape([4 * m * n]), R.prim_value(0), R.str("global"), R.dtype("float32"))'
            in text)
    assert 'R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([m, n]), R.dtype("float32"), R.prim_value(0))' \
        in text
    assert _sinfo_text(mod, "alloc") == 'R.Tensor((m, n), dtype="float32")'
    assert _sinfo_text(mod, "s") == 'R.Tensor((m, n), dtype="float32")'
    assert _sinfo_text(mod, "k") == "R.Tuple"


def test_vm_memory_ops():
    src = ("@R.function(pure=False)\ndef main(x: R.Tensor((2, 3), dtype=\"float32\")):\n"
           '    storage = R.vm.alloc_storage(R.shape([24]), runtime_device_index=0, dtype="uint8")\n'
           '    alloc = R.vm.alloc_tensor(storage, offset=0, shape=R.shape([2, 3]), dtype="float16")\n'
           '    R.vm.call_tir_dyn("te_func", (x, alloc, R.shape([2, 3])))\n'
           "    _ = R.vm.kill_object(storage)\n    return alloc\n")
    mod = _roundtrip(src)
    text = mod.script()
    assert 'R.vm.alloc_storage(R.shape([24]), R.prim_value(0), R.dtype("uint8"), R.str("global"))' in text
    assert _sinfo_text(mod, "alloc") == 'R.Tensor((2, 3), dtype="float16")'
    assert 'R.vm.call_tir_dyn(R.str("te_func"), (x, alloc, R.shape([2, 3])))' in text


def test_memory_op_errors_are_located():
    src = _func('x: R.Tensor((2,), dtype="float32")',
                'st = R.memory.alloc_storage(R.shape([8]), 0, "global", dtype="float33")\nreturn x')
    assert_located(src, "unknown dtype 'float33'", '"float33"')


def test_to_vdevice():
    src = ('@I.ir_module\nclass Module:\n    I.module_global_infos({"vdevice": [I.vdevice("llvm"), '
           'I.vdevice("cuda", 1)]})\n\n    @R.function\n    def foo(x: R.Tensor((2, "n"), "int32")):\n'
           '        a = R.to_vdevice(x, "llvm")\n        b = R.to_vdevice(a, "cuda:0:global.texture")\n'
           "        return b\n")
    mod = _roundtrip(src)
    text = mod.script()
    assert ('a: R.Tensor((2, n), dtype="int32", vdevice="llvm:0:global") = '
            'R.to_vdevice(x, dst_vdevice="llvm:0:global")') in text
    assert 'vdevice="cuda:0:global.texture") = R.to_vdevice(a, dst_vdevice="cuda:0:global.texture")' in text
    bad = src.replace('"cuda:0:global.texture"', '"cuda:x"')
    assert_located(bad, "dst_vdevice 'cuda:x' is not of the form", '"cuda:x"', line=8)


def np_multibox(cls, loc, anchor, variances, clip, threshold, keep_background, apply_softmax):
    b, c, n = cls.shape
    enc = loc.reshape(b, n, 4).astype(np.float64)
    left, top, right, bottom = (anchor[0, :, i].astype(np.float64) for i in range(4))
    ah, aw = bottom - top, right - left
    yc = enc[..., 1] * variances[1] * ah + (top + bottom) / 2
    xc = enc[..., 0] * variances[0] * aw + (left + right) / 2
    hh, hw = 0.5 * np.exp(enc[..., 3] * variances[3]) * ah, 0.5 * np.exp(enc[..., 2] * variances[2]) * aw
    boxes = np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=-1)
    if clip:
        boxes = np.clip(boxes, 0, 1)
    scores = cls.astype(np.float64)
    if apply_softmax:
        scores = np.exp(scores - scores.max(axis=1, keepdims=True))
        scores /= scores.sum(axis=1, keepdims=True)
    scores = np.where(scores >= threshold, scores, 0)
    if not keep_background:
        scores[:, 0] = 0
    return [boxes.astype(cls.dtype), scores.astype(cls.dtype)]


@pytest.mark.parametrize("clip,threshold,keep_background,apply_softmax", [
    (False, 0.0, True, True), (True, 0.3, False, True), (False, 0.2, True, False)], ids=str)
def test_multibox_transform_loc(clip, threshold, keep_background, apply_softmax):
    cls = RNG.standard_normal((2, 3, 5)).astype("float32")
    loc = (RNG.standard_normal((2, 20)) * 0.5).astype("float32")
    corners = np.sort(RNG.uniform(0, 1, (1, 5, 2, 2)), axis=2)  # (left, right), (top, bottom)
    anchor = corners.transpose(0, 1, 3, 2).reshape(1, 5, 4)[:, :, [0, 2, 1, 3]].astype("float32")
    variances = (1.0, 0.5, 0.25, 2.0)
    expected = np_multibox(cls, loc, anchor, variances, clip, threshold, keep_background, apply_softmax)
    # Declared opaque as in TVM; the legalized kernel analyzes as its stages are (softmax's
    # reduction feeding elementwise work, or plain injective decoding).
    legal = check_op(relax.op.vision.multibox_transform_loc, [cls, loc, anchor], expected, rtol=1e-5, atol=1e-6,
                     expect_pattern="out_ewise_fusable" if apply_softmax else "injective", clip=clip,
                     threshold=threshold,
                     variances=variances, keep_background=keep_background, apply_softmax=apply_softmax)
    assert "def multibox_transform_loc(" in legal.script()


def np_get_valid_counts(data, threshold, id_index, score_index):
    b, n, e = data.shape
    count = np.zeros(b, "int32")
    moved = np.full_like(data, -1.0)
    indices = np.full((b, n), -1, "int32")
    for i in range(b):
        for j in range(n):
            if data[i, j, score_index] > threshold and (id_index < 0 or data[i, j, id_index] >= 0):
                moved[i, count[i]] = data[i, j]
                indices[i, count[i]] = j
                count[i] += 1
    return [count, moved, indices]


@pytest.mark.parametrize("threshold,id_index,score_index", [(0.5, 0, 1), (0.2, -1, 2)], ids=str)
def test_get_valid_counts(threshold, id_index, score_index):
    data = RNG.uniform(-0.5, 1, (2, 6, 5)).astype("float32")
    data[:, 0, score_index], data[:, 1, score_index] = 0.9, 0.0  # a kept box and a dropped one in each batch
    data[:, 0, max(id_index, 0)] = 1.0
    expected = np_get_valid_counts(data, threshold, id_index, score_index)
    assert 0 < expected[0].min() and expected[0].max() < 6
    # Declared opaque as in TVM; the legalized kernel's stages analyze as reductions feeding
    # elementwise work.
    legal = check_op(relax.op.vision.get_valid_counts, [data], expected, expect_pattern="out_ewise_fusable",
                     score_threshold=threshold, id_index=id_index, score_index=score_index)
    assert "def get_valid_counts(" in legal.script()


def test_hint_on_device_reads_the_device_call_and_prints_it_as_tvm():
    text = '''# from tvm.script import relax as R

@R.function
def foo(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
    r = R.hint_on_device(x, R.device(2, 1), memory_scope="global.texture")
    s = R.hint_on_device(r, R.device(device_type=1))
    return s
'''
    func = tvms.parse(text)
    printed = func.script()
    assert ('r: R.Tensor((2, 3), dtype="float32") = R.hint_on_device(x, R.device(device_type=2, index=1), '
            '"global.texture")') in printed
    assert 'R.hint_on_device(r, R.device(device_type=1, index=0), "global")' in printed
    again = tvms.parse(printed)
    assert structural_equal(func, again) and again.script() == printed
    with pytest.raises(TVMScriptError, match=r"expects the device as R.device\(device_type, index\)"):
        tvms.parse(text.replace("R.device(2, 1)", "2"))
