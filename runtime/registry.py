"""The global function registry: Python functions that Relax code calls by name.

``R.call_tir("env.linear", ...)`` / ``R.call_dps_packed("env.linear", ...)`` /
``R.call_packed("env.f", ...)`` find their callee here, when the VM runs them, as in TVM::

    @tvms.register_func("env.linear", override=True)
    def linear(x, w, b, out):          # tvms Tensors; out is written in place
        np.matmul(x.numpy(), w.numpy().T, out=out.numpy()); out.numpy()[:] += b.numpy()

The VM looks the name up at every call, so re-registering a function (``override=True``)
takes effect in VMs that already exist.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["register_func", "get_global_func", "list_global_func_names", "remove_global_func"]

# name -> Python callable. The VM's generated code reads this dict directly.
REGISTRY: dict[str, Callable] = {}


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register ``f`` under ``func_name``. As a decorator: ``@register_func("env.f")`` or, to use
    the function's own name, ``@register_func``. Registering a taken name is an error unless
    ``override=True``. Returns ``f`` (so the decorated function stays a plain function)."""
    if callable(func_name) and f is None:
        f, func_name = func_name, func_name.__name__
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: the name must be a non-empty string, got {func_name!r}")

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func({func_name!r}): {fn!r} is not callable")
        if func_name in REGISTRY and not override:
            raise ValueError(f"global function {func_name!r} is already registered; pass override=True to replace it")
        REGISTRY[func_name] = fn
        return fn

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False):
    """The function registered as ``name``; ``None`` if there is none and ``allow_missing``,
    otherwise a ValueError."""
    fn = REGISTRY.get(name)
    if fn is None and not allow_missing:
        raise ValueError(f"no global function named {name!r} is registered (tvms.register_func registers one)")
    return fn


def list_global_func_names() -> list[str]:
    return sorted(REGISTRY)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (a KeyError if it is not registered)."""
    if name not in REGISTRY:
        raise KeyError(f"no global function named {name!r} is registered")
    del REGISTRY[name]
