"""TVMScript's lexer for Pygments (and so for rich, Sphinx and Jupyter): ``pygmentize -l tvmscript``.

It colours what Python's lexer cannot tell apart in TVMScript: the dialect namespaces ``I``, ``R``
and ``T`` (``Name.Namespace``), the ops and types after them (``R.nn.conv2d``, ``T.Buffer``,
``T.float32``: ``Name.Builtin``; ``nn`` in ``R.nn.conv2d`` is a namespace too), and dtype strings:
in ``"float32"`` the quotes are ``String.Double`` and the dtype between them is ``Keyword.Type``,
because it names a type, while a string that is not a dtype (``"SSR"``, ``"global"``) stays a
string. The token kinds follow the VS Code TextMate grammar
(editors/vscode/syntaxes/tvmscript.tmLanguage.json) rule for rule, so a file looks the same in
the editor and in ``tvms show``: tests/language/test_textmate_grammar.py checks that on every sample.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, default, include, words
from pygments.styles.monokai import MonokaiStyle
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

__all__ = ["TVMScriptLexer", "TVMScriptStyle", "DTYPE_PATTERN"]

_IDENT = r"[A-Za-z_]\w*"

#: A dtype as TVMScript writes it in a string: scalar or vector (``float32x4``). The TextMate
#: grammar's ``dtype-string`` rule uses the same expression.
DTYPE_PATTERN = (r"(?:u?int(?:1|4|8|16|32|64)|b?float(?:16|32|64)|float8_e[45]m[23](?:fn|fnuz)?"
                 r"|e[45]m[23]_float8|bool|handle|void)(?:x\d+)?")

_KEYWORDS = ("if", "elif", "else", "for", "in", "while", "with", "as", "return", "assert",
             "pass", "break", "continue", "yield", "raise", "try", "except", "finally", "del",
             "global", "nonlocal", "async", "await", "import", "from", "def", "class", "lambda")
_BUILTINS = ("range", "len", "min", "max", "abs", "tuple", "list", "dict", "int", "float", "bool",
             "str", "print", "isinstance", "super")


def _string_states(quote: str, token) -> list:
    """The body of a string opened by ``quote``: escapes, the closing quote, and, for a
    one-line string, the end of the line, which closes it as the TextMate grammar does
    (an unterminated string must not colour the rest of the file)."""
    if len(quote) == 1:
        return [(r"\\\n", token), (r"\\.", String.Escape), (quote, token, "#pop"),
                (rf"[^\\{quote}\n]+", token), (r"\\", token), default("#pop")]
    return [(r"\\.", String.Escape), (quote, token, "#pop"), (rf"[^\\{quote[0]}]+", token),
            (r"\\", token), (quote[0], token)]


class TVMScriptLexer(RegexLexer):
    """Pygments lexer for TVMScript (``.tvms``): Python's syntax with the I/R/T dialects."""

    name = "TVMScript"
    aliases = ["tvmscript", "tvms"]
    filenames = ["*.tvms"]
    mimetypes = ["text/x-tvmscript"]
    url = "https://tvm.apache.org/docs/reference/api/python/script.html"

    tokens = {
        "root": [
            # Before the whitespace rule: a decorator is only one at the start of a line.
            (rf"^([ \t\f]*)(@)({_IDENT}(?:\.{_IDENT})*)", bygroups(Whitespace, Name.Decorator, Name.Decorator)),
            (r"\n", Whitespace),
            (r"[ \t\f]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (rf"\b(class)([ \t]+)({_IDENT})", bygroups(Keyword, Whitespace, Name.Class)),
            (rf"\b(def)([ \t]+)({_IDENT})", bygroups(Keyword, Whitespace, Name.Function)),
            include("strings"),
            include("numbers"),
            (rf"\b(I|R|T)(\.)(?:({_IDENT})(\.))?(?:({_IDENT})(\.))?({_IDENT})",
             bygroups(Name.Namespace, Punctuation, Name.Namespace, Punctuation, Name.Namespace,
                      Punctuation, Name.Builtin)),
            (r"\b(?:I|R|T)\b(?=[ \t]*\.)", Name.Namespace),
            (words(_KEYWORDS, prefix=r"\b", suffix=r"\b"), Keyword),
            (words(("and", "or", "not", "is"), prefix=r"\b", suffix=r"\b"), Operator.Word),
            (words(("True", "False", "None"), prefix=r"\b", suffix=r"\b"), Keyword.Constant),
            (words(_BUILTINS, prefix=r"(?<!\.)\b", suffix=r"\b"), Name.Builtin),
            (_IDENT, Name),
            (r"->|(?:\*\*|//|>>|<<|[-+*/%@&|^])=|==|!=|<=|>=|<|>|=|\*\*|//|<<|>>|[-+*/%@&|^~]", Operator),
            (r"[()\[\]{},:;.]", Punctuation),
            (r"\\(?=\s*$)", Punctuation),
            (r".", Text),  # what TVMScript has no use for (`!`, `$`, `?`): left uncoloured, as in the editor
        ],
        "strings": [
            (rf"(\")({DTYPE_PATTERN})(\")", bygroups(String.Double, Keyword.Type, String.Double)),
            (rf"(')({DTYPE_PATTERN})(')", bygroups(String.Single, Keyword.Type, String.Single)),
            (r'([rRbBuUfF]{0,2})(""")', bygroups(String.Affix, String.Double), "triple-double"),
            (r"([rRbBuUfF]{0,2})(''')", bygroups(String.Affix, String.Single), "triple-single"),
            (r'([rRbBuUfF]{0,2})(")', bygroups(String.Affix, String.Double), "double"),
            (r"([rRbBuUfF]{0,2})(')", bygroups(String.Affix, String.Single), "single"),
        ],
        "triple-double": _string_states('"""', String.Double),
        "triple-single": _string_states("'''", String.Single),
        "double": _string_states('"', String.Double),
        "single": _string_states("'", String.Single),
        "numbers": [
            (r"\b0[xX][0-9a-fA-F_]+\b", Number.Hex),
            (r"\b0[oO][0-7_]+\b", Number.Oct),
            (r"\b0[bB][01_]+\b", Number.Bin),
            (r"(?:\b\d[\d_]*\.(?:\d[\d_]*)?|(?<![\w.])\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?(?!\w)"
             r"|\b\d[\d_]*[eE][+-]?\d[\d_]*\b", Number.Float),
            (r"\b\d[\d_]*\b", Number.Integer),
        ],
    }

    def analyse_text(text: str) -> float:  # noqa: N805 (Pygments calls it as a static method)
        """Guess TVMScript (for ``pygmentize -g``) from its dialect decorators."""
        if "@T.prim_func" in text or "@R.function" in text or "@I.ir_module" in text:
            return 0.9
        return 0.0


class TVMScriptStyle(MonokaiStyle):
    """Monokai (``tvms show``'s theme) with colours for the kinds it leaves as plain names:
    the dialect namespaces, their ops, and dtypes. Without them the lexer's distinctions
    would not show on a terminal."""

    name = "tvmscript-monokai"
    styles = {
        **MonokaiStyle.styles,
        Name.Namespace: "#fd971f",
        Name.Builtin: "#a6e22e",
        Keyword.Type: "italic #66d9ef",
    }
