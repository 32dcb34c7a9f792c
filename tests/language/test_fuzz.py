"""Fuzzing the front end through the real command line (issue 12, "Fuzzing in CI").

Two fuzzers, both deterministic (a fixed seed), together well over 2,000 inputs a run:

* a grammar-aware generator (tests/support/fuzz_programs.py): Hypothesis writes whole .tvms files,
  modules of prim_funcs and Relax functions and lone functions, most of them valid and a few
  with one deliberate, well-defined mistake;
* a mutation fuzzer: every sample (samples/) and golden file (tests/golden/) is mutated —
  lines deleted, duplicated, swapped, re-indented; characters and tokens inserted, deleted and
  replaced from a dictionary of keywords, operators, brackets, quotes, odd numbers and odd
  Unicode; truncation; deep nesting; invalid UTF-8 and NUL bytes.

Each input goes through ``tvms check``, ``tvms show`` and ``tvms fmt`` (on a temp file), run
in-process with `tvmscript.cli.main`. The contract checked, for every input:

* the exit status is 0 or 1, never 70 (an internal error) and no Python traceback is printed;
* a rejected input gets an ``error:`` diagnostic with its location (`` --> file:line:col``), and
  ``fmt`` leaves its file byte for byte as it was;
* an accepted input round-trips: ``P = print(parse(X))`` parses back structurally equal to
  ``parse(X)`` and prints as ``P`` again; ``show`` printed ``P``; ``fmt`` wrote the file text
  of ``parse(X)`` (with the metadata section and the module's own class name), which parses
  back equal and is itself left alone by a second ``fmt``.

``TVMS_HYPOTHESIS_SCALE=N`` multiplies both fuzzers' input counts (as in test_hypothesis.py);
``HYPOTHESIS_PROFILE=explore`` draws fresh random programs. ``TVMS_FUZZ_SEED`` changes the
mutation fuzzer's seed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pathlib
import random
import re
import shutil
import tempfile
import traceback

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import tvmscript as tvms
from tvmscript import cli, formatting, ir
from tvmscript.api import decode_source
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import structural_equal

from support.fuzz_programs import MODULE_FLAWS, RELAX_FLAWS, TIR_FLAWS, Program, modules, prim_funcs, programs, relax_funcs

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCALE = int(os.environ.get("TVMS_HYPOTHESIS_SCALE", "1"))
SEED = int(os.environ.get("TVMS_FUZZ_SEED", "12"))

GENERATED_EXAMPLES = 800 * SCALE
# Shrinking a failing program can take minutes; CI reports the program as generated (set
# TVMS_FUZZ_SHRINK=1 to get the smallest one).
PHASES = [Phase.explicit, Phase.generate] + ([Phase.shrink] if os.environ.get("TVMS_FUZZ_SHRINK") else [])
MUTANTS_PER_SAMPLE = 25 * SCALE
MUTANTS_PER_GOLDEN = 1 * SCALE
# The issue asks for at least 2,000 inputs a CI run, the two fuzzers together.
MIN_GENERATED = 800
MIN_MUTANTS = 1200
assert MIN_GENERATED + MIN_MUTANTS >= 2000


# ============================================================================ running the CLI


@pytest.fixture
def fuzz_dir(tmp_path):
    """Where inputs are written: a RAM disk when there is one. Every input is written three
    times and fmt rewrites it through fsync; on a disk that is most of the fuzzer's time."""
    shm = pathlib.Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = pathlib.Path(tempfile.mkdtemp(prefix="tvms-fuzz-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


class Outcome:
    """What the three commands did with one input."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.results: dict = {}  # command -> (status, stdout, stderr)
        self.fmt_bytes = b""

    def status(self, command: str) -> int:
        return self.results[command][0]

    def stderr(self, command: str) -> str:
        return self.results[command][2]

    @property
    def accepted(self) -> bool:
        return self.status("show") == 0

    def describe(self) -> str:
        return "\n".join(f"tvms {c}: exit {s}\n{err.strip()[:1500]}" for c, (s, _, err) in self.results.items())


def run_cli(args: list) -> tuple:
    """`cli.main` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(args)
    return status, out.getvalue(), err.getvalue()


def debug_traceback(path: str, command: list) -> str:
    """The Python traceback behind an exit 70 (the CLI hides it unless TVMS_DEBUG is set)."""
    before = os.environ.get("TVMS_DEBUG")
    os.environ["TVMS_DEBUG"] = "1"
    try:
        run_cli(command)
    except Exception:  # noqa: BLE001 - this is what we are after
        return traceback.format_exc(limit=-8)
    finally:
        if before is None:
            del os.environ["TVMS_DEBUG"]
        else:
            os.environ["TVMS_DEBUG"] = before
    return "(no exception the second time)"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def run_commands(path: pathlib.Path, data: bytes) -> Outcome:
    """check, show and fmt on ``data``, written to ``path`` (fmt rewrites it)."""
    outcome = Outcome(data)
    commands = {"check": ["check", str(path)], "show": ["show", "--no-color", str(path)], "fmt": ["fmt", str(path)]}
    for name, args in commands.items():
        path.write_bytes(data)
        outcome.results[name] = run_cli(args)
        status, out, err = outcome.results[name]
        assert status in (0, 1), (
            f"tvms {name} exited {status}:\n{err}\n{debug_traceback(str(path), args) if status == 70 else ''}"
        )
        assert "Traceback" not in out + err, f"tvms {name} printed a traceback:\n{err}"
        # A real stdout (UTF-8, strict) cannot take a lone surrogate; a StringIO can.
        assert _encodable(out), f"tvms {name} printed text a UTF-8 terminal cannot show"
    outcome.fmt_bytes = path.read_bytes()
    return outcome


# ============================================================================ the contract


def check_rejected(outcome: Outcome) -> None:
    """A rejected input: a located diagnostic, and fmt left the file alone."""
    for name in ("show", "fmt"):
        err = outcome.stderr(name)
        assert "error" in err, f"tvms {name} rejected the input without saying why:\n{err}"
        assert " --> " in err, f"tvms {name}'s diagnostic has no location:\n{err}"
    assert outcome.status("fmt") == 1 and outcome.status("check") == 1, outcome.describe()
    assert outcome.fmt_bytes == outcome.data, "tvms fmt changed a file it could not parse"


def check_accepted(outcome: Outcome) -> None:
    """An accepted input round-trips through the printer, show and fmt."""
    text = decode_source(outcome.data, "<fuzz>")
    parsed = tvms.parse(text)
    printed = parsed.script()
    try:
        reparsed = tvms.parse(printed)
    except TVMScriptError as err:
        raise AssertionError(f"the printed text does not parse: {err}\n{printed}") from None
    assert structural_equal(reparsed, parsed), f"print(parse(X)) parses to different IR:\n{printed}"
    again = reparsed.script()
    assert again == printed, f"the print is not a fixed point:\n{printed}\n----- printed again:\n{again}"
    assert outcome.results["show"][1] == printed, "tvms show printed something else than parse(X).script()"
    assert outcome.status("fmt") == 0, f"tvms fmt refused a file that parses:\n{outcome.stderr('fmt')}"
    formatted = decode_source(outcome.fmt_bytes, "<formatted>")  # fmt keeps a byte-order mark
    assert formatted == formatting.formatted_text(parsed), "tvms fmt wrote something else than the file text of parse(X)"
    if formatted != printed:
        refmt = tvms.parse(formatted)
        assert structural_equal(refmt, parsed), f"tvms fmt's output parses to different IR:\n{formatted}"
        assert formatting.formatted_text(refmt) == formatted, f"tvms fmt is not idempotent:\n{formatted}"
        plain = "metadata" not in formatted and (not isinstance(parsed, ir.IRModule) or parsed.name == "Module")
        assert not plain, f"tvms fmt and tvms show differ on a module without metadata:\n{formatted}"


def check_program(tmp: pathlib.Path, program: Program, tally: dict) -> None:
    outcome = run_commands(tmp / "generated.tvms", program.text.encode("utf-8"))
    if program.expect == "valid":
        assert outcome.status("check") == 0 and outcome.accepted, (
            f"a valid program was rejected:\n{outcome.describe()}")
        check_accepted(outcome)
    else:
        assert not outcome.accepted, f"a program with the flaw {program.flaw} was accepted"
        check_rejected(outcome)
    tally[program.expect] = tally.get(program.expect, 0) + 1


# ============================================================================ generated programs


def test_generated_programs(fuzz_dir):
    """Grammar-generated modules and lone functions: valid ones are accepted and round-trip,
    broken ones are rejected with a located diagnostic; never an internal error."""
    tally: dict = {}
    texts: set = set()

    # Derandomized, with no example database, by the `ci` profile of tests/conftest.py.
    @settings(
        max_examples=GENERATED_EXAMPLES, phases=PHASES,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                               HealthCheck.filter_too_much],
    )
    @given(programs())
    def fuzz(program):
        texts.add(program.text)
        check_program(fuzz_dir, program, tally)

    fuzz()
    total = sum(tally.values())
    assert total >= min(MIN_GENERATED, GENERATED_EXAMPLES), tally
    # Hypothesis draws small examples first and may repeat one; most must still differ (the
    # share depends on its version: 89% with the one CI installs).
    assert len(texts) >= 0.8 * total, f"only {len(texts)} distinct programs of {total}"
    assert tally.get("invalid", 0) >= total // 20, tally  # the broken ones are there too


FLAW_FORMS = [(f, "module") for f in TIR_FLAWS + RELAX_FLAWS + MODULE_FLAWS] \
    + [(f, "tir") for f in TIR_FLAWS] + [(f, "relax") for f in RELAX_FLAWS]
FLAW_EXAMPLES = 12 * SCALE


@pytest.mark.parametrize("flaw,form", FLAW_FORMS, ids=[f"{f}-{m}" for f, m in FLAW_FORMS])
def test_each_planted_flaw_is_rejected(fuzz_dir, flaw, form):
    """Every kind of deliberate mistake, in every form of file it fits, is rejected with a
    located diagnostic (the random mix above draws some kinds rarely)."""
    strategy = {"module": modules, "tir": prim_funcs, "relax": relax_funcs}[form](flaw=flaw)
    tally: dict = {}

    @settings(max_examples=FLAW_EXAMPLES, phases=PHASES,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def fuzz(program):
        assert program.expect == "invalid" and program.flaw == flaw
        check_program(fuzz_dir, program, tally)

    fuzz()
    assert tally.get("invalid", 0) >= min(10, FLAW_EXAMPLES), tally


# ============================================================================ mutations

SAMPLE_FILES = sorted((ROOT / "samples").glob("*.tvms")) + sorted((ROOT / "samples").glob("*/*.tvms"))
GOLDEN_FILES = sorted((ROOT / "tests" / "golden").glob("**/*.tvms"))

# Tokens a mutation inserts or substitutes: the grammar's keywords and punctuation, TVMScript's
# names, numbers at the edges of every width, and Unicode that NFKC folds (U+FB01 'ﬁ' is "fi",
# the mathematical bold x is "x"), that is invisible, or that Python rejects in names.
TOKENS = [
    # keywords and statements
    "def", "class", "for", "in", "with", "as", "if", "elif", "else", "while", "return", "pass", "assert",
    "lambda", "not", "and", "or", "is", "is not", "not in", "None", "True", "False", "...", "yield", "import",
    # punctuation and operators
    "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*",
    "/", "//", "%", "**", "@", "~", "&", "|", "^", "<<", ">>", "+=", "->", "\\", "#", "$", "?", "`", "!",
    # quotes and strings
    '"', "'", '"""', "'''", '""', "r'\\'", '"float32"', '"int64"', '"bool"', '"SSR"', '"S"', '"x\\ud800y"',
    "'\\N{BULLET}'", '"\\x00"', 'f"{x}"', 'b"x"', '"' + "a" * 300 + '"',
    # TVMScript names
    "T", "R", "I", "T.", "R.", "T.grid", "T.block", "T.sblock", "T.axis.remap", "T.axis.spatial", "T.init()",
    "T.reads", "T.writes", "T.Buffer", "T.match_buffer", "T.alloc_buffer", "T.int64", "T.int32", "T.float32",
    "T.Cast", "T.if_then_else", "T.Select", "T.evaluate", "T.func_attr", "T.handle", "T.prim_func", "T.serial",
    "T.parallel", "T.unroll", "T.vectorized", "T.thread_binding", "T.launch_thread", "T.let", "T.max",
    "R.Tensor", "R.Tuple", "R.Shape", "R.Object", "R.dataflow()", "R.output", "R.call_tir", "R.const", "R.shape",
    "R.add", "R.matmul", "R.nn.relu", "R.function", "R.func_attr", "R.emit", "I.ir_module", "cls", "cls.",
    "out_sinfo=", "dtype=", "axes=None", "metadata", 'metadata["relax.expr.Constant"][0]', "meta[relay.Constant][0]",
    "@T.prim_func", "@R.function", "Module", "main",
    # numbers
    "0", "1", "-1", "7", "2**70", "2**31", "-2**63", "1180591620717411303424", "4294967296", "9223372036854775808",
    "18446744073709551616", "1e309", "-1e309", "1e-400", "0.0", "-0.0", "nan", "inf", "0x", "0xFFFFFFFFFFFFFFFFFF",
    "0b2", "0o9", "1_", "1__0", "1e", "1.2.3", "1j", "00", "07", "10 ** 400", "1" * 400, "9" * 4400,
    # odd Unicode and whitespace
    "\ufb01", "\U0001d431", "\u212b", "e\u0301", "\u00e9", "\u0130", "\u00a0", "\u200b", "\ufeff", "\u2028",
    "\u0085", "\u4e2d", "\U0001f600", "\u202e", "\t", "\r", "\r\n", "\f", "\v", "\\\n", "\x1b[31m",
]

DEEP = [8, 40, 120, 400, 2000]


def _tokens(text: str) -> list:
    """(start, end) of each word, number, string or punctuation mark of ``text``."""
    return [m.span() for m in re.finditer(r"\w+|\"[^\"\n]*\"|'[^'\n]*'|[^\w\s]", text)]


@functools.lru_cache(maxsize=1)
def _donor_lines() -> list:
    """The non-blank lines of every sample: what a splice inserts into another file."""
    return [line for path in SAMPLE_FILES for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def mutate_text(rng: random.Random, text: str) -> tuple:
    """One random textual mutation: (new text, what was done)."""
    lines = text.split("\n")
    op = rng.choice([
        "delete_line", "duplicate_line", "swap_lines", "move_block", "delete_chars", "insert_token",
        "insert_token", "replace_token", "replace_token", "delete_token", "swap_names", "truncate",
        "indent", "dedent", "tabs", "deep_parens", "deep_list", "deep_blocks", "long_line", "replace_number",
        "splice", "splice",
    ])
    i = rng.randrange(len(lines))
    if op == "delete_line":
        del lines[i]
        return "\n".join(lines), f"{op} {i + 1}"
    if op == "duplicate_line":
        lines.insert(i, lines[i])
        return "\n".join(lines), f"{op} {i + 1}"
    if op == "swap_lines":
        j = rng.choice([min(i + 1, len(lines) - 1), rng.randrange(len(lines))])
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), f"{op} {i + 1} {j + 1}"
    if op == "move_block":
        j = rng.randrange(i, min(len(lines), i + 8) + 1)
        block, rest = lines[i:j], lines[:i] + lines[j:]
        k = rng.randrange(len(rest) + 1)
        return "\n".join(rest[:k] + block + rest[k:]), f"{op} {i + 1}-{j} to {k + 1}"
    if op == "truncate":
        at = rng.randrange(len(text) + 1)
        return text[:at], f"{op} at {at}"
    if op in ("indent", "dedent", "tabs"):
        j = min(len(lines), i + rng.choice([1, 1, 3, 10]))
        for k in range(i, j):
            if op == "indent":
                lines[k] = " " * rng.choice([1, 2, 4, 8]) + lines[k]
            elif op == "dedent":
                lines[k] = lines[k][rng.choice([1, 2, 4]):] if lines[k].startswith(" ") else lines[k]
            else:
                lines[k] = lines[k].replace("    ", "\t", rng.choice([1, 2]))
        return "\n".join(lines), f"{op} lines {i + 1}-{j}"
    if op == "deep_blocks":
        n = rng.choice([5, 30, 120])
        pad = re.match(r"[ \t]*", lines[i]).group()
        nest = [pad + "    " * d + rng.choice(["if True:", "with R.dataflow():", "for q in range(2):"]) for d in range(n)]
        lines[i:i + 1] = nest + ["    " * n + lines[i]]
        return "\n".join(lines), f"{op} {n} at line {i + 1}"
    if op == "splice":  # a line of another sample, at this line's indentation
        donor = rng.choice(_donor_lines()).strip()
        lines.insert(i, re.match(r"[ \t]*", lines[i]).group() + donor)
        return "\n".join(lines), f"{op} {donor!r} at line {i + 1}"
    if op == "long_line":
        lines.insert(i, re.match(r"[ \t]*", lines[i]).group() + "x = " + " + ".join(["1"] * rng.choice([100, 3000])))
        return "\n".join(lines), f"{op} at line {i + 1}"
    spans = _tokens(text)
    if not spans:
        return text + rng.choice(TOKENS), "append_token"
    start, end = rng.choice(spans)
    if op == "delete_chars":
        n = rng.randint(1, 5)
        return text[:start] + text[start + n:], f"{op} {n} at {start}"
    if op == "insert_token":
        token = rng.choice(TOKENS)
        at = rng.choice([start, end, rng.randrange(len(text) + 1)])
        return text[:at] + token + text[at:], f"{op} {token!r} at {at}"
    if op == "replace_token":
        token = rng.choice(TOKENS)
        return text[:start] + token + text[end:], f"{op} {text[start:end]!r} -> {token!r}"
    if op == "delete_token":
        return text[:start] + text[end:], f"{op} {text[start:end]!r}"
    if op == "swap_names":
        names = [s for s in spans if re.fullmatch(r"[^\W\d]\w*", text[s[0]:s[1]])]
        if names:
            s2 = rng.choice(names)
            return text[:start] + text[s2[0]:s2[1]] + text[end:], f"{op} {text[start:end]!r} -> {text[s2[0]:s2[1]]!r}"
        return text[:start] + text[end:], "delete_token"
    if op == "replace_number":
        numbers = [s for s in spans if text[s[0]].isdigit()] or [(start, end)]
        s = rng.choice(numbers)
        token = rng.choice(["0", "-1", "2**70", "1180591620717411303424", "4294967295", "65536", "1e39", "-0.0",
                            "9223372036854775808", "2147483648", "1.7976931348623157e309"])
        return text[:s[0]] + token + text[s[1]:], f"{op} {text[s[0]:s[1]]!r} -> {token!r}"
    # deep_parens / deep_list: an operand nested deeply
    n = rng.choice(DEEP)
    inner = text[start:end]
    wrapped = "(" * n + inner + ")" * n if op == "deep_parens" else "[" * n + inner + "]" * n
    return text[:start] + wrapped + text[end:], f"{op} {n} around {inner!r}"


def mutate_bytes(rng: random.Random, data: bytes) -> tuple:
    """One mutation of the encoded file: bytes that are not UTF-8 text, or odd line ends."""
    op = rng.choice(["nul", "invalid_utf8", "surrogate", "bom", "crlf", "cr", "latin1"])
    at = rng.randrange(len(data) + 1)
    if op == "nul":
        return data[:at] + b"\x00" + data[at:], f"{op} at {at}"
    if op == "invalid_utf8":
        bad = rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\xaf", b"\xf5\x80\x80\x80"])
        return data[:at] + bad + data[at:], f"{op} {bad!r} at {at}"
    if op == "surrogate":  # a lone surrogate, encoded as UTF-8 would (which UTF-8 forbids)
        return data[:at] + "\ud800".encode("utf-8", "surrogatepass") + data[at:], f"{op} at {at}"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, op
    if op == "crlf":
        return data.replace(b"\n", b"\r\n"), op
    if op == "cr":
        return data.replace(b"\n", b"\r"), op
    return data.decode("utf-8").encode("latin-1", "replace"), op


def mutants(path: pathlib.Path, count: int, seed: int):
    """``count`` mutants of one file: (bytes, description), the same ones every run."""
    rel = path.relative_to(ROOT).as_posix()
    rng = random.Random(f"{seed}:{rel}")
    original = path.read_text(encoding="utf-8")
    for k in range(count):
        if rng.random() < 0.08:
            data, what = mutate_bytes(rng, original.encode("utf-8"))
            yield data, f"{rel} #{k}: {what}"
            continue
        text, done = original, []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            text, what = mutate_text(rng, text)
            done.append(what)
        yield text.encode("utf-8", "surrogatepass"), f"{rel} #{k}: {'; '.join(done)}"


def mutant(rel: str, k: int, seed: int = SEED) -> bytes:
    """Mutant ``#k`` of the file ``rel`` (as a failure names it), to reproduce a failure:
    ``pathlib.Path("x.tvms").write_bytes(mutant("samples/mlp.tvms", 7))``."""
    for i, (data, _) in enumerate(mutants(ROOT / rel, k + 1, seed)):
        if i == k:
            return data
    raise IndexError(k)


def check_mutant(tmp: pathlib.Path, data: bytes, tally: dict) -> None:
    outcome = run_commands(tmp / "mutant.tvms", data)
    if outcome.accepted:
        check_accepted(outcome)
        tally["accepted"] = tally.get("accepted", 0) + 1
        if outcome.status("check") == 1:  # parses, but is not well-formed: said where
            assert " --> " in outcome.stderr("check"), f"unlocated diagnostic:\n{outcome.stderr('check')}"
    else:
        check_rejected(outcome)
        tally["rejected"] = tally.get("rejected", 0) + 1


def fuzz_files(tmp: pathlib.Path, files: list, per_file: int) -> dict:
    """Every mutant of every file through check_mutant; all failures reported together."""
    tally: dict = {}
    failures: list = []
    for path in files:
        for data, what in mutants(path, per_file, SEED):
            try:
                check_mutant(tmp, data, tally)
            except AssertionError as err:
                failures.append(f"{what} (seed {SEED}; see `mutant`)\n{str(err)[:3000]}")
    total = sum(tally.values()) + len(failures)
    assert not failures, f"{len(failures)} of {total} mutants broke the contract:\n\n" + "\n\n".join(failures[:10])
    tally["total"] = total
    return tally


def test_mutated_samples(fuzz_dir):
    tally = fuzz_files(fuzz_dir, SAMPLE_FILES, MUTANTS_PER_SAMPLE)
    assert tally["total"] >= min(650, len(SAMPLE_FILES) * MUTANTS_PER_SAMPLE), tally
    assert tally.get("accepted", 0) >= tally["total"] // 20, tally  # many mutants still parse


def test_mutated_goldens(fuzz_dir):
    tally = fuzz_files(fuzz_dir, GOLDEN_FILES, MUTANTS_PER_GOLDEN)
    assert tally["total"] >= min(550, len(GOLDEN_FILES) * MUTANTS_PER_GOLDEN), tally


def test_input_counts_reach_the_ci_budget():
    """The two fuzzers feed at least 2,000 inputs a run between them."""
    mutated = len(SAMPLE_FILES) * MUTANTS_PER_SAMPLE + len(GOLDEN_FILES) * MUTANTS_PER_GOLDEN
    assert mutated >= MIN_MUTANTS, mutated
    assert GENERATED_EXAMPLES + mutated >= 2000


def test_mutations_are_deterministic():
    path = SAMPLE_FILES[0]
    assert list(mutants(path, 20, SEED)) == list(mutants(path, 20, SEED))
    assert list(mutants(path, 20, SEED)) != list(mutants(path, 20, SEED + 1))


# ============================================================================ what the fuzzers found
#
# Each input below broke the contract before the fix named in its comment; they run here as
# small, fast reproducers.

TIR_HEADER = '@T.prim_func\ndef main(A: T.Buffer((14,), "float32"), B: T.Buffer((14,), "int32"), C: T.Buffer((4,), "int8")):\n'
RELAX_HEADER = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n'

ROUND_TRIPS = {
    # relax_builder: a dataflow variable bound twice and exported exported both bindings, so
    # the first one printed as an output variable (parse(print(X)) differed from parse(X)).
    "dataflow_output_bound_twice": RELAX_HEADER + "    with R.dataflow():\n        gv = R.nn.relu(x)\n"
    "        gv = R.add(gv, x)\n        R.output(gv)\n    return gv\n",
    # relax_builder.dim: `+1`, `- -1`, `2**3` in a primitive value were int32 constants among int64
    # ones, printed as T.int32(1), which reads back as an int64.
    "prim_value_unary_plus": RELAX_HEADER + "    y = 1 + +1 + 1\n    return x\n",
    "prim_value_double_minus": RELAX_HEADER + "    y = 1 + - -1\n    return x\n",
    "prim_value_power": RELAX_HEADER + "    y = 1 + 2**3\n    return x\n",
    "prim_value_negated_plus": RELAX_HEADER + "    y = -(+1)\n    return x\n",
    # printer/relax_builder: an int32 primitive value's struct info printed as R.Prim(value=5),
    # which reads back as an int64 (and then contradicts the value).
    "prim_value_int32": RELAX_HEADER + "    y = T.int32(5)\n    z = R.prim_value(T.int8(-3))\n    return x\n",
    # printer.format_string: a lone surrogate written as an escape in a string printed raw, and
    # fmt (and show, on a terminal) failed to encode it (exit 70).
    "lone_surrogate_in_string": '@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
    '    T.func_attr({"global_symbol": "x\\ud800y"})\n    with T.block("b\\udfff"):\n        A[0] = T.float32(1)\n',
    # printer.attr_value: an attribute number too large for a float printed as `inf`, no literal.
    "infinite_attribute_value": '@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n'
    '    T.func_attr({"big": [1.7976931348623157e309, -1e400]})\n    A[0] = T.float32(1)\n',
    # printer: a global symbol that is no Python name printed as the def's name (`def ma:in(`).
    "global_symbol_not_a_name": '@T.prim_func\ndef func(A: T.Buffer((4,), "float32")):\n'
    '    T.func_attr({"global_symbol": "ma:in"})\n    A[0] = T.float32(1)\n',
    "relax_global_symbol_keyword": RELAX_HEADER + '    R.func_attr({"global_symbol": "for"})\n    return x\n',
    # tir_builder._promote: `i - 1.5` was an int32 Sub with a float operand (printed back as
    # something else); it is a float operation, as in TVM.
    "int_minus_float_literal": TIR_HEADER + "    for i in range(14):\n        A[i] = T.float32(i - 1.5) + (1.5 + i)\n",
}

REJECTED = {
    # relax_calls: the shape of call_tir's old form took any number: `(-0.0, 4)` printed as a
    # float dimension that does not parse.
    "call_tir_float_dimension": (RELAX_HEADER + '    y = R.call_tir("env.f", (x,), (-0.0, 4), dtype="float32")\n'
                                 "    return y\n", "int64"),
    # tir_builder._region: a float region bound printed as a cast region.
    "float_region_bound": (TIR_HEADER + '    for i in range(14):\n        with T.block("b"):\n'
                           "            vi = T.axis.spatial(14, i)\n            T.reads(A[vi - T.float32(-0.0)])\n"
                           "            T.writes(A[vi])\n            A[vi] = T.float32(0)\n", "region bound"),
    # tir_builder._coerce: an infinite float stored into an int buffer was an internal error
    # (OverflowError, exit 70); a literal that does not fit printed as one that does not parse.
    "infinite_float_into_int_buffer": (TIR_HEADER + "    B[0] = 1e309\n", "int32"),
    "huge_float_into_int_buffer": (TIR_HEADER + "    B[0] = 1e30\n", "out of range"),
    "int8_literal_out_of_range": (TIR_HEADER + "    C[0] = 300\n", "out of range"),
    # tir_builder._axis: a block axis bound to another axis of the same block (a spliced line)
    # printed with its value before the axis it names, so it did not read back the same.
    "block_axis_bound_to_own_axis": (TIR_HEADER + '    for i in range(14):\n        with T.block("b"):\n'
                                     "            vi = T.axis.spatial(14, i)\n            vj = T.axis.spatial(14, vi)\n"
                                     "            A[vj] = T.float32(0)\n", "same block"),
    # tir_builder._binop: bitwise operators on a float (now that int op float literal is float).
    "bitwise_and_of_float": (TIR_HEADER + "    for i in range(14):\n        B[i] = T.int32(i & 1.5)\n", "integer operands"),
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_found_inputs_round_trip(fuzz_dir, name):
    outcome = run_commands(fuzz_dir / "found.tvms", ROUND_TRIPS[name].encode())
    assert outcome.accepted and outcome.status("check") == 0, outcome.describe()
    check_accepted(outcome)


@pytest.mark.parametrize("name", list(REJECTED))
def test_found_inputs_are_rejected(fuzz_dir, name):
    text, message = REJECTED[name]
    outcome = run_commands(fuzz_dir / "found.tvms", text.encode())
    assert not outcome.accepted, f"accepted:\n{outcome.results['show'][1]}"
    check_rejected(outcome)
    assert message in outcome.stderr("show"), outcome.stderr("show")


def test_int_op_float_literal_is_a_float_operation():
    func = tvms.parse(TIR_HEADER + "    for i in range(14):\n        A[i] = i - 1.5\n")
    value = func.body.body.value
    assert value.dtype == "float32" and value.a.dtype == "float32" and value.b.dtype == "float32", repr(value)


# A valid kernel that reads a T.alloc_buffer before writing it. `tvms run` hangs on it: the load of
# the uninitialized buffer is `undef` to LLVM, branching on it is undefined behaviour, and the
# optimizer turns the whole function into `for (;;);` (a `noreturn` function). Found by running
# generated static prim_funcs with `tvms run`; the codegen (compiler/codegen_llvm/) is not this
# file's to fix. Checked on the emitted LLVM IR, so that the test itself cannot hang.
UNINITIALIZED_READ = '''@T.prim_func
def main(A1: T.Buffer((8,), "uint8")):
    X2 = T.alloc_buffer((3, 5,), "int32")
    X3 = T.alloc_buffer((3,), "uint8")
    for i4 in T.serial(3):
        X3[i4] = T.if_then_else((not (X2[i4, 3] < i4)) and (not (X2[(i4 + 3) % 3, i4 % 5] == i4)), T.min(T.Cast("uint8", 35), X3[i4]), T.Cast("uint8", i4))
        for i5 in range(3):
            X3[(i4 + 1) % 3] = T.Select(X2[i4, i4 % 5] != T.int32(-100), X3[0], A1[0])
'''


def test_kernel_reading_an_uninitialized_buffer_terminates(fuzz_dir):
    """Was an endless loop: LLVM took the loads of never-written elements as undefined.
    Allocations are zero-filled now (codegen_llvm `zero_fill`)."""
    path = fuzz_dir / "uninitialized.tvms"
    path.write_text(UNINITIALIZED_READ)
    status, llvm_ir, err = run_cli(["compile", str(path), "--emit", "llvm"])
    assert status == 0, err
    assert "define void @tvms_main" in llvm_ir
    assert "noreturn" not in llvm_ir, "the kernel compiles to a loop that never ends"
