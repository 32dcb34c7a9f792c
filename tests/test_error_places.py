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
# filled in: the PrimFunc's loop and statement, main's bindings.
PROGRAM = HEADER + '''@I.ir_module
class Module:
    @T.prim_func
    def add_one(var_A: T.handle, var_B: T.handle):
        n = T.int64()
        A = T.match_buffer(var_A, (n, 64), "float32")
        B = T.match_buffer(var_B, (n, 64), "float32")
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


def program(bindings: str, stmt: str = "B[vi, vj] = A[vi, vj] + T.float32(1)", extent: int = 64) -> str:
    lines = "\n".join("            " + line for line in bindings.strip().splitlines())
    return PROGRAM.format(bindings=lines, stmt=stmt, extent=extent)


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
