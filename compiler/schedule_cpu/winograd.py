"""Winograd convolution: a 3x3 convolution of stride 1 computed by Winograd's minimal
filtering algorithm F(m x m, 3 x 3), as an alternative to the direct convolution that a tuner
may pick (`schedule_choices.ALGORITHM`; the default schedule never picks it by itself).

Why: the direct convolution is a matrix multiply of ``9 C`` terms per output, and tvms's
register tiles run it near the machine's peak (resnet18's first 3x3 convolution at about 75% of
two AVX-512 cores), so no schedule of it can go much faster. Winograd's algorithm computes an
``m x m`` tile of outputs from an ``(m + 2) x (m + 2)`` tile of inputs with ``(m + 2)^2``
multiplications per input and output channel pair instead of ``9 m^2``: 2.25 times fewer for
m = 2, 4 times fewer for m = 4, at the price of linear transforms of the input, the weights and
the output. It is what cuDNN, oneDNN and TVM's TOPI (``conv2d_nchw_winograd``) offer.

How (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): with
``a = m + 2`` and the constant matrices ``B`` (a x a), ``G`` (a x 3) and ``A`` (a x m) of
`TRANSFORMS`, each tile of outputs is ``A^T [(G g G^T) * (B^T d B)] A`` for the weights ``g``
(3 x 3) and the input tile ``d`` (a x a), ``*`` elementwise and summed over input channels.
The convolution's stage is replaced by six stages:

* ``pack``: the padded input copied channels-last, ``d[n, i, j, c]``, over whole tiles (zeros
  past the input's end), so that every later read is contiguous along channels (no pass at
  all for channels-last data that covers whole tiles: it is read in place);
* ``input transform``: ``V[e, f, p, c] = (B^T d_p B)[e, f]`` for each tile ``p`` (tiles
  numbered across the batch), written out as additions of constant multiples and vectorized
  along ``c``;
* ``weight transform``: ``U[e, f, c, k] = (G g_kc G^T)[e, f]``, vectorized along ``k``;
* ``batched matrix multiply``: ``M[e, f, p, k] = sum_c V[e, f, p, c] * U[e, f, c, k]``, an
  ordinary reduction block that the register tile schedules like any matmul;
* ``output transform``: ``Y[p's rows and columns, k] = (A^T M_pk A)``, vectorized along ``k``;
* ``unpack``: the convolution's output written from ``Y`` in its own layout, the tiles' extra
  rows and columns past the output left out (none for a channels-last output of whole tiles:
  the output transform writes it).

When the build binds the weights to a constant (a model's weights, `prepack`: the parameter
is layout-free) and only the convolution reads them, the weight transform is not a stage: the
parameter takes the layout of ``U`` (`WinogradWeights`), which the build computes once from the
constant, as TVM folds ``conv2d_winograd_weight_transform`` into the constants.

The transforms are written already scheduled (a parallel loop over rows of tiles, a vector
loop over channels, the tile's arithmetic unrolled with its zero coefficients left out): the
rules take only nests of one store, and the point of the transforms is to be cheap. The padding
stage the convolution read, when it is the only reader, is inlined into ``pack``.

Numerics: the result differs from the direct convolution's by rounding: the transforms add and
subtract terms of different sizes (by 4 and 5 for m = 4), so the error grows with m; for
float32 and 64 channels about 1e-5 of the outputs' magnitude for m = 4, against 1e-6 for the
direct sum. That is why only a tuner picks it, after checking the candidate's output against
the default schedule's (`compiler.meta_schedule`), as TVM applies ``conv2d_winograd`` only
when tuning or its op strategy asks for it.

Matched: a float32 block ``out[n, k, y, x] += data[n, c, y + ry, x + rx] * w[k, c, ry, rx]``
with an init of zero, ``ry`` and ``rx`` over 0..2, every extent constant, the axes of each
buffer in any order (the legalized ``R.nn.conv2d`` of stride 1 and dilation 1, no groups, NCHW
and OIHW, or NHWC and HWIO as the CPU build lays out a model's convolutions), at the
function's top level."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_analysis import infer_access_regions

from ..schedule import Schedule, ScheduleError
from ..schedule.common import blocks_under
from .analysis import affine, reduction_rhs
from ..schedule_choices import ALGORITHM, choose
from .inline import is_padding
from .prepack import claim_whole

__all__ = ["DIRECT", "WINOGRAD_2", "WINOGRAD_4", "ALGORITHMS", "TRANSFORMS", "Conv3x3", "WinogradWeights",
           "match_conv3x3", "winograd_convolutions"]

DIRECT = "direct"
WINOGRAD_4 = "winograd_4x4"  # F(4x4, 3x3): 6x6 input tiles, 4x fewer multiplications
WINOGRAD_2 = "winograd_2x2"  # F(2x2, 3x3): 4x4 input tiles, 2.25x fewer, smaller rounding error
ALGORITHMS = (DIRECT, WINOGRAD_4, WINOGRAD_2)  # the choice point's options; the first is the default's

_F = Fraction
# m -> (B^T, G, A^T), Lavin and Gray's matrices (interpolation points 0, 1, -1, 2, -2, inf for m = 4).
TRANSFORMS = {
    4: (((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0),
         (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1)),
        ((_F(1, 4), 0, 0), (_F(-1, 6), _F(-1, 6), _F(-1, 6)), (_F(-1, 6), _F(1, 6), _F(-1, 6)),
         (_F(1, 24), _F(1, 12), _F(1, 6)), (_F(1, 24), _F(-1, 12), _F(1, 6)), (0, 0, 1)),
        ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))),
    2: (((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
        ((1, 0, 0), (_F(1, 2), _F(1, 2), _F(1, 2)), (_F(1, 2), _F(-1, 2), _F(1, 2)), (0, 0, 1)),
        ((1, 1, 1, 0), (0, 1, -1, -1))),
}
_TILE = {WINOGRAD_4: 4, WINOGRAD_2: 2}


@dataclasses.dataclass
class Conv3x3:
    """A matched convolution block (see the module docstring) and its sizes. The layouts say
    which axis of each buffer is which, one letter per axis: ``n`` batch, ``c`` input channel,
    ``k`` output channel, ``y`` and ``x`` rows and columns (of the window, in the weights):
    ``"ncyx"`` / ``"kcyx"`` / ``"nkyx"`` for NCHW and OIHW, ``"nyxc"`` / ``"yxck"`` / ``"nyxk"``
    for NHWC and HWIO (the CPU build's layout for models)."""

    realize: tir.BlockRealize
    out: tir.Buffer  # [N, K, OH, OW] in out_axes' order
    data: tir.Buffer  # [N, C, IH, IW] in data_axes' order, padded already
    weight: tir.Buffer  # [K, C, 3, 3] in weight_axes' order
    n: int
    k: int
    oh: int
    ow: int
    c: int
    data_axes: str = "ncyx"
    weight_axes: str = "kcyx"
    out_axes: str = "nkyx"


def _at(axes: str, **index) -> list:
    """Indices in the order ``axes`` names them (`Conv3x3`), from one per letter."""
    return [index[a] for a in axes]


def winograd_convolutions(func: tir.PrimFunc, body):
    """``body`` (of ``func``, its root BlockRealize) with each matched convolution that the
    function's choices make Winograd (`schedule_choices.ALGORITHM`) rewritten into the stages of the
    module docstring. Each match is a choice point, met in program order."""
    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None:
        return body
    stages = list(root.body.seq) if isinstance(root.body, tir.SeqStmt) else [root.body]
    new_stages, allocs, inline, changed = [], list(root.alloc_buffers), [], False
    for stage in stages:
        conv = _stage_conv(stage)
        algorithm = choose(ALGORITHM, list(ALGORITHMS)) if conv is not None else DIRECT
        if algorithm == DIRECT:
            new_stages.append(stage)
            continue
        built = _Builder(conv, _TILE[algorithm], _weight_prepacked(conv, stages, _TILE[algorithm]))
        new_stages += built.stages()
        allocs += built.buffers()
        changed = True
        if conv.data in root.alloc_buffers and not built.data_in_place:
            inline.append(conv.data)
    if not changed:
        return body
    root = dataclasses.replace(root, body=tir.seq(new_stages), alloc_buffers=allocs)
    body = dataclasses.replace(body, block=root)
    return _inline_paddings(func, body, inline)


def _stage_conv(stage) -> Optional[Conv3x3]:
    """The convolution a top-level stage computes, when it is a loop nest around one block
    that matches (`match_conv3x3`)."""
    realizes = blocks_under(stage) if not isinstance(stage, tir.BlockRealize) else [stage]
    if len(realizes) != 1 or not _loops_only(stage):
        return None
    return match_conv3x3(realizes[0])


def _loops_only(stage) -> bool:
    while isinstance(stage, tir.For):
        stage = stage.body
    return isinstance(stage, tir.BlockRealize)


def match_conv3x3(realize: tir.BlockRealize) -> Optional[Conv3x3]:
    """The convolution ``realize``'s block computes (see the module docstring), or None."""
    block = realize.block
    store = block.body
    if not isinstance(store, tir.BufferStore) or store.buffer.dtype != "float32" or block.init is None:
        return None
    init = block.init
    if not (isinstance(init, tir.BufferStore) and isinstance(init.value, tir.FloatImm) and init.value.value == 0.0):
        return None
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "S"]
    reduce = [iv.var for iv in block.iter_vars if iv.kind == "R"]
    if len(spatial) != 4 or len(reduce) != 3 or len(block.iter_vars) != 7:
        return None
    if any(not isinstance(iv.dom.min, tir.IntImm) or iv.dom.min.value != 0 or not isinstance(iv.dom.extent, tir.IntImm)
           for iv in block.iter_vars):
        return None
    if len(store.indices) != 4 or not all(isinstance(i, tir.Var) and i in spatial for i in store.indices) \
            or len(set(store.indices)) != 4:
        return None
    rhs = reduction_rhs(store)
    if not isinstance(store.value, tir.Add) or not isinstance(rhs, tir.Mul):
        return None
    loads = [rhs.a, rhs.b]
    if not all(isinstance(ld, tir.BufferLoad) and ld.dtype == "float32" and len(ld.indices) == 4 for ld in loads):
        return None
    ext = {iv.var: iv.dom.extent.value for iv in block.iter_vars}
    for data, weight in (loads, loads[::-1]):
        roles = _conv_roles(data, weight, spatial, reduce)
        if roles is None:
            continue
        var, data_axes, weight_axes = roles
        if ext[var["ry"]] != 3 or ext[var["rx"]] != 3:
            return None
        out_axes = "".join(next(r for r in "nkyx" if var[r] is i) for i in store.indices)
        shape = dict(zip(data_axes, (_const(d) for d in data.buffer.shape)))
        if None in shape.values() or shape["y"] < ext[var["y"]] + 2 or shape["x"] < ext[var["x"]] + 2 \
                or shape["c"] != ext[var["c"]] or shape["n"] != ext[var["n"]]:
            return None
        return Conv3x3(realize, store.buffer, data.buffer, weight.buffer, ext[var["n"]], ext[var["k"]], ext[var["y"]],
                       ext[var["x"]], ext[var["c"]], data_axes, weight_axes, out_axes)
    return None


def _conv_roles(data: tir.BufferLoad, weight: tir.BufferLoad, spatial: list, reduce: list) -> Optional[tuple]:
    """``(iterators by role, data axes, weight axes)`` when ``data`` is read at ``n``, ``c``,
    ``y + ry`` and ``x + rx`` (in some order, rows before columns) and ``weight`` at ``k``,
    ``c``, ``ry`` and ``rx`` (in some order), every index one iterator or a window's sum of
    two; else None. Roles: ``n``, ``k``, ``y``, ``x`` (spatial), ``c``, ``ry``, ``rx`` (reduce)."""
    var, data_axes = {}, ""
    for index in data.indices:
        if isinstance(index, tir.Var) and index in spatial and "n" not in var:
            var["n"], data_axes = index, data_axes + "n"
        elif isinstance(index, tir.Var) and index in reduce and "c" not in var:
            var["c"], data_axes = index, data_axes + "c"
        else:
            terms = affine(index)
            pair = [v for v in (terms or {}) if v is not None and terms[v] == 1]
            if terms is None or terms.get(None) != 0 or len(terms) != 3 or len(pair) != 2:
                return None
            s_var = next((v for v in pair if v in spatial), None)
            r_var = next((v for v in pair if v in reduce), None)
            role = "y" if "y" not in var else "x"
            if s_var is None or r_var is None or role in var:
                return None
            var[role], var["r" + role], data_axes = s_var, r_var, data_axes + role
    if sorted(data_axes) != sorted("ncyx"):
        return None
    rest = [v for v in spatial if v not in (var["n"], var["y"], var["x"])]
    if len(rest) != 1:
        return None
    var["k"] = rest[0]
    by_var = {id(var[r]): r for r in ("k", "c", "ry", "rx")}
    weight_roles = [by_var.get(id(i)) if isinstance(i, tir.Var) else None for i in weight.indices]
    if sorted(map(str, weight_roles)) != sorted(["k", "c", "ry", "rx"]):
        return None
    weight_axes = "".join({"ry": "y", "rx": "x"}.get(r, r) for r in weight_roles)
    return var, data_axes, weight_axes


def _const(e) -> Optional[int]:
    return e.value if isinstance(e, tir.IntImm) else None


# ----------------------------------------------------------------------------- the stages


@dataclasses.dataclass(frozen=True)
class WinogradWeights:
    """The layout a layout-free weight (one the build binds to a constant, `prepack`) takes in
    a Winograd convolution: ``U = G w G^T`` per pair of channels, ``[m + 2, m + 2, C, K]``,
    which the build computes once from the constant (`prepack_constants.pack_array`) instead
    of the weight transform stage on every call."""

    m: int
    shape: tuple
    weight_axes: str = "kcyx"  # the constant's layout (`Conv3x3.weight_axes`): OIHW, or HWIO

    def __repr__(self) -> str:  # as a scheduled function's attribute prints
        return f"WinogradWeights(m={self.m}, shape={tuple(self.shape)}, weight_axes={self.weight_axes!r})"


def _weight_prepacked(conv: Conv3x3, stages: list, m: int) -> Optional[tir.Buffer]:
    """The buffer of transformed weights that replaces ``conv``'s weight parameter when the
    build binds it to a constant and nothing but the convolution reads it (`prepack.
    claim_whole`), else None (the weight transform runs in the kernel)."""
    readers = [r for stage in stages for r in blocks_under(stage) + ([stage] if isinstance(stage, tir.BlockRealize)
                                                                        else [])
               if any(region.buffer is conv.weight for region in r.block.reads)]
    if readers != [conv.realize]:
        return None
    a = m + 2
    shape = [tir.IntImm("int64", v) for v in (a, a, conv.c, conv.k)]
    new = dataclasses.replace(conv.weight, shape=shape, strides=[])
    layout = WinogradWeights(m, (a, a, conv.c, conv.k), conv.weight_axes)
    return new if claim_whole(conv.weight, new, layout, ("winograd", m)) else None


class _Builder:
    """Builds the stages for one convolution with tile size ``m`` (see the module docstring);
    ``u``: the weights transformed already (a parameter, `WinogradWeights`), or None."""

    def __init__(self, conv: Conv3x3, m: int, u: Optional[tir.Buffer] = None) -> None:
        self.conv, self.m, self.a = conv, m, m + 2
        self.bt, self.g, self.at = TRANSFORMS[m]
        self.idx = conv.realize.block.iter_vars[0].var.dtype  # the index type the function uses
        self.th, self.tw = -(-conv.oh // m), -(-conv.ow // m)  # tiles down and across
        self.rows = conv.n * self.th  # rows of tiles, across the batch
        self.tiles = self.rows * self.tw
        name = conv.out.name
        # Channels-last data that covers whole tiles is read in place, and a channels-last
        # output of whole tiles written in place: no packing or unpacking pass (NHWC models).
        self.hp, self.wp = self.th * m + 2, self.tw * m + 2  # the input the tiles read
        self.ih, self.iw = (_const(conv.data.shape[conv.data_axes.index(a)]) for a in "yx")
        self.data_in_place = conv.data_axes == "nyxc" and self.hp <= self.ih and self.wp <= self.iw
        self.out_in_place = conv.out_axes == "nyxk" and conv.oh % m == 0 and conv.ow % m == 0
        self.d = conv.data if self.data_in_place else \
            self.buffer(f"{name}_wino_d", [conv.n, self.hp, self.wp, conv.c])
        self.v = self.buffer(f"{name}_wino_v", [self.a, self.a, self.tiles, conv.c])
        self.prepacked = u is not None
        self.u = u if u is not None else self.buffer(f"{name}_wino_u", [self.a, self.a, conv.c, conv.k])
        self.mm = self.buffer(f"{name}_wino_m", [self.a, self.a, self.tiles, conv.k])
        self.y = conv.out if self.out_in_place else self.buffer(f"{name}_wino_y", [self.rows * m, self.tw * m, conv.k])

    def buffer(self, name: str, shape: list) -> tir.Buffer:
        return tir.Buffer(name, [self.i(s) for s in shape], "float32", data=tir.Var("handle", name))

    def i(self, v: int) -> tir.IntImm:
        return tir.IntImm(self.idx, v)

    def var(self, name: str) -> tir.Var:
        return tir.Var(self.idx, name)

    def image_and_row(self, r) -> tuple:
        """``(n, t)``: the image and its row of tiles of the ``r``-th row of tiles."""
        return tir.FloorDiv(self.idx, r, self.i(self.th)), tir.FloorMod(self.idx, r, self.i(self.th))

    def buffers(self) -> list:
        """The buffers the stages allocate."""
        return ([] if self.data_in_place else [self.d]) + [self.v] + ([] if self.prepacked else [self.u]) + \
            [self.mm] + ([] if self.out_in_place else [self.y])

    def stages(self) -> list:
        """The stages replacing the convolution's, in order (see the module docstring)."""
        return ([] if self.data_in_place else [self.pack()]) + [self.input_transform()] + \
            ([] if self.prepacked else [self.weight_transform()]) + [self.batched_matmul(), self.output_transform()] + \
            ([] if self.out_in_place else [self.unpack()])

    # -- plain blocks (the rules schedule them)

    def block_nest(self, name: str, axes: str, extents: list, kinds: str, make, init=None) -> tir.Stmt:
        """A loop nest over ``extents`` around a block of those iterators (named by the
        letters of ``axes``, of ``kinds``), whose body ``make(iterators)`` builds (and whose
        init ``init(iterators)``)."""
        loops = [self.var(a) for a in axes]
        ivars = [self.var(f"v_{a}") for a in axes]
        ivs = [tir.IterVar(v, tir.Range(self.i(0), self.i(e)), kind) for v, e, kind in zip(ivars, extents, kinds)]
        body = make(ivars)
        init_stmt = init(ivars) if init is not None else None
        reads, writes = infer_access_regions(body, init_stmt, [])
        stmt = tir.BlockRealize(list(loops), tir.IntImm("bool", 1),
                                tir.Block(name, ivs, reads, writes, body, init=init_stmt))
        for lv, e in reversed(list(zip(loops, extents))):
            stmt = tir.For(lv, self.i(0), self.i(e), "serial", stmt)
        return stmt

    def pack(self) -> tir.Stmt:
        """``d[n, i, j, c] = data[n, c, i, j]`` (NHWC: a copy), zero past the data's end."""
        conv, d = self.conv, self.d
        ih, iw, hp, wp = self.ih, self.iw, self.hp, self.wp

        def make(v):
            n, i, j, c = v
            value = tir.BufferLoad("float32", conv.data, _at(conv.data_axes, n=n, c=c, y=i, x=j))
            conds = ([i < self.i(ih)] if hp > ih else []) + ([j < self.i(iw)] if wp > iw else [])
            if conds:
                cond = conds[0] if len(conds) == 1 else tir.And("bool", conds[0], conds[1])
                value = tir.Call("float32", "tir.if_then_else", [cond, value, tir.FloatImm("float32", 0.0)])
            return tir.BufferStore(d, value, [n, i, j, c])
        return self.block_nest(f"{d.name}_pack", "nijc", [conv.n, hp, wp, conv.c], "SSSS", make)

    def batched_matmul(self) -> tir.Stmt:
        """``M[e, f, p, k] = sum_c V[e, f, p, c] * U[e, f, c, k]``."""
        conv, v, u, mm = self.conv, self.v, self.u, self.mm

        def make(it):
            e, f, p, k, c = it
            acc = tir.BufferLoad("float32", mm, [e, f, p, k])
            prod = tir.Mul("float32", tir.BufferLoad("float32", v, [e, f, p, c]), tir.BufferLoad("float32", u, [e, f, c, k]))
            return tir.BufferStore(mm, tir.Add("float32", acc, prod), [e, f, p, k])

        def init(it):
            e, f, p, k, _ = it
            return tir.BufferStore(mm, tir.FloatImm("float32", 0.0), [e, f, p, k])
        return self.block_nest(f"{conv.out.name}_wino_gemm", "efpkc", [self.a, self.a, self.tiles, conv.k, conv.c], "SSSSR",
                               make, init)

    def unpack(self) -> tir.Stmt:
        """``out[n, k, y, x] = Y[n * rows + y, x, k]`` (NHWC: a copy), looping in ``out``'s
        order."""
        conv, y = self.conv, self.y
        axes = conv.out_axes
        extents = _at(axes, n=conv.n, k=conv.k, y=conv.oh, x=conv.ow)

        def make(it):
            v = dict(zip(axes, it))
            row = tir.Add(self.idx, tir.Mul(self.idx, v["n"], self.i(self.th * self.m)), v["y"])
            return tir.BufferStore(conv.out, tir.BufferLoad("float32", y, [row, v["x"], v["k"]]), list(it))
        return self.block_nest(f"{conv.out.name}_wino_unpack", axes, extents, "SSSS", make)

    # -- the transforms, scheduled here (see the module docstring)

    def transform_stage(self, name: str, outer: int, middle: Optional[int], lanes: int, body) -> tir.Stmt:
        """An opaque block around ``for r in parallel(outer): for s in range(middle): for l in
        vectorized(lanes): body(r, s, l)`` (no ``s`` loop when ``middle`` is None)."""
        r, s, lane = self.var("r"), self.var("s"), self.var("l")
        stmt = tir.For(lane, self.i(0), self.i(lanes), "vectorized", body(r, s if middle else None, lane))
        if middle is not None:
            stmt = tir.For(s, self.i(0), self.i(middle), "serial", stmt)
        stmt = tir.For(r, self.i(0), self.i(outer), "parallel", stmt)
        reads, writes = infer_access_regions(stmt, None, [])
        return tir.BlockRealize([], tir.IntImm("bool", 1), tir.Block(name, [], reads, writes, stmt))

    def input_transform(self) -> tir.Stmt:
        m, d, v = self.m, self.d, self.v

        def body(r, s, c):
            n, t = self.image_and_row(r)
            tile = [[tir.BufferLoad("float32", d, [n, _add(self, _mul(self, t, m), a), _add(self, _mul(self, s, m), b), c])
                     for b in range(self.a)] for a in range(self.a)]
            p = tir.Add(self.idx, _mul(self, r, self.tw), s)
            return _transform2d("d", self.bt, tile, self.bt, lambda e, f: [self.i(e), self.i(f), p, c], v)
        return self.transform_stage(f"{v.name}_transform", self.rows, self.tw, self.conv.c, body)

    def weight_transform(self) -> tir.Stmt:
        conv, u = self.conv, self.u

        def body(c, _s, k):
            g = [[tir.BufferLoad("float32", conv.weight, _at(conv.weight_axes, k=k, c=c, y=self.i(a), x=self.i(b)))
                  for b in range(3)]
                 for a in range(3)]
            return _transform2d("g", self.g, g, self.g, lambda e, f: [self.i(e), self.i(f), c, k], u)
        return self.transform_stage(f"{u.name}_transform", conv.c, None, conv.k, body)

    def output_transform(self) -> tir.Stmt:
        m, mm, y = self.m, self.mm, self.y

        def body(r, s, k):
            p = tir.Add(self.idx, _mul(self, r, self.tw), s)
            tile = [[tir.BufferLoad("float32", mm, [self.i(e), self.i(f), p, k]) for f in range(self.a)]
                    for e in range(self.a)]
            if self.out_in_place:   # out[n, t * m + i, s * m + j, k]
                n, t = self.image_and_row(r)
                at = lambda i, j: [n, _add(self, _mul(self, t, m), i), _add(self, _mul(self, s, m), j), k]  # noqa: E731
            else:                   # Y[r * m + i, s * m + j, k]
                at = lambda i, j: [_add(self, _mul(self, r, m), i), _add(self, _mul(self, s, m), j), k]  # noqa: E731
            return _transform2d("m", self.at, tile, self.at, at, y)
        return self.transform_stage(f"{y.name}_transform", self.rows, self.tw, self.conv.k, body)


def _mul(b: _Builder, x, c: int):
    return x if c == 1 else tir.Mul(b.idx, x, b.i(c))


def _add(b: _Builder, x, c: int):
    return x if c == 0 else tir.Add(b.idx, x, b.i(c))


def _transform2d(prefix: str, left, tile: list, right, out_indices, out: tir.Buffer) -> tir.Stmt:
    """Stores ``out[out_indices(i, j)] = (L tile R^T)[i, j]`` for the constant matrices
    ``left`` (L) and ``right`` (R): the products ``L tile`` bound to variables first (each
    used by every ``j``), then one linear combination per output; zero coefficients are left
    out and coefficients of 1 and -1 are additions and subtractions."""
    lets, rows = [], []
    for i, lrow in enumerate(left):
        row = []
        for b in range(len(tile[0])):
            value = _combination(lrow, [tile[a][b] for a in range(len(tile))])
            var = tir.Var("float32", f"{prefix}_{i}_{b}")
            lets.append((var, value))
            row.append(var)
        rows.append(row)
    stores = [tir.BufferStore(out, _combination(rrow, rows[i]), out_indices(i, j))
              for i in range(len(left)) for j, rrow in enumerate(right)]
    stmt = tir.seq(stores)
    for var, value in reversed(lets):
        stmt = tir.LetStmt(var, value, stmt)
    return stmt


def _combination(coefs, terms: list):
    """``sum coefs[i] * terms[i]`` in float32, zero terms left out, a positive term first
    where there is one (a leading ``0 - x`` is one more instruction: LLVM may not fold it into
    a negation, which differs for x = 0)."""
    out = None
    pairs = sorted(zip(coefs, terms), key=lambda ct: Fraction(ct[0]) < 0)
    for c, t in pairs:
        c = Fraction(c)
        if c == 0:
            continue
        if abs(c) != 1:
            t = tir.Mul("float32", tir.FloatImm("float32", float(abs(c))), t)
        if out is None:
            out = t if c > 0 else tir.Sub("float32", tir.FloatImm("float32", 0.0), t)
        else:
            out = tir.Add("float32", out, t) if c > 0 else tir.Sub("float32", out, t)
    return out if out is not None else tir.FloatImm("float32", 0.0)


def _inline_paddings(func: tir.PrimFunc, body, paddings: list):
    """``body`` with the padding stage that wrote each buffer of ``paddings`` (read now only by
    a Winograd ``pack`` stage) inlined into it: one pass over the input instead of two."""
    if not paddings:
        return body
    sch = Schedule(tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs),
                                func.private, func.span))
    for buf in paddings:
        current = sch.func("main").body
        writers = [r.block for r in blocks_under(current)
                   if isinstance(r.block.body, tir.BufferStore) and r.block.body.buffer is buf]
        readers = [r.block for r in blocks_under(current) if any(region.buffer is buf for region in r.block.reads)]
        if len(writers) != 1 or len(readers) != 1 or not is_padding(writers[0]):
            continue
        try:
            sch.compute_inline(sch.get_block(writers[0].name))
        except ScheduleError:
            continue
    return sch.func("main").body
