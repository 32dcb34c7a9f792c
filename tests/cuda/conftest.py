"""The GPU the tests of this folder run on (`gpu`): emulated everywhere, real under ``-m cuda``."""

from __future__ import annotations

import pytest

from support.gpu_drivers import EmulatedDriver, install_driver


@pytest.fixture(params=["emulated", pytest.param("real", marks=pytest.mark.cuda)])
def gpu(request, monkeypatch):
    """GPU 0, emulated (pycuda's driver is `gpu_drivers.EmulatedDriver`: the CUDA C NVRTC
    compiled runs in the CUDA emulator, launched by the real runtime and VM) or real (on GPU 0
    through pycuda, skipped with the reason where there is none): the driver in use."""
    import tvmscript.runtime.cuda as cuda_rt

    if request.param == "emulated":
        install_driver(monkeypatch, EmulatedDriver())
    return cuda_rt._driver()
