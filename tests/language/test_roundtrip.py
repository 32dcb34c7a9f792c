"""Round-trip tests of the printer against real TVM output and the samples.

* Canonical text (every printout of seed 000/001, TVM 0.25's reference printouts) prints back
  byte for byte: ``print(parse(X)) == X``.
* Every sample that parses reaches a fixed point after one print, structurally equal to the
  original: ``P = print(parse(X)); print(parse(P)) == P`` and ``parse(P) == parse(X)``.
* Non-canonical samples print exactly as their golden in tests/golden/samples/ (regenerate with
  tests/golden/regenerate.py, after reading the diff).
"""

from __future__ import annotations

import pathlib
import re

import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.ir import structural_equal

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SAMPLES = ROOT / "samples"
REFERENCE = ROOT / "tools" / "tvm_reference_out_0.25"

SEED_FILES = sorted((GOLDEN / "seed000").glob("*.tvms")) + sorted((GOLDEN / "seed001").glob("*.tvms"))
SAMPLE_FILES = sorted(SAMPLES.glob("*.tvms"))

# Samples that refer to things their text does not hold (samples/README.md, last column) or
# use an op this toolchain does not have: parsing them must fail with a located diagnostic.
UNPARSEABLE = {
    "fx_module": "meta[relay.Constant]",
    "fx_mlp_module": "meta[relay.Constant]",
    "fx_mlp_highlevel": "relax.nn.dense",
    "two_dataflow_blocks_fn": "linear0",
}

# Samples that are already canonical TVM printer output (kind (a) in samples/README.md).
CANONICAL_SAMPLES = [
    "mlp_forward_relax_nn", "mlp_legalized", "mlp_main_fn", "mlp_printed", "mlp_script_printed",
    "mlp_torch_fx", "mlp_torch_fx_legalized", "mlp_torch_fx_main_fn", "mlp_torch_fx_zero", "mlp_zero",
]


def _id(path: pathlib.Path) -> str:
    return f"{path.parent.name}/{path.name}"


# ----------------------------------------------------------------------------- seed goldens


IR_LINE = "# from tvm.script import ir as I\n"


def as_tvm_027_prints(text: str) -> str:
    """TVM printer output as TVM 0.27 writes it: the TVM the tutorials used sometimes left the
    ``ir as I`` line out of a module's header, and tvms regenerates it (issue 32, rule 7)."""
    if text.startswith("# from tvm.script import") and IR_LINE not in text and "@I.ir_module" in text:
        return IR_LINE + text
    return text


@pytest.mark.parametrize("path", SEED_FILES, ids=_id)
def test_seed_golden_prints_back_byte_for_byte(path):
    text = path.read_text()
    assert tvms.parse(text).script() == as_tvm_027_prints(text)


HEADERS = {
    "without ir": "# from tvm.script import tir as T\n# from tvm.script import relax as R\n",
    "out of order": "# from tvm.script import relax as R\n# from tvm.script import ir as I\n"
                    "# from tvm.script import tir as T\n",
    "a line twice": "# from tvm.script import ir as I\n# from tvm.script import tir as T\n"
                    "# from tvm.script import tir as T\n# from tvm.script import relax as R\n",
}
CANONICAL_HEADER = IR_LINE + "# from tvm.script import tir as T\n# from tvm.script import relax as R\n\n"
PRIM_FUNC_ONLY = """
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(1)
"""


@pytest.mark.parametrize("header", HEADERS.values(), ids=HEADERS.keys())
def test_the_header_is_regenerated_as_tvm_prints_it(header):
    text = (GOLDEN / "seed000" / "legalized.tvms").read_text()
    assert IR_LINE not in text                             # TVM printed this module without `ir as I`
    printed = tvms.parse(header + text[text.index("\n\n"):]).script()
    assert printed.startswith(CANONICAL_HEADER)


def test_a_header_line_of_a_dialect_not_used_goes():
    printed = tvms.parse("# from tvm.script import relax as R\n" + PRIM_FUNC_ONLY).script()
    assert printed.startswith(IR_LINE + "# from tvm.script import tir as T\n\n")


@pytest.mark.parametrize("seed", ["seed000", "seed001"])
def test_main_function_alone(seed):
    text = (GOLDEN / seed / "main_function.tvms").read_text()
    func = tvms.parse(text)
    assert isinstance(func, relax.Function)
    assert func.script() == text
    assert str(func) == text


@pytest.mark.parametrize("seed", ["seed000", "seed001"])
def test_module_function_prints_alone_with_its_own_header(seed):
    mod = tvms.load(GOLDEN / seed / "torch_module.tvms")
    expected = (GOLDEN / seed / "main_function.tvms").read_text()
    assert str(mod["main"]) == expected
    assert mod["main"].script() == expected
    assert structural_equal(mod["main"], tvms.parse(expected))


@pytest.mark.parametrize("seed", ["seed000", "seed001"])
def test_global_vars(seed):
    lines = (GOLDEN / seed / "global_vars.txt").read_text().splitlines()
    assert str(tvms.load(GOLDEN / seed / "torch_module.tvms").get_global_vars()) == lines[0]
    assert str(tvms.load(GOLDEN / seed / "legalized.tvms").get_global_vars()) == lines[1]


def test_handwritten_mlp_prints_as_tvm_printed_it():
    mod = tvms.load(SAMPLES / "mlp.tvms")
    assert mod.script() == (GOLDEN / "seed000" / "script_module.tvms").read_text()


# ----------------------------------------------------------------------------- samples


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.stem)
def test_sample_print_is_a_fixed_point(path):
    source = path.read_text()
    if path.stem in UNPARSEABLE:
        with pytest.raises(tvms.TVMScriptError) as info:
            tvms.parse(source, str(path))
        err = info.value
        assert err.span is not None and err.span.line >= 1
        assert f"{path}:{err.span.line}:" in str(err)
        assert UNPARSEABLE[path.stem] in source.splitlines()[err.span.line - 1]
        return
    original = tvms.parse(source, str(path))
    printed = original.script()
    reparsed = tvms.parse(printed)
    assert reparsed.script() == printed
    assert structural_equal(reparsed, original)
    assert structural_equal(original, reparsed)


@pytest.mark.parametrize("name", CANONICAL_SAMPLES)
def test_canonical_sample_prints_back_byte_for_byte(name):
    text = (SAMPLES / f"{name}.tvms").read_text()
    assert tvms.parse(text).script() == as_tvm_027_prints(text)


GOLDEN_SAMPLES = sorted((GOLDEN / "samples").glob("*.tvms"))


@pytest.mark.parametrize("golden", GOLDEN_SAMPLES, ids=lambda p: p.stem)
def test_sample_prints_as_its_golden(golden):
    mod = tvms.load(SAMPLES / golden.name)
    assert mod.script() == golden.read_text()
    # The golden is canonical itself.
    assert tvms.parse(golden.read_text()).script() == golden.read_text()


def test_every_sample_is_covered_by_a_golden():
    names = {p.stem for p in SAMPLE_FILES}
    covered = set(UNPARSEABLE) | set(CANONICAL_SAMPLES) | {p.stem for p in GOLDEN_SAMPLES}
    assert names == covered, "run tests/golden/regenerate.py (and read the diff)"
    assert not set(CANONICAL_SAMPLES) & {p.stem for p in GOLDEN_SAMPLES}


# ----------------------------------------------------------------------------- TVM's own printouts
#
# tools/tvm_reference_out_0.25/ holds what Apache TVM 0.25 prints for small programs. TVM 0.25
# writes TIR in its newer spelling (`tirx`, `T.sblock`, `s_tir=True`); turned back into the classic
# spelling the printouts are canonical classic TVMScript and must print back unchanged.

_CLASSIC_SPELLING = [
    ("# from tvm.script import tirx as T", "# from tvm.script import tir as T"),
    ("# from tvm.tirx.layout import Axis\n", ""),
    ("@T.prim_func(s_tir=True)", "@T.prim_func"),
    ("T.sblock_alloc_buffer(", "T.alloc_buffer("),
    ("T.sblock_attr(", "T.block_attr("),
    ("T.sblock(", "T.block("),
    ('"tirx.noalias"', '"tir.noalias"'),
]

# Lines of a probe TVM 0.25 prints in a way classic TVMScript does not: dropped or rewritten.
_EDITS = {
    # TVM prints `(a < b) == (b < c)` as `a < b == (b < c)`, which Python reads as a chained
    # comparison: TVM's own bug (our printer parenthesizes; see test_hypothesis.py).
    "c_exprs": [("    C[4] = a < b == (b < c)\n", "")],
    # 0.25 prints AssertStmt messages in its new (kind, [parts]) form; classic is the string.
    "d_if_else_and_index_exprs": [('("RuntimeError", ["n must be positive"])', '"n must be positive"')],
}

# Sections that are not classic TVMScript output at all.
_NOT_CLASSIC = {
    ("d_alloc_scopes", 1): "T.alloc_shared / T.alloc_local are TVM 0.25 sugar",
    ("d_alloc_scopes", 2): "T.alloc_shared / T.alloc_local are TVM 0.25 sugar",
    ("e_relax_consts", 1): "constants in a metadata section",
    ("e_relax_consts", 2): "constants in a metadata section",
    ("f_module_level", 17): "script(syntax_sugar=False)",
    ("g_classic_spellings", 4): "T.sblock in a non-s_tir function (tirx only)",
}

_XFAIL = {
    ("d_handle_misc", 2): "TVM prints a stride variable used only in its buffer as a string "
    '("A_s0") and leaves the buffer\'s own elem_offset variable implicit (offset_factor=1); '
    "tvms buffers do not model buffer-defined variables",
}


def _reference_sections():
    cases = []
    for path in sorted(REFERENCE.glob("*.txt")):
        if path.stem == "VERSION":
            continue
        raw = path.read_text()
        for i, section in enumerate(re.split(r"^#### .*\n", raw, flags=re.M)):
            if not section.startswith("# from tvm.script import") or "ERROR:" in section:
                continue
            key = (path.stem, i)
            if key in _NOT_CLASSIC:
                continue
            for a, b in _CLASSIC_SPELLING:
                section = section.replace(a, b)
            for a, b in _EDITS.get(path.stem, []):
                assert a in section
                section = section.replace(a, b)
            section = section.rstrip("\n") + "\n"
            marks = [pytest.mark.xfail(strict=True, reason=_XFAIL[key])] if key in _XFAIL else []
            cases.append(pytest.param(section, id=f"{path.stem}#{i}", marks=marks))
    return cases


@pytest.mark.parametrize("text", _reference_sections())
def test_tvm_reference_printout_prints_back(text):
    assert tvms.parse(text).script() == text


# ----------------------------------------------------------------------------- small printer facts


def _tir_body(body: str, params: str = "A: T.Buffer((4,), \"float32\")") -> str:
    return f"# from tvm.script import tir as T\n\n@T.prim_func\ndef main({params}):\n{body}"


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0, "T.float32(0.0)"),
        (0.70710678118654757, "T.float32(0.70710678118654757)"),
        (1e-5, "T.float32(1.0000000000000001e-05)"),
        (1e17, "T.float32(100000000000000000.0)"),
        (3.4028234663852886e38, "T.float32(340282346638528859811704183484516925440.0)"),
        (float("inf"), 'T.float32("inf")'),
        (float("-inf"), 'T.float32("-inf")'),
        (float("nan"), 'T.float32("nan")'),
        (-2.5, "T.float32(-2.5)"),
    ],
)
def test_float_literal_text(value, text):
    assert tir.FloatImm("float32", value).script() == text
    src = _tir_body(f"    A[0] = {text}\n")
    assert tvms.parse(src).script() == src


def test_symbolic_dims_declared_once_at_function_top():
    src = (
        "# from tvm.script import ir as I\n# from tvm.script import tir as T\n"
        "# from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n"
        "    @R.function\n"
        '    def main(x: R.Tensor(("n", 4), dtype="float32"), y: R.Tensor(dtype="float32", ndim=2)) '
        '-> R.Tensor(("n", 4), dtype="float32"):\n'
        "        n = T.int64()\n"
        '        R.func_attr({"num_input": 1})\n'
        "        k = T.int64()\n"
        "        with R.dataflow():\n"
        '            lv: R.Tensor((n, 4), dtype="float32") = R.add(x, x)\n'
        '            m: R.Tensor((k, 5), dtype="float32") = R.match_cast(y, R.Tensor((k, 5), dtype="float32"))\n'
        "            R.output(lv)\n"
        "        return lv\n"
    )
    assert tvms.parse(src).script() == src


def test_buffer_with_symbolic_shape_is_matched_after_the_scalar_params():
    # TVM inlines only buffers of constant shape; a shape using a later scalar parameter must
    # not declare that variable a second time.
    src = _tir_body(
        "    A = T.match_buffer(a, (n, 4))\n    for i in range(n):\n        A[i, 0] = T.float32(0.0)\n",
        "a: T.handle, n: T.int64",
    )
    mod = tvms.parse(src)
    assert mod.script() == src
    assert structural_equal(tvms.parse(mod.script()), mod)


def test_buffer_data_pointer_prints_as_attribute():
    src = _tir_body(
        '    T.call_extern("int32", "f", A.data, B.data)\n',
        'A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32")',
    )
    assert tvms.parse(src).script() == src


def test_loop_with_nonzero_min_round_trips():
    src = _tir_body(
        "    for i in range(n, n + 4):\n        A[i - n] = T.float32(1.0)\n", 'A: T.Buffer((4,), "float32"), n: T.int32'
    )
    func = tvms.parse(src)
    loop = func.body
    assert isinstance(loop, tir.For) and tir.is_const_int(loop.extent, 4)
    assert func.script() == src


def test_call_tir_of_extern_function_prints_as_call_dps_packed():
    mod = tvms.load(SAMPLES / "extern_call.tvms")
    text = mod.script()
    assert 'R.call_dps_packed("env.linear", (x, w0, b0), out_sinfo=' in text
    assert "R.call_tir(" not in text


def test_sinfo_args_tuple_has_no_trailing_comma_after_two_items():
    src = (
        "# from tvm.script import relax as R\n\n@R.function(pure=False)\n"
        'def main(x: R.Tensor((4,), dtype="float32")) -> R.Tuple(R.Tensor((4,), dtype="float32"), R.Object):\n'
        '    d: R.Tuple(R.Tensor((4,), dtype="float32"), R.Object) = R.call_packed("g", x, '
        'sinfo_args=(R.Tensor((4,), dtype="float32"), R.Object))\n'
        "    return d\n"
    )
    assert tvms.parse(src).script() == src


def test_relax_float_constants_at_full_precision():
    src = (
        "# from tvm.script import relax as R\n\n@R.function\n"
        'def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):\n'
        '    c0: R.Tensor((), dtype="float64") = R.const(0.10000000000000001, "float64")\n'
        '    c1: R.Tensor((), dtype="float32") = R.const(1152921504606846976.0, "float32")\n'
        '    c2: R.Tensor((2,), dtype="float32") = R.const([1.0, "-inf"], "float32")\n'
        "    return x\n"
    )
    assert tvms.parse(src).script() == src


# ----------------------------------------------------------------------------- found elsewhere
# Bugs these tests found outside the printer: free symbolic dims compared by identity, NaN
# constants equal to themselves.


def test_broadcast_of_different_symbolic_dims_has_unknown_shape():
    func = tvms.parse(
        "# from tvm.script import relax as R\n\n@R.function\n"
        'def main(x: R.Tensor(("n", 4), dtype="float32"), y: R.Tensor(("m", 4), dtype="float32")):\n'
        "    z = R.add(x, y)\n    return z\n"
    )
    sinfo = func.body.blocks[0].bindings[0].var.struct_info
    assert sinfo.shape is None and sinfo.ndim == 2


def test_relax_nan_constant_round_trips_structurally():
    src = (
        "# from tvm.script import relax as R\n\n@R.function\n"
        'def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):\n'
        '    c: R.Tensor((), dtype="float32") = R.const("nan", "float32")\n'
        "    return x\n"
    )
    func = tvms.parse(src)
    assert func.script() == src
    assert structural_equal(tvms.parse(func.script()), func)


def test_symbolic_shape_expressions_print_as_relax_writes_them():
    """Relax dims are int64: literals in shape expressions print bare (``n // 2 + 1``, not
    ``T.int64(2)``), and in a signature, where names are not declared yet, the expression is
    quoted as a whole and parses back as an expression."""
    src = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n // 2 + 1", 4), dtype="float32"):
        n = T.int64()
        y: R.Tensor((n // 2 + 1, 4), dtype="float32") = R.strided_slice(x, (R.prim_value(0),), (R.prim_value(0),), (R.prim_value(1000),), (R.prim_value(2),), assume_inbound=False)
        return y
'''
    mod = tvms.parse(src)
    assert mod.script() == src
    dim = mod["main"].ret_struct_info.shape[0]
    assert isinstance(dim, tvms.tir.Add) and dim.b.dtype == "int64" and dim.b.value == 1


def test_axis_remap_of_one_iterator():
    """``vi = T.axis.remap("S", [i])`` (the MLC course's spelling) reads like the tuple form."""
    one = tvms.parse('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi]
''')
    assert 'vi = T.axis.spatial(8, i)' in one.script()
