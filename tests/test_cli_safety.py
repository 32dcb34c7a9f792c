"""The CLI never silently does nothing with an output argument (issue 12): an empty file name
for --out / -o is a usage error (exit 2), not a run that saves nothing."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
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
