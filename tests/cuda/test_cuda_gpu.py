"""The CUDA target on a GPU: the samples, the seed's GPU section, dynamic shapes, float16 and
the runtime's memory, each against the CPU backend.

Each test runs twice, through the `gpu` fixture (tests/cuda/conftest.py):

* ``emulated``, everywhere: pycuda's driver is `gpu_drivers.EmulatedDriver`, so the CUDA C
  that NVRTC compiled runs in the CUDA emulator, launched by the real runtime and VM;
* ``real`` (``@pytest.mark.cuda``, so ``pytest -m cuda`` selects it): on GPU 0 through pycuda,
  skipped with the reason on a machine without a GPU or without pycuda.

A few tests need the real thing (PyTorch reading the device memory, a `tvms` process of its
own) and run only there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tvmscript as tvms

from support.gpu_drivers import EmulatedDriver
from test_cuda_codegen import ELEMENTWISE_DYN, FP16, MATMUL, ROW_SUM, VECTORIZED, BIG_TILE, wmma_source



SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _on_tensor_cores(source: str) -> bool:
    """wmma (before sm_80, and where mma.sync's tiles do not divide the product) or mma.sync."""
    return "nvcuda::wmma::mma_sync(" in source or "tvms_mma_m16n8k16" in source


def cpu_and_gpu(mod, args):
    """``main`` of ``mod`` (legalized here when needed) on the CPU and on GPU 0: two NumPy results."""
    mod = tvms.relax.transform.LegalizeOps()(mod)  # nothing to do for a lowered module
    cpu = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["main"](*args)
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
    gpu = vm["main"](*[tvms.nd.array(a, dev) for a in args])
    return _numpy(cpu), _numpy(gpu)


def _numpy(v):
    if isinstance(v, (list, tuple)):
        return [_numpy(x) for x in v]
    return v.numpy()


def run_prim_both(src: str, name: str, arrays: list):
    """A prim_func destination-passing style on the CPU and on the GPU: the written arrays."""
    mod = tvms.parse(src)
    cpu = [a.copy() for a in arrays]
    tvms.compile(mod, target="llvm")[name](*cpu)
    dev = tvms.cuda(0)
    gpu = [tvms.nd.array(a, dev) for a in arrays]
    tvms.compile(mod, target="cuda")[name](*gpu)
    return cpu, [g.numpy() for g in gpu]


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.tvms"))
EXTERN_SAMPLES = {"extern_call.tvms", "mixture.tvms"}    # they call samples/env_funcs.py's functions


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_every_sample_on_the_gpu_matches_the_cpu(name, gpu, tmp_path, capsys):
    """``tvms run SAMPLE --target cuda`` (in this process, so on the driver in use) writes what
    ``tvms run SAMPLE`` writes: the default GPU schedules, the CUDA C, the launches, the copies
    both ways and the extern functions given GPU tensors."""
    from support.cli import UNPARSEABLE, WRONG_SHAPES
    from tvmscript import cli

    stem = name[:-len(".tvms")]
    if stem in UNPARSEABLE or stem in WRONG_SHAPES:
        pytest.skip(f"{name} is not a program tvms runs (tests/cli/test_cli.py checks its diagnostic)")
    extern = ["--extern", str(SAMPLES / "env_funcs.py")] if name in EXTERN_SAMPLES else []
    path = str(SAMPLES / name)
    assert cli.main(["run", path, "--out", str(tmp_path / "cpu.npz"), *extern]) == 0, capsys.readouterr().err
    assert cli.main(["run", path, "--target", "cuda", "--out", str(tmp_path / "gpu.npz"), *extern]) == 0, \
        capsys.readouterr().err
    cpu, gpu_out = np.load(tmp_path / "cpu.npz"), np.load(tmp_path / "gpu.npz")
    assert sorted(gpu_out.files) == sorted(cpu.files)
    for key in cpu.files:
        np.testing.assert_allclose(gpu_out[key], cpu[key], rtol=1e-4, atol=1e-4, err_msg=key)


def test_seed_000_gpu_section(gpu):
    """Seed 000's "deploy to GPU": DLight schedules, then the same results as on the CPU."""
    from tvmscript import dlight as dl

    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    with tvms.target.Target("cuda"):
        gpu_mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.Fallback())(mod)
    rng = np.random.default_rng(1)
    raw_data = rng.random((1, 784), dtype=np.float32)
    params = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32")
              for p in mod["main"].params[1:]]
    cpu_out = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())["main"](raw_data, *params).numpy()
    exec_ = tvms.compile(gpu_mod, target="cuda")
    dev = tvms.device("cuda", 0)
    vm = tvms.relax.VirtualMachine(exec_, dev)
    data = tvms.runtime.tensor(raw_data, dev)
    gpu_params = [tvms.runtime.tensor(p, dev) for p in params]
    gpu_out = vm["main"](data, *gpu_params).numpy()
    assert np.allclose(cpu_out, gpu_out, atol=1e-3)


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_dynamic_shapes_at_two_sizes(n, gpu):
    rng = np.random.default_rng(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    cpu, gpu = run_prim_both(ELEMENTWISE_DYN, "add", [a, b, np.zeros(n, np.float32)])
    np.testing.assert_array_equal(gpu[2], cpu[2])


@pytest.mark.parametrize("src, name, shapes, dtype", [
    (MATMUL, "mm", [(512, 512), (512, 512), (512, 512)], "float32"),
    (ROW_SUM, "row_sum", [(128, 4096), (128,)], "float32"),
    (FP16, "gelu_ish", [(4096,), (4096,)], "float16"),
    (VECTORIZED, "scale", [(4096,), (4096,)], "float32"),
    (BIG_TILE, "copy", [(64, 16384), (64, 16384)], "float32"),
], ids=["matmul", "row_sum", "fp16", "vectorized", "big_tile"])
def test_representative_kernels_match_the_cpu(src, name, shapes, dtype, gpu):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    cpu, gpu = run_prim_both(src, name, arrays)
    tol = 2e-2 if dtype == "float16" else 1e-4
    np.testing.assert_allclose(gpu[-1].astype("float32"), cpu[-1].astype("float32"), rtol=tol, atol=tol)


@pytest.mark.parametrize("b_layout", ["row_major", "col_major"])
@pytest.mark.parametrize("acc", ["float32", "float16"])
def test_tensor_core_matmul(gpu, b_layout, acc):
    """wmma fragments and calls (two warps per block, A staged in shared memory) against
    NumPy: B as (K, N) row-major or as (N, K) read column-major."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((64, 64)).astype("float16") for _ in range(2))
    dev = tvms.cuda(0)
    out = tvms.nd.array(np.zeros((64, 64), acc), dev)
    tvms.compile(tvms.parse(wmma_source(b_layout, acc)), target="cuda")["wmma_mm"](
        tvms.nd.array(a, dev), tvms.nd.array(b, dev), out)
    ref = a.astype("float32") @ (b.astype("float32") if b_layout == "row_major" else b.astype("float32").T)
    tol = 1e-5 if acc == "float32" else 2e-2     # products exact in float32; a half accumulator rounds
    np.testing.assert_allclose(out.numpy().astype("float32"), ref, rtol=tol, atol=tol * 8)


def _fp16_matmul_src(m: int, n: int, k: int, a_t: bool, b_t: bool) -> str:
    a_shape, a_idx = ((k, m), "A[vk, vi]") if a_t else ((m, k), "A[vi, vk]")
    b_shape, b_idx = ((n, k), "B[vj, vk]") if b_t else ((k, n), "B[vk, vj]")
    return f"""
@I.ir_module
class Module:
    @T.prim_func
    def mm(A: T.Buffer({a_shape}, "float16"), B: T.Buffer({b_shape}, "float16"), C: T.Buffer(({m}, {n}), "float32")):
        T.func_attr({{"tir.noalias": True}})
        for i, j, k in T.grid({m}, {n}, {k}):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", {a_idx}) * T.Cast("float32", {b_idx})
"""


@pytest.mark.parametrize("a_t, b_t", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("m, n, k", [(256, 128, 64), (64, 256, 96), (64, 64, 32), (77, 256, 64), (77, 200, 36)],
                         ids=["tile128x64", "tile64x128", "tile64x64", "padded_rows", "padded"])
def test_tensor_core_tilings_and_operand_layouts(gpu, m, n, k, a_t, b_t):
    """`MatmulTensorCore` for each of its block tilings and each layout of A and B: the shared
    tiles keep the operand's layout (a transposed one is loaded as a column- or row-major
    fragment), their rows padded, filled 16 bytes at a time (zeros past the last row or
    column; element by element for an operand whose rows are not whole 16-byte chunks);
    exact against NumPy (products of halves are exact in float32 and these sums are short)."""
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (k, m) if a_t else (m, k)).astype("float16")
    b = rng.integers(-4, 5, (n, k) if b_t else (k, n)).astype("float16")
    ex = tvms.compile(tvms.parse(_fp16_matmul_src(m, n, k, a_t, b_t)), target="cuda")
    assert _on_tensor_cores(ex.cuda_code.source)
    # 16 bytes at a time, the rows past the end as zeros; an operand whose contiguous extent
    # is not whole chunks of 8 halves pads inside those 16 bytes: element by element.
    # (cp.async on sm_80 and later, zero-filling past the end of a padded product).
    src = ex.cuda_code.source
    contiguous = (m if a_t else k, k if b_t else n)
    assert ("*(uint4*)" in src or "tvms_cp_async16" in src) == any(e % 8 == 0 for e in contiguous)
    dev = tvms.cuda(0)
    out = tvms.nd.array(np.zeros((m, n), "float32"), dev)
    ex["mm"](tvms.nd.array(a, dev), tvms.nd.array(b, dev), out)
    a32, b32 = a.astype("float32"), b.astype("float32")
    ref = (a32.T if a_t else a32) @ (b32.T if b_t else b32)
    np.testing.assert_array_equal(out.numpy(), ref)


SYMBOLIC_ROWS_FP16 = """
@I.ir_module
class Module:
    @T.prim_func
    def mm(a: T.handle, B: T.Buffer((T.int64(256), T.int64(64)), "float16"), c: T.handle):
        T.func_attr({"tir.noalias": True})
        m = T.int64()
        A = T.match_buffer(a, (m, T.int64(64)), "float16")
        C = T.match_buffer(c, (m, T.int64(256)), "float32")
        for i, j, k in T.grid(m, T.int64(256), T.int64(64)):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])
"""


def test_tensor_cores_with_a_symbolic_row_count(gpu):
    """``x @ w.T`` with ``m`` rows known only at the call (a sequence length): the rows are
    padded to whole tiles at run time and the grid follows ``m``; two sizes from one build."""
    ex = tvms.compile(tvms.parse(SYMBOLIC_ROWS_FP16), target="cuda")
    assert _on_tensor_cores(ex.cuda_code.source)
    dev = tvms.cuda(0)
    for m in (77, 130):
        rng = np.random.default_rng(m)
        a = rng.integers(-4, 5, (m, 64)).astype("float16")
        b = rng.integers(-4, 5, (256, 64)).astype("float16")
        out = tvms.nd.array(np.zeros((m, 256), "float32"), dev)
        ex["mm"](tvms.nd.array(a, dev), tvms.nd.array(b, dev), out)
        np.testing.assert_array_equal(out.numpy(), a.astype("float32") @ b.astype("float32").T)


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
@pytest.mark.parametrize("x_shape, w_shape", [((64, 96), (96, 128)), ((2, 64, 32), (2, 32, 64)),
                                              ((77, 40), (40, 200)), ((3, 50, 24), (24, 72))],
                         ids=["matmul", "batch_matmul", "padded", "padded_batch_in_rows"])
def test_fp16_matmuls_with_an_epilogue_on_tensor_cores(gpu, out_dtype, x_shape, w_shape):
    """relu(x @ w + b) in float16 through the VM: the default schedule takes the tensor cores
    for the fused matmul, its epilogue written from the shared tile of C. Extents that are not
    whole tiles (77 rows, 200 columns, K of 40; x's batch fused into 150 rows) are padded
    with zeros, the padding dropped where C is written."""
    from tvmscript import relax

    rng = np.random.default_rng(6)
    x = (rng.standard_normal(x_shape) / 4).astype("float16")
    w = (rng.standard_normal(w_shape) / 4).astype("float16")
    b = rng.standard_normal(w_shape[-1]).astype(out_dtype)
    bb = relax.BlockBuilder()
    params = [relax.Var(n, relax.TensorStructInfo(list(a.shape), str(a.dtype))) for n, a in zip("xwb", (x, w, b))]
    with bb.function("main", params):
        with bb.dataflow():
            mm = bb.emit(relax.op.matmul(params[0], params[1], out_dtype=out_dtype))
            out = bb.emit_output(relax.op.nn.relu(relax.op.add(mm, params[2])))
        bb.emit_func_output(out)
    ex = tvms.compile(relax.get_pipeline("zero")(bb.get()), target="cuda")
    assert _on_tensor_cores(ex.cuda_code.source)
    dev = tvms.cuda(0)
    got = tvms.relax.VirtualMachine(ex, dev)["main"](*[tvms.nd.array(a, dev) for a in (x, w, b)]).numpy()
    ref = np.maximum(x.astype("float32") @ w.astype("float32") + b.astype("float32"), 0)
    np.testing.assert_allclose(got.astype("float32"), ref, rtol=1e-2, atol=1e-2)


def test_the_benchmarks_tensor_core_matmul(gpu):
    """benchmarks/cuda.py's hand-written wmma matmul (8 warps per block, shared staging,
    fragments, a half accumulator) against NumPy, at a size of several blocks."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "cuda.py"
    spec = importlib.util.spec_from_file_location("benchmarks_cuda", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    n = 256 if isinstance(gpu, EmulatedDriver) else 2048
    rng = np.random.default_rng(5)
    a, b = ((rng.standard_normal((n, n)) / 8).astype("float16") for _ in range(2))
    dev = tvms.cuda(0)
    out = tvms.nd.array(np.zeros((n, n), "float16"), dev)
    tvms.compile(tvms.parse(bench.tensor_core_matmul_src(n)), target="cuda")["mm"](
        tvms.nd.array(a, dev), tvms.nd.array(b, dev), out)
    ref = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(out.numpy().astype("float32"), ref, rtol=2e-2, atol=2e-2)


def test_softmax_and_layer_norm_through_the_vm(gpu):
    from tvmscript import relax

    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 1000)).astype("float32")
    for make in (lambda v: relax.op.nn.softmax(v, axis=-1), lambda v: relax.op.sum(v, axis=[1])):
        bb = relax.BlockBuilder()
        v = relax.Var("x", relax.TensorStructInfo([64, 1000], "float32"))
        with bb.function("main", [v]):
            with bb.dataflow():
                out = bb.emit_output(make(v))
            bb.emit_func_output(out)
        cpu, gpu = cpu_and_gpu(bb.get(), [x])
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4)


def test_wrong_device_argument_names_the_parameter(gpu):
    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), tvms.cuda(0))
    args = [np.zeros([int(d.value) for d in p.struct_info.shape], "float32") for p in mod["main"].params]
    with pytest.raises((TypeError, ValueError), match="'x'"):
        vm["main"](*args)


def test_memory_is_released_after_a_call(gpu):
    import tvmscript.runtime.cuda as cuda_rt  # the module (tvms.runtime.cuda is the device function)

    mod = tvms.relax.transform.LegalizeOps()(tvms.load(str(SAMPLES / "mlp.tvms")))
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
    args = [tvms.nd.array(np.ones([int(d.value) for d in p.struct_info.shape], "float32"), dev)
            for p in mod["main"].params]
    vm["main"](*args)  # warm: the arena and the pool hold what one call needs
    before = cuda_rt.memory_stats(dev)["in_use_bytes"]
    out = vm["main"](*args)
    dev.sync()
    after = cuda_rt.memory_stats(dev)["in_use_bytes"]
    assert after - before <= max(out.nbytes, 512), (before, after)
    del out
    assert cuda_rt.memory_stats(dev)["in_use_bytes"] <= before


@pytest.mark.cuda
def test_dlpack_exchange_with_torch():
    torch = pytest.importorskip("torch")
    dev = tvms.cuda(0)
    x = tvms.nd.array(np.arange(12, dtype=np.float32).reshape(3, 4), dev)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.shape == (3, 4)
    t.mul_(2)  # no copy: the tvms tensor sees it
    np.testing.assert_array_equal(x.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    back = tvms.runtime.from_dlpack(torch.ones(5, device="cuda"))
    assert back.device == dev and back.numpy().tolist() == [1.0] * 5


@pytest.mark.cuda
def test_cli_run_on_the_gpu(tmp_path):
    from support.cli import tvms as run_tvms

    mlp = str(SAMPLES / "mlp.tvms")
    gpu = run_tvms("run", mlp, "--target", "cuda", "--repeat", "3", "--out", tmp_path / "gpu.npz")
    assert gpu.returncode == 0, gpu.err
    assert "could not be cleaned up" not in gpu.err   # pycuda's warnings at exit
    cpu = run_tvms("run", mlp, "--out", tmp_path / "cpu.npz")
    assert cpu.returncode == 0, cpu.err
    np.testing.assert_allclose(np.load(tmp_path / "gpu.npz")["output"], np.load(tmp_path / "cpu.npz")["output"],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_every_op_on_the_gpu():
    """The per-op tests (op_check.check_op) with ``--op-gpu real``: every op's legalized
    module, after the default GPU schedules, through the VM on GPU 0 against its NumPy
    reference. Without the flag they run on the emulated GPU."""
    import subprocess
    import sys

    import importlib.util

    tests = Path(__file__).resolve().parents[1]
    files = sorted(str(p) for p in (tests / "compiler").glob("test_op_*.py"))
    files += [str(tests / "schedules" / "test_dlight.py"), str(tests / "compiler" / "test_rewrite_reshape.py")]
    # About 1100 tests: 4 workers where pytest-xdist is installed (serially, over 200 s on an H200).
    workers = ["-n", "4"] if importlib.util.find_spec("xdist") else []
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", *workers, "--op-gpu", "real", *files],
                          capture_output=True, text=True, cwd=tests.parent)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def gpt_module():
    """The GPT of tests/support/torch_models.py (two blocks, one with a tril mask, one through
    scaled_dot_product_attention), exported with a symbolic sequence length, weights
    detached: (model, the zero pipeline's module, weights)."""
    torch = pytest.importorskip("torch")
    from torch.export import Dim, export
    from support.torch_models import GPT
    from tvmscript.relax.frontend import detach_params
    from tvmscript.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = GPT().eval()
    with torch.no_grad():
        ep = export(model, (torch.randint(0, 50, (1, 8)),), dynamic_shapes={"idx": {1: Dim("seq", min=2, max=15)}})
    mod, params = detach_params(from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True))
    return model, tvms.relax.get_pipeline("zero")(mod), [p.numpy() for p in params["main"]]


def test_a_gpt_with_a_symbolic_length_on_the_gpu(gpt_module, gpu):
    """Embeddings, layer norms, attention, GELU and the head, fused, GPU-scheduled and run at
    two sequence lengths through one executable, against PyTorch."""
    import torch

    model, mod, weights = gpt_module
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="cuda"), dev)
    on_gpu = [tvms.nd.array(w, dev) for w in weights]
    for length in (5, 12):
        idx = torch.randint(0, 50, (1, length), generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            ref = model(idx).numpy()
        out = vm["main"](tvms.nd.array(idx.numpy(), dev), *on_gpu).numpy()
        assert out.shape == ref.shape
        assert np.abs(out - ref).max() <= 1e-4 * np.abs(ref).max()
    too_long = tvms.nd.array(np.zeros((1, 16), "int64"), dev)  # Dim("seq", max=15)
    with pytest.raises(ValueError, match=r"size 'seq' is 16 .*between 2 and 15"):
        vm["main"](too_long, *on_gpu)


def _models():
    """(name, model, inputs) of the importer tests' models, small inputs."""
    import torch
    from support.torch_models import ConvZoo, MaskedAttention, ShapeZoo, import_torchvision

    torch.manual_seed(0)
    yield "conv_zoo", ConvZoo(), [torch.randn(2, 4, 16)]
    yield "shape_zoo", ShapeZoo(), [torch.randn(2, 4), torch.randn(2, 8)]
    yield "masked_attention", MaskedAttention(), [torch.randn(2, 4, 6, 8) for _ in range(3)] + [torch.randn(6, 6)]
    yield "encoder_layer", torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), \
        [torch.randn(2, 10, 32)]
    tv = import_torchvision()
    yield "resnet18", tv.models.resnet18(num_classes=10), [torch.randn(1, 3, 32, 32)]
    yield "mobilenet_v2", tv.models.mobilenet_v2(num_classes=10), [torch.randn(1, 3, 32, 32)]


MODEL_NAMES = ["conv_zoo", "shape_zoo", "masked_attention", "encoder_layer", "resnet18", "mobilenet_v2"]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_imported_models_on_the_gpu(name, gpu):
    """The PyTorch importer tests' models (convolutions, norms, attention, depthwise
    convolutions...) exported, GPU-scheduled and run through the VM, against PyTorch."""
    torch = pytest.importorskip("torch")
    from torch.export import export
    from tvmscript.relax.frontend import detach_params
    from tvmscript.relax.frontend.torch import from_exported_program

    try:
        model, inputs = next((m, i) for n, m, i in _models() if n == name)
    except ImportError as err:
        pytest.skip(str(err))
    model.eval()
    with torch.no_grad():
        ep = export(model, tuple(inputs))
        refs = model(*inputs)
    mod, params = detach_params(from_exported_program(ep, keep_params_as_input=True))
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.relax.get_pipeline("zero")(mod), target="cuda"), dev)
    outs = vm["main"](*[tvms.nd.array(x.numpy(), dev) for x in inputs],
                      *[tvms.nd.array(p.numpy(), dev) for p in params.get("main", [])])
    refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        out, ref = out.numpy(), ref.numpy()
        assert out.shape == ref.shape
        assert np.abs(out - ref).max() <= 1e-4 * max(np.abs(ref).max(), 1e-30), name


def _corpus():
    from support import schedule_corpus as sc

    return sc.corpus()


@pytest.mark.parametrize("case", _corpus(), ids=lambda c: c.id)
def test_the_schedule_corpus_on_the_gpu(case, gpu):
    """Every kernel of tests/support/schedule_corpus.py (legalized and fused ops, the seeds' kernels, the
    odd forms written for the CPU schedule's rules), with DLight's default GPU schedules,
    against the unscheduled kernel on the CPU: the same values, up to float rounding (GPU
    reductions add in another order)."""
    import zlib

    from support import schedule_corpus as sc

    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    inputs = sc.make_inputs(case, rng)
    out0 = sc.initial_output(case, rng)
    plain = sc.run(case, inputs, out0, schedule=False)
    dev = tvms.cuda(0)
    args = [tvms.nd.array(np.array(a, copy=True, order="C"), dev) for a in [*inputs, out0]]
    kernel = tvms.compile(tvms.ir.IRModule({"kernel": case.func}), target="cuda")["kernel"]
    kernel(*args)
    got = args[-1].numpy()
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, plain)
        return
    if 0 in case.sizes.values():
        # An empty reduction: unscheduled, T.init runs at the reduce loop's first iteration, so
        # nothing is written; the GPU schedules split the init out (as TVM's do) and write the
        # reduction's identity.
        unwritten = np.isnan(plain) & np.isnan(out0)
        np.testing.assert_array_equal(got[unwritten], 0)
        got, plain = got[~unwritten], plain[~unwritten]
    scale = float(np.nanmax(np.abs(plain))) if plain.size and not np.isnan(plain).all() else 1.0
    # float16 sums: the CPU rounds after every addition, tensor cores after each 16 (adding
    # in float32 in between): a few units in the last place of the larger partial sums.
    tol = 1e-2 if got.dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got, plain, rtol=tol, atol=tol / 10 * max(scale, 1.0), equal_nan=True)
