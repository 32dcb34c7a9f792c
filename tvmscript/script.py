"""``tvms.script``: TVMScript written inside Python, as TVM reads it.

``from tvmscript.script import ir as I, relax as R, tir as T`` gives the dialect namespaces a
Python file needs to hold TVMScript directly: ``@I.ir_module class Module: ...``,
``@T.prim_func def f(...)``, ``@R.function def g(...)`` (and ``@tvms.script.ir_module``, TVM's
older spelling). The decorators never run the Python body: they read the definition's source
with `inspect`, parse it with tvms's own parser and return the `IRModule` or function.

Python evaluates a decorated definition before the decorator sees it: the signatures of the
functions (``x: R.Tensor((1, 784), "float32")``, ``A: T.Buffer((128,), "float32")``) and the
decorators of the methods in a class body. So everything TVMScript writes there must be a
harmless Python value: the namespaces answer any other attribute with a `_Placeholder`, which can
be called, indexed and dotted into without effect.

Names the TVMScript uses but does not define resolve from the Python scope around the
definition (its module's globals, then the locals of the frame that applied the decorator), as
TVM does: ``n = 128`` above a class makes ``T.Buffer((n,), "float32")`` a 128-element buffer.
Diagnostics point at the Python file's own lines and columns.

``tvms.script.from_source`` parses TVMScript text.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import textwrap
from typing import Any

from .api import parse
from .diagnostics import Span, TVMScriptError

__all__ = ["from_source", "ir_module", "ir", "relax", "tir"]


def from_source(source: str, filename: str = "<string>"):
    return parse(source, filename)


# ----------------------------------------------------------------------------- parsing Python


def _python_scope(obj) -> dict[str, Any]:
    """The names visible where ``obj`` was defined: its module's globals, overlaid by the locals
    of the frame that applied the decorator (the first one outside this file), so a module
    defined inside a test function sees that function's variables."""
    scope: dict[str, Any] = {}
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is not None:
        scope.update(vars(module))
    scope.update(getattr(obj, "__globals__", {}) or {})
    frame = inspect.currentframe()
    try:
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        if frame is not None:
            scope.update(frame.f_locals)
    finally:
        del frame
    return scope


def _source_of(obj) -> tuple[str, str, int, str | None]:
    """(dedented source padded so its lines are the file's lines, file name, column offset, the
    whole file's text) of a decorated class or function."""
    try:
        lines, first = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
    except (OSError, TypeError) as err:
        name = getattr(obj, "__qualname__", repr(obj))
        raise TVMScriptError(
            f"cannot read the source of '{name}': {err}",
            None,
            ["TVMScript inside Python needs its definition in a file (not typed at an interactive prompt); "
             "otherwise pass the text to tvms.script.from_source"],
        ) from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    first_line = lines[0]
    indent = len(first_line) - len(first_line.lstrip())
    if indent and not dedented.startswith(first_line[indent:]):
        indent = 0  # a decorator line less indented than the rest: textwrap found another margin
    whole = None
    try:
        with open(filename, encoding="utf-8") as f:
            whole = f.read()
    except OSError:
        pass
    return "\n" * (first - 1) + dedented, filename, indent, whole


def _parse_python(obj):
    """Parse the TVMScript definition ``obj`` (a class or function object) with the Python names
    around it; errors carry the real file's lines and columns."""
    from .parser.builder import build
    from .parser.syntax import parse_syntax

    source, filename, indent, whole = _source_of(obj)
    py_scope = _python_scope(obj)
    try:
        stmts, comments = parse_syntax(source, filename)
        return build(stmts, comments, source, filename, py_scope=py_scope, col_offset=indent)
    except TVMScriptError as err:
        _shift(err, indent, filename, whole)
        raise err.with_traceback(None) from None


def _shift(err: TVMScriptError, indent: int, filename: str, whole: str | None) -> None:
    """Move a diagnostic from the dedented copy onto the Python file's own columns."""
    span = err.span
    if span is not None and indent:
        err.span = Span(filename, span.line, span.col + indent, span.end_line, span.end_col + indent)
    elif span is not None:
        err.span = span.with_filename(filename)
    if whole is not None:
        err.source = whole


def _in_module_class(func) -> bool:
    """True for a method being decorated inside the body of an ``@I.ir_module`` class: the
    class decorator parses the whole class, so the method decorator leaves it alone. A prim_func
    in any other class (TVM's tests keep ``before``/``expected`` functions in plain classes) is
    parsed on its own."""
    parts = getattr(func, "__qualname__", "").split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return False
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    lines = linecache.getlines(code.co_filename)
    index = code.co_firstlineno - 1  # the first decorator's line
    if not 0 <= index < len(lines):
        return False
    indent = _indent(lines[index])
    while index > 0:  # up to the enclosing class statement
        index -= 1
        text = lines[index]
        if text.strip() and _indent(text) < indent and not text.lstrip().startswith("#"):
            if not text.lstrip().startswith("class "):
                return False
            break
    else:
        return False
    class_indent = _indent(lines[index])
    while index > 0:  # its decorators
        index -= 1
        text = lines[index]
        if not text.lstrip().startswith("@") or _indent(text) != class_indent:
            return False
        if "ir_module" in text:
            return True
    return False


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _function_decorator(name: str, allowed: tuple[str, ...]):
    """``@T.prim_func`` / ``@R.function``, bare or called with keyword options."""

    def decorator(func=None, /, **options):
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument '{unknown[0]}'")

        def apply(f):
            if _in_module_class(f):
                f.__tvmscript_kind__ = name
                return f
            return _parse_python(f)

        if func is None:
            return apply
        return apply(func)

    decorator.__name__ = name.split(".")[-1]
    decorator.__doc__ = f"``@{name}``: parse the decorated function's source as TVMScript."
    return decorator


def ir_module(cls=None, /, **options):
    """``@I.ir_module`` / ``@tvms.script.ir_module``: parse the decorated class as an IRModule."""
    unknown = sorted(set(options) - {"check_well_formed"})
    if unknown:
        raise TypeError(f"ir_module() got an unexpected keyword argument '{unknown[0]}'")
    if cls is None:
        return _parse_python
    return _parse_python(cls)


# ----------------------------------------------------------------------------- the namespaces


class _Placeholder:
    """What ``R.Tensor((1, 784), "float32")``, ``T.Buffer[(4,), "int8"]`` or ``T.int64()`` are
    to Python: nothing. Python evaluates them in signatures before the decorator runs; only
    the parser gives them meaning."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args, **kwargs) -> "_Placeholder":
        return self

    def __getitem__(self, key) -> "_Placeholder":
        return self

    def __getattr__(self, attr: str) -> "_Placeholder":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __iter__(self):  # ``m, n = T.int64(), T.int64()`` style unpacking at module level
        return iter(())

    def __repr__(self) -> str:
        return f"<TVMScript {self._name}>"


class _ScalarType(_Placeholder):
    """``T.int64`` in Python: ``n = T.int64()`` above a definition makes a real symbolic
    variable (named after the Python name the first time TVMScript uses it, as TVM does);
    anything else (``T.int64(3)``, ``n: T.int64``) is a placeholder."""

    __slots__ = ("_dtype",)

    def __init__(self, dtype: str) -> None:
        super().__init__(f"T.{dtype}")
        self._dtype = dtype

    def __call__(self, *args, **kwargs):
        if args or kwargs:
            return self
        from .ir import tir as tir_ir

        return tir_ir.Var(self._dtype, UNNAMED)


UNNAMED = ""  # the name of a variable made in Python before TVMScript names it


class _Dialect:
    """One dialect namespace (``I``, ``R`` or ``T``): its decorators, and a placeholder for
    every other name."""

    def __init__(self, prefix: str, members: dict[str, Any]) -> None:
        self._prefix = prefix
        self.__dict__.update(members)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = _Placeholder(f"{self._prefix}.{attr}")
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<TVMScript dialect {self._prefix}>"


prim_func = _function_decorator("T.prim_func", ("private", "check_well_formed", "s_tir"))
function = _function_decorator("R.function", ("private", "pure", "check_well_formed"))

ir = _Dialect("I", {"ir_module": ir_module})
def _scalar_types() -> dict[str, _ScalarType]:
    from .ir import tir as tir_ir

    return {dtype: _ScalarType(dtype) for dtype in tir_ir.SCALAR_DTYPES}


tir = _Dialect("T", {"prim_func": prim_func, **_scalar_types()})
relax = _Dialect("R", {"function": function})
