"""The per-op test harness: build a one-op Relax function, legalize it, check the printed module
parses back, check the legalized PrimFuncs' analyzed fusion pattern is the op table's, compile
for the CPU, run, and compare with a NumPy reference; then the same on a GPU: NVRTC compiles
the default GPU schedules' CUDA C for sm_80 and sm_90, and ``main`` runs through the VM on GPU 0
against the same reference.

The GPU is the CUDA emulator (`gpu_drivers.EmulatedDriver`) unless pytest is given
``--op-gpu real`` (a GPU through pycuda: ``test_cuda_gpu.py::test_every_op_on_the_gpu`` runs
the op tests so under ``pytest -m cuda``) or ``--op-gpu none`` (compile only).

    check_op(relax.op.add, [a, b], np.add(a, b))
    check_op(relax.op.sum, [x], x.sum(axis=1, keepdims=True), axis=[1], keepdims=True)

Array arguments become function parameters (``x0``, ``x1``...); anything else (shapes, lists,
Python numbers, relax expressions) is passed to the op as it is. ``expected`` is an array, or a
list of arrays for ops returning a tuple.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.ir.op import find_op
from tvmscript.compiler.transform import LegalizeOps, analyze_op_pattern
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir.tir_visitor import TIRVisitor

from .cuda_check import assert_compiles_for_cuda
from .gpu_drivers import EmulatedDriver, install_driver

OP_GPUS = ("emulated", "real", "none")
op_gpu = "emulated"   # conftest sets it from --op-gpu

PATTERN_KINDS = {"elementwise": 0, "broadcast": 1, "injective": 2, "reduce": 3, "out_ewise_fusable": 4,
                 "opaque": 8}


def build_op_module(op_fn, args, **attrs):
    """(module, arrays): ``main`` with one parameter per array in ``args`` returning the op's call."""
    params, call_args, arrays = [], [], []
    for a in args:
        if isinstance(a, np.ndarray):
            v = relax.Var(f"x{len(params)}", relax.TensorStructInfo(list(a.shape), str(a.dtype)))
            params.append(v)
            call_args.append(v)
            arrays.append(a)
        else:
            call_args.append(a)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op_fn(*call_args, **attrs))
        bb.emit_func_output(out)
    return bb.get(), arrays


def op_names_of(mod) -> list:
    """The ops ``main`` calls, in order: one, or several for a helper that builds several calls
    (``relax.op.linear``: permute_dims, matmul, add)."""
    (block,) = mod["main"].body.blocks
    return [b.value.op.name for b in block.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.Op)]


def op_name_of(mod) -> str:
    return op_names_of(mod)[-1]


def _allowed_kinds(pattern: str) -> set:
    declared = PATTERN_KINDS[pattern]
    # A broadcast op whose operands all have the output's shape broadcasts nothing: its loads
    # are indexed like its store, so the analysis (TVM's too) finds it elementwise.
    return {declared, PATTERN_KINDS["elementwise"]} if pattern == "broadcast" else {declared}


class _Reads(TIRVisitor):
    """What of the analysis's rules a legalized function's code triggers."""

    def __init__(self):
        self.through_an_index = self.reduces = self.at_a_constant = False

    def _indices(self, node):
        nested = _Reads()
        for index in node.indices:
            nested.visit(index)
            self.at_a_constant |= isinstance(index, tir.IntImm)
        self.through_an_index |= nested.loads

    def visit_BufferLoad(self, node):
        self.loads = True
        self._indices(node)
        self.generic_visit(node)

    def visit_BufferStore(self, node):
        self._indices(node)
        self.generic_visit(node)

    def visit_Block(self, node):
        self.reduces |= any(iv.kind == "R" for iv in node.iter_vars)
        self.generic_visit(node)

    loads = False


def _analysis_explains(func, declared: int, got: int) -> bool:
    """Whether TVM's analysis (which tvms follows) gives the legalized op ``got`` instead of its
    table's ``declared`` by one of its stated rules: a read through an index (take, gather,
    scatter) is none of elementwise/broadcast/injective, so kOpaque; a reduction over no axes is
    a copy; a multiply-add with an operand not reused (a matrix-vector product) is comm-reduce;
    a read at a constant index of a non-unit dimension is injective, not broadcast."""
    reads = _Reads()
    reads.visit(func.body)
    k = PATTERN_KINDS
    return ((got == k["opaque"] and reads.through_an_index)
            or (got == k["elementwise"] and declared in (k["reduce"], k["out_ewise_fusable"]) and not reads.reduces)
            or (got == k["reduce"] and declared == k["out_ewise_fusable"])
            or (got == k["injective"] and declared == k["broadcast"] and reads.at_a_constant))


def legalize_checked(mod, pattern: str | None = None):
    """LegalizeOps, checking no high-level op is left and the patterns agree with the op table
    (or with ``pattern``, for an op whose attributes change its kernel's kind: nll_loss's
    reduction="none" is a plain indexed load, "sum" a reduction). With several ops, each kernel
    must have the pattern of one of them."""
    names = op_names_of(mod)
    out = LegalizeOps()(mod)
    text = out.script()
    for name in names:
        assert "R." + name[len("relax."):] + "(" not in text, f"{name} was not legalized:\n{text}"
    patterns = [pattern] if pattern else [find_op(name).pattern for name in names]
    allowed = set().union(*(_allowed_kinds(p) for p in patterns))
    if len(patterns) > 1:  # a helper's injective step may be a plain copy (a 1-D permute_dims)
        allowed.add(PATTERN_KINDS["elementwise"])
    for gv, f in out.functions.items():
        if isinstance(f, tir.PrimFunc):
            # A function legalization tagged itself (a scan, opaque to fusion) keeps its tag,
            # as AnnotateTIROpPattern keeps it.
            got = f.attrs.get("op_pattern", analyze_op_pattern(f))
            assert got in allowed or any(_analysis_explains(f, PATTERN_KINDS[p], got) for p in patterns), (
                f"{names}: the op table says {patterns}, the legalized {gv.name_hint} analyzes as {got}")
    return out


def run(mod, arrays):
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return _numpy(vm["main"](*arrays))


def run_on_gpu(mod, arrays):
    """``main`` of the legalized ``mod`` on GPU 0 (emulated unless ``op_gpu`` is "real"),
    after the default GPU schedules: NumPy results, as `run` gives."""
    with pytest.MonkeyPatch.context() as mp:
        if op_gpu == "emulated":
            install_driver(mp, EmulatedDriver())
        dev = tvms.cuda(0)
        vm = relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
        return _numpy(vm["main"](*[tvms.nd.array(a, dev) for a in arrays]))


def _numpy(res):
    if isinstance(res, (list, tuple)):
        return [r.numpy() for r in res]
    return res.numpy()


def check_op(op_fn, args, expected, rtol: float = 1e-5, atol: float = 1e-6, *, expect_pattern: str | None = None,
             **attrs):
    """Build, round-trip through the text, legalize, run and compare; returns the legalized module.
    ``expect_pattern`` replaces the op table's fusion pattern in the check (see `legalize_checked`)."""
    mod, arrays = build_op_module(op_fn, args, **attrs)
    text = mod.script()
    again = tvms.parse(text)
    assert again.script() == text, "the op call does not print back the same"
    tvms.ir.assert_structural_equal(again["main"], mod["main"])
    legal = legalize_checked(again, expect_pattern)
    assert_compiles_for_cuda(legal)
    _compare_all(run(legal, arrays), expected, rtol, atol, "CPU")
    if op_gpu != "none":
        _compare_all(run_on_gpu(legal, arrays), expected, rtol, atol, f"GPU ({op_gpu})")
    return legal


def _compare_all(got, expected, rtol, atol, where: str) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: {len(got)} results"
        for g, e in zip(got, expected):
            _compare(g, np.asarray(e), rtol, atol, where)
    else:
        _compare(got, np.asarray(expected), rtol, atol, where)


def _compare(got, expected, rtol, atol, where: str = "CPU") -> None:
    assert got.shape == expected.shape, f"{where}: shape {got.shape} vs NumPy's {expected.shape}"
    assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype} vs NumPy's {expected.dtype}"
    if expected.dtype == bool or np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(got, expected, err_msg=where)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=where)


def assert_located(src: str, message: str, at: str, line: int = 3):
    """Parsing ``src`` fails with ``message``, located at the first occurrence of ``at`` on
    ``line`` (1-based) of ``src``; returns the error."""
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    err = info.value
    assert message in err.message, err.message
    text = src.split("\n")[line - 1]
    assert (err.span.line, err.span.col) == (line, text.index(at) + 1), (err.message, err.span)
    return err
