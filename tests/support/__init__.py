"""Helpers the tests share that are not tests themselves: the per-op harness (`op_check`), the
CUDA emulator and the stand-in GPU drivers, the schedule goldens and their checks, the fuzzers'
program generators, the PyTorch models, running a command on a terminal.

A package beside the test folders (``pyproject.toml`` puts ``tests/`` on the path), so that a
test in any folder imports ``from support.op_check import check_op``, and pytest never collects
these modules as tests.
"""
