"""``tvms check`` reports every independent error (one per broken function at least), capped by
``--max-errors``, and finds the call_tir shape mismatches ``tvms run`` would refuse."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.checking import file_errors
from tvmscript.diagnostics import TVMScriptError
from tvmscript.compiler.well_formed import check_well_formed, well_formed_errors

HEADER = """# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
"""

ADD = '''    @T.prim_func
    def {name}(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + {rhs}
'''

MAIN = '''    @R.function
    def {name}(x: R.Tensor(({n},), dtype="float32")) -> R.Tensor(({n},), dtype="float32"):
        cls = Module
        y = R.call_tir(cls.{callee}, (x,), out_sinfo=R.Tensor(({n},), dtype="float32"))
        return y
'''


def module(*parts: str) -> str:
    return HEADER + "\n".join(parts)


def cli(*args, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tvmscript.cli", *map(str, args)], input=input,
                          capture_output=True, text=True, timeout=120)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


BROKEN = module(
    ADD.format(name="a", rhs="undefined_a"),
    ADD.format(name="b", rhs="T.float32(1)").replace("range(4):", "range(4)"),  # syntax error
    ADD.format(name="c", rhs="T.float32(1)"),
    MAIN.format(name="main", n=4, callee="a"),      # depends on the broken 'a': not reported
    MAIN.format(name="wrong", n=8, callee="c"),     # 8 elements into 4-element buffers
    '''    @R.function
    def last(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        return undefined_last
''',
)


def test_every_independent_error_in_source_order():
    errors = file_errors(BROKEN, "m.tvms", 20)
    lines = [e.span.line for e in errors]
    assert lines == [
        line_of(BROKEN, "undefined_a"),
        line_of(BROKEN, "range(4)\n"),
        line_of(BROKEN, "R.call_tir(cls.c"),
        line_of(BROKEN, "undefined_last"),
    ]
    assert "undefined_a" in errors[0].message and "':'" in errors[1].message
    assert "dimension 0: 8 vs 4" in errors[2].message and "in 'wrong'" in errors[2].message


def test_cli_reports_them_all_and_caps_them(tmp_path):
    path = tmp_path / "broken.tvms"
    path.write_text(BROKEN)
    proc = cli("check", path)
    assert proc.returncode == 1
    assert proc.stderr.count("error:") == 4 and "found 4 errors" in proc.stderr
    capped = cli("check", "--max-errors", "2", path, path)
    assert capped.returncode == 1
    assert capped.stderr.count("error:") == 2 and "stopped at --max-errors" in capped.stderr
    assert cli("check", "--max-errors", "0", path).returncode == 2  # argparse: not a positive count


def test_a_good_file_passes(tmp_path):
    path = tmp_path / "good.tvms"
    path.write_text(module(ADD.format(name="c", rhs="T.float32(1)"), MAIN.format(name="main", n=4, callee="c")))
    proc = cli("check", path)
    assert proc.returncode == 0, proc.stderr
    assert "no problems found" in proc.stderr


def test_an_error_outside_every_function_is_reported():
    text = "@I.ir_module\nclass Module:\n    x = = 1\n"
    errors = file_errors(text, "m.tvms", 20)
    assert len(errors) == 1 and errors[0].span.line == 3


@pytest.mark.parametrize("change, says", [
    (("(x,), out", "(x, x), out"), "passes 2 argument(s) and 1 output(s)"),
    (('(x: R.Tensor((4,), dtype="float32")', '(x: R.Tensor((4,), dtype="float16")'), "dtype differs"),
    (('(x: R.Tensor((4,), dtype="float32")', '(x: R.Tensor((4, 1), dtype="float32")'), "2-d vs 1-d"),
])
def test_call_tir_against_the_prim_func(change, says):
    text = module(ADD.format(name="c", rhs="T.float32(1)"), MAIN.format(name="main", n=4, callee="c"))
    mod = tvms.parse(text.replace(*change))
    errors = well_formed_errors(mod)
    assert len(errors) == 1 and says in errors[0].message
    assert errors[0].span.line == line_of(text, "R.call_tir")
    with pytest.raises(TVMScriptError, match="R.call_tir to 'c'"):
        check_well_formed(mod)


def test_run_refuses_what_check_reports(tmp_path):
    """The two share the rule: a mismatch `tvms check` reports is one `tvms run` refuses."""
    path = tmp_path / "wrong.tvms"
    path.write_text(module(ADD.format(name="c", rhs="T.float32(1)"), MAIN.format(name="main", n=8, callee="c")))
    checked, ran = cli("check", path), cli("run", path)
    assert checked.returncode == ran.returncode == 1
    assert "dimension 0: 8 vs 4" in checked.stderr and "dimension 0: 8 vs 4" in ran.stderr


@pytest.mark.parametrize("func", [
    '''    @T.prim_func(private=True)
    def f(A: T.Buffer((4,), "float32")):
        T.func_attr({"global_symbol": "f"})
        A[0] = T.float32(1)
''',
    '''    @R.function(private=True)
    def f(x: R.Tensor((), "int32")) -> R.Tensor((), "int32"):
        R.func_attr({"global_symbol": "f"})
        return x
'''])
def test_a_private_function_with_a_global_symbol_is_flagged(func, tmp_path):
    text = module(func)
    errors = well_formed_errors(tvms.parse(text))
    assert len(errors) == 1 and "private but sets global_symbol to 'f'" in errors[0].message
    assert errors[0].span.line == line_of(text, "def f")
    public = text.replace("(private=True)", "")
    assert well_formed_errors(tvms.parse(public)) == []
    path = tmp_path / "private.tvms"
    path.write_text(text)
    proc = cli("check", path)
    assert proc.returncode == 1 and "private but sets global_symbol" in proc.stderr


def test_a_contradicting_return_annotation_is_read_but_neither_checked_nor_run(tmp_path):
    """Read as written (TVM does), reported by `tvms check`, refused by `tvms run`."""
    path = tmp_path / "ret.tvms"
    path.write_text('# from tvm.script import relax as R\n\n@R.function\n'
                    'def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "int32"):\n'
                    '    y = R.add(x, x)\n    return y\n')
    tvms.parse(path.read_text())
    for command in ("check", "run"):
        proc = cli(command, path)
        assert proc.returncode == 1, proc.stderr
        assert "contradicts the struct info of the value returned" in proc.stderr and ":4:5" in proc.stderr
        assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- norms' parameter dtypes

NORM = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4, 8), "float32"), p16: R.Tensor(({p},), "float16"), p32: R.Tensor(({p},), "float32")):
        with R.dataflow():
            y = {call}
            z = R.multiply(y, R.const(2.0, "float32"))
            R.output(z)
        return z
'''


@pytest.mark.parametrize("call, p, arg", [
    ("R.nn.layer_norm(x, p16, p32, axes=[-1])", 8, "gamma"),
    ("R.nn.layer_norm(x, p32, p16, axes=[-1])", 8, "beta"),
    ("R.nn.rms_norm(x, p16, axes=[-1])", 8, "weight"),
    ("R.nn.group_norm(x, p16, p32, num_groups=2, channel_axis=1, axes=[2])", 4, "gamma"),
    ("R.nn.batch_norm(x, p32, p32, p16, p32, axis=1)[0]", 4, "moving_mean"),
])
def test_a_norm_parameter_of_another_dtype_is_reported_at_the_call(call, p, arg, tmp_path):
    """TVM's inference of the norms refuses a float16 gamma on float32 data (its
    NormCheckDtypeAndShape); tvms accepted it and ran it. Reported at the argument in the
    call, naming both dtypes; the same call with one dtype passes."""
    text = NORM.format(call=call, p=p)
    errors = file_errors(text, "norm.tvms", 20)
    assert len(errors) == 1, [e.message for e in errors]
    assert f"{arg} has dtype float16 but data has float32" in errors[0].message
    assert errors[0].span.line == line_of(text, "y = ")
    assert text.split("\n")[errors[0].span.line - 1][errors[0].span.col - 1:].startswith("p16")
    assert file_errors(text.replace('"float16"', '"float32"'), "norm.tvms", 20) == []
    path = tmp_path / "norm.tvms"
    path.write_text(text)
    proc = cli("check", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "float16" in proc.stderr


# ----------------------------------------------------------------------------- call_tir under symbolic shapes

SYMBOLIC_CALL = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func
    def add_one(var_A: T.handle, var_B: T.handle):
        n = T.int64()
        A = T.match_buffer(var_A, (n, 64), "float32")
        B = T.match_buffer(var_B, (n, 64), "float32")
        for i, j in T.grid(n, 64):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 64), "float32")):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor({out}, "float32"))
            z = {consumer}
            R.output(z)
        return z
'''


@pytest.mark.parametrize("out, says", [
    ("(n, 32)", "(dimension 1: 32 vs 64)"),
    ("(2 * n, 64)", "(dimension 0: 2 * n vs n, where the prim_func's n is dimension 0 of 'x', unequal unless both "
                    "are 0)"),
    ("(n + 1, 64)", "(dimension 0: n + 1 vs n, where the prim_func's n is dimension 0 of 'x')"),
    ("(n, 64, 1)", "(3-d vs 2-d)"),
])
@pytest.mark.parametrize("consumer", ["R.add(y, y)", "R.add(y, x)"])
def test_a_call_tir_output_contradicting_the_prim_func_is_reported_at_the_call(out, says, consumer, tmp_path):
    """The PrimFunc's n is x's n, so it writes (n, 64): an out_sinfo that differs for every
    n > 0 is reported at the call_tir, whether or not a consumer trips over it. The consumer
    R.add(y, x) cannot broadcast (n, 32) with (n, 64): that parse error, once reported
    instead at the next line, follows from the call's and is a note of it."""
    text = SYMBOLIC_CALL.format(out=out, consumer=consumer)
    errors = file_errors(text, "m.tvms", 20)
    assert len(errors) == 1, [e.message for e in errors]
    err = errors[0]
    assert err.message == (f"in 'main': R.call_tir to 'add_one': output 0 is R.Tensor({out}, "
                           f'dtype="float32"), but from its arguments the prim_func writes R.Tensor((n, 64), '
                           f'dtype="float32") {says}')
    assert (err.span.line, err.span.col) == (line_of(text, "R.call_tir"), 17)
    path = tmp_path / "m.tvms"
    path.write_text(text)
    proc = cli("check", path)
    assert proc.returncode == 1 and proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert f"m.tvms:{err.span.line}:17" in proc.stderr


def test_the_consumers_error_is_a_note_of_the_call_tirs():
    text = SYMBOLIC_CALL.format(out="(n, 32)", consumer="R.add(y, x)")
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(text)
    assert "R.call_tir to 'add_one'" in info.value.message and info.value.span.line == line_of(text, "R.call_tir")
    [note] = info.value.notes
    assert note.startswith(f"line {line_of(text, 'z = ')} fails too") and "do not broadcast" in note


@pytest.mark.parametrize("out", ["(8, 64)", "(m, 64)", "(n, 64)", "(n * 1, 64)"])
def test_an_output_that_may_agree_with_the_prim_func_is_not_reported(out):
    """(8, 64) is right when n is 8: the call checks it when it runs, and no error is a false
    one. TVM's well-formed check refuses it, as it cannot prove n == 8."""
    assert file_errors(SYMBOLIC_CALL.format(out=out, consumer="R.add(y, y)"), "m.tvms", 20) == []


def test_an_output_that_may_agree_runs_when_it_does():
    text = SYMBOLIC_CALL.format(out="(8, 64)", consumer="R.add(y, y)")
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(text), target="llvm"), tvms.cpu())
    x = np.arange(8 * 64, dtype="float32").reshape(8, 64)
    np.testing.assert_allclose(vm["main"](x).numpy(), 2 * (x + 1))


SCALAR_CALL = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func
    def head(var_A: T.handle, var_B: T.handle, m: T.int64):
        n = T.int64()
        A = T.match_buffer(var_A, (n,), "float32")
        B = T.match_buffer(var_B, (m,), "float32")
        for i in range(m):
            B[i] = A[i]

    @R.function
    def main(x: R.Tensor(("n",), "float32"), k: R.Shape(["k"])):
        k = T.int64()
        y = R.call_tir(Module.head, (x,), out_sinfo=R.Tensor({out}, "float32"), tir_vars=R.shape([k]))
        return y
'''


def test_a_scalar_parameter_takes_its_size_from_tir_vars():
    errors = file_errors(SCALAR_CALL.format(out="(k + 1,)"), "m.tvms", 20)
    assert len(errors) == 1 and "(dimension 0: k + 1 vs k, where the prim_func's m is tir_vars[0])" in errors[0].message
    assert file_errors(SCALAR_CALL.format(out="(k,)"), "m.tvms", 20) == []


def test_an_in_place_output_is_the_argument_it_names():
    text = SYMBOLIC_CALL.format(out="(n, 64)", consumer="R.add(y, y)").replace(
        "R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), \"float32\"))",
        "R.call_tir_inplace(Module.add_one, (x, x), inplace_indices=[{index}], out_sinfo=R.Tensor({out}, \"float32\"))")
    assert file_errors(text.format(index=0, out="(n, 64)"), "m.tvms", 20) == []
    [err] = file_errors(text.format(index=0, out="(n + 2, 64)"), "m.tvms", 20)
    assert "R.call_tir_inplace to 'add_one': output 0 is R.Tensor((n + 2, 64)" in err.message
    assert file_errors(text.format(index=1, out="(n, 64)"), "m.tvms", 20) == []


def test_ir_built_in_python_gets_the_same_check():
    """`well_formed_errors` applies the parser's rule to a call_tir built or rewritten in
    Python: here the parsed call's out_sinfo replaced by (2 * n, 64)."""
    from tvmscript import relax, tir

    mod = tvms.parse(SYMBOLIC_CALL.format(out="(n, 64)", consumer="R.add(y, y)"))
    call = mod["main"].body.blocks[0].bindings[0].value
    n = call.sinfo_args[0].shape[0]
    call.sinfo_args = [relax.TensorStructInfo([tir.Mul("int64", tir.IntImm("int64", 2), n), 64], "float32")]
    [err] = well_formed_errors(mod)
    assert "in 'main': R.call_tir to 'add_one': output 0 is R.Tensor((2 * n, 64)" in err.message
    assert "unequal unless both are 0" in err.message
