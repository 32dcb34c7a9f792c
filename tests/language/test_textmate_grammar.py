"""The VS Code extension's TextMate grammar (editors/vscode/syntaxes/tvmscript.tmLanguage.json),
run by textmate-grammar-python (a Python port of vscode-textmate on the Oniguruma regex engine,
as VS Code runs it): it tokenizes every line of every sample, gives each kind of token its scope,
and agrees with the Pygments lexer (tvmscript/highlight.py) on every sample, so a file looks the
same in the editor and in ``tvms show``. Also the extension's manifest and language
configuration: they point at the grammar and hold regexes that compile."""

from __future__ import annotations

import functools
import json
import logging
import pathlib
import re
import shutil
import subprocess

import pytest
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

from tvmscript.highlight import DTYPE_PATTERN, TVMScriptLexer

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
GRAMMAR_PATH = EXTENSION / "syntaxes" / "tvmscript.tmLanguage.json"
SAMPLES = sorted((ROOT / "samples").glob("*.tvms"))

# The scope (prefix, most specific first wins) -> the Pygments token type the lexer gives the
# same text. A character with none of these scopes is a plain name (or whitespace) to both.
SCOPE_TO_TOKEN = {
    "comment": Comment,
    "punctuation.definition.comment": Comment,
    "string": String,
    "punctuation.definition.string": String,
    "storage.type.string.prefix": String.Affix,
    "constant.character.escape": String.Escape,
    "support.type.dtype": Keyword.Type,
    "constant.numeric.hex": Number.Hex,
    "constant.numeric.oct": Number.Oct,
    "constant.numeric.bin": Number.Bin,
    "constant.numeric.float": Number.Float,
    "constant.numeric.integer": Number.Integer,
    "constant.language": Keyword.Constant,
    "punctuation.definition.decorator": Name.Decorator,
    "entity.name.function.decorator": Name.Decorator,
    "entity.name.function": Name.Function,
    "entity.name.type.class": Name.Class,
    "entity.name.namespace": Name.Namespace,
    "support.function.op": Name.Builtin,
    "support.function.builtin": Name.Builtin,
    "storage.type": Keyword,
    "keyword.control": Keyword,
    "keyword.operator.logical": Operator.Word,
    "keyword.operator": Operator,
    "punctuation": Punctuation,
}

from test_highlight import SNIPPET  # noqa: E402  (the same snippet, for the lexer and the grammar)

# (text, innermost scope less ".tvmscript"): each run of non-blank characters with one scope.
SNIPPET_SCOPES = [
    ("#", "punctuation.definition.comment"), ("from", "comment.line.number-sign"),
    ("tvm.script", "comment.line.number-sign"), ("import", "comment.line.number-sign"),
    ("relax", "comment.line.number-sign"), ("as", "comment.line.number-sign"),
    ("R", "comment.line.number-sign"),
    ("@", "punctuation.definition.decorator"), ("I.ir_module", "entity.name.function.decorator"),
    ("class", "storage.type.class"), ("Module", "entity.name.type.class"), (":", "punctuation.separator.colon"),
    ("@", "punctuation.definition.decorator"), ("R.function", "entity.name.function.decorator"),
    ("def", "storage.type.function"), ("main", "entity.name.function"),
    ("(", "punctuation.parenthesis.begin"), ("x", "source"), (":", "punctuation.separator.colon"),
    ("R", "entity.name.namespace.dialect"), (".", "punctuation.accessor"), ("Tensor", "support.function.op"),
    ("((", "punctuation.parenthesis.begin"), ("2", "constant.numeric.integer.decimal"),
    (",", "punctuation.separator.element"), ("3", "constant.numeric.integer.decimal"),
    (")", "punctuation.parenthesis.end"), (",", "punctuation.separator.element"),
    ('"', "punctuation.definition.string.begin"), ("float32", "support.type.dtype"),
    ('"', "punctuation.definition.string.end"), ("))", "punctuation.parenthesis.end"),
    ("->", "keyword.operator.arrow"), ("R", "entity.name.namespace.dialect"), (".", "punctuation.accessor"),
    ("Tensor", "support.function.op"), (":", "punctuation.separator.colon"),
    ("for", "keyword.control.flow"), ("i", "source"), ("in", "keyword.control.flow"),
    ("range", "support.function.builtin"), ("(", "punctuation.parenthesis.begin"),
    ("0x10", "constant.numeric.hex"), (")", "punctuation.parenthesis.end"), (":", "punctuation.separator.colon"),
    ("y", "source"), ("=", "keyword.operator.assignment"),
    ("R", "entity.name.namespace.dialect"), (".", "punctuation.accessor"), ("nn", "entity.name.namespace"),
    (".", "punctuation.accessor"), ("relu", "support.function.op"), ("(", "punctuation.parenthesis.begin"),
    ("x", "source"), (")", "punctuation.parenthesis.end"),
    ("if", "keyword.control.flow"), ("True", "constant.language"), ("else", "keyword.control.flow"),
    ("T", "entity.name.namespace.dialect"), (".", "punctuation.accessor"), ("float32", "support.function.op"),
    ("(", "punctuation.parenthesis.begin"), ("1.5e-3", "constant.numeric.float"), (")", "punctuation.parenthesis.end"),
    ("assert", "keyword.control.flow"), ("not", "keyword.operator.logical"), ("None", "constant.language"),
    (",", "punctuation.separator.element"), ('"', "punctuation.definition.string.begin"),
    ("SSR", "string.quoted.single-line.double"), ("\\n", "constant.character.escape"),
    ('"', "punctuation.definition.string.end"),
    ("return", "keyword.control.flow"), ("y", "source"),
]


# Corners the samples do not reach, for the agreement check beside the samples.
EDGE_CASES = [
    'T.Buffer((4,), "int64x4", scope="global")\n', 'x = "abc\ny = 1\n', '"""a\nb"""\nc\n',
    "    @T.prim_func(private=True)\n", "c = a @ b_if + conv2d\n",
    "x = r'a\\'b' + 'float32' \\\n  + 1.e5 + .5 + 0b1 # c\n",
    "lambda x: x >>= 2 <= 3 != 4 ** 5 // 6\n", "R.\nT .x\nx.T.y\n",
]


def grammar() -> dict:
    return json.loads(GRAMMAR_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _parser():
    tm_base = pytest.importorskip("textmate_grammar.parsers.base")
    # It logs every stretch of text no rule matches (plain names) as a warning.
    logging.getLogger("textmate_grammar").setLevel(logging.ERROR)
    return tm_base.LanguageParser(grammar())


def scopes_by_char(text: str) -> list[list[tuple[str, ...]]]:
    """For each line of ``text``, the scope stack of each of its characters, as VS Code would
    give them. Fails if a character is left without one or given two."""
    lines = text.split("\n")
    table: list[list] = [[None] * len(line) for line in lines]
    # The port fails on a multi-line string closed on a last line that has no newline after it.
    for (line, col), chunk, scopes in _parser().parse_string(text if text.endswith("\n") else text + "\n").flatten():
        for k, ch in enumerate(chunk):
            if ch == "\n":
                continue
            assert table[line][col + k] is None, (line, col + k)
            assert lines[line][col + k] == ch, (line, col + k, ch)
            table[line][col + k] = tuple(scopes)
    for number, row in enumerate(table):
        assert None not in row, f"line {number + 1} is not fully tokenized: {lines[number]!r}"
    return table


def runs(text: str) -> list[tuple[str, str]]:
    """(text, innermost scope less ``.tvmscript``) for each run of non-blank characters that
    share one scope stack."""
    out = []
    for line, row in zip(text.split("\n"), scopes_by_char(text)):
        for match in re.finditer(r"\S+", line):
            start = match.start()
            for k in range(match.start() + 1, match.end() + 1):
                if k == match.end() or row[k] != row[start]:
                    out.append((line[start:k], row[start][-1].removesuffix(".tvmscript")))
                    start = k
    return out


def token_for(scopes: tuple[str, ...]):
    """The Pygments token type that corresponds to a scope stack (innermost scope first,
    longest matching prefix in SCOPE_TO_TOKEN); None for a plain name."""
    for scope in reversed(scopes):
        parts = scope.removesuffix(".tvmscript").split(".")
        for n in range(len(parts), 0, -1):
            token = SCOPE_TO_TOKEN.get(".".join(parts[:n]))
            if token is not None:
                return token
    return None


def _all_regexes(node):
    """Every regex in the grammar (match, begin, end), wherever it is nested."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("match", "begin", "end") and isinstance(value, str):
                yield value
            else:
                yield from _all_regexes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _all_regexes(value)


# ----------------------------------------------------------------------------- the grammar


def test_grammar_regexes_compile_in_oniguruma_and_python_re():
    onig = pytest.importorskip("onigurumacffi")
    regexes = list(_all_regexes(grammar()))
    assert len(regexes) > 30
    for regex in regexes:
        onig.compile(regex)  # what VS Code runs
        re.compile(regex)  # the subset both engines read alike (editors/vscode/README.md)
        assert "(?<" not in regex.replace("(?<!", "").replace("(?<=", ""), regex  # no named groups
        assert r"\G" not in regex and r"\h" not in regex and "[[:" not in regex, regex


def test_dtype_strings_are_the_lexers_dtypes():
    for rule in grammar()["repository"]["dtype-string"]["patterns"]:
        assert DTYPE_PATTERN in rule["match"]


def test_every_include_resolves():
    g = grammar()
    includes = re.findall(r'"include": "#([\w-]+)"', json.dumps(g))
    assert includes and set(includes) <= set(g["repository"]), set(includes) - set(g["repository"])
    assert set(g["repository"]) <= set(includes), "unused repository rules"


def test_every_line_of_every_sample_is_tokenized():
    assert len(SAMPLES) >= 20
    for path in SAMPLES:
        text = path.read_text()
        table = scopes_by_char(text)
        assert len(table) == text.count("\n") + 1, path.name
        # Nothing spills: every string and comment closes on its own line in the samples.
        for number, row in enumerate(table):
            if row:
                assert not any(s.startswith("string") for s in row[-1][1:]) or text.split("\n")[number].rstrip()[-1] in "\"'", (path.name, number + 1)


def test_snippet_scopes():
    assert runs(SNIPPET) == SNIPPET_SCOPES


def test_strings_and_edge_cases():
    assert runs('T.Buffer((4,), "int64x4", scope="global")')[7:] == [
        (",", "punctuation.separator.element"), ('"', "punctuation.definition.string.begin"),
        ("int64x4", "support.type.dtype"), ('"', "punctuation.definition.string.end"),
        (",", "punctuation.separator.element"), ("scope", "source"), ("=", "keyword.operator.assignment"),
        ('"', "punctuation.definition.string.begin"), ("global", "string.quoted.single-line.double"),
        ('"', "punctuation.definition.string.end"), (")", "punctuation.parenthesis.end")]
    # An unterminated string ends at its line; a triple-quoted one spans lines.
    assert runs('x = "abc\ny = 1\n')[-3:] == [("y", "source"), ("=", "keyword.operator.assignment"),
                                             ("1", "constant.numeric.integer.decimal")]
    assert [scope for _, scope in runs('"""a\nb"""\nc')] == [
        "punctuation.definition.string.begin", "string.quoted.triple.double",
        "string.quoted.triple.double", "punctuation.definition.string.end", "source"]
    # An indented decorator is one; `@` between operands is an operator; keywords inside names
    # and digits inside names are the names'.
    assert runs("    @T.prim_func(private=True)")[:2] == [("@", "punctuation.definition.decorator"),
                                                         ("T.prim_func", "entity.name.function.decorator")]
    assert runs("c = a @ b_if + conv2d") == [
        ("c", "source"), ("=", "keyword.operator.assignment"), ("a", "source"),
        ("@", "keyword.operator.arithmetic"), ("b_if", "source"), ("+", "keyword.operator.arithmetic"),
        ("conv2d", "source")]


def test_scopes_agree_with_the_pygments_lexer_on_every_sample():
    checked = 0
    texts = [(path.name, path.read_text()) for path in SAMPLES] + [(f"edge case {i}", case) for i, case in enumerate(EDGE_CASES)]
    for name, text in texts:
        lines = text.split("\n")
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        pygments_type = [None] * len(text)
        for pos, ttype, value in TVMScriptLexer().get_tokens_unprocessed(text):
            pygments_type[pos:pos + len(value)] = [ttype] * len(value)
        for number, row in enumerate(scopes_by_char(text)):
            for col, scopes in enumerate(row):
                if lines[number][col].isspace():
                    continue
                ttype = pygments_type[starts[number] + col]
                expected = token_for(scopes)
                where = f"{name}:{number + 1}:{col + 1} {lines[number][col]!r} {scopes[-1]}"
                if expected is None:
                    assert ttype in (Name, Text, Whitespace), f"{where}: {ttype}"
                else:
                    assert ttype in expected, f"{where}: {ttype}, not {expected}"
                checked += 1
    assert checked > 20_000


# ----------------------------------------------------------------------------- the extension


def test_manifest_contributes_the_language_grammar_and_settings():
    manifest = json.loads((EXTENSION / "package.json").read_text())
    contributes = manifest["contributes"]
    (language,) = contributes["languages"]
    assert language["id"] == "tvmscript" and language["extensions"] == [".tvms"]
    assert "TVMScript" in language["aliases"]
    assert (EXTENSION / language["configuration"]).is_file()
    (tm,) = contributes["grammars"]
    assert tm["language"] == "tvmscript" and tm["scopeName"] == grammar()["scopeName"] == "source.tvmscript"
    assert (EXTENSION / tm["path"]).resolve() == GRAMMAR_PATH.resolve()
    assert "onLanguage:tvmscript" in manifest["activationEvents"]
    assert (EXTENSION / manifest["main"]).is_file()
    settings = contributes["configuration"]["properties"]
    assert settings["tvms.server.command"]["default"] == ["tvms", "lsp"]
    assert settings["tvms.trace.server"]["enum"] == ["off", "messages", "verbose"]
    assert manifest["dependencies"]["vscode-languageclient"].startswith("^9")
    assert "node_modules/" in (EXTENSION / ".gitignore").read_text().split()


def test_language_configuration_indents_after_a_colon():
    config = json.loads((EXTENSION / "language-configuration.json").read_text())
    assert config["comments"]["lineComment"] == "#"
    assert config["folding"]["offSide"] is True
    increase = re.compile(config["indentationRules"]["increaseIndentPattern"])
    re.compile(config["indentationRules"]["decreaseIndentPattern"])
    re.compile(config["wordPattern"])
    (indent_rule,) = [r for r in config["onEnterRules"] if r["action"]["indent"] == "indent"]
    after = re.compile(indent_rule["beforeText"])
    block_lines = [line for path in SAMPLES for line in path.read_text().splitlines()
                   if re.match(r"\s*(def|class|for|with|if|else)\b.*:\s*$", line)]
    assert len(block_lines) > 100
    for line in block_lines:
        assert increase.search(line) and after.search(line), line
    for line in ("x = 1", "    R.output(gv)", "# note:", "        return gv"):
        assert not increase.search(line) and not after.search(line), line


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_extension_js_parses():
    proc = subprocess.run(["node", "--check", str(EXTENSION / "extension.js")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("node") is None or not (EXTENSION / "node_modules" / "vscode-languageclient").is_dir(),
                    reason="needs node and `npm install` in editors/vscode")
def test_extension_starts_the_configured_server_over_stdio():
    # test/smoke.js activates extension.js with a stand-in `vscode` module and the stand-in
    # server test/fake_server.py, which records the LSP methods it receives.
    proc = subprocess.run(["node", "test/smoke.js"], cwd=EXTENSION, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"errors": [], "methods": ["initialize", "initialized", "shutdown", "exit"]}
    proc = subprocess.run(["node", "test/smoke.js", str(EXTENSION / "no-such-server")], cwd=EXTENSION,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert any("pip install 'tvms[lsp]'" in message for message in json.loads(proc.stdout.strip().splitlines()[-1])["errors"])
