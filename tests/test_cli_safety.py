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
