"""tvms: a TVMScript-first machine-learning compiler toolchain.

``import tvmscript as tvms`` gives Apache TVM's Python names, so tutorials port with an import
change: ``tvms.parse``/``tvms.load``/``tvms.script.from_source`` read TVMScript into an
`IRModule`, ``mod.show()`` and ``mod.script()`` print it back as canonical TVMScript.
"""

from __future__ import annotations

import importlib as _importlib
import importlib.util as _importlib_util
import os as _os
import sys as _sys


def _mount_sibling_packages() -> None:
    """In a source checkout compiler/, runtime/ and grammar/ sit beside tvmscript/ (the design
    card's layout); installed, setuptools places them inside the package. Either way they import
    as ``tvmscript.compiler``, ``tvmscript.runtime`` and ``tvmscript.grammar``."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    root = _os.path.dirname(here)
    for name in ("compiler", "runtime", "grammar"):
        full = f"{__name__}.{name}"
        if full in _sys.modules or _os.path.isdir(_os.path.join(here, name)):
            continue
        init = _os.path.join(root, name, "__init__.py")
        if not _os.path.exists(init):
            continue
        spec = _importlib_util.spec_from_file_location(
            full, init, submodule_search_locations=[_os.path.join(root, name)]
        )
        module = _importlib_util.module_from_spec(spec)
        _sys.modules[full] = module
        globals()[name] = module
        spec.loader.exec_module(module)


_mount_sibling_packages()

# Expression trees are as deep as the program's expressions (a 900-term sum is a 900-deep Add
# chain), and the passes, the printer, pickling and code generation recurse over them a few
# Python frames per level. The parser refuses nesting deeper than MAX_NESTING
# (tvmscript/parser/builder.py); every later stage gets room for that depth. Only ever raised.
MAX_NESTING = 1000
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 12 * MAX_NESTING))

from . import ir, printer, relax, tir  # noqa: E402  (printer: every node's script()/show())
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
        return globals().setdefault("te", _importlib.import_module(f"{__name__}.compiler.te"))
    if name == "topi":  # TVM's operator inventory, the TE definitions the ops legalize into
        return globals().setdefault("topi", _importlib.import_module(f"{__name__}.compiler.topi"))
    if name in ("s_tir", "dlight", "target"):  # schedules, DLight, tvms.target.Target: on first use
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

__version__ = "0.1.0"

__all__ = ["parse", "load", "script", "ir", "relax", "tir", "IRModule", "GlobalVar", "TVMScriptError"]
