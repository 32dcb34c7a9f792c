"""tvms: a TVMScript-first machine-learning compiler toolchain.

``import tvmscript as tvms`` gives Apache TVM's Python names, so tutorials port with an import
change: ``tvms.parse``/``tvms.load``/``tvms.script.from_source`` read TVMScript into an
`IRModule`, ``mod.show()`` and ``mod.script()`` print it back as canonical TVMScript.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys

# Every stage gets room for the deepest program the parser accepts (tvmscript/limits.py).
# Only ever raised.
from .limits import MAX_NESTING  # noqa: E402

_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 12 * MAX_NESTING))

from . import ir, relax, tir  # noqa: E402


def _load_printer():
    """Every IR node's script()/show() print through tvmscript.printer, loaded on first use."""
    from . import printer

    return printer


ir.register_printer(_load_printer)

from .api import load, parse  # noqa: E402
from .diagnostics import TVMScriptError  # noqa: E402
from .ir import GlobalVar, IRModule  # noqa: E402
from . import script  # noqa: E402

# Compiling and running, with TVM's names (tvms.compile, tvms.cpu, tvms.nd, ...): served on
# first use, so the CLI's `show`/`fmt` do not load the runtime.
_RUNTIME_NAMES = frozenset((
    "Device", "VirtualMachine", "Executable", "compile", "build", "cpu", "cuda", "gpu", "device",
    "get_global_func", "register_func", "list_global_func_names", "remove_global_func",
))


def __getattr__(name: str):
    if name == "te":  # tensor expressions (compiler/te.py), loaded on first use
        from .compiler import te

        return globals().setdefault("te", te)
    if name == "topi":  # TVM's operator inventory, the TE definitions the ops legalize into
        from .compiler import topi

        return globals().setdefault("topi", topi)
    if name in ("s_tir", "dlight", "target", "transform", "meta_schedule"):  # schedules, DLight, Target,
        # PassContext, auto-tuning: on first use
        # (submodules of this package: `from . import` would ask this __getattr__ again)
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _RUNTIME_NAMES:
        from . import relax_api

        value = getattr(relax_api, name)
        globals()[name] = value
        return value
    if name in ("nd", "Tensor", "NDArray"):
        from . import relax_api

        return relax_api.__getattr__(name)
    raise AttributeError(f"module 'tvmscript' has no attribute '{name}'")

from .version import __version__  # noqa: E402,F401

__all__ = ["parse", "load", "script", "ir", "relax", "tir", "IRModule", "GlobalVar", "TVMScriptError"]
