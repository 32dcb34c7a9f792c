"""The walk over an FX graph that both PyTorch importers share: converting each node in
order, reading its arguments (nodes replaced by their converted values), emitting through
the BlockBuilder, and the errors that name the node at fault. The op converters are mixins
(`ops_math`, `ops_nn`, `ops_rnn`, `ops_shape`) combined with this core in `base.BaseTranslator`."""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Callable

import numpy as np

from .... import relax, tir
from ....compiler.block_builder import BlockBuilder
from ....ir.op import api as _op
from ....ir.op import find_op
from .. import PARAMS_ATTR
from ..common import (FrontendError, OpUse, ProgressCallback, UnsupportedOpError, UnsupportedOpsError,
                      report_progress)

FRAMEWORK = "PyTorch"

# torch dtypes by their printed name (``torch.float32`` -> "float32").
_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16",
    "int8": "int8", "uint8": "uint8", "bool": "bool",
}


def convert_dtype(dtype) -> str:
    """Relax's name for a torch dtype (``torch.float32``, ``"float32"``, ``"torch.int64"``)."""
    name = str(dtype)
    name = name[len("torch."):] if name.startswith("torch.") else name
    if name not in _DTYPES:
        raise FrontendError(f"the PyTorch dtype {dtype!r} has no Relax equivalent here")
    return _DTYPES[name]


def valid_name(name: str) -> str:
    """A parameter name TVMScript can print: ``fc1.weight`` -> ``fc1_weight``."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "_" + out


def tensor_to_numpy(tensor) -> np.ndarray:
    """The values of a torch tensor as a NumPy array (a copy, detached from autograd).
    NumPy has no bfloat16 of its own and torch cannot hand one over, so a bfloat16 tensor's
    bits travel as int16 and are read back as ml_dtypes' bfloat16, what tvms' tensors use."""
    t = tensor.detach().cpu().contiguous()
    if str(t.dtype) == "torch.bfloat16":
        import torch

        from ....runtime.ndarray import _np_dtype

        try:
            bf16 = _np_dtype("bfloat16")
        except TypeError as err:
            raise FrontendError(f"bfloat16 weights cannot be imported: {err}") from None
        return t.view(torch.int16).numpy().view(bf16).copy()
    return t.numpy().copy()


# One frame of the stack torch records in ``node.meta["stack_trace"]``:
#   File "/home/me/model.py", line 12, in forward
#       y = torch.cumprod(x, 0)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in [^\n]*\n[ \t]*(?P<code>[^\n]*)')

# The kinds of FX node that call an operator.
CALL_NODES = ("call_function", "call_method", "call_module")


def user_source(node) -> str:
    """The line of the user's code that made ``node``, as ``model.py:12: y = torch.cumprod(x, 0)``,
    from the stack torch.export records (empty when it recorded none, as fx.symbolic_trace does).
    The innermost frame outside torch itself is the user's: a call inside ``nn.Conv2d.forward``
    is reported at the line calling the module's function, torchvision's models at their line."""
    trace = getattr(node, "meta", {}).get("stack_trace") or ""
    frames = list(_FRAME.finditer(trace))
    if not frames:
        return ""
    outside = [f for f in frames if not f["file"].startswith(_torch_dir())]
    frame = (outside or frames)[-1]
    return f"{frame['file']}:{frame['line']}: {frame['code'].strip()}"


@functools.lru_cache(maxsize=None)
def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _is_expr(value) -> bool:
    return isinstance(value, relax.Expr)


def _static(value):
    """The Python int of a dimension, or None when it is symbolic."""
    if isinstance(value, tir.IntImm):
        return value.value
    if isinstance(value, int):
        return value
    return None


class GraphTranslator:
    """Converts the nodes of an FX graph into bindings of one Relax function.

    Subclasses fill ``self.env`` for the graph's inputs, choose the converter of each node
    (`converter_for`) and emit the function's output. ``self.env`` maps each FX node already
    converted to its value: a Relax expression (usually the variable bound to it), a Python
    value (a number, a list), or a `tir.PrimExpr` for a symbolic size (``SymInt``)."""

    def __init__(self) -> None:
        self.bb = BlockBuilder()
        self.env: dict = {}

    # ------------------------------------------------------------------ the graph walk
    def converter_for(self, node) -> Callable | None:
        """The method converting ``node`` (None when the op has no translation)."""
        raise NotImplementedError

    def op_name(self, node) -> str:
        """The framework's name of the operator a node calls, for messages."""
        target = node.target
        if isinstance(target, str):
            return target
        return getattr(target, "__name__", str(target))

    def check_supported(self, nodes) -> None:
        """Raise `UnsupportedOpsError` listing every operator that nothing translates, each
        with the nodes using it, before anything is emitted: a model that cannot be imported
        fails at once and tells everything it needs in one go."""
        missing: dict[str, list[OpUse]] = {}
        for node in nodes:
            if node.op in CALL_NODES and self.converter_for(node) is None:
                missing.setdefault(self.op_name(node), []).append(OpUse(node.name, user_source(node)))
        if missing:
            raise UnsupportedOpsError(FRAMEWORK, missing)

    def convert_nodes(self, nodes, progress: ProgressCallback = None):
        """Convert every call node in order; returns the output node's retrieved argument."""
        nodes = list(nodes)
        total = len(nodes)
        output = None
        for i, node in enumerate(nodes, 1):
            if node.op == "output":
                output = self.retrieve(node.args[0])
            elif node.op in CALL_NODES:
                self.env[node] = self.convert_node(node)
            elif node.op == "get_attr":
                self.env[node] = self.get_attr(node)
            elif node.op != "placeholder":
                raise FrontendError(f"unknown FX node kind {node.op!r} at node {node.name!r}")
            report_progress(progress, i, total)
        return output

    def convert_node(self, node):
        convert = self.converter_for(node)
        if convert is None:
            raise self.unsupported(node, "")
        try:
            return convert(node)
        except UnsupportedOpError:
            raise
        except FrontendError as err:
            if repr(node.name) in str(err):
                raise
            raise self.conversion_error(node, err) from err
        except (ValueError, TypeError, IndexError, KeyError) as err:
            raise self.conversion_error(node, err) from err

    def conversion_error(self, node, err: Exception) -> FrontendError:
        """A converter's failure, naming the node, its operator and the user's line."""
        source = user_source(node)
        where = f"\n  at {source}" if source else ""
        return FrontendError(f"cannot convert node {node.name!r} ({self.op_name(node)}): {err}{where}")

    def get_attr(self, node):
        raise FrontendError(f"get_attr node {node.name!r} is not expected in this graph")

    # ------------------------------------------------------------------ arguments
    def retrieve(self, value):
        """An FX argument with its nodes replaced by their converted values."""
        from torch import fx

        if isinstance(value, fx.Node):
            return self.env[value]
        if isinstance(value, (list, tuple)):
            return type(value)(self.retrieve(v) for v in value)
        if isinstance(value, dict):
            return {k: self.retrieve(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(self.retrieve(value.start), self.retrieve(value.stop), self.retrieve(value.step))
        return value

    def arg(self, node, index: int, name: str, default: Any = None):
        """Argument ``index`` of the node, given positionally or as keyword ``name``."""
        if index < len(node.args):
            return self.retrieve(node.args[index])
        if name in node.kwargs:
            return self.retrieve(node.kwargs[name])
        return default

    def unsupported(self, node, detail: str) -> UnsupportedOpError:
        return UnsupportedOpError(self.op_name(node), node.name, FRAMEWORK, detail, user_source(node))

    # ------------------------------------------------------------------ emitting helpers
    def emit(self, call):
        return self.bb.emit(call)

    @staticmethod
    def sinfo(x) -> relax.TensorStructInfo:
        s = relax.struct_info_of(x)
        if not isinstance(s, relax.TensorStructInfo):
            raise FrontendError(f"expected a tensor, got a value of struct info {type(s).__name__}")
        return s

    def shape_of(self, x) -> list:
        """The dims of a tensor: Python ints where static, tir expressions where symbolic."""
        s = self.sinfo(x)
        if s.shape is None:
            raise FrontendError("a tensor's shape is unknown here; the importer needs it")
        return [d.value if isinstance(d, tir.IntImm) else d for d in s.shape]

    def ndim(self, x) -> int:
        return self.sinfo(x).ndim

    def dtype_of(self, x) -> str:
        return self.sinfo(x).dtype

    @staticmethod
    def node_dtype(node, default: str) -> str:
        """The dtype torch recorded for a node's result (``node.meta["val"]`` of an exported
        program), else ``default``: a tensor made without ``dtype=`` takes torch's default
        dtype, which need not be float32 (``torch.set_default_dtype``), and only torch knows."""
        dtype = getattr(getattr(node, "meta", {}).get("val"), "dtype", None)
        if dtype is None:
            return default
        try:
            return convert_dtype(dtype)
        except FrontendError:
            return default

    @staticmethod
    def default_float() -> str:
        """torch's default float dtype, which a float made from integers or Python numbers
        takes (``arange(0.5, 4)``, ``int_tensor * 0.5``): float32 unless the user changed it."""
        import torch

        return convert_dtype(torch.get_default_dtype())

    @staticmethod
    def const(value, dtype: str) -> relax.Constant:
        return _op.const(value, dtype)

    def as_tensor(self, value, dtype: str):
        """A Relax tensor for an operand: expressions as they are, numbers as constants."""
        if _is_expr(value):
            return value
        if isinstance(value, tir.PrimExpr):
            raise FrontendError("a tensor operand that is a symbolic size is not supported")
        return self.const(value, dtype)

    def has_op(self, name: str) -> bool:
        return find_op(name) is not None

    def require_op(self, node, name: str):
        """``relax.op.<name>``, or an `UnsupportedOpError` saying the Relax op is missing."""
        if not self.has_op("relax." + name):
            raise self.unsupported(node, f"the Relax op R.{name} it needs is not available")
        fn = _op
        for part in name.split("."):
            fn = getattr(fn, part)
        return fn

    @staticmethod
    def normalize_axis(axis: int, ndim: int) -> int:
        return axis + ndim if axis < 0 else axis

    def int_list(self, value, n: int | None = None) -> list:
        """``3`` or ``[3]`` or ``(3, 3)`` as a list of ``n`` ints (a single value repeated)."""
        if isinstance(value, (list, tuple)):
            vals = list(value)
        else:
            vals = [value]
        if n is not None and len(vals) == 1:
            vals = vals * n
        return vals

def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _is_torch_dtype(value) -> bool:
    return type(value).__name__ == "dtype" and str(value).startswith("torch.")


def _prim_extreme(cls, py_fn, a, b):
    """max/min of two sizes: Python's for ints, a tir Max/Min node for symbolic ones."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return py_fn(a, b)
    return cls("int64", tir.as_expr(a, "int64"), tir.as_expr(b, "int64"))


def simplify_dim(expr):
    """A symbolic dim in its simplest form (``3 * n // n`` is 3), as an int when constant."""
    from tvmscript.ir.arith.canonical import simplify

    out = simplify(tir.as_expr(expr, "int64"))
    return out.value if isinstance(out, tir.IntImm) else out


def from_end(bound, extent):
    """A symbolic slice bound as a count from the end when it is one (``n - 1`` of an axis of
    extent ``n`` is ``-1``), which R.strided_slice takes; else the bound unchanged."""
    rel = simplify_dim(tir.as_expr(bound, "int64") - tir.as_expr(extent, "int64"))
    return rel if isinstance(rel, int) and rel <= 0 else bound


def dim_add(a, b):
    """``a + b`` of two dims, with 0 folded away (``0 + s0`` stays ``s0``)."""
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


def dim_mul(a, b):
    """``a * b`` of two dims, with 1 folded away."""
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return a * b


def tir_min(a, b):
    """min of two dims, folded when both are ints or the same expression."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if a is b:
        return a
    a, b = tir.as_expr(a, "int64"), tir.as_expr(b, "int64")
    return tir.Min("int64", a, b)


def emit_outputs(bb, results: list, unwrap_unit_return_tuple: bool, no_bind_return_tuple: bool):
    """The function's output, as TVM's importers bind it: one ``gv`` for a tensor (a unit
    tuple unwrapped) or a tuple, or one ``gv`` per field with ``no_bind_return_tuple``."""
    for r in results:
        if not isinstance(r, relax.Expr):
            raise FrontendError(f"the model returns {type(r).__name__} values; only tensors can be returned")
    if unwrap_unit_return_tuple and len(results) == 1:
        return bb.emit_output(results[0])
    if no_bind_return_tuple:
        return [bb.emit_output(r) for r in results]
    return bb.emit_output(relax.Tuple(list(results)))


def attach_params(mod, arrays: list) -> None:
    """The weights, in parameter order, as main's ``"params"`` attribute (what
    ``relax.frontend.detach_params`` takes off)."""
    import dataclasses

    from ....runtime import ndarray

    func = mod["main"]
    mod["main"] = dataclasses.replace(func, attrs={**func.attrs, PARAMS_ATTR: [ndarray.array(a) for a in arrays]})
