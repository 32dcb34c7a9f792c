"""The default CPU schedule sizes its tiles for the CPU being compiled for, not the machine
compiling: ``llvm -mcpu=haswell`` gets 8-lane float vectors and register tiles within 16 AVX2
registers on any x86-64 machine, and an AVX-512 host gets 16 lanes and up to 32 registers.

Kernels for a named CPU other than this one are checked as code (scheduled TIR, LLVM IR,
assembly): tvms refuses to run them here. The same tiling is run here through
``-mattr=-avx512f``, this CPU without AVX-512, and checked against NumPy."""

from __future__ import annotations

import platform
import re

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.llvm_target import VectorUnit, cpu_target, vector_unit
from tvmscript.compiler.schedule_cpu import default_schedule, scheduling_for, target_cpu, vector_bytes
from tvmscript.relax import op
from tvmscript.runtime.host_cpu import host_target
from tvmscript.target import Target

from support import schedule_corpus as sc

x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 CPUs")
avx512_host = pytest.mark.skipif(vector_unit(host_target()).bytes != 64, reason="a host with AVX-512")

RNG = np.random.default_rng(27)
N = tir.Var("int64", "n")

MATMUL = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for i, j, r in T.grid({m}, {n}, {k}):
        with T.block("C"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]
'''


def _matmul(m: int, k: int, n: int) -> tir.PrimFunc:
    return tvms.parse(MATMUL.format(m=m, k=k, n=n))


def _conv2d() -> tir.PrimFunc:
    return sc.zero_kernel(lambda x, w: [op.nn.relu(op.nn.conv2d(x, w, padding=[1] * 4))],
                          [((1, 32, 14, 14), "float32"), ((64, 32, 3, 3), "float32")])


def _symbolic_dense() -> tir.PrimFunc:
    return sc.zero_kernel(lambda x, w, b: [op.add(op.nn.dense(x, w), b)],
                          [((1, N, 64), "float32"), ((48, 64), "float32"), ((48,), "float32")], "dense")


KERNELS = {
    "matmul_even": lambda: _matmul(96, 64, 96),
    "matmul_odd": lambda: _matmul(97, 61, 96),  # odd rows and reduction
    "conv2d": _conv2d,
    "dense_n": _symbolic_dense,
}


def _scheduled(func: tir.PrimFunc, target: str) -> str:
    with scheduling_for(cpu_target(Target(target))):
        return default_schedule(func).script()


def _vector_widths(script: str) -> set:
    """The widths loops are vectorized at (1, a loop kept scalar, left out)."""
    return {int(w) for w in re.findall(r'"tvms.vectorize_width": (\d+)', script)} - {1}


def _accumulator_registers(script: str, lanes: int) -> list:
    """Vector registers each register tile's accumulators take (float32, ``lanes`` per register)."""
    script = re.sub(r"T\.int64\((\d+)\)", r"\1", script)
    shapes = re.findall(r'T\.alloc_buffer\(\(([\d, ]*)\), scope="local"\)', script)
    return [int(np.prod([int(d) for d in shape.split(",") if d.strip()])) // lanes for shape in shapes]


def _ir_vector_widths(llvm_ir: str) -> set:
    """The widths the generated LLVM IR's loop metadata asks the vectorizer for (above 1)."""
    return {int(w) for w in re.findall(r'"llvm\.loop\.vectorize\.width", i32 (\d+)', llvm_ir)} - {1}


def _arrays(func: tir.PrimFunc, n: int = 37) -> list:
    shapes = [[n if isinstance(d, tir.Var) else int(d.value) for d in func.buffer_map[p].shape] for p in func.params]
    return [RNG.standard_normal(s).astype("float32") for s in shapes]


def _reference(name: str, arrays: list) -> np.ndarray:
    if name.startswith("matmul"):
        return arrays[0] @ arrays[1]
    if name == "dense_n":
        return arrays[0] @ arrays[1].T + arrays[2]
    x, w = arrays[:2]
    out = np.zeros((1, 64, 14, 14), "float64")
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype("float64")
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("ncyx,fc->nfyx", padded[:, :, dy:dy + 14, dx:dx + 14], w[:, :, dy, dx])
    return np.maximum(out, 0)


@x86_only
@pytest.mark.parametrize("target,unit", [
    ("llvm -mcpu=haswell", VectorUnit(32, 16)),
    ("llvm -mcpu=sandybridge", VectorUnit(32, 16)),  # AVX without AVX2: float vectors are 32 bytes
    ("llvm -mcpu=skylake-avx512", VectorUnit(64, 32)),
    ("llvm -mcpu=x86-64", VectorUnit(16, 16)),
    ("llvm -mcpu=skylake-avx512 -mattr=-avx", VectorUnit(16, 16)),  # -avx takes AVX2 and AVX-512 with it
])
def test_llvm_says_the_vector_registers_of_a_named_cpu(target, unit):
    assert vector_unit(cpu_target(Target(target))) == unit


@x86_only
def test_outside_a_build_the_schedule_is_for_this_machine():
    haswell = cpu_target(Target("llvm -mcpu=haswell"))
    assert target_cpu() == host_target() and vector_bytes() == vector_unit(host_target()).bytes
    with scheduling_for(haswell):
        assert target_cpu() == haswell and vector_bytes() == 32
    assert target_cpu() == host_target()


@x86_only
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_haswell_tiles_are_8_lanes_within_16_registers(name):
    script = _scheduled(KERNELS[name](), "llvm -mcpu=haswell")
    assert _vector_widths(script) == {8}
    registers = _accumulator_registers(script, 8)
    assert registers and max(registers) <= 16


@avx512_host
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_an_avx512_host_tiles_16_lanes_within_32_registers(name):
    script = _scheduled(KERNELS[name](), "llvm")
    assert _vector_widths(script) == {16}
    registers = _accumulator_registers(script, 16)
    assert registers and max(registers) <= 32


@x86_only
def test_a_haswell_build_is_scheduled_for_haswell_and_uses_no_zmm():
    """Through `build_cpu`, on any x86-64 host: the generated IR's loops ask LLVM for 8-lane
    vectors, none for 16, and the assembly has no AVX-512 register."""
    func = _matmul(96, 64, 96)
    haswell = build_cpu({"main": func}, target=cpu_target(Target("llvm -mcpu=haswell")), use_cache=False)
    unopt, asm = haswell.get_source("llvm-unopt"), haswell.get_source("asm")
    assert _ir_vector_widths(unopt) == {8}
    assert "%ymm" in asm and "%zmm" not in asm


@avx512_host
def test_host_and_haswell_builds_do_not_share_a_cache_entry():
    func = _matmul(64, 64, 64)
    host = build_cpu({"main": func})
    haswell = build_cpu({"main": func}, target=cpu_target(Target("llvm -mcpu=haswell")))
    assert host is not build_cpu({"main": func}, target=cpu_target(Target("llvm -mattr=-avx512f")))
    assert "%zmm" in host.get_source("asm") and "%zmm" not in haswell.get_source("asm")


@avx512_host
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("target", ["llvm", "llvm -mattr=-avx512f"])
def test_host_and_avx2_tiles_run_here_and_match_numpy(name, target):
    func = KERNELS[name]()
    module = build_cpu({"main": func}, target=cpu_target(Target(target)), use_cache=False)
    assert _ir_vector_widths(module.get_source("llvm-unopt")) == {{"llvm": 16, "llvm -mattr=-avx512f": 8}[target]}
    arrays = _arrays(func)
    out = np.full_like(arrays[-1], np.nan)
    module["main"](*arrays[:-1], out)
    np.testing.assert_allclose(out, _reference(name, arrays[:-1]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu, registers", [("haswell", 16), ("skylake-avx512", 32)])
def test_tile_shapes_keep_operands_in_registers(cpu, registers):
    """A register tile's accumulators, the row's operand vectors and a broadcast fit the
    target's vector registers: with AVX2's 16, a 3 x 4-vector tile (17) would spill."""
    from tvmscript.compiler.schedule_cpu.register_tile import _pick_tile_shape

    with scheduling_for(cpu_target(Target(f"llvm -mcpu={cpu}"))):
        for nvecs, rows, shift_rows in [(64, 1024, False), (64, 1024, True), (48, 197, True), (8, 7, False)]:
            nv, mr = _pick_tile_shape(nvecs, rows, shift_rows)
            assert nv * mr + nv + 1 <= registers, (nvecs, rows, nv, mr)
            assert nv * mr >= 6, (nvecs, rows, nv, mr)
