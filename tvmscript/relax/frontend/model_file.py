"""Models saved by other frameworks, read into a module and its weights: what ``tvms import`` runs.

    mod, weights = read_model("model.pt2")     # torch.export.save's file
    mod, weights = read_model("model.onnx")    # an ONNX model

`mod` holds ``main``, its inputs first and its weights as the parameters after them
(``R.func_attr({"num_input": k})``); `weights` maps those parameter names to NumPy arrays in
parameter order, ready for ``np.savez`` and ``tvms run --params``. `bind_weights` turns them
into constants instead (``--inline-params``). The format is told by the file's suffix; each
needs its extra installed, and a missing one is a `FrontendError` saying which pip command
installs it.
"""

from __future__ import annotations

import os
from typing import Optional

from .common import FrontendError, ProgressCallback

# suffix -> (format name, the module it needs, the extra that installs it)
FORMATS = {
    ".pt2": ("PyTorch ExportedProgram", "torch", "torch"),
    ".onnx": ("ONNX", "onnx", "onnx"),
}


def model_format(path: str) -> str:
    """The suffix `read_model` will read `path` as; a `FrontendError` for unknown ones."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        known = ", ".join(f"{s} ({FORMATS[s][0]})" for s in FORMATS)
        raise FrontendError(f"cannot tell the format of {path}: expected one of {known}")
    return suffix


def read_model(path: str, progress: ProgressCallback = None,
               shape_dict: Optional[dict] = None) -> tuple:
    """``(IRModule, {weight name: ndarray})`` of the model in `path`; see the module docstring.
    ``shape_dict`` ({input name: dims}) replaces an ONNX model's input shapes (see `from_onnx`);
    a .pt2 program's shapes are its own, and giving any is an error."""
    suffix = model_format(path)
    if not os.path.exists(path):
        raise FrontendError(f"no such file: {path}")
    if os.path.isdir(path):
        raise FrontendError(f"{path} is a directory")
    if suffix == ".pt2" and shape_dict:
        raise FrontendError(f"input shapes cannot be given for {path}: a torch.export program's input shapes were "
                            "fixed when it was exported (export it again with other example inputs, or with "
                            "dynamic_shapes=... to make a dimension symbolic)")
    _require_extra(suffix)
    if suffix == ".pt2":
        mod = _read_exported_program(path, progress)
    else:
        mod = _read_onnx(path, progress, shape_dict)
    return _detach_weights(mod)


def _require_extra(suffix: str) -> None:
    import importlib.util

    name, module, extra = FORMATS[suffix]
    if importlib.util.find_spec(module) is None:
        raise FrontendError(f"reading a {name} model needs {module}, which is not installed: "
                            f"pip install 'tvms[{extra}]'")


def _read_exported_program(path: str, progress: ProgressCallback):
    import logging

    import torch

    from .torch import from_exported_program

    # torch.export.load logs a traceback as a warning before raising for a file it cannot read;
    # the error below says it in one line.
    logger = logging.getLogger("torch.export")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        program = torch.export.load(path)
    except Exception as exc:  # torch raises many kinds for a file it cannot read
        raise FrontendError(f"cannot read {path} as a torch.export program ({type(exc).__name__}: "
                            f"{_first_line(exc)})") from None
    finally:
        logger.setLevel(level)
    return from_exported_program(program, keep_params_as_input=True, unwrap_unit_return_tuple=True,
                                 progress=progress)


def _read_onnx(path: str, progress: ProgressCallback, shape_dict: Optional[dict]):
    import onnx

    from .onnx import from_onnx

    try:
        model = onnx.load(path, load_external_data=False)
        _require_external_data(model, path)
        onnx.load_external_data_for_model(model, os.path.dirname(path) or ".")
    except FrontendError:
        raise
    except Exception as exc:  # protobuf's DecodeError, OSError, ...
        raise FrontendError(f"cannot read {path} as an ONNX model ({type(exc).__name__}: "
                            f"{_first_line(exc)})") from None
    return from_onnx(model, shape_dict=shape_dict, keep_params_in_input=True, progress=progress)


def _require_external_data(model, path: str) -> None:
    """A `FrontendError` naming the external data files `model`'s weights live in that are not
    beside `path`. ``torch.onnx.export`` writes the weights to ``NAME.onnx.data`` next to
    ``NAME.onnx``; a model file copied alone loses them, and onnx's own message for that
    ("... but it is not regular file") does not say what to do."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    folder = os.path.dirname(path) or "."
    wanted = sorted({ExternalDataInfo(t).location for t in _initializers(model.graph) if uses_external_data(t)})
    missing = [name for name in wanted if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        files = ", ".join(repr(name) for name in missing)
        raise FrontendError(
            f"cannot read {path}: its weights are stored in {files}, which must lie in the same folder "
            f"({os.path.abspath(folder)}); torch.onnx.export writes NAME.onnx.data beside NAME.onnx, "
            "so keep or copy the two files together")


def _initializers(graph):
    """Every initializer of `graph` and of the graphs its nodes hold (If, Loop, Scan bodies)."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from _initializers(sub)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no details"


def _detach_weights(mod) -> tuple:
    """The module without its ``"params"`` attribute, and ``{parameter name: ndarray}``."""
    import numpy as np

    from . import detach_params

    mod, detached = detach_params(mod)
    weights: dict = {}
    for name, arrays in detached.items():
        func = mod[name]
        num_input = int(func.attrs.get("num_input", len(func.params) - len(arrays)))
        for param, array in zip(func.params[num_input:], arrays):
            weights[param.name_hint] = np.asarray(array.numpy() if hasattr(array, "numpy") else array)
    return mod, weights


def bind_weights(mod, weights: dict, func_name: str = "main"):
    """`mod` with `weights` bound into `func_name` as constants (``--inline-params``): they then
    print in the file's metadata section and the function takes only its inputs."""
    from ...compiler.transform import BindParams

    return BindParams(func_name, weights)(mod)
