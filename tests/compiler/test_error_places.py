"""Errors found after fusion keep their place in the file (issue 25, point 3).

Every error ``tvms run`` and ``tvms.compile`` raise points at the user's source, through
LegalizeOps, FuseOps and FuseTIR: a call_tir whose arguments do not fit its PrimFunc at run time,
an access out of bounds or a division by zero in a kernel, a kernel the code generator cannot
compile. Each is shown as ``tvms check`` shows its diagnostics: ``--> file:line:col``, the line,
a caret; a fused kernel's invented names (``p_output0``, ``fused_...``) are replaced by the
user's bindings and values, and a note says which bindings run as one kernel. ``tvms run``
also runs ``tvms check`` first and stops with what it finds, reported as check reports it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler import transform
from tvmscript.compiler.build import BuildError
from tvmscript.diagnostics import FusedSpan, TVMScriptError
from tvmscript.runtime.kernel import BoundsCheckError, KernelAssertionError

TVMS = shutil.which("tvms")

HEADER = '''from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tir as T

'''

# A user PrimFunc (its body at line 15) and main (its bindings from line 20), the pieces below
# filled in: the PrimFunc's loop and statement, main's bindings, and the width of its buffers
# (a symbolic `w` where a loop runs past it: `tvms check` proves an access past a width of 64
# wrong before running, but not one past `w`, which only the run finds).
PROGRAM = HEADER + '''@I.ir_module
class Module:
    @T.prim_func
    def add_one(var_A: T.handle, var_B: T.handle):
        n, w = T.int64(), T.int64()
        A = T.match_buffer(var_A, (n, {width}), "float32")
        B = T.match_buffer(var_B, (n, {width}), "float32")
        for i, j in T.grid(n, {extent}):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                {stmt}

    @R.function
    def main(x: R.Tensor(("n", 64), "float32")):
        n = T.int64()
        with R.dataflow():
{bindings}
            R.output(z)
        return z
'''


# What uses ``y`` in the programs whose call of add_one must run as a kernel of its own:
# FuseOps never fuses an elementwise op into a matmul (``y + y`` would be fused with it).
UNFUSED = """yt = R.permute_dims(y)
z = R.matmul(y, yt)"""


def program(bindings: str, stmt: str = "B[vi, vj] = A[vi, vj] + T.float32(1)", extent: int = 64,
            width: str = "64") -> str:
    lines = "\n".join("            " + line for line in bindings.strip().splitlines())
    return PROGRAM.format(bindings=lines, stmt=stmt, extent=extent, width=width)


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def tvms_cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TVMS_DEBUG")}
    proc = subprocess.run([TVMS, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def run_fails(tmp_path, text: str, *args) -> str:
    """``tvms run`` of ``text``: exit 1 with one diagnostic; its stderr, notes on random inputs left out."""
    path = tmp_path / "prog.tvms"
    path.write_text(text)
    proc = tvms_cli("run", path, "--shape", "n=2", *args)
    assert proc.returncode == 1, proc.stderr
    return "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("note: random"))


def assert_diagnostic(stderr: str, path, text: str, fragment: str, underlined: str) -> None:
    """``stderr`` is a diagnostic at the line of ``text`` holding ``fragment``, with carets
    under ``underlined`` (its start), as `tvms check` renders them."""
    line = line_of(text, fragment)
    source = text.splitlines()[line - 1]
    col = source.index(underlined) + 1
    assert f"--> {path}:{line}:{col}\n" in stderr, stderr
    assert f"{line} | {source}\n" in stderr, stderr
    caret = next(x for x in stderr.splitlines() if x.strip().startswith("|") and "^" in x)
    assert caret.index("^") - caret.index("|") - 2 == col - 1, stderr


needs_cli = pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")


# ----------------------------------------------------------------------------- call_tir arguments


@needs_cli
def test_a_call_tir_whose_output_contradicts_its_primfunc_at_run_time_is_shown_at_the_call(tmp_path):
    """out_sinfo says 8 rows, the PrimFunc n = 2 (from x): found when the call runs."""
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((8, 64), "float32"))
''' + UNFUSED)
    err = run_fails(tmp_path, text)
    assert err.startswith("error: R.call_tir to 'add_one': parameter 'var_B' dimension 0 is 8, but n = 2 "
                          "(from parameter 'var_A' dimension 0) (in function 'main', binding 'y')\n"), err
    assert_diagnostic(err, tmp_path / "prog.tvms", text, "y = R.call_tir", "R.call_tir(")


@needs_cli
def test_a_fused_call_tir_names_the_users_values_not_the_kernels_parameters(tmp_path):
    """The same mistake in a call FuseOps fused with the op before it: the fused kernel's
    parameter for its result is told as the result of binding 'z', and the one for ``x`` as 'x'."""
    text = program('''
y = R.multiply(x, R.const(2.0, "float32"))
z = R.call_tir(Module.add_one, (y,), out_sinfo=R.Tensor((8, 64), "float32"))''')
    err = run_fails(tmp_path, text)
    assert err.startswith("error: the result dimension 0 is 8, but n = 2 (from argument 'x' dimension 0) "
                          "(in function 'main', binding 'z')\n"), err
    assert "_handle" not in err and "intermediate" not in err
    assert_diagnostic(err, tmp_path / "prog.tvms", text, "z = R.call_tir", "R.call_tir(")
    path = tmp_path / "prog.tvms"
    assert (f"= note: bindings 'y' ({path}:{line_of(text, 'y = R.multiply')}:17), 'z' ({path}:"
            f"{line_of(text, 'z = R.call_tir')}:17) run as one fused kernel, 'fused_multiply_add_one'") in err


# ----------------------------------------------------------------------------- kernels' checks


@needs_cli
def test_an_access_out_of_bounds_is_shown_at_the_access_with_the_call_in_a_note(tmp_path):
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
''' + UNFUSED, extent=65, width="w")
    err = run_fails(tmp_path, text)
    path = tmp_path / "prog.tvms"
    assert err.startswith("error: out-of-bounds read of A[i, j]: indices 0 to 64 reach outside axis 1 of A "
                          "(size 64, shape (n, w)) (in function 'main', binding 'y')\n"), err
    assert_diagnostic(err, path, text, "B[vi, vj] = A[vi, vj]", "A[vi, vj]")
    assert f"= note: called at {path}:{line_of(text, 'y = R.call_tir')}:17" in err


@needs_cli
def test_an_access_out_of_bounds_in_a_fused_kernel_is_shown_at_the_users_access(tmp_path):
    """add_one reads one column too far; FuseOps fuses it with the multiply after it (and the
    default schedule inlines it there): the error still points at the user's ``A[vi, vj + 1]``."""
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
z = R.multiply(y, R.const(2.0, "float32"))''', stmt="B[vi, vj] = A[vi, vj + 1] + T.float32(1)", width="w")
    err = run_fails(tmp_path, text)
    # fused, A is the argument x: its width is x's 64
    assert "indices 1 to 64 reach outside axis 1 of A (size 64, shape (n, 64)) (in function 'main', binding 'y')" in err
    assert_diagnostic(err, tmp_path / "prog.tvms", text, "B[vi, vj] = A[vi, vj + 1]", "A[vi, vj + 1]")
    assert "run as one fused kernel, 'fused_add_one_multiply'" in err


TAKE = HEADER + '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), idx: R.Tensor((3,), "int64")):
        with R.dataflow():
            y = R.take(x, idx, axis=0)
            z = R.multiply(y, R.const(2.0, "float32"))
            R.output(z)
        return z
'''


@needs_cli
def test_an_access_out_of_bounds_in_legalized_code_is_shown_at_the_op(tmp_path):
    """An index out of range for R.take: the read is in TIR that LegalizeOps made (no place of
    its own): shown at the R.take. take reads through its indices, so it is kOpaque and runs
    alone (as in TVM); a fused kernel's access is the test above."""
    path, inputs = tmp_path / "take.tvms", tmp_path / "inputs.npz"
    path.write_text(TAKE)
    np.savez(inputs, x=np.ones((4, 8), "float32"), idx=np.array([0, 5, 1]))
    proc = tvms_cli("run", path, "--inputs", inputs)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: out-of-bounds read of x[idx[ax0], ax1]: index 5 is outside axis 0 of x "
                                  "(size 4, shape (4, 8)) (in function 'main', binding 'y')\n"), proc.stderr
    assert_diagnostic(proc.stderr, path, TAKE, "y = R.take", "R.take(")
    assert "fused kernel" not in proc.stderr


DIVIDE = HEADER + '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "int32"), d: R.Tensor((4, 8), "int32")):
        with R.dataflow():
            y = R.floor_divide(x, d)
            z = R.multiply(y, R.const(2, "int32"))
            R.output(z)
        return z
'''


def test_a_division_by_zero_in_a_fused_kernel_is_shown_at_the_division():
    mod = tvms.parse(DIVIDE, "divide.tvms")
    vm = tvms.relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    x = np.arange(32, dtype="int32").reshape(4, 8)
    np.testing.assert_array_equal(vm["main"](x, np.full((4, 8), 3, "int32")).numpy(), (x // 3) * 2)
    with pytest.raises(KernelAssertionError) as info:
        vm["main"](x, np.zeros((4, 8), "int32"))
    err = info.value
    assert err.message == "integer division by zero (//, int32) (in function 'main', binding 'y')"
    assert (err.span.filename, err.span.line, err.span.col) == ("divide.tvms", line_of(DIVIDE, "R.floor_divide"), 17)
    assert any("'fused_floor_divide_multiply'" in note for note in err.notes)


def test_a_kernel_placed_by_a_cached_build_points_at_this_files_lines():
    """Kernels are cached by structure: the same PrimFunc three lines lower reuses the machine
    code, and its error is still at its own line (the number in the code, not the text)."""
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
''' + UNFUSED, extent=65)
    for shift in (0, 3):
        shifted = "\n" * shift + text
        vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(shifted, f"shift{shift}.tvms")), tvms.cpu())
        with pytest.raises(BoundsCheckError) as info:
            vm["main"](np.zeros((2, 64), "float32"))
        span = info.value.span
        assert (span.filename, span.line) == (f"shift{shift}.tvms", line_of(shifted, "B[vi, vj] = A[vi, vj]"))


# ----------------------------------------------------------------------------- compiling


POWER = HEADER + '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), m: R.Tensor((4, 8), "bool")):
        with R.dataflow():
            y = R.add(x, x)
            p = R.power(m, m)
            q = R.logical_not(p)
            R.output(y, q)
        return (y, q)
'''


@pytest.mark.parametrize("fused", [False, True])
def test_a_kernel_the_code_generator_cannot_compile_is_a_build_error_at_the_op(fused):
    """R.power of bools legalizes to tir.pow on bool, which the CPU code generator refuses;
    fused with the R.logical_not after it, the error is still the R.power's."""
    text = POWER if fused else POWER.replace("q = R.logical_not(p)", "q = p")
    with pytest.raises(BuildError) as info:
        tvms.compile(tvms.parse(text, "power.tvms"))
    err = info.value
    kernel = "fused_power_tir_logical_not" if fused else "power"
    assert err.message == (f"cannot compile kernel '{kernel}': intrinsic tir.pow on bool is not supported by the "
                           "CPU code generator (in function 'main', binding 'p')")
    assert (err.span.filename, err.span.line, err.span.col) == ("power.tvms", line_of(text, "p = R.power"), 17)
    assert any("run as one fused kernel" in note for note in err.notes) == fused


@needs_cli
def test_tvms_run_shows_a_kernel_that_does_not_compile_at_its_op(tmp_path):
    path = tmp_path / "power.tvms"
    path.write_text(POWER)
    proc = tvms_cli("run", path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot compile kernel 'fused_power_tir_logical_not': intrinsic tir.pow")
    assert_diagnostic(proc.stderr, path, POWER, "p = R.power", "R.power(")


def test_a_load_the_code_generator_refuses_in_a_fused_kernel_is_shown_at_the_load():
    """The issue's ``cannot compile bad5.tvms: load of float16 from a float32 buffer``: a load
    whose type contradicts its buffer (made here by hand, as a faulty legalization made it) in
    a PrimFunc fused with the op after it is a BuildError at that load, told which binding."""
    from tvmscript.ir.tir_visitor import TIRVisitor

    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
z = R.multiply(y, R.const(2.0, "float32"))''').replace("@T.prim_func\n", "@T.prim_func(private=True)\n")
    mod = tvms.parse(text, "half.tvms")

    class _Half(TIRVisitor):
        def visit_BufferLoad(self, node):
            node.dtype = "float16"

    _Half().visit(mod["add_one"].body)
    with pytest.raises(BuildError) as info:
        tvms.compile(mod)
    err = info.value
    assert err.message == ("cannot compile kernel 'fused_add_one_multiply': load of float16 from a float32 buffer "
                           "(in function 'main', binding 'y')")
    assert (err.span.line, err.span.col) == (line_of(text, "B[vi, vj] = A[vi, vj]"), 29)


def test_a_statement_the_cpu_cannot_compile_points_at_its_block():
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
''' + UNFUSED, stmt='T.evaluate(T.call_packed("f", A.data))')
    with pytest.raises(BuildError, match=r"cannot compile kernel 'add_one': T.call_packed is not supported") as info:
        tvms.compile(tvms.parse(text, "packed.tvms"))
    assert info.value.span.line == line_of(text, 'with T.block("B")')


# ----------------------------------------------------------------------------- the passes keep places


def test_legalized_and_fused_calls_keep_the_places_of_the_calls_they_came_from():
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
z = R.multiply(y, R.const(2.0, "float32"))''')
    mod = tvms.parse(text, "p.tvms")
    legalized = transform.LegalizeOps()(mod)
    z = legalized["main"].body.blocks[0].bindings[1]
    assert z.value.op.name == "relax.call_tir" and z.value.span.line == line_of(text, "z = R.multiply")

    fused = transform.get_pipeline("zero")(mod)
    call = fused["main"].body.blocks[0].bindings[0].value
    assert isinstance(call.span, FusedSpan)
    assert [(p.binding, p.span.line) for p in call.span.parts] == [("y", line_of(text, "y = R.call_tir")),
                                                                   ("z", line_of(text, "z = R.multiply"))]
    assert call.span.params == ((0, "argument 'x'"), (1, "the result"))
    # The fused TIR: the user's accesses keep their own places, the multiply's get its call's.
    kernel = fused[call.args[0].name_hint]
    from tvmscript.compiler.kernel_places import numbered_spans

    lines = sorted({span.line for span in numbered_spans(kernel)})
    assert lines == [line_of(text, "B[vi, vj] = A"), line_of(text, "z = R.multiply")]


def test_the_schedule_and_the_lowering_keep_the_places_of_accesses():
    """The default CPU schedule inlines add_one into the multiply and the lowering flattens
    the buffers: every access left (add_one's store is inlined away) still has the place it
    had, the user's or the op's."""
    from tvmscript.compiler.kernel_places import numbered_spans
    from tvmscript.compiler.lower_tir import lower
    from tvmscript.compiler.schedule_cpu import default_schedule

    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 64), "float32"))
z = R.multiply(y, R.const(2.0, "float32"))''', stmt="B[vi, vj] = A[vi, vj + 1] + T.float32(1)")
    fused = transform.get_pipeline("zero")(tvms.parse(text, "p.tvms"))
    kernel = fused["fused_add_one_multiply"]
    lowered = lower(default_schedule(kernel), bounds_check=True)
    assert set(numbered_spans(lowered)) <= set(numbered_spans(kernel))
    assert {(s.line, s.col) for s in numbered_spans(lowered)} == {
        (line_of(text, "A[vi, vj + 1]"), 29), (line_of(text, "z = R.multiply"), 17)}


# ----------------------------------------------------------------------------- tvms run checks first


@needs_cli
def test_tvms_run_reports_what_check_finds_as_check_reports_it(tmp_path):
    text = program('''
y = R.call_tir(Module.add_one, (x,), out_sinfo=R.Tensor((n, 32), "float32"))
''' + UNFUSED, stmt="B[vi, vj + 100] = A[vi, vj] + T.float32(1)")
    path = tmp_path / "prog.tvms"
    path.write_text(text.replace("n = T.int64()\n        A", "n = 4\n        A"))
    check = tvms_cli("check", path)
    assert check.returncode == 1 and "found 2 errors" in check.stderr, check.stderr
    run = tvms_cli("run", path)
    assert run.returncode == 1 and run.stderr == check.stderr and run.stdout == ""


# ----------------------------------------------------------------------------- other errors in the VM


MATCH = HEADER + '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        y = R.match_cast(x, R.Tensor((4,), "float32"))
        z = R.assert_op(R.const(False, "bool"), format="never")
        return y
'''


def test_a_failed_match_cast_is_placed_at_its_binding():
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(MATCH, "m.tvms")), tvms.cpu())
    with pytest.raises(ValueError) as info:
        vm["main"](np.zeros(3, "float32"))
    err = info.value
    assert isinstance(err, TVMScriptError) and "dimension 0 is 3, expected 4" in err.message
    assert err.message.endswith("(in function 'main', binding 'y')")
    assert err.span.line == line_of(MATCH, "R.match_cast")


def test_a_failed_assert_op_is_placed_at_its_binding():
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(MATCH, "m.tvms")), tvms.cpu())
    with pytest.raises(AssertionError) as info:
        vm["main"](np.zeros(4, "float32"))
    assert info.value.message == "never (in function 'main', binding 'z')"
    assert info.value.span.line == line_of(MATCH, "R.assert_op")
