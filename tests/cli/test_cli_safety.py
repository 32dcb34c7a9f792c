"""The CLI never silently does nothing with an output argument (issue 12): an empty file name
for --out / -o is a usage error (exit 2), not a run that saves nothing."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = str(ROOT / "samples" / "mlp.tvms")


@pytest.mark.parametrize("args", [["run", MLP, "--out", ""], ["compile", MLP, "-o", " "],
                                  ["import", "model.onnx", "-o", ""]])
def test_an_empty_output_name_is_a_usage_error(args):
    proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "an output file name cannot be empty" in proc.stderr and "Traceback" not in proc.stderr


NFKC = '''# from tvm.script import relax as R

@R.function
def main(fi: R.Tensor((2,), "float32"), {second}: R.Tensor((2,), "float32")):
    y = R.add(fi, {second})
    return y
'''


def test_names_python_reads_as_one_are_one_name():
    """``ﬁ`` (U+FB01) is ``fi`` in NFKC form, as Python compares identifiers: a duplicate
    parameter, reported where the second spelling stands, never two names merged silently."""
    import tvmscript as tvms
    from tvmscript.diagnostics import TVMScriptError

    text = NFKC.format(second="\ufb01")
    with pytest.raises(TVMScriptError, match="duplicate parameter 'fi'") as info:
        tvms.parse(text)
    assert (info.value.span.line, info.value.span.col) == (4, text.splitlines()[3].index("\ufb01") + 1)
    alone = tvms.parse(NFKC.format(second="g").replace("fi", "\ufb01"))
    assert [p.name_hint for p in alone.params] == ["fi", "g"]


MESSY = '# from tvm.script import relax as R\n@R.function\ndef f(x: R.Tensor((2,), "float32")):\n    y = R.add(x,x)\n    return y\n'


def fmt(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tvmscript.cli", "fmt", str(path)], capture_output=True, text=True,
                          timeout=120)


def test_fmt_leaves_a_read_only_file_alone(tmp_path):
    path = tmp_path / "ro.tvms"
    path.write_text(MESSY)
    path.chmod(0o444)
    proc = fmt(path)
    assert proc.returncode == 1 and "the file is read-only" in proc.stderr
    assert path.read_text() == MESSY and (path.stat().st_mode & 0o777) == 0o444


def test_fmt_keeps_hard_links_and_the_inode(tmp_path):
    path = tmp_path / "a.tvms"
    path.write_text(MESSY)
    link = tmp_path / "b.tvms"
    import os

    os.link(path, link)
    inode = path.stat().st_ino
    proc = fmt(path)
    assert proc.returncode == 0, proc.stderr
    assert path.stat().st_ino == inode and link.read_text() == path.read_text() != MESSY


def test_fmt_keeps_an_edit_made_while_it_formats(tmp_path, monkeypatch):
    """The check runs at the last moment before the rename: an edit made after tvms read the
    file is kept, and fmt says so (exit 1) instead of reporting it reformatted."""
    from tvmscript import cli, formatting

    path = tmp_path / "e.tvms"
    path.write_text(MESSY)
    real = formatting.unsafe_to_write

    def edit_then_check(original, formatted):
        path.write_text(MESSY + "# an edit\n")  # the user saves while tvms works
        return real(original, formatted)

    monkeypatch.setattr(formatting, "unsafe_to_write", edit_then_check)
    status = cli.main(["fmt", str(path)])
    assert status == 1
    assert path.read_text() == MESSY + "# an edit\n"


def test_fmt_keeps_the_owner_of_someone_elses_file(tmp_path):
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root to give the file another owner")
    path = tmp_path / "o.tvms"
    path.write_text(MESSY)
    os.chown(path, 65534, 65534)
    proc = fmt(path)
    assert proc.returncode == 0, proc.stderr
    st = path.stat()
    assert (st.st_uid, st.st_gid) == (65534, 65534) and path.read_text() != MESSY


def _long_sum(n: int) -> str:
    terms = " + ".join(f"A[{i % 4}]" for i in range(n))
    return (f'# from tvm.script import tir as T\n@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), '
            f'B: T.Buffer((1,), "float32")):\n    B[0] = {terms}\n')


def test_a_long_expression_compiles_or_gets_a_diagnostic_at_once():
    """Up to tvms.MAX_NESTING levels an expression goes through every stage (pickling the
    kernel recursed past Python's default limit at 250 terms); deeper, a located diagnostic."""
    import numpy as np

    import tvmscript as tvms
    from tvmscript.diagnostics import TVMScriptError

    func = tvms.parse(_long_sum(990))
    a, out = np.arange(4, dtype="float32"), tvms.nd.array(np.zeros(1, "float32"))
    tvms.compile(func, "llvm")["f"](tvms.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), [sum(a[i % 4] for i in range(990))])
    with pytest.raises(TVMScriptError, match=r"nested too deeply: \d+ levels, at most 1000") as info:
        tvms.parse(_long_sum(20_000))
    assert info.value.span.line == 4


def test_four_hundred_nested_calls_read_as_four_hundred_bindings():
    import tvmscript as tvms

    text = ('# from tvm.script import relax as R\n@R.function\ndef f(x: R.Tensor((2,), "float32")):\n'
            "    lv = " + "R.add(" * 400 + "x" + ", x)" * 400 + "\n    return lv\n")
    func = tvms.parse(text)
    assert len(func.body.blocks[0].bindings) == 400


DIVIDE = '''# from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32"), k: T.int32):
    for i in range(4):
        B[i] = A[i] {op} k
'''


@pytest.mark.parametrize("op", ["//", "%"])
def test_integer_division_by_zero_and_overflow_are_errors_not_signals(op):
    """Was SIGFPE (exit 136, no message); now the call raises, naming the kernel."""
    import numpy as np

    import tvmscript as tvms
    from tvmscript.runtime.kernel import KernelAssertionError

    kernel = tvms.compile(tvms.parse(DIVIDE.format(op=op)), "llvm")["f"]
    a = np.array([7, -7, 8, -2**31], "int32")
    out = tvms.nd.array(np.zeros(4, "int32"))
    kernel(tvms.nd.array(a), out, 3)
    np.testing.assert_array_equal(out.numpy(), a // 3 if op == "//" else a % 3)
    with pytest.raises(KernelAssertionError, match="f: integer division by zero"):
        kernel(tvms.nd.array(a), out, 0)
    with pytest.raises(KernelAssertionError, match=r"f: integer overflow: -2147483648 .* -1"):
        kernel(tvms.nd.array(a), out, -1)


def test_a_constant_zero_divisor_is_flagged_by_check_and_refused_by_run(tmp_path):
    path = tmp_path / "div0.tvms"
    path.write_text(DIVIDE.format(op="//").replace("A[i] // k", "A[i] // 0"))
    for command in (["check"], ["run", "--shape", "k=1"]):
        proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", command[0], str(path), *command[1:]],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and "integer division by zero" in proc.stderr, proc.stderr


SPIN = '''# from tvm.script import tir as T

@T.prim_func
def spin(A: T.Buffer((1,), "int32")):
    while T.int32(0) < 1:
        A[0] = A[0] + 1
'''


def test_timeout_stops_a_kernel_that_never_ends(tmp_path):
    import time

    path = tmp_path / "spin.tvms"
    path.write_text(SPIN)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", "run", str(path), "--timeout", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "stopped after --timeout 1 s" in proc.stderr
    assert time.monotonic() - start < 60


def test_ctrl_c_stops_a_running_kernel_at_once(tmp_path):
    """The kernel is native code Python's signal handler cannot enter: it used to run on after
    SIGINT. Now the run ends at once with exit 130 and one line."""
    import signal
    import time

    path = tmp_path / "spin.tvms"
    path.write_text(SPIN)
    proc = subprocess.Popen([sys.executable, "-m", "tvmscript.cli", "run", str(path)], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr.readline().startswith("note:")  # compiled; the kernel runs from now on
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        rest = proc.communicate(timeout=20)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and rest == "tvms run: interrupted\n"
    assert time.monotonic() - start < 5


def _check_with_cache(cache_home, extra_env=None) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), **(extra_env or {}))
    env.pop("TVMS_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "tvmscript.cli", "check", MLP], capture_output=True, text=True,
                          timeout=120, env=env)


def _cache_file(cache_home):
    files = sorted((cache_home / "tvms" / "parser").glob("tables-*.marshal"))
    assert len(files) == 1, files
    return files[0]


def test_a_damaged_or_foreign_parser_cache_is_rebuilt_not_trusted(tmp_path):
    """A valid-marshal file of the wrong shape, and bit flips anywhere, used to break every
    command until the file was deleted."""
    import marshal

    from tvmscript import cache as disk_cache
    from tvmscript.parser.lalr_tables import _SPEC_MAGIC

    assert _check_with_cache(tmp_path).returncode == 0
    path = _cache_file(tmp_path)
    good = path.read_bytes()
    good_tables = marshal.loads(disk_cache.read(str(path), _SPEC_MAGIC))
    # intact, but not our tables
    assert disk_cache.write(str(path), _SPEC_MAGIC, marshal.dumps({"terminals": {}, "nonsense": [1, 2, 3]}))
    proc = _check_with_cache(tmp_path)
    assert proc.returncode == 0, proc.stderr
    rebuilt = disk_cache.read(str(path), _SPEC_MAGIC)  # rebuilt: intact, our tables (Lark numbers states anew)
    assert rebuilt is not None
    assert set(marshal.loads(rebuilt)) == set(good_tables)
    for position in range(0, len(good), max(1, len(good) // 12)):
        flipped = bytearray(good)
        flipped[position] ^= 0x10
        path.write_bytes(bytes(flipped))
        proc = _check_with_cache(tmp_path)
        assert proc.returncode == 0 and "no problems found" in proc.stderr, (position, proc.stderr)


def test_no_cache_rather_than_the_shared_temp_folder(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = _check_with_cache(not_a_folder, {"TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stderr
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("where", ["for i in range({n}):\n        A[0] = A[0] + T.float32(1)",
                                   "B = T.alloc_buffer(({n},))\n    A[0] = T.float32(1)"])
@pytest.mark.parametrize("n", ["2**70", "2**63", "1180591620717411303424"])
def test_integers_wider_than_int64_are_diagnostics(where, n):
    """`range(2**70)` used to run 0 times, and a (2**63,) buffer printed text that did not
    parse: a number no TIR type holds is now a located error."""
    import tvmscript as tvms
    from tvmscript.diagnostics import TVMScriptError

    text = ('# from tvm.script import tir as T\n@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    '
            + where.format(n=n) + "\n")
    with pytest.raises(TVMScriptError, match="does not fit in int64") as info:
        tvms.parse(text)
    assert info.value.span.line == 4


def test_powers_of_literals_are_numbers_as_in_python():
    import tvmscript as tvms

    func = tvms.parse('# from tvm.script import tir as T\n@T.prim_func\ndef f(A: T.Buffer((2**10,), "float32")):\n'
                      '    A[0] = T.float32(2**3)\n')
    printed = func.script()
    assert 'A: T.Buffer((1024,), "float32")' in printed and "A[0] = T.float32(8.0)" in printed


RECURSION = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def ping(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = Module.pong(x)
        return y

    @R.function
    def pong(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = Module.ping(x)
        return y

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = Module.ping(x)
        return y
'''


@pytest.mark.parametrize("text, args, says", [
    (RECURSION, [], "call each other too deeply"),
    ('# from tvm.script import relax as R\n\n@R.function\ndef main(x: R.Tensor(("n",), "float32")):\n'
     "    y = R.add(x, x)\n    return y\n", ["--shape", "n=9223372036854775807"], "too big for memory"),
])
def test_run_reports_what_used_to_be_internal_errors(tmp_path, text, args, says):
    """Endless mutual recursion and an input too big to exist were exit-70 internal errors."""
    path = tmp_path / "m.tvms"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", "run", str(path), *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and says in proc.stderr and "internal error" not in proc.stderr, proc.stderr


def test_npz_inputs_that_claim_or_expand_to_huge_arrays_are_refused_before_loading(tmp_path):
    """A header claiming 10**12 elements, and a member that expands a thousand times (a zip
    bomb), used to allocate gigabytes before failing."""
    import io
    import zipfile

    import numpy as np

    lie = io.BytesIO()
    np.lib.format.write_array_header_1_0(lie, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)})
    lie.write(b"\0" * 64)
    with zipfile.ZipFile(tmp_path / "lie.npz", "w") as z:
        z.writestr("x.npy", lie.getvalue())
    bomb = io.BytesIO()
    np.save(bomb, np.zeros(20_000_000, "float32"))
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", bomb.getvalue())
    (tmp_path / "lie.npy").write_bytes(lie.getvalue())
    for flag, name, says in (("--inputs", "lie.npz", "claims shape (1000000, 1000000)"),
                             ("--inputs", "bomb.npz", "a zip bomb?"),
                             ("--input", "x=" + str(tmp_path / "lie.npy"), "claims shape (1000000, 1000000)")):
        value = name if "=" in name else str(tmp_path / name)
        proc = subprocess.run([sys.executable, "-m", "tvmscript.cli", "run", MLP, flag, value],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and says in proc.stderr, proc.stderr
