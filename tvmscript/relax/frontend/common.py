"""What the importers share: their errors and how they report progress.

An importer never produces a module it is unsure of: an operator it has no translation for
is an `UnsupportedOpError` naming the operator and the graph node, raised before anything is
returned. Other problems with the model (a shape the importer cannot follow, a missing input
shape) are `FrontendError`s.
"""

from __future__ import annotations

from typing import Callable, Optional


class FrontendError(ValueError):
    """The model cannot be imported; the message says which node and why."""


class UnsupportedOpError(FrontendError):
    """An operator the importer has no translation for.

    ``op`` is the framework's name for it (``aten.grid_sampler_2d.default``, ONNX ``NonZero``),
    ``node`` the graph node that uses it (the FX node name, the ONNX node name or its index).
    """

    def __init__(self, op: str, node: str, framework: str, detail: str = "") -> None:
        self.op = op
        self.node = node
        self.framework = framework
        message = f"unsupported {framework} operator {op!r} at node {node!r}"
        super().__init__(message + (f": {detail}" if detail else ""))


# ``progress(done, total)``: called by an importer as it converts nodes, so the CLI can draw a
# progress bar for big models. ``total`` is the number of nodes to convert.
ProgressCallback = Optional[Callable[[int, int], None]]


def report_progress(progress: ProgressCallback, done: int, total: int) -> None:
    """Call `progress` every few nodes (and on the last), never more than ~100 times."""
    if progress is not None and (done == total or done % max(1, total // 100) == 0):
        progress(done, total)
