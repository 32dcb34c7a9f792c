"""Measure how much of the TVMScript in Apache TVM's own test files tvms reads (issue 11).

A *developer tool*, like ``tools/tvm_reference.py``: TVM is never imported in this process, and
nothing cut out of TVM's tests is stored in this repository.  Run it with the project's python::

    python tools/tvm_corpus.py /work/.mirror/apache+tvm/repo            # bare git dir or checkout
    python tools/tvm_corpus.py TVM_DIR --out /work/tvm-corpus --json /work/tvm-corpus/report.json

What it does, in order:

1. *Cut.*  Every ``@I.ir_module`` class and every ``@T.prim_func`` / ``@R.function`` def (also
   spelled ``@tvm.script.ir_module``, ``@tvm.script.tir.prim_func``, with or without call
   arguments) in the test files named by ``TEST_FILES`` is cut out with :mod:`ast` (decorators
   included, dedented).  A def inside a cut class is not cut again.  Each program goes to
   ``OUT/programs/<file>__L<line>__<name>.py``.
2. *Ask TVM.*  One long-lived ``/work/tvmref/bin/python`` subprocess runs each program on its own
   (with ``TVM_HEADER`` prepended) and answers with TVM's printout or its error.  A program TVM
   rejects because it names something only the enclosing test file defines (a helper, a
   parameter, ``np``...) *needs Python scope*: it is counted apart and leaves the measure.
3. *Run tvms* (process pool) on both forms, the cut source (with the imports as the
   ``# from tvm.script import`` comments TVM prints, since tvms reads no ``import`` lines) and
   TVM's printout: parse, and round-trip (print, re-parse, structurally equal, print again
   identical).  On programs TVM rejects for a reason of its own, tvms should reject them too
   (parse error) or ``tvms check`` (the well-formedness check) should flag them.
4. *Report.*  Rates, then failure causes ranked by count, grouped by the first line of the error
   with numbers, quoted names and identifiers after ``:`` masked.
"""

from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import json
import pathlib
import re
import subprocess
import sys
import textwrap

TVM_PYTHON = "/work/tvmref/bin/python"
DEFAULT_OUT = "/work/tvm-corpus"

TEST_FILES = [
    r"tests/python/tvmscript/test_tvmscript_(roundtrip|parser_tir|syntax_sugar|complete)\.py",
    r"tests/python/relax/test_tvmscript_parser(_op_\w+)?\.py",
    r"tests/python/relax/test_tvmscript_printer_relax\.py",
    r"tests/python/relax/test_transform_fuse_(ops|tir)\.py",
    r"tests/python/relax/test_transform_legalize_ops\w*\.py",
]

# TVM 0.27 has no ``tvm.script.tir``: its TIR dialect is ``tirx``.
TVM_HEADER = "import tvm\nfrom tvm import tirx\nfrom tvm.script import ir as I, tirx as T, relax as R\n\n"
TVMS_HEADER = "# from tvm.script import ir as I\n# from tvm.script import tirx as T\n# from tvm.script import relax as R\n\n"

DECORATORS = {
    "I.ir_module": "module", "ir_module": "module", "tvm.script.ir_module": "module",
    "tvm.script.ir.ir_module": "module",
    "T.prim_func": "prim_func", "tvm.script.tir.prim_func": "prim_func",
    "tvm.script.tirx.prim_func": "prim_func", "T.macro": None,
    "R.function": "function", "tvm.script.relax.function": "function",
}


# ============================================================================= 1. cut


def list_test_files(tvm: pathlib.Path) -> dict[str, str]:
    """{path: text} of the test files, from a checkout or (via ``git``) a bare git directory."""
    pattern = re.compile("|".join(f"(?:{p})" for p in TEST_FILES))
    if (tvm / "tests").is_dir():
        paths = [str(p.relative_to(tvm)) for p in (tvm / "tests" / "python").rglob("*.py")]
        return {p: (tvm / p).read_text() for p in sorted(paths) if pattern.fullmatch(p)}
    git = ["git", "--git-dir", str(tvm)]
    names = subprocess.run(git + ["ls-tree", "-r", "--name-only", "HEAD", "tests/python"],
                           capture_output=True, text=True, check=True).stdout.split()
    return {p: subprocess.run(git + ["show", f"HEAD:{p}"], capture_output=True, text=True, check=True).stdout
            for p in sorted(names) if pattern.fullmatch(p)}


def _decorator_kind(dec: ast.expr) -> str | None:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return DECORATORS.get(ast.unparse(target))


def cut_programs(path: str, text: str) -> list[dict]:
    """The decorated programs of one test file: name, kind, line and dedented source."""
    lines = text.splitlines(keepends=True)
    found: list[dict] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef)):
                kinds = [k for k in map(_decorator_kind, child.decorator_list) if k]
                if kinds:
                    start = min(d.lineno for d in child.decorator_list)
                    src = textwrap.dedent("".join(lines[start - 1:child.end_lineno]))
                    found.append({"file": path, "line": start, "name": child.name, "kind": kinds[0],
                                  "source": src, "scope_names": None})
                    continue
            visit(child)

    visit(ast.parse(text))
    bound = _bound_names(text)
    for p in found:
        p["scope_names"] = bound
        p["id"] = f"{pathlib.Path(path).stem}__L{p['line']}__{p['name']}"
    return found


def _bound_names(text: str) -> list[str]:
    """Every name the test file binds (assignments, defs, imports, parameters, loop targets)."""
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return sorted(names)


# ============================================================================= 2. ask TVM

# Runs inside TVM's venv.  Reads one program path per line; answers one JSON line each.  TVM's
# own diagnostics go to the (discarded) stderr, so only the answers reach stdout.
_TVM_WORKER = r'''
import contextlib, io, json, os, runpy, sys, traceback
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import tvm
KINDS = (tvm.ir.IRModule, tvm.tirx.PrimFunc, tvm.relax.Function)
for line in sys.stdin:
    path = line.strip()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            ns = runpy.run_path(path)
        objs = [v for k, v in ns.items() if isinstance(v, KINDS) and not k.startswith("__")]
        if not objs:
            raise RuntimeError("no IRModule, PrimFunc or relax Function was made")
        ans = {"ok": True, "printout": objs[-1].script()}
    except BaseException as err:
        msg = str(err).strip()
        ans = {"ok": False, "etype": type(err).__name__, "error": msg[-2000:]}
    out.write(json.dumps(ans) + "\n")
    out.flush()
'''


class TvmOracle:
    """One long-lived TVM 0.27 subprocess; restarted if a program kills it."""

    def __init__(self) -> None:
        self.proc = None

    def _start(self) -> None:
        self.proc = subprocess.Popen([TVM_PYTHON, "-c", _TVM_WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def ask(self, path: str) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(path + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        except BrokenPipeError:
            reply = ""
        if not reply:
            self.proc = None
            return {"ok": False, "etype": "Crash", "error": "TVM's process died on this program"}
        return json.loads(reply)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


_UNDEFINED = [re.compile(r"Undefined variable: (\w+)"), re.compile(r"name '(\w+)' is not defined"),
              re.compile(r"has no attribute '(\w+)'")]


def needs_python_scope(program: dict, answer: dict) -> bool:
    """True when TVM's error names something the enclosing test file binds (not a real error)."""
    text = answer.get("error", "")
    names = set(program["scope_names"]) | {"np", "numpy", "tvm", "pytest", "te", "topi", "relax", "tir"}
    for pat in _UNDEFINED[:2]:
        m = pat.search(text)
        if m and m.group(1) in names:
            return True
    return answer.get("etype") == "NameError"


# ============================================================================= 3. run tvms


def _first_error(err: BaseException) -> str:
    lines = str(err).strip().splitlines() or [""]
    return f"{type(err).__name__}: {lines[0]}"


def tvms_roundtrip(text: str) -> dict:
    """Parse, then print / re-parse / compare / print again; the first step that fails."""
    import tvmscript as tvms
    from tvmscript.ir import structural_equal

    try:
        node = tvms.parse(text)
    except Exception as err:  # noqa: BLE001 - any failure is a result here
        return {"parsed": False, "roundtrip": False, "error": _first_error(err), "step": "parse"}
    try:
        p1 = node.script()
        again = tvms.parse(p1)
        if not structural_equal(node, again, map_free_vars=True):
            return {"parsed": True, "roundtrip": False, "error": "re-parsed printout is not structurally equal",
                    "step": "equal"}
        if again.script() != p1:
            return {"parsed": True, "roundtrip": False, "error": "second printout differs from the first",
                    "step": "print2"}
    except Exception as err:  # noqa: BLE001
        return {"parsed": True, "roundtrip": False, "error": "round-trip: " + _first_error(err), "step": "reparse"}
    return {"parsed": True, "roundtrip": True}


def tvms_flags(text: str) -> dict:
    """For a program TVM rejects: does tvms reject it, or does ``tvms check`` flag it?"""
    import tvmscript as tvms
    from tvmscript.compiler.well_formed import check_well_formed

    try:
        node = tvms.parse(text)
    except Exception as err:  # noqa: BLE001
        return {"flagged": True, "how": "parse", "error": _first_error(err)}
    try:
        check_well_formed(node)
    except Exception as err:  # noqa: BLE001
        return {"flagged": True, "how": "check", "error": _first_error(err)}
    return {"flagged": False}


def _tvms_job(job: tuple[str, str, str]) -> tuple[str, str, dict]:
    pid, form, text = job
    if form == "rejected":
        return pid, form, tvms_flags(text)
    return pid, form, tvms_roundtrip(text)


# ============================================================================= 4. report

# Quoted dotted names (``'R.tuple'``, ``'T.attr'``) stay: they name the construct to add.
_MASKS = [(re.compile(r"\(<?[^()]*:\d+:\d+\)$"), ""), (re.compile(r"'(?![A-Za-z_]\w*\.[\w.]+')[^']*'"), "'…'"),
          (re.compile(r'"[^"]*"'), '"…"'), (re.compile(r"\b\d+\b"), "N")]


def cause(error: str) -> str:
    """The error's first line with locations, quoted text and numbers masked."""
    text = error.splitlines()[0] if error else ""
    for pat, rep in _MASKS:
        text = pat.sub(rep, text)
    return text.strip()[:140]


def rate(n: int, d: int) -> str:
    return f"{n}/{d} = {100.0 * n / d:.1f}%" if d else f"{n}/0"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tvm", help="apache/tvm checkout or bare git directory")
    ap.add_argument("--out", default=DEFAULT_OUT, help="folder for the cut programs (outside the repo)")
    ap.add_argument("--json", help="write the full report here")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--resummarize", action="store_true",
                    help="only print the summary of the --json report an earlier run wrote")
    ap.add_argument("--only", metavar="REGEX",
                    help="with --json: re-run only tvms, on the programs whose id or error matches REGEX "
                         "(TVM's answers come from the report), print each result, write nothing")
    args = ap.parse_args(argv)
    if args.resummarize:
        summarize(json.loads(pathlib.Path(args.json).read_text())["programs"], args.top)
        return 0
    if args.only:
        return rerun_tvms(json.loads(pathlib.Path(args.json).read_text())["programs"], args.only, args.jobs)

    out = pathlib.Path(args.out).resolve()
    repo = pathlib.Path(__file__).resolve().parents[1]
    if out == repo or repo in out.parents:
        ap.error(f"--out must lie outside the repository ({repo})")
    (out / "programs").mkdir(parents=True, exist_ok=True)

    programs = [p for path, text in list_test_files(pathlib.Path(args.tvm)).items()
                for p in cut_programs(path, text)]
    print(f"cut {len(programs)} programs", file=sys.stderr)

    oracle = TvmOracle()
    try:
        for p in programs:
            path = out / "programs" / f"{p['id']}.py"
            path.write_text(TVM_HEADER + p["source"])
            p["tvm"] = oracle.ask(str(path))
            p["tvm"]["class"] = ("accepted" if p["tvm"]["ok"] else
                                 "scope" if needs_python_scope(p, p["tvm"]) else "rejected")
            if p["tvm"]["ok"]:
                (out / "programs" / f"{p['id']}.printout.tvms").write_text(p["tvm"]["printout"])
    finally:
        oracle.close()

    jobs = []
    for p in programs:
        if p["tvm"]["ok"]:
            jobs += [(p["id"], "source", TVMS_HEADER + p["source"]), (p["id"], "printout", p["tvm"]["printout"])]
        elif p["tvm"]["class"] == "rejected":
            jobs.append((p["id"], "rejected", TVMS_HEADER + p["source"]))
    by_id = {p["id"]: p for p in programs}
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for pid, form, res in pool.map(_tvms_job, jobs, chunksize=8):
            by_id[pid].setdefault("tvms", {})[form] = res

    report = summarize(programs, args.top)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"summary": report, "programs": [{k: v for k, v in p.items() if k != "scope_names"} for p in programs]},
            indent=1))
    return 0


def rerun_tvms(programs: list[dict], pattern: str, jobs: int) -> int:
    """Re-run the tvms side on the programs whose id or earlier error matches; print each result."""
    regex = re.compile(pattern)
    chosen = []
    for p in programs:
        for form, res in p.get("tvms", {}).items():
            if regex.search(p["id"]) or regex.search(res.get("error", "")):
                text = p["tvm"]["printout"] if form == "printout" else TVMS_HEADER + p["source"]
                chosen.append((p["id"], form, text))
    fixed = 0
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        for pid, form, res in pool.map(_tvms_job, chosen, chunksize=4):
            ok = res.get("flagged") if form == "rejected" else res.get("roundtrip")
            fixed += bool(ok)
            print(f"{'ok  ' if ok else 'FAIL'} {form:8} {pid}  {'' if ok else res.get('error', '')}")
    print(f"{fixed}/{len(chosen)} pass")
    return 0


def summarize(programs: list[dict], top: int) -> dict:
    """Print the rates and the ranked failure causes; return them as a dict."""
    accepted, scope, rejected = ([p for p in programs if p["tvm"]["class"] == c]
                                 for c in ("accepted", "scope", "rejected"))
    summary: dict = {"programs": len(programs), "tvm_accepts": len(accepted),
                     "needs_python_scope": len(scope), "tvm_rejects": len(rejected)}
    print(f"programs cut: {len(programs)}; TVM 0.27 accepts {len(accepted)}; "
          f"needs Python scope (excluded) {len(scope)}; TVM rejects {len(rejected)}")
    for form in ("printout", "source"):
        res = [p["tvms"][form] for p in accepted]
        parsed = sum(r["parsed"] for r in res)
        rt = sum(r["roundtrip"] for r in res)
        summary[form] = {"parsed": parsed, "roundtrip": rt, "total": len(res)}
        print(f"{form:9s} parsed {rate(parsed, len(res))}; round-trip {rate(rt, parsed)} of parsed")
    flagged = [p for p in rejected if p["tvms"]["rejected"]["flagged"]]
    summary["rejected_flagged"] = len(flagged)
    print(f"TVM-rejected programs tvms rejects or `tvms check` flags: {rate(len(flagged), len(rejected))}")

    counts: collections.Counter = collections.Counter()
    examples: dict = {}
    for p in accepted:
        for form in ("printout", "source"):
            r = p["tvms"][form]
            if not r["roundtrip"]:
                key = (form, r["step"], cause(r["error"]))
                counts[key] += 1
                examples.setdefault(key, p["id"])
    for p in rejected:
        if not p["tvms"]["rejected"]["flagged"]:
            key = ("rejected", "not flagged", cause(p["tvm"]["etype"] + ": " + p["tvm"]["error"]))
            counts[key] += 1
            examples.setdefault(key, p["id"])
    print(f"\nfailure causes (top {top} of {len(counts)}):")
    print(f"{'count':>5}  {'form':8s} {'step':11s} cause  [example]")
    ranked = counts.most_common()
    for (form, step, text), n in ranked[:top]:
        print(f"{n:5d}  {form:8s} {step:11s} {text}  [{examples[(form, step, text)]}]")
    summary["causes"] = [{"count": n, "form": f, "step": s, "cause": c, "example": examples[(f, s, c)]}
                         for (f, s, c), n in ranked]
    return summary


if __name__ == "__main__":
    sys.exit(main())
