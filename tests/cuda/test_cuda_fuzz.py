"""Differential fuzzing of the GPU backend against the CPU backend (tests/support/gpu_fuzz.py).

Random well-typed Relax programs (elementwise chains, broadcasts, reductions, transposes,
casts; float32, float16, int32; static and symbolic shapes) are legalized, scheduled by
DLight, printed as CUDA C and run on the CUDA emulator, and compared with the CPU backend on
the same random inputs (`cuda_emulator.compare_with_cpu`). A batch of programs is one seed:
its kernels are one translation unit, compiled once for the emulator and once by LLVM, which is
what makes hundreds of programs affordable in CI: `BATCHES` x `PROGRAMS` (500) here, and eight
times as many with ``HYPOTHESIS_PROFILE=explore``. A failure names the seed and the program
(its ops) to reproduce it; every disagreement found becomes a regression test below the
batches. Under ``pytest -m cuda`` the first batch's programs also run on a real GPU through
the VM.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tvmscript as tvms

from support.cuda_emulator import compare_with_cpu
from support.gpu_fuzz import kernels, program_of, random_program

PROGRAMS = 100    # per batch (one seed)
BATCHES = 40 if os.environ.get("HYPOTHESIS_PROFILE") == "explore" else 5
SIZES = (1, 5, 17, 33, 64)   # the symbolic dimension's value, by batch


def batch(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [random_program(rng, f"s{seed}p{i}") for i in range(PROGRAMS)]


@pytest.mark.parametrize("seed", range(BATCHES))
def test_gpu_and_cpu_agree_on_random_programs(seed):
    programs = batch(seed)
    found = compare_with_cpu(kernels(programs), sym_values={"n": SIZES[seed % len(SIZES)]}, seed=seed,
                             rtol=1e-2, atol=1e-2)
    bad = [f"{program_of(name, programs)} kernel {name}: {r.error or r.mismatches}"
           for name, r in found.items() if not r.ok]
    assert not bad, f"seed {seed}: {len(bad)} of {len(found)} kernels disagree:\n" + "\n".join(bad[:5])


@pytest.mark.cuda
def test_the_first_batch_runs_on_a_real_gpu_as_on_the_cpu():
    rng = np.random.default_rng(1234)
    for prog in batch(0)[:25]:
        mod = tvms.relax.transform.LegalizeOps()(prog.mod)
        args = []
        for shape, dtype in prog.inputs:
            shape = [SIZES[1] if d == "n" else d for d in shape]
            value = rng.integers(-8, 8, shape) if dtype == "int32" else rng.standard_normal(shape)
            args.append(np.asarray(value, dtype))
        cpu = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())[prog.name](*args)
        vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), tvms.cuda())
        gpu = vm[prog.name](*[tvms.nd.array(a, tvms.cuda()) for a in args])
        np.testing.assert_allclose(gpu.numpy().astype("float64"), cpu.numpy().astype("float64"), rtol=1e-2,
                                   atol=1e-2, err_msg=repr(prog))
