"""`Schedule`: a module being transformed step by step, with the trace of the steps.

A schedule holds an IRModule and hands out *random variables* (TVM's name): `BlockRV` for a
block, found by its name (unique within a function), and `LoopRV` for a loop, found by its loop
variable. Primitives never change IR in place: each builds a new function body and commits it
(`Schedule._commit`), after which every live handle is looked up again in the new tree. A
primitive that raises has committed nothing, so a failed primitive leaves the schedule as it
was. Handles to loops a primitive removed (``split`` removes the loop it splits) go stale and
say so when used.

The primitives live in one module per family (`loops`, `compute_location`, `inline`, `cache`,
`reduction`, `blockize`, `layout`), each a function decorated with `primitive`, which makes it
a method of `Schedule` and records it in the trace.
"""

from __future__ import annotations

import functools
import inspect
import random
import weakref
from typing import Callable, Optional

from tvmscript.ir import tir
from tvmscript.ir import IRModule

from .errors import ScheduleError
from .trace import Trace
from .tree import FuncIndex

__all__ = ["Schedule", "BlockRV", "LoopRV", "primitive"]


class BlockRV:
    """A handle to a block: its function and its (current) name."""

    __slots__ = ("func_name", "name", "__weakref__")

    def __init__(self, func_name: str, name: str) -> None:
        self.func_name, self.name = func_name, name

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


class LoopRV:
    """A handle to a loop: its function and its loop variable. `LoopRV.root` (no variable)
    is the place above every loop: ``compute_at`` to it leaves a block where it is (what
    ``sample_compute_location`` returns for decision -1, as TVM's root sref)."""

    __slots__ = ("func_name", "var", "__weakref__")

    def __init__(self, func_name: str, var: Optional[tir.Var]) -> None:
        self.func_name, self.var = func_name, var

    @classmethod
    def root(cls, func_name: str) -> "LoopRV":
        return cls(func_name, None)

    @property
    def is_root(self) -> bool:
        return self.var is None

    def __repr__(self) -> str:
        return "LoopRV(root)" if self.var is None else f"LoopRV({self.var.name!r})"


class Schedule:
    """TVM's ``tir.Schedule``: ``Schedule(mod_or_prim_func)``; ``sch.mod`` is the result."""

    def __init__(self, mod, *, seed: Optional[int] = None, debug_mask="all", error_render_level="detail",
                 enable_check: bool = True) -> None:
        if isinstance(mod, tir.PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule takes an IRModule or a PrimFunc, not {type(mod).__name__}")
        self._mod = mod.copy()
        self._index: dict = {}
        self._rvs: "weakref.WeakSet" = weakref.WeakSet()
        self.trace = Trace()
        self._depth = 0  # primitives calling primitives record only the outer call
        # What the sampling primitives draw from (`compiler.schedule.sampling`); seeded, a
        # schedule's samples are the same in every run.
        self.rng = random.Random(seed)

    def seed(self, seed: int) -> None:
        """Reseed the sampling primitives' generator (TVM's ``Schedule.seed``)."""
        self.rng.seed(seed)

    def fork_seed(self) -> int:
        """A seed drawn from this schedule's generator, for a schedule derived from it."""
        return self.rng.randrange(1 << 31)

    # ---- the module
    @property
    def mod(self) -> IRModule:
        return self._mod.copy()

    def func(self, func_name: str) -> tir.PrimFunc:
        if func_name not in self._mod:
            raise ScheduleError("get_block", f"function '{func_name}'", "no such function in the module")
        f = self._mod[func_name]
        if not isinstance(f, tir.PrimFunc):
            raise ScheduleError("get_block", f"function '{func_name}'", "is not a PrimFunc")
        return f

    def index(self, func_name: str) -> FuncIndex:
        idx = self._index.get(func_name)
        f = self.func(func_name)
        if idx is None or idx.root is not f.body:
            idx = FuncIndex(f.body)
            self._index[func_name] = idx
        return idx

    def commit(self, func_name: str, body, renames: Optional[dict] = None, **attrs) -> None:
        """Install ``body`` as the function's new body; ``renames`` maps old block names to new
        ones, so handles follow a renamed block."""
        f = self.func(func_name)
        new_attrs = dict(f.attrs)
        new_attrs.update(attrs)
        self._mod[func_name] = tir.PrimFunc(f.params, f.buffer_map, body, f.ret_type, new_attrs, f.private, f.span,
                                            f.comments)
        if renames:
            for rv in list(self._rvs):
                if isinstance(rv, BlockRV) and rv.func_name == func_name and rv.name in renames:
                    rv.name = renames[rv.name]
        self._index.pop(func_name, None)

    def replace_func(self, func_name: str, func: tir.PrimFunc) -> None:
        self._mod[func_name] = func
        self._index.pop(func_name, None)

    # ---- handles
    def block_rv(self, func_name: str, name: str) -> BlockRV:
        rv = BlockRV(func_name, name)
        self._rvs.add(rv)
        return rv

    def loop_rv(self, func_name: str, var: tir.Var) -> LoopRV:
        rv = LoopRV(func_name, var)
        self._rvs.add(rv)
        return rv

    def resolve_block(self, rv, primitive: str = "get") -> tuple:
        """``(FuncIndex, BlockRealize)`` of a live block handle."""
        if not isinstance(rv, BlockRV):
            raise TypeError(f"{primitive}: expected a block (BlockRV), got {type(rv).__name__}")
        idx = self.index(rv.func_name)
        realize = idx.blocks.get(rv.name)
        if realize is None:
            raise ScheduleError(primitive, f"block '{rv.name}'", "the block no longer exists in the function")
        return idx, realize

    def resolve_loop(self, rv, primitive: str = "get") -> tuple:
        """``(FuncIndex, For)`` of a live loop handle."""
        if not isinstance(rv, LoopRV):
            raise TypeError(f"{primitive}: expected a loop (LoopRV), got {type(rv).__name__}")
        idx = self.index(rv.func_name)
        loop = idx.loops.get(rv.var)
        if rv.is_root:
            raise ScheduleError(primitive, "the root", "is not a loop (a compute location above every loop)")
        if loop is None:
            raise ScheduleError(primitive, f"loop '{rv.var.name}'",
                                "the loop no longer exists (a split, fuse or other primitive replaced it)")
        return idx, loop

    def get(self, rv):
        """The statement a handle stands for now (a `tir.Block` or a `tir.For`)."""
        if isinstance(rv, BlockRV):
            return self.resolve_block(rv)[1].block
        if isinstance(rv, LoopRV):
            return self.resolve_loop(rv)[1]
        return rv

    def span_of(self, realize) -> object:
        return getattr(realize.block, "span", None) if realize is not None else None

    def error(self, primitive: str, subject: str, reason: str, realize=None) -> ScheduleError:
        return ScheduleError(primitive, subject, reason, self.span_of(realize))

    def copy(self) -> "Schedule":
        new = Schedule.__new__(Schedule)
        new._mod = self._mod.copy()
        new._index = {}
        new._rvs = weakref.WeakSet()
        new.trace = self.trace.copy()
        new._depth = 0
        new.rng = random.Random()
        new.rng.setstate(self.rng.getstate())
        return new

    def show(self, *args, **kwargs) -> None:
        self.mod.show(*args, **kwargs)


def _plain(v):
    """``v`` with every sampled integer (an ``int`` subclass) made a plain ``int``."""
    if isinstance(v, int) and type(v) is not int and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (list, tuple)) and any(isinstance(x, (int, list, tuple)) for x in v):
        return type(v)(_plain(x) for x in v)
    return v


def primitive(fn: Callable = None, *, trace_name: Optional[str] = None, record: bool = True,
              positional: tuple = ()):
    """Make ``fn(sch, ...)`` the method ``Schedule.<name>``, recording each outermost call in
    the trace (as TVM's trace prints it: keyword arguments with their defaults, except the
    ``positional`` ones, which TVM prints bare: ``sch.get_child_blocks(b0)``)."""

    def wrap(fn):
        sig = inspect.signature(fn)
        name = trace_name or fn.__name__

        @functools.wraps(fn)
        def method(self, *args, **kwargs):
            self._depth += 1
            try:
                # Sampled integers (`sampling.ExprRV`) reach the IR as plain numbers; the trace
                # keeps the handles, so that a replay with other decisions passes the new values.
                result = fn(self, *[_plain(a) for a in args], **{k: _plain(v) for k, v in kwargs.items()})
            finally:
                self._depth -= 1
            if record and self._depth == 0:
                bound = sig.bind(self, *args, **kwargs)
                bound.apply_defaults()
                items = []
                for k, v in list(bound.arguments.items())[1:]:
                    if sig.parameters[k].kind is inspect.Parameter.VAR_POSITIONAL:
                        items.append(("*", v))
                    elif k in positional:
                        items.append(("*", [v]))
                    else:
                        items.append((k, v))
                self.trace.append(name, items, result)
            return result

        setattr(Schedule, fn.__name__, method)
        return fn

    return wrap(fn) if fn is not None else wrap


@primitive(trace_name="get_sblock")
def get_block(sch: Schedule, name: str, func_name: str = "main") -> BlockRV:
    """The block called ``name`` in function ``func_name`` (TVM 0.27 calls it get_sblock)."""
    idx = sch.index(func_name)
    if name not in idx.blocks:
        known = ", ".join(sorted(n for n in idx.blocks if n != "root")) or "none"
        raise ScheduleError("get_block", f"block '{name}'", f"no such block in function '{func_name}' (blocks: {known})")
    return sch.block_rv(func_name, name)


Schedule.get_sblock = Schedule.get_block
