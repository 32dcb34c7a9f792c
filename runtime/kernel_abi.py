"""The contract between the code generator and the runtime about a compiled CPU kernel.

The compiler writes to it and the runtime reads it, so it lives here, below both, and needs
nothing (no NumPy, no LLVM): the compiler's modules that only write to it stay cheap to import.

* What a kernel takes: a `ParamSpec` per parameter, and a `KernelInfo` per kernel (its name,
  exported symbol, parameters and symbolic variables), from which the runtime binds the
  machine code to a `runtime.kernel.Kernel`.
* How it reports a failed check: it calls ``tvms_assert_fail(message)`` for an assertion and
  ``tvms_bounds_fail(message, lowest, highest, size)`` for an access out of bounds
  (`ASSERT_FAIL_SYMBOL`, `BOUNDS_FAIL_SYMBOL`). The message is baked into the machine code,
  with marks for what only the run knows (`INDEX_MARK`, `SIZE_MARK`) and, after `PLACE_MARK`,
  the number of the place in the PrimFunc the check is about (`compiler.kernel_places`),
  which a `PlaceTable` the compiler hands over turns into a span.
* How many threads a parallel loop may use: the i32 the runtime provides as
  `THREADS_SYMBOL` (`runtime.cpu.num_threads`), not libgomp's ``omp_get_max_threads()``,
  which the libgomp the process shares with PyTorch lets ``torch.set_num_threads`` change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

__all__ = ["ParamSpec", "KernelInfo", "ASSERT_FAIL_SYMBOL", "BOUNDS_FAIL_SYMBOL", "THREADS_SYMBOL",
           "RELEASE_SCRATCH_SYMBOL", "SCRATCH_BUDGET_SYMBOL", "INDEX_MARK", "SIZE_MARK", "PLACE_MARK", "split_place",
           "PlaceTable"]

Dim = Union[int, str]  # a buffer dimension: a size, a symbol's name or an expression's text


@dataclass
class ParamSpec:
    """One kernel parameter. ``kind`` is ``"buffer"`` or ``"scalar"``; for buffers ``shape``
    holds ints and symbol names (or, rarely, an expression over them such as ``"(n * 2)"``),
    ``strides`` the declared strides in elements (None: C-contiguous), ``written`` whether the
    kernel stores into it."""

    kind: str
    name: str
    dtype: str
    shape: list = field(default_factory=list)
    strides: Optional[list] = None
    written: bool = False
    buffer_name: Optional[str] = None

    def describe(self) -> str:
        if self.kind == "scalar":
            return f"{self.name}: {self.dtype}"
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name}: Buffer(({dims}), {self.dtype})"


@dataclass
class KernelInfo:
    """One kernel's exported symbol and its argument description, as the code generator made
    them (`compiler.codegen_llvm`): what binds the kernel's machine code, JIT-loaded or in a
    shared library, to a `runtime.kernel.Kernel`."""

    name: str
    symbol: str
    params: list
    sym_vars: list


# ----------------------------------------------------------------------------- failed checks

ASSERT_FAIL_SYMBOL = "tvms_assert_fail"
BOUNDS_FAIL_SYMBOL = "tvms_bounds_fail"  # (message, lowest index, highest index, axis size)
THREADS_SYMBOL = "tvms_num_threads"  # i32: the most threads a parallel loop runs on
# void(void), in a module whose kernels keep scratch blocks between calls: frees them
# (`compiler.codegen_llvm.scratch`); the runtime calls it when it drops the module.
RELEASE_SCRATCH_SYMBOL = "tvms_release_scratch"
# i64 the runtime provides: bytes of scratch blocks the kernels may still keep (same module).
SCRATCH_BUDGET_SYMBOL = "tvms_scratch_budget"
INDEX_MARK = "\x01"  # replaced by the index (or the range of indices) that fell outside
SIZE_MARK = "\x02"   # replaced by the size of the axis
PLACE_MARK = "\x03"  # followed by the number of the check's place in its PrimFunc


def split_place(text: str) -> tuple:
    """(message, number or None): a kernel's failure message without its place number."""
    message, mark, number = text.partition(PLACE_MARK)
    return (message, int(number)) if mark and number.isdigit() else (text, None)


class PlaceTable:
    """The places a kernel's failures number (`PLACE_MARK`): the spans of its PrimFunc's
    accesses, in the order `compiler.kernel_places` numbers them. The compiler hands over
    ``find``, which lists them, and it runs only when a failure is placed; a table pickles as
    the list (an exported library keeps it)."""

    def __init__(self, find=None, spans: Optional[tuple] = None) -> None:
        self._find = find
        self._spans = spans

    def spans(self) -> tuple:
        if self._spans is None:
            self._spans = tuple(self._find()) if self._find is not None else ()
            self._find = None
        return self._spans

    def span(self, number: Optional[int]):
        """The span numbered ``number`` (None when there is no such one)."""
        spans = self.spans()
        return spans[number] if number is not None and 0 <= number < len(spans) else None

    def __reduce__(self):
        return (PlaceTable, (None, self.spans()))
