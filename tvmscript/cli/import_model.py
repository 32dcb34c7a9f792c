"""``tvms import``: a PyTorch (.pt2) or ONNX model as a ``.tvms`` file and its weights
(relax/frontend/model_file.py reads it). Nothing is written unless the whole import succeeded."""

from __future__ import annotations

import os
import sys

from .options import file_name
from .progress import ImportProgress
from .reporting import fail
from .writing import write_new_atomically


def register(sub) -> None:
    imp = sub.add_parser(
        "import", help="import a PyTorch (.pt2) or ONNX (.onnx) model as a .tvms file",
        description="Import a model saved with torch.export.save (.pt2) or an ONNX model (.onnx): its "
        "graph becomes the function main of a .tvms file, its weights the parameters after the inputs, "
        "saved beside it as an .npz archive for `tvms run FILE.tvms --params FILE.npz` (or bound into the "
        "file with --inline-params).",
    )
    imp.add_argument("model", help="the model file: .pt2 (needs the torch extra) or .onnx (the onnx extra)")
    imp.add_argument("-o", "--output", metavar="FILE.tvms", type=file_name,
                     help="the .tvms file to write (default: the model's name with .tvms)")
    where = imp.add_mutually_exclusive_group()
    where.add_argument("--params-out", metavar="FILE.npz", help="where to save the weights (default: the "
                       "output's name with .npz)")
    where.add_argument("--inline-params", action="store_true", help="bind the weights into the file as "
                       "constants (its metadata section) instead of saving an .npz")
    imp.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                     help="ONNX: the shape of a graph input (repeatable), replacing the model's (with as "
                     "many dimensions as the model gives it)")
    imp.set_defaults(handler=import_command)


def import_command(args) -> int:
    import io

    import numpy as np

    from ..printer import to_script
    from ..relax.frontend.common import FrontendError
    from ..relax.frontend.model_file import bind_weights, model_format, read_model

    output = args.output or os.path.splitext(args.model)[0] + ".tvms"
    params_out = None if args.inline_params else (args.params_out or os.path.splitext(output)[0] + ".npz")
    try:
        model_format(args.model)
        shapes = _parse_input_shapes(args.shape)
        with ImportProgress(args.model) as progress:
            mod, weights = read_model(args.model, progress=progress, shape_dict=shapes or None)
    except FrontendError as err:
        raise fail(str(err)) from None
    if args.inline_params and weights:
        mod = bind_weights(mod, weights)
    text = to_script(mod, show_meta=True)  # a file: it must keep its constants
    try:
        write_new_atomically(output, text.encode("utf-8"))
        if params_out is not None:
            buffer = io.BytesIO()
            np.savez(buffer, **weights)
            write_new_atomically(params_out, buffer.getvalue())
    except OSError as err:
        raise fail(f"cannot write {err.filename or output}: {err.strerror or err}") from None
    size = sum(a.nbytes for a in weights.values())
    where = "inline" if params_out is None else f"in {params_out}"
    print(f"imported {args.model} -> {output} ({len(weights)} weights, {size / 2**20:.1f} MiB {where})",
          file=sys.stderr)
    return 0


def _parse_input_shapes(items: list) -> dict:
    """{input name: [dims]} from --shape x=1,3,224,224."""
    shapes: dict = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            dims = [int(d) for d in text.split(",")] if sep and name.strip() else None
        except ValueError:
            dims = None
        if not dims:
            raise fail(f"--shape expects INPUT=D0,D1,... (e.g. --shape input=1,3,224,224), got {item!r}")
        if name.strip() in shapes:
            raise fail(f"--shape gives input '{name.strip()}' twice")
        shapes[name.strip()] = dims
    return shapes
