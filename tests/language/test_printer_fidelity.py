"""The printer writes text that reads back as what was printed (issue 11's printer bugs).

Each case is a small program that parses; its printout must hold what the case names, and
round-trip as TVM's own round-trip tests check it: re-parse, structurally equal (free variables
mapped), print again identical.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.ir import structural_equal
from tvmscript.printer.tir_printer import format_string

TIR_HEADER = "# from tvm.script import tir as T\n\n"


def roundtrip(text: str) -> str:
    """The printout of ``text``, after checking that it reads back to an equal program."""
    node = tvms.parse(text)
    printed = node.script()
    again = tvms.parse(printed)
    assert structural_equal(node, again, map_free_vars=True), printed
    assert again.script() == printed
    return printed


def test_free_tir_variable_keeps_its_declaration():
    # `a` is bound nowhere in the function: its declaration is what makes the text read back.
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    a = T.int32()
    A[0] = a
''')
    assert "    a = T.int32()\n    A[0] = a\n" in printed


def test_free_variable_declared_once_and_named_apart_from_locals():
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(A: T.Buffer((4,), "int64")):
    k = T.int64()
    for i in range(4):
        A[i] = k + T.int64(1)
    for j in range(4):
        A[j] = A[j] * k
''')
    assert printed.count("k = T.int64()") == 1
    assert printed.index("k = T.int64()") < printed.index("for i")


def test_quoted_expression_dimension_prints_as_a_name():
    # A dimension written as the string "m * n" is read as one variable of that name; it must
    # not print as the assignment `m * n = T.int64()`, which is not Python.
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(a: T.handle, b: T.handle):
    m = T.int64()
    n = T.int64()
    A = T.match_buffer(a, (m, n))
    B = T.match_buffer(b, ("m * n",))
    B[0] = A[0, 0]
''')
    assert "m * n = " not in printed
    assert "m_n = T.int64()" in printed
    assert "T.match_buffer(b, (m_n,))" in printed


@pytest.mark.parametrize(
    "value, literal",
    [
        ("a\tb", r'"a\tb"'),
        ("a\rb", r'"a\rb"'),
        ("a\nb", r'"a\nb"'),
        ('say "hi"\\', r'"say \"hi\"\\"'),
        ("bell\x07esc\x1bdel\x7f", r'"bell\x07esc\x1bdel\x7f"'),
        ("ünïcode ok", '"ünïcode ok"'),
    ],
)
def test_string_literal_escapes_control_characters(value, literal):
    assert format_string(value) == literal
    assert eval(literal) == value  # noqa: S307 - a literal we just wrote


def test_tab_and_cr_in_tir_attribute_round_trip():
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    T.func_attr({"note": "a\\tb\\rc"})
    A[0] = 1
''')
    assert r'"note": "a\tb\rc"' in printed
    assert "\t" not in printed and "\r" not in printed


def test_tab_in_relax_string_round_trips():
    printed = roundtrip('''# from tvm.script import relax as R

@R.function
def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
    R.func_attr({"note": "col1\\tcol2"})
    return x
''')
    assert r'"col1\tcol2"' in printed
    assert "\t" not in printed


def test_root_block_without_inner_blocks_stays_explicit():
    # The parser adds an implicit root block only around blocks or allocations, so a root block
    # around plain statements must print as a `with`, not as the `# with T.block("root"):` comment.
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(A: T.Buffer((1,), "int32")):
    with T.block("root"):
        T.reads()
        T.writes()
        A[0] = 0
''')
    assert '    with T.block("root"):\n' in printed


def test_root_block_around_blocks_prints_as_the_comment():
    printed = roundtrip(TIR_HEADER + '''@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(0.0)
''')
    assert '    # with T.block("root"):\n' in printed


TYPEVAR_MODULE = '''
m = TypeVar("m")

@I.ir_module
class Module:
    @T.prim_func
    def double(a: T.handle, b: T.handle):
        A = T.match_buffer(a, (m,), "float32")
        B = T.match_buffer(b, (m,), "float32")
        for i in range(m):
            with T.block("B"):
                vi = T.axis.spatial(m, i)
                B[vi] = A[vi] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("m",), "float32")) -> R.Tensor(("m",), "float32"):
        cls = Module
        y = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((m,), "float32"))
        return y
'''


def test_module_level_typevar_round_trips():
    """A module-level TypeVar is printed as each function's own `m = T.int64()`: parsing gives
    each function its own variable, so printing and parsing again is the same module."""
    mod = tvms.parse(TYPEVAR_MODULE)
    text = mod.script()
    again = tvms.parse(text)
    assert tvms.ir.structural_equal(again, mod)
    assert again.script() == text
    assert mod["double"].buffer_map[mod["double"].params[0]].shape[0] is not \
        mod["main"].params[0].struct_info.shape[0]
