"""Shared test configuration.

Hypothesis runs derandomized by default (profile ``ci``): the same examples on every run, no
example database, so CI is deterministic. ``HYPOTHESIS_PROFILE=explore`` draws fresh random
examples, many more of them, to hunt for new bugs by hand.

``--op-gpu emulated|real|none`` picks the GPU the per-op tests (op_check.py) run on.

Tests marked ``@pytest.mark.cuda`` need an NVIDIA GPU and pycuda; where there is none they are
skipped with the reason (``runtime.cuda.unavailable_reason``), so ``pytest -m cuda`` on a GPU
machine runs them all.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "explore",
    derandomize=False,
    deadline=None,
    max_examples=2000,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Compiled kernels and parser tables go to a cache folder of this test session (inherited by
# the `tvms` processes tests start), not the user's: a test never reads what an earlier run
# or another checkout left there.
if not os.environ.get("TVMS_CACHE_DIR"):
    os.environ["TVMS_CACHE_DIR"] = tempfile.mkdtemp(prefix="tvms-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TVMS_CACHE_DIR"], True)


def pytest_addoption(parser):
    parser.addoption("--op-gpu", choices=("emulated", "real", "none"), default="emulated",
                     help="the GPU op_check.check_op runs each op on after the CPU: the CUDA emulator "
                          "(default), a real GPU through pycuda, or none (NVRTC compiles only)")


def pytest_configure(config):
    from support import op_check

    op_check.op_gpu = config.getoption("--op-gpu")


def pytest_collection_modifyitems(config, items):
    cuda_tests = [item for item in items if item.get_closest_marker("cuda") is not None]
    if not cuda_tests:
        return
    from tvmscript.runtime.cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
        for item in cuda_tests:
            item.add_marker(skip)
