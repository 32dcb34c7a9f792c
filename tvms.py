"""``import tvms`` is ``import tvmscript``: the same package under the command's name.

The distribution and the command are ``tvms``, the package ``tvmscript``; TVM users type
``import tvm``, so ``import tvms`` must work too. It is an alias, not a copy: ``tvms`` *is* the
``tvmscript`` module object, and every submodule imported through it (``import tvms.relax``,
``from tvms.compiler import nvrtc``) is the very module ``tvmscript.`` + the rest names, so
classes, registries and caches exist once whichever name a program uses.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

import tvmscript

_ALIAS = __name__
_TARGET = "tvmscript"


class _SubmoduleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``tvms.X`` as the module ``tvmscript.X``, already imported or imported now."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_ALIAS + "."):
            return None
        real = _TARGET + fullname[len(_ALIAS):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        # The import system keeps the attributes a module already has (its name, spec and
        # path stay tvmscript's), so the alias and the real name are one object.
        return importlib.import_module(_TARGET + spec.name[len(_ALIAS):])

    def exec_module(self, module) -> None:
        pass  # imported by create_module, under its real name


if not any(isinstance(f, _SubmoduleAlias) for f in sys.meta_path):
    sys.meta_path.insert(0, _SubmoduleAlias())
sys.modules[_ALIAS] = tvmscript
