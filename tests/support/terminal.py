"""Running a command with one of its output streams on a pseudo-terminal, as a user's shell
runs it (helper module of the tests that check colours and progress lines)."""

from __future__ import annotations

import os
import subprocess

import pytest


def run_on_terminal(cmd: list, env: dict | None = None, stream: str = "stdout", timeout: float = 120):
    """Run ``cmd`` with ``stream`` ("stdout" or "stderr") on a pty and the other one piped;
    returns (the finished process, what it wrote to the terminal). ``env`` replaces the
    environment (default: this one)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    ends = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: slave}
    try:
        proc = subprocess.run([str(c) for c in cmd], stdout=ends["stdout"], stderr=ends["stderr"],
                              env=dict(os.environ) if env is None else env, timeout=timeout)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other end is closed and everything was read
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc, b"".join(chunks).decode("utf-8", "replace")
