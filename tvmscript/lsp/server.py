"""The tvms language server (``tvms lsp``): pygls over stdio.

What it does, and where the work is:

* Diagnostics, on open and on every change: what `tvms check` reports
  (`tvmscript.checking.file_errors`), converted to LSP ranges (`server_checks.Problem`,
  `server_positions.LineIndex`). An edit is answered first by `Checker.quick`, which checks only
  the functions the edit touched (milliseconds), and then, once typing pauses, by the
  whole-file check, published if it differs.
* Formatting and range formatting: `tvms fmt` (`server_formatting`). Once a client has asked
  to format a document (format on save), the server formats each error-free version ahead of
  time when typing pauses, so the request finds the answer ready.
* Hover, definition, references, rename, completion, signature help, semantic tokens, document
  symbols and folding ranges: `tvmscript.lsp.analysis.Document`, one per document version.

The event loop only reads messages, converts positions and sends answers; every analysis runs in
a thread pool, so a slow whole-file check never holds up a hover. Stale work is dropped: a change
cancels the document's pending diagnostics task (waiting out its debounce, or waiting for a
thread: a check that has not started is taken off its queue, one that has finishes but is not
published), and diagnostics are published only if the document still has the version they were
computed for.

A request that fails is answered with an InternalError ResponseError; the traceback goes to the
server's log (stderr) and to the client as window/logMessage. The server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .server_checks import Checker
from ..diagnostics import TVMScriptError
from ..formatting import check_formatted, format_unchecked, parse_with_comments
from .server_formatting import FormatError, apply_edits, range_edits, whole_file_edits
from .server_positions import LineIndex

__all__ = ["TVMScriptLanguageServer", "make_server", "serve_stdio"]

logger = logging.getLogger("tvmscript.lsp")

# Changes arriving closer together than this are checked once, for the last one.
DEBOUNCE_S = 0.008
# After a quick check, the whole-file check waits for this much quiet: it takes hundreds of
# milliseconds on a large file, and its answer is rarely different.
FULL_CHECK_DELAY_S = 0.3
MAX_ERRORS = 100
# After answering a formatting request, its check waits up to this long for the client to
# apply the edits (the didChange) before deciding how to undo them.
UNDO_WAIT_STEPS, UNDO_WAIT_STEP_S = 20, 0.05
# Set to 1 by the tests: adds the request tvms/crash, which fails on purpose.
TEST_HOOKS_ENV = "TVMS_LSP_TEST"
_REQUEST_FAILED = -32803  # LSP's RequestFailed: a valid request the server could not carry out

try:  # the analysis is a sibling module; without it the server still checks and formats
    from . import analysis
except ImportError as _err:  # pragma: no cover - only while the package is incomplete
    analysis = None
    _ANALYSIS_MISSING = f"{type(_err).__name__}: {_err}"
else:
    _ANALYSIS_MISSING = None


class _OpenDocument:
    """The server's state for one open document: its checker, its pending diagnostics task,
    what was last published, and the analysis `Document` of its latest version (built and used
    under ``lock``: the analysis caches lazily and is not meant to be shared between threads)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        path = to_fs_path(uri) or uri
        self.filename = os.path.basename(path) or "<document>"
        self.checker = Checker(self.filename, MAX_ERRORS)
        self.task: asyncio.Task | None = None
        self.published: tuple | None = None
        self.lock = threading.RLock()  # the analysis and formatting of this document
        self.analysis_key: tuple | None = None
        self.analysis_doc = None
        # (text, its formatted text or the FormatError): the last formatting, or one made ahead
        # of time once the client has asked to format this document (format on save).
        self.formatted: tuple | None = None
        self.formats = False

    def formatted_text(self, text: str) -> str:
        """`tvms fmt`'s text of ``text``, checked (`check_formatted`) and remembered (a
        formatting made ahead of time); raises `FormatError`."""
        try:
            formatted, comments = self.formatting_of(text)
            problem = check_formatted(comments, formatted) if comments is not None else None
            if problem:
                raise FormatError.unsafe(self.filename, problem)
        except FormatError as err:
            self.formatted = (text, err)
            raise
        self.formatted = (text, formatted)
        return formatted

    def formatting_of(self, text: str, version=None) -> tuple:
        """(the formatted text, the user's comments to check it against, or None when it is
        checked already): the remembered formatting of this text if there is one, else one
        made now, unchecked (`format_unchecked`); raises `FormatError`."""
        done = self.formatted
        if done is not None and done[0] == text:
            if isinstance(done[1], FormatError):
                raise done[1]
            return done[1], None
        with self.lock:  # (reentrant) the whole formatting, so the warmed analysis waits for it
            formatted, comments = format_unchecked(text, self.filename, self.parsed_ir(text, version))
        return formatted, (comments if formatted != text else None)

    def parsed_ir(self, text: str, version=None):
        """The (IR, comments) of ``text``: from its analysis if one was made, else (given the
        document's ``version``, i.e. for a formatting request) parsed now, under the
        document's lock, so that the analysis the server warms after an edit waits for this
        parse instead of racing it for the interpreter (each would take twice as long). None:
        the caller parses the text itself (and reports why it does not parse)."""
        with self.lock:
            doc = self.analysis_doc
            if analysis is not None and doc is not None and doc.text == text and doc.analysed is not None:
                return doc.analysed.parsed_ir
            if version is None:
                return None
            try:
                return parse_with_comments(text, self.filename)
            except TVMScriptError:
                return None

    def analysis_document(self, version, text: str):
        """The analysis Document of this text (call with ``lock`` held)."""
        key = (version, text)
        if self.analysis_key != key:
            self.analysis_doc = analysis.Document(text, self.filename)
            self.analysis_key = key
        return self.analysis_doc


class TVMScriptLanguageServer(LanguageServer):
    """pygls' LanguageServer with the tvms features' state: open documents and thread pools:
    quick checks; whole-file checks and formatting; the other requests. Kept apart, so a hover
    never queues behind a whole-file check."""

    def __init__(self) -> None:
        super().__init__("tvms", _version(), text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.open_documents: dict[str, _OpenDocument] = {}
        self.quick_pool = ThreadPoolExecutor(1, thread_name_prefix="tvms-quick-check")
        self.full_pool = ThreadPoolExecutor(1, thread_name_prefix="tvms-full-check")
        self.request_pool = ThreadPoolExecutor(2, thread_name_prefix="tvms-request")
        self.checks_in_flight: set = set()  # formattings sent, being checked (check_formatting)

    # ------------------------------------------------------------------ documents and positions

    def state(self, uri: str) -> _OpenDocument:
        """The state of ``uri`` (made on first use, also for a document the client did not open)."""
        state = self.open_documents.get(uri)
        if state is None:
            state = self.open_documents[uri] = _OpenDocument(uri)
        return state

    def snapshot(self, uri: str) -> tuple:
        """(version, text) of the document as the client last sent it."""
        doc = self.workspace.get_text_document(uri)
        return doc.version, doc.source

    def is_current(self, uri: str, version) -> bool:
        return uri in self.open_documents and self.workspace.get_text_document(uri).version == version

    def line_index(self, text: str) -> LineIndex:
        encoding = self.workspace.position_encoding
        return LineIndex(text, getattr(encoding, "value", encoding) or "utf-16")

    # ------------------------------------------------------------------ faults

    def fault(self, where: str, exc: BaseException) -> str:
        """Log a failure of the server (not of the user's program): the server log gets the
        traceback, the client a window/logMessage. Returns the one-line description."""
        summary = f"tvms lsp: {where} failed: {type(exc).__name__}: {exc}"
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        logger.error("%s\n%s", summary, trace)
        try:
            self.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Error, message=f"{summary}\n{trace}"))
        except Exception:  # noqa: BLE001 - the client may be gone; the log has it
            logger.warning("could not send the failure to the client")
        return summary

    async def answer(self, where: str, uri: str, compute):
        """``compute(document, index)`` for the current text of ``uri``, in the request pool,
        with the document's analysis (``document`` is None when the analysis module is
        missing); a failure becomes an InternalError answer, logged (see `fault`)."""
        version, text = self.snapshot(uri)
        state = self.state(uri)
        index = self.line_index(text)

        def run():
            with state.lock:
                document = state.analysis_document(version, text) if analysis is not None else None
                return compute(document, index)

        try:
            return await asyncio.get_running_loop().run_in_executor(self.request_pool, run)
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in tvms: answer with an error, keep serving
            raise JsonRpcInternalError(self.fault(where, exc)) from None

    # ------------------------------------------------------------------ diagnostics

    def schedule_diagnostics(self, uri: str) -> None:
        """Check ``uri`` again for its current version, dropping the work for older ones."""
        state = self.state(uri)
        if state.task is not None:
            state.task.cancel()
        version = self.workspace.get_text_document(uri).version
        state.task = asyncio.ensure_future(self._diagnose(state, version))

    async def _diagnose(self, state: _OpenDocument, version) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.sleep(DEBOUNCE_S)
            if not self.is_current(state.uri, version):
                return
            text = self.workspace.get_text_document(state.uri).source
            quick = await loop.run_in_executor(self.quick_pool, state.checker.quick, text)
            if quick is not None:
                if not self.is_current(state.uri, version):
                    return
                self.publish(state, version, text, quick)
                self.warm_analysis(state, version, text)
                await asyncio.sleep(FULL_CHECK_DELAY_S)
                if not self.is_current(state.uri, version):
                    return
            full = await loop.run_in_executor(self.full_pool, state.checker.full, text)
            if not self.is_current(state.uri, version):
                return
            self.publish(state, version, text, full)
            if quick is None:
                self.warm_analysis(state, version, text)
            if state.formats and not full:
                # The client formats this document (on save, most likely): have the text ready.
                await loop.run_in_executor(self.full_pool, _format_ahead, state, text)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in tvms: log it, keep serving
            self.fault("checking the document", exc)

    def publish(self, state: _OpenDocument, version, text: str, problems: list) -> None:
        """Send the diagnostics of ``problems``, unless the client has them for this version
        already (the whole-file check agreeing with the quick one)."""
        key = (version, tuple(problems))
        if key == state.published:
            return
        state.published = key
        index = self.line_index(text)
        diagnostics = [_diagnostic(p, index) for p in problems]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=state.uri, diagnostics=diagnostics, version=version)
        )

    def warm_analysis(self, state: _OpenDocument, version, text: str) -> None:
        """Build the analysis of the new text in the background, so the next hover or semantic
        tokens request finds it ready."""
        if analysis is None:
            return

        def warm():
            try:
                with state.lock:
                    if self.workspace.get_text_document(state.uri).version == version:
                        state.analysis_document(version, text).document_symbols()
            except Exception:  # noqa: BLE001 - the request that needs it will report it
                logger.debug("warming the analysis failed", exc_info=True)

        self.request_pool.submit(warm)

    def forget(self, uri: str) -> None:
        state = self.open_documents.pop(uri, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # ------------------------------------------------------------------ formatting

    async def format(self, uri: str, lines: tuple | None) -> list:
        """The edits of ``tvms fmt`` for the whole document, or for the functions touching
        ``lines`` (first, last: 0-based, inclusive). A document that does not parse gets no
        edits and a window/showMessage saying why."""
        version, text = self.snapshot(uri)
        state = self.state(uri)
        state.formats = True  # from now on, the text is formatted ahead whenever typing pauses

        def run():
            formatted, comments = state.formatting_of(text, version)
            if lines is None:
                edits = whole_file_edits(text, state.filename, formatted)
            else:
                edits = range_edits(text, lines[0], lines[1], state.filename, formatted)
            return formatted, comments, edits

        try:
            # In the pool of whole-file checks: the two take the whole file's time, and taking
            # turns is quicker than sharing the interpreter.
            formatted, comments, edits = await asyncio.get_running_loop().run_in_executor(self.full_pool, run)
        except FormatError as err:
            kind = lsp.MessageType.Warning if err.error is not None else lsp.MessageType.Error
            self.window_show_message(lsp.ShowMessageParams(type=kind, message=f"tvms fmt: {err}"))
            return []
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise JsonRpcInternalError(self.fault("formatting", exc)) from None
        if comments is not None and edits:
            task = asyncio.ensure_future(self.check_formatting(uri, state, text, formatted, comments,
                                                               apply_edits(text, edits)))
            self.checks_in_flight.add(task)
            task.add_done_callback(self.checks_in_flight.discard)
        index = self.line_index(text)
        return [_text_edit(index, *edit) for edit in edits]

    async def check_formatting(self, uri: str, state: _OpenDocument, text: str, formatted: str, comments,
                               expected: str) -> None:
        """Check a formatting the client has been sent (`check_formatted`: the formatted text
        parses and keeps every comment). If it fails, which would be a bug in tvms, the edits
        are undone: the document goes back to ``text`` through workspace/applyEdit, if the
        client holds exactly what the edits made (``expected``); else the user is told to undo."""
        loop = asyncio.get_running_loop()
        try:
            problem = await loop.run_in_executor(self.full_pool, check_formatted, comments, formatted)
        except Exception as exc:  # noqa: BLE001 - a bug in the check itself: keep serving
            problem = f"checking it failed ({type(exc).__name__}: {exc})"
        if problem is None:
            state.formatted = (text, formatted)
            return
        err = FormatError.unsafe(state.filename, problem)
        state.formatted = (text, err)
        logger.error("tvms fmt: %s", err)
        for _ in range(UNDO_WAIT_STEPS):  # the client applies the edits, then says so (didChange)
            if uri not in self.open_documents:
                return
            _, current = self.snapshot(uri)
            if current != text:
                break
            await asyncio.sleep(UNDO_WAIT_STEP_S)
        if current == expected:
            index = self.line_index(current)
            last = len(index.lines) - 1
            undo = _text_edit(index, 0, 0, last, len(index.lines[last]), text)
            self.workspace_apply_edit(lsp.ApplyWorkspaceEditParams(
                edit=lsp.WorkspaceEdit(changes={uri: [undo]}), label="tvms fmt: undo"))
            message = f"tvms fmt: the formatting was undone: {err}"
        elif current == text:
            message = f"tvms fmt: {err}"
        else:
            message = f"tvms fmt: undo the last formatting: {err}"
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))


def _format_ahead(state: _OpenDocument, text: str) -> None:
    try:
        state.formatted_text(text)
    except FormatError:
        pass


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tvms")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


# ---------------------------------------------------------------------- conversions


def _position(index: LineIndex, line: int, char: int) -> lsp.Position:
    line, char = index.to_client(line, char)
    return lsp.Position(line=line, character=char)


def _range(index: LineIndex, r) -> lsp.Range:
    """An LSP range of an analysis `Range` (0-based, str indices)."""
    return lsp.Range(start=_position(index, r.start_line, r.start_char), end=_position(index, r.end_line, r.end_char))


def _text_edit(index: LineIndex, start_line, start_char, end_line, end_char, new_text) -> lsp.TextEdit:
    return lsp.TextEdit(
        range=lsp.Range(start=_position(index, start_line, start_char), end=_position(index, end_line, end_char)),
        new_text=new_text,
    )


def _diagnostic(problem, index: LineIndex) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=lsp.Range(
            start=_position(index, problem.start_line, problem.start_char),
            end=_position(index, problem.end_line, problem.end_char),
        ),
        message=problem.message,
        severity=lsp.DiagnosticSeverity.Error,
        source="tvms",
    )


def _cursor(index: LineIndex, position: lsp.Position) -> tuple[int, int]:
    return index.from_client(position.line, position.character)


def _location(uri: str, index: LineIndex, r) -> lsp.Location:
    return lsp.Location(uri=uri, range=_range(index, r))


def _markdown(text: str) -> lsp.MarkupContent:
    return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)


_COMPLETION_KINDS = {
    "function": lsp.CompletionItemKind.Function,
    "module": lsp.CompletionItemKind.Module,
    "keyword": lsp.CompletionItemKind.Keyword,
    "type": lsp.CompletionItemKind.Class,
    "variable": lsp.CompletionItemKind.Variable,
}

_SYMBOL_KINDS = {
    "module": lsp.SymbolKind.Module,
    "function": lsp.SymbolKind.Function,
    "namespace": lsp.SymbolKind.Namespace,
    "variable": lsp.SymbolKind.Variable,
}


def _completion_item(item) -> lsp.CompletionItem:
    return lsp.CompletionItem(
        label=item.label,
        kind=_COMPLETION_KINDS.get(item.kind, lsp.CompletionItemKind.Text),
        detail=item.detail or None,
        documentation=_markdown(item.documentation) if item.documentation else None,
    )


def _signature_help(sig) -> lsp.SignatureHelp:
    info = lsp.SignatureInformation(
        label=sig.label,
        documentation=_markdown(sig.documentation) if sig.documentation else None,
        parameters=[lsp.ParameterInformation(label=p) for p in sig.parameters],
    )
    return lsp.SignatureHelp(signatures=[info], active_signature=0, active_parameter=sig.active_parameter)


def _document_symbol(symbol, index: LineIndex) -> lsp.DocumentSymbol:
    full = _range(index, symbol.range)
    selection = _range(index, symbol.selection_range)
    if not (_le(full.start, selection.start) and _le(selection.end, full.end)):
        selection = full  # clients reject a selection outside its symbol's range
    return lsp.DocumentSymbol(
        name=symbol.name or "?",
        kind=_SYMBOL_KINDS.get(symbol.kind, lsp.SymbolKind.Variable),
        range=full,
        selection_range=selection,
        children=[_document_symbol(child, index) for child in symbol.children],
    )


def _le(a: lsp.Position, b: lsp.Position) -> bool:
    return (a.line, a.character) <= (b.line, b.character)


def encode_semantic_tokens(tokens, index: LineIndex, types: list, modifiers: list) -> list:
    """LSP's relative encoding (delta line, delta start, length, type, modifier bits) of the
    analysis' tokens, in client units; tokens of an unknown type are left out."""
    type_ids = {name: i for i, name in enumerate(types)}
    modifier_bits = {name: 1 << i for i, name in enumerate(modifiers)}
    data: list = []
    last_line = last_start = 0
    for token in sorted(tokens, key=lambda t: (t.line, t.char)):
        kind = type_ids.get(token.type)
        if kind is None or token.length <= 0:
            continue
        line, start = index.to_client(token.line, token.char)
        length = index.length_to_client(token.line, token.char, token.length)
        bits = 0
        for name in token.modifiers:
            bits |= modifier_bits.get(name, 0)
        data += [line - last_line, start - last_start if line == last_line else start, length, kind, bits]
        last_line, last_start = line, start
    return data


# ---------------------------------------------------------------------- the server


def make_server() -> TVMScriptLanguageServer:
    """The server with every feature registered (not started)."""
    server = TVMScriptLanguageServer()
    _register_document_sync(server)
    _register_formatting(server)
    if analysis is not None:
        _register_analysis_features(server)
    if os.environ.get(TEST_HOOKS_ENV) == "1":
        _register_test_hooks(server)
    return server


def _register_document_sync(server: TVMScriptLanguageServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TVMScriptLanguageServer, params: lsp.DidOpenTextDocumentParams):
        ls.schedule_diagnostics(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TVMScriptLanguageServer, params: lsp.DidChangeTextDocumentParams):
        ls.schedule_diagnostics(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TVMScriptLanguageServer, params: lsp.DidCloseTextDocumentParams):
        ls.forget(params.text_document.uri)

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: TVMScriptLanguageServer, params: lsp.InitializedParams):
        if _ANALYSIS_MISSING is not None:
            ls.window_log_message(lsp.LogMessageParams(
                type=lsp.MessageType.Error,
                message=f"tvms lsp: the analysis module is missing ({_ANALYSIS_MISSING}); only diagnostics "
                "and formatting are available",
            ))


def _register_formatting(server: TVMScriptLanguageServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    async def formatting(ls: TVMScriptLanguageServer, params: lsp.DocumentFormattingParams):
        return await ls.format(params.text_document.uri, None)

    @server.feature(lsp.TEXT_DOCUMENT_RANGE_FORMATTING)
    async def range_formatting(ls: TVMScriptLanguageServer, params: lsp.DocumentRangeFormattingParams):
        start, end = params.range.start, params.range.end
        last = end.line - 1 if end.character == 0 and end.line > start.line else end.line
        return await ls.format(params.text_document.uri, (start.line, last))


def _register_analysis_features(server: TVMScriptLanguageServer) -> None:
    """The features answered by `analysis.Document`, each a thin conversion of its result."""

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TVMScriptLanguageServer, params: lsp.HoverParams):
        def compute(doc, index):
            text = doc.hover(*_cursor(index, params.position))
            return lsp.Hover(contents=_markdown(text)) if text else None

        return await ls.answer("hover", params.text_document.uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    async def definition(ls: TVMScriptLanguageServer, params: lsp.DefinitionParams):
        uri = params.text_document.uri

        def compute(doc, index):
            return [_location(uri, index, r) for r in doc.definition(*_cursor(index, params.position))]

        return await ls.answer("definition", uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    async def references(ls: TVMScriptLanguageServer, params: lsp.ReferenceParams):
        uri = params.text_document.uri
        include = params.context.include_declaration if params.context is not None else True

        def compute(doc, index):
            found = doc.references(*_cursor(index, params.position), include_declaration=include)
            return [_location(uri, index, r) for r in found]

        return await ls.answer("references", uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
    async def prepare_rename(ls: TVMScriptLanguageServer, params: lsp.PrepareRenameParams):
        def compute(doc, index):
            r = doc.prepare_rename(*_cursor(index, params.position))
            return _range(index, r) if r is not None else None

        return await ls.answer("prepareRename", params.text_document.uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_RENAME)
    async def rename(ls: TVMScriptLanguageServer, params: lsp.RenameParams):
        uri = params.text_document.uri

        def compute(doc, index):
            try:
                edits = doc.rename(*_cursor(index, params.position), params.new_name)
            except analysis.RenameError as err:  # the user's mistake: say why, no crash report
                raise JsonRpcException(str(err), code=_REQUEST_FAILED) from None
            changes = [lsp.TextEdit(range=_range(index, r), new_text=text) for r, text in edits]
            return lsp.WorkspaceEdit(changes={uri: changes})

        return await ls.answer("rename", uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."]))
    async def completion(ls: TVMScriptLanguageServer, params: lsp.CompletionParams):
        def compute(doc, index):
            items = doc.completions(*_cursor(index, params.position))
            return lsp.CompletionList(is_incomplete=False, items=[_completion_item(i) for i in items])

        return await ls.answer("completion", params.text_document.uri, compute)

    @server.feature(
        lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
        lsp.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[","]),
    )
    async def signature_help(ls: TVMScriptLanguageServer, params: lsp.SignatureHelpParams):
        def compute(doc, index):
            sig = doc.signature_help(*_cursor(index, params.position))
            return _signature_help(sig) if sig is not None else None

        return await ls.answer("signatureHelp", params.text_document.uri, compute)

    legend = lsp.SemanticTokensLegend(
        token_types=list(analysis.TOKEN_TYPES), token_modifiers=list(analysis.TOKEN_MODIFIERS)
    )

    @server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, legend)
    async def semantic_tokens(ls: TVMScriptLanguageServer, params: lsp.SemanticTokensParams):
        def compute(doc, index):
            data = encode_semantic_tokens(doc.semantic_tokens(), index, legend.token_types, legend.token_modifiers)
            return lsp.SemanticTokens(data=data)

        return await ls.answer("semanticTokens", params.text_document.uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbols(ls: TVMScriptLanguageServer, params: lsp.DocumentSymbolParams):
        def compute(doc, index):
            return [_document_symbol(s, index) for s in doc.document_symbols()]

        return await ls.answer("documentSymbol", params.text_document.uri, compute)

    @server.feature(lsp.TEXT_DOCUMENT_FOLDING_RANGE)
    async def folding_ranges(ls: TVMScriptLanguageServer, params: lsp.FoldingRangeParams):
        def compute(doc, index):
            return [lsp.FoldingRange(start_line=a, end_line=b) for a, b in doc.folding_ranges() if b > a]

        return await ls.answer("foldingRange", params.text_document.uri, compute)


def _register_test_hooks(server: TVMScriptLanguageServer) -> None:
    """Requests for the tests only (``TVMS_LSP_TEST=1``): ``tvms/crash`` fails inside the
    request pool, as a bug in the analysis would."""

    @server.feature("tvms/crash")
    async def crash(ls: TVMScriptLanguageServer, params):
        uri = getattr(getattr(params, "textDocument", None), "uri", None) or "untitled:crash"

        def compute(doc, index):
            raise RuntimeError("deliberate crash for the tests")

        return await ls.answer("tvms/crash", uri, compute)


def serve_stdio() -> int:
    """Serve one client over standard input and output until it exits. Anything printed to
    sys.stdout by tvms code goes to stderr instead: stdout carries only the protocol."""
    level = os.environ.get("TVMS_LSP_LOG", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="tvms lsp %(levelname)s %(name)s: %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    _warm_parser()
    server = make_server()
    server.start_io(stdin, stdout)
    return 0


def _warm_parser() -> None:
    """Load the parser's tables before serving, in this thread, so the first checks (possibly
    in two threads at once) do not both build them."""
    from ..parser import parse_source
    from ..diagnostics import TVMScriptError

    try:
        parse_source("@I.ir_module\nclass Module:\n    pass\n", "<warm>")
    except TVMScriptError:
        pass
