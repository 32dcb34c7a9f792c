"""tvmscript/ir/arith: bounds, the canonical simplifier and range evaluation.

The expected forms are what TVM 0.27's ``Analyzer.simplify`` printed for the same expressions
with the same variable ranges (i in [0, 32), j in [0, 4), k in [0, 8), f in [0, 128), n free)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tvmscript import tir
from tvmscript.ir.arith import Analyzer, const_int_bound, eval_range, simplify
from tvmscript.ir.mutator import substitute
from tvmscript.printer.tir_printer import TIRPrinter

I32 = "int32"


def expr_text(e) -> str:
    return TIRPrinter().expr(e)


def _var(name):
    return tir.Var(I32, name)


i, j, k, f, n = (_var(x) for x in "ijkfn")
RANGES = {i: (0, 32), j: (0, 4), k: (0, 8), f: (0, 128)}

CASES = [
    (lambda: j + i * 4, "i * 4 + j"),
    (lambda: k + j * 8 + i * 32, "i * 32 + j * 8 + k"),
    (lambda: (f // 4) * 4 + f % 4, "f"),
    (lambda: (i * 4 + j) // 4, "i"),
    (lambda: (i * 4 + j) % 4, "j"),
    (lambda: (i * 32 + k) // 8, "i * 4"),
    (lambda: (i * 8 + k) // 128, "i // 16"),
    (lambda: (i * 8 + k) % 128, "i % 16 * 8 + k"),
    (lambda: 3 + i, "i + 3"),
    (lambda: i - j * 2, "i - j * 2"),
    (lambda: (f // 4) // 8, "f // 32"),
    (lambda: (f % 32) // 4, "f % 32 // 4"),
    (lambda: (i * 4 + j) * 8 + k, "i * 32 + j * 8 + k"),
    (lambda: f // 32 * 32 + f % 32 // 4 * 4 + f % 4, "f"),
    (lambda: i + j + i, "i * 2 + j"),
    (lambda: j + i, "j + i"),
    (lambda: i + n * 4, "n * 4 + i"),
    (lambda: (n + 3) // 4, "(n + 3) // 4"),
    (lambda: (i * 4 + j) // 2, "i * 2 + j // 2"),
    (lambda: 1 - i, "1 - i"),
    (lambda: (f % 32) // 4 * 4 + f % 4, "f % 32"),
    (lambda: (i * 4 + j + 1) // 4, "(j + 1) // 4 + i"),
    (lambda: i * 4 + j < 100, "i < 25"),
    (lambda: i * 4 + j < 128, "T.bool(True)"),
    (lambda: (n * 4 + j) // 4, "n"),
    (lambda: (i * 4 + j) // 3, "(i * 4 + j) // 3"),
    # the order of a sum's constant and subtracted terms (TVM's canonical_simplify, n free)
    (lambda: n - f + 2, "n + 2 - f"),
    (lambda: n - f * 2 - k, "n - k - f * 2"),
    (lambda: 0 - n - 1, "0 - n - 1"),
    (lambda: 5 - n * 2 - f, "5 - f - n * 2"),
]

def _min(a, b):
    return tir.Min(I32, a, tir.IntImm(I32, b))


def _max(a, b):
    return tir.Max(I32, a, tir.IntImm(I32, b))


# TVM's rewrite rules between two canonical forms (`arith.rewrite.tvm_simplify`), n free: what
# TVM 0.27's canonical_simplify(rewrite_simplify(canonical_simplify(e))) printed for each.
REWRITE_CASES = [
    (lambda: _min(n + 1, 7) - n + 2, "T.min(1, 7 - n) + 2"),
    (lambda: _min(n, 7) - n, "T.min(0, 7 - n)"),
    (lambda: _min(n * 2 + 1, 7) - _max(0 - n * 2, 0) + 1, "T.min(n, 0) * 2 + T.min(n * 2 + 1, 7) + 1"),
    (lambda: _max(2 - n * 2, 0), "T.max(1 - n, 0) * 2"),
    (lambda: _min(n * 2, 8) - n * 2 + 2, "T.min(0, 4 - n) * 2 + 2"),
    (lambda: tir.Div(I32, 4 - n * 2, tir.IntImm(I32, 2)), "2 - n"),
    (lambda: _min(n * 2 + 1, 7) - _max(1 - n * 2, 0) - n * 2, "T.min(n * 2 + 1, 7) - T.max(1 - n * 2, 0) - n * 2"),
]


@pytest.mark.parametrize("make,expected", REWRITE_CASES, ids=[c[1] for c in REWRITE_CASES])
def test_rewrite_rules_like_tvm(make, expected):
    from tvmscript.ir.arith.rewrite import tvm_simplify

    assert expr_text(tvm_simplify(make())) == expected


@pytest.mark.parametrize("make,expected", CASES, ids=[c[1] for c in CASES])
def test_simplify_like_tvm(make, expected):
    assert expr_text(simplify(make(), RANGES)) == expected


def test_fused_iterators_stay_whole_in_bindings():
    f0, f1 = _var("f0"), _var("f1")
    ranges = {f0: (0, 64), f1: (0, 256)}
    fused = f0 * 256 + f1
    assert expr_text(simplify(fused // 128, ranges, keep_marks=True)) == "(f0 * 256 + f1) // 128"
    assert expr_text(simplify(fused % 128, ranges, keep_marks=True)) == "(f0 * 256 + f1) % 128"
    # even cut on a boundary of its parts (TVM: fuse then split by the inner extent)
    assert expr_text(simplify(fused // 256, ranges, keep_marks=True)) == "(f0 * 256 + f1) // 256"
    assert expr_text(simplify(fused // 128, ranges)) == "f0 * 2 + f1 // 128"


def test_const_int_bound():
    assert const_int_bound(i * 4 + j, RANGES) == (0, 127)
    assert const_int_bound((i * 4 + j) // 3, RANGES) == (0, 42)
    assert const_int_bound(f % 7, RANGES) == (0, 6)
    lo, hi = const_int_bound(n + 1, RANGES)
    assert lo == float("-inf") and hi == float("inf")


def test_const_int_bound_of_bitwise_operations():
    """A swizzle's XOR of non-negative values sets no bit above the larger's highest (so its
    index arithmetic narrows to int32); an AND is at most either operand."""
    def call(op, a, b):
        return tir.Call(I32, f"tir.bitwise_{op}", [a, b])

    assert const_int_bound(call("xor", j, k), RANGES) == (0, 7)          # j < 4, k < 8
    assert const_int_bound(call("or", f, j), RANGES) == (0, 127)
    assert const_int_bound(call("and", f, k), RANGES) == (0, 7)
    lo, hi = const_int_bound(call("xor", n, j), RANGES)                 # n unbounded
    assert lo == float("-inf") and hi == float("inf")
    lo, hi = const_int_bound(call("xor", i - 1, j), RANGES)             # may be negative
    assert lo == float("-inf") and hi == float("inf")


def test_eval_range_of_tiles():
    ax = _var("ax")
    dom = {ax: tir.Range(tir.IntImm(I32, 0), tir.IntImm(I32, 8))}
    lo, ext = eval_range(i * 8 + ax, dom, RANGES)
    assert (expr_text(lo), expr_text(ext)) == ("i * 8", "8")
    lo, ext = eval_range((i * 8 + ax) // 4, dom, RANGES)
    assert (expr_text(lo), expr_text(ext)) == ("i * 2", "2")
    lo, ext = eval_range(31 - ax, dom, RANGES)
    assert (expr_text(lo), expr_text(ext)) == ("24", "8")


def test_analyzer_can_prove():
    a = Analyzer()
    a.bind(i, tir.Range(tir.IntImm(I32, 0), tir.IntImm(I32, 32)))
    assert a.can_prove(i < 32)
    assert not a.can_prove(i < 31)
    assert a.can_prove_equal((i * 4 + 3) // 4, i)


_ints = st.integers(min_value=-3, max_value=9)


@st.composite
def _exprs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([i, j, k, f])) if draw(st.booleans()) else tir.IntImm(I32, draw(_ints))
    a, b = draw(_exprs(depth - 1)), draw(_exprs(depth - 1))
    op = draw(st.sampled_from(["+", "-", "*c", "//", "%"]))
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    c = draw(st.integers(min_value=1, max_value=9))
    return {"*c": a * c, "//": a // c, "%": a % c}[op]


def _eval(e, env):
    e = substitute(e, {v: tir.IntImm(I32, x) for v, x in env.items()})
    out = simplify(e)
    assert isinstance(out, tir.IntImm), expr_text(out)
    return out.value


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_exprs(), st.integers(0, 31), st.integers(0, 3), st.integers(0, 7), st.integers(0, 127))
def test_simplify_keeps_the_value(e, vi, vj, vk, vf):
    """Simplified or not, an expression evaluates to the same number at every point of the
    ranges (floor division and modulo, as TIR defines them)."""
    env = {i: vi, j: vj, k: vk, f: vf}
    for keep in (False, True):
        assert _eval(simplify(e, RANGES, keep_marks=keep), env) == _eval(e, env)


def test_integer_bitwise_operations_of_constants_fold():
    """A swizzle's XOR (`compiler.lower_gpu.permuted_layout`) at known indices is a constant,
    and XOR or OR with 0 is the other operand; AND with 0 is not the operand."""
    def call(op, a, b):
        return tir.Call(I32, f"tir.bitwise_{op}", [a, b])

    c = lambda v: tir.IntImm(I32, v)  # noqa: E731
    assert expr_text(simplify(call("xor", c(6), c(3)))) == "5"
    assert expr_text(simplify(call("and", c(6), c(3)))) == "2"
    assert expr_text(simplify(call("or", c(6), c(3)))) == "7"
    assert expr_text(simplify(call("xor", i // 2, c(0)))) == "i // 2"
    assert expr_text(simplify(call("or", c(0), j))) == "j"
    assert expr_text(simplify(call("and", i, c(0)))) != "i"
    assert expr_text(simplify(call("xor", (i * 8 + k) // 8, j), RANGES)) == "T.bitwise_xor(i, j)"
