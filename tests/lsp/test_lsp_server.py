"""The language server (`tvms lsp`, tvmscript/lsp/server.py), driven over stdio by pytest-lsp.

One server process serves the module's tests (each on its own document), so the file stays
quick. What is checked here is the protocol side: diagnostics at exact ranges, formatting edits,
the conversions of the analysis' answers, faults; the analysis' own details are
tests/lsp/test_lsp_analysis.py's. The pure helpers (positions, the quick checker, the edits) are
checked in-process first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types as lsp  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

from tvmscript.checking import file_errors  # noqa: E402
from tvmscript.formatting import FormatError, format_source  # noqa: E402
from tvmscript.lsp.server_checks import Checker, problem_from_error  # noqa: E402
from tvmscript.lsp.server_formatting import apply_edits, range_edits, whole_file_edits  # noqa: E402
from tvmscript.lsp.server_positions import LineIndex  # noqa: E402

try:
    from tvmscript.lsp import analysis
except ImportError:  # written separately (tests/lsp/test_lsp_analysis.py); its features need it
    analysis = None

# pytest-asyncio runs in strict mode (nothing is set in pyproject.toml): the async tests are
# marked, all on the event loop of the module-scoped server fixture.
on_server_loop = pytest.mark.asyncio(loop_scope="module")

GOOD = '''@I.ir_module
class Module:
    @T.prim_func
    def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        # one more than A
        for i in range(8):
            B[i] = A[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((8,), "float32"))
        z = R.add(y, y)  # twice
        return z
'''

SYNTAX_ERROR = GOOD.replace("z = R.add(y, y)", "z = R.add(y, y")
STRUCT_INFO_ERROR = GOOD.replace('out_sinfo=R.Tensor((8,), "float32")', 'out_sinfo=R.Tensor((9,), "float32")')
BOUNDS_ERROR = GOOD.replace("B[i] = A[i] + T.float32(1)", "B[i] = A[i + 1] + T.float32(1)")
# Not canonical (GOOD is not either): the formatter adds the header, writes 1.0 and the dtypes,
# annotates z, takes out the space in (x, ); it keeps the comments.
UNFORMATTED = GOOD.replace("(x,)", "(x, )")
CANONICAL = format_source(GOOD)


# ---------------------------------------------------------------------- pure helpers


def test_line_index_counts_utf16_code_units():
    index = LineIndex('x = "\U0001F600é" + y\nz', "utf-16")
    # the emoji is 2 UTF-16 units, é one: y is str index 11, UTF-16 column 12
    assert index.to_client(0, 11) == (0, 12)
    assert index.from_client(0, 12) == (0, 11)
    assert index.length_to_client(0, 5, 2) == 3
    assert LineIndex('"\U0001F600" y', "utf-8").to_client(0, 4) == (0, 7)
    assert index.to_client(5, 0) == (1, 1)  # past the end: clamped


def test_zero_width_span_gets_the_word_under_it():
    class Err:
        message, notes = "boom", ["a note"]

        class span:
            line, col, end_line, end_col = 2, 5, 2, 5

    problem = problem_from_error(Err, ["first", "    y = lv9 + 1"])
    assert (problem.start_line, problem.start_char, problem.end_line, problem.end_char) == (1, 4, 1, 5)
    assert problem.message == "boom\nnote: a note"
    Err.span.col = Err.span.end_col = 9
    problem = problem_from_error(Err, ["first", "    y = lv9 + 1"])
    assert (problem.start_char, problem.end_char) == (8, 11)


@pytest.mark.parametrize("edited", [SYNTAX_ERROR, STRUCT_INFO_ERROR, BOUNDS_ERROR, GOOD + "\n\n"])
def test_quick_check_equals_the_whole_file_check(edited):
    checker = Checker("t.tvms")
    checker.full(GOOD)
    quick = checker.quick(edited)
    assert quick is not None
    assert quick == Checker("t.tvms").full(edited)
    assert len(quick) == len(file_errors(edited, "t.tvms", 100))


def test_quick_check_declines_a_change_outside_the_functions():
    checker = Checker("t.tvms")
    checker.full(GOOD)
    assert checker.quick(GOOD.replace("class Module:", "class Other:")) is None


def test_formatting_edits_make_the_formatted_text():
    edits = whole_file_edits(UNFORMATTED)
    assert apply_edits(UNFORMATTED, edits) == format_source(UNFORMATTED) == CANONICAL
    assert whole_file_edits(CANONICAL) == []
    # One line changed in the middle: the edit is that line, the rest is left alone.
    line = CANONICAL.split("\n").index('        z: R.Tensor((8,), dtype="float32") = R.add(y, y)  # twice')
    [edit] = whole_file_edits(CANONICAL.replace("R.add(y, y)", "R.add(y,y)"))
    assert edit == (line, 0, line + 1, 0, '        z: R.Tensor((8,), dtype="float32") = R.add(y, y)  # twice\n')


def test_range_formatting_changes_only_the_touched_function():
    main_only = apply_edits(UNFORMATTED, range_edits(UNFORMATTED, 12, 12))  # a line inside main
    assert "(x,)" in main_only and 'main(x: R.Tensor((8,), dtype="float32")' in main_only
    assert "T.float32(1)" in main_only and "# from tvm.script" not in main_only
    add_only = apply_edits(UNFORMATTED, range_edits(UNFORMATTED, 6, 6))  # inside add_one
    assert "T.float32(1.0)" in add_only and "(x, )" in add_only
    both = apply_edits(UNFORMATTED, range_edits(UNFORMATTED, 0, 14))  # the header is no function's
    assert both == CANONICAL[CANONICAL.index("@I.ir_module"):]


class _ServerStub:
    """What `check_formatting` uses of the server: the document the client holds (changed by
    the stub's client when it applies an edit), and what was sent back."""

    def __init__(self, uri: str, text: str, applies: bool) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from tvmscript.lsp import server

        self.uri, self.text, self.applies = uri, text, applies
        self.open_documents = {uri: None}
        self.full_pool = ThreadPoolExecutor(1)
        self.applied, self.messages = [], []
        self.line_index = lambda text: LineIndex(text)
        self.check_formatting = server.TVMScriptLanguageServer.check_formatting.__get__(self)

    def snapshot(self, uri):
        return 1, self.text

    def workspace_apply_edit(self, params):
        self.applied.append(params.edit.changes[self.uri])

    def window_show_message(self, params):
        self.messages.append(params.message)


@pytest.mark.parametrize("client_applied", [True, False])
def test_a_formatting_that_fails_its_check_is_undone(monkeypatch, client_applied):
    """The server answers a formatting request before checking the result (the check is a
    second parse of the file); if the check fails (a bug in the printer, simulated here), the
    document the client holds goes back to the original text."""
    from tvmscript.lsp import server

    monkeypatch.setattr(server, "check_formatted", lambda comments, formatted: "the comment '# gone' is lost")
    monkeypatch.setattr(server, "UNDO_WAIT_STEPS", 2)
    formatted = format_source(UNFORMATTED)
    stub = _ServerStub("file:///t.tvms", formatted if client_applied else UNFORMATTED, client_applied)
    state = server._OpenDocument("file:///t.tvms")
    asyncio.run(stub.check_formatting(stub.uri, state, UNFORMATTED, formatted, None, formatted))
    assert isinstance(state.formatted[1], FormatError), "the next request gets the error, not the edits"
    if client_applied:
        [[undo]] = stub.applied
        assert apply_edits(formatted, [(undo.range.start.line, undo.range.start.character, undo.range.end.line,
                                        undo.range.end.character, undo.new_text)]) == UNFORMATTED
        assert "undone" in stub.messages[0]
    else:
        assert stub.applied == [] and "# gone" in stub.messages[0]


def test_a_formatting_that_passes_its_check_is_remembered():
    from tvmscript.lsp import server

    formatted, comments = server.format_unchecked(UNFORMATTED)
    stub = _ServerStub("file:///t.tvms", formatted, True)
    state = server._OpenDocument("file:///t.tvms")
    asyncio.run(stub.check_formatting(stub.uri, state, UNFORMATTED, formatted, comments, formatted))
    assert state.formatted == (UNFORMATTED, formatted) and stub.applied == [] and stub.messages == []
    assert state.formatting_of(UNFORMATTED) == (formatted, None)


# ---------------------------------------------------------------------- the server over stdio


def _client_factory() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics with its version."""
    client = LanguageClient()
    client.published = []

    def publish(client_: LanguageClient, params: lsp.PublishDiagnosticsParams):
        client_.published.append(params)
        client_.diagnostics[params.uri] = params.diagnostics

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return client


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "tvmscript.cli", "lsp"],
        server_env={**os.environ, "TVMS_LSP_TEST": "1"},
        client_factory=_client_factory,
    ),
)
async def client(lsp_client: LanguageClient):
    lsp_client.initialize_result = await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=pytest_lsp.client_capabilities("visual-studio-code"))
    )
    yield
    await lsp_client.shutdown_session()


_opened = 0


def _open(client: LanguageClient, text: str) -> str:
    global _opened
    _opened += 1
    uri = f"file:///tmp/lsp-test-{_opened}.tvms"
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="tvmscript", version=1, text=text))
    )
    return uri


def _change(client: LanguageClient, uri: str, version: int, changes: list) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=changes
        )
    )


async def _diagnostics(client: LanguageClient, uri: str, version: int, timeout: float = 20.0) -> list:
    """The first diagnostics published for ``uri`` at ``version``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for params in client.published:
            if params.uri == uri and params.version == version:
                return list(params.diagnostics)
        await asyncio.sleep(0.01)
    raise AssertionError(f"no diagnostics for {uri} version {version}")


def _span(d: lsp.Diagnostic) -> tuple:
    return (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)


def _pos(line: int, character: int) -> lsp.Position:
    return lsp.Position(line=line, character=character)


@on_server_loop
async def test_initialize_advertises_the_features(client: LanguageClient):
    result = client.initialize_result
    caps = result.capabilities
    assert result.server_info.name == "tvms"
    assert caps.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert caps.document_formatting_provider and caps.document_range_formatting_provider
    if analysis is not None:
        assert list(caps.completion_provider.trigger_characters) == ["."]
        assert set(caps.signature_help_provider.trigger_characters) == {"(", ","}
        assert list(caps.semantic_tokens_provider.legend.token_types) == list(analysis.TOKEN_TYPES)
        assert list(caps.semantic_tokens_provider.legend.token_modifiers) == list(analysis.TOKEN_MODIFIERS)
        assert caps.rename_provider.prepare_provider is True
        assert caps.hover_provider and caps.definition_provider and caps.references_provider
        assert caps.document_symbol_provider and caps.folding_range_provider


@on_server_loop
async def test_syntax_error_is_published_at_its_range(client: LanguageClient):
    uri = _open(client, SYNTAX_ERROR)
    [d] = await _diagnostics(client, uri, 1)
    assert _span(d) == (12, 17, 12, 18)  # the '(' of R.add(
    assert d.message.startswith("'(' was never closed\nnote: expected ')'")
    assert d.severity == lsp.DiagnosticSeverity.Error and d.source == "tvms"


@on_server_loop
async def test_change_publishes_struct_info_and_bounds_errors(client: LanguageClient):
    uri = _open(client, GOOD)
    assert await _diagnostics(client, uri, 1) == []
    # An incremental change: out_sinfo's (8,) becomes (9,) on line 11.
    line = GOOD.split("\n")[11]
    col = line.index("out_sinfo=R.Tensor((8") + len("out_sinfo=R.Tensor((")
    _change(client, uri, 2, [lsp.TextDocumentContentChangePartial(
        range=lsp.Range(start=_pos(11, col), end=_pos(11, col + 1)), text="9")])
    [d] = await _diagnostics(client, uri, 2)
    assert _span(d) == (11, 12, 11, 78)
    assert "R.call_tir to 'add_one'" in d.message and "dimension 0: 9 vs 8" in d.message
    # Then the whole text: an access one past the end of A in a loop over all of it.
    _change(client, uri, 3, [lsp.TextDocumentContentChangeWholeDocument(text=BOUNDS_ERROR)])
    [d] = await _diagnostics(client, uri, 3)
    assert _span(d) == (6, 19, 6, 27)  # A[i + 1]
    assert "out-of-bounds read of A[i + 1]" in d.message
    # The quick answer was the whole-file check's: nothing else is published for this version.
    await asyncio.sleep(1.0)
    assert [len(p.diagnostics) for p in client.published if p.uri == uri and p.version == 3] == [1]
    _change(client, uri, 4, [lsp.TextDocumentContentChangeWholeDocument(text=GOOD)])
    assert await _diagnostics(client, uri, 4) == []


@on_server_loop
async def test_diagnostics_count_utf16_columns(client: LanguageClient):
    # The emoji before the undefined name is one str index but two UTF-16 code units.
    text = GOOD.replace("z = R.add(y, y)  # twice",
                        'z = R.call_pure_packed("\U0001F600", y, w, sinfo_args=R.Tensor((8,), "float32"))')
    uri = _open(client, text)
    [d] = await _diagnostics(client, uri, 1)
    index = text.split("\n")[12].index(", w,") + 2
    assert d.message == "undefined name 'w'"
    assert _span(d) == (12, index + 1, 12, index + 2)


@on_server_loop
async def test_stale_versions_are_not_published(client: LanguageClient):
    uri = _open(client, GOOD)
    await _diagnostics(client, uri, 1)
    for version in range(2, 12):  # a burst of edits, closer together than the debounce
        text = SYNTAX_ERROR if version % 2 else GOOD
        _change(client, uri, version, [lsp.TextDocumentContentChangeWholeDocument(text=text)])
    [d] = await _diagnostics(client, uri, 11)
    assert "never closed" in d.message
    versions = [p.version for p in client.published if p.uri == uri]
    assert versions == sorted(versions) and len(versions) < 6


@on_server_loop
async def test_formatting_keeps_comments(client: LanguageClient):
    uri = _open(client, UNFORMATTED)
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(text_document=lsp.TextDocumentIdentifier(uri=uri),
                                     options=lsp.FormattingOptions(tab_size=4, insert_spaces=True))
    )
    result = apply_edits(UNFORMATTED, [(e.range.start.line, e.range.start.character, e.range.end.line,
                                   e.range.end.character, e.new_text) for e in edits])
    assert result == format_source(UNFORMATTED)
    assert "# one more than A" in result and "# twice" in result


@on_server_loop
async def test_formatting_a_broken_file_gives_no_edits_and_a_message(client: LanguageClient):
    uri = _open(client, SYNTAX_ERROR)
    before = len(client.messages)
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(text_document=lsp.TextDocumentIdentifier(uri=uri),
                                     options=lsp.FormattingOptions(tab_size=4, insert_spaces=True))
    )
    assert list(edits) == []
    for _ in range(100):
        if len(client.messages) > before:
            break
        await asyncio.sleep(0.01)
    assert "does not parse" in client.messages[-1].message
    assert client.messages[-1].type == lsp.MessageType.Warning


@on_server_loop
async def test_range_formatting_edits_only_the_touched_function(client: LanguageClient):
    uri = _open(client, UNFORMATTED)
    edits = await client.text_document_range_formatting_async(
        lsp.DocumentRangeFormattingParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(start=_pos(12, 0), end=_pos(12, 4)),
            options=lsp.FormattingOptions(tab_size=4, insert_spaces=True))
    )
    assert edits and all(e.range.start.line >= 8 for e in edits)  # main's lines only
    result = apply_edits(UNFORMATTED, [(e.range.start.line, e.range.start.character, e.range.end.line,
                                   e.range.end.character, e.new_text) for e in edits])
    assert result == apply_edits(UNFORMATTED, range_edits(UNFORMATTED, 12, 12))


@on_server_loop
async def test_crash_is_an_internal_error_and_the_server_keeps_serving(client: LanguageClient):
    uri = _open(client, CANONICAL)
    with pytest.raises(JsonRpcException) as caught:
        await client.protocol.send_request_async("tvms/crash", {"textDocument": {"uri": uri}})
    assert caught.value.code == -32603
    assert "deliberate crash" in caught.value.message
    for _ in range(100):
        if any("deliberate crash" in m.message for m in client.log_messages):
            break
        await asyncio.sleep(0.01)
    assert any("deliberate crash" in m.message and m.type == lsp.MessageType.Error for m in client.log_messages)
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(text_document=lsp.TextDocumentIdentifier(uri=uri),
                                     options=lsp.FormattingOptions(tab_size=4, insert_spaces=True))
    )
    assert list(edits) == []  # already formatted: answered, and correctly


# ---------------------------------------------------------------------- the analysis, through the protocol

needs_analysis = pytest.mark.skipif(analysis is None, reason="tvmscript/lsp/analysis.py is missing")


@needs_analysis
@on_server_loop
async def test_semantic_tokens_legend_and_triggers(client: LanguageClient):
    uri = _open(client, GOOD)
    tokens = await client.text_document_semantic_tokens_full_async(
        lsp.SemanticTokensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    data = tokens.data
    assert data and len(data) % 5 == 0
    decoded, line, start = [], 0, 0
    for i in range(0, len(data), 5):
        dl, ds, length, kind, _ = data[i:i + 5]
        line += dl
        start = start + ds if dl == 0 else ds
        decoded.append((line, start, length, analysis.TOKEN_TYPES[kind]))
    expected = [(t.line, t.char, t.length, t.type) for t in analysis.Document(GOOD).semantic_tokens()
                if t.type in analysis.TOKEN_TYPES]
    assert decoded == expected
    words = {GOOD.split("\n")[ln][s:s + n]: kind for ln, s, n, kind in decoded}
    assert words.get("add_one") == "function"


@needs_analysis
@on_server_loop
async def test_hover_definition_references_rename(client: LanguageClient):
    uri = _open(client, GOOD)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    hover = await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=_pos(12, 18)))
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    assert 'y: R.Tensor((8,), dtype="float32")' in hover.contents.value  # its struct info
    hover = await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=_pos(11, 27)))
    assert "def add_one(" in hover.contents.value  # cls.add_one: the function's signature
    [loc] = await client.text_document_definition_async(lsp.DefinitionParams(text_document=doc, position=_pos(12, 18)))
    assert loc.uri == uri and (loc.range.start.line, loc.range.start.character) == (11, 8)
    refs = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=doc, position=_pos(12, 18), context=lsp.ReferenceContext(include_declaration=True)))
    assert sorted((r.range.start.line, r.range.start.character) for r in refs) == [(11, 8), (12, 18), (12, 21)]
    prepared = await client.text_document_prepare_rename_async(lsp.PrepareRenameParams(text_document=doc, position=_pos(12, 18)))
    assert (prepared.start.line, prepared.start.character, prepared.end.character) == (12, 18, 19)
    edit = await client.text_document_rename_async(lsp.RenameParams(text_document=doc, position=_pos(12, 18), new_name="lv"))
    assert sorted((e.range.start.line, e.range.start.character, e.new_text) for e in edit.changes[uri]) == [
        (11, 8, "lv"), (12, 18, "lv"), (12, 21, "lv")]
    with pytest.raises(JsonRpcException) as caught:  # a clash is the user's mistake: RequestFailed
        await client.text_document_rename_async(lsp.RenameParams(text_document=doc, position=_pos(12, 18), new_name="z"))
    assert caught.value.code == -32803


@needs_analysis
@on_server_loop
async def test_completion_and_signature_help(client: LanguageClient):
    text = GOOD.replace("        return z\n", "        w = R.\n        return z\n")
    uri = _open(client, text)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    result = await client.text_document_completion_async(lsp.CompletionParams(
        text_document=doc, position=_pos(13, 14),
        context=lsp.CompletionContext(trigger_kind=lsp.CompletionTriggerKind.TriggerCharacter, trigger_character=".")))
    labels = {item.label for item in result.items}
    assert {"add", "call_tir"} <= labels
    text2 = GOOD.replace("        return z\n", "        w = R.add(z, \n        return z\n")
    uri2 = _open(client, text2)
    help_ = await client.text_document_signature_help_async(lsp.SignatureHelpParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri2), position=_pos(13, 21)))
    assert help_ is not None and help_.active_parameter == 1 and "add" in help_.signatures[0].label


@needs_analysis
@on_server_loop
async def test_requests_on_a_broken_file_are_answered(client: LanguageClient):
    uri = _open(client, SYNTAX_ERROR + "    def broken(:\n")
    doc = lsp.TextDocumentIdentifier(uri=uri)
    await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=_pos(12, 18)))
    await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(text_document=doc))
    await client.text_document_folding_range_async(lsp.FoldingRangeParams(text_document=doc))
    await client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(text_document=doc))
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=_open(client, GOOD))))
    assert any("add_one" in _names(s) for s in symbols)


def _names(symbol) -> set:
    return {symbol.name} | {n for child in symbol.children or [] for n in _names(child)}


# ---------------------------------------------------------------------- the command


def test_tvms_lsp_help_through_the_entry_point():
    tvms = shutil.which("tvms")
    if tvms is None:
        pytest.skip("the tvms entry point is not installed")
    out = subprocess.run([tvms, "lsp", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "usage: tvms lsp" in out.stdout and "language server" in out.stdout
    listed = subprocess.run([tvms, "--help"], capture_output=True, text=True, timeout=60)
    assert "run the language server (stdio) for editors" in listed.stdout


def test_tvms_lsp_without_pygls_says_which_extra(monkeypatch, capsys):
    from tvmscript import cli

    monkeypatch.setitem(sys.modules, "pygls", None)
    monkeypatch.setitem(sys.modules, "pygls.lsp.server", None)
    monkeypatch.delitem(sys.modules, "tvmscript.lsp.server", raising=False)
    assert cli.main(["lsp"]) == 1
    assert capsys.readouterr().err.strip() == "error: tvms lsp needs the lsp extra: pip install 'tvms[lsp]'"
