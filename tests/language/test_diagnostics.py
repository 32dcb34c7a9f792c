"""Diagnostics: every mistake a user can make is a located `TVMScriptError`, never a traceback.

Each test writes a small bad program and checks the error's message, its exact line and column,
and that ``err.render(source)`` shows the source line with the caret run under the right text.
The fuzz test at the end mutates every sample a few hundred ways and requires each mutant to
parse or to fail with a `TVMScriptError`.
"""

from __future__ import annotations

import pathlib
import random
import re

import pytest

import tvmscript
from tvmscript.api import load, parse
from tvmscript.diagnostics import Span, TVMScriptError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.tvms"))


# ----------------------------------------------------------------------------- helpers


def diagnose(source: str, message: str, line: int, col: int, underlined: str | None = None, filename="<string>"):
    """Parse ``source``, expecting a TVMScriptError whose message contains ``message``, located
    at ``line``:``col``, whose rendering underlines exactly ``underlined`` (default: one char)."""
    with pytest.raises(TVMScriptError) as info:
        parse(source, filename)
    err = info.value
    assert message in err.message, err.message
    assert err.span is not None
    assert (err.span.line, err.span.col) == (line, col), f"{err.message} at {err.span}"
    assert err.span.filename == filename
    check_render(err, source, underlined)
    return err


def check_render(err: TVMScriptError, source: str, underlined: str | None) -> None:
    """The rendering: headline, ``--> file:line:col``, the source line, carets under the span."""
    text = err.render(source)
    assert "Traceback" not in text
    lines = text.split("\n")
    assert lines[0] == f"error: {err.message}"
    line, col = err.span.line, err.span.col
    assert lines[1].endswith(f"--> {err.span.filename}:{line}:{col}")
    prefix = f"{line} | "
    idx = next(i for i, text_line in enumerate(lines) if text_line.startswith(prefix))
    shown = lines[idx][len(prefix):]
    expanded = source.split("\n")[line - 1].expandtabs(4)
    caret = lines[idx + 1]
    assert caret.startswith(" " * len(str(line)) + " | ")
    marks = caret[len(prefix):]
    start = len(marks) - len(marks.lstrip(" "))
    width = len(marks.strip())
    assert width >= 1 and marks.strip() == "^" * width
    if shown == expanded:  # a short line is shown whole, the caret exactly under the column
        assert start == len(source.split("\n")[line - 1][: col - 1].expandtabs(4))
    else:  # a long one as a window around the span
        assert "..." in shown
    if underlined is not None:
        assert shown[start:start + width] == underlined, (shown[start:start + width], underlined)


TIR = '''\
@T.prim_func
def copy(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
'''

MODULE = '''\
@I.ir_module
class Module:
    @T.prim_func
    def add_one(A: T.Buffer((1, 10), "float32"), B: T.Buffer((1, 10), "float32")):
        for i, j in T.grid(1, 10):
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @R.function
    def main(x: R.Tensor((1, 10), "float32"), y: R.Tensor((1, 10), "float32")) -> R.Tensor((1, 10), "float32"):
        cls = Module
        with R.dataflow():
            lv = R.add(x, y)
            lv1 = R.call_tir(cls.add_one, (lv,), out_sinfo=R.Tensor((1, 10), "float32"))
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
'''


def replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def relax_fn(body: str, params: str = 'x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")') -> str:
    lines = "\n".join("    " + line for line in body.split("\n"))
    return f"@R.function\ndef main({params}):\n{lines}\n"


def test_templates_parse():
    parse(TIR)
    parse(MODULE)


# ----------------------------------------------------------------------------- syntax


def test_syntax_error_missing_colon():
    src = replace(TIR, "T.grid(4, 4):", "T.grid(4, 4)")
    diagnose(src, "expected ':'", 3, 29)


def test_syntax_error_unclosed_paren_at_end_of_file():
    src = replace(TIR, "= A[vi, vj]\n", "= (A[vi, vj]\n")
    err = diagnose(src, "'(' was never closed", 6, 25, "(")
    assert any("')'" in n for n in err.notes)


def test_syntax_error_unclosed_paren_before_next_statement():
    src = replace(TIR, "            vi, vj = T.axis.remap(\"SS\", [i, j])",
                  "            vi, vj = T.axis.remap(\"SS\", [i, j]")
    diagnose(src, "'(' was never closed", 5, 34, "(")


def test_syntax_error_mismatched_bracket():
    src = replace(TIR, "B[vi, vj] =", "B[vi, vj) =")
    diagnose(src, "closing ')' does not match the opening '['", 6, 21, ")")


def test_syntax_error_stray_token():
    src = replace(TIR, "B[vi, vj] = A", "B[vi, vj] = = A")
    diagnose(src, "unexpected '='; expected an expression", 6, 25, "=")


def test_syntax_error_stray_closing_paren():
    src = replace(TIR, "= A[vi, vj]\n", "= A[vi, vj])\n")
    diagnose(src, "unexpected ')'", 6, 34, ")")


def test_syntax_error_missing_comma_in_call():
    src = replace(TIR, "T.grid(4, 4)", "T.grid(4 4)")
    diagnose(src, "is a comma missing?", 3, 26, "4")


def test_unexpected_indent():
    src = replace(TIR, "            B[vi, vj]", "                B[vi, vj]")
    diagnose(src, "unexpected indent", 6, 17, "B")


def test_unindent_mismatch():
    src = replace(TIR, "            B[vi, vj]", "          B[vi, vj]")
    err = diagnose(src, "unindent does not match any outer indentation level", 6, 11, "B")
    assert "0, 4, 8, 12" in err.notes[0]


def test_tab_space_mix():
    # A tab then four spaces is 12 columns at tab size 8, like the 12 spaces above it, but only
    # because of the tab size: Python rejects it, and so does TVMScript.
    src = replace(TIR, "            B[vi, vj]", "\t    B[vi, vj]")
    diagnose(src, "inconsistent use of tabs and spaces in indentation", 6, 1, "        ")


def test_unterminated_string():
    src = replace(TIR, 'T.block("copy")', 'T.block("copy)')
    diagnose(src, "unterminated string literal", 4, 22, '"copy):')


def test_unterminated_triple_quoted_string():
    src = TIR + '"""never closed\n'
    diagnose(src, "unterminated triple-quoted string literal", 7, 1, '"""never closed')


def test_invalid_character():
    src = replace(TIR, "= A[vi, vj]", "= A[vi, vj] $")
    diagnose(src, "invalid character '$'", 6, 35, "$")


def test_mixed_bytes_and_str_literals():
    src = replace(TIR, 'T.block("copy")', 'T.block("co" b"py")')
    diagnose(src, "cannot mix bytes and str literals", 4, 22, '"co" b"py"')


# ----------------------------------------------------------------------------- names and calls


def test_undefined_name_tir_buffer():
    src = replace(TIR, "= A[vi, vj]", "= C[vi, vj]")
    diagnose(src, "undefined name 'C'", 6, 25, "C")


def test_undefined_name_tir_variable():
    src = replace(TIR, "= A[vi, vj]", "= A[vi, vk]")
    diagnose(src, "undefined name 'vk'", 6, 31, "vk")


def test_undefined_name_relax():
    src = replace(MODULE, "R.nn.relu(lv1)", "R.nn.relu(lv9)")
    diagnose(src, "undefined name 'lv9'", 16, 28, "lv9")


def test_undefined_name_suggests_a_close_one():
    src = relax_fn("lv = R.add(x, wieght)\nreturn lv", 'x: R.Tensor((2, 3), "float32"), weight: R.Tensor((2, 3), "float32")')
    err = diagnose(src, "undefined name 'wieght'", 3, 19, "wieght")
    assert err.notes == ["did you mean 'weight'?"]


def test_unknown_tir_function():
    src = replace(TIR, "= A[vi, vj]", "= T.exq(A[vi, vj])")
    err = diagnose(src, "unknown function 'T.exq'", 6, 25, "T.exq")
    assert err.notes == ["did you mean 'T.exp'?"]


def test_unknown_relax_function():
    src = replace(MODULE, "R.nn.relu(lv1)", "R.nn.rellu(lv1)")
    err = diagnose(src, "unknown Relax function 'R.nn.rellu'", 16, 18, "R.nn.rellu")
    assert err.notes == ["did you mean 'R.nn.relu'?"]


def test_axis_remap_with_three_arguments():
    src = replace(TIR, 'T.axis.remap("SS", [i, j])', 'T.axis.remap("SS", [i, j], j)')
    diagnose(src, "T.axis.remap() takes 2 positional arguments", 5, 49, "j")


def test_unknown_keyword_argument():
    src = relax_fn("lv = R.permute_dims(x, foo=1)\nreturn lv")
    diagnose(src, "R.permute_dims() got an unexpected keyword argument 'foo'", 3, 28, "foo=1")


def test_missing_argument():
    src = relax_fn("lv = R.add(x)\nreturn lv")
    diagnose(src, "R.add() missing required argument 'x2'", 3, 10, "R.add(x)")


def test_too_many_arguments():
    src = relax_fn("lv = R.nn.relu(x, y)\nreturn lv")
    diagnose(src, "R.nn.relu() takes 1 positional argument but 2 were given", 3, 23, "y")


def test_intrinsic_arity():
    src = replace(TIR, "= A[vi, vj]", "= T.exp(A[vi, vj], A[vi, vj])")
    diagnose(src, "T.exp() takes 1 argument but 2 were given", 6, 25)


# ----------------------------------------------------------------------------- dtypes, buffers, axes


def test_unknown_dtype_in_buffer():
    src = replace(TIR, 'A: T.Buffer((4, 4), "float32")', 'A: T.Buffer((4, 4), "float23")')
    err = diagnose(src, "unknown dtype 'float23'", 2, 30, '"float23"')
    assert err.notes == ["did you mean 'float32'?"]


def test_unknown_dtype_in_tensor():
    src = relax_fn("return x", 'x: R.Tensor((2, 3), "flaot32")')
    diagnose(src, "unknown dtype 'flaot32'", 2, 30, '"flaot32"')


def test_unknown_dtype_in_alloc_buffer():
    src = replace(TIR, "    for i, j", '    C = T.alloc_buffer((4, 4), "flot32")\n    for i, j')
    diagnose(src, "unknown dtype 'flot32'", 3, 32, '"flot32"')


def test_buffer_indexed_with_wrong_number_of_indices():
    src = replace(TIR, "= A[vi, vj]", "= A[vi]")
    diagnose(src, "buffer 'A' has 2 dimensions but is indexed with 1 index", 6, 25, "A[vi]")


def test_buffer_store_with_wrong_number_of_indices():
    src = replace(TIR, "B[vi, vj] =", "B[vi, vj, 0] =")
    diagnose(src, "buffer 'B' has 2 dimensions but is indexed with 3 indices", 6, 13, "B[vi, vj, 0]")


def test_axis_remap_kinds_do_not_match_variables():
    src = replace(TIR, 'T.axis.remap("SS", [i, j])', 'T.axis.remap("S", [i, j])')
    diagnose(src, 'T.axis.remap kinds "S" (1) do not match the 2 variables', 5, 35, '"S"')


def test_axis_remap_unknown_kind():
    src = replace(TIR, 'T.axis.remap("SS", [i, j])', 'T.axis.remap("SX", [i, j])')
    diagnose(src, "unknown axis kind 'X'", 5, 35, '"SX"')


def test_typed_literal_out_of_range():
    src = replace(TIR, "= A[vi, vj]", "= A[vi, vj] + T.float32(T.int8(300))")
    diagnose(src, "300 is out of range for T.int8 (-128 to 127)", 6, 54, "300")


# ----------------------------------------------------------------------------- op struct info


def test_add_dtype_mismatch():
    src = relax_fn("lv = R.add(x, y)\nreturn lv",
                   'x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "int32")')
    diagnose(src, "R.add: operand dtypes differ: float32 and int32", 3, 10, "R.add(x, y)")


def test_add_shapes_do_not_broadcast():
    src = relax_fn("lv = R.add(x, y)\nreturn lv",
                   'x: R.Tensor((2, 3), "float32"), y: R.Tensor((4, 3), "float32")')
    err = diagnose(src, "shapes of the operands do not broadcast: dimension 2 vs 4", 3, 10, "R.add(x, y)")
    assert "(2, 3) and (4, 3)" in err.message


def test_matmul_reduction_dimensions_differ():
    src = relax_fn("lv = R.matmul(x, y)\nreturn lv",
                   'x: R.Tensor((2, 3), "float32"), y: R.Tensor((4, 5), "float32")')
    diagnose(src, "R.matmul: reduction dimensions differ: 3 (last dimension of x1) vs 4", 3, 10, "R.matmul(x, y)")


def test_permute_dims_bad_axes():
    src = relax_fn("lv = R.permute_dims(x, axes=[0, 0])\nreturn lv")
    diagnose(src, "R.permute_dims: axes [0, 0] are not a permutation", 3, 33, "[0, 0]")


def test_annotation_contradicts_inferred_struct_info():
    src = relax_fn('lv: R.Tensor((1, 256), "float32") = R.add(x_1x10, y_1x10)\nreturn lv',
                   'x_1x10: R.Tensor((1, 10), "float32"), y_1x10: R.Tensor((1, 10), "float32")')
    err = diagnose(src, "annotation of 'lv' contradicts its inferred struct info: dimension 1 is 256 vs 10",
                   3, 9, 'R.Tensor((1, 256), "float32")')
    assert err.notes == ['inferred: R.Tensor((1, 10), dtype="float32")',
                         'annotated: R.Tensor((1, 256), dtype="float32")']
    assert "= note: inferred: R.Tensor((1, 10)" in err.render(src)


def test_return_annotation_contradicting_the_body_is_read_and_checked():
    # TVM takes a return annotation as written; `tvms check` reports the contradiction.
    from tvmscript.compiler.well_formed import well_formed_errors

    src = replace(MODULE, '-> R.Tensor((1, 10), "float32")', '-> R.Tensor((1, 10), "int32")')
    mod = parse(src)
    assert 'R.Tensor((1, 10), dtype="int32"):' in mod.script()
    errors = well_formed_errors(mod)
    assert len(errors) == 1
    assert ('the return annotation R.Tensor((1, 10), dtype="int32") contradicts the struct info of the value '
            'returned, R.Tensor((1, 10), dtype="float32"): dtype int32 vs float32') in errors[0].message
    assert errors[0].span.line == 11  # the function's def


# ----------------------------------------------------------------------------- dataflow and modules


def test_output_outside_dataflow_block():
    src = replace(MODULE, "        return gv", "        R.output(gv)\n        return gv")
    diagnose(src, "R.output is only allowed at the end of a dataflow block", 18, 9, "R.output(gv)")


def test_output_of_unbound_name():
    src = replace(MODULE, "R.output(gv)", "R.output(gx)")
    diagnose(src, "R.output names 'gx', which is not bound in this dataflow block", 17, 22, "gx")


def test_dataflow_var_used_after_its_block():
    src = replace(MODULE, "        return gv", "        z = R.add(lv, lv)\n        return gv")
    err = diagnose(src, "dataflow variable 'lv' is used outside its dataflow block", 18, 19, "lv")
    assert "R.output" in err.notes[0]


def test_call_tir_to_missing_function_cls():
    src = replace(MODULE, "cls.add_one", "cls.add_two")
    diagnose(src, "R.call_tir to a missing function: the module has no function 'add_two'", 15, 30, "cls.add_two")


def test_call_tir_to_missing_function_bare_name():
    src = replace(MODULE, "cls.add_one", "add_two")
    diagnose(src, "R.call_tir to a missing function: 'add_two' is not defined in this module", 15, 30, "add_two")


def test_call_tir_to_relax_function():
    src = replace(MODULE, "cls.add_one", "cls.main")
    diagnose(src, "R.call_tir expects a T.prim_func, but 'main' is an R.function", 15, 30, "cls.main")


def test_duplicate_function_names():
    src = replace(MODULE, "def main", "def add_one")
    err = diagnose(src, "duplicate function name 'add_one' in module", 11, 9, "add_one")
    assert err.notes == ["'add_one' is first defined on line 4"]


def test_duplicate_parameter():
    src = relax_fn("return x", 'x: R.Tensor((2, 3), "float32"), x: R.Tensor((2, 3), "float32")')
    diagnose(src, "duplicate parameter 'x' in function 'main'", 2, 42, "x")


def test_init_outside_block():
    src = replace(TIR, "    for i, j", "    with T.init():\n        B[0, 0] = T.float32(0)\n    for i, j")
    diagnose(src, "T.init() is only allowed inside a T.block", 3, 10, "T.init()")


def test_func_attr_not_at_top_relax():
    src = relax_fn('lv = R.add(x, y)\nR.func_attr({"num_input": 1})\nreturn lv')
    diagnose(src, "R.func_attr must be at the top of the function body", 4, 5, 'R.func_attr({"num_input": 1})')


def test_func_attr_not_at_top_tir():
    src = replace(TIR, "            B[vi, vj] = A[vi, vj]", '            T.func_attr({"a": 1})\n            B[vi, vj] = A[vi, vj]')
    diagnose(src, "T.func_attr must be at the top of the function body", 6, 13)


def test_relax_function_without_return():
    src = replace(MODULE, "        return gv\n", "")
    diagnose(src, "a Relax function body must end with a return statement", 11, 9, "main")


def test_relax_return_without_value():
    src = relax_fn("return")
    diagnose(src, "a Relax function must return a value", 3, 5, "return")


def test_prim_func_returns_a_buffer():
    src = TIR + "    return A\n"
    diagnose(src, "buffer 'A' used as a value", 7, 12, "A")


def test_unreachable_statement_after_return():
    src = relax_fn("return x\nlv = R.add(x, y)")
    diagnose(src, "unreachable statement after return", 4, 5, "lv = R.add(x, y)")


def test_nested_dataflow_blocks():
    src = relax_fn("with R.dataflow():\n    with R.dataflow():\n        lv = R.add(x, y)\n        R.output(lv)\n"
                   "    R.output(lv)\nreturn lv")
    diagnose(src, "dataflow blocks cannot be nested", 4, 14)


def test_undecorated_function():
    diagnose("def f(x):\n    return x\n", "function 'f' needs a @T.prim_func or @R.function decorator", 1, 5, "f")


def test_top_level_statement():
    diagnose("x = 1\n" + TIR, "expected an @I.ir_module class, an @R.function or a @T.prim_func at the top level",
             1, 1, "x = 1")


def test_two_definitions_in_one_file():
    src = TIR + replace(TIR, "def copy", "def copy2")
    diagnose(src, "a file holds one module or one function", 8, 5, "copy2")


def test_tuple_index_out_of_range():
    src = relax_fn("t = (x, y)\nlv = t[2]\nreturn lv")
    diagnose(src, "tuple index 2 is out of range for a tuple of 2", 4, 12, "2")


def test_number_of_another_dtype_than_the_tensor():
    # A number is a prim value operand (as in TVM), whose dtype must match the tensor's.
    src = relax_fn("lv = R.add(x, 1)\nreturn lv")
    diagnose(src, "R.add: operand dtypes differ: float32 and int64", 3, 10, "R.add(x, 1)")


def test_attribute_key_must_be_hashable():
    src = relax_fn('R.func_attr({[1]: 2})\nreturn x')
    diagnose(src, "a dict key must be a string or a number", 3, 18, "[1]")


# ----------------------------------------------------------------------------- files


def test_empty_file():
    diagnose("", "the file is empty", 1, 1)
    diagnose("\n\n   \n", "the file is empty", 1, 1)


def test_file_with_only_comments():
    diagnose("\n# just a comment\n# and another\n", "the file holds only comments", 2, 1, "# just a comment")


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.tvms"
    source = TIR.replace('"copy"', '"c\xf6py"')
    path.write_bytes(source.encode("latin-1"))
    with pytest.raises(TVMScriptError) as info:
        load(path)
    err = info.value
    assert "not valid UTF-8 (byte 0xf6)" in err.message
    assert (err.span.filename, err.span.line, err.span.col) == (str(path), 4, 24)
    check_render(err, err.source, "\ufffd")


def test_binary_file(tmp_path):
    path = tmp_path / "model.tvms"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00binary junk\n")
    with pytest.raises(TVMScriptError) as info:
        load(path)
    err = info.value
    assert "binary file, not TVMScript text" in err.message
    assert (err.span.filename, err.span.line, err.span.col) == (str(path), 1, 1)
    assert "Traceback" not in err.render()


def test_filename_in_span(tmp_path):
    path = tmp_path / "bad.tvms"
    path.write_text(replace(TIR, "= A[vi, vj]", "= C[vi, vj]"))
    with pytest.raises(TVMScriptError) as info:
        load(path)
    assert info.value.span == Span(str(path), 6, 25, 6, 26)
    assert str(info.value) == f"undefined name 'C' ({path}:6:25)"


def test_crlf_and_bom_are_accepted(tmp_path):
    path = tmp_path / "windows.tvms"
    path.write_bytes(b"\xef\xbb\xbf" + TIR.replace("\n", "\r\n").encode())
    load(path)


# ----------------------------------------------------------------------------- rendering


def test_render_long_line_shows_a_window():
    src = relax_fn("lv = " + "R.nn.relu(" * 20 + "R.add(x, z)" + ")" * 20 + "\nreturn lv")
    with pytest.raises(TVMScriptError) as info:
        parse(src)
    err = info.value
    assert err.message == "undefined name 'z'"
    text = err.render(src)
    shown = text.split("\n")[3]
    assert len(shown) < 130 and shown.endswith(")") and "..." in shown
    caret = text.split("\n")[4]
    assert shown[caret.index("^")] == "z"


def test_render_aligns_caret_after_tabs():
    err = TVMScriptError("boom", Span("f.tvms", 1, 3, 1, 4))
    text = err.render("\t\tx = 1\n")
    assert text.split("\n")[3:5] == ["1 |         x = 1", "  |         ^"]


def test_render_with_color():
    err = TVMScriptError("boom", Span("f.tvms", 1, 1, 1, 2))
    assert "\x1b[31;1merror" in err.render("x\n", color=True)


def test_render_without_source():
    err = TVMScriptError("boom", Span("f.tvms", 3, 1, 3, 2), ["a note"])
    assert err.render() == "error: boom\n --> f.tvms:3:1\n  = note: a note"


# ----------------------------------------------------------------------------- no tracebacks

# Inputs that once crashed the parser with a Python exception (found by the fuzz test below and
# by hand). Each must now give a diagnostic.
CRASHERS = [
    relax_fn("return x", 'x: R.Tensor((T.int64("a"),), "float32")'),
    relax_fn("return x", 'x: R.Tensor((T.int64(None),), "float32")'),
    relax_fn("return x", 'x: R.Tensor((T.int64(1e999),), "float32")'),
    relax_fn('c = R.const(1000, "int8")\nreturn x'),
    relax_fn("c = R.const(99999999999999999999999)\nreturn x"),
    relax_fn('lv = R.alloc_tensor((1,), R.dtype())\nreturn lv'),
    relax_fn('lv = R.alloc_tensor((1,), "float32", R.prim_value())\nreturn lv'),
    relax_fn('lv = R.alloc_tensor((1,), "float32", 0, R.str())\nreturn lv'),
    relax_fn('lv = R.alloc_tensor((1,), "float32", 0, 5)\nreturn lv'),
    relax_fn('lv: R.Shape(ndim="a") = R.shape([1])\nreturn x'),
    relax_fn("lv = " + "R.add(" * 1200 + "x" + ", x)" * 1200 + "\nreturn lv"),  # deeper than MAX_NESTING
    replace(TIR, "= A[vi, vj]", "= A[vi, vj] + T.float32(T.int32(1e999))"),
    replace(TIR, "= A[vi, vj]", "= " + "+".join(["A[vi, vj]"] * 3000)),
    replace(TIR, "    for i, j", '    T.func_attr({[1]: 1})\n    for i, j'),
    replace(TIR, "    for i, j", '    T.func_attr({(1,): 1})\n    for i, j'),
    replace(TIR, "T.grid(4, 4)", 'T.thread_binding(4, thread=["x"])').replace("for i, j", "for i"),
    replace(TIR, 'T.block("copy")', 'T.block("a" b"b")'),
    replace(TIR, 'A: T.Buffer((4, 4), "float32")', 'A: T.Buffer((4, 4), "float32", scope=5)'),
    replace(TIR, "= A[vi, vj]", '= T.float32("abc")'),
    replace(TIR, "= A[vi, vj]", '= T.call_extern("float32", 5)'),
    replace(TIR, "    for i, j", '    T.func_attr({"a": -"x"})\n    for i, j'),
]


@pytest.mark.parametrize("source", CRASHERS, ids=range(len(CRASHERS)))
def test_former_crashes_are_diagnostics(source):
    with pytest.raises(TVMScriptError) as info:
        parse(source)
    err = info.value
    assert err.span is not None and 1 <= err.span.line <= source.count("\n") + 1
    assert "Traceback" not in err.render(source)


_TOKEN = re.compile(r"\w+|[^\w\s]")
_VOCAB = ["(", ")", "[", "]", ":", ",", "=", '"', "'", "#", "\t", "\n", "  ", "0", "-1", "1.5", "None",
          "True", "x", "T.foo", "R.bar", "*", "**", "cls", "meta", "T.int64", '"""', "@", ".", "...",
          "not", "in", "1e999", "\\", "'float32'", '"int8"', "R.Tensor", "R.Tuple", "R.Shape",
          "return", "with", "for", "if", "else", "def", "class", "pass", "T.block", "R.dataflow()",
          "R.output", "{", "}", "()", "[]", "{}", "T.grid", "range", "R.const", "lambda", "é", "\x00"]


def _mutate(src: str, rng: random.Random) -> str:
    """One random edit: delete a char/line/token, duplicate or swap tokens or lines, re-indent a
    line, truncate, or insert something from a vocabulary of TVMScript and Python spellings."""
    lines = src.split("\n")
    kind = rng.randrange(11)
    if kind == 0 and src:
        i = rng.randrange(len(src))
        return src[:i] + src[i + 1:]
    if kind == 1:
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if kind == 2 and len(lines) > 1:
        i = rng.randrange(len(lines) - 1)
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        return "\n".join(lines)
    if kind == 3:
        i = rng.randrange(len(lines))
        d = rng.choice([-4, -2, -1, 1, 2, 4])
        line = lines[i]
        blanks = len(line) - len(line.lstrip(" "))
        lines[i] = " " * d + line if d > 0 else line[min(-d, blanks):]
        return "\n".join(lines)
    if kind == 4:
        return src[: rng.randrange(len(src) + 1)]
    if kind == 5:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[rng.randrange(len(lines))])
        return "\n".join(lines)
    tokens = list(_TOKEN.finditer(src))
    if not tokens:
        return src
    m = rng.choice(tokens)
    if kind == 6:
        return src[: m.end()] + " " + m.group() + src[m.end():]
    if kind == 7:
        return src[: m.start()] + src[m.end():]
    if kind == 8:
        other = rng.choice(tokens)
        return src[: m.start()] + other.group() + src[m.end():]
    if kind == 9:
        return src[: m.start()] + rng.choice(_VOCAB) + src[m.end():]
    i = rng.randrange(len(src) + 1)
    return src[:i] + rng.choice(_VOCAB) + src[i:]


MUTANTS_PER_SAMPLE = 200


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_fuzzed_samples_parse_or_diagnose(path):
    """Mutated samples parse, or fail with a located TVMScriptError; nothing else may escape."""
    source = path.read_text()
    rng = random.Random(path.name)  # deterministic: the same mutants on every run
    for k in range(MUTANTS_PER_SAMPLE):
        mutant = source
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutant = _mutate(mutant, rng)
        try:
            parse(mutant, path.name)
        except TVMScriptError as err:
            assert err.span is not None, (k, err.message)
            assert err.span.filename == path.name
            text = err.render(mutant)
            assert text.startswith("error: ")
        except Exception as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"mutant {k} of {path.name} raised {type(exc).__name__}: {exc}\n--- mutant ---\n{mutant}")
