"""The pieces a model is made of: `Tensor`, `Parameter`, `Module` and its containers, `Effect`.

A `Tensor` is symbolic: it wraps the Relax variable that a `BlockBuilder` bound while
`Module.export_tvm` traced a method, and knows its shape and dtype from the variable's struct
info. Operators on tensors (``nn.op.*``, ``a + b``) emit one binding each into the function
being built, named after the op (``matmul``, ``add``, ``permute_dims1``), which is why the
exported module reads like the model's code.

A `Parameter` is a tensor that the exported functions take as an argument after the inputs.
Outside an export it only has a shape and a dtype (and, optionally, the weights in ``.data``);
during an export it stands for the function parameter named after its dotted path
(``fc1.weight`` -> ``fc1_weight``).

A `Module` is a plain Python object: its parameters and sub-modules are found by walking its
attributes in definition order, so ``named_parameters()`` and the parameter order of the
exported functions follow the order of assignment in ``__init__``, as in TVM and PyTorch.
"""

from __future__ import annotations

import os
import traceback
from collections import OrderedDict
from typing import Any, Callable, Iterator, Optional, Sequence

from .... import relax, tir
from ..common import FrontendError

__all__ = [
    "ExportError", "Tensor", "Parameter", "Effect", "Module", "ModuleList", "ModuleDict",
    "Sequential", "ParameterList", "ParameterDict", "get_default_dtype", "set_default_dtype",
    "wrap_nested",
]

_DEFAULT_DTYPE = "float32"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class ExportError(FrontendError):
    """A model that cannot be exported as written: an op on tensors whose shapes or dtypes do not
    fit, a tensor used outside ``export_tvm``, a spec that does not match the method. The
    message names the ``nn.op`` and the line of the model's code that called it."""


def user_location() -> str:
    """``file:line in function`` of the innermost caller outside this package: the line of the
    model's code an error is about."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return "<unknown>"


def get_default_dtype() -> str:
    """The dtype of parameters created without one (``"float32"`` unless changed)."""
    return _DEFAULT_DTYPE


def set_default_dtype(dtype: str) -> None:
    """Set the dtype that parameters created from now on get when none is given."""
    global _DEFAULT_DTYPE
    if not tir.is_valid_dtype(dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    _DEFAULT_DTYPE = dtype


def current_builder(what: str):
    """The BlockBuilder of the export under way; an `ExportError` naming `what` outside one
    (tensors are symbolic: there is nothing to compute on outside ``export_tvm``)."""
    from ....compiler.block_builder import BlockBuilder

    bb = BlockBuilder.current()
    if bb is None:
        raise ExportError(f"{what} can only be called while Module.export_tvm traces a method "
                          f"(at {user_location()})")
    return bb


# ----------------------------------------------------------------------------- shapes


def make_dim(d, what: str = "shape"):
    """A dimension for a Relax shape: ints stay ints (>= 0), a string ``"n"`` becomes the
    symbolic ``tir.Var("int64", "n")``, an int64 PrimExpr stays as it is."""
    if isinstance(d, bool):
        raise TypeError(f"invalid {what} dimension {d!r}")
    if isinstance(d, int) or (hasattr(d, "__index__") and not isinstance(d, tir.PrimExpr)):
        d = int(d)
        if d < 0:
            raise ValueError(f"invalid {what} dimension {d}: dimensions are >= 0")
        return d
    if isinstance(d, tir.IntImm):
        return int(d.value)
    if isinstance(d, str):
        if not d.isidentifier():
            raise ValueError(f"invalid symbolic {what} dimension {d!r}: it must be an identifier")
        return tir.Var("int64", d)
    if isinstance(d, tir.PrimExpr):
        if d.dtype != "int64":
            raise TypeError(f"symbolic {what} dimension {d} must be int64, not {d.dtype}")
        return d
    raise TypeError(f"invalid {what} dimension {d!r}: expected an int, a name or an int64 expression")


def plain_dim(d):
    """A Relax dimension as users see it: a Python int when constant, else the PrimExpr."""
    return int(d.value) if isinstance(d, tir.IntImm) else d


# ----------------------------------------------------------------------------- Tensor


class _TensorOps:
    """Python operators and the methods TVM's ``nn.Tensor`` has; each is an ``nn.op`` call,
    with Python numbers turned into constants of the tensor's dtype."""

    def __add__(self, other):
        return _op().add(self, other)

    def __radd__(self, other):
        return _op().add(self, other)

    def __sub__(self, other):
        return _op().subtract(self, other)

    def __rsub__(self, other):
        return _op().subtract(other, self)

    def __mul__(self, other):
        return _op().multiply(self, other)

    def __rmul__(self, other):
        return _op().multiply(self, other)

    def __truediv__(self, other):
        return _op().divide(self, other)

    def __rtruediv__(self, other):
        return _op().divide(other, self)

    def __neg__(self):
        return _op().negative(self)

    def __lt__(self, other):
        return _op().less(self, other)

    def __le__(self, other):
        return _op().less_equal(self, other)

    def __gt__(self, other):
        return _op().greater(self, other)

    def __ge__(self, other):
        return _op().greater_equal(self, other)

    def astype(self, dtype: str):
        return _op().astype(self, dtype)

    def maximum(self, other):
        return _op().maximum(self, other)

    def minimum(self, other):
        return _op().minimum(self, other)

    def reshape(self, *shape):
        return _op().reshape(self, _varargs(shape))

    def permute_dims(self, *axes):
        return _op().permute_dims(self, _varargs(axes) if axes else None)

    def repeat(self, repeats: int, axis: Optional[int] = None):
        return _op().repeat(self, repeats, axis)


def _varargs(values: tuple) -> list:
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` alike."""
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        return list(values[0])
    return list(values)


def _op():
    from . import op

    return op


class Tensor(_TensorOps):
    """A symbolic tensor of the function being exported: a Relax expression whose struct info is
    a tensor of known rank. Made by ``nn.op`` functions, never directly."""

    def __init__(self, *, _expr) -> None:
        sinfo = relax.struct_info_of(_expr)
        if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.ndim < 0:
            raise ExportError(f"expected a tensor of known rank, got {_describe(sinfo)}")
        self._expr = _expr

    @staticmethod
    def from_const(data) -> "Tensor":
        """A constant tensor holding ``data`` (a NumPy array or anything ``np.asarray`` takes)."""
        from ....ir.op import api

        return Tensor(_expr=api.const(data))

    @staticmethod
    def from_scalar(data, dtype: str) -> "Tensor":
        """A 0-d constant tensor of ``dtype``."""
        from ....ir.op import api

        return Tensor(_expr=api.const(data, dtype))

    @staticmethod
    def placeholder(shape: Sequence, dtype: str, name: str = "tensor") -> "Tensor":
        """A tensor bound to a fresh ``relax.Var`` named ``name``: what a function parameter
        is. String dimensions become symbolic ``tir.Var``s of that name."""
        dims = [make_dim(d) for d in shape]
        return Tensor(_expr=relax.Var(name, relax.tensor_sinfo(dims, dtype)))

    @property
    def _sinfo(self) -> relax.TensorStructInfo:
        return relax.struct_info_of(self._expr)

    @property
    def shape(self) -> list:
        """The dimensions: Python ints where constant, ``tir`` expressions where symbolic."""
        sinfo = self._sinfo
        if sinfo.shape is None:
            raise ExportError(f"the shape of this rank-{sinfo.ndim} tensor is not known")
        return [plain_dim(d) for d in sinfo.shape]

    @property
    def ndim(self) -> int:
        return self._sinfo.ndim

    @property
    def dtype(self) -> str:
        return self._sinfo.dtype

    def __repr__(self) -> str:
        return f'Tensor({_shape_text(self)}, "{self.dtype}")'


def _shape_text(t) -> str:
    try:
        return "[" + ", ".join(str(d) for d in t.shape) + "]"
    except ExportError:
        return "[?]"


def _describe(sinfo) -> str:
    if isinstance(sinfo, relax.TensorStructInfo):
        return "a tensor of unknown rank"
    return type(sinfo).__name__.replace("StructInfo", "").lower() or "object"


class Parameter(Tensor):
    """A weight: a tensor the exported functions take as a parameter, which may hold data.

    ``Parameter((256, 784), "float32")``; a string dimension is symbolic. ``.data`` is None or a
    `tvms.nd` tensor of exactly the parameter's shape and dtype (NumPy arrays, tvms tensors and
    DLPack tensors such as torch's are accepted)."""

    def __init__(self, shape: Sequence, dtype: Optional[str] = None) -> None:
        dtype = get_default_dtype() if dtype is None else dtype
        if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
            raise ValueError(f"Parameter: unknown dtype {dtype!r}")
        super().__init__(_expr=Tensor.placeholder(shape, dtype, "param")._expr)
        self._data = None
        self.attrs: dict = OrderedDict()

    @property
    def data(self):
        """The bound weights (a `tvms.nd` tensor), or None when unbound."""
        return self._data

    @data.setter
    def data(self, data) -> None:
        if data is None:
            self._data = None
            return
        from ....runtime import ndarray as nd

        if not isinstance(data, nd.Tensor):
            data = _to_tvms_tensor(data)
        shape = tuple(self.shape)
        if not all(isinstance(d, int) for d in shape):
            raise ValueError(f"cannot bind data to a parameter of symbolic shape {list(shape)}")
        if tuple(data.shape) != shape:
            raise ValueError(f"Parameter data: shape mismatch: expected {shape}, got {tuple(data.shape)}")
        if data.dtype != self.dtype:
            raise ValueError(f"Parameter data: dtype mismatch: expected {self.dtype}, got {data.dtype}")
        self._data = data

    def to(self, dtype: Optional[str] = None) -> None:
        """Change the dtype of an unbound parameter (bound weights would silently lose
        precision, so that is an error, as in TVM)."""
        if dtype is None or dtype == self.dtype:
            return
        if self._data is not None:
            raise ValueError("cannot change the dtype of a Parameter bound to data: it might lose "
                             "precision; set .data = None first or convert the array yourself")
        self._expr = Tensor.placeholder(self.shape, dtype, "param")._expr


def _to_tvms_tensor(data):
    import numpy as np

    from ....runtime import ndarray as nd

    if isinstance(data, np.ndarray):
        return nd.array(data)
    if hasattr(data, "__dlpack__"):
        try:
            return nd.from_dlpack(data)
        except Exception:  # a device tensor or an exotic producer: go through the host
            if hasattr(data, "detach"):
                return nd.array(data.detach().cpu().numpy())
            raise
    raise TypeError(f"Parameter data must be a NumPy array, a tvms tensor or a DLPack tensor, "
                    f"not {type(data).__name__}")


# ----------------------------------------------------------------------------- Effect


class Effect:
    """A side effect a method has (printing, a cache updated in place): state that goes into
    each exported function as extra inputs after the spec'd ones and comes out as extra outputs.

    ``emit_init`` emits the initial state in ``_initialize_effect``; ``create`` makes the input
    variables of one function; ``set_state`` hands the effect its current variables;
    ``finalize`` returns the variables holding the final state."""

    def emit_init(self, name_hint: str, builder) -> list:
        raise NotImplementedError(f"{type(self).__name__} does not define emit_init")

    def create(self, name_hint: str) -> list:
        raise NotImplementedError(f"{type(self).__name__} does not define create")

    def set_state(self, state_vars: list) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not define set_state")

    def finalize(self) -> list:
        raise NotImplementedError(f"{type(self).__name__} does not define finalize")

    def to(self, dtype: Optional[str] = None) -> None:
        """Effects usually have no dtype to convert."""


# ----------------------------------------------------------------------------- Module


class Module:
    """Base class of models and layers: assign parameters, sub-modules and effects as attributes
    in ``__init__`` and write ``forward`` (and any other method to export) with ``nn.op``."""

    def _children(self) -> Iterator[tuple[str, Any]]:
        """(name, value) of what this module holds, in the order parameters are numbered."""
        return iter(list(vars(self).items()))

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter), depth first in attribute order: ``fc1.weight``."""
        yield from _find(self, prefix, lambda x: isinstance(x, Parameter))

    def parameters(self) -> Iterator[Parameter]:
        for _, param in self.named_parameters():
            yield param

    def state_dict(self, *, prefix: str = "", destination: Optional[dict] = None) -> dict:
        """``{dotted name: Parameter}`` of every parameter (references, not copies)."""
        destination = OrderedDict() if destination is None else destination
        for name, param in self.named_parameters(prefix):
            destination[name] = param
        return destination

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> tuple[list, list]:
        """Bind each parameter's ``.data`` from ``state_dict``, whose values are Parameters with
        data or arrays (NumPy, tvms, torch). Returns ``(missing_keys, unexpected_keys)``;
        with ``strict`` either being non-empty is a KeyError."""
        own = self.state_dict()
        unexpected = [k for k in state_dict if k not in own]
        missing = [k for k in own if k not in state_dict]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for key, value in state_dict.items():
            if key not in own:
                continue
            data = value.data if isinstance(value, Parameter) else value
            if data is None:
                raise ValueError(f"load_state_dict: parameter {key!r} has no data")
            own[key].data = data
        return missing, unexpected

    def __call__(self, *args, **kwargs):
        forward = getattr(self, "forward", None)
        if forward is None:
            raise NotImplementedError(f"{type(self).__name__} has no forward method")
        return forward(*args, **kwargs)

    def to(self, dtype: Optional[str] = None) -> None:
        """Convert every parameter (and sub-module) to ``dtype``, recursively."""
        for _, item in self._children():
            if isinstance(item, (Parameter, Module, Effect)):
                item.to(dtype=dtype)
        if dtype is not None and isinstance(getattr(self, "dtype", None), str):
            self.dtype = dtype

    def export_tvm(self, spec, debug: bool = False):
        """``(IRModule, [(name, Parameter)])``: one Relax function per method named in ``spec``
        (``{"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}``), taking the spec'd inputs,
        then the effects' state (with ``debug=True``), then the parameters; see `exporter`."""
        from . import spec as _spec
        from .exporter import Exporter

        module_spec = _spec.ModuleSpec.from_raw(spec, self)
        return Exporter(debug=debug).build(module_spec)


def _find(root: Module, prefix: str, wanted: Callable[[Any], bool]):
    """(dotted name, item) of the items under ``root`` for which ``wanted`` holds."""
    for name, item in root._children():
        if wanted(item):
            yield prefix + name, item
        elif isinstance(item, Module):
            yield from _find(item, f"{prefix}{name}.", wanted)


class ModuleList(Module):
    """A list of sub-modules, named ``0``, ``1``, ... in parameter names; calling it runs them
    one after the other."""

    def __init__(self, modules: Optional[Sequence[Module]] = None) -> None:
        self.modules = list(modules or [])

    def _children(self):
        return ((str(i), m) for i, m in enumerate(self.modules))

    def __iter__(self):
        return iter(self.modules)

    def __getitem__(self, idx):
        return self.modules[idx]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.modules[idx] = module

    def __len__(self) -> int:
        return len(self.modules)

    def append(self, module: Module) -> None:
        self.modules.append(module)

    def to(self, dtype: Optional[str] = None) -> None:
        for module in self.modules:
            module.to(dtype=dtype)

    def forward(self, x):
        for module in self.modules:
            x = module(x)
        return x


class Sequential(ModuleList):
    """``nn.Sequential(a, b, c)``: PyTorch's spelling of a `ModuleList` that is called as a
    chain (``Sequential([a, b])`` works too)."""

    def __init__(self, *modules) -> None:
        if len(modules) == 1 and isinstance(modules[0], (list, tuple)):
            modules = tuple(modules[0])
        super().__init__(list(modules))


class ModuleDict(Module):
    """Sub-modules by name; parameter names go through the keys (``blocks.attn.weight``)."""

    def __init__(self, modules: Optional[dict] = None) -> None:
        self.modules = OrderedDict(modules or {})

    def _children(self):
        return iter(list(self.modules.items()))

    def __iter__(self):
        return iter(self.modules.values())

    def __getitem__(self, key: str) -> Module:
        return self.modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.modules[key] = module

    def __len__(self) -> int:
        return len(self.modules)

    def __contains__(self, key: str) -> bool:
        return key in self.modules

    def keys(self):
        return self.modules.keys()

    def values(self):
        return self.modules.values()

    def items(self):
        return self.modules.items()

    def to(self, dtype: Optional[str] = None) -> None:
        for module in self.modules.values():
            module.to(dtype=dtype)


class ParameterList(Module):
    """A list of parameters, named ``0``, ``1``, ..."""

    def __init__(self, params: Optional[Sequence[Parameter]] = None) -> None:
        self.params: list = []
        for p in params or []:
            self.append(p)

    def _children(self):
        return ((str(i), p) for i, p in enumerate(self.params))

    def append(self, param: Parameter) -> None:
        if not isinstance(param, Parameter):
            raise TypeError(f"ParameterList holds nn.Parameter, not {type(param).__name__}")
        self.params.append(param)

    def __iter__(self):
        return iter(self.params)

    def __getitem__(self, idx: int) -> Parameter:
        return self.params[idx]

    def __len__(self) -> int:
        return len(self.params)

    def to(self, dtype: Optional[str] = None) -> None:
        for p in self.params:
            p.to(dtype=dtype)


class ParameterDict(Module):
    """Parameters by name."""

    def __init__(self, params: Optional[dict] = None) -> None:
        self.params: dict = OrderedDict()
        for k, p in (params or {}).items():
            self[k] = p

    def _children(self):
        return iter(list(self.params.items()))

    def __setitem__(self, key: str, param: Parameter) -> None:
        if not isinstance(key, str) or not isinstance(param, Parameter):
            raise TypeError("ParameterDict maps str keys to nn.Parameter values")
        self.params[key] = param

    def __getitem__(self, key: str) -> Parameter:
        return self.params[key]

    def __iter__(self):
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    def items(self):
        return self.params.items()

    def to(self, dtype: Optional[str] = None) -> None:
        for p in self.params.values():
            p.to(dtype=dtype)


# ----------------------------------------------------------------------------- emitting


def wrap_nested(expr, name: str):
    """Bind ``expr`` in the function being exported, named ``name``, and wrap the result: a
    `Tensor`, or a tuple of them for a tuple (each field bound as ``name_0``, ``name_1``...).

    Nested calls are bound first (``lv``, ``lv1``, ...) so the function stays in A-normal form,
    as TVM's BlockBuilder normalizes them: ``conv2d = R.add(lv, lv1)``."""
    bb = current_builder(f"nn.op ({name})")
    if not isinstance(expr, relax.DataflowVar):
        expr = bb.emit(_bind_nested_args(bb, expr), name)
    sinfo = relax.struct_info_of(expr)
    if isinstance(sinfo, relax.TensorStructInfo):
        return Tensor(_expr=expr)
    if isinstance(sinfo, relax.TupleStructInfo):
        return tuple(wrap_nested(relax.TupleGetItem(expr, i), f"{name}_{i}")
                     for i in range(len(sinfo.fields)))
    raise ExportError(f"{name} returns {_describe(sinfo)}, not a tensor or a tuple of tensors")


def _bind_nested_args(bb, expr):
    if not isinstance(expr, relax.Call):
        return expr
    args = [_bind_leaf(bb, a) for a in expr.args]
    if all(a is b for a, b in zip(args, expr.args)):
        return expr
    return relax.Call(expr.op, args, expr.attrs, expr.sinfo_args, expr.struct_info, expr.span)


def _bind_leaf(bb, arg):
    if isinstance(arg, relax.Call):
        return bb.emit(_bind_nested_args(bb, arg))
    if isinstance(arg, relax.Tuple):
        fields = [_bind_leaf(bb, f) for f in arg.fields]
        if any(a is not b for a, b in zip(fields, arg.fields)):
            return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    return arg
