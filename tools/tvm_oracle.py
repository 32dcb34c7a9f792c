"""What the ``tools/tvm_*_reference.py`` scripts share: running schedule steps on real Apache
TVM 0.27 and writing what it did as golden files for tvms's tests.

A *developer tool* only, like ``tools/tvm_reference.py``: TVM is never a dependency of tvms, no
test imports TVM or this module, the tests only read the files written here (through
``tests/support/schedule_cases.py``).  Each script holds a case list and ends with
``sys.exit(tvm_oracle.main(sys.argv[1:], CASES))``; run them from the repository root with the
TVM venv::

    python3 -m venv /work/tvmref
    /work/tvmref/bin/pip install apache-tvm==0.27.0 numpy
    /work/tvmref/bin/pip install apache-tvm-ffi==0.1.14.post1

    /work/tvmref/bin/python tools/tvm_<family>_reference.py            # every case
    /work/tvmref/bin/python tools/tvm_<family>_reference.py rfactor_   # cases whose name starts so
    /work/tvmref/bin/python tools/tvm_<family>_reference.py --list

A case is an input module (TVMScript text in TVM 0.27's dialect: ``from tvm.script import
tirx as T``, ``@T.prim_func(s_tir=True)``, ``T.sblock``, ``T.sblock_alloc_buffer``) and schedule
steps (Python that uses only ``sch``, so it runs unchanged on ``tvm.s_tir.Schedule`` and
``tvms.tir.Schedule``; ``sch.get_block`` is an alias of TVM's ``get_sblock`` here).  Files
written per case ``<name>``, in its directory under ``tests/golden/``:

* ``<name>.input.tvms``  the input, as the case holds it (or, for a case with *prep* steps, what
  TVM prints after running them: inputs made by TVM's own primitives);
* ``<name>.steps.py``    the steps;
* ``<name>.tvms``        ``sch.mod.script()`` after the steps;
* ``<name>.trace.py``    what ``sch.trace.show()`` prints (the trace as Python);
* or, when TVM rejects a step, ``<name>.error.txt`` instead of the last two: the exception class
  name on the first line, then TVM's message (for a ``ScheduleError``: the sentence naming the
  primitive and the text after ``Error message:``; the IR dump TVM renders is left out);
* ``VERSION.txt`` once per directory: the versions the files were made with.

The directories made earlier differ in small ways (no trace, a shorter error or version file);
a ``Layout`` names those, so that re-running a script rewrites its files byte for byte.
Schedules run with ``debug_mask="all"`` (TVM verifies the IR after every primitive) unless a
case says ``verify=False``.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
from dataclasses import dataclass
from typing import Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"


def clean(text: str) -> str:
    """``text`` without its surrounding blank lines and common indentation, ending in a newline."""
    lines = text.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    indent = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return "\n".join(ln[indent:] for ln in lines) + "\n"


def steps(*parts: str) -> str:
    """Schedule steps made of parts (each cleaned as by ``clean``)."""
    return "".join(clean(p) for p in parts)


# =============================================================================================
# Input modules used by several case lists
# =============================================================================================

# mlc.ai chapter 2 (TensorIR): the mm_relu module.
MM_RELU = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.sblock_alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''

# The mlc.ai chapter's schedule of MM_RELU as the course builds it up: split j by 4, reorder
# (j0, k, j1), then move the relu block C under j0 (``steps(MLC_MOVE_RELU, "...")`` goes on).
MLC_SPLIT = '''
block_Y = sch.get_block("Y", func_name="mm_relu")
i, j, k = sch.get_loops(block_Y)
j0, j1 = sch.split(j, factors=[None, 4])
'''
MLC_REORDER = MLC_SPLIT + "sch.reorder(j0, k, j1)\n"
MLC_GET_RELU = 'block_C = sch.get_block("C", "mm_relu")\n'
MLC_MOVE_RELU = MLC_REORDER + MLC_GET_RELU + "sch.reverse_compute_at(block_C, j0)\n"

# mlc.ai GPU chapter: window sum and the 1024x1024 matmul.
GPU_WINDOW_SUM = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class MyModuleWindowSum:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.spatial(1024, i)
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]
'''

GPU_MATMUL = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class MyModuleMatmul:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"), C: T.Buffer((1024, 1024), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

EW2D = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''

MATMUL_128 = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def row_reduction(rows: int, cols: int, init: str, update: str, dtype: str = "float32") -> str:
    """``B[i] = update`` over the row ``A[i, :]`` (``update`` in terms of ``B[vi]`` and
    ``A[vi, vk]``), starting from ``init``."""
    return f'''@T.prim_func(s_tir=True)
def main(A: T.Buffer(({rows}, {cols}), "{dtype}"), B: T.Buffer(({rows},), "{dtype}")):
    for i, k in T.grid({rows}, {cols}):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = {init}
            B[vi] = {update}
'''


# Row sum: B[i] = sum_k A[i, k].
ROW_SUM = row_reduction(128, 128, "T.float32(0)", "B[vi] + A[vi, vk]")

_CONSUMER_ADDS = {"C": 1, "D": 3}


def producer_consumer(rows: int, cols: int, consumers: str = "C") -> str:
    """An intermediate ``B = A * 2`` of ``rows x cols``, read by each consumer block:
    ``C = B + 1`` (and ``D = B + 3``); every block in a loop nest of its own."""
    shape = f"({rows}, {cols})"
    params = ", ".join(f'{b}: T.Buffer({shape}, "float32")' for b in "A" + consumers)

    def nest(block: str, value: str) -> str:
        return (f"    for i, j in T.grid({rows}, {cols}):\n"
                f'        with T.sblock("{block}"):\n'
                f'            vi, vj = T.axis.remap("SS", [i, j])\n'
                f"            {block}[vi, vj] = {value}\n")

    return (f"@T.prim_func(s_tir=True)\ndef main({params}):\n"
            f'    B = T.sblock_alloc_buffer({shape}, "float32")\n'
            + nest("B", "A[vi, vj] * T.float32(2)")
            + "".join(nest(c, f"B[vi, vj] + T.float32({_CONSUMER_ADDS[c]})") for c in consumers))


# Two blocks: B = A * 2 (intermediate), C = B + 1.
PRODUCER_CONSUMER = producer_consumer(128, 128)


# =============================================================================================
# Cases
# =============================================================================================


@dataclass(frozen=True)
class Layout:
    """A golden directory and how its files are written."""

    directory: pathlib.Path
    trace: bool = True            # write <name>.trace.py
    short_errors: bool = False    # <name>.error.txt: only the text after "Error message:"
    script_newline: bool = True   # <name>.tvms: sch.mod.script() and a newline
    full_versions: bool = True    # VERSION.txt: apache-tvm, apache-tvm-ffi and python (or apache-tvm only)


@dataclass
class Case:
    name: str
    source: str
    steps: str
    layout: Layout
    expect_error: bool = False
    prep: Optional[str] = None  # steps run in TVM first; what TVM prints after them is the input
    verify: bool = True         # debug_mask="all"


# Case names per directory over every list made in this process (a script that writes into
# another's directory imports it, so a name is never taken twice).
_NAMES: dict = {}


class Suite(list):
    """The cases of one script (or one kind of case): run by ``run``, listed under ``label``."""

    def __init__(self, layout: Layout, label: str = "schedule", run: Optional[Callable] = None):
        super().__init__()
        self.layout, self.label = layout, label
        self.run = run or run_case

    def register(self, name: str, layout: Layout) -> None:
        taken = _NAMES.setdefault(layout.directory, set())
        assert name not in taken, name
        taken.add(name)


class Cases(Suite):
    """Schedule cases; ``step_globals`` gives names the steps may use besides ``sch``."""

    def __init__(self, layout: Layout, step_globals: Optional[Callable[[], dict]] = None):
        super().__init__(layout, run=lambda c: run_case(c, step_globals() if step_globals else {}))

    def add(self, name: str, source: str, steps: str, *, expect_error: bool = False, prep: Optional[str] = None,
            verify: bool = True, layout: Optional[Layout] = None) -> None:
        layout = layout or self.layout
        self.register(name, layout)
        self.append(Case(name, clean(source), clean(steps), layout, expect_error, clean(prep) if prep else None,
                         verify))

    def error(self, name: str, source: str, steps: str, **kw) -> None:
        """A case whose last step TVM rejects."""
        self.add(name, source, steps, expect_error=True, **kw)

    def on_block(self, name: str, source: str, steps: str, block: str = "B", **kw) -> None:
        """A case whose steps start ``b = sch.get_block("B")`` (the handle is the block's name in
        lower case), then run ``steps``."""
        self.add(name, source, f'{block.lower()} = sch.get_block("{block}")\n' + clean(steps), **kw)

    def looped(self, name: str, source: str, loops: str, steps: str, block: str = "B", **kw) -> None:
        """Likewise, with ``<loops> = sch.get_loops(b)`` as the second step."""
        self.on_block(name, source, f"{loops} = sch.get_loops({block.lower()})\n" + clean(steps), block, **kw)


# =============================================================================================
# Running with TVM
# =============================================================================================


def to_modern(text: str) -> str:
    """tvms's classic print -> the TVM 0.27 dialect (tirx, T.sblock, s_tir=True, out_ty=)."""
    text = text.replace("# from tvm.script import tir as T", "# from tvm.script import tirx as T")
    text = re.sub(r"@T\.prim_func\(private=True\)", "@T.prim_func(private=True, s_tir=True)", text)
    text = re.sub(r"@T\.prim_func\n", "@T.prim_func(s_tir=True)\n", text)
    text = text.replace("T.block(", "T.sblock(").replace("T.block_attr(", "T.sblock_attr(")
    text = text.replace("out_sinfo=", "out_ty=")
    # In a block-based function every classic T.alloc_buffer is a block allocation; TVM 0.27
    # spells that T.sblock_alloc_buffer (its T.alloc_buffer is an AllocBuffer statement, which
    # schedule primitives do not treat as a block-allocated intermediate).
    text = text.replace(" = T.alloc_buffer(", " = T.sblock_alloc_buffer(")
    return text


class SchProxy:
    """The TVM schedule with tvms's spelling `get_block` as an alias of `get_sblock`."""

    def __init__(self, sch):
        object.__setattr__(self, "_sch", sch)

    def get_block(self, name, func_name=None):
        return self._sch.get_sblock(name, func_name=func_name)

    def __getattr__(self, name):
        return getattr(self._sch, name)


def parse_with_tvm(src: str):
    import tvm
    from tvm.script import ir as I  # noqa: E741
    from tvm.script import relax as R
    from tvm.script import tirx as T

    return tvm.script.from_source(src, extra_vars={"T": T, "I": I, "R": R, "tvm": tvm})


def error_text(e: BaseException, short: bool = False) -> str:
    """What <name>.error.txt holds: the exception class, then TVM's message."""
    msg = str(e)
    name = type(e).__name__
    if short:
        m = re.search(r"Error message: (.*)", msg, re.S)
        return f"{name}\n{m.group(1).strip() if m else msg.strip().splitlines()[-1]}\n"
    m = re.search(r"An error occurred in the schedule primitive '[^']*'\.", msg)
    if m and "Error message:" in msg:
        detail = msg.split("Error message:", 1)[1].strip()
        detail = re.sub(r"^ScheduleError:\s*", "", detail)
        body = m.group(0) + "\n" + detail
    else:
        lines = [ln.rstrip() for ln in msg.strip().splitlines()]
        body = "\n".join(lines)
        body = re.sub(rf"^{re.escape(name)}:\s*", "", body)
    return f"{name}\n{body.rstrip()}\n"


def run_case(c: Case, step_globals: Optional[dict] = None) -> str:
    """Run one case in TVM and write its files; returns its status line."""
    from tvm import s_tir

    out, layout = c.layout.directory, c.layout
    mod, source = parse_with_tvm(c.source), c.source
    if c.prep:
        sch = s_tir.Schedule(mod, debug_mask="all")
        exec(compile(c.prep, f"<{c.name} prep>", "exec"), {"sch": SchProxy(sch)})
        source, mod = sch.mod.script() + "\n", sch.mod
    (out / f"{c.name}.input.tvms").write_text(source)
    (out / f"{c.name}.steps.py").write_text(c.steps)
    for suffix in (".tvms", ".trace.py", ".error.txt"):
        (out / f"{c.name}{suffix}").unlink(missing_ok=True)
    sch = s_tir.Schedule(mod, debug_mask="all" if c.verify else 0)
    try:
        exec(compile(c.steps, f"<{c.name}.steps.py>", "exec"), {"sch": SchProxy(sch), **(step_globals or {})})
    except Exception as e:  # pylint: disable=broad-except
        (out / f"{c.name}.error.txt").write_text(error_text(e, layout.short_errors))
        return "error" + ("" if c.expect_error else "  <-- UNEXPECTED")
    (out / f"{c.name}.tvms").write_text(sch.mod.script() + ("\n" if layout.script_newline else ""))
    if layout.trace:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            sch.trace.show()  # plain text when Pygments is missing (it warns on stderr then)
        (out / f"{c.name}.trace.py").write_text(buf.getvalue())
    return "ok" + ("  <-- EXPECTED AN ERROR" if c.expect_error else "")


def versions(full: bool = True) -> str:
    import importlib.metadata as md
    import platform

    out = []
    for pkg in ("apache-tvm", "apache-tvm-ffi") if full else ("apache-tvm",):
        try:
            out.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    if full:
        out.append(f"python {platform.python_version()}")
    return "\n".join(out) + "\n"


def main(argv: list, *suites: Suite) -> int:
    """The scripts' command line: ``[--list] [name-prefix ...]``; returns the exit status."""
    prefixes = [a for a in argv if not a.startswith("-")]
    if "--list" in argv:
        for suite in suites:
            for c in suite:
                print(suite.label, c.name)
        return 0
    import tvm

    layouts = {s.layout for s in suites} | {c.layout for s in suites for c in s if isinstance(c, Case)}
    for layout in layouts:
        layout.directory.mkdir(parents=True, exist_ok=True)
        (layout.directory / "VERSION.txt").write_text(versions(layout.full_versions))
    bad = 0
    for suite in suites:
        for c in suite:
            if prefixes and not c.name.startswith(tuple(prefixes)):
                continue
            try:
                status = suite.run(c)
            except Exception as e:  # pylint: disable=broad-except
                status = "FAILED " + error_text(e).replace("\n", " | ")[:400]
            bad += "<--" in status or status.startswith("FAILED")
            print(f"{suite.label} {c.name}: {status}")
    print(f"tvm {tvm.__version__}; {bad} problem(s)")
    return 1 if bad else 0
