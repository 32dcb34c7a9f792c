"""The CPU kernels' disk cache (compiler/build_cpu.py, tvmscript/cache.py): a second process building
the same kernels loads their machine code instead of compiling; the folder is private, an
entry is used only if whole and built from structurally equal functions with this compiler."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler import build_cache, codegen_llvm
from tvmscript.compiler import build_cpu as cpu

ROOT = pathlib.Path(__file__).resolve().parents[2]

MATMUL = """
@T.prim_func
def mm(A: T.Buffer((64, 48), "float32"), B: T.Buffer((48, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    for i, j, k in T.grid(64, 32, 48):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

ADD_ONE = """
@T.prim_func
def mm(A: T.Buffer((64, 48), "float32"), B: T.Buffer((48, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    for i, j in T.grid(64, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vj, vi] + T.float32(1)
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TVMS_CACHE_DIR", str(folder))
    cpu.clear_cache()
    yield folder / "cpu"
    cpu.clear_cache()


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 48), dtype=np.float32), rng.standard_normal((48, 32), dtype=np.float32)


def _check_matmul(module) -> None:
    a, b = _inputs()
    c = np.empty((64, 32), np.float32)
    module["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def _no_compiling(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the disk cache holds the kernels")

    monkeypatch.setattr(codegen_llvm, "codegen", refuse)
    monkeypatch.setattr(cpu, "_build", refuse)


def test_a_second_build_loads_the_machine_code_without_compiling(cache_dir, monkeypatch):
    first = cpu.build_cpu(tvms.parse(MATMUL))
    assert not first.from_disk_cache and first.object_code[:4] == b"\x7fELF"
    (entry,) = cache_dir.iterdir()
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700
    cpu.clear_cache()  # a new process, as far as the in-memory cache goes
    _no_compiling(monkeypatch)
    again = cpu.build_cpu(tvms.parse(MATMUL))
    assert again.from_disk_cache and again is not first
    _check_matmul(again)
    assert again.object_code == first.object_code
    # the text forms are still there: optimized again from the stored unoptimized IR
    assert "define" in again.get_source("llvm") and again.get_source("llvm-unopt") == first.get_source("llvm-unopt")
    assert "ret" in again.get_source("asm")
    assert [p.name for p in cache_dir.iterdir()] == [entry.name], "a hit writes nothing"


def test_a_damaged_entry_is_built_again(cache_dir):
    cpu.build_cpu(tvms.parse(MATMUL))
    (entry,) = cache_dir.iterdir()
    data = bytearray(entry.read_bytes())
    for position in (20, len(data) // 2, len(data) - 3):
        damaged = bytearray(data)
        damaged[position] ^= 0x40
        entry.write_bytes(bytes(damaged))
        cpu.clear_cache()
        module = cpu.build_cpu(tvms.parse(MATMUL))
        assert not module.from_disk_cache, position
        _check_matmul(module)
    entry.write_bytes(bytes(data[: len(data) // 3]))  # truncated
    cpu.clear_cache()
    assert not cpu.build_cpu(tvms.parse(MATMUL)).from_disk_cache
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]


def test_an_entry_built_from_other_functions_is_not_used(cache_dir):
    """A hash collision (here: one entry copied over another's name) costs a build, never a
    wrong kernel: the entry holds the functions it was built from."""
    cpu.build_cpu(tvms.parse(ADD_ONE))
    (other,) = cache_dir.iterdir()
    cpu.build_cpu(tvms.parse(MATMUL))
    (mine,) = [p for p in cache_dir.iterdir() if p != other]
    mine.write_bytes(other.read_bytes())
    cpu.clear_cache()
    module = cpu.build_cpu(tvms.parse(MATMUL))
    assert not module.from_disk_cache
    _check_matmul(module)


def test_a_folder_others_can_write_to_is_not_used(cache_dir):
    cache_dir.mkdir(parents=True)
    os.chmod(cache_dir, 0o777)
    module = cpu.build_cpu(tvms.parse(MATMUL))
    _check_matmul(module)
    assert list(cache_dir.iterdir()) == []
    from tvmscript import cache as disk_cache

    assert disk_cache.folder("cpu") is None
    os.chmod(cache_dir, 0o700)
    assert disk_cache.folder("cpu") == str(cache_dir)


def test_options_are_part_of_the_key(cache_dir):
    cpu.build_cpu(tvms.parse(MATMUL))
    cpu.build_cpu(tvms.parse(MATMUL), bounds_check=False)
    cpu.build_cpu(tvms.parse(MATMUL), opt_level=1)
    cpu.build_cpu(tvms.parse(MATMUL), use_cache=False)
    assert len(list(cache_dir.iterdir())) == 3


def test_the_fingerprint_follows_the_compiler_sources():
    """An edited compiler never reuses machine code the old one made."""
    path = pathlib.Path(codegen_llvm.__file__)
    before = os.stat(path)
    build_cache.compiler_fingerprint.cache_clear()
    old = build_cache.compiler_fingerprint()
    try:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        build_cache.compiler_fingerprint.cache_clear()
        assert build_cache.compiler_fingerprint() != old
    finally:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        build_cache.compiler_fingerprint.cache_clear()
    assert build_cache.compiler_fingerprint() == old


def test_a_second_process_skips_llvm(cache_dir):
    """Two `tvms.compile` runs of the seed MLP in fresh processes: the second loads every
    kernel from the cache (and counts no codegen call)."""
    script = (
        "import tvmscript as tvms, numpy as np\n"
        "from tvmscript.compiler import codegen_llvm\n"
        "calls = []\n"
        "real = codegen_llvm.codegen\n"
        "codegen_llvm.codegen = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
        f"mod = tvms.parse(open({str(ROOT / 'samples' / 'mlp.tvms')!r}).read())\n"
        "ex = tvms.compile(mod, target='llvm')\n"
        "owner = next(iter(ex.kernels.values()))._owner\n"
        "print(len(calls), owner.from_disk_cache)\n"
    )
    env = dict(os.environ, TVMS_CACHE_DIR=str(cache_dir.parent))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() == ["1", "False"]
    assert runs[1].stdout.split() == ["0", "True"]


def test_symbolic_kernels_come_back_with_their_signature(cache_dir, monkeypatch):
    src = """
@T.prim_func
def scale(a: T.handle, b: T.handle, n: T.int64):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * T.float32(2)
"""
    cpu.build_cpu(tvms.parse(src))
    cpu.clear_cache()
    _no_compiling(monkeypatch)
    kernel = cpu.build_cpu(tvms.parse(src))["scale"]
    a = np.arange(5, dtype=np.float32)
    b = np.empty(5, np.float32)
    kernel(a, b, 5)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises((TypeError, ValueError)):
        kernel(a, np.empty(4, np.float32), 5)
    assert isinstance(tvms.parse(src), tir.PrimFunc)
