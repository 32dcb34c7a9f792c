"""The trace of a schedule: the primitives applied, printable as the Python that replays them.

`Trace.show()` prints what TVM's ``sch.trace.show()`` prints::

    # from tvm import s_tir
    def apply_trace(sch: s_tir.Schedule) -> None:
      b0 = sch.get_sblock(name="Y", func_name="main")
      l1, l2, l3 = sch.get_loops(block=b0)

Handles are named by kind and order of first appearance (``b`` blocks, ``l`` loops, ``v``
sampled integers); running the text with ``tvms.s_tir`` as ``s_tir`` replays the schedule.

A trace is also data, which is what tuning needs (`compiler.meta_schedule`):

* `Trace.apply_to_schedule` replays it on a fresh schedule of the same function, each
  instruction called again with the handles the replay made in place of the recorded ones, and
  the sampling instructions (`compiler.schedule.sampling`) given their recorded decisions;
* `Trace.with_decision` is the same trace with one decision changed: replayed, the new value
  flows into every instruction that used the sample (how the search mutates a candidate);
* `Trace.as_json` / `Trace.from_json` write and read it as plain JSON (a tuning database's
  records), handles by name. An argument JSON cannot hold (an index map given as a lambda) makes
  `as_json` raise `TraceError`: such traces replay only in the process that made them.
"""

from __future__ import annotations

import inspect

JSON_VERSION = 1


class TraceError(ValueError):
    """A trace that cannot be written as JSON, read back, or replayed."""


class Instruction:
    """One primitive call: its ``kind`` (the method's name as TVM prints it), its arguments as
    (keyword, value) pairs ("*" for positional ones, a list of values) and what it returned."""

    __slots__ = ("kind", "args", "outputs")

    def __init__(self, kind: str, args: list, outputs) -> None:
        self.kind, self.args, self.outputs = kind, args, outputs

    def arg(self, key: str):
        """The argument passed as ``key`` (None when there is none)."""
        return next((v for k, v in self.args if k == key), None)

    @property
    def decision(self):
        """A sampling instruction's decision (None for the others)."""
        return self.arg("decision")

    def __repr__(self) -> str:
        return f"Instruction({self.kind})"


class Trace:
    def __init__(self) -> None:
        self.insts: list = []

    def append(self, kind: str, args: list, outputs) -> None:
        self.insts.append(Instruction(kind, args, outputs))

    def copy(self) -> "Trace":
        t = Trace()
        t.insts = list(self.insts)
        return t

    def __len__(self) -> int:
        return len(self.insts)

    # ---- decisions and replay

    @property
    def decisions(self) -> dict:
        """Index of each sampling instruction -> its decision."""
        return {i: inst.decision for i, inst in enumerate(self.insts) if _is_sampling(inst.kind)}

    def with_decision(self, index: int, decision) -> "Trace":
        """This trace with instruction ``index``'s decision replaced (the later instructions
        are kept as recorded; `apply_to_schedule` recomputes what they depend on)."""
        inst = self.insts[index]
        if not _is_sampling(inst.kind):
            raise TraceError(f"instruction {index} ({inst.kind}) makes no decision")
        args = [(k, decision if k == "decision" else v) for k, v in inst.args]
        t = self.copy()
        t.insts[index] = Instruction(inst.kind, args, inst.outputs)
        return t

    def apply_to_schedule(self, sch, resample: bool = False) -> dict:
        """Call every instruction again on ``sch`` (a schedule of the module the trace was made
        on), in order. ``resample``: the sampling instructions draw new decisions from
        ``sch``'s generator instead of repeating the recorded ones (a fresh sample of a design
        space). Returns the replay's handle for each recorded one (by the recorded handle's
        ``id``). Raises the primitive's `ScheduleError` where one no longer applies (a mutated
        decision can make a later step illegal) and `TraceError` where an argument cannot be
        replayed."""
        handles: dict = {}   # id(recorded handle) -> the replay's

        def arg(v):
            if _is_handle(v):
                try:
                    return handles[id(v)]
                except KeyError:
                    raise TraceError(f"{v!r} is used before an instruction makes it") from None
            if isinstance(v, (list, tuple)):
                return type(v)(arg(x) for x in v)
            if type(v).__name__ == "_Text":
                raise TraceError("an argument recorded only as text (an index map) cannot be replayed")
            return v

        for inst in self.insts:
            args, kwargs = [], {}
            for k, v in inst.args:
                if k == "*":
                    args.extend(arg(x) for x in v)
                elif not (resample and k == "decision"):
                    kwargs[k] = arg(v)
            out = getattr(sch, inst.kind)(*args, **kwargs)
            _bind(inst.outputs, out, handles)
        return handles

    # ---- JSON

    def as_json(self) -> dict:
        """``{"version": 1, "insts": [[kind, [[keyword, value], ...], outputs], ...]}``, handles
        written as ``{"rv": "l3"}`` and outputs as their names."""
        names: dict = {}

        def name(rv) -> str:
            key = id(rv)
            if key not in names:
                names[key] = f"{_prefix(rv)}{len(names)}"
            return names[key]

        def value(v):
            if _is_handle(v):
                if id(v) not in names:
                    raise TraceError(f"{v!r} is used before an instruction makes it")
                return {"rv": names[id(v)]}
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
            if isinstance(v, (list, tuple)):
                return [value(x) for x in v]
            raise TraceError(f"a {type(v).__name__} argument cannot be written as JSON: {v!r}")

        def outputs(out):
            if out is None:
                return None
            if isinstance(out, (list, tuple)):
                return [name(o) for o in out]
            if _is_handle(out):
                return name(out)
            raise TraceError(f"an instruction's result {out!r} cannot be written as JSON")

        insts = []
        for inst in self.insts:
            args = [[k, value(v)] for k, v in inst.args]
            insts.append([inst.kind, args, outputs(inst.outputs)])
        return {"version": JSON_VERSION, "insts": insts}

    @classmethod
    def from_json(cls, data) -> "Trace":
        """The trace `as_json` wrote, its handles placeholders that `apply_to_schedule` maps
        to the replay's. Anything malformed is a `TraceError`, never trusted."""
        if not isinstance(data, dict) or data.get("version") != JSON_VERSION or not isinstance(data.get("insts"), list):
            raise TraceError(f"not a trace of version {JSON_VERSION}: {str(data)[:80]}")
        made: dict = {}

        def value(v):
            if isinstance(v, dict):
                if set(v) != {"rv"} or v["rv"] not in made:
                    raise TraceError(f"{v!r} is not a handle an earlier instruction made")
                return made[v["rv"]]
            if isinstance(v, list):
                return [value(x) for x in v]
            return v

        trace = cls()
        for entry in data["insts"]:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                    and entry[0].isidentifier() and isinstance(entry[1], list)):
                raise TraceError(f"not an instruction: {str(entry)[:80]}")
            kind, raw_args, raw_out = entry
            args = []
            for pair in raw_args:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise TraceError(f"not an argument of {kind}: {str(pair)[:80]}")
                args.append((pair[0], value(pair[1])))

            def out(n):
                if not isinstance(n, str):
                    raise TraceError(f"not an output name of {kind}: {n!r}")
                made[n] = _Placeholder(n)
                return made[n]
            outputs = None if raw_out is None else [out(n) for n in raw_out] if isinstance(raw_out, list) \
                else out(raw_out)
            trace.append(kind, args, outputs)
        return trace

    def as_python(self) -> list:
        names: dict = {}
        counter = [0]

        def name_of(rv) -> str:
            key = id(rv)
            if key not in names:
                names[key] = f"{_prefix(rv)}{counter[0]}"
                counter[0] += 1
            return names[key]

        def fmt(v) -> str:
            if _is_handle(v):
                return names.get(id(v)) or name_of(v)
            if isinstance(v, str):
                return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            if isinstance(v, (list, tuple)):
                return "[" + ", ".join(fmt(x) for x in v) + "]"
            if isinstance(v, dict):
                return "{" + ", ".join(f"{fmt(k)}: {fmt(x)}" for k, x in v.items()) + "}"
            if callable(v):
                try:
                    src = inspect.getsource(v).strip()
                    at = src.find("lambda")
                    if at >= 0:
                        return src[at:].rstrip(",)")
                except (OSError, TypeError):
                    pass
                return repr(v)
            return repr(v)

        lines = []
        for inst in self.insts:
            parts = []
            for k, v in inst.args:
                if k == "*":
                    parts.extend(fmt(x) for x in v)
                else:
                    parts.append(f"{k}={fmt(v)}")
            call = f"sch.{inst.kind}(" + ", ".join(parts) + ")"
            out = inst.outputs
            if isinstance(out, (list, tuple)) and out:
                names_out = ", ".join(name_of(o) for o in out)
                lines.append(names_out + ("," if len(out) == 1 else "") + " = " + call)
            elif _is_handle(out):
                lines.append(f"{name_of(out)} = {call}")
            else:
                lines.append(call)
        return lines

    def as_text(self) -> str:
        """The trace as the Python function TVM prints."""
        body = ["  " + line for line in self.as_python()] or ["  pass"]
        return "\n".join(["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"] + body)

    def show(self) -> None:
        """Print the trace as Python (as TVM's ``Trace.show`` does)."""
        print(self.as_text())

    def __str__(self) -> str:
        return "\n".join(self.as_python())


class _Placeholder:
    """A handle of a trace read from JSON: its name, and an identity the replay maps."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _is_handle(v) -> bool:
    from .sampling import ExprRV
    from .state import BlockRV, LoopRV

    return isinstance(v, (BlockRV, LoopRV, ExprRV, _Placeholder))


def _prefix(rv) -> str:
    from .state import BlockRV, LoopRV

    if isinstance(rv, _Placeholder):
        return rv.name.rstrip("0123456789") or "v"
    return "b" if isinstance(rv, BlockRV) else "l" if isinstance(rv, LoopRV) else "v"


def _is_sampling(kind: str) -> bool:
    from .sampling import is_sampling

    return is_sampling(kind)


def _bind(recorded, actual, handles: dict) -> None:
    """Map the recorded outputs of an instruction to what its replay returned."""
    if recorded is None:
        return
    if isinstance(recorded, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(recorded):
            raise TraceError(f"the replay returned {actual!r} where the trace recorded {len(recorded)} results")
        for r, a in zip(recorded, actual):
            _bind(r, a, handles)
    elif _is_handle(recorded):
        handles[id(recorded)] = actual
