"""What the exported functions take: ``nn.spec.Tensor((1, "n"), "float32")`` (a string
dimension is symbolic: one ``tir.Var`` per name and method), ``nn.spec.Int()`` (or ``int``,
``"int"``: a symbolic integer the method receives as a ``tir.Var``, passed to the function as
``R.Shape([n])``), and tuples/lists of specs (``nn.spec.Tuple``).

A module spec maps method names to method specs; a method spec maps the method's argument
names to argument specs, plus an optional ``"$": {"param_mode": ..., "effect_mode": ...}``:
``"plain"`` (each parameter/effect state its own function parameter, the default),
``"packed"`` (all of them in one tuple parameter) or ``"none"`` (left out).
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from .core import ExportError, make_dim

__all__ = ["Int", "Tensor", "Tuple", "MethodSpec", "ModuleSpec"]

MODES = ("plain", "packed", "none")


class Int:
    """A symbolic integer argument."""

    def __repr__(self) -> str:
        return "int"


class Tensor:
    """A tensor argument of static rank and dtype; its dimensions are ints or names."""

    def __init__(self, shape: Sequence, dtype: str) -> None:
        from .... import tir

        if isinstance(shape, (int, str)):
            raise TypeError(f"nn.spec.Tensor: shape must be a sequence of dimensions, not {shape!r}")
        for d in shape:
            make_dim(d, "spec")  # validate early, where the user wrote the spec
        if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
            raise ValueError(f"nn.spec.Tensor: unknown dtype {dtype!r}")
        self.shape = list(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Tensor([{', '.join(str(d) for d in self.shape)}], '{self.dtype}')"


class Tuple:
    """A tuple (or list) argument whose elements are specs; inside the function each element is
    taken out as ``name_0``, ``name_1``, ..."""

    def __init__(self, name: str, elements: Sequence) -> None:
        if not isinstance(elements, (list, tuple)):
            raise TypeError(f"nn.spec.Tuple: elements must be a list or tuple, not {type(elements).__name__}")
        self.name = name
        self.elements = elements

    def __repr__(self) -> str:
        return repr(self.elements)


def _arg_spec(value, name: str):
    if value is Int or value is int or (isinstance(value, str) and value == "int"):
        return Int()
    if isinstance(value, (Int, Tensor)):
        return value
    if isinstance(value, Tuple):
        return Tuple(name, type(value.elements)(
            _arg_spec(v, f"{name}_{i}") for i, v in enumerate(value.elements)))
    if isinstance(value, (list, tuple)):
        return Tuple(name, type(value)(_arg_spec(v, f"{name}_{i}") for i, v in enumerate(value)))
    raise TypeError(f"invalid spec for argument {name!r}: {value!r} (expected nn.spec.Tensor, "
                    f"nn.spec.Int or a tuple of them)")


class MethodSpec:
    """One method to export: the method, its spec'd argument names and specs, and the modes."""

    def __init__(self, method: Callable, arg_names: list, arg_specs: list,
                 param_mode: str = "plain", effect_mode: str = "plain") -> None:
        for what, mode in (("param_mode", param_mode), ("effect_mode", effect_mode)):
            if mode not in MODES:
                raise ValueError(f"invalid {what} {mode!r}: expected one of {', '.join(MODES)}")
        self.method = method
        self.arg_names = list(arg_names)
        self.arg_specs = list(arg_specs)
        self.param_mode = param_mode
        self.effect_mode = effect_mode

    @staticmethod
    def from_raw(spec, method: Callable, method_name: str = "") -> "MethodSpec":
        """A MethodSpec from ``{"arg": spec, ..., "$": {modes}}``. Every argument of the method
        without a default needs a spec; a spec naming no argument is an error."""
        if isinstance(spec, MethodSpec):
            return spec
        if not isinstance(spec, dict):
            raise TypeError(f"the spec of method {method_name!r} must be a dict of argument specs, "
                            f"not {type(spec).__name__}")
        spec = dict(spec)
        config = spec.pop("$", {})
        params = inspect.signature(method).parameters
        unknown = [k for k in spec if k not in params]
        if unknown:
            raise ExportError(f"spec of {method_name!r} names arguments the method does not have: "
                              f"{unknown} (its arguments: {list(params)})")
        names, specs = [], []
        for name, p in params.items():
            if name in spec:
                names.append(name)
                specs.append(_arg_spec(spec[name], name))
            elif p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ExportError(f"spec of {method_name!r} gives no spec for argument {name!r}")
        return MethodSpec(method, names, specs, config.get("param_mode", "plain"),
                          config.get("effect_mode", "plain"))

    def __repr__(self) -> str:
        args = ", ".join(f"{n}: {s}" for n, s in zip(self.arg_names, self.arg_specs))
        return f"MethodSpec({args})"


class ModuleSpec:
    """The methods of a module to export, in order."""

    def __init__(self, module, method_names: list, method_specs: list) -> None:
        self.module = module
        self.method_names = list(method_names)
        self.method_specs = list(method_specs)

    @staticmethod
    def from_raw(spec, module) -> "ModuleSpec":
        if isinstance(spec, ModuleSpec):
            return spec
        if not isinstance(spec, dict) or not spec:
            raise TypeError("export_tvm: spec must be a non-empty dict {method name: {argument: spec}}")
        names, specs = [], []
        for name, method_spec in spec.items():
            method = getattr(module, name, None)
            if not callable(method):
                raise ExportError(f"export_tvm: {type(module).__name__} has no method {name!r}")
            names.append(name)
            specs.append(MethodSpec.from_raw(method_spec, method, name))
        return ModuleSpec(module, names, specs)

    def __repr__(self) -> str:
        lines = [f"  {n}{repr(s)[len('MethodSpec'):]}" for n, s in zip(self.method_names, self.method_specs)]
        return "ModuleSpec:\n" + "\n".join(lines)
