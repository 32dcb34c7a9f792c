"""Progress of long compiles, reported to whoever shows it.

Why a module of its own: compiling a large model (hundreds of kernels: the pipeline's passes,
then the schedule, code generation and LLVM for each kernel) can take seconds, and the CLI
shows a progress line on a terminal (`tvmscript.cli`), but the stages happen deep inside the
compiler, in whatever thread compiles. The compiler calls `report` at each step; a listener
registered with `listen` receives ``(stage, done, total)`` (``total`` 0: a step whose length
is unknown). With no listener, `report` costs one global read.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["report", "listen"]

_lock = threading.Lock()
_listeners: tuple = ()


def report(stage: str, done: int = 0, total: int = 0) -> None:
    """Tell the listeners that ``stage`` has done ``done`` of ``total`` steps."""
    for listener in _listeners:
        listener(stage, done, total)


@contextlib.contextmanager
def listen(callback):
    """Call ``callback(stage, done, total)`` at each step of compiles (in any thread) while
    the ``with`` block runs."""
    global _listeners
    with _lock:
        _listeners = _listeners + (callback,)
    try:
        yield callback
    finally:
        with _lock:
            _listeners = tuple(x for x in _listeners if x is not callback)
