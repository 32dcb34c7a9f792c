"""The ``tvms`` command as a user runs it, for the tests of the command line and the CUDA tests
that drive it: `tvms` runs the installed entry point and fails the test on any Python traceback,
`ok` also requires success and plain (piped) output, `load_npz` reads what ``--out`` wrote.

`UNPARSEABLE` and `WRONG_SHAPES` name the samples the command refuses, each with a diagnostic
tests/cli/test_cli.py checks; the tests that run every sample skip them.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

TVMS = shutil.which("tvms")

UNPARSEABLE = {"fx_module", "fx_mlp_module", "fx_mlp_highlevel", "two_dataflow_blocks_fn"}
# Seed 004's hand-written program passes a (1, 128) tensor as linear1's (10, 128) weight: tvms
# check reports it, as tvms run does (test_vm.py has the fixed program).
WRONG_SHAPES = {"two_dataflow_blocks"}


def tvms(*args, input: bytes | str | None = None, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """Run ``tvms ARGS``; never a traceback, whatever happens."""
    if isinstance(input, str):
        input = input.encode()
    full_env = dict(os.environ)
    full_env.pop("NO_COLOR", None)
    full_env.pop("TVMS_DEBUG", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [TVMS, *map(str, args)], input=input, capture_output=True, env=full_env, cwd=cwd, timeout=120,
    )
    proc.out = proc.stdout.decode("utf-8", "replace")
    proc.err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in proc.out + proc.err, proc.out + proc.err
    return proc


def ok(*args, cwd=None) -> subprocess.CompletedProcess:
    proc = tvms(*args, cwd=cwd)
    assert proc.returncode == 0, proc.err
    assert "\x1b[" not in proc.out + proc.err  # piped: plain text
    return proc


def load_npz(path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}
