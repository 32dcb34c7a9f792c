"""The ``tvms`` command line, run as a user runs it: through the installed ``tvms`` entry point
(and once as ``python -m tvmscript.cli``). No command may ever print a Python traceback."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from support.cli import TVMS, UNPARSEABLE, WRONG_SHAPES, tvms
from support.terminal import run_on_terminal

from tvmscript.api import load
from tvmscript.printer import to_script

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
GOOD_SAMPLES = [p for p in sorted(SAMPLES.glob("*.tvms")) if p.stem not in UNPARSEABLE]

pytestmark = pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")


# A hand-written module with a comment in every kind of place.
COMMENTED = '''\
# A module with comments everywhere.
@I.ir_module
class Module:
    # the kernel
    @T.prim_func
    def add_one(A: T.Buffer((1, 10), "float32"), B: T.Buffer((1, 10), "float32")):
        # loop over every element
        for i, j in T.grid(1, 10):  # trailing comment on a loop
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)  # trailing comment on a store
                # end of the block body
            # end of the loop body
        # end of the prim_func

    @R.function
    def main(x: R.Tensor((1, 10), "float32"), y: R.Tensor((1, 10), "float32")) -> R.Tensor((1, 10), "float32"):
        # top of the Relax function
        cls = Module
        # before the dataflow block
        with R.dataflow():
            # first line of the dataflow block
            lv = R.add(x, y)  # trailing comment in the dataflow block
            lv1 = R.call_tir(cls.add_one, (lv,), out_sinfo=R.Tensor((1, 10), "float32"))
            # before a binding
            gv = R.nn.relu(lv1)
            # before R.output
            R.output(gv)  # trailing comment on R.output
            # end of the dataflow block
        # before return
        return gv  # trailing comment on return
        # end of the Relax function
# end of the file
'''

BROKEN = '''\
@R.function
def main(x: R.Tensor((1, 10), "float32")):
    lv = R.nn.relu(lv9)
    return lv
'''


def comment_lines(text: str) -> list[str]:
    return [m.group(0).rstrip() for m in re.finditer(r"#[^\n]*", text)]


def no_temp_files(folder: pathlib.Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith(".tvms-")]


# ----------------------------------------------------------------------------- show


def test_show_prints_canonical_text_plain_when_piped():
    path = SAMPLES / "te_matmul.tvms"
    proc = tvms("show", path)
    assert proc.returncode == 0, proc.err
    assert proc.out == to_script(load(path))
    assert "\x1b[" not in proc.out
    assert proc.err == ""


def test_show_one_function():
    path = SAMPLES / "mixture.tvms"
    mod = load(path)
    names = [gv.name_hint for gv in mod.get_global_vars()]
    assert len(names) > 1
    proc = tvms("show", path, "--func", names[0])
    assert proc.returncode == 0, proc.err
    assert f"def {names[0]}(" in proc.out
    assert all(f"def {n}(" not in proc.out for n in names[1:])


def test_show_missing_function_name():
    path = SAMPLES / "mlp.tvms"
    proc = tvms("show", path, "--func", "nope")
    assert proc.returncode == 1
    assert proc.out == ""
    assert proc.err.strip() == "error: no function named 'nope' (the module has: main)"


def test_show_func_on_a_file_holding_one_function():
    proc = tvms("show", SAMPLES / "te_matmul.tvms", "--func", "func")
    assert proc.returncode == 1
    assert "--func needs a file holding an @I.ir_module" in proc.err


def _run_on_terminal(args: list[str], env: dict | None = None) -> str:
    """Run tvms with its standard output on a pseudo-terminal; return what it printed."""
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update(env or {})
    proc, text = run_on_terminal([TVMS, *args], full_env)
    assert proc.returncode == 0, proc.stderr
    return text


def test_show_colors_a_terminal_unless_no_color():
    path = str(SAMPLES / "mlp.tvms")
    assert "\x1b[" in _run_on_terminal(["show", path])
    plain = _run_on_terminal(["show", path, "--no-color"])
    assert "\x1b[" not in plain
    assert "def main(" in plain
    assert "\x1b[" not in _run_on_terminal(["show", path], env={"NO_COLOR": "1"})


def test_show_reads_standard_input():
    text = (SAMPLES / "mlp.tvms").read_text()
    proc = tvms("show", "-", input=text)
    assert proc.returncode == 0, proc.err
    assert proc.out == to_script(load(SAMPLES / "mlp.tvms"))


def test_show_standard_input_diagnostic_names_stdin():
    proc = tvms("show", "-", input=BROKEN)
    assert proc.returncode == 1
    assert "error: undefined name 'lv9'" in proc.err
    assert "--> <stdin>:3:20" in proc.err


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "tvmscript.cli", "show", str(SAMPLES / "mlp.tvms")], capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == to_script(load(SAMPLES / "mlp.tvms"))


# ----------------------------------------------------------------------------- fmt


@pytest.fixture
def messy(tmp_path) -> pathlib.Path:
    """A copy of a sample that is not in canonical form (old dialect), mode 0640."""
    path = tmp_path / "model.tvms"
    shutil.copyfile(SAMPLES / "te_matmul.tvms", path)
    os.chmod(path, 0o640)
    return path


def test_fmt_rewrites_the_file_through_a_temporary_file(messy):
    before = messy.stat()
    original = messy.read_text()
    proc = tvms("fmt", messy)
    assert proc.returncode == 0, proc.err
    assert proc.err.strip() == f"reformatted {messy}"
    assert proc.out == ""
    after = messy.stat()
    assert messy.read_text() == to_script(load(SAMPLES / "te_matmul.tvms")) != original
    assert after.st_ino != before.st_ino  # a new file renamed over the old one
    assert after.st_mode & 0o7777 == 0o640  # with the old one's permissions
    assert no_temp_files(messy.parent)


def test_fmt_is_idempotent(messy):
    assert tvms("fmt", messy).returncode == 0
    first = messy.read_bytes()
    inode = messy.stat().st_ino
    proc = tvms("fmt", messy)
    assert proc.returncode == 0
    assert proc.out == "" and proc.err == ""  # nothing to report
    assert messy.read_bytes() == first
    assert messy.stat().st_ino == inode  # not even rewritten


def test_fmt_check(messy):
    original = messy.read_bytes()
    proc = tvms("fmt", "--check", messy)
    assert proc.returncode == 1
    assert proc.err.strip() == f"would reformat {messy}"
    assert messy.read_bytes() == original
    assert tvms("fmt", messy).returncode == 0
    proc = tvms("fmt", "--check", messy)
    assert proc.returncode == 0, proc.err
    assert proc.err == ""


def test_fmt_check_many_files(messy, tmp_path):
    canonical = tmp_path / "canonical.tvms"
    canonical.write_text(to_script(load(SAMPLES / "mlp.tvms")))
    proc = tvms("fmt", "--check", canonical, messy)
    assert proc.returncode == 1
    assert proc.err.strip() == f"would reformat {messy}"


def test_fmt_diff(messy):
    original = messy.read_bytes()
    proc = tvms("fmt", "--diff", messy)
    assert proc.returncode == 0, proc.err
    lines = proc.out.splitlines()
    assert lines[0] == f"--- {messy}" and lines[1] == f"+++ {messy}"
    assert lines[2].startswith("@@ ")
    assert any(line.startswith("-") for line in lines[2:]) and any(line.startswith("+") for line in lines[2:])
    assert messy.read_bytes() == original
    # The diff, applied, gives the formatted file.
    removed = [line[1:] for line in lines[2:] if line[:1] in " -"]
    added = [line[1:] for line in lines[2:] if line[:1] in " +"]
    assert "\n".join(removed) in original.decode()
    assert "\n".join(added) in to_script(load(messy))


def test_fmt_check_and_diff_together(messy):
    proc = tvms("fmt", "--check", "--diff", messy)
    assert proc.returncode == 1
    assert proc.out.startswith(f"--- {messy}")


def test_fmt_file_that_does_not_parse(tmp_path):
    path = tmp_path / "broken.tvms"
    path.write_bytes(BROKEN.encode())
    before = path.stat()
    proc = tvms("fmt", path)
    assert proc.returncode == 1
    assert proc.out == ""
    assert proc.err.splitlines() == [
        "error: undefined name 'lv9'",
        f" --> {path}:3:20",
        "  |",
        "3 |     lv = R.nn.relu(lv9)",
        "  |                    ^^^",
    ]
    assert path.read_bytes() == BROKEN.encode()
    assert path.stat().st_ino == before.st_ino and path.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.tvms"]


def test_fmt_syntax_error(tmp_path):
    path = tmp_path / "syntax.tvms"
    text = BROKEN.replace("R.nn.relu(lv9)", "R.nn.relu(x")
    path.write_text(text)
    proc = tvms("fmt", path)
    assert proc.returncode == 1
    assert "error: '(' was never closed" in proc.err
    assert f"--> {path}:3:19" in proc.err
    assert path.read_text() == text


def test_fmt_keeps_going_after_a_bad_file(messy, tmp_path):
    bad = tmp_path / "broken.tvms"
    bad.write_text(BROKEN)
    proc = tvms("fmt", bad, messy)
    assert proc.returncode == 1
    assert "undefined name 'lv9'" in proc.err and f"reformatted {messy}" in proc.err
    assert messy.read_text() == to_script(load(SAMPLES / "te_matmul.tvms"))


def test_fmt_standard_input_to_standard_output():
    text = (SAMPLES / "te_matmul.tvms").read_text()
    proc = tvms("fmt", "-", input=text)
    assert proc.returncode == 0, proc.err
    assert proc.out == to_script(load(SAMPLES / "te_matmul.tvms"))
    proc = tvms("fmt", "--check", "-", input=text)
    assert proc.returncode == 1 and proc.out == ""


def test_fmt_through_a_symlink_keeps_the_link(messy, tmp_path):
    link = tmp_path / "link.tvms"
    link.symlink_to(messy.name)
    proc = tvms("fmt", link)
    assert proc.returncode == 0, proc.err
    assert link.is_symlink()
    assert messy.read_text() == to_script(load(SAMPLES / "te_matmul.tvms"))


def test_fmt_keeps_every_comment(tmp_path):
    path = tmp_path / "commented.tvms"
    path.write_text(COMMENTED)
    proc = tvms("fmt", path)
    assert proc.returncode == 0, proc.err
    formatted = path.read_text()
    assert sorted(comment_lines(COMMENTED)) == sorted(
        c for c in comment_lines(formatted) if not c.startswith(("# from tvm.script", '# with T.block("root")'))
    )
    lines = formatted.splitlines()

    def line_of(text: str) -> int:
        (i,) = [k for k, line in enumerate(lines) if text in line]
        return i

    def indent(i: int) -> int:
        return len(lines[i]) - len(lines[i].lstrip())

    # Trailing comments stay on their statement's line.
    for code, comment in [
        ("for i, j in T.grid(1, 10):", "# trailing comment on a loop"),
        ("B[vi, vj] = A[vi, vj] + T.float32(1", "# trailing comment on a store"),
        ("= R.add(x, y)", "# trailing comment in the dataflow block"),
        ("R.output(gv)", "# trailing comment on R.output"),
        ("return gv", "# trailing comment on return"),
    ]:
        assert code in lines[line_of(comment)], comment
    # A comment before a statement stays right before it, at its indentation.
    for comment, code in [
        ("# the kernel", "@T.prim_func"),
        ("# loop over every element", "for i, j in T.grid(1, 10):"),
        ("# before the dataflow block", "with R.dataflow():"),
        ("# first line of the dataflow block", "= R.add(x, y)"),
        ("# before a binding", "= R.nn.relu(lv1)"),
        ("# before R.output", "R.output(gv)"),
        ("# before return", "return gv"),
    ]:
        i = line_of(comment)
        assert code in lines[i + 1], comment
        assert indent(i) == indent(i + 1), comment
    # A comment at the end of a block stays after the block's last statement, at its depth.
    for comment, last in [
        ("# end of the block body", "B[vi, vj] = A[vi, vj]"),
        ("# end of the dataflow block", "R.output(gv)"),
    ]:
        i = line_of(comment)
        assert last in lines[i - 1] and indent(i) == indent(i - 1), comment
    assert indent(line_of("# end of the loop body")) == indent(line_of('with T.block("b")'))
    assert indent(line_of("# end of the prim_func")) == indent(line_of("for i, j in T.grid"))
    assert indent(line_of("# end of the Relax function")) == indent(line_of("return gv"))
    assert lines[-1] == "# end of the file"
    # Formatting again changes nothing.
    proc = tvms("fmt", path)
    assert proc.returncode == 0 and proc.err == ""
    assert path.read_text() == formatted
    assert tvms("fmt", "--check", path).returncode == 0


@pytest.mark.parametrize("sample", GOOD_SAMPLES, ids=[p.stem for p in GOOD_SAMPLES])
def test_fmt_with_a_comment_on_every_line(sample, tmp_path):
    """A trailing comment on every line that can hold one and a comment line between all
    statements: all survive formatting, and formatting again is a fixed point."""
    out = []
    for k, line in enumerate(sample.read_text().splitlines()):
        if line.strip() and not line.lstrip().startswith(("#", "@")) and '"""' not in line:
            indent = line[: len(line) - len(line.lstrip())]
            if not out or not out[-1].rstrip().endswith((",", "(", "[")):
                out.append(f"{indent}# note {k}")
            if not line.rstrip().endswith(("\\",)):
                line = f"{line}  # tail {k}"
        out.append(line)
    path = tmp_path / sample.name
    path.write_text("\n".join(out) + "\n")
    proc = tvms("fmt", path)
    assert proc.returncode == 0, proc.err
    formatted = path.read_text()
    missing = set(re.findall(r"# (?:note|tail) \d+", "\n".join(out))) - set(re.findall(r"# (?:note|tail) \d+", formatted))
    assert not missing
    proc = tvms("fmt", "--check", path)
    assert proc.returncode == 0, proc.err


# ----------------------------------------------------------------------------- check


def test_check_good_files():
    good = [p for p in GOOD_SAMPLES if p.stem not in WRONG_SHAPES]
    proc = tvms("check", *good)
    assert proc.returncode == 0, proc.err
    assert proc.err.strip() == f"checked {len(good)} files: no problems found"


def test_check_reports_a_call_tir_argument_of_the_wrong_shape():
    proc = tvms("check", SAMPLES / "two_dataflow_blocks.tvms")
    assert proc.returncode == 1
    assert "linear1" in proc.err and "two_dataflow_blocks.tvms:" in proc.err


def test_check_bad_file(tmp_path):
    bad = tmp_path / "bad.tvms"
    bad.write_text(BROKEN)
    proc = tvms("check", SAMPLES / "mlp.tvms", bad)
    assert proc.returncode == 1
    assert "error: undefined name 'lv9'" in proc.err
    assert f"--> {bad}:3:20" in proc.err
    assert "no problems found" not in proc.err


@pytest.mark.parametrize("stem", sorted(UNPARSEABLE))
def test_check_unparseable_samples(stem):
    path = SAMPLES / f"{stem}.tvms"
    proc = tvms("check", path)
    assert proc.returncode == 1
    assert re.search(rf"--> {re.escape(str(path))}:\d+:\d+", proc.err), proc.err
    assert "^" in proc.err


def test_check_standard_input():
    proc = tvms("check", "-", input=(SAMPLES / "mlp.tvms").read_text())
    assert proc.returncode == 0, proc.err


# ----------------------------------------------------------------------------- bad input


def test_non_utf8_input(tmp_path):
    path = tmp_path / "latin1.tvms"
    path.write_bytes(BROKEN.replace("lv9", "lv\xe9").encode("latin-1"))
    for command in ("show", "check", "fmt"):
        proc = tvms(command, path)
        assert proc.returncode == 1, command
        assert "error: the file is not valid UTF-8 (byte 0xe9)" in proc.err
        assert f"--> {path}:3:22" in proc.err
        assert "3 |     lv = R.nn.relu(lv\ufffd)" in proc.err
    assert path.read_bytes() == BROKEN.replace("lv9", "lv\xe9").encode("latin-1")


def test_binary_input(tmp_path):
    path = tmp_path / "model.so"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    for command in ("show", "check", "fmt"):
        proc = tvms(command, path)
        assert proc.returncode == 1, command
        assert "error: this is a binary file, not TVMScript text" in proc.err
        assert f"--> {path}:1:1" in proc.err
    proc = tvms("show", "-", input=b"\x00\x01\x02")
    assert proc.returncode == 1 and "--> <stdin>:1:1" in proc.err


def test_empty_input(tmp_path):
    path = tmp_path / "empty.tvms"
    path.write_text("")
    proc = tvms("check", path)
    assert proc.returncode == 1
    assert "error: the file is empty" in proc.err


def test_missing_file(tmp_path):
    path = tmp_path / "nope.tvms"
    for command in ("show", "check", "fmt"):
        proc = tvms(command, path)
        assert proc.returncode == 1, command
        assert proc.err.strip() == f"error: no such file: {path}"


def test_directory_argument(tmp_path):
    proc = tvms("show", tmp_path)
    assert proc.returncode == 1
    assert proc.err.strip() == f"error: {tmp_path} is a directory"


def test_usage_errors():
    proc = tvms()
    assert proc.returncode == 2 and "usage: tvms" in proc.err
    proc = tvms("show")
    assert proc.returncode == 2 and "usage: tvms show" in proc.err
    proc = tvms("frobnicate")
    assert proc.returncode == 2


def test_version():
    proc = tvms("--version")
    assert proc.returncode == 0 and proc.out.startswith("tvms ")


def test_internal_error_is_reported_without_a_traceback(monkeypatch, capsys):
    """A bug in tvms itself (here: a printer that raises) is one line on stderr, exit 70."""
    import tvmscript.printer
    from tvmscript import cli

    def broken(*args, **kwargs):
        raise RuntimeError("printer exploded")

    monkeypatch.setattr(tvmscript.printer, "show", broken)
    monkeypatch.delenv("TVMS_DEBUG", raising=False)
    assert cli.main(["show", str(SAMPLES / "mlp.tvms")]) == 70
    err = capsys.readouterr().err
    assert "internal error in tvms (RuntimeError: printer exploded)" in err
    assert "Traceback" not in err
    monkeypatch.setenv("TVMS_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["show", str(SAMPLES / "mlp.tvms")])


def test_fmt_keeps_comments_on_func_attr_lines(tmp_path):
    path = tmp_path / "attrs.tvms"
    path.write_text(
        "@I.ir_module\nclass Module:\n"
        "    @T.prim_func\n"
        '    def f(A: T.Buffer((4,), "float32")):\n'
        "        # attributes\n"
        '        T.func_attr({"tir.noalias": True})  # no alias\n'
        "        for i in range(4):\n"
        "            A[i] = T.float32(0)\n\n"
        "    @R.function\n"
        '    def main(x: R.Tensor((4,), "float32")):\n'
        '        R.func_attr({"num_input": 1})  # one input\n'
        "        return x\n"
    )
    subprocess.run(["tvms", "fmt", str(path)], check=True, capture_output=True)
    text = path.read_text()
    assert '        # attributes\n        T.func_attr({"tir.noalias": True})  # no alias\n' in text
    assert '        R.func_attr({"num_input": 1})  # one input\n' in text
