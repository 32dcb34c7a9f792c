"""What the language server knows about one TVMScript document: hover, definitions,
references, rename, completion, signature help, semantic tokens, outline and folding.

A `Document` is cheap to make; its analysis runs once per text, on first use:

1. `analysis_text.parse_tolerant`: the parser's syntax tree (lines the parser stops at are
   replaced in a copy, so a typo halfway leaves the rest analysed);
2. `symbols.SymbolIndex`: lexical scopes over the tree, every name occurrence resolved to its
   definition (this answers definition, references, rename, completion of names);
3. `analysis_types.build_types`: the IR built from the same tree, its objects found by source
   position (struct info of Relax variables, buffers, blocks); when the text does not build,
   the last text of the same file that did lends its types to definitions that still match;
4. `analysis_tables.name_table`: every T./R./I. name from the parser's and op registry's
   tables (completion, signature help, hover of ops).

Positions are 0-based; characters count Python ``str`` indices (the server converts to and
from UTF-16). No method raises on any text, except `Document.rename` (`RenameError`).
"""

from __future__ import annotations

import functools
import gc
import keyword
import re
from collections import OrderedDict
from dataclasses import dataclass, field

from ..parser import ast
from . import analysis_tables as tables
from .analysis_text import LineIndex, PY_KEYWORDS, call_context, in_string_or_comment, parse_tolerant, tokenize
from .analysis_types import build_types, definition_key, recall, remember
from .symbols import DIALECT_ROOTS, Range, SymbolIndex, callee_name, node_range

__all__ = [
    "Range", "Document", "Completion", "Signature", "Token", "Symbol", "RenameError",
    "TOKEN_TYPES", "TOKEN_MODIFIERS",
]

TOKEN_TYPES = ["namespace", "function", "variable", "parameter", "type", "keyword", "string", "number",
               "decorator", "property", "comment"]
TOKEN_MODIFIERS = ["declaration", "readonly", "defaultLibrary"]


@dataclass
class Completion:
    label: str
    kind: str  # "function" | "module" | "keyword" | "type" | "variable"
    detail: str = ""
    documentation: str = ""


@dataclass
class Signature:
    label: str
    parameters: list[str]
    active_parameter: int
    documentation: str = ""


@dataclass
class Token:
    line: int
    char: int
    length: int
    type: str
    modifiers: tuple[str, ...] = ()


@dataclass
class Symbol:
    name: str
    kind: str  # "module" | "function" | "namespace" | "variable"
    range: Range
    selection_range: Range
    children: list["Symbol"] = field(default_factory=list)


class RenameError(ValueError):
    """A rename that cannot be done: the new name is no identifier, a keyword, or clashes
    with a name visible where the renamed one is."""


def _safe(default):
    """Methods of `Document` answer ``default`` rather than raise on text the analysis did not
    foresee (an editor asks on every keystroke); `RenameError` still reaches the caller."""
    def wrap(method):
        @functools.wraps(method)
        def inner(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except RenameError:
                raise
            except Exception:  # noqa: BLE001
                return default() if callable(default) else default
        return inner
    return wrap


# ----------------------------------------------------------------------------- analysis


class Analysis:
    """The analysis of one text (see the module docstring)."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.tokens: list | None = None  # the semantic tokens, made on the first request
        self.index = LineIndex(text)
        # The analysis allocates many small acyclic objects: the cyclic collector would scan
        # them again and again for nothing (as `parse_source` does, it is paused meanwhile).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._analyse(text, filename)
        finally:
            if enabled:
                gc.enable()

    def _analyse(self, text: str, filename: str) -> None:
        self.types = None
        self.parsed_ir = None
        self.fallback = None  # (old symbols, old types): the last text that built
        self.build_error = None
        self._fallback_keys = None
        stmts, comments, self.repaired = parse_tolerant(text, filename)
        self.parsed = stmts is not None
        try:
            self.symbols = SymbolIndex(stmts or [], self.index.lines)
        except Exception:  # noqa: BLE001 - a tree the index does not expect: answer from nothing
            self.symbols, stmts = SymbolIndex([], self.index.lines), None
        if stmts is not None:
            self.types, self.build_error = build_types(stmts, comments, text, filename)
        # What formatting this very text needs (no second parse): unrepaired text only.
        self.parsed_ir = (self.types.node, comments) if self.types is not None and not self.repaired else None
        if self.types is not None and not self.repaired:
            remember(filename, self.symbols, self.types)
        elif self.types is None:
            self.fallback = recall(filename)

    # ---- text helpers

    def source(self, node) -> str:
        """The text of a syntax node, on one line (whitespace runs collapsed)."""
        start = self.index.offset(node.line - 1, node.col - 1)
        end = self.index.offset(node.end_line - 1, node.end_col - 1)
        text = self.text[start:end]
        return text if "\n" not in text else " ".join(text.split())

    # ---- IR objects of a definition

    def _ir(self, d, table: str, pos: tuple[int, int]):
        if self.types is not None:
            return getattr(self.types, table).get(pos)
        if self.fallback is None:
            return None
        old_symbols, old_types = self.fallback
        if self._fallback_keys is None:
            self._fallback_keys = {definition_key(x): x for x in old_symbols.definitions}
        old = self._fallback_keys.get(definition_key(d))
        if old is None:
            return None
        return getattr(old_types, table).get(_ir_position(old, table))

    def relax_var(self, d):
        return self._ir(d, "relax_vars", _ir_position(d, "relax_vars"))

    def buffer(self, d):
        return self._ir(d, "buffers", _ir_position(d, "buffers"))


def _ir_position(d, table: str) -> tuple[int, int]:
    """Where the IR's span of a definition's object starts: a Relax variable at its name, a
    buffer at its annotation or allocation call."""
    if table == "buffers":
        node = d.value
        if isinstance(node, ast.Subscript):
            node = node.value
        if node is not None:
            return node.line - 1, node.col - 1
    return d.range.start_line, d.range.start_char


_CACHE: "OrderedDict[tuple[str, str], Analysis]" = OrderedDict()
_CACHE_SIZE = 8


def _analysis_of(text: str, filename: str) -> Analysis:
    key = (filename, text)
    found = _CACHE.get(key)
    if found is None:
        found = Analysis(text, filename)
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return found


# ----------------------------------------------------------------------------- document


class Document:
    """One version of a file's text; every question about it is answered from one analysis,
    made on the first question."""

    def __init__(self, text: str, filename: str = "<document>") -> None:
        self.text = text
        self.filename = filename
        self._analysis: Analysis | None = None

    @property
    def analysed(self) -> Analysis | None:
        """The analysis if one was made already (None: asking would start one)."""
        return self._analysis

    @property
    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = _analysis_of(self.text, self.filename)
        return self._analysis

    # ---- hover

    @_safe(None)
    def hover(self, line: int, char: int) -> str | None:
        a = self.analysis
        occ = a.symbols.at(line, char)
        if occ is None:
            return None
        if occ.role == "dotted":
            return _dialect_hover(occ.full)
        if occ.role == "block":
            return _block_hover(a, occ.node)
        if occ.role == "kwarg":
            return _kwarg_hover(occ)
        if occ.definition is not None:
            return _definition_hover(a, occ.definition)
        return None

    # ---- navigation

    @_safe(list)
    def definition(self, line: int, char: int) -> list[Range]:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None:
            return []
        return [occ.definition.range]

    @_safe(list)
    def references(self, line: int, char: int, include_declaration: bool = True) -> list[Range]:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None:
            return []
        d = occ.definition
        return [r for r in d.references if include_declaration or r != d.range]

    @_safe(None)
    def prepare_rename(self, line: int, char: int) -> Range | None:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None or occ.role not in ("def", "use", "member"):
            return None
        return occ.range

    def rename(self, line: int, char: int, new_name: str) -> list[tuple[Range, str]]:
        try:
            occ = self.analysis.symbols.at(line, char)
        except Exception:  # noqa: BLE001
            occ = None
        if occ is None or occ.definition is None or occ.role not in ("def", "use", "member"):
            raise RenameError("there is no renamable name here")
        d = occ.definition
        if not new_name.isidentifier():
            raise RenameError(f"'{new_name}' is not a valid name")
        if keyword.iskeyword(new_name) or keyword.issoftkeyword(new_name) and new_name != "_":
            raise RenameError(f"'{new_name}' is a keyword")
        if new_name == d.name:
            return []
        clash = _rename_clash(self.analysis.symbols, d, new_name)
        if clash:
            raise RenameError(clash)
        return [(r, new_name) for r in d.references]

    # ---- completion

    @_safe(list)
    def completions(self, line: int, char: int) -> list[Completion]:
        a = self.analysis
        before = a.index.line_text(line)[:char]
        if in_string_or_comment(before, len(before)):
            return []
        m = _MEMBER_BEFORE.search(before)
        if m:
            base = re.sub(r"\s+", "", m.group(1))[:-1]
            return _member_completions(a, base, m.group(2) or "", line, char)
        word = _WORD_BEFORE.search(before)
        partial = word.group(0) if word else ""
        if partial and partial[0].isdigit():
            return []
        return _name_completions(a, partial, line, char, before)

    @_safe(None)
    def signature_help(self, line: int, char: int) -> Signature | None:
        a = self.analysis
        offset = a.index.offset(line, char)
        ctx = call_context(a.text, offset)
        if ctx is None:
            return None
        label, params, doc = _callee_signature(a, ctx.callee)
        if params is None:
            return None
        active = ctx.arg_index
        if ctx.keyword is not None:
            names = [_param_name(p) for p in params]
            if ctx.keyword in names:
                active = names.index(ctx.keyword)
        if params:
            star = next((i for i, p in enumerate(params) if p.startswith("*") and not p.startswith("**")), None)
            if star is not None and active > star and ctx.keyword is None:
                active = star
            active = min(active, len(params) - 1)
        return Signature(label, list(params), active, doc)

    # ---- tokens, outline, folding

    @_safe(list)
    def semantic_tokens(self) -> list[Token]:
        a = self.analysis
        if a.tokens is None:
            a.tokens = _semantic_tokens(a)
        return list(a.tokens)

    @_safe(list)
    def document_symbols(self) -> list[Symbol]:
        return _document_symbols(self.analysis)

    @_safe(list)
    def folding_ranges(self) -> list[tuple[int, int]]:
        return sorted(self.analysis.symbols.folds)


# ----------------------------------------------------------------------------- hover texts


def _code(text: str) -> str:
    return f"```python\n{text}\n```"


def _dialect_hover(full: str) -> str | None:
    entry = tables.signature_of(full)
    if entry is None:
        return None
    if entry.kind == "module":
        return _code(entry.name) + (f"\n\n{entry.doc}" if entry.doc else "")
    return _code(entry.signature) + (f"\n\n{entry.doc}" if entry.doc else "")


def _kwarg_hover(occ) -> str | None:
    entry = tables.signature_of(occ.full) if occ.full else None
    if entry is None or not entry.params:
        return None
    for p in entry.params:
        if _param_name(p) == occ.name:
            return _code(p) + f"\n\nparameter of `{entry.name}`"
    return None


def _definition_hover(a: Analysis, d) -> str | None:
    kind = d.kind
    if kind == "module":
        return _module_hover(a, d)
    if kind == "function":
        info = a.symbols.function_named(d.name)
        if info is None:
            return None
        return _code(_function_header(a, info)) + f"\n\n{_dialect_label(info.dialect)} function"
    if kind == "buffer":
        return _buffer_hover(a, d)
    if kind == "loop_var":
        return _loop_hover(a, d)
    if kind == "block_iter":
        return _block_iter_hover(a, d)
    if d.dialect == "relax":
        return _relax_var_hover(a, d)
    return _plain_hover(a, d)


def _dialect_label(dialect: str) -> str:
    return {"relax": "Relax", "tir": "TensorIR"}.get(dialect, "Python")


def _module_hover(a: Analysis, d) -> str:
    names = ", ".join(f"`{f.name}`" for f in a.symbols.functions if f.scope.parent and f.scope.parent.kind == "class")
    count = sum(1 for f in a.symbols.functions if f.scope.parent and f.scope.parent.kind == "class")
    return _code(f"class {d.name}") + f"\n\nIRModule with {count} function{'s' if count != 1 else ''}: {names}"


def _function_header(a: Analysis, info) -> str:
    node = info.node
    params = []
    for arg in node.args:
        text = arg.name
        if arg.annotation is not None:
            text += ": " + a.source(arg.annotation)
        if arg.default is not None:
            text += " = " + a.source(arg.default)
        params.append(text)
    ret = f" -> {a.source(node.returns)}" if node.returns is not None else ""
    decorators = "".join(f"@{a.source(dec)}\n" for dec in node.decorators)
    return f"{decorators}def {node.name}({', '.join(params)}){ret}"


def _relax_var_hover(a: Analysis, d) -> str:
    from ..printer import sinfo_text
    from .. import relax

    var = a.relax_var(d)
    role = "parameter" if d.kind == "parameter" else "variable"
    if var is not None:
        if isinstance(var, relax.DataflowVar):
            role = "dataflow variable"
        return _code(f"{d.name}: {sinfo_text(var.struct_info)}") + f"\n\nRelax {role}"
    if d.kind == "parameter" and d.value is not None:
        return _code(f"{d.name}: {a.source(d.value)}") + f"\n\nRelax {role}"
    return _plain_hover(a, d)


def _plain_hover(a: Analysis, d) -> str:
    node = d.node
    if isinstance(node, ast.Arg):
        text = d.name + (f": {a.source(node.annotation)}" if node.annotation is not None else "")
        return _code(text) + f"\n\n{_dialect_label(d.dialect)} parameter"
    if isinstance(node, ast.AnnAssign):
        return _code(f"{d.name}: {a.source(node.annotation)}") + f"\n\n{_dialect_label(d.dialect)} variable"
    if d.value is not None and d.count == 1:
        value = a.source(d.value)
        if len(value) > 80:
            value = value[:77] + "..."
        return _code(f"{d.name} = {value}") + f"\n\n{_dialect_label(d.dialect)} variable"
    return _code(d.name) + f"\n\n{_dialect_label(d.dialect)} variable"


def _buffer_hover(a: Analysis, d) -> str:
    from ..printer.tir_printer import TIRPrinter

    buf = a.buffer(d)
    if buf is None:
        decl = a.source(d.value) if d.value is not None else "T.Buffer(...)"
        return _code(f"{d.name}: {decl}") + "\n\nbuffer"
    p = TIRPrinter()
    return (_code(f"{d.name}: {p.buffer_decl(buf, 'T.Buffer', True)}")
            + f"\n\nbuffer: shape `{p.shape(buf.shape)}`, dtype `{buf.dtype}`, scope `{buf.scope}`")


def _loop_hover(a: Analysis, d) -> str:
    from ..parser.tir_names import LOOP_KINDS

    call = d.value
    name = callee_name(call) or ""
    kind = "serial" if name == "T.grid" else LOOP_KINDS.get(name, name or "loop")
    lo, hi, tag = "0", "?", None
    if isinstance(call, ast.Call):
        args = call.args
        if name == "T.grid":
            if d.index < len(args):
                hi = a.source(args[d.index])
        else:
            exprs = [x for x in args if not (isinstance(x, ast.Constant) and isinstance(x.value, str))]
            if len(exprs) == 1:
                hi = a.source(exprs[0])
            elif len(exprs) >= 2:
                lo, hi = a.source(exprs[0]), a.source(exprs[1])
            strings = [x.value for x in args if isinstance(x, ast.Constant) and isinstance(x.value, str)]
            strings += [kw.value.value for kw in call.keywords
                        if kw.arg == "thread" and isinstance(kw.value, ast.Constant)]
            tag = strings[0] if strings else None
    detail = f"kind: {kind}" + (f", thread `{tag}`" if tag else "")
    return _code(f"(loop variable) {d.name}: range({lo}, {hi})") + f"\n\n{detail}"


def _enclosing_block(a: Analysis, d):
    for info in _all_blocks(a.symbols.blocks):
        if info.kind == "block" and info.scope is d.scope:
            return info
    return None


def _all_blocks(blocks):
    for b in blocks:
        yield b
        yield from _all_blocks(b.children)


def _ir_block(a: Analysis, info):
    item = info.node.item
    pos = (item.line - 1, item.col - 1)
    if a.types is not None:
        return a.types.blocks.get(pos)
    return None


def _iter_rows(a: Analysis, info) -> list[tuple[str, str, str]]:
    """(name, kind letter, range) of a block's iterators: from the IR when it built, else from
    the ``T.axis`` declarations as written."""
    from ..printer.tir_printer import TIRPrinter

    block = _ir_block(a, info)
    if block is not None:
        p = TIRPrinter()
        rows = []
        for iv in block.iter_vars:
            lo = p.expr(iv.dom.min)
            hi = p.expr(iv.dom.min + iv.dom.extent) if not _is_zero(iv.dom.min) else p.expr(iv.dom.extent)
            rows.append((iv.var.name, iv.kind, f"range({lo}, {hi})"))
        return rows
    rows = []
    for defs in info.scope.defs.values() if info.scope is not None else ():
        for d in defs:
            if d.kind == "block_iter":
                letter, rng = _syntax_iter(a, d)
                rows.append((d.name, letter, rng))
    rows.sort(key=lambda r: r[0])
    return rows


def _is_zero(e) -> bool:
    return getattr(e, "value", None) == 0


def _syntax_iter(a: Analysis, d) -> tuple[str, str]:
    from ..parser.tir_names import AXIS_KINDS

    call = d.value
    name = callee_name(call) or ""
    if name == "T.axis.remap" and call.args and isinstance(call.args[0], ast.Constant):
        kinds = str(call.args[0].value)
        return (kinds[d.index] if d.index < len(kinds) else "?"), "range(?)"
    letter = AXIS_KINDS.get(name, "?")
    if isinstance(call, ast.Call) and call.args:
        return letter, f"range(0, {a.source(call.args[0])})"
    return letter, "range(?)"


_ITER_KIND_NAMES = {"S": "spatial", "R": "reduce", "C": "scan", "O": "opaque"}


def _block_iter_hover(a: Analysis, d) -> str:
    info = _enclosing_block(a, d)
    row = None
    if info is not None:
        row = next((r for r in _iter_rows(a, info) if r[0] == d.name), None)
    if row is None:
        letter, rng = _syntax_iter(a, d)
        row = (d.name, letter, rng)
    where = f', block "{info.name}"' if info is not None else ""
    kind = _ITER_KIND_NAMES.get(row[1], row[1])
    return _code(f"(block iterator) {d.name}: {row[2]}") + f"\n\nkind: {row[1]} ({kind}){where}"


def _block_hover(a: Analysis, info) -> str:
    rows = _iter_rows(a, info)
    text = _code(f'with T.block("{info.name}")')
    if not rows:
        return text + "\n\nblock without iterators"
    table = ["| iterator | kind | range |", "|---|---|---|"]
    table += [f"| {n} | {k} | {r} |" for n, k, r in rows]
    return text + "\n\n" + "\n".join(table)


# ----------------------------------------------------------------------------- rename


def _rename_clash(symbols: SymbolIndex, d, new_name: str) -> str | None:
    if new_name in DIALECT_ROOTS:
        return f"'{new_name}' is a dialect name (T, R, I)"
    scope = d.scope
    if new_name in scope.defs:
        return f"'{new_name}' is already defined in this scope"
    if scope.lookup(new_name, (1 << 30, 0)) is not None:
        return f"'{new_name}' is already visible here (defined in an enclosing scope)"
    stack = list(scope.children)
    while stack:
        s = stack.pop()
        if new_name in s.defs:
            return f"'{new_name}' is defined in a nested scope, where it would hide the renamed name"
        stack.extend(s.children)
    if d.kind == "function" and new_name == "cls":
        return "'cls' names the module"
    return None


# ----------------------------------------------------------------------------- completion

_MEMBER_BEFORE = re.compile(r"((?:[A-Za-z_]\w*\s*\.\s*)+)([A-Za-z_]\w*)?$")
_WORD_BEFORE = re.compile(r"[A-Za-z_0-9]\w*$")
_ENTRY_KINDS = {"function": "function", "type": "type", "module": "module"}


def _member_completions(a: Analysis, base: str, partial: str, line: int, char: int) -> list[Completion]:
    symbols = a.symbols
    root = base.split(".", 1)[0]
    scope = symbols.scope_at(line, char)
    if root in DIALECT_ROOTS and scope.lookup(root, (line, char)) is None:
        out = []
        for entry in tables.name_table().members(base):
            label = entry.name.rsplit(".", 1)[-1]
            if label.startswith(partial):
                detail = entry.signature if entry.kind != "module" else entry.name
                out.append(Completion(label, _ENTRY_KINDS.get(entry.kind, "function"), detail, entry.doc))
        return out
    if "." not in base and (base == "cls" or base in symbols.module_names()):
        return [Completion(f.name, "function", _function_header(a, f).split("\n")[-1], f"{_dialect_label(f.dialect)} function")
                for f in symbols.functions
                if f.scope.parent is not None and f.scope.parent.kind == "class" and f.name.startswith(partial)]
    return []


def _name_completions(a: Analysis, partial: str, line: int, char: int, before: str) -> list[Completion]:
    indent = len(before) - len(before.lstrip())
    scope = a.symbols.scope_at(line, char, indent)
    out: list[Completion] = []
    seen = set()
    for name, d in sorted(scope.visible((line, char)).items()):
        if not name.startswith(partial) or d.range.start_line == line and d.range.start_char <= char <= d.range.end_char:
            continue
        seen.add(name)
        out.append(Completion(name, _completion_kind(d), _short_detail(a, d)))
    for root in sorted(DIALECT_ROOTS):
        if root not in seen and root.startswith(partial):
            entry = tables.name_table().get(root)
            out.append(Completion(root, "module", root, entry.doc if entry else ""))
    for kw in sorted(PY_KEYWORDS):
        if kw.startswith(partial) and kw not in seen:
            out.append(Completion(kw, "keyword"))
    return out


def _completion_kind(d) -> str:
    return {"function": "function", "module": "module"}.get(d.kind, "variable")


def _short_detail(a: Analysis, d) -> str:
    if d.kind == "function":
        info = a.symbols.function_named(d.name)
        return _function_header(a, info).split("\n")[-1] if info else ""
    if d.kind == "module":
        return "IRModule"
    if d.dialect == "relax" and d.kind in ("parameter", "variable"):
        var = a.relax_var(d)
        if var is not None:
            from ..printer import sinfo_text

            return sinfo_text(var.struct_info)
    return d.kind.replace("_", " ")


# ----------------------------------------------------------------------------- signature help


def _param_name(param: str) -> str:
    return param.split("=", 1)[0].split(":", 1)[0].strip().lstrip("*")


def _callee_signature(a: Analysis, callee: str) -> tuple[str, list[str] | None, str]:
    root, _, rest = callee.partition(".")
    symbols = a.symbols
    if root in DIALECT_ROOTS:
        entry = tables.signature_of(callee)
        if entry is None or entry.params is None:
            return callee, None, ""
        return entry.signature, list(entry.params), entry.doc
    name = rest if rest and (root == "cls" or root in symbols.module_names()) else (callee if not rest else None)
    info = symbols.function_named(name) if name else None
    if info is None:
        return callee, None, ""
    params = []
    for arg in info.node.args:
        text = arg.name + (f": {a.source(arg.annotation)}" if arg.annotation is not None else "")
        params.append(text)
    return f"{callee}({', '.join(params)})", params, f"{_dialect_label(info.dialect)} function"


# ----------------------------------------------------------------------------- semantic tokens


def _semantic_tokens(a: Analysis) -> list[Token]:
    symbols = a.symbols
    dtype_at = {(r.start_line, r.start_char) for r in symbols.dtype_strings}
    decorators = {}
    for r in symbols.decorators:
        decorators.setdefault(r.start_line, []).append(r)
    out: list[Token] = []
    starts = a.index.starts
    line = 0
    nlines = len(starts)
    for tok in tokenize(a.text):
        while line + 1 < nlines and starts[line + 1] <= tok.start:
            line += 1
        char = tok.start - starts[line]
        kind = tok.kind
        if kind == "comment":
            out.append(Token(line, char, len(tok.text), "comment"))
        elif kind == "string":
            ttype = "type" if (line, char) in dtype_at else "string"
            out.extend(_multiline_token(tok.text, line, char, ttype))
        elif kind == "number":
            out.append(Token(line, char, len(tok.text), "number"))
        elif kind == "at":
            for r in decorators.get(line, ()):
                if r.start_char == char:
                    out.append(Token(line, char, r.end_char - r.start_char, "decorator"))
        elif kind == "name":
            if any(r.start_char <= char < r.end_char for r in decorators.get(line, ())):
                continue
            token = _name_token(symbols, tok.text, line, char)
            if token is not None:
                out.append(token)
    return out


def _multiline_token(text: str, line: int, char: int, ttype: str) -> list[Token]:
    parts = text.split("\n")
    tokens = []
    for i, part in enumerate(parts):
        if part:
            tokens.append(Token(line + i, char if i == 0 else 0, len(part), ttype))
    return tokens


_DECLARATION = ("declaration",)
_LIBRARY = ("defaultLibrary",)


def _name_token(symbols: SymbolIndex, text: str, line: int, char: int) -> Token | None:
    length = len(text)
    if text in PY_KEYWORDS:
        return Token(line, char, length, "keyword")
    occ = None
    for o in symbols.occurrences_on(line):
        if o.range.start_char == char:
            occ = o
            break
    if occ is None:
        return Token(line, char, length, "variable") if text != "range" else Token(line, char, length, "function", _LIBRARY)
    role = occ.role
    if role == "dotted":
        if not occ.leaf:
            return Token(line, char, length, "namespace")
        entry = tables.signature_of(occ.full)
        if entry is not None and entry.kind == "type":
            return Token(line, char, length, "type", _LIBRARY)
        if entry is not None and entry.kind == "module":
            return Token(line, char, length, "namespace")
        return Token(line, char, length, "function", _LIBRARY)
    if role == "kwarg":
        return Token(line, char, length, "parameter")
    if role == "member":
        return Token(line, char, length, "function" if occ.definition is not None else "property")
    d = occ.definition
    if d is None:
        if text == "range":
            return Token(line, char, length, "function", _LIBRARY)
        return Token(line, char, length, "variable")
    mods = _DECLARATION if role == "def" else ()
    if d.kind == "module":
        return Token(line, char, length, "namespace", mods)
    if d.kind == "function":
        return Token(line, char, length, "function", mods)
    if isinstance(d.node, ast.Arg) or (d.kind == "parameter"):
        return Token(line, char, length, "parameter", mods)
    return Token(line, char, length, "variable", mods)


# ----------------------------------------------------------------------------- outline


def _document_symbols(a: Analysis) -> list[Symbol]:
    symbols = a.symbols
    out: list[Symbol] = []
    for m in symbols.modules:
        node = m.node
        children = [_function_symbol(symbols, f) for f in symbols.functions if f.scope.parent is not None
                    and f.scope.parent.kind == "class" and _inside(f.node, node)]
        for name, defs in _class_scope_of(symbols, node).items():
            for d in defs:
                if d.kind == "variable":
                    children.append(Symbol(d.name, "variable", _whole_stmt(d.node), d.range, []))
        children.sort(key=lambda s: (s.range.start_line, s.range.start_char))
        out.append(Symbol(m.name, "module", _stmt_range(node, symbols.lines), m.range, children))
    for f in symbols.functions:
        if f.scope.parent is symbols.file_scope:
            out.append(_function_symbol(symbols, f))
    out.sort(key=lambda s: (s.range.start_line, s.range.start_char))
    return out


def _class_scope_of(symbols: SymbolIndex, node) -> dict:
    for s in symbols.file_scope.children:
        if s.kind == "class" and s.start_line == ast.header_line(node) - 1:
            return s.defs
    return {}


def _inside(inner, outer) -> bool:
    return ast.header_line(outer) <= inner.line <= ast.last_line(outer)


def _function_symbol(symbols: SymbolIndex, f) -> Symbol:
    blocks = [b for b in symbols.blocks if f.node.line <= b.node.line <= ast.last_line(f.node)]
    return Symbol(f.name, "function", _stmt_range(f.node, symbols.lines), f.definition.range, [_block_symbol(b) for b in blocks])


def _block_symbol(b) -> Symbol:
    return Symbol(b.name, "namespace", b.range, b.selection, [_block_symbol(c) for c in b.children])


def _stmt_range(node, lines: list[str]) -> Range:
    from .symbols import stmt_range

    return stmt_range(node, lines)


def _whole_stmt(node) -> Range:
    return node_range(node) if node is not None else Range(0, 0, 0, 0)


