"""The CUDA printer's trace mode: CUDA C that reports its memory accesses and arithmetic.

Why: a kernel's speed on a GPU follows from how many memory transactions and instructions it
issues (sectors per request, shared-memory bank conflicts, FMAs, tensor-core MMAs), and those
can be counted without a GPU by running the kernel on the CPU emulator
(``tests/support/cuda_emulator.py``) with each access reported. `compiler.roofline` turns the
counts into an estimated time. Only the emulator compiles traced code: `codegen_cuda` prints it
when asked (``trace=True``), and the CUDA C compiled for GPUs never contains it.

What trace mode changes, statement for statement (the kernel computes the same values):

- every access of a global or shared buffer goes through the emulator's ``tvms_trace``, which
  records it for the running thread and returns the pointer: ``A[i]`` becomes
  ``(*tvms_trace(SITE, FLAGS, &A[i]))``, a vector access ``*(float4*)(A + b)`` becomes
  ``*tvms_trace(SITE, FLAGS, (float4*)(A + b))``; a tensor-core tile load or store passes its
  pointer through ``tvms_trace_tile(SITE, FLAGS, p, ldm, rows, cols, col_major)``;
- before each store (and each value a cross-thread reduction combines) whose value does
  floating-point arithmetic: ``tvms_ops(SITE, fma, fp32, fp16, special);``, the operations of
  one execution by kind (`op_counts`);
- each ``wmma::mma_sync`` and each ``ptx_mma`` is preceded by ``tvms_mma(SITE, m, n, k, precision)``;
- PTX's ``ldmatrix`` passes its row address through ``tvms_trace_rows(SITE, FLAGS, p, lanes)``
  (16 bytes read by each lane below ``lanes``), and ``cp.async`` its destination and source
  through ``tvms_trace`` (a shared store, a global load) or, when a predicate may turn the copy
  into a zero fill, its source through ``tvms_trace_if(SITE, FLAGS, p, predicate)`` (`ptx`).

SITE numbers the place in the kernel's text (from 0, per kernel): the emulator groups the
accesses the 32 lanes of a warp make at one site, n-th execution with n-th execution, into
one warp-level instruction. FLAGS is `GLOBAL` or `SHARED`, plus `STORE` for a write and
`NO_REUSE` for a load that is never served from registers (an ``asm volatile`` instruction, which
no compiler merges with an earlier one).

`TraceGen` is mixed into `kernel.KernelGen`; it uses ``self.line`` from there.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir

from ..lower_gpu import is_shared

GLOBAL, SHARED, STORE, NO_REUSE = 0, 1, 2, 4
# tvms_mma's precision argument, by the dtype of the A fragment.
MMA_PRECISIONS = {"float16": 0, "bfloat16": 1, "float32": 2, "int8": 3, "uint8": 3}

# Calls the GPU computes on its special function units (or with a short sequence around one).
_SPECIAL = {"tir.exp", "tir.exp2", "tir.exp10", "tir.log", "tir.log2", "tir.log10", "tir.log1p", "tir.sqrt",
            "tir.rsqrt", "tir.sin", "tir.cos", "tir.tan", "tir.tanh", "tir.sinh", "tir.cosh", "tir.asin",
            "tir.acos", "tir.atan", "tir.asinh", "tir.acosh", "tir.atanh", "tir.erf", "tir.pow", "tir.sigmoid",
            "tir.atan2", "tir.hypot"}
_FLOAT_OPS = (tir.Add, tir.Sub, tir.Mul, tir.Div, tir.Min, tir.Max, tir.FloorDiv, tir.FloorMod, tir.Mod)


class TraceGen:
    """Trace mode for a kernel being printed (mixed into `kernel.KernelGen`); everything here
    returns its input unchanged unless ``self.trace``."""

    trace = False
    _sites = 0

    def next_site(self) -> int:
        site = self._sites
        self._sites += 1
        return site

    def traced(self, lvalue: str, space: Optional[int], store: bool = False) -> str:
        """``lvalue`` (``A[i]``) read or written through ``tvms_trace``, for a global or shared
        buffer (``space``); as is for a thread's own memory (``space`` None)."""
        if not self.trace or space is None:
            return lvalue
        return f"(*tvms_trace({self.next_site()}, {space | (STORE if store else 0)}, &{lvalue}))"

    def traced_pointer(self, pointer: str, space: Optional[int], store: bool = False) -> str:
        """A vector access's pointer (``(float4*)(A + b)``) passed through ``tvms_trace``."""
        if not self.trace or space is None:
            return pointer
        return f"tvms_trace({self.next_site()}, {space | (STORE if store else 0)}, {pointer})"

    def traced_tile(self, pointer: str, space: Optional[int], ldm: str, rows: int, cols: int, col_major: bool,
                    store: bool) -> str:
        """A tensor-core tile's pointer passed through ``tvms_trace_tile``, which records the
        ``rows`` x ``cols`` tile at leading dimension ``ldm``."""
        if not self.trace or space is None:
            return pointer
        flags = space | (STORE if store else 0)
        return f"tvms_trace_tile({self.next_site()}, {flags}, {pointer}, {ldm}, {rows}, {cols}, {int(col_major)})"

    def buffer_space(self, buf: tir.Buffer) -> Optional[int]:
        """`GLOBAL` or `SHARED` for a buffer the trace records, None for a thread's own memory
        (local arrays, registers, tensor-core fragments)."""
        if is_shared(buf):
            return SHARED
        return GLOBAL if buf.scope == "global" else None

    def data_space(self, data) -> Optional[int]:
        """The memory space of the buffer whose data variable is ``data`` (a pointer's target)."""
        if data in self.shared_data:
            return SHARED
        if data in self.fragments or data in self.local_data:
            return None
        return GLOBAL

    def count_ops(self, *values) -> None:
        """``tvms_ops(...)`` before a statement computing ``values``, when they do floating-point
        arithmetic."""
        if not self.trace:
            return
        total = [0, 0, 0, 0]
        for v in values:
            for i, n in enumerate(op_counts(v)):
                total[i] += n
        self.count_raw(*total)

    def count_raw(self, fma: int, fp32: int, fp16: int, special: int) -> None:
        if self.trace and (fma or fp32 or fp16 or special):
            self.line(f"tvms_ops({self.next_site()}, {fma}, {fp32}, {fp16}, {special});")

    def traced_mma(self, call: str, shape: tuple, dtype: str) -> str:
        """``call`` (a warp's ``mma_sync`` or ``mma.sync`` helper) preceded by ``tvms_mma``, in one
        expression: the shape (m, n, k) and the input dtype give the tensor-core FLOPs."""
        if not self.trace:
            return call
        m, n, k = shape
        return f"(tvms_mma({self.next_site()}, {m}, {n}, {k}, {MMA_PRECISIONS.get(dtype, 0)}), {call})"


def op_counts(e) -> tuple:
    """(FMAs, other fp32 operations, fp16/bf16 operations, special functions) one evaluation of
    ``e`` does, as the GPU would execute it: a float multiply feeding an add or subtract is one
    FMA (nvcc contracts them); each other float add, subtract, multiply, divide, min or max is
    one operation of its dtype's kind (float64 counts as fp32); exponentials, logarithms, roots
    and trigonometry are special functions. Index arithmetic and comparisons are not counted."""
    out = [0, 0, 0, 0]
    _walk(e, out)
    return tuple(out)


def _walk(e, out: list) -> None:
    if isinstance(e, (tir.Add, tir.Sub)) and tir.is_float(e.dtype):
        for mul, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(mul, tir.Mul) and mul.dtype == e.dtype:
                out[0] += 1
                for x in (mul.a, mul.b, other):
                    _walk(x, out)
                return
    if isinstance(e, _FLOAT_OPS) and tir.is_float(e.dtype):
        out[2 if e.dtype in ("float16", "bfloat16") else 1] += 1
    elif isinstance(e, tir.Call) and e.op in _SPECIAL and tir.is_float(e.dtype):
        out[3] += 1
    elif isinstance(e, tir.BufferLoad):
        return  # its indices are integer arithmetic
    for child in _children(e):
        _walk(child, out)


def _children(e) -> list:
    if isinstance(e, tir.Call):
        return list(e.args)
    if isinstance(e, tir.Select):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, tir.Cast):
        return [e.value]
    if isinstance(e, tir.Let):
        return [e.value, e.body]
    if isinstance(e, tir.Not):
        return [e.a]
    return [x for x in (getattr(e, "a", None), getattr(e, "b", None)) if x is not None]
