"""Compilation targets, with Apache TVM's names: ``tvms.target.Target``.

A `Target` is a kind (``llvm``, ``cuda``, ...) plus typed attributes, written as TVM writes
them::

    Target("cuda")                                         # an H100, see below
    Target("cuda -arch=sm_80 -max_threads_per_block=512")
    Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma")
    Target({"kind": "cuda", "arch": "sm_80", "max_shared_memory_per_block": 49152})
    Target("nvidia/nvidia-a100")                           # a tag: a named configuration
    Target("cuda", host="llvm")

    with Target("cuda"):                                   # the current target, per thread
        Target.current().max_threads_per_block             # 1024

Each kind declares the attributes it takes and their types (`TargetKind.options`); an unknown
kind, an unknown attribute, a value of the wrong type or text that is not ``-name=value``
raises a ValueError saying which. A `Target` only describes, as TVM's does (a module written
for another machine still parses): compiling checks the rest, that tvms acts on every option
given (`compiler.build.checked_target`) and that LLVM knows the CPU and features an ``llvm``
target names (`compiler.llvm_target`). ``str(target)`` prints the canonical form TVM prints (kind,
``-keys=``, then every attribute in name order), which `Target` reads back.

Why the ``cuda`` defaults describe an H100 (arch ``sm_90``, 1024 threads per block, warps of
32, 48 KiB of static shared memory per block — TVM's default static limit, the most a kernel
gets without opting in to dynamic shared memory): TVM fills them from the GPU it finds, and
tvms has no CUDA runtime to ask yet, so it assumes the GPU this project targets. Pass the
attributes (or a tag) to describe another.

This module imports nothing beyond the standard library: ``import tvmscript`` serves it on
first use of ``tvms.target``.
"""

from __future__ import annotations

import re
import shlex
import threading
from typing import Any, Optional

__all__ = ["Target", "TargetKind", "UnknownTargetOption", "list_tags", "cuda"]


class UnknownTargetOption(ValueError):
    """An option the target's kind does not have. ``where`` (the target as written), ``kind``
    and ``option`` are kept so that a compiler can say which of the kind's options it acts on
    (`with_options`)."""

    def __init__(self, where: str, kind: "TargetKind", option: str) -> None:
        self.where, self.kind, self.option = where, kind.name, option
        super().__init__(self.with_options("it takes", sorted(kind.options)))

    def with_options(self, which: str, names) -> str:
        return (f"{self.where}: target kind '{self.kind}' has no attribute {self.option!r}; {which} "
                f"{', '.join(names)}")


class TargetKind:
    """A kind of target: its name, DLPack device type, default keys and the attributes it
    takes (name -> ``int``, ``str``, ``bool`` or ``list`` of strings), with their defaults."""

    __slots__ = ("name", "device_type", "default_keys", "options", "defaults")

    def __init__(self, name: str, device_type: int, default_keys: tuple, options: dict, defaults: dict) -> None:
        self.name = name
        self.device_type = device_type
        self.default_keys = default_keys
        self.options = {**_COMMON_OPTIONS, **options}
        self.defaults = defaults

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"

    def __str__(self) -> str:
        return self.name


# Attributes every kind takes (as in TVM).
_COMMON_OPTIONS = {"keys": list, "libs": list, "device": str, "model": str, "tag": str}

_GPU_LIMITS = {"max_num_threads": int, "max_threads_per_block": int, "thread_warp_size": int,
               "max_shared_memory_per_block": int}

_KINDS = {
    kind.name: kind
    for kind in (
        TargetKind("llvm", 1, ("cpu",), {
            "mtriple": str, "mcpu": str, "mattr": list, "mfloat-abi": str, "mabi": str,
            "num-cores": int, "opt-level": int, "system-lib": bool, "runtime": str,
            "link-params": bool, "fast-math": bool, "vector-width": int,
        }, {}),
        TargetKind("c", 1, ("cpu",), {
            "mcpu": str, "march": str, "system-lib": bool, "runtime": str, "link-params": bool,
            "workspace-byte-alignment": int, "constants-byte-alignment": int,
        }, {}),
        TargetKind("cuda", 2, ("cuda", "gpu"), {
            **_GPU_LIMITS, "mcpu": str, "arch": str, "registers_per_block": int,
            "l2_cache_size_bytes": int, "allow_tf32": bool,
        }, {
            "arch": "sm_90", "max_num_threads": 1024, "max_threads_per_block": 1024,
            "thread_warp_size": 32, "max_shared_memory_per_block": 49152, "registers_per_block": 65536,
        }),
        TargetKind("nvptx", 2, ("cuda", "gpu"), {**_GPU_LIMITS, "mcpu": str, "mtriple": str}, {
            "mcpu": "sm_90", "mtriple": "nvptx64-nvidia-cuda", "max_num_threads": 1024,
            "max_threads_per_block": 1024, "thread_warp_size": 32, "max_shared_memory_per_block": 49152,
        }),
        TargetKind("rocm", 10, ("rocm", "gpu"), {**_GPU_LIMITS, "mcpu": str, "mtriple": str, "mattr": list}, {
            "mtriple": "amdgcn-amd-amdhsa-hcc", "max_num_threads": 256, "max_threads_per_block": 256,
            "thread_warp_size": 64, "max_shared_memory_per_block": 65536,
        }),
        TargetKind("metal", 8, ("metal", "gpu"), {**_GPU_LIMITS, "max_function_args": int}, {
            "max_num_threads": 256, "max_threads_per_block": 256, "thread_warp_size": 16,
            "max_shared_memory_per_block": 32768, "max_function_args": 31,
        }),
        TargetKind("vulkan", 7, ("vulkan", "gpu"), {**_GPU_LIMITS, "supports_float16": bool, "supports_int8": bool}, {
            "max_num_threads": 256, "max_threads_per_block": 256, "thread_warp_size": 1,
            "max_shared_memory_per_block": 32768,
        }),
        TargetKind("opencl", 4, ("opencl", "gpu"), {**_GPU_LIMITS, "texture_spatial_limit": int}, {
            "max_num_threads": 256, "max_threads_per_block": 256, "thread_warp_size": 1,
            "max_shared_memory_per_block": 16384, "texture_spatial_limit": 16384,
        }),
        TargetKind("webgpu", 15, ("webgpu", "gpu"), _GPU_LIMITS, {
            "max_num_threads": 256, "max_threads_per_block": 256, "thread_warp_size": 1,
            "max_shared_memory_per_block": 16384,
        }),
    )
}


def _cuda_tag(arch: str, l2: Optional[int] = None) -> dict:
    config = {"kind": "cuda", "keys": ["cuda", "gpu"], "arch": arch, "max_shared_memory_per_block": 49152,
              "max_threads_per_block": 1024, "thread_warp_size": 32, "registers_per_block": 65536}
    if l2 is not None:
        config["l2_cache_size_bytes"] = l2
    return config


# A few of TVM's tags (src/target/tag.cc), with its values.
_TAGS = {
    "nvidia/nvidia-h100": _cuda_tag("sm_90a", 52428800),
    "nvidia/nvidia-a100": _cuda_tag("sm_80", 41943040),
    "nvidia/nvidia-a10g": _cuda_tag("sm_86"),
    "nvidia/nvidia-t4": _cuda_tag("sm_75"),
    "nvidia/nvidia-v100": _cuda_tag("sm_70"),
    "nvidia/geforce-rtx-4090": _cuda_tag("sm_89", 75497472),
    "nvidia/geforce-rtx-3090": _cuda_tag("sm_86"),
}

_ARCH = re.compile(r"sm_\d+[a-z]?")
_POSITIVE = {"max_num_threads", "max_threads_per_block", "thread_warp_size", "max_shared_memory_per_block",
             "registers_per_block", "l2_cache_size_bytes", "num-cores", "max_function_args"}


def list_tags() -> list:
    """The tags `Target` accepts (``"nvidia/nvidia-h100"``, ...)."""
    return sorted(_TAGS)


class _Stack(threading.local):
    def __init__(self) -> None:
        self.targets: list = []


_STACK = _Stack()


class Target:
    """A compilation target: ``Target("cuda -arch=sm_80")``, ``Target({"kind": "cuda", ...})``,
    ``Target("nvidia/nvidia-a100")``; ``host`` is the target of the host code (a `Target`, a
    string or a dict). See the module docstring."""

    __slots__ = ("kind", "keys", "_attrs", "host", "tag")

    def __init__(self, target, host=None) -> None:
        if isinstance(target, Target):
            self.kind, self.keys, self._attrs = target.kind, target.keys, dict(target._attrs)
            self.host, self.tag = target.host, target.tag
        elif isinstance(target, str):
            self._from_config(_parse_text(target), target)
        elif isinstance(target, dict):
            self._from_config(dict(target), target)
        else:
            raise ValueError(f"a target is a string such as \"cuda -arch=sm_80\", a dict or a Target, "
                             f"not {type(target).__name__}")
        if host is not None:
            self.host = host if isinstance(host, Target) else Target(host)

    def _from_config(self, config: dict, source) -> None:
        config = dict(config)
        tag = config.pop("tag", None)
        if "kind" not in config and tag is not None:
            config = {**_tag_config(tag, source), **config}
        if "kind" not in config:
            raise ValueError(f"target {source!r}: a target dict needs a 'kind' (such as \"cuda\" or \"llvm\")")
        kind_name = config.pop("kind")
        kind = _KINDS.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            raise ValueError(f"target {source!r}: unknown target kind {kind_name!r}; expected one of "
                             f"{', '.join(sorted(_KINDS))} or a tag such as \"nvidia/nvidia-h100\"")
        host = config.pop("host", None)
        keys = config.pop("keys", None)
        attrs = dict(kind.defaults)
        for name, value in config.items():
            attrs[name] = _check_value(kind, name, value, source)
        self.kind = kind
        self.keys = tuple(_check_value(kind, "keys", keys, source)) if keys is not None else kind.default_keys
        self._attrs = attrs
        self.tag = tag or ""
        self.host = None if host is None else (host if isinstance(host, Target) else Target(host))

    # ---- the attributes, with TVM's property names
    @property
    def attrs(self) -> dict:
        """Every attribute, defaults included (a copy)."""
        return dict(self._attrs)

    @property
    def arch(self) -> str:
        """The GPU architecture (``"sm_90"``); ``""`` for a kind that has none."""
        return str(self._attrs.get("arch", self._attrs.get("mcpu", "") if self.kind.name == "nvptx" else ""))

    @property
    def max_threads_per_block(self) -> Optional[int]:
        """The most threads one block may have; None for a CPU."""
        return self._attrs.get("max_threads_per_block")

    @property
    def max_num_threads(self) -> Optional[int]:
        return self._attrs.get("max_num_threads")

    @property
    def thread_warp_size(self) -> Optional[int]:
        return self._attrs.get("thread_warp_size")

    @property
    def max_shared_memory_per_block(self) -> Optional[int]:
        """Bytes of (static) shared memory one block may allocate; None for a CPU."""
        return self._attrs.get("max_shared_memory_per_block")

    @property
    def registers_per_block(self) -> Optional[int]:
        return self._attrs.get("registers_per_block")

    @property
    def mcpu(self) -> str:
        return str(self._attrs.get("mcpu", ""))

    @property
    def mattr(self) -> list:
        return list(self._attrs.get("mattr", []))

    @property
    def libs(self) -> list:
        return list(self._attrs.get("libs", []))

    @property
    def model(self) -> str:
        return str(self._attrs.get("model", "unknown"))

    # ---- forms
    def export(self) -> dict:
        """The dict form: ``Target(t.export())`` is ``t`` again."""
        out: dict = {"kind": self.kind.name, "keys": list(self.keys)}
        for name in sorted(self._attrs):
            value = self._attrs[name]
            out[name] = list(value) if isinstance(value, (list, tuple)) else value
        if self.tag:
            out["tag"] = self.tag
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    def with_host(self, host) -> "Target":
        return Target(self, host=host)

    def __str__(self) -> str:
        parts = [self.kind.name]
        if self.keys:
            parts.append("-keys=" + ",".join(self.keys))
        for name in sorted(self._attrs):
            parts.append(f"-{name}={_format_value(self._attrs[name])}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other) -> bool:
        """Same kind, keys, attributes and host (a tag only names a configuration)."""
        if not isinstance(other, Target):
            return NotImplemented
        return (self.kind is other.kind and self.keys == other.keys and self._attrs == other._attrs
                and self.host == other.host)

    def __hash__(self) -> int:
        return hash(str(self))

    # ---- the current target
    def __enter__(self) -> "Target":
        _STACK.targets.append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _STACK.targets
        if not stack or stack[-1] is not self:
            raise RuntimeError("Target scopes must be exited in the order they were entered")
        stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Optional["Target"]:
        """The innermost target entered with ``with`` on this thread; None if there is none
        (``allow_none=False``: a ValueError instead). TVM's default is ``allow_none=True``."""
        stack = _STACK.targets
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("no target is set: enter one with `with tvms.target.Target(...):`")
        return None

    @staticmethod
    def list_kinds() -> list:
        return sorted(_KINDS)


def cuda(model: str = "unknown", arch: Optional[str] = None, options=None) -> Target:
    """``Target("cuda")`` with a model name, an arch and extra ``-name=value`` options (TVM's
    ``tvm.target.cuda``)."""
    text = "cuda"
    if model != "unknown":
        text += f" -model={model}"
    if arch is not None:
        text += f" -arch={arch}"
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)


# ----------------------------------------------------------------------------- parsing


def _tag_config(tag: str, source) -> dict:
    config = _TAGS.get(tag)
    if config is None:
        raise ValueError(f"target {source!r}: unknown tag {tag!r}; known tags: {', '.join(list_tags())}")
    return dict(config)


def _parse_text(text: str) -> dict:
    """``"cuda -arch=sm_80 -libs=cublas"`` -> ``{"kind": "cuda", "arch": "sm_80", "libs":
    "cublas"}`` (values stay strings; `_check_value` types them)."""
    try:
        words = shlex.split(text)
    except ValueError as err:  # an unbalanced quote
        raise ValueError(f"target {text!r}: {err}") from None
    if not words:
        raise ValueError("an empty string is not a target: expected a kind such as \"cuda\" or \"llvm\"")
    head, options = words[0], words[1:]
    if head.startswith("-"):
        raise ValueError(f"target {text!r}: the target kind comes first, before any -name=value option")
    config: dict = {"tag": head} if "/" in head else {"kind": head}
    for word in options:
        match = re.fullmatch(r"--?([A-Za-z_][A-Za-z0-9_.\-]*)(?:=(.*))?", word, re.S)
        if match is None:
            raise ValueError(f"target {text!r}: cannot read option {word!r}; options are written -name=value")
        name, value = match.group(1), match.group(2)
        if name in ("kind", "host"):
            raise ValueError(f"target {text!r}: -{name} cannot be given as an option")
        if name in config:
            raise ValueError(f"target {text!r}: option -{name} is given twice")
        config[name] = True if value is None else value
    if "tag" in config and "kind" not in config:
        config = {**_tag_config(config["tag"], text), **config}
    return config


def _check_value(kind: TargetKind, name: str, value, source) -> Any:
    ty = kind.options.get(name)
    where = f"target {source!r}"
    if ty is None:
        raise UnknownTargetOption(where, kind, name)
    if value is True and ty is not bool:
        raise ValueError(f"{where}: {name} needs a value (-{name}=...)")
    if ty is int:
        if isinstance(value, str):
            try:
                value = int(value, 0)
            except ValueError:
                raise ValueError(f"{where}: -{name} must be an integer, not {value!r}") from None
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: {name} must be an integer, not {value!r}")
        if name in _POSITIVE and value <= 0:
            raise ValueError(f"{where}: {name} must be positive, not {value}")
        return value
    if ty is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("1", "0", "true", "false"):
            return value.lower() in ("1", "true")
        raise ValueError(f"{where}: {name} must be a boolean (true/false, 1/0), not {value!r}")
    if ty is list:
        if isinstance(value, str):
            items = [v for v in value.split(",") if v]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items = list(value)
        else:
            raise ValueError(f"{where}: {name} must be a list of strings (or one comma-separated string), not {value!r}")
        return tuple(items)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {name} must be a non-empty string, not {value!r}")
    if name == "arch" and kind.name == "cuda" or name == "mcpu" and kind.name == "nvptx":
        if not _ARCH.fullmatch(value):
            raise ValueError(f"{where}: {name} must be a CUDA architecture such as sm_80 or sm_90a, not {value!r}")
    return value


def _format_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)
