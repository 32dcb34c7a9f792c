"""TVMScript's Pygments lexer (tvmscript/highlight.py): every sample lexes without an error
token and loses no text, each kind of token gets its type, Pygments finds the lexer through the
installed entry point, and ``tvms show`` on a terminal colours with it."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil

import pygments.lexers
import pytest
from support.terminal import run_on_terminal
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String

from tvmscript.highlight import TVMScriptLexer, TVMScriptStyle

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.tvms"))

SNIPPET = '''# from tvm.script import relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor:
        for i in range(0x10):
            y = R.nn.relu(x) if True else T.float32(1.5e-3)
        assert not None, "SSR\\n"
        return y
'''

SNIPPET_TOKENS = [
    (Comment.Single, "# from tvm.script import relax as R"),
    (Name.Decorator, "@"), (Name.Decorator, "I.ir_module"),
    (Keyword, "class"), (Name.Class, "Module"), (Punctuation, ":"),
    (Name.Decorator, "@"), (Name.Decorator, "R.function"),
    (Keyword, "def"), (Name.Function, "main"), (Punctuation, "("), (Name, "x"), (Punctuation, ":"),
    (Name.Namespace, "R"), (Punctuation, "."), (Name.Builtin, "Tensor"),
    (Punctuation, "("), (Punctuation, "("), (Number.Integer, "2"), (Punctuation, ","),
    (Number.Integer, "3"), (Punctuation, ")"), (Punctuation, ","),
    (String.Double, '"'), (Keyword.Type, "float32"), (String.Double, '"'),
    (Punctuation, ")"), (Punctuation, ")"), (Operator, "->"),
    (Name.Namespace, "R"), (Punctuation, "."), (Name.Builtin, "Tensor"), (Punctuation, ":"),
    (Keyword, "for"), (Name, "i"), (Keyword, "in"), (Name.Builtin, "range"), (Punctuation, "("),
    (Number.Hex, "0x10"), (Punctuation, ")"), (Punctuation, ":"),
    (Name, "y"), (Operator, "="),
    (Name.Namespace, "R"), (Punctuation, "."), (Name.Namespace, "nn"), (Punctuation, "."),
    (Name.Builtin, "relu"), (Punctuation, "("), (Name, "x"), (Punctuation, ")"),
    (Keyword, "if"), (Keyword.Constant, "True"), (Keyword, "else"),
    (Name.Namespace, "T"), (Punctuation, "."), (Name.Builtin, "float32"),
    (Punctuation, "("), (Number.Float, "1.5e-3"), (Punctuation, ")"),
    (Keyword, "assert"), (Operator.Word, "not"), (Keyword.Constant, "None"), (Punctuation, ","),
    (String.Double, '"'), (String.Double, "SSR"), (String.Escape, "\\n"), (String.Double, '"'),
    (Keyword, "return"), (Name, "y"),
]


def lex(text: str) -> list[tuple[int, object, str]]:
    return list(TVMScriptLexer().get_tokens_unprocessed(text))


def visible(text: str) -> list[tuple[object, str]]:
    """The tokens of ``text`` less whitespace: what a reader sees coloured."""
    return [(ttype, value) for _, ttype, value in lex(text) if value.strip()]


def test_samples_lex_without_errors_and_lose_no_text():
    assert len(SAMPLES) >= 20
    for path in SAMPLES:
        text = path.read_text()
        tokens = lex(text)
        errors = [(pos, value) for pos, ttype, value in tokens if ttype in Error]
        assert errors == [], f"{path.name}: {errors[:5]}"
        assert "".join(value for _, _, value in tokens) == text, path.name
        positions = [pos for pos, _, _ in tokens]
        assert positions == sorted(positions), path.name
        # The samples use every kind the lexer tells apart.
    kinds = {ttype for path in SAMPLES for _, ttype, _ in lex(path.read_text())}
    for kind in (Comment.Single, Name.Decorator, Name.Namespace, Name.Builtin, Name.Function,
                 Name.Class, Keyword, Keyword.Type, Keyword.Constant, String.Double, Number.Integer,
                 Number.Float, Operator, Punctuation):
        assert kind in kinds, kind


def test_snippet_token_types():
    assert visible(SNIPPET) == SNIPPET_TOKENS


def test_strings_numbers_and_edge_cases():
    # A dtype is a type inside its quotes; any other string, and a dtype-looking prefix of one,
    # stays a string; a raw string's prefix is part of the string.
    assert visible('T.Buffer((4,), "int64x4", scope="global")') == [
        (Name.Namespace, "T"), (Punctuation, "."), (Name.Builtin, "Buffer"), (Punctuation, "("),
        (Punctuation, "("), (Number.Integer, "4"), (Punctuation, ","), (Punctuation, ")"),
        (Punctuation, ","), (String.Double, '"'), (Keyword.Type, "int64x4"), (String.Double, '"'),
        (Punctuation, ","), (Name, "scope"), (Operator, "="),
        (String.Double, '"'), (String.Double, "global"), (String.Double, '"'), (Punctuation, ")")]
    assert visible("'float32_x' r'bool'") == [
        (String.Single, "'"), (String.Single, "float32_x"), (String.Single, "'"),
        (String.Affix, "r"), (String.Single, "'"), (String.Single, "bool"), (String.Single, "'")]
    # Numbers; digits inside a name are the name's.
    assert visible("0b101 0o17 7 .5 2. 1_000 conv2d lv0") == [
        (Number.Bin, "0b101"), (Number.Oct, "0o17"), (Number.Integer, "7"), (Number.Float, ".5"),
        (Number.Float, "2."), (Number.Integer, "1_000"), (Name, "conv2d"), (Name, "lv0")]
    # An unterminated string ends at its line: the next line is code again.
    assert visible('x = "abc\ny = 1\n')[-3:] == [(Name, "y"), (Operator, "="), (Number.Integer, "1")]
    # A triple-quoted string spans lines; an indented decorator is still one; `@` between
    # operands is matrix multiplication; keywords inside names are names.
    assert visible('"""a\n"b"\n"""') == [(String.Double, '"""'), (String.Double, "a\n"),
                                          (String.Double, '"'), (String.Double, "b"),
                                          (String.Double, '"'), (String.Double, '"""')]
    assert visible("  @T.prim_func(private=True)\nc = a @ b_if\n")[:2] == [(Name.Decorator, "@"),
                                                                           (Name.Decorator, "T.prim_func")]
    assert visible("c = a @ b_if")[3] == (Operator, "@") and visible("c = a @ b_if")[4] == (Name, "b_if")
    # Characters TVMScript has no use for are left plain, never error tokens.
    assert all(ttype not in Error for _, ttype, _ in lex("x = a ! b $ ?\n"))


def test_pygments_finds_the_lexer_through_the_entry_point():
    entry = {ep.name: ep for ep in importlib.metadata.entry_points(group="pygments.lexers")}
    assert entry["tvmscript"].load() is TVMScriptLexer
    for alias in ("tvmscript", "tvms"):
        assert isinstance(pygments.lexers.get_lexer_by_name(alias), TVMScriptLexer)
    assert isinstance(pygments.lexers.get_lexer_for_filename("model.tvms"), TVMScriptLexer)
    # `pygmentize -g` weighs this guess (Python's lexer claims any text with "import " in it).
    assert TVMScriptLexer.analyse_text((ROOT / "samples" / "mlp_script_printed.tvms").read_text()) > 0.5
    assert TVMScriptLexer.analyse_text("def f(x):\n    return x\n") == 0.0


def _sgr_of(text: str, word: str) -> set[str]:
    """The SGR parameters (``38;2;R;G;B`` ...) rich put before each span that is exactly ``word``."""
    return set(re.findall(r"\x1b\[([0-9;]*)m" + re.escape(word) + r"\x1b\[0m", text))


def _rgb(style: str) -> str:
    """The 24-bit SGR parameters of a Pygments style string's colour (``italic #66d9ef``)."""
    color = style.split("#")[1]
    return "38;2;" + ";".join(str(int(color[i:i + 2], 16)) for i in (0, 2, 4))


def _on_terminal(args: list) -> str:
    """``tvms ARGS`` with standard output on a pseudo-terminal (a true-colour one), as a person
    runs it: what it wrote there."""
    tvms = shutil.which("tvms")
    if tvms is None:
        pytest.skip("the tvms entry point is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TVMS_DEBUG")}
    env.update(TERM="xterm-256color", COLORTERM="truecolor")
    proc, text = run_on_terminal([tvms, *args], env)
    assert proc.returncode == 0, proc.stderr
    return text


def test_tvms_show_on_a_terminal_colours_with_the_tvmscript_lexer():
    text = _on_terminal(["show", ROOT / "samples" / "mlp_script_printed.tvms"])
    styles = TVMScriptStyle.styles
    # The dialect namespace, the op after it and the dtype get the colours only this lexer
    # gives them (Python's lexer leaves `R` and `dataflow` plain names, "float32" a string).
    for word, kind in (("R", Name.Namespace), ("dataflow", Name.Builtin), ("Tensor", Name.Builtin),
                       ("float32", Keyword.Type)):
        sgr = _sgr_of(text, word)
        assert sgr and all(_rgb(styles[kind]) in params for params in sgr), (word, sgr)
    assert all(params.startswith("3;") for params in _sgr_of(text, "float32"))  # italic
    assert all(_rgb(styles[String]) in params for params in _sgr_of(text, '"'))
    plain = _on_terminal(["show", ROOT / "samples" / "mlp_script_printed.tvms", "--no-color"])
    assert "\x1b[" not in plain and "R.permute_dims(" in plain
