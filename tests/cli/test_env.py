"""``tvms env`` (tvmscript/cli/env.py): the report a bug needs, through the real entry point,
and what it says is missing where a part of CUDA is."""

from __future__ import annotations

import json
from importlib import metadata

import pytest
from support.cli import TVMS, tvms

from tvmscript.cli import env, main
from tvmscript.runtime import cuda
from tvmscript.version import __version__

SECTIONS = ["tvms", "libraries", "CPU", "CUDA", "extras", "targets"]


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_the_report_names_the_versions():
    proc = tvms("env")
    assert proc.returncode == 0, proc.err
    headers = [line[:-1] for line in proc.out.splitlines() if line and not line.startswith(" ")]
    assert headers == SECTIONS
    assert f"version       {__version__}" in proc.out
    assert f"llvmlite  {metadata.version('llvmlite')}" in proc.out
    assert "llvm (CPU)       ready" in proc.out


@pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")
def test_the_json_report_has_every_section():
    proc = tvms("env", "--json")
    assert proc.returncode == 0, proc.err
    report = json.loads(proc.out)
    assert list(report) == SECTIONS
    assert report["libraries"]["numpy"] == metadata.version("numpy")
    assert report["CPU"]["vector unit"].endswith("registers")
    reason = cuda.unavailable_reason()
    assert report["targets"]["cuda, running"] == ("ready" if reason is None else f"not here: {reason}")


def test_what_is_missing_says_how_to_install_it(monkeypatch, capsys):
    def no_nvrtc():
        raise OSError("libnvrtc.so.13: cannot open shared object file")

    monkeypatch.setattr("tvmscript.compiler.nvrtc.nvrtc_version", no_nvrtc)
    monkeypatch.setattr(cuda, "_driver_or_reason", lambda: (None, cuda.PYCUDA_MISSING))
    monkeypatch.setattr(env, "_version_of", lambda name: None if name in ("torch", "pycuda") else "1.0")
    assert main(["env"]) == 0                       # a missing piece is part of the report, not an error
    out = capsys.readouterr().out
    assert "NVRTC   missing: libnvrtc.so.13: cannot open shared object file (pip install 'tvms[cuda]')" in out
    assert "cuda, compiling  missing NVRTC" in out
    assert f"cuda, running    not here: {cuda.PYCUDA_MISSING}" in out
    assert "torch              not installed (pip install 'tvms[torch]')" in out
