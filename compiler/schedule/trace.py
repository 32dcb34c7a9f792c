"""The trace of a schedule: the primitives applied, printable as the Python that replays them.

`Trace.show()` prints what TVM's ``sch.trace.show()`` prints::

    # from tvm import s_tir
    def apply_trace(sch: s_tir.Schedule) -> None:
      b0 = sch.get_sblock(name="Y", func_name="main")
      l1, l2, l3 = sch.get_loops(block=b0)

Handles are named by kind and order of first appearance (``b`` blocks, ``l`` loops); running the
text with ``tvms.s_tir`` as ``s_tir`` replays the schedule.
"""

from __future__ import annotations

import inspect


class Instruction:
    __slots__ = ("kind", "args", "outputs")

    def __init__(self, kind: str, args: list, outputs) -> None:
        self.kind, self.args, self.outputs = kind, args, outputs

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

    def as_python(self) -> list:
        from .state import BlockRV, LoopRV

        names: dict = {}
        counter = [0]

        def name_of(rv) -> str:
            key = id(rv)
            if key not in names:
                prefix = "b" if isinstance(rv, BlockRV) else "l" if isinstance(rv, LoopRV) else "v"
                names[key] = f"{prefix}{counter[0]}"
                counter[0] += 1
            return names[key]

        def fmt(v) -> str:
            if isinstance(v, (BlockRV, LoopRV)):
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
            elif isinstance(out, (BlockRV, LoopRV)):
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
