"""The Python API with TVM's names: parse/load/from_source, show/script, indexing, equality."""

from __future__ import annotations

import io
import os

import pytest

import tvmscript as tvms
from tvmscript import ir, relax, tir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
GOLDEN = os.path.join(ROOT, "tests", "golden", "seed000")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_parse_load_and_from_source_agree():
    path = os.path.join(SAMPLES, "e2e_mlp.tvms")
    text = read(path)
    a = tvms.parse(text, filename=path)
    b = tvms.load(path)
    c = tvms.script.from_source(text)
    assert isinstance(a, ir.IRModule)
    assert tvms.ir.structural_equal(a, b)
    assert tvms.ir.structural_equal(a, c)
    assert a.script() == b.script() == c.script()


def test_module_indexing_by_name_and_global_var():
    mod = tvms.load(os.path.join(GOLDEN, "legalized.tvms"))
    gvs = mod.get_global_vars()
    assert [gv.name_hint for gv in gvs] == sorted(gv.name_hint for gv in gvs)
    main_gv = mod.get_global_var("main")
    assert mod[main_gv] is mod["main"]
    assert isinstance(mod["main"], relax.Function)
    assert isinstance(mod["matmul"], tir.PrimFunc)
    assert "relu" in mod and "missing" not in mod
    with pytest.raises(KeyError):
        mod["missing"]


def test_print_module_function_alone_has_its_own_header():
    mod = tvms.load(os.path.join(GOLDEN, "torch_module.tvms"))
    text = str(mod["main"])
    assert text == read(os.path.join(GOLDEN, "main_function.tvms"))
    assert text.startswith("# from tvm.script import relax as R\n\n@R.function\ndef main(")


def test_show_writes_plain_text_to_a_file_object():
    mod = tvms.load(os.path.join(SAMPLES, "mlp.tvms"))
    buf = io.StringIO()
    mod.show(file=buf)
    assert buf.getvalue() == mod.script()
    assert "\x1b[" not in buf.getvalue()


def test_structural_equal_ignores_names_but_not_structure():
    a = tvms.parse(read(os.path.join(SAMPLES, "te_relu_2d.tvms")))
    renamed = read(os.path.join(SAMPLES, "te_relu_2d.tvms")).replace("i0_1", "p").replace("i1_1", "q")
    b = tvms.parse(renamed)
    assert tvms.ir.structural_equal(a, b)
    changed = read(os.path.join(SAMPLES, "te_relu_2d.tvms")).replace("T.float32(0)", "T.float32(1)")
    c = tvms.parse(changed)
    assert not tvms.ir.structural_equal(a, c)


def test_struct_info_is_inferred_for_seed_ops():
    mod = tvms.load(os.path.join(SAMPLES, "mlp.tvms"))
    main = mod["main"]
    block = main.body.blocks[0]
    shapes = {b.var.name_hint: [d.value for d in b.var.struct_info.shape] for b in block.bindings}
    assert shapes["permute_dims"] == [784, 256]
    assert shapes["matmul"] == [1, 256]
    assert shapes["relu"] == [1, 256]
    assert shapes["matmul1"] == [1, 10]
    assert main.ret_struct_info.dtype == "float32"


def test_symbolic_dims_are_shared_within_a_function():
    text = '''@R.function
def f(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")):
    z = R.add(x, y)
    w = R.matmul(z, R.permute_dims(z))
    return w
'''
    func = tvms.parse(text)
    (x, y) = func.params
    assert x.struct_info.shape[0] is y.struct_info.shape[0]
    printed = tvms.parse(text).script()
    assert 'R.Tensor(("n", 4), dtype="float32")' in printed
    assert "n = T.int64()" in printed
    assert 'w: R.Tensor((n, n), dtype="float32")' in printed
    assert tvms.parse(printed).script() == printed


def test_matmul_broadcasts_batch_dims():
    text = '''@R.function
def f(a: R.Tensor((2, 1, 3, 4), "float32"), b: R.Tensor((5, 4, 6), "float32")):
    c = R.matmul(a, b, out_dtype="float16")
    return c
'''
    func = tvms.parse(text)
    c = func.body.blocks[0].bindings[0].var
    assert [d.value for d in c.struct_info.shape] == [2, 5, 3, 6]
    assert c.struct_info.dtype == "float16"


_ALIAS_CHECKS = """
import sys
import tvms
import tvmscript
assert tvms is tvmscript
import tvms.relax.frontend.onnx as a, tvmscript.relax.frontend.onnx as b
assert a is b
from tvms.compiler import build
from tvmscript.compiler.build_cuda import build_cuda
assert build.build_cuda is build_cuda
import tvms.runtime.vm
assert tvms.runtime.vm is sys.modules["tvmscript.runtime.vm"]
mod = tvms.parse(open(sys.argv[1]).read())
assert isinstance(mod, tvmscript.ir.IRModule) and type(mod) is tvms.IRModule
try:
    import tvms.no_such_module
except ModuleNotFoundError as err:
    assert err.name == "tvms.no_such_module", err.name
else:
    raise AssertionError("tvms.no_such_module imported")
print("ok")
"""


def test_import_tvms_is_the_tvmscript_package_not_a_copy():
    """TVM users type ``import tvm``; the command is ``tvms``. ``import tvms`` and its submodules
    are tvmscript's own module objects (one class per node type, one registry), in a fresh
    interpreter that imports them by either name."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _ALIAS_CHECKS, os.path.join(SAMPLES, "mlp.tvms")],
                         capture_output=True, text=True, cwd=ROOT + "/tests")
    assert out.stdout.strip() == "ok", out.stderr
