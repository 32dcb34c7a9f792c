"""Bounds checks in CUDA C: what `compiler.bounds_check` left to run time, on the GPU.

The checks are the CPU's (`bounds_check.instrument_bounds_checks`, run by `lower_gpu` on
global memory while the thread-bound loops are still loops, so that their ranges prove most
accesses and nothing is emitted for them). What is left takes one of three forms:

* a ``CHECK_RANGE`` hoisted above every thread loop depends only on the function's sizes: the
  host evaluates it before launching (`host_check_specs`; `cuda_spec.HostCheckSpec`), and a
  kernel pays nothing;
* a ``CHECK_RANGE`` inside a kernel is an ``if`` before the loop nest it covers: on failure the
  thread records it (``tvms_bounds_fail``) and returns;
* a ``CHECK_INDEX`` in place (a gather, a guarded access nothing proves) is
  ``tvms_check_index(index, size, site, tvms_err)``: on failure it records and gives index 0,
  so that the access stays inside its buffer (and the thread goes on: an expression cannot
  return).

Why record and return rather than trap (``__trap()``, ``assert``): a trap makes the CUDA
context unusable for the rest of the process (``CUDA_ERROR_ILLEGAL_INSTRUCTION`` is sticky), while
a recorded failure leaves the device as it was; the host raises `BoundsCheckError` with the
CPU's message after the kernel (`runtime.cuda_kernels`). The record (``tvms_err``, four int64
words: site + 1, lowest and highest index, size) keeps the first failure: threads race for
it with ``atomicCAS``. A thread that returns early is no hazard to the barriers after it: the
hardware releases a ``__syncthreads`` that only exited threads hold up.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ..bounds_check import CHECK_INDEX, CHECK_RANGE
from ..cuda_spec import HostCheckSpec
from ..kernel_params import dim_text
from .literals import ctype

__all__ = ["CheckGen", "ERRORS_PARAM", "check_helpers", "collect_messages", "has_device_checks",
           "host_check_specs"]

ERRORS_PARAM = "tvms_err"  # the kernel parameter pointing at the device's error record

_HELPERS = """\
__device__ __noinline__ void tvms_bounds_fail(long long* err, long long site, long long lowest, long long highest,
                                              long long size) {
  if (atomicCAS((unsigned long long*)err, 0ull, (unsigned long long)(site + 1)) == 0ull) {
    err[1] = lowest;
    err[2] = highest;
    err[3] = size;
  }
}
__device__ __forceinline__ long long tvms_check_index(long long index, long long size, long long site,
                                                      long long* err) {
  if ((unsigned long long)index >= (unsigned long long)size) {
    tvms_bounds_fail(err, site, index, index, size);
    return 0;
  }
  return index;
}"""


def check_helpers(code: str) -> list:
    """The lines defining the check functions, when ``code`` (the kernels) calls them."""
    return _HELPERS.splitlines() if "tvms_bounds_fail(" in code or "tvms_check_index(" in code else []


class _FindChecks(TIRVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Call(self, node) -> None:
        if node.op in (CHECK_INDEX, CHECK_RANGE):
            self.found = True
        self.generic_visit(node)


def has_device_checks(body) -> bool:
    """Whether a kernel's body checks an access at run time (it then takes `ERRORS_PARAM`)."""
    v = _FindChecks()
    v.visit(body)
    return v.found


def _site(messages: list, message: str) -> int:
    if message not in messages:
        messages.append(message)
    return messages.index(message)


class _Messages(TIRVisitor):
    def __init__(self, messages: list) -> None:
        self.messages = messages

    def visit_Call(self, node) -> None:
        if node.op in (CHECK_INDEX, CHECK_RANGE):
            _site(self.messages, node.args[-1].value)
        self.generic_visit(node)


def collect_messages(program, messages: list) -> None:
    """Number the device checks of ``program``'s kernels (after `host_check_specs`) in
    ``messages``, so that a function's sites are known before its kernels are printed."""
    v = _Messages(messages)
    for k in program.kernels:
        v.visit(k.body)


def _runs_if(condition) -> Optional[list]:
    """``condition`` (the loops' ``extent > 0`` terms `bounds_check` guards a hoisted check
    with) as the extents that must be positive; None for any other form."""
    if condition is None:
        return []
    if isinstance(condition, tir.And):
        a, b = _runs_if(condition.a), _runs_if(condition.b)
        return None if a is None or b is None else a + b
    if isinstance(condition, tir.GT) and isinstance(condition.b, tir.IntImm) and condition.b.value == 0:
        return [condition.a]
    return None


def host_check_specs(program, names: dict, messages: list) -> list:
    """The `HostCheckSpec` of each of ``program``'s host checks (`lower_gpu.HostCheck`) that
    the host can evaluate (dimension texts over ``names``); one it cannot (an index over
    something else than sizes) moves to the start of the kernel it guards, as a device check.
    A spec's ``site`` is its message's place in ``messages``."""
    specs = []
    for hc in program.host_checks:
        lo, hi, size, message = hc.check.args
        runs = _runs_if(hc.condition)
        try:
            if runs is None:
                raise NotImplementedError
            texts = [dim_text(e, names) for e in (lo, hi, size, *runs)]
        except (KeyError, NotImplementedError):
            kernel = program.kernels[hc.before]
            check = tir.Evaluate(hc.check)
            kernel.body = tir.seq([tir.IfThenElse(hc.condition, check) if hc.condition is not None else check,
                                   kernel.body])
            continue
        runs_if = _positive(texts[3:]) if texts[3:] else None
        specs.append(HostCheckSpec(hc.before, texts[0], texts[1], texts[2], _site(messages, message.value), runs_if))
    return specs


def _positive(texts: list) -> str:
    """A dimension text that is positive exactly when every one of ``texts`` is (their
    minimum)."""
    out = texts[0]
    for t in texts[1:]:
        out = f"min({out}, {t})"
    return out


class CheckGen:
    """Prints the checks (mixed into `kernel.KernelGen`); ``checks`` is the function's
    `cuda_spec.BoundsChecks`, shared by its kernels: a check records its message's number in
    the module (``first_site`` + its place in ``messages``)."""

    checks: object

    def check_site(self, message: str) -> int:
        return self.checks.first_site + _site(self.checks.messages, message)

    def check_index(self, e: tir.Call) -> str:
        index, size, message = e.args
        site = self.check_site(message.value)
        return (f"(({ctype(e.dtype)})tvms_check_index((long long)({self.expr(index)}), "
                f"(long long)({self.expr(size)}), {site}, {ERRORS_PARAM}))")

    def check_range(self, e: tir.Call) -> None:
        site = self.check_site(e.args[3].value)
        lo, hi, size = (f"(long long)({self.expr(x)})" for x in e.args[:3])
        self.line(f"if ({lo} < 0 || {hi} >= {size}) {{")
        self.line(f"  tvms_bounds_fail({ERRORS_PARAM}, {site}, {lo}, {hi}, {size});")
        self.line("  return;")
        self.line("}")
