"""``tvms run`` and ``tvms compile``, through the installed ``tvms`` entry point, checked against
NumPy. Every error exits 1 with a message naming or locating the problem, never a traceback."""

from __future__ import annotations

import os
import pathlib
import platform
import re

import numpy as np
import pytest
from support.cli import TVMS, load_npz, ok, tvms
from support.conv_bn import conv_bn_program, conv_bn_weights
from support.terminal import run_on_terminal

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
pytestmark = pytest.mark.skipif(TVMS is None, reason="the tvms entry point is not installed")


# A dynamic-shape module: n is bound by x, or by --shape n=... when x is made up.
DYN = '''\
@I.ir_module
class Module:
    @T.prim_func
    def scale_add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (4,), "float32")
        C = T.match_buffer(c, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + B[vj]

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor((4,), "float32")):
        n = T.int64()
        cls = Module
        with R.dataflow():
            z = R.call_tir(cls.scale_add, (x, y), out_sinfo=R.Tensor((n, 4), "float32"))
            R.output(z)
        return (z, x)
'''

BROKEN = '''\
@R.function
def main(x: R.Tensor((1, 10), "float32")):
    lv = R.nn.relu(lv9)
    return lv
'''


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> dict:
    """Inputs of samples/e2e_mlp.tvms in files, and NumPy's answer."""
    d = tmp_path_factory.mktemp("mlp")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 784)).astype("float32")
    w0 = (rng.standard_normal((128, 784)) * 0.05).astype("float32")
    b0 = rng.standard_normal(128).astype("float32")
    w1 = (rng.standard_normal((10, 128)) * 0.1).astype("float32")
    b1 = rng.standard_normal(10).astype("float32")
    np.savez(d / "inputs.npz", x=x, w0=w0, b0=b0, w1=w1, b1=b1)
    np.save(d / "img.npy", x)
    np.savez(d / "weights.npz", x=np.zeros_like(x), w0=w0, b0=b0, w1=w1, b1=b1)  # x: overridden by --input
    np.savez(d / "extra.npz", x=x, bias=b0)
    np.savez(d / "x64.npz", x=x.astype("float64"))
    np.save(d / "wide.npy", np.zeros((2, 784), "float32"))
    (d / "junk.npz").write_text("not an archive")
    expected = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    return {"dir": d, "expected": expected}


@pytest.fixture(scope="module")
def dyn(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("dyn") / "dyn.tvms"
    path.write_text(DYN)
    rng = np.random.default_rng(3)
    np.save(path.parent / "x7.npy", rng.standard_normal((7, 4)).astype("float32"))
    np.save(path.parent / "x5.npy", rng.standard_normal((5, 4)).astype("float32"))
    np.save(path.parent / "y.npy", rng.standard_normal(4).astype("float32"))
    return path


# ----------------------------------------------------------------------------- run


def test_run_with_inputs_npz(mlp):
    d = mlp["dir"]
    proc = ok("run", SAMPLES / "e2e_mlp.tvms", "--inputs", d / "inputs.npz", "--out", d / "r1.npz")
    out = load_npz(d / "r1.npz")
    assert list(out) == ["output"]
    np.testing.assert_allclose(out["output"], mlp["expected"], rtol=1e-4, atol=1e-4)
    lines = proc.out.splitlines()
    assert lines[0].split() == ["output", "shape", "dtype", "values"]
    assert lines[1].startswith("output") and "(1, 10)" in lines[1] and "float32" in lines[1]
    assert f"{mlp['expected'][0, 0]:.3f}"[:5] in lines[1]  # a view of the values
    assert lines[2].startswith("compile: ") and lines[2].endswith(" ms")
    assert lines[3].startswith("run: median ") and "over 1 run " in lines[3]
    assert "random" not in proc.err
    assert not [p for p in d.iterdir() if p.name.startswith(".tvms-")]  # written through a temp file


# Issue 25's report: `tvms run` of this module died inside LLVM's SLP vectorizer (exit 134,
# an assertion; `codegen_llvm.avoid_llvm_aborts`).
RESIZE_ALIGN_CORNERS = """\
from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 6), dtype="float32")) -> R.Tensor((1, 2, 6, 3), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 2, 6, 3), dtype="float32") = R.image.resize2d(x, R.shape([6, 3]), layout="NCHW", \
method="linear", coordinate_transformation_mode="align_corners")
            R.output(lv)
        return lv
"""


def test_run_resize_that_aborted_llvm_matches_numpy(tmp_path):
    from support.resize_reference import np_resize_linear

    path = tmp_path / "resize.tvms"
    path.write_text(RESIZE_ALIGN_CORNERS)
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 6)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    ok("run", path, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz")
    np.testing.assert_allclose(load_npz(tmp_path / "out.npz")["output"], np_resize_linear(x, [6, 3], "align_corners"),
                               rtol=1e-5, atol=1e-5)


def test_run_mixing_input_and_params_with_repeat(mlp):
    d = mlp["dir"]
    proc = ok("run", SAMPLES / "e2e_mlp.tvms", "--input", f"x={d / 'img.npy'}", "--params", d / "weights.npz",
              "--out", d / "r2.npz", "--repeat", "7")
    np.testing.assert_allclose(load_npz(d / "r2.npz")["output"], mlp["expected"], rtol=1e-4, atol=1e-4)
    assert "run: median " in proc.out and " ms over 7 runs (min " in proc.out
    assert proc.err == ""


def test_random_inputs_are_announced_and_reproducible(tmp_path):
    sample = SAMPLES / "e2e_mlp.tvms"
    first = ok("run", sample, "--seed", "3", "--out", tmp_path / "a.npz")
    assert "random inputs for x, w0, b0, w1, b1 (seed 3)" in first.err
    ok("run", sample, "--seed", "3", "--out", tmp_path / "b.npz")
    ok("run", sample, "--seed", "4", "--out", tmp_path / "c.npz")
    a, b, c = (load_npz(tmp_path / f"{k}.npz")["output"] for k in "abc")
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_run_dynamic_shape_from_shape_flag(dyn):
    out = dyn.parent / "s.npz"
    proc = ok("run", dyn, "--shape", "n=5", "--input", f"y={dyn.parent / 'y.npy'}", "--out", out)
    assert "random inputs for x (seed 0)" in proc.err
    result = load_npz(out)
    assert sorted(result) == ["output_0", "output_1"]  # the tuple (z, x)
    x, y = result["output_1"], np.load(dyn.parent / "y.npy")
    assert x.shape == (5, 4)
    np.testing.assert_allclose(result["output_0"], x * 2 + y, rtol=1e-6)
    assert "output_0" in proc.out and "(5, 4)" in proc.out and "output_1" in proc.out


def test_run_dynamic_shape_bound_by_an_input(dyn):
    out = dyn.parent / "b.npz"
    ok("run", dyn, "--input", f"x={dyn.parent / 'x7.npy'}", "--input", f"y={dyn.parent / 'y.npy'}", "--out", out)
    x, y = np.load(dyn.parent / "x7.npy"), np.load(dyn.parent / "y.npy")
    np.testing.assert_allclose(load_npz(out)["output_0"], x * 2 + y, rtol=1e-6)


def test_run_lowered_samples(tmp_path):
    """Seed 000's zero-pipeline output (the README's first command) against NumPy, and its
    LegalizeOps output against it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype("float32")
    w1 = (rng.standard_normal((256, 784)) * 0.05).astype("float32")
    b1 = rng.standard_normal(256).astype("float32")
    w2 = (rng.standard_normal((10, 256)) * 0.05).astype("float32")
    b2 = rng.standard_normal(10).astype("float32")
    np.savez(tmp_path / "in.npz", x=x, p_fc1_weight=w1, p_fc1_bias=b1, p_fc2_weight=w2, p_fc2_bias=b2)
    ok("run", SAMPLES / "mlp_zero.tvms", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "zero.npz")
    expected = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(load_npz(tmp_path / "zero.npz")["output"], expected, rtol=1e-4, atol=1e-4)
    proc = ok("run", SAMPLES / "mlp_legalized.tvms", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "leg.npz")
    assert "(1, 10)" in proc.out
    np.testing.assert_allclose(load_npz(tmp_path / "leg.npz")["output"], expected, rtol=1e-4, atol=1e-4)
    proc = ok("run", SAMPLES / "mlp_zero.tvms")  # the README's quick start
    assert "random inputs for x, p_fc1_weight, p_fc1_bias, p_fc2_weight, p_fc2_bias (seed 0)" in proc.err


def test_run_a_lone_prim_func(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype("float32")
    b = rng.standard_normal((128, 128)).astype("float32")
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    proc = ok("run", SAMPLES / "te_matmul.tvms", "--input", f"A={tmp_path / 'a.npy'}",
              "--input", f"B={tmp_path / 'b.npy'}", "--out", tmp_path / "m.npz", "--repeat", "3")
    assert "zero-filled outputs matmul" in proc.err
    out = load_npz(tmp_path / "m.npz")
    assert list(out) == ["matmul"]  # the buffers the kernel writes, by parameter name
    np.testing.assert_allclose(out["matmul"], a @ b, rtol=1e-4, atol=1e-3)
    proc = ok("run", SAMPLES / "te_relu_1d.tvms")
    assert "random inputs for" in proc.err


def test_run_one_prim_func_of_a_module(mlp):
    proc = ok("run", SAMPLES / "e2e_mlp.tvms", "--func", "relu0", "--seed", "1", "--out", mlp["dir"] / "relu.npz")
    assert "random inputs for X (seed 1)" in proc.err
    y = load_npz(mlp["dir"] / "relu.npz")["Y"]
    assert y.shape == (1, 128) and (y >= 0).all() and (y > 0).any()


def _error(args, *expected, cwd=None):
    proc = tvms(*args, cwd=cwd)
    assert proc.returncode == 1, (proc.out, proc.err)
    assert "error:" in proc.err
    for text in expected:
        assert text in proc.err, proc.err
    return proc


def test_run_input_errors(mlp):
    d = mlp["dir"]
    sample = SAMPLES / "e2e_mlp.tvms"
    _error(["run", sample, "--inputs", d / "extra.npz"],
           "extra.npz has an array 'bias', but main() has no parameter named 'bias' "
           "(its parameters: x, w0, b0, w1, b1)")
    _error(["run", sample, "--input", f"y={d / 'img.npy'}"], "no parameter named 'y'")
    _error(["run", sample, "--inputs", d / "junk.npz"], "junk.npz is not a NumPy .npz archive")
    _error(["run", sample, "--inputs", d / "missing.npz"], "no such file: ")
    _error(["run", sample, "--input", "x"], "--input expects NAME=FILE.npy")
    _error(["run", sample, "--params", d / "img.npy"], "is not a NumPy .npz archive (it is a .npy file")
    _error(["run", sample, "--func", "nope"], "no function named 'nope' (the module has: relu0, linear0, linear1, main, fused_linear0_relu0)")
    _error(["run", sample, "--shape", "n=8"], "main() has no symbolic dimension 'n'")
    _error(["run", sample, "--target", "rocm"], "target 'rocm' is not supported yet")
    _error(["run", d / "missing.tvms"], "no such file: ")


def test_run_errors_from_the_vm(mlp):
    d = mlp["dir"]
    sample = SAMPLES / "e2e_mlp.tvms"
    _error(["run", sample, "--inputs", d / "x64.npz"],
           "main() argument 'x': expected dtype float32, got float64", "x was read from")
    _error(["run", sample, "--input", f"x={d / 'wide.npy'}"], "main() argument 'x': dimension 0 is 2, expected 1")


def test_run_symbolic_dimension_errors(dyn):
    proc = _error(["run", dyn], "main() needs a value for 'n'", "--shape n=VALUE", "--input x=FILE.npy")
    assert "R.Tensor((n, 4)" in proc.err
    _error(["run", dyn, "--shape", "n=8", "--input", f"x={dyn.parent / 'x5.npy'}"],
           "has n = 5 (dimension 0), but --shape n=8")
    _error(["run", dyn, "--shape", "m=8"], "no symbolic dimension 'm' (it has: n)")
    _error(["run", dyn, "--shape", "n"], "--shape expects SYM=N")


SCALE = '''\
@T.prim_func
def scale(a: T.handle, b: T.handle, alpha: T.float32):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * alpha
'''


def test_run_shape_names_what_the_function_has(dyn, tmp_path):
    scale = tmp_path / "scale.tvms"
    scale.write_text(SCALE)
    _error(["run", scale, "--shape", "n=4,k=2"],
           "--shape k=2: scale() has no symbolic dimension or scalar parameter 'k' (it has: n, alpha)")
    ok("run", scale, "--shape", "n=4,alpha=2.5")
    library = tmp_path / "dyn.so"
    ok("compile", dyn, "-o", library)
    _error(["run", library, "--shape", "k=3"], "--shape k=3: main() has no symbolic dimension 'k' (it has: n)")
    ok("run", library, "--shape", "n=3")


def test_run_errors_in_the_program_are_located(tmp_path):
    bad = tmp_path / "bad.tvms"
    bad.write_text(BROKEN)
    _error(["run", bad], "undefined name 'lv9'", f"--> {bad}:3:20", "^^^")
    proc = _error(["run", SAMPLES / "mlp.tvms", "--pipeline", "none"], "R.permute_dims is not lowered yet",
                  f"--> {SAMPLES / 'mlp.tvms'}:13:28", "^^^", "the default, --pipeline zero, legalizes")
    assert "13 |             permute_dims = R.permute_dims(" in proc.err
    _error(["run", SAMPLES / "mixture.tvms"], "'env.relu' is an extern function", "is registered",
           f"--> {SAMPLES / 'mixture.tvms'}:30:19", "^^^", "--extern FILE.py")


UNRELATED_DIMS = """from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 64), "float32"), s: R.Tensor(("m", 64), "float32")):
        with R.dataflow():
            z = R.multiply(x, s)
            R.output(z)
        return z
"""


def test_an_op_left_unlowered_by_the_pipeline_says_why(tmp_path):
    """(n, 64) * (m, 64) broadcasts to a shape that depends on n and m, so LegalizeOps leaves the
    multiply as it is. The default pipeline ran: the error says why the op is still there, not
    'run LegalizeOps' and a note about --pipeline none."""
    path = tmp_path / "dims.tvms"
    path.write_text(UNRELATED_DIMS)
    proc = _error(["run", path, "--shape", "n=2", "--shape", "m=3"], "R.multiply cannot be lowered to a kernel: "
                  "the shape of its result is not known when compiling (its tensor arguments are "
                  'R.Tensor((n, 64), dtype="float32"), R.Tensor((m, 64), dtype="float32"))', "R.match_cast",
                  f"--> {path}:9:17", "^^^")
    assert "run LegalizeOps" not in proc.err and "--pipeline" not in proc.err


@pytest.mark.parametrize("sample", ["extern_call.tvms", "mixture.tvms"])
def test_run_with_extern_functions_from_a_python_file(sample, tmp_path):
    """``--extern samples/env_funcs.py`` registers env.linear / env.relu (NumPy) before the run:
    the seed's modules that call libraries run from the command line."""
    rng = np.random.default_rng(3)
    names = ["x", "w0", "b0", "w1", "b1"]  # both modules' main takes these
    shapes = [(1, 784), (128, 784), (128,), (10, 128), (10,)]
    arrays = {n: rng.standard_normal(s).astype("float32") for n, s in zip(names, shapes)}
    np.savez(tmp_path / "in.npz", **arrays)
    ok("run", SAMPLES / sample, "--extern", SAMPLES / "env_funcs.py", "--inputs", tmp_path / "in.npz",
       "--out", tmp_path / "out.npz")
    x, w0, b0, w1, b1 = (arrays[n] for n in names)
    expected = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    np.testing.assert_allclose(load_npz(tmp_path / "out.npz")["output"], expected, rtol=1e-4, atol=1e-4)


def test_extern_file_errors_are_one_located_line(tmp_path):
    sample = SAMPLES / "extern_call.tvms"
    _error(["run", sample, "--extern", tmp_path / "missing.py"], "--extern", "no such file")
    raising = tmp_path / "raising.py"
    raising.write_text("import tvmscript as tvms\n\nregister = tvms.register_func\nregister('env.linear', undefined_fn)\n")
    _error(["run", sample, "--extern", raising], f"--extern {raising}:4: NameError: name 'undefined_fn' is not defined")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    _error(["run", sample, "--extern", broken], f"--extern {broken}:1:", "SyntaxError")


def test_run_out_errors(mlp, tmp_path):
    _error(["run", SAMPLES / "e2e_mlp.tvms", "--out", tmp_path / "nowhere" / "r.npz"], "no such folder")
    _error(["run", SAMPLES / "e2e_mlp.tvms", "--out", tmp_path], "is a directory")


def _on_terminal(args: list) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc, text = run_on_terminal([TVMS, *args], env)
    assert proc.returncode == 0, proc.stderr
    return text


def test_run_rich_table_on_a_terminal(dyn):
    text = _on_terminal(["run", dyn, "--shape", "n=3"])
    assert "\x1b[" in text and "output_0" in text and "┃" in text and "compile:" in text
    plain = _on_terminal(["run", dyn, "--shape", "n=3", "--no-color"])
    assert "\x1b[" not in plain and plain.splitlines()[0].split() == ["output", "shape", "dtype", "values"]


# ----------------------------------------------------------------------------- compile


def test_compile_emit_llvm():
    proc = ok("compile", SAMPLES / "e2e_mlp.tvms", "--emit", "llvm")
    assert "define " in proc.out
    for kernel in ("relu0", "linear0", "linear1"):
        assert f"{kernel}(" in proc.out
    proc = ok("compile", SAMPLES / "e2e_mlp.tvms", "--func", "relu0")
    assert "relu0(" in proc.out and "linear0(" not in proc.out


def test_compile_emit_asm_to_a_file(tmp_path):
    out = tmp_path / "mlp.s"
    proc = ok("compile", SAMPLES / "e2e_mlp.tvms", "--emit", "asm", "-o", out)
    assert proc.out == "" and f"wrote {out}" in proc.err
    text = out.read_text()
    assert ".globl" in text and "relu0:" in text and "ret" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.s"]


def test_compile_emit_python():
    proc = ok("compile", SAMPLES / "e2e_mlp.tvms", "--emit", "python")
    # The default pipeline fused linear0 and relu0 (their public PrimFuncs stay in the module).
    assert proc.out.startswith("def _fn0_main(*args):") and "_fused_linear0_relu0(" in proc.out


def test_compile_errors(tmp_path):
    _error(["compile", SAMPLES / "mlp.tvms", "--pipeline", "none"], "R.permute_dims is not lowered yet",
           f"{SAMPLES / 'mlp.tvms'}:13:28")
    _error(["compile", SAMPLES / "te_matmul.tvms", "--emit", "python"], "has no Relax function")
    _error(["compile", SAMPLES / "e2e_mlp.tvms", "-o", tmp_path / "no" / "x.ll"], "cannot write")


def test_target_options_are_checked(dyn, tmp_path):
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_name()
    _error(["run", dyn, "--shape", "n=2", "--target", "llvm -mcpu=bogus"],
           "--target: -mcpu=bogus is not a CPU LLVM knows", f"this machine's is {host}")
    _error(["compile", dyn, "--target", "llvm -mattr=+bogus"], "'bogus' is not a feature LLVM knows")
    _error(["run", dyn, "--shape", "n=2", "--target", "llvm -foo=1"], "target kind 'llvm' has no attribute 'foo'")
    _error(["run", dyn, "--shape", "n=2", "--target", "llvm -num-cores=2"], "tvms does not act on -num-cores")
    _error(["show", dyn, "--target", "llvm -mcpu=bogus"], "-mcpu=bogus is not a CPU LLVM knows")
    ok("run", dyn, "--shape", "n=2", "--target", f"llvm -mcpu={host} -opt-level=1")
    library = tmp_path / "dyn.so"
    ok("compile", dyn, "-o", library)
    _error(["run", library, "--target", "llvm -opt-level=1"], "is compiled (for llvm): --target applies to a .tvms file")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 CPU names")
def test_target_for_another_cpu_compiles_but_does_not_run_here(dyn, tmp_path):
    asm = ok("compile", dyn, "--target", "llvm -mcpu=x86-64", "--emit", "asm").out
    assert ".globl" in asm and not re.search(r"%[yz]mm", asm)  # SSE2 code, whatever this CPU has
    _error(["run", dyn, "--shape", "n=2", "--target", "llvm -mcpu=x86-64"],
           "tvms run runs the kernels on this machine, but the code is for -mcpu=x86-64",
           'tvms compile FILE --target "llvm -mcpu=x86-64" -o model.so')
    _error(["run", dyn, "--shape", "n=2", "--target", "llvm -mcpu=i686"], "LLVM cannot generate")


# ----------------------------------------------------------------------------- pipelines and --bind


@pytest.fixture(scope="module")
def hl_mlp(tmp_path_factory) -> dict:
    """Weights and an input for samples/mlp.tvms (the seed's high-level MLP), and NumPy's answer."""
    d = tmp_path_factory.mktemp("hl_mlp")
    rng = np.random.default_rng(11)
    w = {"fc1_weight": rng.standard_normal((256, 784)).astype("float32"),
         "fc1_bias": rng.standard_normal(256).astype("float32"),
         "fc2_weight": rng.standard_normal((10, 256)).astype("float32"),
         "fc2_bias": rng.standard_normal(10).astype("float32")}
    x = rng.standard_normal((1, 784)).astype("float32")
    np.savez(d / "weights.npz", **w)
    np.savez(d / "x.npz", x=x)
    np.savez(d / "bad.npz", fc1_bias=np.zeros(3, "float32"))
    np.savez(d / "typo.npz", fc1_bais=w["fc1_bias"])
    ref = np.maximum(x @ w["fc1_weight"].T + w["fc1_bias"], 0) @ w["fc2_weight"].T + w["fc2_bias"]
    return {"dir": d, "ref": ref}


def test_run_high_level_mlp_applies_the_zero_pipeline(hl_mlp):
    d = hl_mlp["dir"]
    proc = ok("run", SAMPLES / "mlp.tvms", "--inputs", d / "x.npz", "--params", d / "weights.npz", "--out", d / "o.npz")
    assert proc.out.startswith("output")
    np.testing.assert_allclose(load_npz(d / "o.npz")["output"], hl_mlp["ref"], rtol=1e-4, atol=1e-3)
    ok("run", SAMPLES / "mlp.tvms", "--pipeline", "legalize", "--inputs", d / "x.npz", "--params", d / "weights.npz",
       "--out", d / "l.npz")
    np.testing.assert_allclose(load_npz(d / "l.npz")["output"], hl_mlp["ref"], rtol=1e-4, atol=1e-3)


def test_run_with_bound_params(hl_mlp):
    d = hl_mlp["dir"]
    proc = ok("run", SAMPLES / "mlp.tvms", "--params", d / "weights.npz", "--bind", "--seed", "3", "--out", d / "b.npz")
    assert "random inputs for x (seed 3)" in proc.err  # only x is left to make up
    ok("run", SAMPLES / "mlp.tvms", "--params", d / "weights.npz", "--bind", "--inputs", d / "x.npz",
       "--out", d / "b.npz")
    np.testing.assert_allclose(load_npz(d / "b.npz")["output"], hl_mlp["ref"], rtol=1e-4, atol=1e-3)


def test_bind_folds_batch_norm_into_the_convolution(tmp_path):
    """--bind means inference: the batch norm folds into the conv2d's weights and a bias add
    fused into its kernel (no per-element normalization left)."""
    rng = np.random.default_rng(5)
    (tmp_path / "cbn.tvms").write_text(conv_bn_program(channels=4, size=8))
    np.savez(tmp_path / "w.npz", **conv_bn_weights(rng, channels=4))
    np.savez(tmp_path / "x.npz", x=rng.standard_normal((1, 4, 8, 8)).astype("float32"))
    shown = ok("show", tmp_path / "cbn.tvms", "--pipeline", "zero", "--params", tmp_path / "w.npz", "--bind").out
    assert "fused_conv2d_add" in shown and "subtract" not in shown and "batch_norm" not in shown.replace("bn:", "")
    ok("run", tmp_path / "cbn.tvms", "--params", tmp_path / "w.npz", "--bind", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "bound.npz")
    ok("run", tmp_path / "cbn.tvms", "--params", tmp_path / "w.npz", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "args.npz")  # batch_norm as one kernel: the same numbers
    np.testing.assert_allclose(load_npz(tmp_path / "bound.npz")["output"], load_npz(tmp_path / "args.npz")["output"],
                               rtol=1e-5, atol=1e-5)


def test_bind_errors(hl_mlp):
    d = hl_mlp["dir"]
    mlp_file = SAMPLES / "mlp.tvms"
    _error(["run", mlp_file, "--bind"], "--bind needs the arrays to bind")
    _error(["run", mlp_file, "--params", d / "typo.npz", "--bind"], "no parameter named 'fc1_bais'", "fc1_bias")
    _error(["run", mlp_file, "--params", d / "bad.npz", "--bind"], "parameter 'fc1_bias' has shape (256), the array (3,)")
    _error(["compile", mlp_file, "--params", d / "weights.npz"], "--params is used with --bind")
    _error(["run", SAMPLES / "te_matmul.tvms", "--params", d / "weights.npz", "--bind"],
           "--bind binds parameters of a Relax function")


def test_compile_applies_the_pipeline(hl_mlp):
    py = ok("compile", SAMPLES / "mlp.tvms", "--emit", "python").out
    assert "fused_matmul_add_relu" in py and "transpose" in py
    bound = ok("compile", SAMPLES / "mlp.tvms", "--emit", "python", "--params", hl_mlp["dir"] / "weights.npz", "--bind").out
    assert "fused_matmul_add_relu" in bound and "transpose" not in bound  # folded into constants
    ll = ok("compile", SAMPLES / "mlp.tvms", "--pipeline", "legalize").out
    kernels = re.findall(r"^define \S+ @tvms_(\w+)\(", ll, re.M)
    # Legalized, not fused; the weights' transposes are read in place by the matmuls.
    assert {"add", "relu", "matmul_transposed_read"} <= set(kernels), kernels
    assert not any(k.startswith("fused_") or k.startswith("transpose") for k in kernels), kernels


GOLDEN = ROOT / "tests" / "golden"


def test_show_pipelines():
    src = GOLDEN / "seed000" / "torch_module.tvms"
    assert ok("show", src).out == src.read_text()
    assert ok("show", src, "--pipeline", "none").out == src.read_text()
    legal = ok("show", src, "--pipeline", "legalize").out
    assert legal == "# from tvm.script import ir as I\n" + (GOLDEN / "seed000" / "legalized.tvms").read_text()
    assert ok("show", src, "--pipeline", "zero").out == (GOLDEN / "seed000" / "zero_pipeline.tvms").read_text()
    main_only = ok("show", src, "--pipeline", "zero", "--func", "main").out
    assert main_only.startswith("# from tvm.script import relax as R") and "fused_matmul_add_relu" in main_only
    proc = tvms("show", src, "--pipeline", "fuse")
    assert proc.returncode == 2 and "invalid choice: 'fuse'" in proc.err


def test_show_target_cuda_applies_the_default_gpu_schedules(tmp_path):
    """`tvms show FILE --pipeline zero --target cuda`: DLight's default schedules, printed; the
    result reads back, every kernel fits an H100 and computes what the CPU pipeline did."""
    import tvmscript as tvms_api
    from support.schedule_check import assert_same_result

    sample = ROOT / "samples" / "mlp.tvms"
    gpu_text = ok("show", sample, "--pipeline", "zero", "--target", "cuda").out
    assert 'thread="blockIdx.x"' in gpu_text and 'thread="threadIdx.x"' in gpu_text
    assert ok("show", sample, "--pipeline", "zero", "--target", "cuda -arch=sm_80").out == gpu_text
    gpu = tvms_api.parse(gpu_text)
    cpu = tvms_api.parse(ok("show", sample, "--pipeline", "zero").out)
    for gv, func in gpu.functions.items():
        if isinstance(func, tvms_api.tir.PrimFunc):
            assert tvms_api.tir.analysis.verify_gpu_code(func, "cuda"), gv.name_hint
            assert_same_result(cpu[gv.name_hint], func, name=gv.name_hint)
    # a CPU target schedules nothing; a bad one is a one-line error
    assert ok("show", sample, "--pipeline", "zero", "--target", "llvm").out == ok("show", sample, "--pipeline", "zero").out
    proc = tvms("show", sample, "--target", "cudda")
    assert proc.returncode == 1 and "--target" in proc.err and "cudda" in proc.err


def test_run_profile_prints_each_kernels_share():
    proc = ok("run", SAMPLES / "mlp.tvms", "--profile", "--repeat", "3")
    table = proc.out.split("profile of 'main' on cpu:0", 1)[1]
    assert "fused_matmul_add_relu" in table and "total: main" in table and "Percent" in table
    note = ok("run", SAMPLES / "te_matmul.tvms", "--profile")
    assert "--profile times the kernels of a Relax function" in note.err
