"""Progress of long compiles (compiler/progress.py): the compiler reports each stage, and
`tvms run`/`tvms compile` show it on a terminal once a compile has taken longer than
`_CompileProgress.DELAY`; piped output never gets it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from support.terminal import run_on_terminal

import tvmscript as tvms
from tvmscript.compiler import progress
from tvmscript.compiler.build_cpu import clear_cache

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = ROOT / "samples" / "mlp.tvms"


def test_the_compiler_reports_its_stages_in_order():
    seen = []
    clear_cache()
    with progress.listen(lambda stage, done, total: seen.append((stage, done, total))):
        mod = tvms.relax.get_pipeline("zero")(tvms.parse(MLP.read_text()))
        tvms.compile(mod, target="llvm", bounds_check=False)
    stages = [s for s, _, _ in seen]
    firsts = [stages.index(s) for s in ("zero pipeline: LegalizeOps", "zero pipeline: FuseTIR",
                                        "reading transposed operands in place", "scheduling kernels",
                                        "generating code", "the VM's program")]
    assert firsts == sorted(firsts), stages
    assert any(s.startswith("LLVM: optimizing and compiling 2 kernels") for s in stages)
    assert ("scheduling kernels", 1, 2) in seen and ("zero pipeline: FuseOps", 3, 5) in seen
    before = len(seen)
    tvms.compile(mod, target="llvm", bounds_check=False)
    assert len(seen) == before, "no listener after the with block"


def _on_a_terminal(args: list, delay: float) -> str:
    """What `tvms` (with the progress line's delay set to ``delay``) writes to standard error
    on a terminal."""
    script = ("import sys\nfrom tvmscript import cli\nfrom tvmscript.cli.progress import CompileProgress\n"
              f"CompileProgress.DELAY = {delay}\n"
              f"sys.exit(cli.main({args!r}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    env.update(TERM="xterm-256color", COLUMNS="120")
    proc, text = run_on_terminal([sys.executable, "-c", script], env, stream="stderr")
    assert proc.returncode == 0
    return text


def test_a_long_compile_shows_progress_on_a_terminal(tmp_path):
    shown = _on_a_terminal(["run", str(MLP), "--seed", "3"], delay=0.0)
    assert "compiling:" in shown and "\x1b[" in shown, shown[:500]
    quiet = _on_a_terminal(["run", str(MLP), "--seed", "4"], delay=60.0)
    assert "compiling:" not in quiet


def test_piped_output_has_no_progress(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import sys\nfrom tvmscript import cli\n"
                           "from tvmscript.cli.progress import CompileProgress\n"
                           "CompileProgress.DELAY = 0.0\n"
                           f"sys.exit(cli.main(['compile', {str(MLP)!r}, '-o', {str(tmp_path / 'm.so')!r}]))\n"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "compiling:" not in proc.stderr and "\x1b[" not in proc.stderr
