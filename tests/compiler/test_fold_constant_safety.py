"""FoldConstant runs nothing but arithmetic at compile time (issue 12): a PrimFunc that calls an
extern function (``system``), loops with ``while`` or would do unbounded work keeps its call for
run time, while a pure constant transpose is still folded."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform.fold_constant import MAX_FOLD_WORK, foldable

MODULE = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def kernel(A: T.Buffer((2, 3), "int32"), B: T.Buffer((3, 2), "int32")):
        for i, j in T.grid(3, 2):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                {body}

    @R.function
    def main() -> R.Tensor((3, 2), dtype="int32"):
        cls = Module
        c = R.const([[1, 2, 3], [4, 5, 6]], "int32")
        y = R.call_tir(cls.kernel, (c,), out_sinfo=R.Tensor((3, 2), dtype="int32"))
        return y
'''


def fold(body: str):
    mod = tvms.parse(MODULE.format(body=body))
    return mod, relax.transform.FoldConstant()(mod)


def folded(mod) -> bool:
    return "R.call_tir" not in mod["main"].script()


def test_a_pure_transpose_is_folded():
    mod, out = fold("B[vi, vj] = A[vj, vi] * 2")
    assert folded(out)
    np.testing.assert_array_equal(out["main"].body.blocks[0].bindings[1].value.data,
                                  np.array([[1, 2, 3], [4, 5, 6]]).T * 2)


def test_an_extern_call_is_not_run_at_compile_time(tmp_path):
    marker = tmp_path / "ran"
    body = f'B[vi, vj] = A[vj, vi] + T.call_extern("int32", "system", "touch {marker}")'
    mod, out = fold(body)
    assert not folded(out) and not marker.exists()
    assert not foldable(mod["kernel"])
    # Nor through the CLI's show with the pipeline that folds constants.
    path = tmp_path / "m.tvms"
    path.write_text(MODULE.format(body=body))
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", "show", str(path), "--pipeline", "zero"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("body", [
    "B[vi, vj] = A[vj, vi] + T.call_packed(\"f\", 1)",
    "B[vi, vj] = A[vj, vi] + T.call_llvm_pure_intrin(\"int32\", \"llvm.ctpop.i32\", A[vj, vi])",
])
def test_packed_and_llvm_calls_are_not_folded(body):
    assert not folded(fold(body)[1])


def test_a_while_loop_or_too_much_work_is_not_folded():
    prim = tvms.parse('''# from tvm.script import tir as T
@T.prim_func
def spin(A: T.Buffer((1,), "int32")):
    while A[0] < 10:
        A[0] = A[0] + 1
''')
    assert not foldable(prim)
    big = tvms.parse(f'''# from tvm.script import tir as T
@T.prim_func
def big(A: T.Buffer((1,), "int32")):
    for i, j in T.grid({MAX_FOLD_WORK}, 2):
        A[0] = A[0] + 1
''')
    assert not foldable(big)
