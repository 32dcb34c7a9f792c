"""Legalization of the image ops (declared in ``tvmscript/ir/op/image.py``): resize2d/resize3d
to ``topi.image.resize`` on the spatial axes the layout names, affine_grid (static sizes only)
to ``topi.image.affine_grid``; one PrimFunc each, named after the op."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.image import layout_axes

from ..topi import image as timage
from .legalize import register_legalize, shapes_known


def _legalize_resize(name: str, spatial: str):
    def legalize(bb, call):
        if not shapes_known(call):
            return None
        a = call.attrs
        _, axes = layout_axes(a["layout"], spatial)

        def te_fn(data, size):
            return timage.resize(data, axes, size, a["method"], a["coordinate_transformation_mode"],
                                 a["rounding_method"], a["out_dtype"])

        return bb.call_te(te_fn, call.args[0], list(call.args[1].values), primfunc_name_hint=name)

    return legalize


def legalize_affine_grid(bb, call):
    """Static sizes only: the grid's steps are constants of the PrimFunc, as in TVM."""
    if not shapes_known(call) or not all(isinstance(v, tir.IntImm) for v in call.args[1].values):
        return None
    align = call.attrs["align_corners"]
    return bb.call_te(lambda theta, size: timage.affine_grid(theta, size, align), call.args[0],
                      list(call.args[1].values), primfunc_name_hint="affine_grid")


register_legalize("image.resize2d", _legalize_resize("resize2d", "HW"))
register_legalize("image.resize3d", _legalize_resize("resize3d", "DHW"))
register_legalize("image.affine_grid", legalize_affine_grid)
