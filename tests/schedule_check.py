"""Test helpers for schedules: run a PrimFunc on the CPU before and after scheduling and compare.

`assert_same_result(before, after)` builds both functions (without the CPU default schedule, so
the loops run as written), calls them on the same random inputs and compares every buffer they
may write. A GPU-scheduled function runs too: the CPU backend treats thread bindings as loops.
"""

from __future__ import annotations

import numpy as np

from tvmscript import tir
from tvmscript.ir import IRModule
from tvmscript.runtime.cpu import build_cpu


def _func(f, name: str = "main") -> tir.PrimFunc:
    if isinstance(f, IRModule):
        return f[name]
    return f


def run(func: tir.PrimFunc, args: list) -> list:
    """Call ``func`` in destination-passing style on copies of ``args``; returns the copies."""
    kernel = build_cpu({"f": func}, schedule=False)["f"]
    copies = [a.copy() for a in args]
    kernel(*copies)
    return copies


SYMBOLIC_DIM = 37  # the value given to every symbolic dimension (odd: predicates matter)


def _dim(d) -> int:
    try:
        return int(d)
    except (TypeError, ValueError):
        return SYMBOLIC_DIM


def random_args(func: tir.PrimFunc, seed: int = 0) -> list:
    """One array per buffer parameter, random in [-1, 1) (ints in [0, 10)); symbolic
    dimensions are `SYMBOLIC_DIM`."""
    kernel = build_cpu({"f": func}, schedule=False)["f"]
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.params:
        shape = tuple(_dim(d) for d in p.shape)
        if p.dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, shape).astype(p.dtype))
        elif p.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 10, shape).astype(p.dtype))
    return out


def assert_same_result(before, after, name: str = "main", rtol: float = 1e-5, atol: float = 1e-5, seed: int = 0):
    """``before`` and ``after`` (PrimFuncs or modules holding ``name``) compute the same."""
    f0, f1 = _func(before, name), _func(after, name)
    args = random_args(f0, seed)
    out0, out1 = run(f0, args), run(f1, args)
    for n, (a, b) in enumerate(zip(out0, out1)):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"buffer argument {n} differs")
    return out1
