"""What the importers share: their errors and how they report progress.

An importer never produces a module it is unsure of: an operator it has no translation for
is an `UnsupportedOpError` naming the operator and the graph node, raised before anything is
returned; an importer that can check the whole graph first raises `UnsupportedOpsError`,
listing every such operator with the nodes using it. Other problems with the model (a shape
the importer cannot follow, a missing input shape) are `FrontendError`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


class FrontendError(ValueError):
    """The model cannot be imported; the message says which node and why."""


class UnsupportedOpError(FrontendError):
    """An operator the importer has no translation for.

    ``op`` is the framework's name for it (``aten.grid_sampler_2d.default``, ONNX ``NonZero``),
    ``node`` the graph node that uses it (the FX node name, the ONNX node name or its index),
    ``source`` the user's line that made the node (``model.py:12: y = torch.cumprod(x, 0)``)
    where the framework recorded it.
    """

    def __init__(self, op: str, node: str, framework: str, detail: str = "", source: str = "") -> None:
        self.op = op
        self.node = node
        self.framework = framework
        self.source = source
        message = f"unsupported {framework} operator {op!r} at node {node!r}"
        message += f": {detail}" if detail else ""
        super().__init__(message + (f"\n  at {source}" if source else ""))


@dataclass(frozen=True)
class OpUse:
    """One graph node calling an operator: its name, and the user's source line that made it
    (``model.py:12: y = torch.cumprod(x, 0)``; empty where the framework recorded none)."""

    node: str
    source: str = ""

    def __str__(self) -> str:
        return f"{self.node!r}" + (f" at {self.source}" if self.source else "")


class UnsupportedOpsError(UnsupportedOpError):
    """Every operator of a graph that the importer has no translation for, found before any of
    the graph is converted, so that one attempt tells the user all that is missing.

    ``missing`` maps each operator's name to the nodes that use it, in graph order; ``op`` and
    ``node`` are the first of them (an `UnsupportedOpError`'s fields)."""

    # Nodes listed per operator; a model may call one operator hundreds of times.
    SHOWN_USES = 3

    def __init__(self, framework: str, missing: dict) -> None:
        self.missing = {op: list(uses) for op, uses in missing.items()}
        op, uses = next(iter(self.missing.items()))
        FrontendError.__init__(self, self._message(framework))
        self.op, self.node, self.framework, self.source = op, uses[0].node, framework, uses[0].source

    def _message(self, framework: str) -> str:
        count = len(self.missing)
        lines = [f"{count} {framework} operator{'s' if count != 1 else ''} "
                 f"{'have' if count != 1 else 'has'} no translation in tvms (nothing was imported):"]
        for op, uses in self.missing.items():
            lines.append(f"  {op}, used by {len(uses)} node{'s' if len(uses) != 1 else ''}:")
            lines.extend(f"    {use}" for use in uses[:self.SHOWN_USES])
            if len(uses) > self.SHOWN_USES:
                lines.append(f"    and {len(uses) - self.SHOWN_USES} more")
        return "\n".join(lines)


# ``progress(done, total)``: called by an importer as it converts nodes, so the CLI can draw a
# progress bar for big models. ``total`` is the number of nodes to convert.
ProgressCallback = Optional[Callable[[int, int], None]]


def report_progress(progress: ProgressCallback, done: int, total: int) -> None:
    """Call `progress` every few nodes (and on the last), never more than ~100 times."""
    if progress is not None and (done == total or done % max(1, total // 100) == 0):
        progress(done, total)
