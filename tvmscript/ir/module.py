"""The module-level IR shared by both dialects: `IRModule`, `GlobalVar` and virtual devices.

An `IRModule` maps `GlobalVar`s to functions, Relax (`relax.Function`) or TensorIR
(`tir.PrimFunc`), as in Apache TVM (whose ``tvm.ir.module`` this is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from .node import Node

__all__ = ["GlobalVar", "GlobalVarList", "IRModule", "VDevice", "DummyGlobalInfo"]


@dataclass(eq=True)
class VDevice:
    """A virtual device of ``I.module_global_infos({"vdevice": [...]})``: TVM's ``I.vdevice``.
    The target is kept as written (a target string, or the dict of its attributes that TVM
    prints); nothing compiles for it yet, so it is plain data the module carries and prints."""

    target: Any
    vdevice_id: int = 0
    memory_scope: str = "global"


def vdevice_kind(dev: VDevice) -> str:
    """The target kind of a VDevice ("cuda" of ``{"kind": "cuda", ...}`` or of "cuda -arch=sm_80")."""
    if isinstance(dev.target, dict):
        return str(dev.target.get("kind", ""))
    return dev.target.split()[0] if dev.target.strip() else ""


def vdevice_name(text, devices=()) -> str:
    """A virtual device in TVM's printed form ``"kind:index:scope"``, from ``"cuda"``,
    ``"cuda:1"`` (the second cuda vdevice), ``"cuda:1:global"``, or ``"vdevice:3"`` (the fourth
    of ``devices``, the module's I.module_global_infos "vdevice" list, named by its kind and its
    index among that kind's vdevices). ValueError when ``text`` is none of these."""
    if not isinstance(text, str) or not text:
        raise ValueError('vdevice must be a string such as "cuda:0" or "vdevice:1"')
    parts = text.split(":")
    if len(parts) > 3 or not all(parts) or (len(parts) > 1 and not parts[1].isdigit()):
        raise ValueError(f"vdevice {text!r} is not of the form \"kind[:index[:scope]]\"")
    kind, index = parts[0], int(parts[1]) if len(parts) > 1 else 0
    scope = parts[2] if len(parts) > 2 else None
    if kind == "vdevice":
        if index >= len(devices):
            raise ValueError(f"vdevice {text!r}: the module's global infos have {len(devices)} vdevice(s)")
        dev = devices[index]
        kind = vdevice_kind(dev)
        index = sum(1 for d in devices[:index] if vdevice_kind(d) == kind)
        scope = scope or dev.memory_scope
    return f"{kind}:{index}:{scope or 'global'}"


@dataclass(eq=True)
class DummyGlobalInfo:
    """TVM's ``I.dummy_global_info()``: a placeholder entry, as its tests use."""


@dataclass(eq=False, slots=True)
class GlobalVar(Node):
    """The name of a function in a module. ``cls.f`` in TVMScript."""

    name_hint: str

    def __repr__(self) -> str:
        return f'I.GlobalVar("{self.name_hint}")'

    def __str__(self) -> str:
        return repr(self)


class GlobalVarList(list):
    """A list of GlobalVars that prints as TVM prints it: ``[I.GlobalVar("main")]``."""

    def __str__(self) -> str:
        return "[" + ", ".join(repr(gv) for gv in self) + "]"


class IRModule(Node):
    """A collection of functions indexed by `GlobalVar` (or by name)."""

    __slots__ = ("functions", "attrs", "global_infos", "comments", "_by_name", "name")

    def __init__(self, functions: dict | None = None, attrs: dict | None = None) -> None:
        self.functions: dict[GlobalVar, Any] = {}
        self._by_name: dict[str, GlobalVar] = {}
        self.attrs: dict = dict(attrs or {})
        self.global_infos: dict = {}
        # Comments the user wrote outside functions, keyed by the node they belong to (the module
        # itself, or a GlobalVar for comments before a function's decorators).
        self.comments: dict = {}
        self.name = "Module"
        for key, func in (functions or {}).items():
            self[key] = func

    # ---- mapping interface, with TVM's names
    def __getitem__(self, key) -> Any:
        if isinstance(key, str):
            if key not in self._by_name:
                raise KeyError(f"module has no function named {key!r}")
            key = self._by_name[key]
        return self.functions[key]

    def __setitem__(self, key, func) -> None:
        if isinstance(key, str):
            key = self._by_name.get(key) or GlobalVar(key)
        old = self._by_name.get(key.name_hint)
        if old is not None and old is not key:
            del self.functions[old]
        self._by_name[key.name_hint] = key
        self.functions[key] = func

    def __delitem__(self, key) -> None:
        gv = self._by_name[key] if isinstance(key, str) else key
        del self.functions[gv]
        del self._by_name[gv.name_hint]

    def __contains__(self, key) -> bool:
        if isinstance(key, str):
            return key in self._by_name
        return key in self.functions

    def __iter__(self) -> Iterator:
        return iter(self.functions.items())

    def __len__(self) -> int:
        return len(self.functions)

    def update_func(self, gv: GlobalVar, func) -> None:
        self[gv] = func

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._by_name:
            raise KeyError(f"module has no function named {name!r}")
        return self._by_name[name]

    def get_global_vars(self) -> GlobalVarList:
        return GlobalVarList(sorted(self.functions, key=lambda gv: gv.name_hint))

    def items(self):
        return self.functions.items()

    def copy(self) -> "IRModule":
        new = IRModule(attrs=self.attrs)
        for gv, func in self.functions.items():
            new[gv] = func
        new.global_infos = dict(self.global_infos)
        new.name = self.name
        return new

    def __eq__(self, other) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)
