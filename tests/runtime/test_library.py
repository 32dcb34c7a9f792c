"""Shared libraries (runtime/library.py): ``ex.export_library``, ``tvms.runtime.load_module``,
``tvms compile FILE -o model.so`` and ``tvms run model.so``, checked against NumPy and against
the JIT-compiled executable; loading needs no compiler."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler import build_cpu
from tvmscript.runtime import cpu
from tvmscript.runtime.kernel import BoundsCheckError, KernelAssertionError
from tvmscript.runtime.library import LibraryError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="export_library links with a C compiler, and there is none")

DYNAMIC = """
@I.ir_module
class Module:
    @T.prim_func
    def scale_rows(a: T.handle, s: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, T.int64(600)), "float32")
        S = T.match_buffer(s, (n,), "float32")
        B = T.match_buffer(b, (n, T.int64(600)), "float32")
        for i, j in T.grid(n, T.int64(600)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * S[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 600), "float32"), s: R.Tensor(("n",), "float32")) -> R.Tensor(("n", 600), "float32"):
        n = T.int64()
        cls = Module
        y = R.call_tir(cls.scale_rows, (x, s), out_sinfo=R.Tensor((n, 600), "float32"))
        return y
"""

GATHER = """
@I.ir_module
class Module:
    @T.prim_func
    def gather(a: T.Buffer((8,), "float32"), idx: T.Buffer((4,), "int32"), out: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("out"):
                vi = T.axis.spatial(4, i)
                out[vi] = a[idx[vi]]

    @T.prim_func
    def checked(a: T.Buffer((4,), "float32")):
        assert a[0] > T.float32(0), "a[0] must be positive"
        a[1] = a[0]
"""


def _mlp():
    return tvms.relax.get_pipeline("zero")(tvms.parse((SAMPLES / "mlp.tvms").read_text()))


def _mlp_inputs(mod):
    rng = np.random.default_rng(0)
    return [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32")
            for p in mod["main"].params]


def _mlp_numpy(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def test_exported_mlp_runs_as_the_jit_does(tmp_path):
    mod = _mlp()
    ex = tvms.compile(mod, target="llvm")
    path = ex.export_library(tmp_path / "mlp.so")
    assert pathlib.Path(path).read_bytes()[:4] == b"\x7fELF"
    loaded = tvms.runtime.load_module(path)
    assert sorted(loaded.kernels) == sorted(ex.kernels) and list(loaded.functions) == ["main"]
    inputs = _mlp_inputs(mod)
    got = tvms.relax.VirtualMachine(loaded, tvms.cpu())["main"](*map(tvms.nd.array, inputs)).numpy()
    jit = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"](*map(tvms.nd.array, inputs)).numpy()
    np.testing.assert_array_equal(got, jit)
    np.testing.assert_allclose(got, _mlp_numpy(*inputs), rtol=1e-4, atol=1e-4)
    # misuse is still a clear error: the signature checks came with the program
    with pytest.raises(ValueError, match="argument 'x'"):
        tvms.relax.VirtualMachine(loaded, tvms.cpu())["main"](tvms.nd.array(inputs[0][:, :3]), *inputs[1:])


def test_loading_compiles_nothing(tmp_path, monkeypatch):
    path = tvms.compile(_mlp(), target="llvm").export_library(tmp_path / "mlp.so")
    import llvmlite.binding as llvm

    def refuse(*args, **kwargs):
        raise AssertionError("load_module compiled code")

    monkeypatch.setattr(llvm, "create_mcjit_compiler", refuse)
    monkeypatch.setattr(llvm, "parse_assembly", refuse)
    monkeypatch.setattr(build_cpu, "_build", refuse)
    loaded = tvms.runtime.load_module(path)
    assert loaded.kernels


def test_a_fresh_process_loads_and_runs_the_library(tmp_path):
    mod = _mlp()
    path = tvms.compile(mod, target="llvm").export_library(tmp_path / "mlp.so")
    inputs = _mlp_inputs(mod)
    np.savez(tmp_path / "in.npz", *inputs)
    script = (
        "import sys, numpy as np, tvmscript as tvms\n"
        f"z = np.load({str(tmp_path / 'in.npz')!r})\n"
        f"vm = tvms.relax.VirtualMachine(tvms.runtime.load_module({str(path)!r}), tvms.cpu())\n"
        "out = vm['main'](*[tvms.nd.array(z[f'arr_{i}']) for i in range(5)]).numpy()\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, out)\n"
        "print(sorted(m for m in sys.modules if m.startswith('tvmscript.parser')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", "loading a library needs no parser"
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), _mlp_numpy(*inputs), rtol=1e-4, atol=1e-4)


def test_symbolic_shapes_and_parallel_loops_survive_export(tmp_path):
    ex = tvms.compile(tvms.parse(DYNAMIC), target="llvm")
    loaded = tvms.runtime.load_module(ex.export_library(tmp_path / "dyn.so"))
    f = tvms.relax.VirtualMachine(loaded, tvms.cpu())["main"]
    rng = np.random.default_rng(1)
    for n in (3, 4000):  # 4000 x 600 is enough work for the parallel loop to start threads
        x = rng.standard_normal((n, 600), dtype=np.float32)
        s = rng.standard_normal(n, dtype=np.float32)
        np.testing.assert_allclose(f(tvms.nd.array(x), tvms.nd.array(s)).numpy(), x * s[:, None] + 1, rtol=1e-6, atol=1e-6)
    assert "GOMP_parallel" in subprocess.run(["nm", "-D", str(tmp_path / "dyn.so")], capture_output=True,
                                             text=True).stdout or cpu.parallel_runtime() != "gomp"


def test_failed_checks_in_a_library_raise_python_errors(tmp_path):
    """The kernels' check callbacks reach Python through the library's forwarding functions."""
    loaded = tvms.runtime.load_module(tvms.compile(tvms.parse(GATHER), target="llvm").export_library(
        tmp_path / "g.so"))
    a = np.arange(8, dtype=np.float32)
    out = np.empty(4, np.float32)
    loaded["gather"](a, np.array([7, 0, 3, 1], np.int32), out)
    np.testing.assert_array_equal(out, [7, 0, 3, 1])
    with pytest.raises(BoundsCheckError, match="idx"):
        loaded["gather"](a, np.array([0, 8, 1, 2], np.int32), out)
    with pytest.raises(KernelAssertionError, match="must be positive"):
        loaded["checked"](np.array([-1, 0, 0, 0], np.float32))


def test_what_is_not_a_tvms_library_is_refused(tmp_path):
    text = tmp_path / "notes.so"
    text.write_text("not a library")
    with pytest.raises(LibraryError, match="cannot load"):
        tvms.runtime.load_module(text)
    other = tmp_path / "other.so"
    src = tmp_path / "other.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-o", str(other), str(src)], check=True)
    with pytest.raises(LibraryError, match="not one tvms wrote"):
        tvms.runtime.load_module(other)
    with pytest.raises(LibraryError, match="no such file"):
        tvms.runtime.load_module(tmp_path / "missing.so")


def test_a_library_for_a_cpu_with_more_features_is_refused(tmp_path, monkeypatch):
    from tvmscript.runtime import host_cpu, library

    path = tvms.compile(_mlp(), target="llvm").export_library(tmp_path / "mlp.so")
    host = host_cpu.host_target()
    lesser = host_cpu.HostTarget(host.triple, "generic", ",".join(
        f for f in host.features.split(",") if f not in ("+avx2", "+sse2")))
    monkeypatch.setattr(host_cpu, "host_target", lambda: lesser)
    with pytest.raises(LibraryError, match=r"\+(avx2|sse2)"):
        library.load_module(path)


def test_export_needs_a_cpu_executable_and_a_compiler(tmp_path, monkeypatch):
    ex = tvms.compile(_mlp(), target="llvm")
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(LibraryError, match="no-such-compiler-xyz"):
        ex.export_library(tmp_path / "x.so")
    assert not (tmp_path / "x.so").exists()
    monkeypatch.delenv("CC")
    cuda_ex = tvms.compile(_mlp(), target="cuda -arch=sm_80")
    with pytest.raises(LibraryError, match="CPU"):
        cuda_ex.export_library(tmp_path / "x.so")


# ----------------------------------------------------------------------------- the command line


def _tvms(*args, cwd=None):
    proc = subprocess.run([shutil.which("tvms"), *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=cwd)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


@pytest.mark.skipif(shutil.which("tvms") is None, reason="the tvms entry point is not installed")
def test_compile_to_a_library_and_run_it(tmp_path):
    lib = tmp_path / "model.so"
    proc = _tvms("compile", SAMPLES / "mlp.tvms", "-o", lib)
    assert proc.returncode == 0 and "wrote" in proc.stderr and lib.read_bytes()[:4] == b"\x7fELF"
    from_source = _tvms("run", SAMPLES / "mlp.tvms", "--out", tmp_path / "a.npz")
    from_library = _tvms("run", lib, "--out", tmp_path / "b.npz")
    assert from_source.returncode == 0 and from_library.returncode == 0, from_library.stderr
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    bad = _tvms("run", lib, "--input", f"x={tmp_path / 'nothing.npy'}")
    assert bad.returncode == 1 and "error" in bad.stderr


@pytest.mark.skipif(shutil.which("tvms") is None, reason="the tvms entry point is not installed")
def test_command_line_library_errors(tmp_path):
    assert "-o FILE.so" in _tvms("compile", SAMPLES / "mlp.tvms", "--emit", "library").stderr
    other = tmp_path / "other.so"
    src = tmp_path / "other.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-o", str(other), str(src)], check=True)
    proc = _tvms("run", other)
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "not one tvms wrote" in proc.stderr
    assert "error: error" not in proc.stderr
