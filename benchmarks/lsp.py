"""The language server's response times on a 2,000-line module, over stdio, beside the goals.

    python benchmarks/lsp.py [--lines 2000] [--runs 7]

Generates one ``@I.ir_module`` from the functions of samples/*.tvms (those whose module parses
and checks clean), repeated under fresh names until it has --lines lines; starts the real server
(``python -m tvmscript.cli lsp``) with pygls' client, opens the file, and times, as the median
of --runs runs:

* diagnostics: from sending an edit (didChange, incremental, one line of a function in the
  middle of the file: an undefined name put in, then taken out) to the publishDiagnostics for
  that version (goal < 150 ms). The server answers an edit from the functions it touched, then
  re-checks the whole file when typing pauses; the time to the whole-file answer is the
  reference below.
* hover over a variable, once the analysis of the version is built (goal < 20 ms); and the
  first hover after opening (the analysis is built then).
* textDocument/formatting of the whole file (goal < 300 ms), right after an edit (each edit
  a new text, so nothing comes from a cache): the request parses and prints the text and
  answers, and the server checks the result (a second parse) after answering, undoing the
  edits if the check fails; and after a pause in typing, when the server has formatted the
  text ahead of time (it does once the client has asked it to format that document).

The references, in this process and on the same text: `tvms check`'s `file_errors` and
`tvms fmt`'s `format_source`.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lsprotocol import types as lsp  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from tvmscript.checking import file_errors, function_units  # noqa: E402
from tvmscript.diagnostics import TVMScriptError  # noqa: E402
from tvmscript.formatting import format_source  # noqa: E402
from tvmscript.parser import parse_source  # noqa: E402

GOALS_MS = {"diagnostics": 150, "hover": 20, "formatting": 300, "formatting, just after an edit": 300}


# ---------------------------------------------------------------------- the module


def _renamed(funcs: list, names: list, suffix: str) -> list:
    """The functions with every name of their module (definitions, ``cls.f``, ``R.call_tir(f``)
    given ``suffix``, so copies do not clash."""
    out = []
    for text in funcs:
        for name in names:
            text = re.sub(rf"(?<![\w.])(cls\.)?{name}(?!\w)", lambda m, n=name: (m[1] or "") + n + suffix, text)
        out.append(text)
    return out


def _module(funcs: list) -> str:
    return "@I.ir_module\nclass Module:\n" + "\n\n".join(funcs) + "\n"


def _sample_modules() -> list:
    """(functions, names) of each sample module whose functions, renamed, parse and check clean
    as a module of their own."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "samples", "*.tvms"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        units = function_units(lines)
        funcs = ["\n".join(lines[a:b]).rstrip() for a, b, _ in units]
        names = [name for _, _, name in units]
        text = _module(_renamed(funcs, names, "_x"))
        try:
            parse_source(text, path)
        except TVMScriptError:
            continue
        if not file_errors(text, path, 1):
            found.append((funcs, names))
    return found


def generate_module(min_lines: int) -> str:
    """One module of at least ``min_lines`` lines: the sample modules' functions, copied under
    fresh names (``main_3_1``: copy 3 of sample 1)."""
    samples = _sample_modules()
    body: list = []
    copy = 0
    while sum(f.count("\n") + 2 for f in body) < min_lines:
        for i, (funcs, names) in enumerate(samples):
            body += _renamed(funcs, names, f"_{copy}_{i}")
        copy += 1
    return _module(body)


# ---------------------------------------------------------------------- the client


class _Client(LanguageClient):
    """pygls' client, keeping when each publishDiagnostics arrived, by version."""

    def __init__(self) -> None:
        super().__init__("tvms-benchmark", "1")
        self.published: dict = {}
        self.publishes: dict = {}

        @self.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls, params: lsp.PublishDiagnosticsParams):  # pygls passes the client as `ls`
            ls.published.setdefault(params.version, (time.perf_counter(), params.diagnostics))
            ls.publishes[params.version] = ls.publishes.get(params.version, 0) + 1

        @self.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(ls, params):
            print(f"  server: {params.message.splitlines()[0]}", file=sys.stderr)

        @self.feature(lsp.WINDOW_SHOW_MESSAGE)
        def on_message(ls, params):
            print(f"  server says: {params.message}", file=sys.stderr)

    async def diagnostics_of(self, version: int, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while version not in self.published:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no diagnostics for version {version}")
            await asyncio.sleep(0.0005)
        return self.published[version]


async def _measure(text: str, runs: int) -> dict:
    client = _Client()
    await client.start_io(sys.executable, "-m", "tvmscript.cli", "lsp")
    uri = "file:///benchmark/module.tvms"
    doc = lsp.TextDocumentIdentifier(uri=uri)
    results: dict = {}
    try:
        await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), process_id=os.getpid()))
        client.initialized(lsp.InitializedParams())
        t0 = time.perf_counter()
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="tvmscript", version=1, text=text)))
        opened_at, diagnostics = await client.diagnostics_of(1)
        results["open"] = [(opened_at - t0) * 1000]
        if diagnostics:
            print(f"  note: the module has {len(diagnostics)} diagnostics: {diagnostics[0].message}", file=sys.stderr)

        lines = text.split("\n")
        target = _middle_line(lines, "R.call_tir(cls.")
        hover_line = lines[target]
        hover_at = lsp.Position(line=target, character=len(hover_line) - len(hover_line.lstrip()))
        t0 = time.perf_counter()
        await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=hover_at))
        results["first hover"] = [(time.perf_counter() - t0) * 1000]

        results["diagnostics"] = await _edits(client, uri, lines, target, runs)
        await asyncio.sleep(1.5)  # the whole-file check of the last edit, and the analysis, done
        results["hover"] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            hover = await client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=hover_at))
            results["hover"].append((time.perf_counter() - t0) * 1000)
        if hover is None:
            print("  note: the hover answered nothing", file=sys.stderr)
        await _formatting(client, uri, lines, target, runs, results, version=100)
        await client.shutdown_async(None)
        client.exit(None)
    except BaseException:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()  # no shutdown was sent: stop() would wait for it forever
        raise
    finally:
        await client.stop()
    return results


async def _edits(client: _Client, uri: str, lines: list, target: int, runs: int) -> list:
    """Times from didChange to the diagnostics of its version: one line of the function in the
    middle of the file gets an undefined name (``clz.`` for ``cls.``), then loses it."""
    line = lines[target]
    col = line.index("cls.")
    times = []
    for run in range(runs * 2):
        version = run + 2
        new = "clz" if run % 2 == 0 else "cls"
        edit = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=lsp.Position(line=target, character=col), end=lsp.Position(line=target, character=col + 3)),
            text=new,
        )
        await asyncio.sleep(1.2)  # the previous edit's whole-file check has run: an idle server
        t0 = time.perf_counter()
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[edit]))
        published_at, diagnostics = await client.diagnostics_of(version)
        times.append((published_at - t0) * 1000)
        expected = 1 if new == "clz" else 0
        if len(diagnostics) != expected:
            print(f"  note: version {version} has {len(diagnostics)} diagnostics, expected {expected}", file=sys.stderr)
    return times


async def _formatting(client: _Client, uri: str, lines: list, target: int, runs: int, results: dict, version: int):
    """textDocument/formatting times: right after an edit (the request formats the text), and
    after a pause (the server has formatted the text ahead of time, as it does once a client
    formats a document). Each edit puts a comment of its own at the end of a line (replacing
    the previous one), so no text is seen twice and nothing comes from a cache of texts."""
    doc = lsp.TextDocumentIdentifier(uri=uri)
    end = len(lines[target])
    results["formatting, just after an edit"] = []
    results["formatting"] = []
    suffix = ""
    for run in range(runs * 2):
        version += 1
        comment = f"  # edit {run}"
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=lsp.Position(line=target, character=end),
                            end=lsp.Position(line=target, character=end + len(suffix))), text=comment)
        suffix = comment
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[change]))
        paused = run % 2 == 1
        if paused:
            await asyncio.sleep(2.5)  # the whole-file check and the formatting ahead of time are done
        t0 = time.perf_counter()
        edits = await client.text_document_formatting_async(lsp.DocumentFormattingParams(
            text_document=doc, options=lsp.FormattingOptions(tab_size=4, insert_spaces=True)))
        results["formatting" if paused else "formatting, just after an edit"].append((time.perf_counter() - t0) * 1000)
        if not edits:
            print("  note: formatting answered no edits", file=sys.stderr)
        await asyncio.sleep(1.5)


def _middle_line(lines: list, needle: str) -> int:
    hits = [i for i, line in enumerate(lines) if needle in line]
    return hits[len(hits) // 2]


def _reference(text: str, runs: int) -> dict:
    out: dict = {"tvms check (file_errors)": [], "tvms fmt (format_source)": []}
    for _ in range(max(3, runs // 2)):
        t0 = time.perf_counter()
        file_errors(text, "module.tvms", 100)
        out["tvms check (file_errors)"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        format_source(text, "module.tvms")
        out["tvms fmt (format_source)"].append((time.perf_counter() - t0) * 1000)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2000, help="size of the generated module (default 2000)")
    parser.add_argument("--runs", type=int, default=7, help="runs per figure; medians are printed (default 7)")
    args = parser.parse_args(argv)
    text = generate_module(args.lines)
    print(f"module: {text.count(chr(10))} lines, {len(function_units(text.split(chr(10))))} functions")
    measured = asyncio.run(_measure(text, args.runs))
    reference = _reference(text, args.runs)
    print(f"{'':38} {'median':>9} {'min':>9} {'goal':>9}  runs")
    for name, times in list(measured.items()) + list(reference.items()):
        goal = GOALS_MS.get(name)
        goal_text = f"< {goal} ms" if goal else ""
        verdict = "" if goal is None else ("  ok" if statistics.median(times) < goal else "  MISSED")
        print(f"{name:38} {statistics.median(times):7.1f}ms {min(times):7.1f}ms {goal_text:>9}  {len(times)}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
