"""Files as TVM writes them: real import lines as the header, the metadata section shown only
when asked (and always kept in files), a module's class name kept by ``tvms fmt``, and the names
TVM code reaches for (``tvm.ir.module.IRModule``, ``int()`` on a constant, ``Target``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.diagnostics import TVMScriptError
from tvmscript.printer import METADATA_OMITTED

BODY = '''@I.ir_module
class Messy:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + T.float32(1.0)
'''


def cli(*args, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tvmscript.cli", *map(str, args)], input=input,
                          capture_output=True, text=True, timeout=120)


def run_add_one(mod) -> np.ndarray:
    a = np.arange(4, dtype="float32")
    b = tvms.nd.array(np.zeros(4, "float32"))
    tvms.compile(mod, "llvm")["add_one"](tvms.nd.array(a), b)
    return b.numpy()


# ----------------------------------------------------------------------------- import lines


@pytest.mark.parametrize("header", [
    "from tvm.script import ir as I\nfrom tvm.script import tir as T\n",
    "from tvm.script import ir as I, tir as T\n",
    "import tvm\nfrom tvm.script import ir as I\nfrom tvm.script import tirx as T\n",
    "from tvm.script import relax as R\nfrom tvm.script import ir as I  # the dialects\nfrom tvm.script import tir as T\n",
    "# a comment first\nimport tvm\nfrom tvm.script.parser import (ir as I, tir as T)\n\n",
])
def test_real_import_lines_are_the_header(header):
    mod = tvms.parse(header + "\n" + BODY)
    text = mod.script()
    assert text.startswith("# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n")
    assert "import tvm\n" not in text and "\nfrom " not in text
    np.testing.assert_array_equal(run_add_one(mod), np.arange(4, dtype="float32") + 1)


@pytest.mark.parametrize("line, says", [
    ("import numpy as np", "'numpy as np' is not TVM"),
    ("from tvm import relax", "'tvm' is not a TVMScript dialect package"),
    ("from tvm.script import tir as tir", "must be imported as T"),
    ("from tvm.script import te as T", "'te as T' is not a TVMScript dialect"),
])
def test_other_imports_are_clear_errors(line, says):
    with pytest.raises(TVMScriptError, match="unsupported import") as info:
        tvms.parse(f"from tvm.script import ir as I\n{line}\n\n{BODY}", "m.tvms")
    assert says in str(info.value)
    assert (info.value.span.filename, info.value.span.line, info.value.span.col) == ("m.tvms", 2, 1)


def test_positions_after_the_header_are_unchanged():
    src = "import tvm  # note\nfrom tvm.script import ir as I, tir as T\n\n" + BODY.replace("A[i] +", "Q[i] +")
    with pytest.raises(TVMScriptError, match="Q") as info:
        tvms.parse(src)
    line = src[: src.index("Q[i]")].count("\n") + 1
    assert (info.value.span.line, info.value.span.col) == (line, src.split("\n")[line - 1].index("Q") + 1)


def test_an_import_after_the_first_decorator_is_a_clear_error():
    with pytest.raises(TVMScriptError, match="imports may only head the file") as info:
        tvms.parse(BODY + "import tvm\n")
    assert info.value.span.line == BODY.count("\n") + 1


def test_fmt_turns_imports_into_the_commented_header(tmp_path):
    path = tmp_path / "m.tvms"
    path.write_text("import tvm  # for Python\nfrom tvm.script import ir as I, tir as T\n\n# the module\n" + BODY)
    proc = cli("fmt", path)
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert text.startswith("# from tvm.script import ir as I\n# from tvm.script import tir as T\n\n")
    assert "# for Python" in text and "# the module" in text  # no comment lost
    assert "\nimport" not in text
    assert cli("fmt", "--check", path).returncode == 0  # a fixed point


# ----------------------------------------------------------------------------- class name


def test_fmt_keeps_the_class_name_and_script_prints_module(tmp_path):
    path = tmp_path / "m.tvms"
    path.write_text("from tvm.script import ir as I, tir as T\n" + BODY.replace("1.0", "1"))
    assert cli("fmt", path).returncode == 0
    assert "class Messy:" in path.read_text()
    mod = tvms.load(path)
    assert "class Module:" in mod.script()  # TVM prints every module as Module
    assert "class Other:" in mod.script(name="Other")


def test_fmt_keeps_the_class_name_where_cls_is_bound(tmp_path):
    src = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Net:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + T.float32(1.0)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Net
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
        return y
'''
    path = tmp_path / "net.tvms"
    path.write_text(src)
    proc = cli("fmt", path)
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert "class Net:" in text and "cls = Net" in text
    x = np.linspace(-1, 1, 4).astype("float32")
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(text), "llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy(), x + 1)


def test_modules_built_in_python_print_as_module():
    bb = tvms.relax.BlockBuilder()
    x = tvms.relax.Var("x", tvms.relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(tvms.relax.op.add(x, x)))
    assert "class Module:" in bb.get().script()


# ----------------------------------------------------------------------------- metadata


WEIGHT = np.arange(64, dtype="float32") / 7


def weighted_module():
    bb = tvms.relax.BlockBuilder()
    x = tvms.relax.Var("x", tvms.relax.TensorStructInfo((64,), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(tvms.relax.op.add(x, tvms.relax.const(WEIGHT))))
    return bb.get()


def run_main(mod, x):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](tvms.nd.array(x)).numpy()


def test_script_leaves_the_metadata_out_unless_asked():
    mod = weighted_module()
    shown = mod.script()
    assert 'metadata["relax.expr.Constant"][0]' in shown
    assert "metadata = {" not in shown
    assert shown.rstrip("\n").endswith(METADATA_OMITTED)
    assert str(mod) == shown
    full = mod.script(show_meta=True)
    assert "metadata = {" in full and METADATA_OMITTED not in full
    x = np.ones(64, "float32")
    np.testing.assert_allclose(run_main(tvms.parse(full), x), x + WEIGHT, rtol=1e-6)


def test_show_follows_script(capsys):
    mod = weighted_module()
    mod.show()
    assert METADATA_OMITTED in capsys.readouterr().out
    mod.show(show_meta=True)
    assert "metadata = {" in capsys.readouterr().out


def test_cli_show_omits_and_fmt_keeps_the_metadata(tmp_path):
    path = tmp_path / "w.tvms"
    path.write_text(weighted_module().script(show_meta=True))
    shown = cli("show", "--no-color", path)
    assert shown.returncode == 0 and METADATA_OMITTED in shown.stdout and "metadata = {" not in shown.stdout
    full = cli("show", "--no-color", "--show-meta", path)
    assert full.returncode == 0 and "metadata = {" in full.stdout
    assert cli("fmt", path).returncode == 0
    x = np.full(64, 2.0, "float32")
    np.testing.assert_allclose(run_main(tvms.load(path), x), x + WEIGHT, rtol=1e-6)
    piped = cli("fmt", "-", input=path.read_text())
    assert piped.returncode == 0 and "metadata = {" in piped.stdout


# ----------------------------------------------------------------------------- names


def test_tvm_names():
    from tvmscript.ir.module import IRModule

    assert IRModule is tvms.ir.IRModule and tvms.ir.module.IRModule is IRModule
    n = tvms.tir.IntImm("int64", 7)
    assert int(n) == 7 and float(n) == 7.0 and float(tvms.tir.FloatImm("float32", 0.5)) == 0.5
    assert np.zeros((int(n),)).shape == (7,)
    assert str(tvms.target.Target("llvm")).startswith("llvm")
