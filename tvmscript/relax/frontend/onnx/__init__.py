"""ONNX models into Relax: ``from_onnx(model)``, TVM's ``relax.frontend.onnx.from_onnx``.

    import onnx
    from tvmscript.relax.frontend.onnx import from_onnx

    mod = from_onnx(onnx.load("model.onnx"))                  # weights as constants
    mod = from_onnx(model, keep_params_in_input=True)         # weights as parameters after the inputs
    mod, params = tvms.relax.frontend.detach_params(mod)      # ... and their arrays apart

importer.py walks the graph; registry.py is the table of converters (one small function per op
and version, in ops/); values.py holds what lets shape computations fold at import time.
`supported_ops()` lists the op types with a translation.
"""

from .importer import from_onnx
from .registry import supported_ops

__all__ = ["from_onnx", "supported_ops"]
