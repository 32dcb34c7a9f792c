"""tvmscript.lsp.analysis: hover, navigation, rename, completion, signature help, semantic
tokens, outline and folding on the samples and small programs, and on broken text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tvmscript.lsp.analysis import (
    TOKEN_MODIFIERS,
    TOKEN_TYPES,
    Document,
    Range,
    RenameError,
    Token,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

SNIPPET = '''\
@I.ir_module
class Mod:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in T.parallel(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        cls = Mod
        with R.dataflow():
            y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))
            z = R.nn.relu(y)
            R.output(z)
        return z
'''


def sample(name: str) -> tuple[Document, list[str]]:
    text = (SAMPLES / name).read_text()
    return Document(text, name), text.split("\n")


def pos(lines: list[str], line: int, word: str, nth: int = 0, offset: int = 0) -> tuple[int, int]:
    """(line, character) of the ``nth`` ``word`` on a line (0-based), moved by ``offset``."""
    char = -1
    for _ in range(nth + 1):
        char = lines[line].index(word, char + 1)
    return line, char + offset


@pytest.fixture(scope="module")
def mlp():
    return sample("mlp.tvms")


@pytest.fixture(scope="module")
def mm_relu():
    return sample("mm_relu.tvms")


@pytest.fixture(scope="module")
def snippet():
    return Document(SNIPPET, "snippet.tvms"), SNIPPET.split("\n")


# ----------------------------------------------------------------------------- hover


def test_hover_relax_variable_shows_struct_info(mlp):
    doc, lines = mlp
    # `matmul` where it is used (line 15: add = R.add(matmul, fc1_bias))
    assert doc.hover(*pos(lines, 14, "matmul")) == (
        '```python\nmatmul: R.Tensor((1, 256), dtype="float32")\n```\n\nRelax dataflow variable'
    )
    assert doc.hover(*pos(lines, 4, "x")) == (
        '```python\nx: R.Tensor((1, 784), dtype="float32")\n```\n\nRelax parameter'
    )


def test_hover_op_shows_signature_with_defaults(mlp):
    doc, lines = mlp
    assert doc.hover(*pos(lines, 13, "R.matmul", offset=3)) == (
        '```python\nR.matmul(x1, x2, out_dtype="void")\n```\n\n'
        "Relax op `relax.matmul` (fusion pattern: out_ewise_fusable)"
    )
    conv = Document("@R.function\ndef f(x: R.Tensor((1, 3, 8, 8), \"float32\"), w: R.Tensor((4, 3, 3, 3), \"float32\")):\n"
                    "    y = R.nn.conv2d(x, w)\n    return y\n").hover(2, 13)
    assert conv.startswith("```python\nR.nn.conv2d(data, weight, strides=[1, 1], padding=[0, 0, 0, 0]")
    assert 'data_layout="NCHW"' in conv


def test_hover_tir_intrinsic(mm_relu):
    doc, lines = mm_relu
    assert doc.hover(*pos(lines, 22, "T.max", offset=2)) == "```python\nT.max(a, b)\n```"
    text = Document("@T.prim_func\ndef f(A: T.Buffer((4,), \"float32\")):\n    for i in range(4):\n"
                    "        A[i] = T.exp(A[i])\n").hover(3, 18)
    assert text == "```python\nT.exp(x)\n```\n\nTIR intrinsic `tir.exp`"


def test_hover_buffer(mm_relu):
    doc, lines = mm_relu
    expected = ('```python\nY: T.Buffer((128, 128), "float32")\n```\n\n'
                "buffer: shape `(128, 128)`, dtype `float32`, scope `global`")
    assert doc.hover(*pos(lines, 9, "Y")) == expected  # its allocation
    assert doc.hover(*pos(lines, 17, "Y", nth=1)) == expected  # a use
    scoped = Document('@T.prim_func\ndef f(A: T.Buffer((8,), "float16")):\n'
                      '    S = T.alloc_buffer((8,), "float16", scope="shared")\n'
                      '    for i in range(8):\n        S[i] = A[i]\n')
    assert scoped.hover(4, 8).endswith("buffer: shape `(8,)`, dtype `float16`, scope `shared`")


def test_hover_loop_variable(mm_relu, snippet):
    doc, lines = mm_relu
    assert doc.hover(*pos(lines, 10, "k")) == "```python\n(loop variable) k: range(0, 128)\n```\n\nkind: serial"
    sdoc, slines = snippet
    assert sdoc.hover(*pos(slines, 6, "i)")) == "```python\n(loop variable) i: range(0, 4)\n```\n\nkind: parallel"
    bound = Document('@T.prim_func\ndef f(A: T.Buffer((64,), "float32")):\n'
                     '    for tx in T.thread_binding(64, thread="threadIdx.x"):\n        A[tx] = T.float32(0)\n')
    assert bound.hover(3, 10) == ("```python\n(loop variable) tx: range(0, 64)\n```\n\n"
                                  "kind: thread_binding, thread `threadIdx.x`")


def test_hover_block_and_block_iterator(mm_relu):
    doc, lines = mm_relu
    assert doc.hover(*pos(lines, 11, '"Y"')) == (
        '```python\nwith T.block("Y")\n```\n\n| iterator | kind | range |\n|---|---|---|\n'
        "| vi | S | range(0, 128) |\n| vj | S | range(0, 128) |\n| vk | R | range(0, 128) |"
    )
    assert doc.hover(*pos(lines, 17, "vk")) == (
        '```python\n(block iterator) vk: range(0, 128)\n```\n\nkind: R (reduce), block "Y"'
    )


def test_hover_remapped_iterators_take_the_loop_extents():
    doc, lines = sample("two_dataflow_blocks.tvms")
    assert doc.hover(*pos(lines, 11, "vk")) == (
        '```python\n(block iterator) vk: range(0, 784)\n```\n\nkind: R (reduce), block "Y"'
    )


def test_hover_function_signature(snippet):
    doc, lines = snippet
    assert doc.hover(*pos(lines, 13, "add_one")) == (
        '```python\n@T.prim_func\ndef add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"))\n```'
        "\n\nTensorIR function"
    )


# ----------------------------------------------------------------------------- navigation


def test_definition_of_call_tir_target(snippet):
    doc, lines = snippet
    assert doc.definition(*pos(lines, 13, "add_one")) == [Range(3, 8, 3, 15)]
    # older TVMScript's bare name: R.call_tir(linear0, ...)
    old, olines = sample("two_dataflow_blocks.tvms")
    line = next(i for i, text in enumerate(olines) if "R.call_tir(linear0" in text)
    assert old.definition(*pos(olines, line, "linear0")) == [Range(3, 8, 3, 15)]


def test_definition_of_buffer_and_variable(mm_relu, mlp):
    doc, lines = mm_relu
    assert doc.definition(*pos(lines, 22, "Y")) == [Range(9, 8, 9, 9)]
    assert doc.definition(*pos(lines, 17, "A")) == [Range(5, 16, 5, 17)]
    rdoc, rlines = mlp
    assert rdoc.definition(*pos(rlines, 21, "gv")) == [Range(19, 12, 19, 14)]
    assert rdoc.definition(*pos(rlines, 14, "fc1_bias")) == [Range(6, 8, 6, 16)]


def test_loop_variables_of_sibling_loops_are_distinct(mm_relu):
    doc, lines = mm_relu
    first = doc.definition(*pos(lines, 12, "i)"))
    second = doc.definition(*pos(lines, 20, "i)"))
    assert first == [Range(10, 12, 10, 13)] and second == [Range(18, 12, 18, 13)]


def test_references(mm_relu, mlp):
    doc, lines = mm_relu
    refs = doc.references(*pos(lines, 9, "Y"))
    assert refs == [Range(9, 8, 9, 9), Range(16, 20, 16, 21), Range(17, 16, 17, 17), Range(17, 28, 17, 29),
                    Range(22, 34, 22, 35)]
    assert doc.references(*pos(lines, 9, "Y"), include_declaration=False) == refs[1:]
    rdoc, rlines = mlp
    assert len(rdoc.references(*pos(rlines, 13, "matmul"))) == 2


# ----------------------------------------------------------------------------- rename


def test_rename_edits(snippet):
    doc, lines = snippet
    assert doc.prepare_rename(*pos(lines, 14, "y)")) == Range(14, 26, 14, 27)
    assert doc.rename(*pos(lines, 14, "y)"), "w") == [(Range(13, 12, 13, 13), "w"), (Range(14, 26, 14, 27), "w")]
    assert doc.rename(*pos(lines, 13, "add_one"), "inc") == [(Range(3, 8, 3, 15), "inc"), (Range(13, 31, 13, 38), "inc")]


def test_rename_refused(snippet):
    doc, lines = snippet
    with pytest.raises(RenameError, match="already defined"):
        doc.rename(*pos(lines, 14, "y)"), "x")  # the parameter x is visible there
    with pytest.raises(RenameError, match="already defined"):
        doc.rename(*pos(lines, 13, "add_one"), "main")
    with pytest.raises(RenameError, match="keyword"):
        doc.rename(*pos(lines, 14, "y)"), "lambda")
    with pytest.raises(RenameError, match="not a valid name"):
        doc.rename(*pos(lines, 14, "y)"), "2y")
    with pytest.raises(RenameError):
        doc.rename(*pos(lines, 6, "T.axis", offset=2), "Q")  # a dialect name is not renamable
    assert doc.prepare_rename(*pos(lines, 6, "T.axis", offset=2)) is None


# ----------------------------------------------------------------------------- completion


def labels(items) -> set[str]:
    return {c.label for c in items}


def test_completion_after_dialect_names():
    doc = Document("@R.function\ndef f(x: R.Tensor((4,), \"float32\")):\n    y = R.\n    z = R.nn.\n"
                   "    w = R.ma\n    return x\n")
    relax = doc.completions(2, 10)
    assert {"add", "matmul", "nn", "call_tir", "Tensor", "dataflow", "output"} <= labels(relax)
    kinds = {c.label: c.kind for c in relax}
    assert kinds["nn"] == "module" and kinds["add"] == "function" and kinds["Tensor"] == "type"
    assert next(c for c in relax if c.label == "matmul").detail == 'R.matmul(x1, x2, out_dtype="void")'
    nn = labels(doc.completions(3, 13))
    assert {"relu", "conv2d", "softmax", "layer_norm"} <= nn and "add" not in nn
    assert labels(doc.completions(4, 12)) >= {"matmul", "max"} and "add" not in labels(doc.completions(4, 12))
    tir = Document("@T.prim_func\ndef f():\n    T.\n").completions(2, 6)
    assert {"grid", "block", "axis", "exp", "float32", "alloc_buffer", "if_then_else"} <= labels(tir)
    assert next(c for c in tir if c.label == "float32").kind == "type"


def test_completion_of_module_functions_and_names(snippet):
    doc, lines = snippet
    members = doc.completions(*pos(lines, 13, "cls.", offset=4))
    assert [(c.label, c.kind) for c in members] == [("add_one", "function"), ("main", "function")]
    names = labels(doc.completions(*pos(lines, 15, "z")))
    assert {"x", "y", "z", "cls", "Mod", "T", "R", "I"} <= names
    inside_tir = labels(doc.completions(*pos(lines, 7, "A[")))
    assert {"A", "B", "i", "vi"} <= inside_tir and "x" not in inside_tir


def test_no_completion_in_strings_and_comments(snippet):
    doc, lines = snippet
    assert doc.completions(*pos(lines, 5, '"B"', offset=2)) == []
    assert Document("# R.\n").completions(0, 4) == []


def test_signature_help_active_parameter():
    text = "@R.function\ndef f(x: R.Tensor((2, 2), \"float32\")):\n    y = R.matmul(x, x, out_dtype=\"float32\")\n    return y\n"
    doc = Document(text)
    line = text.split("\n")[2]
    sig = doc.signature_help(2, line.index("(") + 1)
    assert sig.label == 'R.matmul(x1, x2, out_dtype="void")'
    assert sig.parameters == ["x1", "x2", 'out_dtype="void"'] and sig.active_parameter == 0
    assert doc.signature_help(2, line.index("x,") + 3).active_parameter == 1
    assert doc.signature_help(2, line.index("out_dtype") + 4).active_parameter == 2
    assert doc.signature_help(3, 8) is None
    # an unfinished call on a line still being typed
    typing = Document("@R.function\ndef f(x: R.Tensor((2, 2), \"float32\")):\n    y = R.nn.conv2d(x, x, (1, 1), \n")
    assert typing.signature_help(2, 34).active_parameter == 3


def test_signature_help_of_module_function(snippet):
    doc, lines = snippet
    sig = doc.signature_help(*pos(lines, 13, "(x,)", offset=1))
    assert sig.label.startswith("R.call_tir(func, args, out_sinfo") and sig.active_parameter == 1


# ----------------------------------------------------------------------------- tokens, outline, folding


def test_semantic_tokens_exact():
    text = '@R.function\ndef f(x: R.Tensor((2,), "float32")):\n    y = R.nn.relu(x)  # act\n    return y\n'
    assert Document(text).semantic_tokens() == [
        Token(0, 0, 11, "decorator"),
        Token(1, 0, 3, "keyword"),
        Token(1, 4, 1, "function", ("declaration",)),
        Token(1, 6, 1, "parameter", ("declaration",)),
        Token(1, 9, 1, "namespace"),
        Token(1, 11, 6, "type", ("defaultLibrary",)),
        Token(1, 19, 1, "number"),
        Token(1, 24, 9, "type"),
        Token(2, 4, 1, "variable", ("declaration",)),
        Token(2, 8, 1, "namespace"),
        Token(2, 10, 2, "namespace"),
        Token(2, 13, 4, "function", ("defaultLibrary",)),
        Token(2, 18, 1, "parameter"),
        Token(2, 22, 5, "comment"),
        Token(3, 4, 6, "keyword"),
        Token(3, 11, 1, "variable"),
    ]
    for tok in Document(SNIPPET).semantic_tokens():
        assert tok.type in TOKEN_TYPES and set(tok.modifiers) <= set(TOKEN_MODIFIERS)


def test_document_symbols(snippet):
    doc, _ = snippet
    [module] = doc.document_symbols()
    assert (module.name, module.kind, module.selection_range) == ("Mod", "module", Range(1, 6, 1, 9))
    assert module.range == Range(0, 0, 16, 16)
    assert [(f.name, f.kind) for f in module.children] == [("add_one", "function"), ("main", "function")]
    add_one, main = module.children
    assert [(b.name, b.kind) for b in add_one.children] == [("B", "namespace")]
    assert [(b.name, b.kind, b.range.start_line, b.range.end_line) for b in main.children] == [
        ("R.dataflow()", "namespace", 12, 15)
    ]
    assert add_one.range == Range(2, 4, 7, 44)


def test_folding_ranges(snippet):
    doc, _ = snippet
    # class, add_one, for, with T.block, main, with R.dataflow()
    assert doc.folding_ranges() == [(0, 16), (2, 7), (4, 7), (5, 7), (9, 16), (12, 15)]
    multi = Document("@R.function\ndef f(x: R.Tensor((2,), \"float32\")):\n    y = R.add(\n        x,\n        x,\n    )\n    return y\n")
    assert (2, 4) in multi.folding_ranges()  # the call's lines, up to its last argument


# ----------------------------------------------------------------------------- broken text


def test_broken_file_still_answers(mlp):
    _, lines = mlp
    broken = list(lines)
    broken[15] = "            relu = R.nn."  # typing halfway through the file
    doc = Document("\n".join(broken), "broken_mlp.tvms")
    assert {"relu", "conv2d"} <= labels(doc.completions(15, len(broken[15])))
    # names and their definitions still resolve, below the broken line too
    assert doc.definition(*pos(broken, 18, "fc2_bias")) == [Range(8, 8, 8, 16)]
    assert doc.hover(*pos(broken, 14, "matmul")).startswith("```python\nmatmul")
    assert doc.signature_help(15, len(broken[15])) is None
    for method in (doc.semantic_tokens, doc.document_symbols, doc.folding_ranges):
        method()


def test_broken_file_keeps_last_good_types(mlp):
    text = (SAMPLES / "mlp.tvms").read_text()
    Document(text, "kept.tvms").hover(14, 20)  # the good version is analysed first
    lines = text.split("\n")
    broken = list(lines)
    broken[13] = "            matmul = R.matmul(x, permute_dims, out_dtype="  # an unfinished call
    doc = Document("\n".join([""] + broken), "kept.tvms")  # one line added above, too
    # `add` was on line 14; the text gained a line above it and does not build any more
    assert doc.analysis.types is None
    assert doc.hover(15, broken[14].index("add")) == (
        '```python\nadd: R.Tensor((1, 256), dtype="float32")\n```\n\nRelax dataflow variable'
    )


@pytest.mark.parametrize("text", [
    "", "@", "class", "def f(:\n", "@R.function\ndef f(x):\n    y = R.add(x,\n",
    "@I.ir_module\nclass M:\n    @T.prim_func\n    def f(A: T.Buffer((4,), \"float32\")):\n        for i in T.grid(4\n",
    "\x00\ufeff(((", "with T.block(\"x\"):\n  vi = T.axis.remap(\"SS\", [i])\n",
])
def test_nothing_raises_on_odd_text(text):
    doc = Document(text)
    lines = text.split("\n")
    for line in range(len(lines) + 1):
        for char in range(0, len(lines[line]) + 2 if line < len(lines) else 1):
            doc.hover(line, char)
            doc.definition(line, char)
            doc.references(line, char)
            doc.prepare_rename(line, char)
            doc.completions(line, char)
            doc.signature_help(line, char)
    doc.semantic_tokens()
    doc.document_symbols()
    doc.folding_ranges()
